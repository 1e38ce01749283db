"""Two race runs of one implementation side by side, shape by shape: a compiler upgrade's timings.

    python -m lab.bench.race_compare DIR_A DIR_B [--impl cutile] [--out cmp.md]

DIR_A and DIR_B hold lab.bench.race JSON files (searched recursively; lab/scripts/gpu_toolchain.sh
writes one per group and shape filter). For each shape both ran: the best chunk's median ms under A
and B, B/A, each run's time over the I/O floor (x floor: the inputs read and y written once, over the
copy rate that run measured in its own process) and the ratio of those. Where A and B ran on two hosts,
the x-floor ratio divides out a difference in memory speed; the ms ratio does not. Each file's GPU,
copy rate and toolchain come first, so a reader sees whether the runs are comparable.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys


def load(folder: str, impl: str) -> tuple[dict, list[str]]:
    """{shape id: the impl's record} and one header line per file."""
    rows, heads = {}, []
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.json"), recursive=True)):
        with open(path) as f:
            doc = json.load(f)
        if "shapes" not in doc:
            continue
        env, ceil = doc.get("env", {}), doc.get("ceilings", {})
        tool = env.get("toolchain", {}).get("tileiras") or "tileiras not recorded"
        heads.append(f"{os.path.relpath(path, folder)}: {env.get('gpu', '?')}, driver {env.get('driver', '?')}, "
                     f"tree {env.get('git', '?')}, {tool}, cuda-tile {env.get('cuda_tile', '?')}, "
                     f"copy {ceil.get('copy_GBps', float('nan')):.0f} GB/s")
        for s in doc["shapes"]:
            r = s.get("impls", {}).get(impl)
            if r and r.get("ok"):
                rows[s["id"]] = r
    return rows, heads


def table(a: dict, b: dict) -> tuple[list[str], dict]:
    lines = ["| shape | cs A | cs B | ms A | ms B | B/A | x floor A | x floor B | x floor B/A |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    ms_r, fl_r = [], []
    for sid in sorted(set(a) & set(b), key=lambda s: (a[s]["io_bytes"], s)):
        ra, rb = a[sid], b[sid]
        ms_r.append(rb["ms"] / ra["ms"])
        fl_r.append(rb["x_floor_io"] / ra["x_floor_io"])
        lines.append(f"| {sid} | {ra['best_chunk']} | {rb['best_chunk']} | {ra['ms']:.4f} | {rb['ms']:.4f} | "
                     f"{ms_r[-1]:.3f} | {ra['x_floor_io']:.2f} | {rb['x_floor_io']:.2f} | {fl_r[-1]:.3f} |")
    summary = {"shapes": len(ms_r), "only_a": sorted(set(a) - set(b)), "only_b": sorted(set(b) - set(a))}
    if ms_r:
        summary.update(ms_median=statistics.median(ms_r), ms_min=min(ms_r), ms_max=max(ms_r),
                       floor_median=statistics.median(fl_r), floor_min=min(fl_r), floor_max=max(fl_r))
    return lines, summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", metavar="DIR_A")
    ap.add_argument("b", metavar="DIR_B")
    ap.add_argument("--impl", default="cutile")
    ap.add_argument("--out", metavar="PATH.md")
    args = ap.parse_args(argv)
    for d in (args.a, args.b):
        if not os.path.isdir(d):
            ap.error(f"{d}: expected a folder of lab.bench.race JSON files")
    (a, ha), (b, hb) = load(args.a, args.impl), load(args.b, args.impl)
    lines, s = table(a, b)
    if not s["shapes"]:
        print(f"race_compare: no shape where {args.impl} ran correctly in both", file=sys.stderr)
        return 1
    out = ["A:", *(f"- {h}" for h in ha), "B:", *(f"- {h}" for h in hb), "", *lines, "",
           f"{s['shapes']} shapes: B/A ms median {s['ms_median']:.3f} ({s['ms_min']:.3f}-{s['ms_max']:.3f}); "
           f"x floor B/A median {s['floor_median']:.3f} ({s['floor_min']:.3f}-{s['floor_max']:.3f})"
           + (f"; only in A: {', '.join(s['only_a'])}" if s["only_a"] else "")
           + (f"; only in B: {', '.join(s['only_b'])}" if s["only_b"] else "")]
    text = "\n".join(out)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
