"""The strategies draw what their docstrings promise (a regime that silently drifts stops testing)."""
from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from kernels.registry import check_supported, lookup
from properties.strategies import ssd_problems


@pytest.mark.parametrize("name", ["cutile", "tilegym", "mamba-ssm"])
@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_model_regime_is_a_whole_chunk_layer_each_implementation_supports(name, gpu, dtype, data):
    info = lookup(name)
    p = data.draw(ssd_problems(info, gpu=gpu, regime="model", dtype=dtype))
    cut = -p.seqlen % p.chunk_size     # only the GPU's wide layers may end short of a whole chunk
    assert cut == 0 or (gpu and p.batch == 8 and not info.seqlen_multiple_of_chunk
                        and cut in (1, p.chunk_size // 2 + 5)), (p.seqlen, p.chunk_size)
    assert p.dtype == dtype and p.seqlen + cut >= 2 * p.chunk_size
    assert not p.uses_seq_idx and p.nheads >= 6 and p.nheads % p.ngroups == 0
    assert p.decay_decades == 3.0 and 2.0 <= p.decay <= 6.0
    if gpu:
        assert p.headdim == 64 and p.dstate in (64, 128, 256)
    # within what the implementation declares (TileGym: whole chunks, nheads a multiple of 4, no seq_idx)
    check_supported(info, dtype=p.dtype, chunk_size=p.chunk_size, seqlen=p.seqlen, headdim=p.headdim,
                    dstate=p.dstate, ngroups=p.ngroups, options=p.options(), nheads=p.nheads)


@pytest.mark.parametrize("regime", [None, "model"])
def test_gpu_draws_reach_odd_heads_per_group_with_an_even_head_count(regime):
    """A kernel that blocks heads in pairs (cutile's HB=2) is wrong only where heads per group are odd
    and the head count even: the GPU draws must reach 3 heads per group and 1, in both regimes."""
    info = lookup("cutile")
    kw = {"regime": regime, "dtype": "bfloat16"} if regime else {}
    for per_group in (3, 1):
        p = find(ssd_problems(info, gpu=True, **kw),
                 lambda p: p.nheads % 2 == 0 and p.nheads // p.ngroups == per_group,
                 settings=settings(max_examples=2000, derandomize=True, database=None))
        assert p.nheads // p.ngroups == per_group


def _cutile_rows(p) -> list[tuple[str, int]]:
    """(kernel, row of kernels.cutile.dispatch.TABLE) that cuTile's launcher chooses for p (shapes
    only: meta tensors, no GPU)."""
    import torch
    from kernels.cutile import dispatch, launcher
    dt = getattr(torch, p.dtype)
    x = torch.empty(p.batch, p.seqlen, p.nheads, p.headdim, device="meta", dtype=dt)
    B = torch.empty(p.batch, p.seqlen, p.ngroups, p.dstate, device="meta", dtype=dt)
    prob = launcher._problem(x, B, p.chunk_size, True if p.uses_seq_idx else None)
    row = {k: next(i for i, r in enumerate(dispatch.TABLE[k]) if r.test(prob)) for k in dispatch.TABLE}
    walks = not p.varlen and launcher._walk_config(prob) is not None
    # the walk replaces chunk_state and chunk_scan: their rows do not run for this problem
    return [(k, row[k]) for k in (("chunk_walk",) if walks else ("chunk_state", "chunk_scan", "chunk_walk"))]


def test_gpu_draws_reach_every_row_of_cutiles_dispatch_table():
    """Each row of the table runs other constants (tiles, latency hints, SWAP, head pairs): a row the
    GPU draws reach in under 1% of one regime's examples is one a 200-example gate hardly tests (measured
    on the CPU, lab/reports/2026-12-01-two-heads-per-block.md: the chunk_state rows for >= 264 blocks, which the benchmark's shapes run, were at 0-0.2%)."""
    from collections import Counter
    from kernels.cutile import dispatch
    info = lookup("cutile")
    n = 600
    counts = {}
    # the model regime as the gate runs it: one model-layer test per dtype, a third of the draws each
    runs = [(None, None, n), ("precision", None, n)] + [("model", d, n // 3) for d in sorted(info.dtypes)]
    for regime, dtype, examples in runs:
        seen = counts.setdefault(regime, Counter())

        @settings(max_examples=examples, derandomize=True, database=None, deadline=None)
        @given(data=st.data())
        def draw(data):
            seen.update(_cutile_rows(data.draw(ssd_problems(info, gpu=True, regime=regime, dtype=dtype))))

        draw()
    for kernel in ("chunk_state", "chunk_scan", "chunk_walk"):
        for i, rule in enumerate(dispatch.TABLE[kernel]):
            if "segmented walk" in rule.when:   # seqlen >= 16K: no draw; tests/test_regressions.py's long
                continue                        # sequences reach it (test_segments.py checks they do)
            best = max(c[(kernel, i)] for c in counts.values())
            assert best >= 0.01 * n, (f"{kernel} row {i} ({rule.when}) chosen by {best} of {n} draws at most "
                                      f"(per regime: { {r: c[(kernel, i)] for r, c in counts.items()} })")
