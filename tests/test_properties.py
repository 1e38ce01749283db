"""Every invariant against every implementation under test, on drawn problems.

One test per property so each has its own Hypothesis example count and its own failures. A failure
prints the drawn SSDProblem and one command that re-runs exactly it (`--ssd-problem`).
"""
from __future__ import annotations

import pytest
from hypothesis import event, given, note, reject, target
from hypothesis import strategies as st

from properties import invariants, strategies, triage
from properties.report import assert_passed
from properties.strategies import ssd_problems, tally


def check(prop_name: str, info, data, **strategy_kw) -> None:
    gpu = info.device == "cuda" or invariants.device_for(info) == "cuda"
    if isinstance(data, triage.Slot):   # the triage battery, before any drawn example
        pinned = strategies.PINNED   # --ssd-problem: that problem alone
        problem = pinned if pinned is not None else data.problem(info, gpu, strategy_kw.get("dtype"), strategy_kw.get("regime"))
        if problem is None or (pinned is not None and data.index):
            return
        event("triage battery")
    else:
        problem = data.draw(ssd_problems(info, gpu=gpu, **strategy_kw), label="problem")
    for feature, present in tally(problem).items():
        event(f"{feature}={present}")
    note(problem.repro(info.name, prop_name))
    result = invariants.PROPERTIES[prop_name](info, problem)
    for known in result.known:
        event(f"known deviation{' (unexpected pass)' if known.unexpected_pass else ''}: {known.reason}")
    if result.skipped:
        event(f"not applicable: {result.skipped}")
        if result.outside_domain:
            reject()   # not counted: each property gets its full example count of problems it checks
        return
    target(min(result.worst_share, 1e6), label=f"{prop_name} share of tolerance")
    assert_passed(result)


@given(data=st.data())
@triage.examples
def test_matches_oracle(impl, data, ieee_reference_math):
    check("prop_matches_oracle", impl, data)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])   # narrowest range first
@given(data=st.data())
@triage.examples
def test_matches_oracle_model_layer(impl, dtype, data, ieee_reference_math):
    """prop_matches_oracle on a model layer (whole chunks, no packing, head decays over three decades;
    on the GPU half of them batch 8 x 32-36 heads, a grid that fills it), one test per dtype: each dtype
    has its own range, and a bug at one must not wait for the draws of the others."""
    if dtype not in impl.dtypes:
        pytest.skip(f"{impl.name} does not declare {dtype}")
    check("prop_matches_oracle", impl, data, regime="model", dtype=dtype)


@given(data=st.data())
@triage.examples
def test_matches_oracle_precision(impl, data, ieee_reference_math):
    """prop_matches_oracle where the budget bites: narrow dtype, largest dimensions, little decay."""
    check("prop_matches_oracle", impl, data, regime="precision")


@given(data=st.data())
@triage.examples
def test_stages_match_oracle(impl, data, ieee_reference_math):
    check("prop_stages_match_oracle", impl, data)


@given(data=st.data())
@triage.examples
def test_no_decay_is_linear_attention(impl, data):
    check("prop_no_decay_is_linear_attention", impl, data)


@given(data=st.data())
@triage.examples
def test_chunk_size_invariance(impl, data):
    check("prop_chunk_size_invariance", impl, data)


@given(data=st.data())
@triage.examples
def test_split_invariance(impl, data):
    check("prop_split_invariance", impl, data)


@given(data=st.data())
@triage.examples
def test_causality(impl, data):
    check("prop_causality", impl, data)


@given(data=st.data())
@triage.examples
def test_batch_invariance(impl, data):
    check("prop_batch_invariance", impl, data)


@given(data=st.data())
@triage.examples
def test_group_broadcast(impl, data):
    check("prop_group_broadcast", impl, data)


@given(data=st.data())
@triage.examples
def test_seq_idx_packing(impl, data):
    check("prop_seq_idx_packing", impl, data)


@given(data=st.data())
def test_per_sequence_initial_states(impl, data, ieee_reference_math):
    check("prop_per_sequence_initial_states", impl, data)


@given(data=st.data())
@triage.examples
def test_partial_last_chunk(impl, data):
    check("prop_partial_last_chunk", impl, data)


@given(data=st.data())
@triage.examples
def test_determinism(impl, data):
    check("prop_determinism", impl, data)


@given(data=st.data())
@triage.examples
def test_linearity(impl, data):
    check("prop_linearity", impl, data)


@given(data=st.data())
@triage.examples
def test_finite_under_extreme_decay(impl, data):
    check("prop_finite_under_extreme_decay", impl, data)


@pytest.mark.slow
@given(data=st.data())
@triage.examples
def test_finite_under_extreme_decay_long(impl, data):
    """Sequences up to 64K on the GPU (the CPU keeps them to a few thousand)."""
    long = 65536 if invariants.device_for(impl) == "cuda" else 2048
    check("prop_finite_under_extreme_decay", impl, data, max_seqlen=long)
