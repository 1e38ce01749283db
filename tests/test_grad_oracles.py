"""The float64 gradient oracles: independent derivations agree to 1e-10, finite differences agree
with each (torch.autograd.gradcheck), and the corner cases of docs/contract-backward.md hold."""
from __future__ import annotations

import math

import pytest
import torch

from oracles.grad_f64 import (autograd_grads, ssd_grads_chunked_f64, ssd_grads_quadratic_f64,
                              ssd_grads_recurrence_f64)
from oracles.recurrence_f64 import ssd_recurrence_f64
from oracles.quadratic_f64 import ssd_quadratic_f64
from oracles.chunked_f64 import ssd_chunked_f64
from oracles.yardstick_bwd import ssd_yardstick_bwd
from properties.grad_problem import GradProblem

FULL = dict(D="hp", z=True, dt_bias=True, dt_softplus=True, dt_limit=(1e-3, 0.5), initial_states=True)
CASES = {
    "all-options-seq_idx": GradProblem(batch=2, seqlen=70, nheads=4, ngroups=2, headdim=4, dstate=8,
                                       chunk_size=16, seq_starts=(16, 33), decay=2.0, seed=3, **FULL),
    "partial-chunk-strong-decay": GradProblem(batch=1, seqlen=37, nheads=2, headdim=8, dstate=4, chunk_size=16,
                                              decay=30.0, D="h", initial_states=True, seed=5),
    "no-decay-dy-zeros-no-dfinal": GradProblem(batch=2, seqlen=20, nheads=2, headdim=4, dstate=4, chunk_size=8,
                                               decay=0.0, dy_zero_stride=3, dfinal=False, seed=7),
    "short-one-chunk": GradProblem(batch=1, seqlen=3, nheads=1, headdim=2, dstate=2, chunk_size=16,
                                   z=True, dt_bias=True, seed=11),
}


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    scale = max(float(b.abs().max()), 1e-300)
    return float((a - b).abs().max()) / scale


@pytest.mark.parametrize("case", sorted(CASES))
def test_independent_derivations_agree_to_1e10(case):
    problem = CASES[case]
    kw, dy, dfinal = problem.backward_inputs()
    rec = ssd_grads_recurrence_f64(kw, dy, dfinal)
    quad = ssd_grads_quadratic_f64(kw, dy, dfinal)
    chunked = ssd_grads_chunked_f64(kw, dy, dfinal)
    assert set(rec) == set(quad) == set(chunked)
    for name, ref in rec.items():
        assert torch.isfinite(ref).all(), name
        assert _max_rel(quad[name], ref) <= 1e-10, (case, name, _max_rel(quad[name], ref))
        assert _max_rel(chunked[name], ref) <= 1e-10, (case, name, _max_rel(chunked[name], ref))


def test_the_cross_check_sees_a_wrong_gradient():
    """The 1e-10 comparison is not vacuous: one derivation with dB scaled by 1 + 1e-8 fails it."""
    kw, dy, dfinal = CASES["all-options-seq_idx"].backward_inputs()
    rec = ssd_grads_recurrence_f64(kw, dy, dfinal)
    quad = ssd_grads_quadratic_f64(kw, dy, dfinal)
    assert _max_rel(quad["B"] * (1 + 1e-8), rec["B"]) > 1e-10


@pytest.mark.parametrize("forward", [ssd_recurrence_f64, ssd_quadratic_f64, ssd_chunked_f64],
                         ids=["recurrence", "quadratic", "chunked"])
def test_gradcheck(forward):
    """Finite differences agree with each oracle's analytic gradients, every input at once."""
    problem = GradProblem(batch=1, seqlen=6, nheads=2, ngroups=1, headdim=2, dstate=2, chunk_size=4, decay=1.0,
                          seq_starts=(3,), seed=2, **FULL)
    kw, _, _ = problem.backward_inputs()
    names = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")
    leaves = tuple(kw[n].double().requires_grad_(True) for n in names)

    def f(*args):
        out, final = forward(**{**kw, **dict(zip(names, args)), "return_final_states": True})
        return out, final

    assert torch.autograd.gradcheck(f, leaves, eps=1e-6, atol=1e-7, rtol=1e-5)


