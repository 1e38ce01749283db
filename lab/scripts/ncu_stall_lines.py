"""Where a kernel's warps wait, instruction by instruction, from Nsight Compute's source page.

    python lab/scripts/ncu_stall_lines.py DIR/ncu-source-sass.csv --kernel chunk_walk --index 1 --executed 131072
    python lab/scripts/ncu_stall_lines.py ncu-source-sass.csv --kernel chunk_walk --digest walk.csv.xz

The input is `ncu -i REP --page source --print-source sass --csv` (lab/scripts/gpu_ncu_segments.sh writes
it): one block per profiled kernel, each instruction with its sampled warp stalls. `--kernel` picks
the blocks whose kernel name holds the text, `--index` one of them (0: the first). Printed: the
kernel's samples by stall reason, then the instructions that hold at least `--min-share` percent of
the samples, and every synchronization and tensor-core instruction (the waits on TMA barriers,
the arrivals that free a buffer, the fences, the matrix products and their completion waits), each
with its share, its main stall reason and how often it ran. `--executed N` keeps the instructions
that ran N times and takes the shares over them: tileiras gives the walk a producer warp (the TMA
loads), a store warp and a 4-warp consumer group, so N = 4 x the blocks' chunk steps selects the
consumer's loop. `--opcodes` adds how many of those instructions (that ran) each opcode has: for a
loop, the instruction mix of one step of one warp. Instructions neither run nor sampled are not
listed. `--digest OUT` writes the chosen block's columns that this reads, for the other instructions
(as CSV, xz if OUT ends in .xz), small enough to keep with a report; a digest is read back like the
full page and prints the same lines.
"""
from __future__ import annotations

import argparse
import csv
import io
import lzma
import sys
from collections import Counter

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
INDEX = "Index"       # a digest's column: the instruction's row in the full page
KEEP = ("Address", "Source", SAMPLES, EXECUTED)
SYNC_WORDS = ("HGMMA", "TRYWAIT", "UTMALDG", "UTMASTG", "BAR.SYNC", "ARRIVE", "MEMBAR", "FENCE", "DEPBAR",
              "NANOSLEEP", "EXIT")


def _open(path: str):
    return lzma.open(path, "rt") if path.endswith(".xz") else open(path, newline="")


def blocks(path: str) -> list[tuple[str, list[str], list[list[str]]]]:
    """[(kernel name, header, rows)] of a source-page CSV (full or digest)."""
    out, name, lines = [], None, []
    with _open(path) as f:
        text = f.read().splitlines()
    for line in text + ['"Kernel Name",""']:
        if line.startswith('"Kernel Name"'):
            if name is not None:
                rows = list(csv.reader(lines))
                if rows:
                    out.append((name, rows[0], rows[1:]))
            name, lines = next(csv.reader([line]))[1], []
        else:
            lines.append(line)
    return out


