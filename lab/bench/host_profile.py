"""Where the host time of one forward goes: Python, argument checks, allocations or cuTile's launch.

    python -m lab.bench.host_profile --out out/host --tilegym-tuning lab/reports/tilegym-tuning-h200.json
    python -m lab.bench.host_profile --out /tmp/host --cpu     # any machine: the Python side alone

At 8x2K n64 the race measured 0.209 ms of host time per cutile forward against 0.139 ms of kernels
(lab/reports/2026-11-30-fast-table.md), so the forward there is partly launch-bound. This times, with nothing waited for
(lab.bench.race.host_ms), the whole forward, each stage's launcher alone, and TileGym's forward, then
profiles N forwards with cProfile and lists the functions that own the time. Writes host.json and
host.txt to --out.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
from pathlib import Path

from lab.bench.shapes import Shape
from kernels.cutile.precompile import launches_stubbed  # noqa: F401 (the CPU-side forward; tests take it from here too)

SHAPES = (Shape(8, 2048, 32, 64), Shape(8, 2048, 32, 128))
CHUNK = 64


def profile_rows(fn, calls: int, top: int = 25) -> list[dict]:
    """Run fn `calls` times under cProfile: the `top` functions by own time, per call, in microseconds."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    stats = pstats.Stats(prof)
    rows = []
    for (path, line, name), (_, ncalls, tottime, cumtime, _) in stats.stats.items():
        rows.append({"function": f"{Path(path).name}:{line}({name})", "calls_per_call": ncalls / calls,
                     "own_us": tottime / calls * 1e6, "cum_us": cumtime / calls * 1e6})
    rows.sort(key=lambda r: -r["own_us"])
    return rows[:top]


def render(doc: dict) -> str:
    lines = []
    for rec in doc["shapes"]:
        lines.append(f"## {rec['id']} chunk {rec['chunk']}")
        lines.append("host ms per call: " + ", ".join(f"{k} {v:.4f}" for k, v in rec["host_ms"].items()))
        lines.append(f"{'own us':>8} {'cum us':>8} {'calls':>6}  function")
        for r in rec["profile"]:
            lines.append(f"{r['own_us']:8.1f} {r['cum_us']:8.1f} {r['calls_per_call']:6.1f}  {r['function']}")
        lines.append("")
    return "\n".join(lines)


def run(shapes, calls: int, tuning_path: str | None) -> dict:
    import torch
    from lab.bench.race import environment, host_ms
    from lab.bench.sweep_cutile import Stages
    tuning = None
    if tuning_path:   # TileGym at its recorded choices: no 2-3 minute tuning per shape
        from kernels.peers import tilegym_tuning
        tuning = tilegym_tuning.install(tuning_path)
    doc = {"env": environment(), "calls": calls, "tilegym_tuning": tuning_path, "shapes": []}
    for shape in shapes:
        st = Stages(shape, CHUNK)
        fns = {"forward": st.forward, "cumsum": st.cumsum, "state": st.state, "scan": st.scan}
        for fn in fns.values():   # first calls load the kernels (a first run without them timed that: lab/reports/2026-11-30-fastr-table.md)
            fn()
            fn()
        torch.cuda.synchronize()
        times = {name: host_ms(fn, n=calls) for name, fn in fns.items()}
        try:
            from lab.bench.stages import _tilegym_stages
            if tuning is not None:
                tuning.context = {"shape": shape.id, "chunk": CHUNK}
            _, tg_forward = _tilegym_stages(st.kw, CHUNK)
            tg_forward()
            tg_forward()
            torch.cuda.synchronize()
            times["tilegym_forward"] = host_ms(tg_forward, n=calls)
        except ImportError as e:
            print(f"TileGym not importable ({e}): its host time is left out", file=sys.stderr)
        rows = profile_rows(st.forward, calls)
        torch.cuda.synchronize()
        doc["shapes"].append({"id": shape.id, "chunk": CHUNK, "host_ms": times, "profile": rows})
    return doc


def run_cpu(shapes, calls: int) -> dict:
    """The Python side of the forward on the CPU (launches_stubbed), per call, and its profile."""
    import time as _time
    from lab.bench.race import make_inputs
    from kernels.cutile import ssd_forward
    doc = {"mode": "cpu, CUDA calls stubbed", "calls": calls, "shapes": []}
    with launches_stubbed():
        for shape in shapes:
            kw = dict(make_inputs(shape, 0, device="cpu"), chunk_size=CHUNK)
            fn = lambda: ssd_forward(**kw)  # noqa: E731
            for _ in range(5):
                fn()
            best = []
            for _ in range(5):   # the best of 5 runs' mean per call: the 2-core CI machine is noisy
                t = _time.perf_counter()
                for _ in range(calls):
                    fn()
                best.append((_time.perf_counter() - t) / calls * 1e3)
            doc["shapes"].append({"id": shape.id, "chunk": CHUNK, "host_ms": {"forward (python side)": min(best)},
                                  "profile": profile_rows(fn, calls)})
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--tilegym-tuning", help="recorded TileGym choices (lab/reports/tilegym-tuning-h200.json)")
    ap.add_argument("--cpu", action="store_true", help="no GPU: the Python side only, CUDA calls stubbed")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = run_cpu(SHAPES, args.calls) if args.cpu else run(SHAPES, args.calls, args.tilegym_tuning)
    (out / "host.json").write_text(json.dumps(doc, indent=1))
    text = render(doc)
    (out / "host.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
