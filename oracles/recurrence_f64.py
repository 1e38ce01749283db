"""Oracle 1: the SSD recurrence, literally, one token at a time, in float64.

    h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T        (h: p x n per batch and head)
    y_t = h_t C_t + D x_t,  out_t = y_t * silu(z_t)

Vectorized over batch, heads, headdim and state; the only loop is over time, so it stays usable at
seqlen 4096+ on CPU. The conventions of mamba_ssm 2.3.2's `mamba_chunk_scan_combined` API are kept
(docs/contract.md); chunk_size is accepted for the signature only: nothing here depends on it.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels.contract import check_ssd_args, unpack_returns
from oracles.per_sequence import is_per_sequence, per_sequence_runs


def _step_sizes(dt, dt_bias, dt_softplus, dt_limit):
    """dt (b,l,h) -> discretization steps (b,l,h) float64, in mamba_ssm's order: bias, softplus, clamp."""
    step = dt.double()
    if dt_bias is not None:
        step = step + dt_bias.double()
    if dt_softplus:
        # threshold=20 returns the input above 20, as mamba's tl.where(dt <= 20.0, softplus(dt), dt).
        step = F.softplus(step, threshold=20.0)
    # Surprise: _chunk_cumsum_fwd_kernel (ssd_chunk_state.py:80) clamps unconditionally, so the
    # default dt_limit=(0, inf) still turns a negative dt into 0.
    return step.clamp(min=float(dt_limit[0]), max=float(dt_limit[1]))


def _per_head(t, nheads):
    """B or C (b,l,g,n) -> (b,l,h,n) float64; head i reads group i // (h // g)."""
    return t.double().repeat_interleave(nheads // t.shape[2], dim=2)


def _scan(decay, u, Bh, Ch, state, carry=None):
    """Run the recurrence over time.

    decay (b,l,h) = exp(dt*A); u (b,l,h,p) = dt*x; Bh, Ch (b,l,h,n); state (b,h,p,n) entering token 0;
    carry (b,l) bool or None: False at t drops the state entering t (a seq_idx boundary).
    Returns y (b,l,h,p) = h_t C_t and the state after the last token (b,h,p,n).
    """
    if carry is not None:
        decay = decay * carry[:, :, None]
    # Time-major and contiguous, so each step reads contiguous slices.
    decay_t = decay.permute(1, 0, 2)[..., None, None].contiguous()  # (l,b,h,1,1)
    u_t = u.permute(1, 0, 2, 3)[..., None].contiguous()              # (l,b,h,p,1)
    B_t = Bh.permute(1, 0, 2, 3)[..., None, :].contiguous()         # (l,b,h,1,n)
    C_t = Ch.permute(1, 0, 2, 3)[..., None].contiguous()            # (l,b,h,n,1)
    ys = []
    for t in range(u.shape[1]):
        state = decay_t[t] * state + u_t[t] * B_t[t]
        ys.append(torch.matmul(state, C_t[t]))
    return torch.stack(ys, dim=1).squeeze(-1), state


def _varlen_states(decay, u, Bh, Ch, h0, cu_seqlens):
    """State after the last token of each packed sequence (batch 0): (num_seqs,h,p,n).

    The sequence holding token 0 starts from initial_states (decayed through it), every other one
    from zero; an empty sequence has no tokens, so its state is the zero it starts from.
    """
    bounds = [int(v) for v in cu_seqlens.tolist()]
    out = []
    for i in range(len(bounds) - 1):
        s, e = bounds[i], bounds[i + 1]
        zero = torch.zeros_like(h0[:1])
        if e == s:
            out.append(zero[0])
            continue
        start = h0[:1] if s == 0 else zero
        _, last = _scan(decay[:1, s:e], u[:1, s:e], Bh[:1, s:e], Ch[:1, s:e], start)
        out.append(last[0])
    return torch.stack(out, dim=0)


def ssd_recurrence_f64(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                       seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf),
                       return_final_states=False, return_varlen_states=False):
    """Float64 SSD forward by the recurrence, with mamba_chunk_scan_combined's signature.

    x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n), D (h) or (h,p), z (b,l,h,p), dt_bias (h),
    initial_states (b,h,p,n), seq_idx (b,l), cu_seqlens (num_seqs+1).
    Returns out (b,l,h,p) [, final_states (b,h,p,n)] [, varlen_states (num_seqs,h,p,n)], all float64.
    """
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_limit=dt_limit,
                   return_varlen_states=return_varlen_states)
    if is_per_sequence(x, initial_states, cu_seqlens):   # one initial state per sequence: separate runs
        return per_sequence_runs(ssd_recurrence_f64, x=x, dt=dt, A=A, B=B, C=C, chunk_size=chunk_size, D=D, z=z,
                                 dt_bias=dt_bias, initial_states=initial_states, cu_seqlens=cu_seqlens,
                                 dt_softplus=dt_softplus, dt_limit=dt_limit, return_final_states=return_final_states,
                                 return_varlen_states=return_varlen_states)
    b, l, h, p = x.shape
    n = B.shape[-1]
    step = _step_sizes(dt, dt_bias, dt_softplus, dt_limit)
    decay = torch.exp(step * A.double())
    u = step[..., None] * x.double()
    Bh, Ch = _per_head(B, h), _per_head(C, h)
    if initial_states is None:
        h0 = torch.zeros(b, h, p, n, dtype=torch.float64, device=x.device)
    else:
        h0 = initial_states.double()
    carry = None
    if seq_idx is not None:
        # The state survives a token only if that token continues the previous token's sequence;
        # seq_idx starts at 0, so initial_states belong to sequence 0 and are dropped with it.
        same = seq_idx[:, 1:] == seq_idx[:, :-1]
        carry = torch.cat([torch.ones_like(same[:, :1]), same], dim=1)
    y, final_states = _scan(decay, u, Bh, Ch, h0, carry)
    if D is not None:
        Dd = D.double()
        y = y + (Dd if Dd.dim() == 2 else Dd[:, None]) * x.double()
    if z is not None:
        y = y * F.silu(z.double())  # D is added before the gate, as in _chunk_scan_fwd_kernel.
    varlen = None
    if return_varlen_states:
        varlen = _varlen_states(decay, u, Bh, Ch, h0, cu_seqlens)
    return unpack_returns(y, final_states, varlen, return_final_states, return_varlen_states)