def _num(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def stall_columns(header: list[str]) -> list[str]:
    return [h for h in header if h.startswith("stall_") and "Not Issued" not in h]


def report(name: str, header: list[str], rows: list[list[str]], executed: int | None, min_share: float) -> str:
    ix = {h: i for i, h in enumerate(header)}
    for col in KEEP:
        if col not in ix:
            raise SystemExit(f"ncu_stall_lines: column {col!r} is missing: expected ncu's source page "
                             f"(--page source --print-source sass --csv)")
    stalls = stall_columns(header)
    total = sum(_num(r[ix[SAMPLES]]) for r in rows)
    picked = [executed is None or _num(r[ix[EXECUTED]]) == executed for r in rows]
    chosen = [r for r, keep in zip(rows, picked) if keep]
    base = sum(_num(r[ix[SAMPLES]]) for r in chosen) or 1.0
    lines = [f"{name[:90]}", f"samples {base:.0f} of {total:.0f} ({100 * base / max(total, 1.0):.1f}%)"
             + (f" in the {len(chosen)} instructions that ran {executed} times" if executed else "")]
    by_reason = Counter()
    for r in chosen:
        for h in stalls:
            by_reason[h] += _num(r[ix[h]])
    lines += [f"  {h[6:]:18s} {100 * v / base:5.1f}%" for h, v in by_reason.most_common() if v]
    lines.append("index  share  main reason  executed  instruction")
    for i, (r, keep) in enumerate(zip(rows, picked)):
        if not keep or not (_num(r[ix[EXECUTED]]) or _num(r[ix[SAMPLES]])):
            continue
        share = 100 * _num(r[ix[SAMPLES]]) / base
        src = r[ix["Source"]].strip()
        if share >= min_share or any(w in src for w in SYNC_WORDS):
            row = int(r[ix[INDEX]]) if INDEX in ix else i
            main = max(stalls, key=lambda h: _num(r[ix[h]]))[6:] if stalls else "-"
            lines.append(f"{row:5d} {share:5.1f}%  {main:11s} {int(_num(r[ix[EXECUTED]])):>9d}  {src[:90]}")
    return "\n".join(lines)


def opcode(source: str) -> str:
    """An instruction's opcode without its predicate or modifiers: '@!P0 BRA 0x40' -> 'BRA'."""
    words = [w for w in source.split() if not w.startswith("@")]
    return words[0].split(".")[0] if words else ""


def opcode_counts(header: list[str], rows: list[list[str]], executed: int | None) -> str:
    """One line: the opcodes of the instructions that ran (`executed` times, if given), most first."""
    ix = {h: i for i, h in enumerate(header)}
    ran = [r for r in rows if _num(r[ix[EXECUTED]]) and (executed is None or _num(r[ix[EXECUTED]]) == executed)]
    counts = Counter(opcode(r[ix["Source"]]) for r in ran)
    return f"opcodes of the {len(ran)} instructions that ran: " + ", ".join(f"{k} {v}" for k, v in counts.most_common())


def write_digest(path: str, name: str, header: list[str], rows: list[list[str]]) -> None:
    """The columns this reads, of the instructions that ran or were sampled (the others are never
    listed), each with its row in the full page, so a digest prints what the page prints."""
    cols = [h for h in header if h in KEEP or h in stall_columns(header)]
    ix = [header.index(h) for h in cols]
    done, seen = header.index(EXECUTED), header.index(SAMPLES)
    buf = io.StringIO()
    w = csv.writer(buf, quoting=csv.QUOTE_ALL, lineterminator="\n")
    w.writerow(["Kernel Name", name])
    w.writerow([INDEX, *cols])
    w.writerows([str(n), *(r[i] for i in ix)] for n, r in enumerate(rows)
                 if _num(r[done]) or _num(r[seen]))
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "wt") as f:
        f.write(buf.getvalue())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lab/scripts/ncu_stall_lines.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu's source page as CSV, or a digest (.csv or .csv.xz)")
    ap.add_argument("--kernel", default="", help="text the kernel's name holds")
    ap.add_argument("--index", type=int, default=0, help="which of the matching kernels (0: the first)")
    ap.add_argument("--executed", type=int, default=None, help="keep the instructions that ran this many times")
    ap.add_argument("--min-share", type=float, default=1.0, help="percent of the samples an instruction must hold")
    ap.add_argument("--digest", default=None, help="write the chosen kernel's stall columns here")
    ap.add_argument("--opcodes", action="store_true", help="also count the chosen instructions by opcode")
    args = ap.parse_args(argv)
    found = [b for b in blocks(args.csv) if args.kernel in b[0]]
    if not 0 <= args.index < len(found):
        print(f"ncu_stall_lines: {len(found)} kernel(s) named with {args.kernel!r} in {args.csv}; "
              f"--index {args.index} is not one of them", file=sys.stderr)
        return 2
    name, header, rows = found[args.index]
    if args.digest:
        write_digest(args.digest, name, header, rows)
    print(report(name, header, rows, args.executed, args.min_share))
    if args.opcodes:
        print(opcode_counts(header, rows, args.executed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
