"""What a compiler upgrade changed in a kernel's machine code: the opcode counts of two toolchains' SASS.

    python lab/scripts/sass_diff.py --b /tmp/tc135-site --match chunk_cumsum --cuobjdump /path/cuobjdump

Each cuTile unit of compile_matrix whose text contains --match is compiled for --arch (default sm_90)
under toolchain A (default: the pinned one) and B (SSDCHECK_TILEIRAS values, as for
lab/scripts/toolchain_compare.py), disassembled with `cuobjdump -sass`, and its instructions counted
by opcode with their modifiers (MUFU.EX2, FFMA.FTZ, ...). The table lists the opcodes whose counts
differ, and the total; --keep DIR writes both cubins and listings there. Where a stage's rounding
moved under a new toolchain and its source did not, this says which operations the compiler now
emits in its place. cuobjdump is not part of the cuTile toolchain: `pip install nvidia-cuda-cuobjdump`
(any recent version reads sm_90 cubins); --cuobjdump or $CUOBJDUMP names it, else PATH.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from lab.scripts import toolchain_compare as tcmp  # noqa: E402

# `/*0070*/   @!P0 FFMA.FTZ R3, R2, R5, -R3 ;`: the address, an optional predicate, the opcode
_INSTR = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)")


def opcodes(sass: str) -> Counter:
    """Instructions of a `cuobjdump -sass` listing, counted by opcode (modifiers kept)."""
    return Counter(m.group(1) for m in _INSTR.finditer(sass))


def diff_table(a: Counter, b: Counter) -> list[str]:
    """The opcodes whose counts differ, most changed first, then the totals."""
    rows = sorted((k for k in a.keys() | b.keys() if a[k] != b[k]), key=lambda k: (-abs(b[k] - a[k]), k))
    lines = ["| opcode | A | B | B - A |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {k} | {a[k]} | {b[k]} | {b[k] - a[k]:+d} |" for k in rows]
    lines.append(f"| all instructions | {sum(a.values())} | {sum(b.values())} | {sum(b.values()) - sum(a.values()):+d} |")
    return lines


def sass_of(cubin: bytes, cuobjdump: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="", metavar="TOOLCHAIN", help="SSDCHECK_TILEIRAS for A (default: the pinned one)")
    ap.add_argument("--b", required=True, metavar="TOOLCHAIN", help="SSDCHECK_TILEIRAS for B")
    ap.add_argument("--match", required=True, metavar="TEXT", help="the units whose text contains TEXT")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--cuobjdump", default=os.environ.get("CUOBJDUMP") or shutil.which("cuobjdump"))
    ap.add_argument("--keep", metavar="DIR", help="write each cubin and its SASS listing here")
    args = ap.parse_args(argv)
    if not args.cuobjdump or not os.path.isfile(args.cuobjdump):
        ap.error(f"--cuobjdump: expected the path of a cuobjdump (pip install nvidia-cuda-cuobjdump), got {args.cuobjdump!r}")
    from kernels.cutile import compile_matrix as cm  # noqa: PLC0415
    units = [str(u) for u in cm.distinct(cm.enumerate_matrix()) if args.match in str(u)]
    if not units:
        ap.error(f"--match: no compile_matrix unit contains {args.match!r}")
    jobs = [(u, args.arch) for u in units]
    workers = min(len(jobs), os.cpu_count() or 1)
    cubins = {w: tcmp.run(t, jobs, workers, tcmp.cubin) for w, t in (("A", args.a), ("B", args.b))}
    for i, unit in enumerate(units):
        sass = {w: sass_of(cubins[w][i], args.cuobjdump) for w in ("A", "B")}
        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9_.=-]+", "_", unit)
            for w in ("A", "B"):
                with open(os.path.join(args.keep, f"{stem}.{w}.cubin"), "wb") as f:
                    f.write(cubins[w][i])
                with open(os.path.join(args.keep, f"{stem}.{w}.sass"), "w") as f:
                    f.write(sass[w])
        print(f"\n{unit} ({args.arch}); A: {args.a or '(pinned)'}, B: {args.b}\n")
        print("\n".join(diff_table(opcodes(sass["A"]), opcodes(sass["B"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
