"""Registers and stack frame per thread of each kernel in a cubin, read from its ELF (no CUDA tools).

    python lab/scripts/cubin_resources.py a.cubin [b.cubin ...]
    python lab/scripts/cubin_resources.py --compile-scan bfloat16 128 --occ 2  # chunk_scan, BN128, occupancy 2
    python lab/scripts/cubin_resources.py --compile-sweep FAST                 # the sweep's FAST candidates

The toolchain cuTile ships (tileiras) has no resource report and no cuobjdump, so this reads what the
driver reads: the EIATTR records of the `.nv.info` section, keyed by symbol (REGCOUNT = registers per
thread; FRAME_SIZE = the per-thread stack frame, where spilled registers live; MIN/MAX_STACK_SIZE),
and the sizes of the `.text.<kernel>` and `.nv.shared.<kernel>` sections. A frame above zero means
local-memory traffic (spills, or arrays the compiler could not keep in registers), which usually
costs time. `--compile-scan DTYPE BN` compiles chunk_scan_kernel for sm_90 (the general path at the
table's BL/BP, LAT 0, PERSIST 0, occupancy 3) with cuTile's cache off and prints the seconds and
resources; `--occ N` sets the occupancy hint, `--out DIR` writes each cubin there. `--same-code A B` says whether
two cubins hold the same machine code (debug sections and line info aside). `--compile-sweep MATCH`
compiles the bench sweep's candidates whose label holds MATCH (bf16, sm_90, CUTILE_COMPILE_JOBS
processes) and prints each one's resources; with `--like FILE` it compiles them in the array
specialization the GPU's JIT used, demangled from the kernel symbols in FILE (Nsight Compute's output
names them): compile_matrix's units assume no divisibility and can differ a lot (measured on the H200,
lab/reports/2026-11-30-dlat-rows.md: the FAST scan 168 registers and a 528 B frame there, 80 registers and none as the race ran it).

    python lab/scripts/cubin_resources.py --compile-sweep WW8 --like ncu-details.txt   # an Nsight Compute text page
    python lab/scripts/cubin_resources.py --compile-sweep WW8 --shape b2-l32768-h32-p64-n64-g1@64

    python lab/scripts/cubin_resources.py --compile-config chunk_walk:BN=64,SPLIT=1,BP=32 --shape b8-l2048-h32-p64-n64-g1@64

`--compile-config SPEC [--out DIR] [--remarks]` compiles each kernel an override names
(SSDCHECK_CUTILE_CONFIG syntax) in the JIT specialization of `--shape`, with the override in force
while the launches are recorded; `--remarks` prints tileiras's remarks per source line (which loads
became TMA, which fell back and why, which products took tensor cores), read from a fresh compile cache.
`--shape ID[@CHUNK]` needs no GPU and no profiler: it runs the forward on CPU tensors with its CUDA
calls stubbed and derives each launch's specialization by the JIT's rule (modelled, and checked
against the symbol ncu recorded at that shape).
"""
from __future__ import annotations

import contextlib
import os
import re
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))   # the repository: kernels, bench

# EIATTR codes (the attribute byte of an .nv.info record) that describe per-function resources
EIATTR_NAMES = {0x11: "frame", 0x12: "min_stack", 0x23: "max_stack", 0x2f: "regcount"}
EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4


def _sections(blob: bytes):
    if blob[:4] != b"\x7fELF" or blob[4] != 2:
        raise ValueError("not a 64-bit ELF file")
    shoff, = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names_off = heads[shstrndx][4]

    def name(off):
        end = blob.index(b"\0", names_off + off)
        return blob[names_off + off:end].decode()

    return [(name(h[0]), h) for h in heads]


