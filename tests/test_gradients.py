"""Every gradient property against every implementation under test that declares a backward.

One test per property (its own example count and failures), as tests/test_properties.py. A failure
prints the drawn GradProblem and one command that re-runs exactly it (`--ssd-grad-problem`).
"""
from __future__ import annotations

import pytest
from hypothesis import event, given, note, reject, target
from hypothesis import strategies as st

from properties import gradients, invariants
from properties.deviations import declared_examples, unmet
from properties.grad_strategies import grad_problems
from properties.report import assert_passed
from properties.strategies import tally


def check(prop_name: str, info, data) -> None:
    if info.backward is None:
        pytest.skip(f"{info.name} declares no backward (KernelInfo.backward is None)")
    gpu = info.device == "cuda" or invariants.device_for(info) == "cuda"
    problem = data.draw(grad_problems(info, gpu=gpu), label="problem")
    for feature, present in tally(problem).items():
        event(f"{feature}={present}")
    event(f"dfinal={problem.dfinal}")
    note(problem.repro(info.name, prop_name))
    result = gradients.GRAD_PROPERTIES[prop_name](info, problem)
    for known in result.known:   # declared deviations (KernelInfo.deviations) this problem meets
        event(f"known deviation{' (unexpected pass)' if known.unexpected_pass else ''}: {known.reason}")
    if result.skipped:
        event(f"not applicable: {result.skipped}")
        if result.outside_domain:
            reject()
        return
    target(min(result.worst_share, 1e6), label=f"{prop_name} share of tolerance")
    assert_passed(result)


@given(data=st.data())
def test_grad_matches_oracle(impl, data, ieee_reference_math):
    check("prop_grad_matches_oracle", impl, data)


@given(data=st.data())
def test_grad_no_decay_is_linear_attention(impl, data, ieee_reference_math):
    check("prop_grad_no_decay_is_linear_attention", impl, data)


@given(data=st.data())
def test_grad_chunk_size_invariance(impl, data):
    check("prop_grad_chunk_size_invariance", impl, data)


@given(data=st.data())
def test_grad_split_invariance(impl, data):
    check("prop_grad_split_invariance", impl, data)


@given(data=st.data())
def test_grad_linearity(impl, data):
    check("prop_grad_linearity", impl, data)


@given(data=st.data())
def test_grad_group_broadcast(impl, data):
    check("prop_grad_group_broadcast", impl, data)


@given(data=st.data())
def test_grad_seq_idx_packing(impl, data):
    check("prop_grad_seq_idx_packing", impl, data)


@given(data=st.data())
def test_grad_finite_under_extreme_decay(impl, data):
    check("prop_grad_finite_under_extreme_decay", impl, data)


@given(data=st.data())
def test_grad_determinism(impl, data):
    check("prop_grad_determinism", impl, data)


def test_grad_declared_deviations_occur(impl, ieee_reference_math):
    """Every declared deviation of the backward (KernelInfo.deviations naming gradient properties) on its
    own examples: reported as the known deviation (an unexpected pass listed in the report, a failure
    under --ssd-strict-deviations), the other gradients still checked; each (deviation, property) met."""
    if impl.backward is None:
        pytest.skip(f"{impl.name} declares no backward (KernelInfo.backward is None)")
    runs = []
    for d, problem, prop in declared_examples(impl, backward=True):
        result = gradients.GRAD_PROPERTIES[prop](impl, problem)
        assert_passed(result)
        runs.append((d, prop, result))
    if not runs:
        pytest.skip(f"{impl.name} declares no deviations of its backward")
    missing = unmet(impl, runs, backward=True)
    assert not missing, f"{impl.name}: declared deviations never met by their examples: {missing}"
