"""One launch of each implementation's stage kernels inside a CUDA profiler range, for Nsight Compute.

    ncu --clock-control none --profile-from-start off --set full \\
        python3 -m lab.bench.ncu_stages --only b2-l32768-h32-p64-n64-g1 --stage scan   # on the GPU host
    python -m lab.bench.ncu_stages --list                                           # the plan (any machine)

lab.bench.stages times each kernel; this lets a profiler say why one is slower (memory throughput, stalls,
occupancy) without reading the warm-ups: every stage of cutile (chunk 64 unless --chunk) and of TileGym
(chunk 64, at its recorded tuning, as lab.bench.stages runs it) is called twice first (compiles, TileGym's
recorded choice), then once more between cudaProfilerStart and cudaProfilerStop, so `ncu
--profile-from-start off` profiles exactly one launch of each. The kernels and inputs are lab.bench.stages'.
"""
from __future__ import annotations

import argparse
import sys

from lab.bench.stages import TILEGYM_CHUNK, default_shapes

STAGES = ("cumsum", "state", "scan")


def plan(shapes, stages, chunk: int) -> list[tuple[str, str, int, str]]:
    """(implementation, shape id, chunk, stage) in the order they are profiled."""
    return [(impl, s.id, c, st) for s in shapes for impl, c in (("cutile", chunk), ("tilegym", TILEGYM_CHUNK))
            for st in stages]


def run(shapes, stages, chunk: int, tuning_path: str, log=print) -> None:
    import torch
    from kernels.peers import tilegym_tuning
    from lab.bench.race import make_inputs
    from lab.bench.stages import _cutile_stages, _tilegym_stages
    tuning = tilegym_tuning.install(tuning_path)
    calls = []
    for s in shapes:
        fns, _, _ = _cutile_stages(s, chunk)
        calls += [(f"cutile {s.id} cs{chunk} {st}", fns[st]) for st in stages]
        tuning.context = {"shape": s.id, "chunk": TILEGYM_CHUNK}
        fns, _ = _tilegym_stages(make_inputs(s, 0), TILEGYM_CHUNK)
        calls += [(f"tilegym {s.id} cs{TILEGYM_CHUNK} {st}", fns[st]) for st in stages]
    for _, fn in calls:              # compiles and TileGym's recorded choices, outside the profiled range
        fn()
        fn()
    torch.cuda.synchronize()
    untuned = [e for e in tuning.take_events() if e["kind"] != "recorded"]
    if untuned:
        log(f"warning: TileGym tuned in-process ({len(untuned)} searches): not its recorded choice")
    torch.cuda.cudart().cudaProfilerStart()
    for label, fn in calls:
        log(f"profiled: {label}")
        fn()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.ncu_stages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="substring of a shape id (repeatable; default: all six)")
    ap.add_argument("--stage", action="append", choices=STAGES, help="repeatable; default: all three")
    ap.add_argument("--chunk", type=int, default=64, help="cutile's chunk size (TileGym runs at 64)")
    ap.add_argument("--tilegym-tuning", default="lab/reports/tilegym-tuning-h200.json", metavar="FILE")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    shapes = tuple(s for s in default_shapes() if not args.only or any(o in s.id for o in args.only))
    if not shapes:
        ap.error(f"--only {args.only}: no shape of lab.bench.stages matches")
    stages = tuple(args.stage or STAGES)
    if args.list:
        for row in plan(shapes, stages, args.chunk):
            print(*row)
        return 0
    import torch
    if not torch.cuda.is_available():
        print("lab.bench.ncu_stages: needs a CUDA GPU (use --list for the plan)", file=sys.stderr)
        return 2
    run(shapes, stages, args.chunk, args.tilegym_tuning)
    return 0


if __name__ == "__main__":
    sys.exit(main())