def _dt_grad(dt_value: float, **opts) -> float:
    """d y[0,0,0,0] / d dt[0,0,0] of a one-token problem, by the recurrence oracle."""
    one = lambda *s: torch.ones(*s, dtype=torch.float64)  # noqa: E731
    kw = dict(x=one(1, 1, 1, 1), dt=torch.full((1, 1, 1), dt_value, dtype=torch.float64), A=-one(1),
              B=one(1, 1, 1, 1), C=one(1, 1, 1, 1), chunk_size=4, **opts)
    return float(autograd_grads(ssd_recurrence_f64, kw, one(1, 1, 1, 1), cast=torch.float64)["dt"])


def test_corner_cases_of_the_contract():
    # y = dt * x * B * C for one token from a zero state: dy/d(processed dt) = 1.
    assert _dt_grad(0.3) == pytest.approx(1.0)
    assert _dt_grad(-0.3) == 0.0                                   # default dt_limit (0, inf) clamps: no gradient
    assert _dt_grad(0.0) == pytest.approx(1.0)                     # on the bound: the gradient passes
    assert _dt_grad(0.7, dt_limit=(0.0, 0.5)) == 0.0               # above the upper limit
    assert _dt_grad(0.5, dt_limit=(0.0, 0.5)) == pytest.approx(1.0)
    s = 1.0 / (1.0 + math.exp(-19.0))
    assert _dt_grad(19.0, dt_softplus=True, dt_limit=(0.0, math.inf)) == pytest.approx(s, rel=1e-12)
    assert _dt_grad(25.0, dt_softplus=True) == 1.0                 # above threshold 20 softplus is the identity


def test_varlen_states_have_no_gradient():
    kw, dy, _ = GradProblem(seqlen=8, chunk_size=4, seq_starts=(3,), varlen=True).backward_inputs(varlen_ok=True)
    with pytest.raises(ValueError, match="return_varlen_states"):
        ssd_grads_chunked_f64(kw, dy)


@pytest.mark.parametrize("case", sorted(CASES))
def test_backward_yardstick_in_f64_is_the_oracle(case):
    """The written-out chunked backward (oracles/yardstick_bwd.py) run in float64 agrees with autograd
    through the recurrence to 1e-10: a third derivation, and the proof that the yardstick's algorithm
    is right, so its working-precision error measures precision alone."""
    kw, dy, dfinal = CASES[case].backward_inputs()
    ref = ssd_grads_recurrence_f64(kw, dy, dfinal)
    got = ssd_yardstick_bwd(dy=dy, dfinal_states=dfinal, precision="f64", **kw)
    assert set(got) == set(ref)
    for name in ref:
        assert _max_rel(got[name], ref[name]) <= 1e-10, (case, name, _max_rel(got[name], ref[name]))


@pytest.mark.parametrize("dtype,lo,hi", [("float32", 1e-9, 2e-6), ("bfloat16", 1e-4, 3e-2)])
def test_backward_yardstick_error_is_its_dtypes(dtype, lo, hi):
    """In working precision the yardstick misses by what its dtype rounds (neither exact nor broken),
    and the state dtype is modelled: stored in bf16, the state gradients move the decay gradients."""
    kw, dy, dfinal = CASES["all-options-seq_idx"].replace(dtype=dtype).backward_inputs()
    ref = ssd_grads_chunked_f64(kw, dy, dfinal)
    got = {}
    for sd in ("fp32", "input"):
        got[sd] = ssd_yardstick_bwd(dy=dy, dfinal_states=dfinal, state_dtype=sd, **kw)
        errs = {k: _max_rel(got[sd][k].double(), ref[k]) for k in ref}
        assert all(lo <= e <= hi for e in errs.values()), (sd, errs)
        assert got[sd]["x"].dtype == kw["x"].dtype and got[sd]["A"].dtype == torch.float32
    if dtype == "bfloat16":
        # the chunk-end decay gradient reads the stored state gradient: dA and dt see it
        assert not torch.equal(got["input"]["A"], got["fp32"]["A"])
        assert not torch.equal(got["input"]["dt"], got["fp32"]["dt"])


def test_backward_yardstick_rejects_bad_arguments():
    kw, dy, dfinal = CASES["short-one-chunk"].backward_inputs()
    with pytest.raises(ValueError, match="dy: expected shape"):
        ssd_yardstick_bwd(dy=dy[:, :1], **kw)
    with pytest.raises(ValueError, match="state_dtype"):
        ssd_yardstick_bwd(dy=dy, state_dtype="bf16", **kw)
    with pytest.raises(ValueError, match="precision"):
        ssd_yardstick_bwd(dy=dy, precision="fp64", **kw)
