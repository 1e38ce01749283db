"""Hypothesis strategies that draw SSD problems within an implementation's declared capabilities.

`ssd_problems(info)` draws a frozen SSDProblem (shapes, regimes, seed; never tensor elements).
Compile-time constants (chunk size, headdim, dstate) come from small menus so compiled kernels are
reused; dynamic sizes (batch, seqlen, heads, sequence boundaries) vary freely. On the GPU, for an
implementation that declares `KernelInfo.compile_key`, most draws stay in the compile classes of the
triage battery (properties/triage.py) and a budgeted few explore new ones (EXPLORE_ONE_IN). The decay is drawn per
chunk (|A*dt| * chunk_size from 1e-4 to 1e2, or exactly 0): with A drawn alone the decay over one
chunk usually underflows in fp32 and state passing and initial states would go untested.
"""
from __future__ import annotations

from hypothesis import strategies as st

from properties import triage
from properties.menus import CPU_DIMS, GPU_DIM_PAIRS, GPU_DSTATES, GPU_HEADDIMS, GPU_HEADS  # noqa: F401 (re-exported)
from properties.problem import SSDProblem

PINNED: SSDProblem | None = None   # set by conftest's --ssd-problem: every draw returns it


@st.composite
def seqlens(draw, chunk_size: int, max_len: int, multiple_of_chunk: bool = False):
    """Seqlen biased to the edges: one off a multiple of the chunk (two chunks or more, so states pass
    between chunks), a whole number of chunks (the common case in models, and the domain of the cuTile
    kernels' unmasked FAST path), anywhere, or shorter than a chunk. The first option is what
    Hypothesis draws first and shrinks towards, so it is the regime that exercises the most: several
    chunks."""
    if multiple_of_chunk:
        return chunk_size * draw(st.integers(1, max(1, max_len // chunk_size)))
    kind = draw(st.sampled_from(["near_edge", "near_edge", "aligned", "any", "short"]))
    if kind == "aligned":
        return chunk_size * draw(st.integers(1, max(1, max_len // chunk_size)))
    if kind == "short":
        return draw(st.integers(1, chunk_size))
    if kind == "near_edge":
        k = draw(st.integers(min(2, max(1, max_len // chunk_size)), max(1, max_len // chunk_size)))
        return max(1, min(max_len, k * chunk_size + draw(st.sampled_from([1, -1, 0, 1]))))
    return draw(st.integers(1, max_len))


@st.composite
def seq_boundaries(draw, seqlen: int, chunk_size: int):
    """1-3 sequence starts, biased to chunk edges and one token either side."""
    if seqlen < 2:
        return ()
    starts = set()
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()) and seqlen > chunk_size:
            k = draw(st.integers(1, (seqlen - 1) // chunk_size))
            s = k * chunk_size + draw(st.sampled_from([-1, 0, 1]))
        else:
            s = draw(st.integers(1, seqlen - 1))
        if 0 < s < seqlen:
            starts.add(s)
    return tuple(sorted(starts))


def _menu(declared, menu):
    return tuple(v for v in menu if declared is None or v in declared) or tuple(declared)


# Compile-aware draws (an implementation that declares KernelInfo.compile_key, on the GPU): 7 draws in
# 8 take their compile-time choices (dtype, chunk, headdim, dstate, options, batch) from a triage
# battery problem and keep a size whose compile key is that problem's (sizes still vary inside the
# class); 1 in 8 explores freely: new classes, a budget of about 25 per 200 examples.
EXPLORE_ONE_IN = 8
# Per-chunk log-decay: log-uniform in [1e-4, 1e2] (simplest: 1, a state that neither vanishes nor
# stays constant), extra weight on strong decay, or exactly 0.
DECAYS = st.one_of(st.floats(-4.0, 2.0).map(lambda e: 10.0 ** e), st.floats(1.0, 2.0).map(lambda e: 10.0 ** e),
                   st.just(0.0))
MODEL_DECAYS = st.floats(2.0, 6.0)   # per-chunk decay of a model layer's slowest head (3 decades over heads)
CLASS_ATTEMPTS = 4   # sizes drawn to find one in the anchor's class before taking the anchor's own


@st.composite
def ssd_problems(draw, info, *, gpu: bool = False, max_seqlen: int | None = None, regime: str | None = None,
                 dtype: str | None = None, explore_one_in: int | None = None, large_first: bool = True):
    """An SSDProblem that `info` declares it supports (see `_ssd_problems`), drawn compile-aware when
    `info` declares what costs it a compile and the draw is for the GPU: one draw in `explore_one_in`
    (None: the implementation's KernelInfo.explore_one_in, else EXPLORE_ONE_IN; 0: none) explores a new
    class. `large_first`: whether the anchors include the battery's large first problem (triage.battery)."""
    if PINNED is not None:
        return PINNED
    long = max_seqlen is not None and max_seqlen > 8192
    n = info.explore_one_in if explore_one_in is None else explore_one_in
    n = EXPLORE_ONE_IN if n is None else n
    if not gpu or info.compile_key is None or long or (n > 0 and draw(st.integers(0, n - 1)) == n - 1):
        return draw(_ssd_problems(info, gpu=gpu, max_seqlen=max_seqlen, regime=regime, dtype=dtype))
    anchor = draw(st.sampled_from(triage.battery(info, gpu, dtype if regime == "model" else None, regime,
                                                 large_first=large_first)))
    like = _ssd_problems(info, gpu=gpu, max_seqlen=max_seqlen, regime=regime, dtype=dtype, like=anchor)
    decays = DECAYS
    if regime == "model":   # the anchor is a model layer already (the model-layer battery)
        decays = MODEL_DECAYS
    if regime == "precision" and _narrow(info):   # the anchor as the precision regime makes it
        # four chunks of the largest size (states pass between them), the anchor's partial tail
        seqlen = 4 * _precision_chunk(info, gpu) + anchor.seqlen % anchor.chunk_size
        anchor = _precision_problem(anchor.replace(decay_decades=0.0, seqlen=seqlen), info, gpu,
                                    anchor.dtype if anchor.dtype in _narrow(info) else _narrow(info)[0], 1e-2, 1.0)
        decays = st.sampled_from(PRECISION_DECAYS)
    key = info.compile_class(anchor)
    for _ in range(CLASS_ATTEMPTS):
        p = draw(like)
        if info.compile_class(p) == key:
            return p
    return anchor.replace(seed=draw(st.integers(0, 2**31 - 1)), decay=draw(decays),
                          decay_decades=anchor.decay_decades if regime == "model" else 0.0)


@st.composite
def _ssd_problems(draw, info, *, gpu: bool = False, max_seqlen: int | None = None, regime: str | None = None,
                  dtype: str | None = None, like: SSDProblem | None = None):
    """An SSDProblem that `info` declares it supports, sized for the CPU or the GPU.

    regime="model" (with `dtype`): a model layer as it runs in training and inference: whole chunks,
    no packed sequences, at least 6 heads whose per-chunk decays span three decades (about 0.1 to
    200: where exp(cs) or exp(-cs), however an implementation rescales it, leaves float16's range,
    2^64 and float32's), and on the GPU the benchmark's headdim 64 with dstate 64-256, half of the
    layers at batch 8 with 32-36 heads (a grid that fills the GPU) and 2-4 chunks, at most 512 tokens;
    a third of those wide layers end 1 or chunk/2 + 5 tokens short of a whole chunk (where the
    implementation takes partial chunks). Compile-aware draws of it copy a model-layer battery
    problem's class instead (triage.battery(..., regime="model")), varying its chunk count and decays.

    regime="precision": where the oracle budget bites: a narrow dtype, the largest chunk and inner
    dimensions of the menu, little decay (every term of every sum counts) and dt near 1, so an error a
    few roundings larger than the yardstick's (a narrow accumulator, say) shows within a few examples.

    like: take the compile-time choices (dtype, chunk size, headdim, dstate, batch, options) from this
    problem and draw the rest (ssd_problems' compile-aware draws).
    """
    if regime == "precision":
        return draw(_ssd_problems(info, gpu=gpu, max_seqlen=max_seqlen, like=like).flatmap(
            lambda p: _precision_regime(p, info, gpu)))
    if regime == "model":
        return draw(_ssd_problems(info, gpu=gpu, max_seqlen=max_seqlen, like=like).flatmap(
            lambda p: _model_regime(p, info, gpu, dtype or p.dtype, like)))
    opts = info.options
    dtype = like.dtype if like else draw(st.sampled_from(sorted(info.dtypes)))
    chunk_size = like.chunk_size if like else draw(st.sampled_from(
        sorted(c for c in info.chunk_sizes if gpu or c <= 64) or sorted(info.chunk_sizes)))
    if max_seqlen is not None and max_seqlen > 8192:
        # Long sequences: few heads and small tiles keep a float64 problem within a few GB.
        headdim = draw(st.sampled_from(_menu(info.headdims, (16, 32, 64))))
        dstate = draw(st.sampled_from(_menu(info.dstates, (64, 128, 256))))
        nheads = draw(st.sampled_from([h for h in (1, 2, 4) if h % info.nheads_multiple_of == 0] or
                                      [info.nheads_multiple_of]))
        batch, max_len = 1, max_seqlen
    elif gpu:
        pairs = [(p, n) for p, n in GPU_DIM_PAIRS if (info.headdims is None or p in info.headdims)
                 and (info.dstates is None or n in info.dstates)]
        if like:
            headdim, dstate = like.headdim, like.dstate
        elif pairs:
            headdim, dstate = draw(st.sampled_from(pairs))
        else:
            headdim = draw(st.sampled_from(_menu(info.headdims, GPU_HEADDIMS)))
            dstate = draw(st.sampled_from(_menu(info.dstates, GPU_DSTATES)))
        # cuTile specializes a kernel on the divisibility of every shape and stride, so each new
        # (batch, nheads) pattern costs a compile: on the GPU they come from small menus (measured on
        # the H200: 637 tileiras runs for 2086 examples with free batch 1-4 and nheads 1-16). 6 heads
        # give 3 heads per group (2 groups) and 1 (6 groups) with an even head count: a kernel that
        # blocks heads in pairs or fours must not let a block cross a group (2026-12-01: the powers of
        # two alone never drew an odd count above 1, and a mutant pairing across groups survived).
        heads = [h for h in GPU_HEADS if h % info.nheads_multiple_of == 0]
        if like:   # heads divisible by 16 or not is part of the compile class
            heads = [h for h in heads if (h % 16 == 0) == (like.nheads % 16 == 0)] or [like.nheads]
        nheads = draw(st.sampled_from(heads))
        batch = like.batch if like else draw(st.sampled_from([1, 2]))
        max_len = max_seqlen or 4096
    else:
        headdim = draw(st.sampled_from(_menu(info.headdims, CPU_DIMS)))
        dstate = draw(st.sampled_from(_menu(info.dstates, CPU_DIMS)))
        nheads = draw(st.sampled_from([h for h in (1, 2, 4, 8) if h % info.nheads_multiple_of == 0][:3]))
        batch = draw(st.integers(1, 3))
        max_len = max_seqlen or 4 * chunk_size + 3
    seqlen = draw(seqlens(chunk_size, max_len, info.seqlen_multiple_of_chunk))
    divisors = [g for g in range(1, nheads + 1) if nheads % g == 0]
    if like:   # one group or several is part of the compile class
        divisors = [g for g in divisors if (g == 1) == (like.ngroups == 1)] or [1]
    ngroups = draw(st.sampled_from(divisors)) if "ngroups" in opts else 1
    decay = draw(DECAYS)
    def flag(name):
        if like:
            return name in like.options()
        return name in opts and draw(st.booleans())
    seq_starts = draw(seq_boundaries(seqlen, chunk_size)) if flag("seq_idx") else ()
    varlen = bool(seq_starts) and batch == 1 and flag("varlen_states")
    D = like.D if like else draw(st.sampled_from(
        [d for d, o in ((None, None), ("h", "D"), ("hp", "D_headdim")) if o is None or o in opts]))
    narrow = dtype != "float32"
    # the state cache and the parameters in the model dtype (2 draws in 3), or float32
    states_dtype = like.states_dtype if like else draw(st.sampled_from(
        ("float32", "input", "input") if narrow and "states_input_dtype" in opts else ("float32",)))
    params_dtype = like.params_dtype if like else draw(st.sampled_from(
        ("float32", "input") if narrow and "params_input_dtype" in opts else ("float32",)))
    dt_limit = None
    if flag("dt_limit"):
        dt_limit = draw(st.sampled_from([(0.0, 0.1), (1e-3, 0.5), (0.05, float("inf")), (0.0, 1.0)]))
    return SSDProblem(
        batch=batch, seqlen=seqlen, nheads=nheads, headdim=headdim, dstate=dstate, ngroups=ngroups,
        chunk_size=chunk_size, dtype=dtype, decay=decay,
        dt_mu=draw(st.sampled_from([-4.0, -2.0, -1.0, 0.0, 1.0])),
        dt_softplus=flag("dt_softplus"), dt_bias=flag("dt_bias"), dt_limit=dt_limit,
        dt_dtype=(like.dt_dtype if like else "input" if flag("dt_input_dtype") else "float32"),
        states_dtype=states_dtype, params_dtype=params_dtype,
        D=D, z=flag("z"), initial_states=flag("initial_states"),
        final_states="final_states" in opts, seq_starts=seq_starts, varlen=varlen,
        seed=draw(st.integers(0, 2**31 - 1)),
    )


PRECISION_DECAYS = (0.0, 1e-2, 1e-1)


def _narrow(info) -> list[str]:
    return sorted(set(info.dtypes) & {"bfloat16", "float16"})


def _precision_chunk(info, gpu: bool) -> int:
    usable = [c for c in info.chunk_sizes if gpu or c <= 64]
    return max(usable) if usable else min(info.chunk_sizes)


def _precision_problem(problem: SSDProblem, info, gpu: bool, dtype: str, decay: float, dt_mu: float) -> SSDProblem:
    chunk = _precision_chunk(info, gpu)
    dims = GPU_HEADDIMS if gpu else CPU_DIMS
    seqlen = problem.seqlen
    if info.seqlen_multiple_of_chunk:
        seqlen = chunk * -(-seqlen // chunk)
    return problem.replace(
        dtype=dtype, chunk_size=chunk, headdim=max(_menu(info.headdims, dims)), dstate=max(_menu(info.dstates, dims)),
        seqlen=seqlen, seq_starts=tuple(s for s in problem.seq_starts if s < seqlen), decay=decay, dt_mu=dt_mu)


def _precision_regime(problem: SSDProblem, info, gpu: bool):
    narrow = _narrow(info)
    if not narrow:
        return st.just(problem)
    return st.builds(lambda dtype, decay, dt_mu: _precision_problem(problem, info, gpu, dtype, decay, dt_mu),
                     st.sampled_from(narrow), st.sampled_from(PRECISION_DECAYS), st.sampled_from([0.0, 1.0]))


def _model_regime(problem: SSDProblem, info, gpu: bool, dtype: str, like: SSDProblem | None = None):
    if like is not None:   # a model-layer battery problem's class: its grid and tail, 2-4 chunks of it
        # (at most 512 tokens on wide grids: the float64 reference of b8 h36 l1024 n256 takes 5 GB)
        tail = -like.seqlen % like.chunk_size
        groups = problem.ngroups if like.nheads % problem.ngroups == 0 else like.ngroups
        return st.builds(lambda n, decay: problem.replace(
            dtype=dtype, batch=like.batch, nheads=like.nheads, chunk_size=like.chunk_size, ngroups=groups,
            seqlen=n * like.chunk_size - tail, seq_starts=(), varlen=False, headdim=like.headdim,
            dstate=like.dstate, decay=decay, decay_decades=like.decay_decades),
            st.integers(2, max(2, min(4, 512 // like.chunk_size if like.batch > 2 else 4))), MODEL_DECAYS)
    chunk = problem.chunk_size
    # at least 6 heads, a multiple of the drawn count: ngroups and the kernel's head multiple still
    # divide it, and 2 or 6 drawn heads keep an odd number of heads per group (6 = 2 x 3)
    nheads = problem.nheads * -(-6 // problem.nheads)
    nchunks = max(2, -(-problem.seqlen // chunk))
    layer = st.just((problem.batch, nheads, nchunks, 0, chunk))   # (batch, nheads, chunks, cut kind, chunk size)
    dims = st.just((problem.headdim, problem.dstate))
    if gpu:
        dims = st.tuples(st.sampled_from(_menu(info.headdims, (64,))),
                         st.sampled_from(_menu(info.dstates, (64, 128, 256))))
        # Half the layers at a production width: batch 8 and 32-36 heads fill the GPU, and kernels
        # choose other tiles for such grids (cuTile's state rows for >= 264 blocks, SWAP at chunk
        # 128/256), which the narrow draws reach in 0.1-0.2% of examples. 2-4 chunks, at most 512
        # tokens, keep the float64 reference small (b8 h36 l1024 n256 at chunk 256 took 5 GB on the CPU).
        # A third of them end in a partial chunk (a prompt of any length) where the implementation
        # takes one: a kernel path that serves only whole chunks at this width (cuTile's chunk walk)
        # must hand those to its general path. A third run at chunk 64 whatever the drawn chunk (the
        # benchmark's chunk, where the walk's rows are): without it each walk row had 0.7-1.5% of them.
        cuts = (0,) if info.seqlen_multiple_of_chunk else (0, 0, 0, 0, 1, 2)   # 2: half a chunk + 5
        wide = st.tuples(st.just(8), st.just(problem.nheads * -(-32 // problem.nheads)),
                         st.just(max(2, min(4, nchunks, 512 // chunk))), st.sampled_from(cuts),
                         st.sampled_from((chunk, chunk, 64)))
        layer = st.one_of(layer, wide)
    def build(bhc, pn, decay):
        kind, c = bhc[3:]
        cut = (0, 1, c // 2 + 5)[kind]
        return problem.replace(dtype=dtype, batch=bhc[0], chunk_size=c, seqlen=c * bhc[2] - cut, seq_starts=(),
                               varlen=False, nheads=bhc[1], headdim=pn[0], dstate=pn[1], decay=decay,
                               decay_decades=3.0)
    return st.builds(build, layer, dims, MODEL_DECAYS)


def tally(problem: SSDProblem) -> dict[str, bool]:
    """Features whose frequency a GPU report must show (each in at least 10% of examples)."""
    return {"seq_idx": problem.uses_seq_idx, "partial_last_chunk": problem.partial_last_chunk,
            "aligned_no_seq_idx": not problem.partial_last_chunk and not problem.uses_seq_idx,
            "strong_decay": problem.decay * 10 ** (problem.decay_decades / 2) >= 10.0,
            "ngroups>1": problem.ngroups > 1, "headdim!=dstate": problem.headdim != problem.dstate}
