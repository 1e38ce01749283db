"""Where the segmented walk's time goes: each kernel of the forward, per variant, in one process.

    python -m lab.bench.segment_passes --shape b2-l32768-h32-p64-n64-g1 \\
        --variant 4 --variant "8/chunk_walk:BN=64,SPLIT=1,occupancy=4" --out out/passes
    python -m lab.bench.segment_passes --shape ... --variant ... --list     # the plan (any machine)
    ncu --clock-control none --profile-from-start off --set full -o out/seg \\
        python -m lab.bench.segment_passes --shape ... --variant 4 --profile-once   # why a pass is slow

lab.bench.ab_row times the whole forward; the segmented walk's prediction (lab.bench.segments_model) splits
it into the cumsum, pass 1 (segment_state), pass 2 (segment_pass) and pass 3 (chunk_walk on every
segment), and the measured forward did not say which pass the model missed
(lab/NOTES.md). A variant is `S[/KERNEL:NAME=INT,...[/...]]`: the segmented walk forced at
up to S segments (1: off, the table's own path), with the named constants and hints replaced in the
rows the shape runs (lab.bench.ab_row.variant; the walk's segment rows need BN given, since the row the
table picks for a long shape is the walk's off row). The table itself always runs first (it segments
the long dstate-64 shapes with few pairs; variant 1 is then the two kernels).

Per variant and shape: the forward eagerly and replayed from a CUDA graph (lab.bench.race.bench_ms /
graph_ms, medians), `--rounds` times alternating over the variants; then `--iters` forwards under
torch.profiler, each kernel's median duration (CUDA activity) and launches per forward. Each
variant's output is compared with the table's (normwise) first. `--without D` leaves D out of every
forward, to time what the D skip costs. Writes passes.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

# cuTile's symbols carry the kernel function's name: a substring names the stage
KERNELS = ("chunk_cumsum", "segment_state", "segment_pass", "chunk_walk", "chunk_state", "chunk_scan")


def parse_variant(text: str) -> tuple[int, dict[str, dict[str, int]]]:
    """'8/chunk_walk:BN=64,occupancy=4' -> (8, {"chunk_walk": {"BN": 64, "occupancy": 4}})."""
    from lab.bench.ab_row import parse_set
    head, *sets = text.split("/")
    if not head.strip().isdigit() or int(head) < 1:
        raise ValueError(f"--variant: expected S[/KERNEL:NAME=INT,...] with S a positive integer (the most "
                         f"segments; 1: off), got {text!r}")
    return int(head), parse_set(sets)


def plan(shape, chunk: int, variants) -> list[dict]:
    """Per variant: its label, the segments the forward runs (None: another path), the overrides."""
    from lab.bench.ab_row import forced, segments_run, variant
    out = [{"label": "table", "segments": segments_run(shape, chunk, None), "override": {}, "force": None}]
    for text, (nseg, changes) in variants:
        override = variant(shape, chunk, changes)
        with forced(override):   # the walk's row as overridden decides whether the passes serve the shape
            segs = segments_run(shape, chunk, nseg)
        out.append({"label": text, "segments": segs, "override": override, "force": nseg})
    return out


def stage_of(name: str) -> str:
    return next((k for k in KERNELS if k in name), "other")


def profile_stages(fn, iters: int) -> dict[str, dict]:
    """{stage: {"ms": median duration, "per_forward": launches per forward}} of `iters` calls of fn."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    durations: dict[str, list[float]] = {}
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA and "memset" not in evt.name.lower() \
                and "memcpy" not in evt.name.lower():
            durations.setdefault(stage_of(evt.name), []).append(evt.time_range.elapsed_us() / 1e3)
    return {k: {"ms": statistics.median(v), "per_forward": len(v) / iters} for k, v in durations.items()}


def run(shapes, variants, rounds: int, iters: int, out: Path, log=print, without: tuple = ()) -> dict:
    import torch

    from lab.bench.ab_row import forced
    from lab.bench.race import bench_ms, environment, graph_ms, measure_ceilings, rel_err
    from lab.bench.roofline import floors_ms
    from kernels.cutile import ssd_forward
    ceilings = measure_ceilings()
    doc = {"schema": "ssdcheck-segment-passes/1", "env": environment(), "ceilings": ceilings, "rounds": rounds,
           "iters": iters, "without": list(without), "rows": []}
    for shape, chunks in shapes:
        kw = _inputs(shape, without)
        for chunk in chunks:
            sides = plan(shape, chunk, variants)
            fns = []
            for side in sides:
                def fwd(side=side):
                    with forced(side["override"], side["force"]):
                        return ssd_forward(**kw, chunk_size=chunk)
                fns.append(fwd)
            ref = fns[0]()
            rows = []
            for side, fn in zip(sides, fns):
                row = {"shape": shape.id, "chunk": chunk, "variant": side["label"], "segments": side["segments"],
                       "configs": {k: str(v) for k, v in side["override"].items()}}
                try:
                    got = fn()
                    row["err_vs_table"] = rel_err(got[0], ref[0]) if shape.final_states else rel_err(got, ref)
                except Exception as e:  # noqa: BLE001 - reported, the next variant still runs
                    row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
                rows.append(row)
            times = [{"ms": [], "graph_ms": []} for _ in sides]
            for _ in range(rounds):
                for row, fn, t in zip(rows, fns, times):
                    if "error" not in row:
                        t["ms"].append(bench_ms(fn)["ms"])
                        t["graph_ms"].append(graph_ms(fn)["ms"])
            floor = floors_ms(shape, chunk, 4, ceilings["copy_GBps"])[0]   # the I/O floor at the copy rate
            for row, fn, t in zip(rows, fns, times):
                if "error" in row:
                    continue
                row.update(ms=statistics.median(t["ms"]), graph_ms=statistics.median(t["graph_ms"]),
                           all=t, floor_ms=floor)
                try:
                    row["stages"] = profile_stages(fn, iters)
                except Exception as e:  # noqa: BLE001 - a host without kernel tracing still gets its times
                    row["stages"], row["stages_error"] = {}, f"{type(e).__name__}: {str(e)[:300]}"
                row["x_floor"] = row["graph_ms"] / floor if floor else None
            torch.cuda.synchronize()
            for row in rows:
                doc["rows"].append(row)
                log(json.dumps({k: v for k, v in row.items() if k != "all"}))
            out.mkdir(parents=True, exist_ok=True)
            (out / "passes.json").write_text(json.dumps(doc, indent=1))
    return doc


