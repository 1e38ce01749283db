"""State caches and parameters in the model dtype: the axis a model server passes that float32 draws miss.

A server keeps its SSM state cache in the model dtype (vLLM's mamba_ssm_cache_dtype "auto") or in float32,
and a model cast to bfloat16 passes D and dt_bias in bfloat16. SSDProblem.states_dtype and params_dtype
draw both; each implementation declares what it takes (options states_input_dtype, params_input_dtype)
and whether the caller chooses its returned states' dtype (extension return_states_dtype).
"""
from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernels import torch_ref
from kernels.contract import SSDArgumentError
from kernels.registry import ALL_OPTIONS, UnsupportedProblem, check_call, lookup
from oracles import ssd_chunked_f64, ssd_yardstick
from properties import invariants
from properties.problem import SSDProblem
from properties.strategies import ssd_problems

BF16 = dict(dtype="bfloat16", initial_states=True, D="h", dt_bias=True, final_states=True)
LAYER = SSDProblem(batch=2, seqlen=40, nheads=4, headdim=8, dstate=8, ngroups=2, chunk_size=16, seed=3, **BF16)


def test_problem_passes_states_and_parameters_in_the_drawn_dtype():
    kw = LAYER.replace(states_dtype="input", params_dtype="input").inputs(return_states_dtype=True)
    assert kw["initial_states"].dtype == kw["D"].dtype == kw["dt_bias"].dtype == torch.bfloat16
    assert kw["return_states_dtype"] == torch.bfloat16 and kw["A"].dtype == torch.float32
    assert LAYER.replace(states_dtype="input").options() >= {"states_input_dtype"}
    assert LAYER.replace(params_dtype="input").options() >= {"params_input_dtype"}
    plain = LAYER.inputs()
    assert plain["initial_states"].dtype == plain["D"].dtype == torch.float32 and "return_states_dtype" not in plain
    assert not LAYER.options() & {"states_input_dtype", "params_input_dtype"}
    # float32 problems have no narrower dtype to pass: "input" is float32 there
    assert LAYER.replace(dtype="float32", states_dtype="input").inputs()["initial_states"].dtype == torch.float32


def test_the_other_inputs_do_not_move_with_the_new_axes():
    """A problem's x, B, C, dt and initial-state values are the same whatever dtype the states and
    parameters travel in (the oracle sees the same problem, rounded where passed narrower)."""
    a, b = LAYER.inputs(), LAYER.replace(states_dtype="input", params_dtype="input").inputs()
    for k in ("x", "B", "C", "A", "z"):
        assert k not in a or torch.equal(a[k], b[k]), k
    assert torch.equal(a["initial_states"].to(torch.bfloat16), b["initial_states"])


@pytest.mark.parametrize("field", ["states_dtype", "params_dtype"])
def test_problem_refuses_an_unknown_dtype_by_name(field):
    with pytest.raises(ValueError, match=rf"^SSDProblem.{field}: expected 'float32' or 'input', got 'bf16'"):
        LAYER.replace(**{field: "bf16"})


def test_an_implementation_that_declares_none_of_it_refuses_it_by_argument():
    info = torch_ref.INFO.replace(options=ALL_OPTIONS - {"states_input_dtype", "params_input_dtype"})
    for field, arg in (("states_dtype", "initial_states"), ("params_dtype", "D")):
        kw = LAYER.replace(**{field: "input"}).inputs()
        with pytest.raises(UnsupportedProblem, match=rf"^{arg}: option '{field.split('_')[0]}_input_dtype' is not"):
            check_call(info, **kw)
    kw = LAYER.inputs(return_states_dtype=True)
    with pytest.raises(UnsupportedProblem, match=r"^return_states_dtype: option 'return_states_dtype' is not"):
        check_call(info, **kw)
    with pytest.raises(SSDArgumentError, match=r"^return_states_dtype: expected None or a floating torch dtype"):
        check_call(torch_ref.INFO, **{**kw, "return_states_dtype": torch.int32})


def test_the_oracle_reads_bf16_states_and_parameters_exactly_as_given():
    kw = LAYER.replace(states_dtype="input", params_dtype="input").inputs(return_states_dtype=True)
    got = ssd_chunked_f64(**kw)
    wide = {k: (v.double() if k in ("initial_states", "D", "dt_bias") else v) for k, v in kw.items()
            if k != "return_states_dtype"}
    for g, w in zip(got, ssd_chunked_f64(**wide)):
        assert g.dtype == torch.float64 and torch.equal(g, w)


