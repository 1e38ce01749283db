"""The strategies draw what their docstrings promise (a regime that silently drifts stops testing)."""
from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from kernels.registry import check_supported, lookup
from tests.strategies import ssd_problems


@pytest.mark.parametrize("name", ["cutile", "tilegym", "mamba-ssm"])
@pytest.mark.parametrize("gpu", [False, True])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(data=st.data())
def test_model_regime_is_a_whole_chunk_layer_each_implementation_supports(name, gpu, dtype, data):
    info = lookup(name)
    p = data.draw(ssd_problems(info, gpu=gpu, regime="model", dtype=dtype))
    assert p.dtype == dtype and p.seqlen % p.chunk_size == 0 and p.seqlen >= 2 * p.chunk_size
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
                 settings=settings(max_examples=500, derandomize=True, database=None))
        assert p.nheads // p.ngroups == per_group