def _inputs(shape, without: tuple) -> dict:
    """The race's inputs for `shape` less the optional ones named in `without` (D: the race gives no
    other optional input)."""
    from lab.bench.ab_row import forward_kwargs
    kw = forward_kwargs(shape)
    for name in without:
        kw.pop(name, None)
    return kw


def profile_once(shapes, variants, log=print) -> None:
    """Each variant's forward twice (compiles), then once between cudaProfilerStart and Stop: under
    `ncu --profile-from-start off` exactly one launch of each of its kernels is profiled."""
    import torch

    from lab.bench.ab_row import forced, forward_kwargs
    from kernels.cutile import ssd_forward
    for shape, chunks in shapes:
        kw = forward_kwargs(shape)
        for chunk in chunks:
            for side in plan(shape, chunk, variants):
                with forced(side["override"], side["force"]):
                    for _ in range(2):
                        ssd_forward(**kw, chunk_size=chunk)
                    torch.cuda.synchronize()
                    torch.cuda.cudart().cudaProfilerStart()
                    ssd_forward(**kw, chunk_size=chunk)
                    torch.cuda.synchronize()
                    torch.cuda.cudart().cudaProfilerStop()
                log(f"profiled {shape.id}@{chunk} {side['label']} (segments {side['segments'] or '-'})")


def table(doc: dict) -> str:
    cols = [k for k in KERNELS if any(k in r.get("stages", {}) for r in doc["rows"])]
    lines = ["| shape | variant | S | ms | graph ms | x floor | " + " | ".join(cols) + " | err vs table |",
             "| --- | --- | ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in cols) + " | ---: |"]
    for r in doc["rows"]:
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['variant']} | {r['segments'] or '-'} | {r['error']} |")
            continue
        st = r["stages"]
        cells = [f"{st[k]['ms'] * st[k]['per_forward']:.4f}" if k in st else "" for k in cols]
        xf = f"{r['x_floor']:.2f}" if r.get("x_floor") else ""
        lines.append(f"| {r['shape']} | {r['variant']} | {r['segments'] or '-'} | {r['ms']:.4f} | "
                     f"{r['graph_ms']:.4f} | {xf} | " + " | ".join(cells) + f" | {r['err_vs_table']:.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    from lab.bench.sweep_cutile import race_shape
    ap = argparse.ArgumentParser(prog="python -m lab.bench.segment_passes", description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", action="append", required=True, metavar="ID[@CHUNKS]")
    ap.add_argument("--variant", action="append", default=[], metavar="S[/KERNEL:NAME=INT,...]")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20, help="profiled forwards per variant")
    ap.add_argument("--list", action="store_true", help="print the plan and exit (no GPU)")
    ap.add_argument("--profile-once", action="store_true",
                    help="no timing: one forward per variant inside a CUDA profiler range (for ncu)")
    ap.add_argument("--without", action="append", default=[], choices=("D",),
                    help="leave this optional input out of every forward (what it costs; repeatable)")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")) / "passes")
    args = ap.parse_args(argv)
    try:
        shapes = [race_shape(s) for s in args.shape]
        variants = [(v, parse_variant(v)) for v in args.variant]
        if not variants:
            raise ValueError("--variant: give at least one (the table always runs)")
        plans = [(shape, chunk, plan(shape, chunk, variants)) for shape, chunks in shapes for chunk in chunks]
    except (ValueError, KeyError) as e:
        ap.error(str(e))
    if args.list:
        for shape, chunk, sides in plans:
            for side in sides:
                print(f"{shape.id}@{chunk} {side['label']}: segments {side['segments'] or '-'}; "
                      + "; ".join(f"{k} {v}" for k, v in side["override"].items()))
        return 0
    if args.profile_once:
        profile_once(shapes, variants)
        return 0
    from lab.bench.ab_row import write_table
    doc = run(shapes, variants, args.rounds, args.iters, args.out, without=tuple(args.without))
    write_table(args.out / "passes.md", "lab.bench.segment_passes", argv, table(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
