"""Seconds of one cold tileiras compile of cutile's chunk_scan at a triage battery problem, per scan config and dtype, on this CPU.

    python lab/scripts/scan_compile_time.py                        # needs cuda-tile[tileiras], no GPU
    python lab/scripts/scan_compile_time.py --repeat 3 --set BN=64,LAT=2 --set BN=128,LAT=4
    python lab/scripts/scan_compile_time.py --problem first --dtype float32 --dtype bfloat16

--problem fast (the default) is the GPU battery's whole-chunk problem at chunk 64 (properties/triage.py:
batch 2, 3 chunks of 64, 6 heads in 2 groups, headdim 64, dstate 128, every option), whose FAST scan a
fail-fast run of a changed scan waits for at its second example; --problem first is the battery's first
problem (packed sequences, headdim 128, dstate 256: the general scan every test's first example
compiles). --dtype replaces the problem's dtype (repeatable; default: the battery's). Each --set
replaces constants of the row the dispatch table gives that problem; the scan's job
(kernels.cutile.precompile.plan) is built for sm_90 with cuTile's compile cache off, so every build
compiles. Prints one line per (dtype, config): the dtype and the table's config (what is built takes
the launcher's fallbacks: one head per block at an odd head count per group), then the seconds of
each build and their median.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # the repository
os.environ["CUDA_TILE_CACHE_DIR"] = "off"   # before cuda.tile is imported: every build compiles


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--set", action="append", default=[], metavar="NAME=INT,...",
                    help="constants replaced in the table's scan row (repeatable; default: the row as is)")
    ap.add_argument("--repeat", type=int, default=2, help="builds per config (default 2)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--problem", choices=("fast", "first"), default="fast",
                    help="fast: the chunk-64 whole-chunk problem (default); first: the battery's first problem")
    ap.add_argument("--dtype", action="append", default=[], choices=("float32", "bfloat16", "float16"),
                    help="the problem's dtype instead of the battery's (repeatable)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        raise SystemExit(f"--repeat: expected a positive count, got {args.repeat}")

    from lab.bench.ab_row import parse_set
    from kernels.cutile import dispatch, launcher, precompile
    from kernels.registry import lookup
    from properties import triage
    battery = triage.battery(lookup("cutile"), gpu=True)
    problem = battery[0] if args.problem == "first" else \
        next(p for p in battery if p.chunk_size == 64 and not p.seq_starts and not p.partial_last_chunk)
    try:   # lab.bench.ab_row's --set syntax, the kernel named here
        changes = [parse_set([f"chunk_scan:{spec}"])["chunk_scan"] for spec in args.set] or [{}]
    except ValueError as e:
        raise SystemExit(str(e)) from None
    print(f"problem: {problem}")
    key = f"chunk_scan@{problem.chunk_size}"
    for dtype in args.dtype or [problem.dtype]:
        # dt in the input dtype for 16-bit inputs, as the battery draws it (cutile takes dt_input_dtype)
        inputs = problem.replace(dtype=dtype, dt_dtype="float32" if dtype == "float32" else "input").inputs("cpu")
        seq = inputs.get("seq_idx")
        base = dispatch.choose("chunk_scan", launcher._problem(inputs["x"], inputs["B"], problem.chunk_size, seq))
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
            print(f"{dtype} {config}: " + " ".join(f"{s:.2f}" for s in seconds)
                  + f" s; median {statistics.median(seconds):.2f} s", flush=True)
        launcher._OVERRIDE.pop(key, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
