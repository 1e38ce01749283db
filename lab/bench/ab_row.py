"""A/B one change to the dispatch row a shape runs: the whole forward, table against table-with-the-change.

    python -m lab.bench.ab_row --shape b8-l2048-h32-p64-n64-g1@64 --set chunk_state:SLAT=0 --out out/ab

The sweep (lab.bench.sweep_cutile) times one kernel alone; a change that moves work between kernels or
that matters through launch count needs the forward (DTP, chunk_cumsum folded into chunk_state, was
measured this way: lab/reports/2026-12-01-dtp-hang.md). For each
shape and chunk: A is the dispatch table, B is the row the table chooses there with the named
constants replaced (installed as a KERNEL@CHUNK override, so other shapes are untouched), and/or,
with `--segments N`, the segmented walk forced at up to N segments (what SSDCHECK_CUTILE_SEGMENTS=N
does to a process, switched in this one: `python -m lab.bench.ab_row --segments 4 --shape
b2-l32768-h32-p64-n64-g1-float16-fs`; the row records the segments B ran, none where the path does not
serve the problem). Shapes are the race's (lab.bench.shapes, the `long*` groups' fp16 and final-state ones
too); a final-state shape returns its final states on both sides, and B's are compared with A's as y is. Both run on
the same inputs (lab.bench.race.make_inputs); B's output is compared with A's (normwise) before timing.
Then A and B are timed alternately, `--rounds` times each, eagerly and replayed from a CUDA graph
(lab.bench.race.bench_ms / graph_ms: medians of CUDA events), so drift between them hits both; the figure
per side is the median over rounds. Writes ab.json to --out and prints a table.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path


def parse_set(specs: list[str]) -> dict[str, dict[str, int]]:
    """['chunk_state:SLAT=0,LAT=2', ...] -> {"chunk_state": {"SLAT": 0, "LAT": 2}}."""
    out: dict[str, dict[str, int]] = {}
    for spec in specs:
        kernel, _, body = spec.partition(":")
        try:
            values = {k.strip(): int(v) for k, v in (item.split("=") for item in body.split(",") if item.strip())}
        except ValueError:
            raise ValueError(f"--set: expected KERNEL:NAME=INT[,NAME=INT], got {spec!r}") from None
        if not values:
            raise ValueError(f"--set: {spec!r} names no constant")
        out.setdefault(kernel.strip(), {}).update(values)
    return out


def _table_problem(shape, chunk: int):
    """The dispatch Problem the launcher builds for `shape` at `chunk` (from meta tensors: no memory)."""
    import torch

    from kernels.cutile import launcher
    dtype = getattr(torch, shape.dtype)
    x = torch.empty(shape.batch, shape.seqlen, shape.nheads, shape.headdim, device="meta", dtype=dtype)
    B = torch.empty(shape.batch, shape.seqlen, shape.ngroups, shape.dstate, device="meta", dtype=dtype)
    return launcher._problem(x, B, chunk, None)


def variant(shape, chunk: int, changes: dict[str, dict[str, int]]) -> dict[str, object]:
    """{KERNEL@CHUNK: the table's row for this shape with `changes` applied}: the override B runs with.
    `occupancy` and `worker_warps` set those compiler hints. Raises KeyError naming a constant the row
    does not have."""
    from kernels.cutile import dispatch
    prob = _table_problem(shape, chunk)
    out = {}
    for kernel, values in changes.items():
        hints = {k: values[k] for k in ("occupancy", "worker_warps") if k in values}   # compiler hints, not constants
        cfg = dispatch.choose(kernel, prob)
        if kernel == "segment_state" and cfg.get("BN") == 0:   # no row segments; a forced walk runs SEGMENT_STATE
            cfg = dispatch.SEGMENT_STATE
        cfg = cfg.replace(**{k: v for k, v in values.items() if k not in hints})
        out[f"{kernel}@{chunk}"] = dataclasses.replace(cfg, **hints)
    return out


def segments_run(shape, chunk: int, force: int | None, device: str = "cuda") -> int | None:
    """The segments the forward of `shape` runs with SSDCHECK_CUTILE_SEGMENTS=force (None: the table's
    choice); None where the segmented walk does not serve the problem."""
    import torch

    from lab.bench.roofline import nchunks
    from kernels.cutile import launcher
    saved, launcher._SEGMENTS = launcher._SEGMENTS, force
    try:
        plan = launcher._segment_plan(_table_problem(shape, chunk), nchunks(shape.seqlen, chunk),
                                      launcher._sm_count(torch.device(device)))
    finally:
        launcher._SEGMENTS = saved
    return None if plan is None else plan[0]


def write_table(path: Path, module: str, argv, text: str) -> None:
    """The command line and the table, written to `path` and printed."""
    md = f"Command: `python -m {module} {' '.join(argv if argv is not None else sys.argv[1:])}`\n\n{text}\n"
    path.write_text(md)
    print(md)


def forward_kwargs(shape) -> dict:
    """The race's inputs for `shape` (seed 0), asking for the final states where the shape returns them."""
    from lab.bench.race import make_inputs
    kw = make_inputs(shape, 0)
    if shape.final_states:
        kw["return_final_states"] = True
    return kw


@contextlib.contextmanager
def forced(override: dict, segments: int | None = None):
    """The launcher with `override` (variant()'s KERNEL@CHUNK Configs) installed and, unless None, the
    segmented walk forced at up to `segments` (SSDCHECK_CUTILE_SEGMENTS in this process); restored after."""
    from kernels.cutile import launcher
    saved, saved_segments = dict(launcher._OVERRIDE), launcher._SEGMENTS
    launcher._OVERRIDE.update(override)
    if segments is not None:
        launcher._SEGMENTS = segments
    try:
        yield
    finally:
        launcher._OVERRIDE.clear()
        launcher._OVERRIDE.update(saved)
        launcher._SEGMENTS = saved_segments


def run(shapes, changes, rounds: int, out: Path, log=print, segments: int | None = None) -> dict:
    import torch

    from lab.bench.race import bench_ms, environment, graph_ms, rel_err
    from kernels.cutile import launcher, ssd_forward
    doc = {"schema": "ssdcheck-ab-row/1", "env": environment(), "set": changes, "segments": segments,
           "rounds": rounds, "rows": []}
    for shape, chunks in shapes:
        kw = forward_kwargs(shape)
        for chunk in chunks:
            override = variant(shape, chunk, changes)
            row = {"shape": shape.id, "chunk": chunk, "b_configs": {k: str(v) for k, v in override.items()},
                   "a_segments": segments_run(shape, chunk, launcher._SEGMENTS),
                   "b_segments": segments_run(shape, chunk, segments if segments is not None else launcher._SEGMENTS)}

            def forward_a():
                return ssd_forward(**kw, chunk_size=chunk)

            def forward_b():
                with forced(override, segments):
                    return ssd_forward(**kw, chunk_size=chunk)

            try:
                a, b = forward_a(), forward_b()
                if shape.final_states:
                    row["err_final_b_vs_a"] = rel_err(b[1], a[1])
                    a, b = a[0], b[0]
                row["err_b_vs_a"] = rel_err(b, a)
                times = {k: [] for k in ("a_ms", "b_ms", "a_graph_ms", "b_graph_ms")}
                for _ in range(rounds):
                    for side, fn in (("a", forward_a), ("b", forward_b)):
                        times[f"{side}_ms"].append(bench_ms(fn)["ms"])
                        times[f"{side}_graph_ms"].append(graph_ms(fn)["ms"])
                row.update({k: statistics.median(v) for k, v in times.items()})
                row["all"] = times
            except Exception as e:  # noqa: BLE001 - reported, the next shape still runs
                row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
            torch.cuda.synchronize()
            doc["rows"].append(row)
            log(json.dumps({k: v for k, v in row.items() if k != "all"}))
            out.mkdir(parents=True, exist_ok=True)
            (out / "ab.json").write_text(json.dumps(doc, indent=1))
    return doc


def table(doc: dict) -> str:
    lines = ["| shape | chunk | segments A / B | A ms | B ms | B/A | A graph | B graph | B/A graph | err B vs A "
             "(final) |",
             "| --- | ---: | :---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in doc["rows"]:
        segs = f"{r.get('a_segments') or '-'} / {r.get('b_segments') or '-'}"
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['chunk']} | {segs} | {r['error']} |")
            continue
        final = f" ({r['err_final_b_vs_a']:.1e})" if "err_final_b_vs_a" in r else ""
        lines.append(f"| {r['shape']} | {r['chunk']} | {segs} | {r['a_ms']:.4f} | {r['b_ms']:.4f} "
                     f"| {r['b_ms'] / r['a_ms']:.3f} | {r['a_graph_ms']:.4f} | {r['b_graph_ms']:.4f} "
                     f"| {r['b_graph_ms'] / r['a_graph_ms']:.3f} | {r['err_b_vs_a']:.1e}{final} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from lab.bench.sweep_cutile import race_shape
    ap = argparse.ArgumentParser(prog="python -m lab.bench.ab_row", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", required=True, metavar="ID[@CHUNKS]",
                    help="a race shape id, e.g. b8-l2048-h32-p64-n64-g1@64,128 (repeatable)")
    ap.add_argument("--set", action="append", default=[], metavar="KERNEL:NAME=INT,...",
                    help="constants B replaces in the row the table chooses, e.g. chunk_state:SLAT=0 (repeatable)")
    ap.add_argument("--segments", type=int, default=None, metavar="N",
                    help="B forces the segmented walk at up to N segments (1: B turns it off)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating timings of A and B (median over them)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")) / "ab")
    args = ap.parse_args(argv)
    try:
        shapes = [race_shape(s) for s in args.shape]
        changes = parse_set(args.set)
        if not changes and args.segments is None:
            raise ValueError("B is A: give --set KERNEL:NAME=INT and/or --segments N")
        if args.segments is not None and args.segments < 1:
            raise ValueError(f"--segments: expected a positive integer, got {args.segments}")
        for shape, chunks in shapes:       # a constant the row lacks fails here, before the GPU work
            for chunk in chunks:
                variant(shape, chunk, changes)
    except (ValueError, KeyError) as e:
        ap.error(str(e))
    doc = run(shapes, changes, args.rounds, args.out, segments=args.segments)
    write_table(args.out / "ab.md", "lab.bench.ab_row", argv, table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
