"""Oracle 3: the chunked SSD algorithm in float64, stage by stage, in mamba_ssm's layouts.

    chunk_cumsum_f64 -> chunk_state_f64 -> state_passing_f64 -> chunk_scan_f64

Each stage is callable alone with the same inputs as the mamba_ssm stage of that name, so a kernel's
intermediates can be checked one stage at a time. Decays use the natural log (exp, not exp2).
Pure torch, device-agnostic, vectorized over chunks (state passing is a scan over chunks).
Chunked layouts: dt_out, dA_cumsum (b, h, nchunks, chunk_size); states (b, nchunks, h, p, n).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels.contract import check_ssd_args, unpack_returns
from oracles.per_sequence import is_per_sequence, per_sequence_runs


def _chunked(t, chunk_size):
    """(b, l, ...) -> (b, nchunks, chunk_size, ...) float64, zero-padded past seqlen."""
    b, l = t.shape[:2]
    nchunks = -(-l // chunk_size)
    pad = torch.zeros(b, nchunks * chunk_size - l, *t.shape[2:], dtype=torch.float64, device=t.device)
    return torch.cat([t.to(torch.float64), pad], dim=1).reshape(b, nchunks, chunk_size, *t.shape[2:])


def _chunked_heads(t, nheads, chunk_size):
    """B or C (b, l, g, n) -> (b, nchunks, chunk_size, h, n); head i reads group i // (h // g)."""
    return _chunked(t, chunk_size).repeat_interleave(nheads // t.shape[2], dim=3)


def _chunked_seq(seq_idx, chunk_size):
    """seq_idx (b, l) -> (b, nchunks, chunk_size); padding repeats the last index, so position -1 of
    every chunk holds the index of the chunk's last valid token."""
    b, l = seq_idx.shape
    nchunks = -(-l // chunk_size)
    tail = seq_idx[:, -1:].expand(b, nchunks * chunk_size - l)
    return torch.cat([seq_idx, tail], dim=1).reshape(b, nchunks, chunk_size)


def _seq_before_chunk(seq_chunks):
    """(b, nchunks, chunk_size) -> (b, nchunks): the index of the token before each chunk, 0 for the
    first chunk (mamba_ssm's kernels start their running seq_idx at 0)."""
    last = seq_chunks[:, :, -1]
    return torch.cat([torch.zeros_like(last[:, :1]), last[:, :-1]], dim=1)


def chunk_cumsum_f64(dt, A, chunk_size, dt_bias=None, dt_softplus=False, dt_limit=(0.0, math.inf)):
    """dt (b, l, h), A (h) -> (dA_cumsum, dt_out), both float64 (b, h, nchunks, chunk_size).

    dt_out is dt + dt_bias, softplus (identity above 20), clamped to dt_limit; it is 0 past seqlen,
    so dA_cumsum there repeats the last valid value (as _chunk_cumsum_fwd_kernel).
    """
    v = dt.to(torch.float64)
    if dt_bias is not None:
        v = v + dt_bias.to(torch.float64)
    if dt_softplus:
        v = torch.where(v <= 20.0, F.softplus(v, threshold=math.inf), v)
    # ssd_chunk_state.py:80 clamps unconditionally: the default (0, inf) maps a negative dt to 0.
    v = v.clamp(min=float(dt_limit[0]), max=float(dt_limit[1]))
    dt_out = _chunked(v, chunk_size).permute(0, 3, 1, 2)  # padding added after softplus stays 0
    dA_cumsum = torch.cumsum(dt_out * A.to(torch.float64)[None, :, None, None], dim=-1)
    return dA_cumsum, dt_out.contiguous()


def chunk_state_f64(B, x, dt_out, dA_cumsum, seq_idx=None):
    """Each chunk's own state from a zero start, decayed to the chunk end.

    B (b, l, g, n), x (b, l, h, p), dt_out, dA_cumsum (b, h, nchunks, chunk_size), seq_idx (b, l)
    -> states (b, nchunks, h, p, n) float64. With seq_idx only tokens of the sequence of the chunk's
    last valid token count (_chunk_state_fwd_kernel).
    """
    h, chunk_size = x.shape[2], dt_out.shape[-1]
    xc = _chunked(x, chunk_size)
    Bc = _chunked_heads(B, h, chunk_size)
    weight = torch.exp(dA_cumsum[..., -1:] - dA_cumsum) * dt_out  # (b, h, c, L)
    if seq_idx is not None:
        sc = _chunked_seq(seq_idx, chunk_size)
        weight = weight * (sc == sc[:, :, -1:])[:, None]
    return torch.einsum("bhcl,bclhp,bclhn->bchpn", weight, xc, Bc)


def state_passing_f64(states, dA_cumsum, initial_states=None, seq_idx=None):
    """Carry states across chunks.

    states (b, nchunks, h, p, n) from chunk_state_f64, dA_cumsum (b, h, nchunks, chunk_size),
    initial_states (b, h, p, n), seq_idx (b, l) -> (states_in (b, nchunks, h, p, n), the state entering
    each chunk; final_states (b, h, p, n)), float64. As _state_passing_fwd_kernel: the carried state is
    dropped when the sequence at a chunk's last token differs from the one at the previous chunk's
    last token (0 before the first chunk).
    """
    b, nchunks, h, p, n = states.shape
    chunk_size = dA_cumsum.shape[-1]
    carry_scale = torch.exp(dA_cumsum[..., -1])  # (b, h, c)
    if seq_idx is not None:
        sc = _chunked_seq(seq_idx, chunk_size)
        carry_scale = carry_scale * (sc[:, :, -1] == _seq_before_chunk(sc))[:, None]
    state = torch.zeros(b, h, p, n, dtype=torch.float64, device=states.device)
    if initial_states is not None:
        state = initial_states.to(torch.float64)
    entering = []
    for c in range(nchunks):
        entering.append(state)
        state = carry_scale[:, :, c, None, None] * state + states[:, c].to(torch.float64)
    return torch.stack(entering, dim=1), state


def chunk_scan_f64(B, C, x, dt_out, dA_cumsum, states_in, D=None, z=None, seq_idx=None):
    """Outputs from the intra-chunk quadratic term plus the decayed state entering each chunk.

    B, C (b, l, g, n), x (b, l, h, p), dt_out, dA_cumsum (b, h, nchunks, chunk_size),
    states_in (b, nchunks, h, p, n), D (h) or (h, p), z (b, l, h, p), seq_idx (b, l)
    -> out (b, l, h, p) float64.
    """
    b, l, h, p = x.shape
    chunk_size = dt_out.shape[-1]
    xc = _chunked(x, chunk_size)
    Bc, Cc = _chunked_heads(B, h, chunk_size), _chunked_heads(C, h, chunk_size)
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=x.device).tril()
    mask = causal.expand(b, 1, 1, chunk_size, chunk_size)  # (b, 1, c, L, S)
    state_gate = torch.ones_like(dA_cumsum)
    if seq_idx is not None:
        sc = _chunked_seq(seq_idx, chunk_size)
        mask = mask & (sc[:, :, :, None] == sc[:, :, None, :])[:, None]
        # _chunk_scan_fwd_kernel: only tokens continuing the sequence of the token before the chunk
        # see the state entering it.
        state_gate = (sc == _seq_before_chunk(sc)[:, :, None])[:, None].to(torch.float64)
    gap = dA_cumsum[..., :, None] - dA_cumsum[..., None, :]  # (b, h, c, L, S)
    decay = torch.exp(gap.masked_fill(~mask, -math.inf))
    scores = torch.einsum("bclhn,bcshn->bhcls", Cc, Bc) * decay * dt_out[..., None, :]
    y = torch.einsum("bhcls,bcshp->bclhp", scores, xc)
    from_state = torch.einsum("bclhn,bchpn->bclhp", Cc, states_in.to(torch.float64))
    y = y + from_state * (torch.exp(dA_cumsum) * state_gate).permute(0, 2, 3, 1)[..., None]
    y = y.reshape(b, -1, h, p)[:, :l]
    if D is not None:
        Dd = D.to(torch.float64)
        y = y + x.to(torch.float64) * (Dd[:, None] if Dd.dim() == 1 else Dd)
    if z is not None:
        y = y * F.silu(z.to(torch.float64))  # D before the gate, as mamba_ssm
    return y


def _varlen_states_f64(B, x, dt_out, dA_cumsum, cu_seqlens, initial_states):
    """State after the last token of each packed sequence of batch 0: (num_seqs, h, p, n) float64.

    Re-runs the state stages with a seq_idx derived from cu_seqlens (so every sequence starts from
    zero whatever seq_idx says; rebased so token 0's sequence is 0 and holds initial_states), then
    takes the sequence's tokens inside the chunk of its last token, plus the state entering that
    chunk when it belongs to the sequence: the sequence began before the chunk, or it starts at
    token 0, where the state entering chunk 0 is initial_states. An empty sequence gives zeros.
    """
    l = x.shape[1]
    chunk_size = dt_out.shape[-1]
    bounds = [int(v) for v in cu_seqlens.tolist()]
    positions = torch.arange(l, device=x.device)
    derived = torch.bucketize(positions, cu_seqlens[1:].to(positions.dtype), right=True)[None]
    derived = derived - derived[:, :1]
    states = chunk_state_f64(B, x, dt_out, dA_cumsum, seq_idx=derived)
    states_in, _ = state_passing_f64(states, dA_cumsum, initial_states, seq_idx=derived)
    xc = _chunked(x, chunk_size)[0]
    Bc = _chunked_heads(B, x.shape[2], chunk_size)[0]
    out = []
    for i in range(len(bounds) - 1):
        start, end = bounds[i], bounds[i + 1]
        acc = torch.zeros_like(states_in[0, 0])
        if end > start:
            c, last = divmod(end - 1, chunk_size)
            first = max(start - c * chunk_size, 0)
            cs = dA_cumsum[0, :, c]  # (h, L)
            w = torch.exp(cs[:, last:last + 1] - cs[:, first:last + 1]) * dt_out[0, :, c, first:last + 1]
            acc = torch.einsum("hl,lhp,lhn->hpn", w, xc[c, first:last + 1], Bc[c, first:last + 1])
            if start < c * chunk_size or start == 0:
                acc = acc + states_in[0, c] * torch.exp(cs[:, last])[:, None, None]
        out.append(acc)
    return torch.stack(out, dim=0)


def ssd_chunked_f64(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                    seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf),
                    return_final_states=False, return_varlen_states=False, return_states_dtype=None):
    """Float64 SSD forward composing the four stages, with mamba_chunk_scan_combined's signature.

    x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n), D (h) or (h,p), z (b,l,h,p), dt_bias (h),
    initial_states (b,h,p,n), seq_idx (b,l), cu_seqlens (num_seqs+1); every input is read exactly as
    given (a bfloat16 initial state is its bfloat16 value). return_states_dtype (the extension keyword)
    is checked and otherwise ignored: the dtype a caller stores states in is not the math.
    Returns out (b,l,h,p) [, final_states (b,h,p,n)] [, varlen_states (num_seqs,h,p,n)], all float64.
    """
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_limit=dt_limit,
                   return_varlen_states=return_varlen_states, return_states_dtype=return_states_dtype)
    if is_per_sequence(x, initial_states, cu_seqlens):   # one initial state per sequence: separate runs
        return per_sequence_runs(ssd_chunked_f64, x=x, dt=dt, A=A, B=B, C=C, chunk_size=chunk_size, D=D, z=z,
                                 dt_bias=dt_bias, initial_states=initial_states, cu_seqlens=cu_seqlens,
                                 dt_softplus=dt_softplus, dt_limit=dt_limit, return_final_states=return_final_states,
                                 return_varlen_states=return_varlen_states)
    dA_cumsum, dt_out = chunk_cumsum_f64(dt, A, chunk_size, dt_bias, dt_softplus, dt_limit)
    states = chunk_state_f64(B, x, dt_out, dA_cumsum, seq_idx)
    states_in, final_states = state_passing_f64(states, dA_cumsum, initial_states, seq_idx)
    out = chunk_scan_f64(B, C, x, dt_out, dA_cumsum, states_in, D, z, seq_idx)
    varlen = None
    if return_varlen_states:
        varlen = _varlen_states_f64(B, x, dt_out, dA_cumsum, cu_seqlens, initial_states)
    return unpack_returns(out, final_states, varlen, return_final_states, return_varlen_states)