def test_the_yardstick_returns_the_states_in_the_chosen_dtype():
    kw = LAYER.replace(states_dtype="input", seq_starts=(20,), varlen=True, batch=1).inputs(return_states_dtype=True)
    _, final, varlen = ssd_yardstick(**kw)
    assert final.dtype == varlen.dtype == torch.bfloat16
    _, final32, _ = ssd_yardstick(**{**kw, "return_states_dtype": None})
    assert final32.dtype == torch.float32 and torch.equal(final32.to(torch.bfloat16), final)


def _ignores_the_chosen_dtype(x, dt, A, B, C, chunk_size, return_states_dtype=None, **kw):
    return torch_ref.ssd_forward(x, dt, A, B, C, chunk_size, **kw)


def _drops_narrow_initial_states(x, dt, A, B, C, chunk_size, initial_states=None, **kw):
    """A kernel that reads a 16-bit state cache as if empty (a wrong pointer type, say)."""
    keep = initial_states is not None and initial_states.dtype == torch.float32
    return torch_ref.ssd_forward(x, dt, A, B, C, chunk_size, initial_states=initial_states if keep else None, **kw)


def test_matches_oracle_checks_that_the_states_come_back_in_the_chosen_dtype():
    problem = LAYER.replace(states_dtype="input")
    assert invariants.prop_matches_oracle(torch_ref.INFO, problem).passed
    broken = invariants.prop_matches_oracle(torch_ref.INFO.replace(fn=_ignores_the_chosen_dtype), problem)
    assert not broken.passed and "final_states has dtype torch.float32, expected torch.bfloat16" in broken.message()


def test_a_bug_that_only_bf16_states_reach_fails_on_them_and_passes_on_float32_states():
    info = torch_ref.INFO.replace(fn=_drops_narrow_initial_states)
    problem = LAYER.replace(decay=0.3)
    assert invariants.prop_matches_oracle(info, problem).passed
    assert not invariants.prop_matches_oracle(info, problem.replace(states_dtype="input")).passed


@pytest.mark.parametrize("gpu", [False, True])
def test_draws_take_the_model_dtype_often_and_float32_too(gpu):
    """2 draws in 3 of a 16-bit problem pass a 16-bit state cache, 1 in 2 16-bit parameters: over the
    draws both dtypes of each appear (a tally over many draws, not one example's luck)."""
    info = lookup("torch-ref").replace(dtypes=("bfloat16",))
    seen = []

    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(ssd_problems(info, gpu=gpu))
    def collect(p):
        seen.append(p)
    collect()
    assert {p.states_dtype for p in seen} == {p.params_dtype for p in seen} == {"float32", "input"}
    assert sum(p.states_dtype == "input" for p in seen) >= len(seen) // 3, len(seen)


def test_float32_only_implementations_never_draw_the_axis():
    info = torch_ref.INFO.replace(dtypes=("float32",))

    @settings(max_examples=40, deadline=None, derandomize=True, database=None)
    @given(ssd_problems(info))
    def check(p):
        assert p.states_dtype == p.params_dtype == "float32"
    check()


@pytest.mark.parametrize("name", ["torch-ref", "cutile", "tilegym", "mamba-ssm", "vllm", "vllm-first-config",
                                  "tilegym-first-config"])
def test_each_implementation_declares_what_it_takes_and_returns(name):
    info = lookup(name)
    assert {"states_input_dtype", "params_input_dtype"} <= info.options, name
    # the caller chooses the returned states' dtype where the peer lets it: vLLM's state_dtype (and torch-ref)
    assert ("return_states_dtype" in info.options) == (name in ("torch-ref", "vllm", "vllm-first-config"))


def test_gradient_draws_keep_float32_states_and_parameters():
    from properties.grad_strategies import forward_info   # noqa: PLC0415
    fwd = forward_info(lookup("torch-ref"))
    assert not fwd.options & {"states_input_dtype", "params_input_dtype", "return_states_dtype"}
    assert dataclasses.replace(LAYER).states_dtype == "float32"
