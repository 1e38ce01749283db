"""Nsight Compute's details page (`ncu -i REP --page details`), kernel by kernel, as a table; given two
pages (one per toolchain, same forward), side by side with B/A for each metric.

    python lab/scripts/ncu_details_digest.py A/ncu-details.txt [B/ncu-details.txt] [--kernel chunk_walk]
        [--steps N]

Each launch on the page is one row, named by the kernel's short name (cuTile's mangled symbol up to
`_kernel`) and its grid. --steps N adds executed instructions per block and step (warp instructions /
(grid blocks x N)): for the chunk walk, N is the chunks each block walks (seqlen / chunk / segments).
"""
from __future__ import annotations

import argparse
import re
import sys

METRICS = ("Duration", "Elapsed Cycles", "Executed Instructions", "Issued Instructions", "Issue Slots Busy",
           "Executed Ipc Active", "Warp Cycles Per Issued Instruction", "Registers Per Thread",
           "Static Shared Memory Per Block", "Achieved Occupancy", "DRAM Throughput")
_HEAD = re.compile(r"^  (\S+?)(?:_kernel\S*)? \(([\d, ]+)\)x\(([\d, ]+)\)")
_ROW = re.compile(r"^    (\S.*?)\s{2,}(?:\S+\s+)?([\d,.]+)\s*$")


def parse(text: str) -> list[dict]:
    """One dict per launch: name, grid, block, and every metric of METRICS the page gives (floats)."""
    launches = []
    for line in text.splitlines():
        m = _HEAD.match(line)
        if m:
            grid = [int(v) for v in m.group(2).split(",")]
            launches.append({"name": m.group(1), "grid": tuple(grid), "blocks": grid[0] * grid[1] * grid[2]})
            continue
        m = _ROW.match(line)
        if m and launches:
            name = m.group(1).strip()
            name = re.sub(r"\s{2,}\S+$", "", name)   # a unit column left attached to the name
            for metric in METRICS:
                if name == metric or name.startswith(metric + " "):
                    launches[-1].setdefault(metric, float(m.group(2).replace(",", "")))
    return launches


def rows(launches: list[dict], kernel: str | None, steps: int | None) -> list[dict]:
    out = [dict(l) for l in launches if not kernel or kernel in l["name"]]
    for l in out:
        if steps and "Executed Instructions" in l:
            l["inst/step"] = l["Executed Instructions"] / (l["blocks"] * steps)
    return out


def _fmt(v) -> str:
    return "" if v is None else (f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.4g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pages", nargs="+", metavar="DETAILS.txt", help="one page, or two to compare (A then B)")
    ap.add_argument("--kernel", help="only launches whose short name contains this")
    ap.add_argument("--steps", type=int, help="chunks walked per block: adds instructions per block and step")
    args = ap.parse_args(argv)
    if len(args.pages) > 2:
        ap.error("one page, or two to compare")
    runs = []
    for p in args.pages:
        with open(p) as f:
            runs.append(rows(parse(f.read()), args.kernel, args.steps))
        if not runs[-1]:
            print(f"ncu_details_digest: {p}: no launch{' of ' + args.kernel if args.kernel else ''} on the page",
                  file=sys.stderr)
            return 1
    keys = [k for k in (*METRICS, "inst/step") if any(k in l for r in runs for l in r)]
    if len(runs) == 1:
        print("| launch | grid | " + " | ".join(keys) + " |")
        print("| --- | --- |" + " ---: |" * len(keys))
        for l in runs[0]:
            print(f"| {l['name']} | {l['grid']} | " + " | ".join(_fmt(l.get(k)) for k in keys) + " |")
        return 0
    a, b = runs
    if [l["name"] for l in a] != [l["name"] for l in b]:
        print("ncu_details_digest: the two pages hold different launches: "
              f"{[l['name'] for l in a]} vs {[l['name'] for l in b]}", file=sys.stderr)
        return 1
    print("| launch | metric | A | B | B/A |")
    print("| --- | --- | ---: | ---: | ---: |")
    for i, (la, lb) in enumerate(zip(a, b)):
        for k in keys:
            va, vb = la.get(k), lb.get(k)
            ratio = f"{vb / va:.3f}" if va and vb is not None else ""
            print(f"| {i + 1}. {la['name']} {la['grid']} | {k} | {_fmt(va)} | {_fmt(vb)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
