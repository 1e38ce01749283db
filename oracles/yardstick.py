"""The same-precision yardstick: chunked SSD in an implementation's working precision.

Like FlashAttention's attention_ref(upcast=False), it measures what the dtype itself can reach, so a
kernel is held to  err_impl <= k * err_yardstick + floor.  Precision model (mamba_ssm / TileGym):
  - dt, dt*A, its per-chunk cumsum and every decay are fp32;
  - every matmul operand is rounded to x.dtype (and to TF32 with matmul="tf32": round to nearest, as
    cuBLAS and cuTile's astype(tfloat32) do; or cut to TF32 with matmul="tf32-trunc": Triton's tl.dot
    feeds fp32 bits to the tensor core, which ignores the low 13), products are accumulated in fp32,
    one k at a time (see `_mm`);
  - chunk states are fp32; with state_dtype="input" the states entering each chunk are rounded to
    x.dtype before the scan stage (mamba_ssm's _state_passing_fwd(out_dtype=C.dtype), TileGym);
  - out is returned in x.dtype, final_states in fp32, varlen_states in the state dtype, or both
    states in `return_states_dtype` where the call passes that keyword (vLLM's state_dtype: the
    carried fp32 state stored once in the caller's state cache dtype);
  - every decay is torch.exp in fp32, or with exp="fast" vLLM's fast_exp (`_fast_exp`).

FROZEN: its numbers define the budget, so never edit it to make a kernel pass. It is deterministic
(no atomics, no backend flags, fixed accumulation order) and shares no numerical code with oracles/.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from kernels.contract import check_ssd_args, unpack_returns
from oracles.per_sequence import is_per_sequence, per_sequence_runs

_F32 = torch.float32


def _round_tf32(t):
    """fp32 tensor -> the nearest TF32 value (10 explicit mantissa bits, ties to even), still fp32."""
    bits = t.contiguous().view(torch.int32)
    odd = torch.bitwise_and(torch.bitwise_right_shift(bits, 13), 1)
    rounded = torch.bitwise_and(bits + 0x0FFF + odd, -8192)  # -8192 == 0xFFFFE000: clear 13 low bits
    return torch.where(torch.isfinite(t), rounded.view(_F32), t)


def _truncate_tf32(t):
    """fp32 tensor -> its low 13 mantissa bits cleared (toward zero), still fp32: what an sm_80/sm_90
    TF32 tensor core makes of an fp32 register that was not rounded first."""
    bits = t.contiguous().view(torch.int32)
    return torch.where(torch.isfinite(t), torch.bitwise_and(bits, -8192).view(_F32), t)


_TF32 = {"ieee": None, "tf32": _round_tf32, "tf32-trunc": _truncate_tf32}
MATMULS = tuple(_TF32)

_LOG2E = torch.tensor(1.4426950408889634, dtype=_F32)   # Triton makes the constexpr an fp32 operand
# ex2.approx.f32's own relative error, in units of 2^-24 (fp32's unit roundoff), toward zero: the one
# figure the exp="fast" model reads. It is the ceiling of the largest error that
# lab/scripts/gpu_fast_exp_check.py measures on an H200 over every fp32 decay exponent in [-87.33, 0], against
# float64 exp2 of the same fp32 product; the script prints the value to put here. Measured on an H200
# (Triton 3.6): largest 2.415 at x = -0.680 (lab/reports/2026-12-02-vllm-checks.md).
FAST_EXP_ULPS = 3


def _fast_exp(t):
    """vLLM's fast_exp (triton_helpers.py: exp2(LOG2E * x) on ex2.approx.f32) in fp32: the product's
    rounding, an error of |x| * 2^-24 relative that grows with the decay, then exp2, then the
    approximation's error as FAST_EXP_ULPS units of 2^-24 toward zero (one sign: it compounds along a
    chain of decays, so the measured bound is taken with the sign that compounds)."""
    return torch.exp2(t.to(_F32) * _LOG2E) * (1.0 - FAST_EXP_ULPS * 2.0 ** -24)


_EXP = {"ieee": torch.exp, "fast": _fast_exp}
EXPS = tuple(_EXP)


def _operand(t, dtype, tf32):
    """Round a matmul operand to `dtype`, then with `tf32` (one of _TF32's functions, or None) to TF32;
    returned as fp32 holding those exact values."""
    t = t.to(dtype).to(_F32)
    return tf32(t) if tf32 else t


def _mm(a, b, acc=None):
    """(..., m, k) @ (..., k, n) in fp32, accumulating one k at a time into `acc` (..., m, n).

    An explicit loop rather than torch.matmul: the accumulation order is fixed and identical on every
    device, and no global TF32/reduced-precision flag can change it.
    """
    for j in range(a.shape[-1]):
        term = a[..., :, j:j + 1] * b[..., j:j + 1, :]
        acc = term if acc is None else acc + term
    return acc


def _fp32_cumsum(v):
    """Inclusive cumsum along the last dim with fp32 adds in order (device-independent)."""
    parts = [v[..., 0]]
    for j in range(1, v.shape[-1]):
        parts.append(parts[-1] + v[..., j])
    return torch.stack(parts, dim=-1)


def _split(t, chunk_size):
    """(b, l, ...) -> (b, nchunks, chunk_size, ...) zero-padded past seqlen, same dtype."""
    b, l = t.shape[:2]
    nchunks = -(-l // chunk_size)
    t = torch.cat([t, t.new_zeros(b, nchunks * chunk_size - l, *t.shape[2:])], dim=1)
    return t.reshape(b, nchunks, chunk_size, *t.shape[2:])


def _seq_split(seq_idx, chunk_size):
    """seq_idx (b, l) -> per token (b, c, L) with the last index repeated into the padding, and the
    index before each chunk (b, c), 0 before the first one."""
    b, l = seq_idx.shape
    nchunks = -(-l // chunk_size)
    s = torch.cat([seq_idx, seq_idx[:, -1:].expand(b, nchunks * chunk_size - l)], dim=1)
    s = s.reshape(b, nchunks, chunk_size)
    before = torch.cat([torch.zeros_like(s[:, :1, -1]), s[:, :-1, -1]], dim=1)
    return s, before


def _discretize(dt, A, chunk_size, dt_bias, dt_softplus, dt_limit):
    """dt (b,l,h) -> (dt_c, acs), fp32 (b, h, c, L): step sizes (0 past seqlen) and cumsum of dt*A."""
    d = dt.to(_F32)
    if dt_bias is not None:
        d = d + dt_bias.to(_F32)
    if dt_softplus:
        d = torch.where(d <= 20.0, F.softplus(d), d)
    d = torch.clamp(d, min=float(dt_limit[0]), max=float(dt_limit[1]))
    dt_c = _split(d, chunk_size).permute(0, 3, 1, 2)
    return dt_c, _fp32_cumsum(dt_c * A.to(_F32)[:, None, None])


def _chunk_states(xs, Bs, dt_c, acs, seq_s, dtype, tf32, ex=torch.exp):
    """Per-chunk states from zero: xs (b,c,L,h,p), Bs (b,c,L,h,n) fp32 -> (b,c,h,p,n) fp32."""
    scale = ex(acs[..., -1:] - acs) * dt_c  # (b,h,c,L)
    if seq_s is not None:
        scale = scale * (seq_s == seq_s[..., -1:])[:, None]
    Bw = Bs * scale.permute(0, 2, 3, 1)[..., None]
    xT = xs.permute(0, 1, 3, 4, 2)  # (b,c,h,p,L)
    return _mm(_operand(xT, dtype, tf32), _operand(Bw.permute(0, 1, 3, 2, 4), dtype, tf32))


def _pass_states(states, acs, h0, seq_s, seq_before, ex=torch.exp):
    """Sequential fp32 carry over chunks -> (entering (b,c,h,p,n), final (b,h,p,n))."""
    scale = ex(acs[..., -1])  # (b,h,c)
    if seq_s is not None:
        scale = scale * (seq_s[..., -1] == seq_before)[:, None]
    carry = h0
    entering = []
    for c in range(states.shape[1]):
        entering.append(carry)
        carry = carry * scale[:, :, c, None, None] + states[:, c]
    return torch.stack(entering, dim=1), carry


def _scan(xs, Bs, Cs, dt_c, acs, entering, seq_s, seq_before, dtype, tf32, ex=torch.exp):
    """Chunk outputs (b,c,L,h,p) fp32: entering-state term, then the intra-chunk term on top."""
    Ch = Cs.permute(0, 1, 3, 2, 4)  # (b,c,h,L,n)
    cb = _mm(_operand(Ch, dtype, tf32), _operand(Bs.permute(0, 1, 3, 4, 2), dtype, tf32))  # (b,c,h,L,S)
    L = dt_c.shape[-1]
    keep = torch.ones(L, L, dtype=torch.bool, device=dt_c.device).tril()[None, None, None]
    a = acs.permute(0, 2, 1, 3)  # (b,c,h,L)
    into = ex(a)
    if seq_s is not None:
        keep = keep & (seq_s[:, :, :, None] == seq_s[:, :, None, :])[:, :, None]
        into = into * (seq_s == seq_before[..., None])[:, :, None]
    expo = torch.where(keep, a[..., :, None] - a[..., None, :], torch.full((), -math.inf, device=a.device))
    scores = cb * ex(expo) * dt_c.permute(0, 2, 1, 3)[..., None, :]
    acc = _mm(_operand(Ch, dtype, tf32), _operand(entering.transpose(-1, -2), dtype, tf32))
    acc = acc * into[..., None]  # (b,c,h,L,p)
    acc = _mm(_operand(scores, dtype, tf32), _operand(xs.permute(0, 1, 3, 2, 4), dtype, tf32), acc)
    return acc.permute(0, 1, 3, 2, 4)


def _varlen(xs, Bs, dt_c, acs, h0, cu_seqlens, state_dtype, dtype, tf32, ex=torch.exp):
    """varlen states (num_seqs,h,p,n) in the state dtype: each sequence's own tokens in the chunk of
    its last token plus the state entering that chunk when it belongs to the sequence (it began
    before the chunk, or it starts at token 0 and the state is initial_states). Sequences are
    delimited by cu_seqlens alone (a seq_idx derived from it, token 0's sequence 0, drives the state passing)."""
    L = dt_c.shape[-1]
    l = int(cu_seqlens[-1])
    pos = torch.arange(l, device=xs.device)
    seq = torch.bucketize(pos, cu_seqlens[1:].to(pos.dtype), right=True)[None]
    seq_s, before = _seq_split(seq - seq[:, :1], L)
    states = _chunk_states(xs, Bs, dt_c, acs, seq_s, dtype, tf32, ex)
    entering, _ = _pass_states(states, acs, h0, seq_s, before, ex)
    entering = entering.to(state_dtype)
    bounds = [int(v) for v in cu_seqlens.tolist()]
    out = []
    for i in range(len(bounds) - 1):
        start, end = bounds[i], bounds[i + 1]
        acc = torch.zeros_like(h0[0])
        if end > start:
            c, last = divmod(end - 1, L)
            first = max(start - c * L, 0)
            a = acs[0, :, c]  # (h, L)
            w = ex(a[:, last:last + 1] - a[:, first:last + 1]) * dt_c[0, :, c, first:last + 1]
            Bw = Bs[0, c, first:last + 1] * w.T[..., None]  # (k,h,n)
            acc = _mm(_operand(xs[0, c, first:last + 1].permute(1, 2, 0), dtype, tf32),
                      _operand(Bw.permute(1, 0, 2), dtype, tf32))
            if start < c * L or start == 0:
                acc = acc + entering[0, c].to(_F32) * ex(a[:, last])[:, None, None]
        out.append(acc)
    return torch.stack(out, dim=0).to(state_dtype)


def ssd_yardstick(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                  seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, math.inf),
                  return_final_states=False, return_varlen_states=False, return_states_dtype=None, *,
                  state_dtype="fp32", matmul="ieee", exp="ieee"):
    """Chunked SSD in x.dtype working precision, mamba_chunk_scan_combined's signature plus
    state_dtype ("fp32" | "input"), matmul ("ieee" | "tf32" | "tf32-trunc") and exp ("ieee" | "fast").

    x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n), D (h) or (h,p), z (b,l,h,p), dt_bias (h),
    initial_states (b,h,p,n), seq_idx (b,l), cu_seqlens (num_seqs+1).
    Returns out (b,l,h,p) in x.dtype [, final_states (b,h,p,n) fp32]
    [, varlen_states (num_seqs,h,p,n) in the state dtype]; both states in return_states_dtype if given.
    """
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_limit=dt_limit,
                   return_varlen_states=return_varlen_states, return_states_dtype=return_states_dtype)
    if is_per_sequence(x, initial_states, cu_seqlens):   # one initial state per sequence: separate runs
        each = functools.partial(ssd_yardstick, state_dtype=state_dtype, matmul=matmul, exp=exp)
        return per_sequence_runs(each, x=x, dt=dt, A=A, B=B, C=C, chunk_size=chunk_size, D=D, z=z,
                                 dt_bias=dt_bias, initial_states=initial_states, cu_seqlens=cu_seqlens,
                                 dt_softplus=dt_softplus, dt_limit=dt_limit, return_final_states=return_final_states,
                                 return_varlen_states=return_varlen_states, return_states_dtype=return_states_dtype)
    if state_dtype not in ("fp32", "input"):
        raise ValueError(f"state_dtype: expected 'fp32' or 'input', got {state_dtype!r}")
    if matmul not in _TF32:
        raise ValueError(f"matmul: expected one of {MATMULS}, got {matmul!r}")
    if exp not in _EXP:
        raise ValueError(f"exp: expected one of {EXPS}, got {exp!r}")
    dtype, tf32, ex = x.dtype, _TF32[matmul], _EXP[exp]
    sdtype = _F32 if state_dtype == "fp32" else dtype
    b, l, h, p = x.shape
    n = B.shape[-1]
    dt_c, acs = _discretize(dt, A, chunk_size, dt_bias, dt_softplus, dt_limit)
    xs = _split(x, chunk_size).to(_F32)
    Bs = _split(B, chunk_size).repeat_interleave(h // B.shape[2], dim=3).to(_F32)
    Cs = _split(C, chunk_size).repeat_interleave(h // C.shape[2], dim=3).to(_F32)
    seq_s = before = None
    if seq_idx is not None:
        seq_s, before = _seq_split(seq_idx, chunk_size)
    h0 = x.new_zeros(b, h, p, n, dtype=_F32) if initial_states is None else initial_states.to(_F32)
    states = _chunk_states(xs, Bs, dt_c, acs, seq_s, dtype, tf32, ex)
    entering, final = _pass_states(states, acs, h0, seq_s, before, ex)
    entering = entering.to(sdtype).to(_F32)  # state_dtype="input": rounded between the stages
    y = _scan(xs, Bs, Cs, dt_c, acs, entering, seq_s, before, dtype, tf32, ex).reshape(b, -1, h, p)[:, :l]
    if D is not None:
        Df = D.to(_F32)
        y = y + x.to(_F32) * (Df[:, None] if Df.dim() == 1 else Df)
    if z is not None:
        zf = z.to(_F32)
        y = y * (zf * torch.sigmoid(zf))
    varlen = None
    if return_varlen_states:
        varlen = _varlen(xs, Bs, dt_c, acs, h0, cu_seqlens, sdtype, dtype, tf32, ex)
    if return_states_dtype is not None:   # the caller's state cache: the carried fp32 states stored once
        final = final.to(return_states_dtype)
        varlen = None if varlen is None else varlen.to(_F32).to(return_states_dtype)
    return unpack_returns(y.to(dtype), final, varlen, return_final_states, return_varlen_states)
