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
