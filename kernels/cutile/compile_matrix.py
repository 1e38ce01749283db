"""Every kernel configuration the dispatch table can choose, compiled ahead of time on the CPU.

    python -m kernels.cutile.compile_matrix --arch sm_90            # the full matrix (CI compiles units_for)
    python -m kernels.cutile.compile_matrix --arch sm_120 --cover   # a covering set
    python -m kernels.cutile.compile_matrix --list
    python -m kernels.cutile.compile_matrix --match 'chunk_scan[float32|BL=64,BP=64,BN=128' -j 1   # one unit's compile time

A compile unit is (kernel, Config from dispatch.TABLE, element dtype). The full matrix is every
distinct config of every kernel times every dtype the kernel can see (x's dtype, or dt's dtype for
chunk_cumsum). A covering set holds each kernel's every constant value and occupancy at least once
(dtypes rotate across its picks). units_for(arch) is what CI compiles for an architecture
(tests/test_cutile_compile.py says why each gets what it gets), one unit per specialization.
Units compile with cuda.tile.compilation.export_kernel to a cubin, using the array layout the
launcher guarantees (contiguous, 16-byte aligned, int32 indexing, no aliasing).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from multiprocessing import get_context

from kernels.cutile import dispatch
from kernels.cutile.dispatch import ELEMENT_DTYPES, Config

# sm_90, the GPU the suite runs on, compiles the two-width set (every config in float32 and bfloat16,
# every kernel in float16) where SSDCHECK_COMPILE_SM90=full; by default a covering set as the others do:
# the GPU gate runs every row of the dispatch table on sm_90 (tests/test_strategies.py checks its draws
# reach them), and the full set was 560 CPU seconds of a 2-core CI run's 15 minutes (2026-12-07).
_SM90_FULL = os.environ.get("SSDCHECK_COMPILE_SM90", "cover") == "full"
TWO_WIDTH_ARCHS = ("sm_90",) if _SM90_FULL else ()
COVER_ARCHS = ("sm_100", "sm_120") if _SM90_FULL else ("sm_90", "sm_100", "sm_120")
# sm_103 is sm_100's sibling (the same SM budgets, the same tcgen05 lowering): each kernel once, its
# cheapest unit of the covering set (smoke_set), proves the target builds every kernel; its covering set
# was 260 CPU seconds of CI (lab/reports/2026-12-06-toolchain-13.5-compile.md), the smoke set about 32.
SMOKE_ARCHS = ("sm_103",)
CI_ARCHS = TWO_WIDTH_ARCHS + COVER_ARCHS + SMOKE_ARCHS
HALF_WIDTH = ("bfloat16", "float16")          # 16-bit element types: one code path, two element types


@dataclass(frozen=True)
class Unit:
    kernel: str
    config: Config
    dtype: str

    def __str__(self) -> str:
        return f"{self.kernel}[{self.dtype}|{self.config}]"


def enumerate_matrix() -> list[Unit]:
    """Every (kernel, config, dtype) the launcher can launch."""
    return [Unit(k, cfg, dt) for k in dispatch.KERNEL_NAMES for cfg in dispatch.configs(k)
            for dt in ELEMENT_DTYPES]


def covering_set(units: list[Unit] | None = None) -> list[Unit]:
    """A small subset holding, per kernel, each constant value and occupancy at least once; dtypes
    rotate over the picks so every dtype shows up too (greedy set cover)."""
    units = enumerate_matrix() if units is None else units

    def features(u: Unit) -> set:
        f = {(u.kernel, "occupancy", u.config.occupancy)}
        return f | {(u.kernel, name, value) for name, value in u.config.constants}

    need = set().union(*(features(u) for u in units)) if units else set()
    chosen: list[Unit] = []
    while need:
        used = {u.dtype for u in chosen}
        best = max(units, key=lambda u: (len(features(u) & need), u.dtype not in used))
        chosen.append(best)
        need -= features(best)
    return chosen


def smoke_set(units: list[Unit] | None = None) -> list[Unit]:
    """Each kernel once: its covering-set unit with the smallest tile, 16-bit before float32 (the
    float32 chunk_scan units of float16's tile compiled in 1.4x to 2.6x its time on sm_103, in
    2026-12-06-toolchain-13.5-compile/ci.md of lab/reports/raw/2026-12-06.tar.xz), then the shorter
    block of the sequence."""
    cover = covering_set(units)

    def cost(u: Unit) -> tuple:
        c = dict(u.config.constants)
        tile = c.get("BL", 1) * c.get("BP", 1) * c.get("BN", 1)
        return tile, u.dtype == "float32", c.get("BL", 0)

    return [min((u for u in cover if u.kernel == k), key=cost)
            for k in dict.fromkeys(u.kernel for u in cover)]


def two_width_set(units: list[Unit] | None = None) -> list[Unit]:
    """Every unit in float32 and bfloat16, and each kernel's units in float16 only as far as every
    (kernel, float16) is there once: float16 and bfloat16 run one code path with another element type
    (bf16 the dtype models train in), and on the GPU the JIT compiles whatever runs, so the gate meets
    a float16 config that fails to compile there."""
    units = enumerate_matrix() if units is None else units
    chosen = [u for u in units if u.dtype not in HALF_WIDTH[1:]]
    have = {(u.kernel, u.dtype) for u in chosen}
    return chosen + [u for u in units if (u.kernel, u.dtype) not in have and not have.add((u.kernel, u.dtype))]


def specialization(unit: Unit) -> tuple:
    """What a compile of `unit` depends on: the kernel, its signature as cuTile names it (array dtypes
    and layouts, constants) and its compiler hints. Units with one key compile to one cubin (a kernel
    whose arrays do not take the element dtype, say)."""
    from cuda.tile.compilation import mangle_kernel_name  # noqa: PLC0415
    symbol = mangle_kernel_name(_kernel_fn(unit.kernel)._pyfunc.__name__, signature(unit))
    return unit.kernel, symbol, tuple(sorted(unit.config.hints().items()))


def distinct(units: list[Unit]) -> list[Unit]:
    """The first unit of each specialization, in order."""
    seen: set = set()
    return [u for u in units if not (k := specialization(u)) in seen and not seen.add(k)]


def units_for(arch: str) -> list[Unit]:
    """What CI compiles for `arch`: two_width_set, a covering set or smoke_set, one unit per specialization."""
    if arch in TWO_WIDTH_ARCHS:
        units = two_width_set()
    elif arch in COVER_ARCHS:
        units = covering_set()
    elif arch in SMOKE_ARCHS:
        units = smoke_set()
    else:
        raise ValueError(f"arch: expected one of {CI_ARCHS}, got {arch!r}")
    return distinct(units)


def _kernel_fn(name: str):
    from kernels.cutile import kernels as K  # noqa: PLC0415
    return {"chunk_cumsum": K.chunk_cumsum_kernel, "chunk_state": K.chunk_state_kernel,
            "chunk_scan": K.chunk_scan_kernel, "varlen_state": K.varlen_state_kernel,
            "chunk_walk": K.chunk_walk_kernel, "segment_state": K.segment_state_kernel,
            "segment_pass": K.segment_pass_kernel}[name]


def signature(unit: Unit):
    """The KernelSignature of a unit: its arrays, scalars and constants in parameter order."""
    import cuda.tile as ct  # noqa: PLC0415
    from cuda.tile.compilation import ArrayConstraint, CallingConvention, KernelSignature, ScalarConstraint  # noqa: PLC0415

    def arr(dtype, ndim):
        return ArrayConstraint(dtype, ndim, index_dtype=ct.int32, stride_lower_bound_incl=0, alias_groups=(),
                               may_alias_internally=False, stride_constant=(None,) * (ndim - 1) + (1,),
                               base_addr_divisible_by=16)

    el = {"float32": ct.float32, "float16": ct.float16, "bfloat16": ct.bfloat16}[unit.dtype]
    f32, i32 = ct.float32, ct.int32
    si, sf = ScalarConstraint(ct.int32), ScalarConstraint(ct.float32)
    params = {
        # dt, A, dt_bias, dtc, cs | seqlen, chunk_size, has_bias, dt_softplus, dt_min, dt_max
        "chunk_cumsum": [arr(el, 3), arr(f32, 1), arr(f32, 1), arr(f32, 3), arr(f32, 3), si, si, si, si, sf, sf],
        # x, B, dtc, cs, init, seq_idx, states, final | seqlen, chunk_size, nchunks, hpg, has_init, has_seq
        "chunk_state": [arr(el, 4), arr(el, 4), arr(f32, 3), arr(f32, 3), arr(f32, 4), arr(i32, 2), arr(el, 5),
                        arr(f32, 4), si, si, si, si, si, si],
        # x, z, B, C, dtc, cs, states, D, seq_idx, out | seqlen, chunk_size, nchunks, hpg, has_seq, has_d, has_z
        "chunk_scan": [arr(el, 4), arr(el, 4), arr(el, 4), arr(el, 4), arr(f32, 3), arr(f32, 3), arr(el, 5),
                       arr(f32, 2), arr(i32, 2), arr(el, 4), si, si, si, si, si, si, si],
        # x, z, B, C, dtc, cs, init, D, out, final | nchunks, hpg, has_init, has_d, has_z
        "chunk_walk": [arr(el, 4), arr(el, 4), arr(el, 4), arr(el, 4), arr(f32, 3), arr(f32, 3), arr(f32, 4),
                       arr(f32, 2), arr(el, 4), arr(f32, 4), si, si, si, si, si],
        # x, B, dtc, cs, ends, decay | nchunks, hpg
        "segment_state": [arr(el, 4), arr(el, 4), arr(f32, 3), arr(f32, 3), arr(f32, 4), arr(f32, 3), si, si],
        # ends, decay, init, entering, final | nseg, has_init (fp32 only: the dtype names the unit)
        "segment_pass": [arr(f32, 4), arr(f32, 3), arr(f32, 4), arr(f32, 4), arr(f32, 4), si, si],
        # x, B, dtc, cs, states, cu_seqlens, out | chunk_size, hpg
        "varlen_state": [arr(el, 4), arr(el, 4), arr(f32, 3), arr(f32, 3), arr(el, 5), arr(i32, 1), arr(el, 4),
                         si, si],
    }[unit.kernel]
    params += [v for _, v in unit.config.constants]
    return KernelSignature(params, CallingConvention.cutile_python_v1())


def export(unit: Unit, arch: str, target, sig=None) -> None:
    """Compile one unit (its compiler hints included) for `arch` into `target`, a path or a binary file.
    `sig`: a KernelSignature to compile instead of signature(unit), e.g. the one cuTile's JIT used at a
    launch (lab/scripts/cubin_resources.py); its arrays' dtypes then win over unit.dtype."""
    from cuda.tile.compilation import export_kernel  # noqa: PLC0415
    k = _kernel_fn(unit.kernel)
    if unit.config.hints():
        k = k.replace_hints(**unit.config.hints())
    export_kernel(k, [sig or signature(unit)], target, gpu_code=arch, output_format="cubin")


