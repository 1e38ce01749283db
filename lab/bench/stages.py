"""Kernel-by-kernel times of ssdcheck's cuTile forward and TileGym's, on the race's inputs.

    python -m lab.bench.stages --out out/stages                      # on the GPU host, after setup.sh
    python -m lab.bench.stages --list                                 # the plan (any machine)

The race says by how much the forwards differ; this says in which kernel. For each shape (default:
the tg groups' six, where TileGym's tuning is recorded) it times, with lab.bench.race.bench_ms:

* cutile at each chunk size: chunk_cumsum, chunk_state, chunk_scan alone (lab.bench.sweep_cutile.Stages:
  the dispatch table, or SSDCHECK_CUTILE_CONFIG) and the whole forward;
* TileGym at chunk 64: its three stages (tilegym.ops.cutile.mamba2's `_chunk_cumsum`,
  `_fwd_pass_state`, `_compute_out`: private functions of TileGym 1.5.1, called as its
  `mamba2_chunk_forward` calls them) and the whole forward, at the choices of its own autotuning
  recorded in --tilegym-tuning (kernels/peers/tilegym_tuning.py). A shape without a recorded choice tunes
  (2-3 minutes) unless --recorded-only.

Every stage's output feeds the next, as in the forward; each forward's output is checked against the
other's (normwise) before timing. Writes stages.json to --out and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from lab.bench.shapes import GROUPS, Shape

TILEGYM_CHUNK = 64
CUTILE_CHUNKS = (64, 128)


def default_shapes() -> tuple[Shape, ...]:
    return tuple(s for name in ("tg64", "tg128", "tg256") for s in GROUPS[name].shapes)


def plan(shapes, chunks=CUTILE_CHUNKS) -> list[tuple[str, Shape, int]]:
    """(implementation, shape, chunk size) in the order they run."""
    out = []
    for s in shapes:
        out += [("cutile", s, c) for c in chunks]
        out.append(("tilegym", s, TILEGYM_CHUNK))
    return out


def _tilegym_stages(kw: dict, chunk: int):
    """TileGym's forward split as mamba2_chunk_forward splits it: {stage: callable}, and the forward."""
    import torch
    import tilegym.ops.cutile.mamba2 as M
    x, B, C = kw["x"], kw["B"], kw["C"]
    b, _, h, p = x.shape
    a, d, dt = kw["A"].float().contiguous(), kw["D"].float().contiguous(), kw["dt"].float().contiguous()
    init = torch.zeros(b, h, p, B.shape[3], device=x.device, dtype=torch.float32)
    decay_bth, decay_bht, dt_bht = M._chunk_cumsum(a, dt, chunk_size=chunk)
    hid, _ = M._fwd_pass_state(x=x, b=B, dt=dt, dt_bht=dt_bht, decay_bth=decay_bth, decay_bht=decay_bht,
                               init_state=init, chunk_size=chunk, state_dtype=C.dtype)
    stages = {
        "cumsum": lambda: M._chunk_cumsum(a, dt, chunk_size=chunk),
        "state": lambda: M._fwd_pass_state(x=x, b=B, dt=dt, dt_bht=dt_bht, decay_bth=decay_bth,
                                           decay_bht=decay_bht, init_state=init, chunk_size=chunk,
                                           state_dtype=C.dtype),
        "scan": lambda: M._compute_out(x=x, b=B, c=C, d=d, dt_bht=dt_bht, decay_bht=decay_bht, hiddens=hid,
                                       chunk_size=chunk),
    }
    return stages, lambda: M.mamba2_chunk_forward(x, a, B, C, d, dt, init, chunk_size=chunk)[0]


def _cutile_stages(shape: Shape, chunk: int):
    from lab.bench.sweep_cutile import Stages
    st = Stages(shape, chunk)
    return {"cumsum": st.cumsum, "state": st.state, "scan": st.scan}, st.forward, st.kw


