"""The closed forms some properties compare with, at sizes the CPU profile never draws.

prop_no_decay_is_linear_attention builds its O(seqlen^2) reference in blocks of query rows; CPU
draws stay below one block, so a problem spanning several blocks, with sequence boundaries inside
and across them, is checked here against an implementation known to be right (torch-ref).
"""
from __future__ import annotations

from kernels.registry import lookup
from properties import invariants
from properties.problem import SSDProblem


def test_no_decay_closed_form_spans_row_blocks():
    rows = invariants._ROWS
    problem = SSDProblem(batch=2, seqlen=2 * rows + 77, nheads=4, headdim=16, dstate=32, ngroups=2,
                         chunk_size=64, dtype="float32", decay=0.0, D="hp", z=True, initial_states=True,
                         seq_starts=(rows - 3, rows + 40, 2 * rows), seed=7)
    r = invariants.prop_no_decay_is_linear_attention(lookup("torch-ref"), problem)
    assert not r.skipped and r.comparisons
    assert r.passed, r.message("tests/test_closed_forms.py")


# Failed on mamba_ssm 2.3.2.post1 on the H200 (lab/reports/2026-12-01-truth-gpu.md) with the closed form's
# fixed fp32 bound: one token and one group, so every head's y is dt x (C.B) with C.B cancelling, and
# Triton's truncated-TF32 operands (matmul "tf32-trunc") land at 0.0105 normwise against 0.005.
TF32_CANCELLATION = SSDProblem(batch=1, seqlen=1, nheads=6, headdim=32, dstate=16, ngroups=1, chunk_size=16,
                               dtype="float32", decay=0.0, dt_mu=-4.0, final_states=True, seed=35)


def _chunked_in(matmul: str):
    """The frozen yardstick as an implementation: a correct chunked SSD in the given matmul precision."""
    import functools
    from oracles.yardstick import ssd_yardstick
    fn = functools.partial(ssd_yardstick, state_dtype="fp32", matmul=matmul)
    return lookup("torch-ref").replace(name=f"chunked-{matmul}", fn=fn, matmul=matmul, device="cpu")


def test_no_decay_budget_follows_the_declared_matmul_precision():
    r = invariants.prop_no_decay_is_linear_attention(_chunked_in("tf32-trunc"), TF32_CANCELLATION)
    assert r.passed, r.message("tests/test_closed_forms.py")


def test_no_decay_budget_still_fails_a_truncation_the_kernel_does_not_declare():
    # the same truncated kernel declared as exact ("ieee") is held to an ieee yardstick and fails
    info = _chunked_in("tf32-trunc").replace(matmul="ieee")
    r = invariants.prop_no_decay_is_linear_attention(info, TF32_CANCELLATION)
    assert not r.passed
