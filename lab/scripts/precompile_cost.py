"""usage: python3 lab/scripts/precompile_cost.py [--impl tilegym] [--checks] [--menu] [--per-kernel 10] [--jobs 2]
                                                [--gpu-name NAME --plan-only]

What a `gpu_autotune_prime.py --precompile` build costs, measured on this machine without a GPU: it plans
the prime's calls (and with --checks its battery checks) as the prime does, then compiles a sample of
the distinct jobs (`--per-kernel` of each kernel, drawn with a fixed seed; cuTile's cache off, so each
one runs tileiras) and prints, per kernel, the distinct count, the sampled seconds, and their mean times
the count: the core-seconds the whole build takes here. Divide by a host's cores for its wall time.
With $SSDCHECK_TILEGYM_TUNING and --gpu-name (e.g. "NVIDIA H100 80GB HBM3") the plan reads that GPU's
recorded searches, as the prime on such a host does; --plan-only stops after the plan's counts.

TileGym comes from the environment or, if absent, from its wheel in $SSDCHECK_PEERS_DIR.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import random
import statistics
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "lab", "scripts"))


def _tilegym_on_path() -> None:
    if importlib.util.find_spec("tilegym") is None:
        from kernels.peers.sources import unpack_wheel
        site = unpack_wheel("tilegym", tempfile.mkdtemp(prefix="tilegym-"))
        sys.path.insert(0, site)
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [site, ROOT, os.environ.get("PYTHONPATH")]))


def _timed(item) -> tuple[str, float]:
    import gpu_autotune_prime as prime
    seconds, error = prime.build_one(item)
    if error:
        raise RuntimeError(error)
    return item[1][0], seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--impl", default="tilegym")
    ap.add_argument("--checks", action="store_true")
    ap.add_argument("--menu", action="store_true")
    ap.add_argument("--per-kernel", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--gpu-name", help="plan as on this GPU model (its recorded TileGym searches)")
    ap.add_argument("--plan-only", action="store_true", help="print the plan's counts and stop")
    args = ap.parse_args(argv)
    if args.gpu_name:
        os.environ["SSDCHECK_TILEGYM_PLAN_GPU"] = args.gpu_name   # read by the spawned planning processes
    os.environ["CUDA_TILE_CACHE_DIR"] = "off"    # each sampled compile runs tileiras
    if args.impl.startswith("tilegym"):
        _tilegym_on_path()
    import gpu_autotune_prime as prime
    distinct = prime.precompile(args.impl, prime.jobs_of(args.impl, args.menu, args.checks), args.jobs, "sm_90",
                                build=False)
    if args.plan_only:
        return 0
    by: dict[str, list] = {}
    for job in distinct:
        by.setdefault(job[0], []).append(job)
    rng = random.Random(0)
    sample = [(args.impl, j, "sm_90") for js in by.values() for j in rng.sample(js, min(args.per_kernel, len(js)))]
    t = time.monotonic()
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        timed = pool.map(_timed, sample)
    out = {}
    for kernel, js in by.items():
        s = [sec for k, sec in timed if k == kernel]
        out[kernel] = {"distinct": len(js), "sampled": len(s), "median_s": round(statistics.median(s), 2),
                       "mean_s": round(statistics.mean(s), 2), "max_s": round(max(s), 1),
                       "est_core_s": round(statistics.mean(s) * len(js))}
    print(json.dumps({"impl": args.impl, "checks": args.checks, "menu": args.menu, "cores": os.cpu_count(),
                      "processes": args.jobs, "sample_wall_s": round(time.monotonic() - t, 1),
                      "est_core_s": sum(v["est_core_s"] for v in out.values()), "kernels": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