def run(shapes, out: Path, tuning_path: str | None, recorded_only: bool, log=print) -> dict:
    import torch
    from lab.bench.race import bench_ms, environment, make_inputs, rel_err
    tuning = None
    if tuning_path:
        from kernels.peers import tilegym_tuning
        tuning = tilegym_tuning.install(tuning_path)
    doc = {"schema": "ssdcheck-stages/1", "env": environment(), "tilegym_tuning": tuning_path, "rows": []}
    firsts = {}   # shape id -> the first forward output there
    t0 = time.time()
    for impl, shape, chunk in plan(shapes):
        row = {"impl": impl, "shape": shape.id, "chunk": chunk}
        try:
            if impl == "cutile":
                stages, forward, kw = _cutile_stages(shape, chunk)
            else:
                if recorded_only and not (tuning and tuning.knows(shape=shape.id, chunk=chunk)):
                    row["skipped"] = "no recorded TileGym tuning (--recorded-only)"
                    doc["rows"].append(row)
                    log(json.dumps(row))
                    continue
                kw = make_inputs(shape, 0)
                if tuning is not None:
                    tuning.context = {"shape": shape.id, "chunk": chunk}
                t = time.time()
                stages, forward = _tilegym_stages(kw, chunk)
                forward()
                torch.cuda.synchronize()
                row["first_call_s"] = round(time.time() - t, 1)
                if tuning is not None:
                    row["tuning"] = sorted({e["kind"] for e in tuning.take_events()}) or ["in-process"]
            y = forward()
            first = firsts.setdefault(shape.id, y)    # every later output of the shape is checked against it
            row["err_vs_other"] = None if first is y else rel_err(y, first)
            for name, fn in stages.items():
                row[f"{name}_ms"] = bench_ms(fn)["ms"]
            row["forward_ms"] = bench_ms(forward)["ms"]
        except Exception as e:  # noqa: BLE001 - reported, the next shape still runs
            row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        doc["rows"].append(row)
        log(json.dumps(row))
        out.mkdir(parents=True, exist_ok=True)
        (out / "stages.json").write_text(json.dumps(doc, indent=1))
    doc["elapsed_s"] = round(time.time() - t0, 1)
    (out / "stages.json").write_text(json.dumps(doc, indent=1))
    return doc


def table(doc: dict) -> str:
    cols = ("cumsum_ms", "state_ms", "scan_ms", "forward_ms")
    lines = [f"{'shape':28} {'impl':8} {'cs':>3} " + " ".join(f"{c[:-3]:>8}" for c in cols) + "  err vs first"]
    for r in doc["rows"]:
        if "error" in r or "skipped" in r:
            lines.append(f"{r['shape']:28} {r['impl']:8} {r['chunk']:3d}  {r.get('error') or r.get('skipped')}")
            continue
        err = r.get("err_vs_other")
        lines.append(f"{r['shape']:28} {r['impl']:8} {r['chunk']:3d} " + " ".join(f"{r[c]:8.3f}" for c in cols)
                     + f"  {'(first)' if err is None else f'{err:.1e}'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab.bench.stages", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")) / "stages")
    ap.add_argument("--only", help="substring of a shape id: only those shapes")
    ap.add_argument("--tilegym-tuning", default="lab/reports/tilegym-tuning-h200.json", metavar="FILE")
    ap.add_argument("--recorded-only", action="store_true", help="skip TileGym where no tuning choice is recorded")
    ap.add_argument("--list", action="store_true", help="print the plan and exit")
    args = ap.parse_args(argv)
    shapes = tuple(s for s in default_shapes() if not args.only or args.only in s.id)
    if args.list:
        for impl, s, c in plan(shapes):
            print(f"{impl:8} {s.id} cs{c}")
        return 0
    import torch
    if not torch.cuda.is_available():
        print("lab.bench.stages: needs a CUDA GPU (use --list for the plan)", file=sys.stderr)
        return 2
    from lab.bench.race import switched_on
    if switched_on("TILEGYM_DISABLE_AUTOTUNE"):
        print("lab.bench.stages: TILEGYM_DISABLE_AUTOTUNE is set; TileGym must run at its tuned choices", file=sys.stderr)
        return 2
    doc = run(shapes, args.out, args.tilegym_tuning if os.path.exists(args.tilegym_tuning) else None,
              args.recorded_only)
    print(table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
