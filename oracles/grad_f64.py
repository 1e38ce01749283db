"""Float64 gradient oracles: reverse-mode autograd through a float64 forward oracle.

    grads = d<dy, out> + <dfinal_states, final_states>  w.r.t. x, dt, A, B, C, D, z, dt_bias, initial_states

`ssd_grads_recurrence_f64` differentiates the literal recurrence (oracles/recurrence_f64.py, a scan over
tokens), `ssd_grads_quadratic_f64` the attention form (oracles/quadratic_f64.py, segment sums per
(batch, head)) and `ssd_grads_chunked_f64` the chunked stages (the fastest, what the properties use).
The forwards share no numerical code, so their gradients are independent derivations; the driver
below only makes float64 leaves and calls torch.autograd.grad. tests/test_grad_oracles.py checks that
they agree to 1e-10 and gradchecks them against finite differences.

Subgradients (docs/contract-backward.md): the clamp to dt_limit passes the gradient where
lo <= dt <= hi (torch.clamp's, and mamba_ssm's `(dt < lo) | (dt > hi)` zeroing), softplus has
derivative sigmoid(v) where v <= 20 and 1 above. The oracles compute softplus below the threshold as
log(1 + exp(v)) of the whole input, so their gradients are NaN where a raw dt + dt_bias exceeds ~709
(exp overflows); the draws never come near.
"""
from __future__ import annotations

import torch

from kernels.registry import GRAD_INPUTS
from oracles.chunked_f64 import ssd_chunked_f64
from oracles.quadratic_f64 import ssd_quadratic_f64
from oracles.recurrence_f64 import ssd_recurrence_f64


def grad_inputs(kwargs: dict) -> tuple[str, ...]:
    """The inputs of this call that have a gradient (GRAD_INPUTS present in `kwargs`)."""
    return tuple(k for k in GRAD_INPUTS if kwargs.get(k) is not None)


def autograd_grads(forward, kwargs: dict, dy: torch.Tensor, dfinal_states: torch.Tensor | None = None,
                   cast: torch.dtype | None = None) -> dict:
    """{input name: gradient} of <dy, out> + <dfinal_states, final_states> through `forward(**kwargs)`.

    `cast`: the leaves' dtype (float64 for an oracle), None to keep the inputs' own dtypes (an
    implementation under test). A gradient autograd finds no path to is returned as zeros.
    dfinal_states needs return_final_states=True in kwargs; varlen states have no gradient here.
    """
    if dfinal_states is not None and not kwargs.get("return_final_states"):
        raise ValueError("dfinal_states: given, but kwargs ask for no final_states (return_final_states=False)")
    if kwargs.get("return_varlen_states"):
        raise ValueError("return_varlen_states: the backward contract has no varlen-state gradient "
                         "(mamba_ssm's MambaChunkScanCombinedFn.backward asserts it off)")
    names = grad_inputs(kwargs)
    leaves = {k: kwargs[k].detach().to(cast or kwargs[k].dtype).requires_grad_(True) for k in names}
    with torch.enable_grad():
        out = forward(**{**kwargs, **leaves})
        outs = (out,) if not kwargs.get("return_final_states") else tuple(out)[:2]
        tensors, seeds = [outs[0]], [dy.to(outs[0].dtype)]
        if dfinal_states is not None:
            tensors.append(outs[1])
            seeds.append(dfinal_states.to(outs[1].dtype))
        got = torch.autograd.grad(tensors, [leaves[k] for k in names], seeds, allow_unused=True)
    return {k: (g if g is not None else torch.zeros_like(leaves[k])).detach() for k, g in zip(names, got)}


def _oracle(forward, name):
    def grads(kwargs: dict, dy: torch.Tensor, dfinal_states: torch.Tensor | None = None) -> dict:
        return autograd_grads(forward, kwargs, dy, dfinal_states, cast=torch.float64)
    grads.__doc__ = (f"Float64 gradients by autograd through {forward.__name__}: kwargs of "
                     f"mamba_chunk_scan_combined, dy (b,l,h,p), dfinal_states (b,h,p,n) or None "
                     f"-> {{input name: float64 gradient}}.")
    grads.__name__ = grads.__qualname__ = name
    return grads


ssd_grads_recurrence_f64 = _oracle(ssd_recurrence_f64, "ssd_grads_recurrence_f64")
ssd_grads_quadratic_f64 = _oracle(ssd_quadratic_f64, "ssd_grads_quadratic_f64")
ssd_grads_chunked_f64 = _oracle(ssd_chunked_f64, "ssd_grads_chunked_f64")
