"""The triage battery: a few maximal-coverage problems per implementation, checked first by every property.

A typical kernel bug shows on a problem that exercises everything at once: every declared option,
heads whose decays span three decades (weak decay beside decay strong enough that exp of a chunk's
cumulative sum leaves float32's range), several groups with an odd number of heads per group,
headdim != dstate, the first problem with the largest inner dimensions (so tile loops over headdim
and dstate run at the first example of the first test), and per dtype two problems that take the two paths
kernels have: a partial last chunk with sequence boundaries at and one token beside chunk edges
(packed sequences, varlen states; batch 1), and whole chunks without seq_idx at batch 2 (the unmasked
fast paths); without the packed problem (seqlen a multiple of the chunk) the first dtype's whole-chunk
problem again below a 64-wide tile, so that the first compile key meets two shapes.
tests/test_properties.py runs them as Hypothesis explicit examples (`examples()`), before any drawn
one and on top of the profile's example count, so such a bug fails the first example of the first
test. The problems of one dtype share their compile class with the draws that reuse
it (properties/strategies.py), so the battery's compiles are the draws' first compiles too.
"""
from __future__ import annotations

from properties.menus import CPU_DIMS, GPU_DIM_PAIRS, GPU_HEADS
from properties.problem import SSDProblem

SLOTS = 6   # explicit examples per test: 2 problems per dtype, at most 3 dtypes
# The heads' per-chunk log-decays, 3 decades around 4: about 0.13 to 126. The strongest head's chunk
# sum, 126 (182 in log2), leaves float32's exp range (2^128) and float16's, where an implementation
# must rescale or choose a form that cannot overflow (cuTile's factored decay stops at 2^64): at a
# centre of 1 the strongest was 32 (46 in log2), and a bug in that choice outlived a 60 s fuzz run.
DECAY, DECADES = 4.0, 3.0
LARGE_DIMS = (128, 256)   # the first problem's (headdim, dstate) on the GPU, where declared: 2+ tiles of each
DTYPE_ORDER = ("float32", "bfloat16", "float16")   # on the CPU float32 first: the tightest tolerance shows most
# On the GPU bfloat16 first, float32 second: the first examples wait for compiles, and a float32 tensor-core
# kernel costs cuTile's compiler 4-10x a 16-bit one (on a 2-core CPU the general chunk_scan at the first
# problem's sizes took 10.4 s in float32, 1.0 s in bfloat16; the chunk-64 FAST scan 2.9 s against 0.65 s:
# lab/scripts/scan_compile_time.py --dtype); a structural bug dies at the first, cheap examples, a bug only
# float32's tolerance shows at the third. Each dtype takes the next chunk size, so bfloat16 takes 64.
DTYPE_ORDER_GPU = ("bfloat16", "float32", "float16")


