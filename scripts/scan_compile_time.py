"""Seconds of one cold tileiras compile of cutile's chunk-64 FAST scan, per scan config, on this CPU.

    python scripts/scan_compile_time.py                        # needs cuda-tile[tileiras], no GPU
    python scripts/scan_compile_time.py --repeat 3 --set BN=64,LAT=2 --set BN=128,LAT=4

The problem is the triage battery's float32 whole-chunk one on the GPU (properties/triage.py: batch 2,
3 chunks of 64, 6 heads in 2 groups, headdim 64, dstate 128, every option): the scan specialization a
fail-fast run of a changed scan waits for at its second example. Each --set replaces constants of the
row the dispatch table gives that problem; the scan's job (kernels.cutile.precompile.plan) is built for
sm_90 with cuTile's compile cache off, so every build compiles. Prints one line per config: the config,
then the seconds of each build and their median.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the repository
os.environ["CUDA_TILE_CACHE_DIR"] = "off"   # before cuda.tile is imported: every build compiles


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="NAME=INT,...",
                    help="constants replaced in the table's scan row (repeatable; default: the row as is)")
    ap.add_argument("--repeat", type=int, default=2, help="builds per config (default 2)")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit(f"--repeat: expected a positive count, got {args.repeat}")

    from bench.ab_row import parse_set
    from kernels.cutile import dispatch, launcher, precompile
    from kernels.registry import lookup
    from properties import triage
    problem = next(p for p in triage.battery(lookup("cutile"), gpu=True)
                   if p.dtype == "float32" and not p.seq_starts and not p.partial_last_chunk)
    inputs = problem.inputs("cpu")
    key = f"chunk_scan@{problem.chunk_size}"
    base = dispatch.choose("chunk_scan", launcher._problem(inputs["x"], inputs["B"], problem.chunk_size, None))
    print(f"problem: {problem}\ntable row: {base}")
    try:   # bench.ab_row's --set syntax, the kernel named here
        changes = [parse_set([f"chunk_scan:{spec}"])["chunk_scan"] for spec in args.set] or [{}]
    except ValueError as e:
        raise SystemExit(str(e)) from None
    for change in changes:
        config = base.replace(**change)
        launcher._OVERRIDE[key] = config
        jobs = [j for j in precompile.plan(**inputs) if "scan" in j[0]]
        if len(jobs) != 1:
            raise SystemExit(f"expected one scan compile for {config}, planned {[j[0] for j in jobs]}")
        seconds = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            precompile.build(jobs[0], args.arch)
            seconds.append(time.perf_counter() - t0)
        print(f"{config}: " + " ".join(f"{s:.2f}" for s in seconds) + f" s; median {statistics.median(seconds):.2f} s")
    launcher._OVERRIDE.pop(key, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
