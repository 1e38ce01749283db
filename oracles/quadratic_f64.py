"""Oracle 2: the quadratic ("attention") form of SSD, in float64.

    y = (C B^T o L) (dt x),   L[i, j] = exp(dA_{j+1} + ... + dA_i) for j <= i in the same sequence

The initial state is treated as a virtual token at position -1 (with dt x B^T := h0), so its decay
to token i is a segment sum like any other. Segment sums are added up directly, never formed as a
difference of prefix sums. Shares no code with the recurrence; memory is O(l^2) per (batch, head),
so it loops over those. chunk_size is accepted for the signature only: nothing here depends on it.
"""
from __future__ import annotations

import math

import torch

from kernels.contract import check_ssd_args, unpack_returns
from oracles.per_sequence import is_per_sequence, per_sequence_runs


def _dt_processed(dt, dt_bias, dt_softplus, dt_limit):
    """dt (b,l,h) -> float64 steps (b,l,h): + bias, softplus where <= 20 (mamba_ssm), then clamp."""
    v = dt.to(torch.float64)
    if dt_bias is not None:
        v = v + dt_bias.to(torch.float64)
    if dt_softplus:
        v = torch.where(v <= 20.0, torch.log1p(torch.exp(v)), v)
    # mamba_ssm clamps even for the default (0, inf): a negative dt becomes 0 (ssd_chunk_state.py:80).
    return torch.clamp(v, min=float(dt_limit[0]), max=float(dt_limit[1]))


def _segsum(a):
    """a (m,) -> S (m, m): S[i, j] = a[j+1] + ... + a[i] for j <= i (0 on the diagonal), -inf above."""
    m = a.shape[0]
    lower = torch.tril(torch.ones(m, m, dtype=torch.bool, device=a.device), diagonal=-1)
    terms = torch.where(lower, a[:, None].expand(m, m), torch.zeros((), dtype=a.dtype, device=a.device))
    S = torch.cumsum(terms, dim=0)  # column j accumulates a[i] for i > j only
    causal = torch.tril(torch.ones(m, m, dtype=torch.bool, device=a.device))
    return S.masked_fill(~causal, -math.inf)


def _one_head(a, u, Bg, Cg, h0, seq):
    """One (batch, head) slice: a (l,) = dt*A, u (l,p) = dt*x, Bg, Cg (l,n), h0 (p,n), seq (l,) or None.

    Returns y (l,p) (no D, no gate), the state after the last token (p,n) and the raw decay matrix
    W (l+1, l+1) = exp(segsum) over [virtual h0 token, tokens], ignoring seq_idx (for varlen states).
    """
    W = torch.exp(_segsum(torch.cat([a.new_zeros(1), a])))
    if seq is None:
        Wm = W
    else:
        ids = torch.cat([seq.new_zeros(1), seq])  # the virtual h0 token belongs to sequence 0
        Wm = W * (ids[:, None] == ids[None, :])
    L, L0 = Wm[1:, 1:], Wm[1:, 0]
    y = ((Cg @ Bg.T) * L) @ u + L0[:, None] * (Cg @ h0.T)
    last = (L[-1][:, None] * u).T @ Bg + L0[-1] * h0
    return y, last, W


def _varlen_states(W, u, Bg, h0, bounds):
    """Per packed sequence, the state after its last token: (num_seqs,p,n).

    Each sequence starts from zero, except the one holding token 0, which starts from h0 (the
    virtual token at W's index 0); an empty sequence keeps the zero it starts from.
    """
    states = []
    for i in range(len(bounds) - 1):
        s, e = bounds[i], bounds[i + 1]
        acc = torch.zeros_like(h0)
        if e > s:
            w = W[e, s + 1:e + 1]  # decay from each token of the sequence to its last token e-1
            acc = (w[:, None] * u[s:e]).T @ Bg[s:e]
            if s == 0:
                acc = acc + W[e, 0] * h0
        states.append(acc)
    return torch.stack(states, dim=0)


def ssd_quadratic_f64(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                      seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf),
                      return_final_states=False, return_varlen_states=False):
    """Float64 SSD forward by the quadratic (masked attention) form, mamba_chunk_scan_combined's signature.

    x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n), D (h) or (h,p), z (b,l,h,p), dt_bias (h),
    initial_states (b,h,p,n), seq_idx (b,l), cu_seqlens (num_seqs+1).
    Returns out (b,l,h,p) [, final_states (b,h,p,n)] [, varlen_states (num_seqs,h,p,n)], all float64.
    """
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_limit=dt_limit,
                   return_varlen_states=return_varlen_states)
    if is_per_sequence(x, initial_states, cu_seqlens):   # one initial state per sequence: separate runs
        return per_sequence_runs(ssd_quadratic_f64, x=x, dt=dt, A=A, B=B, C=C, chunk_size=chunk_size, D=D, z=z,
                                 dt_bias=dt_bias, initial_states=initial_states, cu_seqlens=cu_seqlens,
                                 dt_softplus=dt_softplus, dt_limit=dt_limit, return_final_states=return_final_states,
                                 return_varlen_states=return_varlen_states)
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    heads_per_group = h // g
    f64 = dict(dtype=torch.float64, device=x.device)
    steps = _dt_processed(dt, dt_bias, dt_softplus, dt_limit)
    dA = steps * A.to(torch.float64)
    u = steps[..., None] * x.to(torch.float64)
    Bd, Cd = B.to(torch.float64), C.to(torch.float64)
    h0 = initial_states.to(torch.float64) if initial_states is not None else torch.zeros(b, h, p, n, **f64)
    bounds = [int(v) for v in cu_seqlens.tolist()] if return_varlen_states else None

    y = torch.empty(b, l, h, p, **f64)
    final = torch.empty(b, h, p, n, **f64)
    varlen = torch.empty(len(bounds) - 1, h, p, n, **f64) if bounds is not None else None
    for bi in range(b):
        seq = seq_idx[bi] if seq_idx is not None else None
        for hi in range(h):
            gi = hi // heads_per_group
            y[bi, :, hi], final[bi, hi], W = _one_head(
                dA[bi, :, hi], u[bi, :, hi], Bd[bi, :, gi], Cd[bi, :, gi], h0[bi, hi], seq)
            if varlen is not None:
                varlen[:, hi] = _varlen_states(W, u[bi, :, hi], Bd[bi, :, gi], h0[bi, hi], bounds)
    if D is not None:
        Dd = D.to(torch.float64)
        y = y + x.to(torch.float64) * (Dd.reshape(h, 1) if Dd.dim() == 1 else Dd)
    if z is not None:
        zd = z.to(torch.float64)
        y = y * (zd * torch.sigmoid(zd))  # gate after D, as in mamba_ssm's _chunk_scan_fwd_kernel
    return unpack_returns(y, final, varlen, return_final_states, return_varlen_states)
