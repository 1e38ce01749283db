"""Each gradient property fails on the broken backward it exists for (and passes the pristine one).

The broken backwards are torch-ref's autograd gradients with one realistic fault each, on a fixed
problem; CPU only. Kept apart from tests/test_gradients.py, which a backward mutant run executes.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from properties import gradients
from properties.grad_problem import GradProblem


def _torch_ref():
    from kernels.registry import lookup
    return lookup("torch-ref")


def _broken(corrupt):
    """torch-ref with a backward that corrupts autograd's gradients: corrupt(grads, kw, dy, dfinal) -> grads."""
    ref = _torch_ref()

    def fn(dy, dfinal_states, **kw):
        grads = gradients.autograd_grads(ref.fn, kw, dy, dfinal_states)
        return corrupt(grads, kw, dy, dfinal_states)
    return ref.replace(backward=dataclasses.replace(ref.backward, fn=fn))


def _scaled(name, factor):
    return lambda g, kw, dy, df: {**g, name: g[name] * factor}


def _dinit_not_decayed(g, kw, dy, df):
    # the reverse scan's result taken without the decays: what it would be with A = 0
    flat = gradients.autograd_grads(_torch_ref().fn, {**kw, "A": torch.zeros_like(kw["A"])}, dy, df)
    return {**g, "initial_states": flat["initial_states"]} if "initial_states" in g else g


def _first_row_of_each_chunk_dropped(g, kw, dy, df):
    dx = g["x"].clone()
    dx[:, ::kw["chunk_size"]] = 0.0
    return {**g, "x": dx}


def _stale_accumulator(g, kw, dy, df):
    # an accumulator that starts from a leftover (here: its own RMS) instead of 0
    return {**g, "B": g["B"] + g["B"].double().pow(2).mean().sqrt().to(g["B"].dtype)}


def _group_sum_from_first_head(g, kw, dy, df):
    h, ng = kw["x"].shape[2], kw["B"].shape[2]
    rep = h // ng
    per_head = gradients.autograd_grads(_torch_ref().fn, {**kw, "B": kw["B"].repeat_interleave(rep, 2),
                                                          "C": kw["C"].repeat_interleave(rep, 2)}, dy, df)["B"]
    b, l, _, n = per_head.shape
    return {**g, "B": per_head.reshape(b, l, ng, rep, n)[:, :, :, 0] * rep}


def _no_reset_at_sequence_starts(g, kw, dy, df):
    if "seq_idx" not in kw:
        return g
    return gradients.autograd_grads(_torch_ref().fn, {k: v for k, v in kw.items() if k != "seq_idx"}, dy, df)


def _ddt_through_a_division(g, kw, dy, df):
    dt = kw["dt"].float() + (kw["dt_bias"] if "dt_bias" in kw else 0.0)
    return {**g, "dt": (g["dt"] * dt) / dt}     # TileGym's `rs / dt_tile`: 0 / 0 where the step is 0


def _noise(g, kw, dy, df):
    return {**g, "x": g["x"] + 1e-6 * torch.randn(g["x"].shape, generator=torch.Generator().manual_seed(
        int(torch.randint(0, 2**31 - 1, ())))).to(g["x"].dtype)}


_BASE = GradProblem(batch=1, seqlen=40, nheads=4, ngroups=2, headdim=4, dstate=4, chunk_size=16, decay=1.0,
                    D="h", initial_states=True, seed=4)
POWER = {
    "prop_grad_matches_oracle": (_scaled("B", 1.01), _BASE),
    "prop_grad_no_decay_is_linear_attention": (_scaled("A", -1.0), _BASE),
    "prop_grad_chunk_size_invariance": (_first_row_of_each_chunk_dropped, _BASE),
    "prop_grad_split_invariance": (_dinit_not_decayed, _BASE),
    "prop_grad_linearity": (_stale_accumulator, _BASE),
    "prop_grad_group_broadcast": (_group_sum_from_first_head, _BASE),
    "prop_grad_seq_idx_packing": (_no_reset_at_sequence_starts, _BASE.replace(seq_starts=(16, 21))),
    "prop_grad_finite_under_extreme_decay": (_ddt_through_a_division, _BASE.replace(dt_zero_stride=5)),
    "prop_grad_determinism": (_noise, _BASE),
}


def test_every_gradient_property_has_a_broken_backward():
    assert set(POWER) == set(gradients.GRAD_PROPERTIES)


@pytest.mark.parametrize("prop", sorted(POWER))
def test_property_fails_on_its_broken_backward(prop):
    corrupt, problem = POWER[prop]
    fn = gradients.GRAD_PROPERTIES[prop]
    pristine = fn(_torch_ref(), problem)
    assert not pristine.skipped and pristine.passed, pristine.message("tests/test_gradients.py")
    broken = fn(_broken(corrupt), problem)
    assert not broken.skipped and not broken.passed, f"{prop} passed a backward broken by {corrupt}"
