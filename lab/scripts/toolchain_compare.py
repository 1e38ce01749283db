"""Compile the cuTile units under two toolchains and put them side by side: a compiler upgrade is a
new revision of every kernel.

    python lab/scripts/toolchain_compare.py --b /tmp/tc135-site                     # CI's matrix, 4 archs
    python lab/scripts/toolchain_compare.py --b /tmp/tc135-site --units cover --arch sm_90
    python lab/scripts/toolchain_compare.py --a /opt/tc134 --b /opt/tc135 --match chunk_cumsum --out cmp.md

Toolchain A and B are SSDCHECK_TILEIRAS values (kernels/cutile/toolchain.py: a tileiras, a toolkit
prefix or a pip --target folder); an empty A (the default) is the pinned toolchain cuTile finds by
itself. Each unit of compile_matrix (`--units ci`: units_for(arch), what CI compiles; `cover`: the
covering set; `full`: every specialization) is compiled for each --arch (default sm_90, sm_100,
sm_103, sm_120) with export_kernel, cuTile's cache off, in --jobs processes per toolchain (default one
per core), A's units first, then B's. For each unit and arch the table gives pass/fail, registers,
stack frame and static shared memory (cubin_resources.resources) and compile seconds under A and B,
and marks what differs; the summary counts the units whose result, registers, frame or shared memory
changed and the total compile seconds. Exit 1 when a unit compiles under one toolchain and not the
other.
"""
from __future__ import annotations

import argparse
import io
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

ARCHS = ("sm_90", "sm_100", "sm_103", "sm_120")
FIELDS = ("regcount", "frame", "smem")


def _init(toolchain: str) -> None:
    os.environ["CUDA_TILE_CACHE_DIR"] = "off"
    if toolchain:
        os.environ["SSDCHECK_TILEIRAS"] = toolchain
    else:
        os.environ.pop("SSDCHECK_TILEIRAS", None)


def cubin(job: tuple[str, str]) -> bytes:
    """One (unit text, arch) of compile_matrix compiled under the toolchain _init set: its cubin."""
    from kernels.cutile import compile_matrix as cm  # noqa: PLC0415 - after _init set the toolchain
    text, arch = job
    unit = next(u for u in cm.enumerate_matrix() if str(u) == text)
    buf = io.BytesIO()
    cm.export(unit, arch, buf)
    return buf.getvalue()


def _compile(job: tuple[str, str]) -> dict:
    """One (unit text, arch): ok, seconds, error, and the kernel's resources."""
    from lab.scripts.cubin_resources import resources  # noqa: PLC0415
    t0 = time.time()
    try:
        blob = cubin(job)
    except Exception as e:  # noqa: BLE001 - reported per unit
        return {"ok": False, "s": time.time() - t0, "error": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
    secs = time.time() - t0
    res = resources(blob)
    kern = next((v for k, v in res.items() if "regcount" in v), {})
    smem = sum(v.get("smem", 0) for v in res.values())
    return {"ok": bool(blob), "s": secs, "error": "", "regcount": kern.get("regcount"),
            "frame": kern.get("frame", 0), "smem": smem}


def _identity(toolchain: str) -> dict:
    from kernels.cutile.toolchain import identity  # noqa: PLC0415
    env = dict(os.environ)
    env.pop("SSDCHECK_TILEIRAS", None)
    if toolchain:
        env["SSDCHECK_TILEIRAS"] = toolchain
    return identity(env)


def run(toolchain: str, jobs: list[tuple[str, str]], workers: int, fn=_compile) -> list:
    """fn(job) for each (unit text, arch) under `toolchain`, in `workers` processes (default: _compile)."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"), initializer=_init,
                             initargs=(toolchain,)) as ex:
        return list(ex.map(fn, jobs))


def _cell(r: dict) -> str:
    if not r["ok"]:
        return "FAIL"
    return f"{r['regcount']} / {r['frame']} / {r['smem']}"


def table(jobs, res_a, res_b) -> tuple[list[str], dict]:
    lines = ["| unit | arch | A: regs / frame B / smem B | B: regs / frame B / smem B | A s | B s | differs |",
             "| --- | --- | --- | --- | ---: | ---: | --- |"]
    counts = {"units": len(jobs), "result": 0, "regcount": 0, "frame": 0, "smem": 0, "a_s": 0.0, "b_s": 0.0}
    for (unit, arch), a, b in zip(jobs, res_a, res_b):
        diff = []
        if a["ok"] != b["ok"]:
            diff.append("compiles under " + ("A only" if a["ok"] else "B only"))
            counts["result"] += 1
        elif a["ok"]:
            for f in FIELDS:
                if a.get(f) != b.get(f):
                    diff.append(f"{f} {a.get(f)} -> {b.get(f)}")
                    counts[f] += 1
        counts["a_s"] += a["s"]
        counts["b_s"] += b["s"]
        err = "; ".join(f"{w}: {r['error'][:120]}" for w, r in (("A", a), ("B", b)) if r["error"])
        name = unit.replace("|", "\\|")   # a table cell
        lines.append(f"| `{name}` | {arch} | {_cell(a)} | {_cell(b)} | {a['s']:.1f} | {b['s']:.1f} | "
                     f"{', '.join(diff) or '-'}{' (' + err + ')' if err else ''} |")
    return lines, counts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", default="", metavar="TOOLCHAIN", help="SSDCHECK_TILEIRAS for A (default: the pinned one)")
    ap.add_argument("--b", required=True, metavar="TOOLCHAIN", help="SSDCHECK_TILEIRAS for B")
    ap.add_argument("--arch", action="append", help=f"repeatable (default {', '.join(ARCHS)})")
    ap.add_argument("--units", choices=("ci", "cover", "full"), default="ci")
    ap.add_argument("--match", action="append", metavar="TEXT", help="only units whose text contains TEXT")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1, help="processes (default: one per core)")
    ap.add_argument("--out", metavar="PATH.md", help="also write the table here")
    args = ap.parse_args(argv)
    from kernels.cutile import compile_matrix as cm  # noqa: PLC0415
    jobs = []
    for arch in args.arch or ARCHS:
        units = {"ci": lambda: cm.units_for(arch), "cover": lambda: cm.distinct(cm.covering_set()),
                 "full": lambda: cm.distinct(cm.enumerate_matrix())}[args.units]()
        if args.match:
            units = [u for u in units if any(m in str(u) for m in args.match)]
        jobs += [(str(u), arch) for u in units]
    if not jobs:
        ap.error("no unit to compile (--match?)")
    ids = {w: _identity(t) for w, t in (("A", args.a), ("B", args.b))}
    out = [f"toolchain {w}: {(args.a or '(pinned)') if w == 'A' else args.b}: " +
           ", ".join(f"{k} {v}" for k, v in ids[w].items() if not k.endswith("_path")) for w in ("A", "B")]
    t0 = time.time()
    res_a = run(args.a, jobs, args.jobs)
    t1 = time.time()
    res_b = run(args.b, jobs, args.jobs)
    t2 = time.time()
    lines, c = table(jobs, res_a, res_b)
    out += ["", *lines, "",
            f"{c['units']} unit-arch compiles, {args.jobs} processes: A {t1 - t0:.0f} s wall "
            f"({c['a_s']:.0f} s summed), B {t2 - t1:.0f} s wall ({c['b_s']:.0f} s summed); "
            f"pass/fail differs in {c['result']}, registers in {c['regcount']}, frame in {c['frame']}, "
            f"shared memory in {c['smem']}"]
    text = "\n".join(out)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if c["result"] else 0


if __name__ == "__main__":
    sys.exit(main())
