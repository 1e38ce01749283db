"""Where the host time of one forward goes: Python, argument checks, allocations or cuTile's launch.

    python -m bench.host_profile --out $OUT/host --tilegym-tuning reports/tilegym-tuning-h200.json

At 8x2K n64 the race measured 0.209 ms of host time per cutile forward against 0.139 ms of kernels
(session 12), so the forward there is partly launch-bound. This times, with nothing waited for
(bench.race.host_ms), the whole forward, each stage's launcher alone, and TileGym's forward, then
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

from bench.shapes import Shape

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
    from bench.race import environment, host_ms
    from bench.sweep_cutile import Stages
    tuning = None
    if tuning_path:   # TileGym at its recorded choices: no 2-3 minute tuning per shape
        from bench import tilegym_tuning
        tuning = tilegym_tuning.install(tuning_path)
    doc = {"env": environment(), "calls": calls, "tilegym_tuning": tuning_path, "shapes": []}
    for shape in shapes:
        st = Stages(shape, CHUNK)
        fns = {"forward": st.forward, "cumsum": st.cumsum, "state": st.state, "scan": st.scan}
        for fn in fns.values():   # first calls load the kernels (session 13's first run timed that)
            fn()
            fn()
        torch.cuda.synchronize()
        times = {name: host_ms(fn, n=calls) for name, fn in fns.items()}
        try:
            from bench.stages import _tilegym_stages
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--tilegym-tuning", help="recorded TileGym choices (reports/tilegym-tuning-h200.json)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = run(SHAPES, args.calls, args.tilegym_tuning)
    (out / "host.json").write_text(json.dumps(doc, indent=1))
    text = render(doc)
    (out / "host.txt").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
