"""The finiteness properties count a non-finite output only where its true value fits the output's
dtype: a float16 gradient whose float64 value is 1e6 is +-inf when correctly rounded (TileGym's ddt at
dt up to 1e2 on the H200, 2026-12-02: 31 of 3072 entries, each beyond float16's range in float64)."""
from __future__ import annotations

import dataclasses

import torch

from kernels.registry import lookup
from properties.grad_problem import GradProblem
from properties.gradients import autograd_grads, prop_grad_finite_under_extreme_decay
from properties.invariants import finite_comparison

# float16, headdim 16, dstate 32: at A*dt down to -1e4 one ddt entry's float64 value exceeds 65504
OVERFLOWING = GradProblem(batch=1, seqlen=128, nheads=8, headdim=16, dstate=32, ngroups=2, chunk_size=64,
                          dtype="float16", dt_dtype="input", D="h", initial_states=True, seed=0)


def test_a_correctly_rounded_overflow_is_not_counted():
    t = torch.tensor([float("inf"), -float("inf"), 1.0], dtype=torch.float16)
    ok = finite_comparison("ddt", t, "float16", lambda: torch.tensor([1e6, -7e4, 1.0], dtype=torch.float64))
    assert ok.passed and ok.nonfinite == 0 and "2 non-finite where" in ok.why[0]


def test_a_non_finite_entry_whose_true_value_fits_fails():
    t = torch.tensor([float("inf"), float("nan"), 1.0], dtype=torch.float16)
    for ref in ([1.0e4, 1e6, 1.0], [1e6, 3.0e4, 1.0]):   # 1e4 fits float16; 3e4 is within half its range
        got = finite_comparison("ddt", t, "float16", lambda ref=ref: torch.tensor(ref, dtype=torch.float64))
        assert not got.passed and got.nonfinite == 1, got


def test_finite_output_never_consults_the_reference():
    def reference():
        raise AssertionError("the reference was computed for a finite output")
    assert finite_comparison("y", torch.ones(3), "float32", reference).passed


def test_the_gradient_property_passes_torch_ref_where_float16_overflows_and_fails_a_real_nan():
    info = lookup("torch-ref")
    result = prop_grad_finite_under_extreme_decay(info, OVERFLOWING)
    assert result.passed, result.message("tests/test_gradients.py")
    ddt = next(c for c in result.comparisons if c.output == "ddt")
    assert any("beyond half of torch.float16's range" in w for w in ddt.why), ddt.why   # the case is real

    def nan_at_first_token(dy, dfinal_states, **kw):   # a kernel's 0/0 where every value fits
        grads = autograd_grads(info.fn, kw, dy, dfinal_states)
        dx = grads["x"].clone()
        dx[:, 0] = float("nan")
        return {**grads, "x": dx}
    broken = info.replace(backward=dataclasses.replace(info.backward, fn=nan_at_first_token))
    assert not prop_grad_finite_under_extreme_decay(broken, OVERFLOWING).passed