def edge_starts(chunk: int) -> tuple[int, ...]:
    """Sequence starts of the packed battery problem: one token before, at, and one after chunk edges,
    and a sequence that starts at an edge and ends inside that chunk."""
    return (chunk - 1, chunk, chunk + chunk // 2, 2 * chunk + 1)


def _usable_chunks(info, gpu: bool) -> list[int]:
    return sorted(c for c in info.chunk_sizes if gpu or c <= 64) or sorted(info.chunk_sizes)


def _dims(info, gpu: bool) -> tuple[int, int]:
    """(headdim, dstate), different, within what `info` declares: the benchmark's 64 with 128 on the GPU."""
    pairs = GPU_DIM_PAIRS if gpu else tuple((p, n) for p in CPU_DIMS for n in CPU_DIMS)
    ok = [(p, n) for p, n in sorted(set(pairs), key=lambda pn: (abs(pn[0] - (64 if gpu else 8)), pn))
          if (info.headdims is None or p in info.headdims) and (info.dstates is None or n in info.dstates)]
    differ = [pn for pn in ok if pn[0] != pn[1]]
    if differ or ok:
        return (differ or ok)[0]
    return min(info.headdims or (16,)), min(info.dstates or (16,))


def _small_dims(info) -> tuple[int, int] | None:
    """The GPU draws' (headdim, dstate) below a 64-wide tile that `info` declares, headdim the larger."""
    pairs = sorted((p, n) for p, n in GPU_DIM_PAIRS if max(p, n) < 64 and p > n
                   and _declared(info.headdims, p) and _declared(info.dstates, n))
    return pairs[-1] if pairs else None


def _heads(info) -> int:
    """6 heads (2 groups of 3: a kernel pairing heads must not let a pair cross a group), else the
    first of the GPU draws' head counts the implementation takes (so draws can share its class)."""
    return next((h for h in (6,) + GPU_HEADS if h % info.nheads_multiple_of == 0), info.nheads_multiple_of)


_CACHE: dict = {}   # (id(info), gpu, large_first) -> (info, battery): KernelInfo holds dicts, so it is not hashable


def _battery(info, gpu: bool, large_first: bool = True) -> tuple[SSDProblem, ...]:
    hit = _CACHE.get((id(info), gpu, large_first))
    if hit is not None and hit[0] is info:
        return hit[1]
    opts = info.options
    # On the GPU each dtype's problems take the next chunk size from 64 up: dtypes are compile classes
    # of their own anyway, and the compile-aware draws that copy the battery then reach every chunk
    # size's kernels (at 64 alone, the chunk-128 aligned state row fell under 1% of the draws).
    chunks = ([c for c in sorted(info.chunk_sizes) if c >= 64] or _usable_chunks(info, gpu)) if gpu \
        else _usable_chunks(info, gpu)[:1]
    headdim, dstate = _dims(info, gpu)
    large = LARGE_DIMS if gpu and large_first and all(_declared(d, v) for d, v in zip((info.headdims, info.dstates), LARGE_DIMS)) \
        else (headdim, dstate)
    nheads = _heads(info)
    ngroups = 2 if "ngroups" in opts else 1
    # D of shape (h, p) on the packed problem, (h,) on the whole-chunk one: both forms where declared
    d_packed = "hp" if "D_headdim" in opts else ("h" if "D" in opts else None)
    d_whole = "h" if "D" in opts else d_packed
    out = []

    def sized(fields: dict) -> dict:   # the first problem (every test's first example): the large dimensions
        return {**fields, **({} if out else dict(headdim=large[0], dstate=large[1]))}

    for i, dtype in enumerate(d for d in (DTYPE_ORDER_GPU if gpu else DTYPE_ORDER) if d in info.dtypes):
        chunk = chunks[i % len(chunks)]
        common = dict(nheads=nheads, headdim=headdim, dstate=dstate, ngroups=ngroups, chunk_size=chunk,
                      dtype=dtype, decay=DECAY, decay_decades=DECADES, dt_mu=0.0, dt_softplus="dt_softplus" in opts,
                      dt_bias="dt_bias" in opts, dt_limit=(0.05, 1.0) if "dt_limit" in opts else None,
                      dt_dtype="input" if "dt_input_dtype" in opts and dtype != "float32" else "float32",
                      z="z" in opts, initial_states="initial_states" in opts,
                      final_states="final_states" in opts)
        # a 16-bit model's state cache in its dtype on the whole-chunk problem (and so on its model-layer
        # twins), its parameters (D, dt_bias) in it on the packed one; float32 on the other: both kinds of
        # server, per dtype (vLLM compiled none of the bf16-state problems: lab/reports/2026-12-06-production-modes.md)
        narrow = dtype != "float32"
        states_whole = "input" if narrow and "states_input_dtype" in opts else "float32"
        params_packed = "input" if narrow and "params_input_dtype" in opts else "float32"
        if not info.seqlen_multiple_of_chunk:
            # a partial last chunk; sequences start one token before, at and one after chunk edges, and
            # one starts at an edge and ends inside that chunk (its varlen state must not take the
            # state entering the chunk, which belongs to the sequence before)
            seqlen = 3 * chunk + 5
            starts = edge_starts(chunk) if "seq_idx" in opts else ()
            out.append(SSDProblem(batch=1, seqlen=seqlen, seq_starts=starts,
                                  varlen=bool(starts) and "varlen_states" in opts, seed=1, D=d_packed,
                                  params_dtype=params_packed, **sized(common)))
        elif "seq_idx" in opts:
            out.append(SSDProblem(batch=1, seqlen=3 * chunk, seq_starts=edge_starts(chunk),
                                  varlen="varlen_states" in opts, seed=1, D=d_packed, params_dtype=params_packed,
                                  **sized(common)))
        packed = bool(out) and out[-1].dtype == dtype   # this dtype's packed problem, just appended
        out.append(SSDProblem(batch=2, seqlen=3 * chunk, seed=2, D=d_whole, states_dtype=states_whole,
                              params_dtype="float32" if packed else params_packed,
                              **sized(common)))   # whole chunks, no seq_idx
    small = _small_dims(info)
    if gpu and large_first and info.seqlen_multiple_of_chunk and small and out[0].headdim > small[0]:
        # Without the packed problem a dtype meets one shape, so nothing in the battery calls the first
        # compile key (dtype, chunk size) twice with other sizes. This one does, below a 64-wide tile:
        # TileGym's autotune cache keyed without shapes then launches the large problem's tiles
        # (grid head_size // 64 = 0), a mutant a draw found at 22-95 s (lab/reports/2026-12-04-bf16-first-battery.md)
        out.append(out[0].replace(headdim=small[0], dstate=small[1], seed=3))
    if len(out) > SLOTS:
        raise ValueError(f"triage battery of {info.name}: {len(out)} problems, more than SLOTS={SLOTS}")
    _CACHE[(id(info), gpu, large_first)] = (info, tuple(out))
    return tuple(out)


WIDE_BATCH, WIDE_HEADS = 8, 32   # a model layer's production grid: 256+ (batch, head) pairs fill the GPU
STATE_BLOCKS = 264               # cuTile's chunk-state grid from which the table takes its wide rows


def _declared(values, v) -> bool:
    return values is None or v in values


def _wide_layers(problem: SSDProblem, info) -> list[SSDProblem]:
    """The dtype's model-layer twins at a production grid (batch 8 x 32+ heads, headdim 64), where
    kernels take paths only wide grids take, each left out where `info` does not declare its sizes:
    three whole chunks of 64 (cuTile's chunk walk: dstate 128 in float16, 64 in the others, so each of
    its two rows has a 16-bit twin, whose kernels compile several times faster than float32's); the
    same one token short of whole chunks (a prompt of any length: a path that serves only
    whole chunks must hand it on); two whole chunks of the dtype's own chunk size at the largest
    dstate, batch 2 with heads enough for cuTile's chunk-state rows of 264+ blocks, an even number per
    group."""
    if not _declared(info.headdims, 64):
        return []
    nheads = problem.nheads * -(-WIDE_HEADS // problem.nheads)
    wide = problem.replace(batch=WIDE_BATCH, nheads=nheads, headdim=64, seq_starts=(), varlen=False)
    out = []
    walk_n = next((n for n in ((128, 64) if problem.dtype == "float16" else (64, 128)) if _declared(info.dstates, n)), None)
    if 64 in info.chunk_sizes and walk_n is not None:
        out.append(wide.replace(chunk_size=64, seqlen=3 * 64, dstate=walk_n, seed=3))
        if not info.seqlen_multiple_of_chunk:
            out.append(out[0].replace(seqlen=3 * 64 - 1, seed=4))
    big_n = min(max(info.dstates or (256,)), 256)
    if big_n != walk_n or problem.chunk_size != 64:
        # batch 2 with heads enough for 264 state blocks of 64 x 32: the grid of batch 8 x 36 heads took
        # 131 s of the bfloat16 model-layer test's 194 s in drawing its inputs on the CPU (H200 gate).
        # An even head count per group, where the battery's others have an odd one: a kernel that pairs
        # the heads of a group takes its pairs here (cuTile's FAST scan at chunk 64, HB=2), and
        # falls back to one head per block on the others; with 18 heads (9 per group) no battery
        # problem ran the pairs, and a pair's bug waited 66 s for a draw (lab/reports/2026-12-03-scan-bn64.md)
        k = -(-STATE_BLOCKS // (2 * problem.nheads * -(-big_n // 32)))
        k += (problem.nheads * k // problem.ngroups) % 2   # odd heads per group: one more multiple makes it even
        out.append(wide.replace(batch=2, nheads=problem.nheads * k, seqlen=2 * problem.chunk_size, dstate=big_n, seed=5))
    return out


def battery(info, gpu: bool, dtype: str | None = None, regime: str | None = None,
            large_first: bool = True) -> tuple[SSDProblem, ...]:
    """The battery of `info` (GPU or CPU sizes), optionally of one dtype only. regime="model" on the GPU
    (the model-layer tests: no packing): each dtype's whole-chunk problem and its wide twins. The model
    regime's compile-aware draws copy these. large_first=False keeps the first problem at the common
    dimensions: for draws that copy the battery's classes and run no explicit examples (the gradient
    tests), which would take the large sizes into their draws with no first example to serve."""
    model = regime == "model" and gpu
    # a model layer has the benchmark's headdim 64: its battery starts from the common dimensions
    problems = tuple(p for p in _battery(info, gpu, large_first and not model) if dtype is None or p.dtype == dtype)
    if not model:
        return problems
    whole = [p for p in problems if not p.seq_starts and not p.partial_last_chunk]
    out = [q for p in whole for q in [p] + _wide_layers(p, info)]
    if dtype is not None and len(out) > SLOTS:   # the model-layer tests run one dtype each
        raise ValueError(f"model-layer battery of {info.name}: {len(out)} problems, more than SLOTS={SLOTS}")
    return tuple(out)


class Slot:
    """An explicit example's stand-in for Hypothesis's `data`: `check` sees it and takes battery
    problem `index` of the implementation under test (a slot past the battery's end checks nothing)."""

    def __init__(self, index: int):
        self.index = index

    def problem(self, info, gpu: bool, dtype: str | None = None, regime: str | None = None) -> SSDProblem | None:
        problems = battery(info, gpu, dtype, regime)
        return problems[self.index] if self.index < len(problems) else None

    def __repr__(self):
        return f"triage.Slot({self.index})"


def examples(test):
    """Decorate a `@given(data=st.data())` test so the battery runs first, as explicit examples."""
    from hypothesis import example   # noqa: PLC0415
    for i in reversed(range(SLOTS)):   # decorators apply bottom-up; Hypothesis runs them top-down
        test = example(data=Slot(i))(test)
    return test