def compile_unit(unit: Unit, arch: str, out_dir: str | None = None) -> tuple[str, bool, float, str]:
    """Compile one unit for `arch`; -> (unit text, ok, seconds, error text)."""
    import io  # noqa: PLC0415
    t0 = time.time()
    try:
        target = io.BytesIO() if out_dir is None else os.path.join(
            out_dir, f"{unit.kernel}-{unit.dtype}-{abs(hash(unit.config)) % 10**8}-{arch}.cubin")
        export(unit, arch, target)
        size = len(target.getvalue()) if isinstance(target, io.BytesIO) else os.path.getsize(target)
        if size == 0:
            return str(unit), False, time.time() - t0, "empty cubin"
        return str(unit), True, time.time() - t0, ""
    except Exception as e:  # noqa: BLE001 - reported per unit
        return str(unit), False, time.time() - t0, f"{type(e).__name__}: {e}"


def _worker_init():
    os.environ.setdefault("CUDA_TILE_CACHE_DIR", "off")   # measure real compiles, not cache hits


def compile_all(units: list[Unit], arch: str, jobs: int = 2) -> list[tuple[str, bool, float, str]]:
    """Compile units in `jobs` processes (tileiras is mostly single-threaded)."""
    results = []
    with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=_worker_init) as ex:
        futs = [ex.submit(compile_unit, u, arch) for u in units]
        for f in as_completed(futs):
            results.append(f.result())
    return results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", action="append", help="sm_90, sm_100, ... (repeatable)")
    ap.add_argument("--cover", action="store_true", help="compile a covering set instead of the full matrix")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--match", action="append", metavar="TEXT",
                    help="only the units whose text (as --list prints it) contains TEXT (repeatable)")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    units = covering_set() if args.cover else enumerate_matrix()
    if args.match:
        units = [u for u in units if any(m in str(u) for m in args.match)]
        if not units:
            ap.error(f"--match: no unit's text contains any of {args.match}; --list prints them")
    if args.list:
        for u in units:
            print(u)
        print(f"{len(units)} units")
        return 0
    bad = 0
    for arch in args.arch or ["sm_90"]:
        t0 = time.time()
        for name, ok, secs, err in compile_all(units, arch, args.jobs):
            print(f"{'ok ' if ok else 'FAIL'} {arch} {secs:6.1f}s {name} {err[:400]}")
            bad += not ok
        print(f"{arch}: {len(units)} units in {time.time() - t0:.1f}s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