def _symbols(blob: bytes, secs) -> list[str]:
    for nm, h in secs:
        if h[1] == 2:                                   # SHT_SYMTAB
            strtab = secs[h[6]][1][4]                   # sh_link -> string table offset
            out = []
            for i in range(h[5] // h[9]):
                st_name, = struct.unpack_from("<I", blob, h[4] + i * h[9])
                end = blob.index(b"\0", strtab + st_name)
                out.append(blob[strtab + st_name:end].decode())
            return out
    return []


def resources(blob: bytes) -> dict[str, dict[str, int]]:
    """{function name: {"regcount": registers per thread, "frame": stack bytes per thread, "min_stack", "max_stack",
    "code_bytes", "smem": static shared memory bytes}}, with whichever of these the cubin records."""
    secs = _sections(blob)
    syms = _symbols(blob, secs)
    out: dict[str, dict[str, int]] = {}
    for nm, h in secs:
        for kind in (".text.", ".nv.shared."):
            if nm.startswith(kind) and not nm.startswith(".nv.shared.reserved"):
                out.setdefault(nm[len(kind):], {})["code_bytes" if kind == ".text." else "smem"] = h[5]
    for nm, h in secs:
        if nm != ".nv.info":
            continue
        pos, end = h[4], h[4] + h[5]
        while pos + 2 <= end:
            fmt, attr = blob[pos], blob[pos + 1]
            pos += 2
            if fmt == EIFMT_NVAL:
                continue
            if fmt == EIFMT_BVAL:
                pos += 1
                continue
            if fmt == EIFMT_HVAL:
                pos += 2
                continue
            size, = struct.unpack_from("<H", blob, pos)
            pos += 2
            if attr in EIATTR_NAMES and size == 8:
                sym, value = struct.unpack_from("<II", blob, pos)
                if sym < len(syms):
                    out.setdefault(syms[sym], {})[EIATTR_NAMES[attr]] = value
            pos += size
    return out


def text_of(blob: bytes) -> dict[str, bytes]:
    """{kernel name: its machine code}: equal bytes mean the same generated code."""
    secs = _sections(blob)
    return {nm[len(".text."):]: blob[h[4]:h[4] + h[5]] for nm, h in secs if nm.startswith(".text.")}


def compile_unit(kernel: str, cfg, dtype: str, arch: str = "sm_90", sig=None) -> tuple[bytes, float]:
    """One kernel's cubin at a dispatch Config (its compiler hints included) and element dtype, in
    compile_matrix's signature or `sig`, with cuTile's cache off, and the seconds it took."""
    import io
    os.environ.setdefault("CUDA_TILE_CACHE_DIR", "off")
    from kernels.cutile import compile_matrix as cm
    buf = io.BytesIO()
    t0 = time.time()
    cm.export(cm.Unit(kernel, cfg, dtype), arch, buf, sig)
    return buf.getvalue(), time.time() - t0


def compile_scan(dtype: str, bn: int, arch: str = "sm_90", occ: int = 3) -> tuple[bytes, float]:
    """chunk_scan_kernel's cubin (general path) at the table's tiles with dstate tile `bn`."""
    from kernels.cutile.dispatch import scan_config
    return compile_unit("chunk_scan", scan_config(BN=bn, occupancy=occ), dtype, arch)


KERNEL_SYMBOL = re.compile(r"\b(?:chunk_cumsum|chunk_state|chunk_scan|varlen_state)_kernel_K\w+")


def jit_symbols(text: str) -> dict[str, str]:
    """{kernel ("chunk_scan", ...): the symbol cuTile's JIT gave it}, from the kernel symbols in `text`
    (e.g. Nsight Compute's output, which names each launched kernel; the first one of a kernel in
    sorted order). A symbol demangles to the KernelSignature it was compiled with. compile_matrix
    exports one specialization per unit with no shape or stride divisibility assumed; the JIT specializes
    on the launch's arrays (divisibility by 16, constant unit dimensions), which changes the machine code:
    read resources from the JIT's signature to see the kernel a GPU run actually executed."""
    out = {}
    for sym in sorted(set(KERNEL_SYMBOL.findall(text))):
        out.setdefault(sym[:sym.index("_kernel_K")], sym)
    return out


def launches(shape_id: str, chunk: int = 64) -> list[tuple[object, object]]:
    """[(kernel as launched, with its hints; the KernelSignature cuTile's JIT compiles it with)] for
    ssd_forward on the race shape `shape_id`, found on the CPU: the forward runs on CPU tensors with its
    CUDA calls stubbed, and each launch's arguments become a signature by the JIT's rule
    (kernels/cutile/precompile.py). No GPU needed."""
    from lab.bench.race import make_inputs
    from lab.bench.shapes import grid
    shape = {s.id: s for s in grid()}[shape_id]
    return recorded_launches(dict(make_inputs(shape, 0, device="cpu"), chunk_size=chunk))


def recorded_launches(kwargs: dict) -> list[tuple[object, object]]:
    """launches() for ssd_forward(**kwargs) on CPU tensors (kernels/cutile/precompile.py)."""
    from kernels.cutile.precompile import recorded_launches as recorded
    return recorded(kwargs)


def recorded_symbols(kwargs: dict) -> frozenset[str]:
    """The kernel symbols cuTile's JIT gives the launches of ssd_forward(**kwargs) on CPU tensors
    (recorded_launches): one per signature, so one per cold compile."""
    from cuda.tile.compilation import mangle_kernel_name
    return frozenset(mangle_kernel_name(k._pyfunc.__name__, sig) for k, sig in recorded_launches(kwargs))


@contextlib.contextmanager
def unfilled_normals():
    """torch.randn giving zeros while it is in force: a launch signature takes the arrays' dtypes,
    shapes, strides and alignment, never their values, and drawing the normals of GPU-sized problems
    is most of the time of counting their signatures (72 of 84 s in one test, profiled). Zeros, not
    unfilled memory, so that code run on the values (a property's comparisons) does the same each time."""
    import torch
    real = torch.randn
    torch.randn = lambda *shape, generator=None, dtype=None: torch.zeros(*shape, dtype=dtype)
    try:
        yield
    finally:
        torch.randn = real


def launch_symbols(shape_id: str, chunk: int = 64) -> dict[str, str]:
    """{kernel ("chunk_scan", ...): the symbol cuTile's JIT gives it} at that shape and chunk (launches)."""
    from cuda.tile.compilation import mangle_kernel_name
    return {k._pyfunc.__name__.removesuffix("_kernel"): mangle_kernel_name(k._pyfunc.__name__, sig)
            for k, sig in launches(shape_id, chunk)}


def compile_like(kernel: str, cfg, symbol: str, arch: str = "sm_90") -> tuple[bytes, float]:
    """`kernel` at Config `cfg` (constants and hints) in the array specialization of the JIT's `symbol`
    (its trailing constants replaced by cfg's), with cuTile's cache off, and the seconds it took."""
    from cuda.tile.compilation import ConstantConstraint, KernelSignature, demangle_kernel_name
    _, sig = demangle_kernel_name(symbol)
    params = list(sig.parameters)
    while params and isinstance(params[-1], ConstantConstraint):   # the symbol's own constants (a table
        params.pop()                                                # of an older session may have fewer)
    params += [ConstantConstraint(v) for _, v in cfg.constants]
    # the dtype argument is only a label here: the symbol's arrays carry their own
    return compile_unit(kernel, cfg, "bfloat16", arch, KernelSignature(params, sig.calling_convention))


def _sweep_unit(item) -> str:
    kernel, label, cfg, symbol = item
    blob, secs = compile_unit(kernel, cfg, "bfloat16") if symbol is None else compile_like(kernel, cfg, symbol)
    res = next(iter(resources(blob).values()))
    return f"{kernel:11s} {label:30s} {secs:6.1f} s  {res}"


def compile_sweep(match: str, jobs: int, like: dict | None = None) -> None:
    """Every distinct (kernel, Config) of the sweep's candidates matching `match` (lab.bench.sweep_cutile
    --match), compiled for sm_90 in bf16, with its registers, stack frame and shared memory: a spill
    shows here, before any GPU time is spent on the candidate. `like` ({kernel: JIT symbol},
    jit_symbols): compile those kernels in the JIT's specialization instead of compile_matrix's."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context
    from lab.bench.sweep_cutile import plan
    like = like or {}
    items = {(k, str(cfg)): (k, lab, cfg, like.get(k)) for _, _, k, lab, cfg in plan(match=match) if cfg is not None}
    with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
        for line in pool.map(_sweep_unit, sorted(items.values(), key=lambda it: (it[0], it[1]))):
            print(line, flush=True)


def parse_remarks(text: str) -> list[dict]:
    """tileiras's YAML remarks (`--remarks=all --remark-format=yaml`, as cuTile keeps them in its compile
    cache) -> [{"kind": "Passed"|"Failure"|..., "name", "line", and the remark's Args}], by line."""
    out = []
    for doc in text.split("--- !")[1:]:
        name = re.search(r"^Name:\s+(\S+)", doc, re.M)
        line = re.search(r"DebugLoc:.*Line: (\d+)", doc)
        entry = {"kind": doc.split("\n", 1)[0].strip(), "name": name.group(1) if name else "?",
                 "line": int(line.group(1)) if line else 0}
        entry.update((k, v.strip().strip("'")) for k, v in re.findall(r"^\s+- (\w+):\s+(.*)$", doc, re.M)
                     if k != "RemarkId")
        out.append(entry)
    return sorted(out, key=lambda e: (e["line"], e["name"]))


def cached_remarks(cache_dir: str, seen: set) -> list[tuple[str, list[dict]]]:
    """(kernel symbol, remarks) of each entry of cuTile's compile cache in `cache_dir` not in `seen`
    (its keys, updated): tileiras's remarks are kept in the entry's metadata."""
    import json
    import sqlite3
    db = os.path.join(cache_dir, "cache.db")
    if not os.path.exists(db):
        return []
    out = []
    with sqlite3.connect(db) as con:
        for key, meta in con.execute("select key, metadata from cache"):
            if key in seen:
                continue
            seen.add(key)
            m = json.loads(meta or "{}")
            out.append(((m.get("kernel_names") or ["?"])[0], parse_remarks(m.get("remarks", ""))))
    return out


def remark_line(e: dict) -> str:
    what = e.get("Instruction") or e.get("Reason") or e.get("Remark", "")
    shape = f" {e['Shape']}" if "Shape" in e else ""
    return f"  line {e['line']:4d} {e['kind']:8s} {e['name'].removeprefix('RemarkMemory').removeprefix('Remark')}: {what}{shape}"


def _take(args: list, flag: str, default=None):
    """The value after `flag` in `args` (both removed), or `default` where the flag is absent."""
    if flag not in args:
        return default
    i = args.index(flag)
    value = args[i + 1]
    del args[i:i + 2]
    return value


def main(argv=None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    remarks_dir = None
    if "--remarks" in args:   # before cuTile reads its cache directory: a fresh one holds only these compiles
        import tempfile
        args.remove("--remarks")
        if args[:1] != ["--compile-config"]:
            raise SystemExit("--remarks: only with --compile-config")
        remarks_dir = tempfile.mkdtemp(prefix="cutile-remarks-")
        os.environ["CUDA_TILE_CACHE_DIR"] = remarks_dir
    if args[:1] == ["--same-code"]:
        a, b = (text_of(open(f, "rb").read()) for f in args[1:3])
        same = list(a.values()) == list(b.values())
        print("same machine code" if same else "different machine code", {k[:40]: len(v) for k, v in a.items()},
              {k[:40]: len(v) for k, v in b.items()})
        return 0 if same else 1
    if args[:1] == ["--compile-sweep"]:
        like = None
        if "--like" in args:
            with open(args[args.index("--like") + 1]) as f:
                like = jit_symbols(f.read())
        if "--shape" in args:
            sid, _, chunk = args[args.index("--shape") + 1].partition("@")
            like = launch_symbols(sid, int(chunk or 64))
        compile_sweep(args[1], int(os.environ.get("CUTILE_COMPILE_JOBS", "2")), like)
        return 0
    if args[:1] == ["--compile-config"]:
        # one override (SSDCHECK_CUTILE_CONFIG syntax) compiled in the JIT specialization of a race shape
        # where that override is in force: a new path's registers and frame before any GPU time
        from kernels.cutile import dispatch, launcher
        out_dir = _take(args, "--out")
        cfgs = dispatch.parse_configs(args[1], "--compile-config")
        sid, _, chunk = args[args.index("--shape") + 1].partition("@")
        launcher._OVERRIDE.update(cfgs)
        syms = launch_symbols(sid, int(chunk or 64))
        seen: set = set()
        for key, cfg in cfgs.items():
            kernel = key.partition("@")[0]
            if kernel not in syms:
                print(f"{kernel}: not launched at {sid} with this override", flush=True)
                continue
            blob, secs = compile_like(kernel, cfg, syms[kernel])
            if remarks_dir:
                for _, found in cached_remarks(remarks_dir, seen):
                    print(f"{kernel} {cfg}: tileiras's remarks, by source line of kernels/cutile/kernels.py")
                    print("\n".join(remark_line(e) for e in found), flush=True)
            if out_dir:
                os.makedirs(out_dir, exist_ok=True)
                with open(os.path.join(out_dir, f"{kernel}-{cfg}-{sid}-sm_90.cubin".replace(",", "_")), "wb") as f:
                    f.write(blob)
            print(f"{kernel} {cfg} at {sid}: {secs:.1f} s, {next(iter(resources(blob).values()))}", flush=True)
        return 0
    if args[:1] == ["--compile-scan"]:
        out_dir, occ = _take(args, "--out"), int(_take(args, "--occ", 3))
        dtype, bn = args[1], int(args[2])
        blob, secs = compile_scan(dtype, bn, occ=occ)
        if out_dir:
            with open(f"{out_dir}/chunk_scan-{dtype}-BN{bn}-occ{occ}-sm_90.cubin", "wb") as f:
                f.write(blob)
        for k, r in resources(blob).items():
            print(f"chunk_scan {dtype} BN{bn} occ{occ}: {secs:.1f} s, {k[:40]}: {r}", flush=True)
        return 0
    for path in args:
        with open(path, "rb") as f:
            for k, r in resources(f.read()).items():
                print(f"{path}: {k}: {r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
