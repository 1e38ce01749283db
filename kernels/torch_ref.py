"""`torch-ref`: the chunked SSD algorithm in plain PyTorch, in the input's working precision.

Precision model (what a tensor-core kernel does): matmul operands are in the input dtype and
accumulate in fp32; dt, the per-chunk cumsum of dt*A, decays and chunk states are fp32; a matmul
operand built in fp32 (decayed B, the masked score tile, the incoming state) is rounded to the
input dtype first. Runs on CPU and GPU. It is the implementation the CPU CI puts under test, and the
mutation catalog breaks copies of this file, so keep each step on its own readable line.

Layouts follow mamba_ssm: x (b,l,h,p), dt (b,l,h), A (h), B,C (b,l,g,n); chunked tensors are
(b, h, c, L) for dt/cumsum and (b, c, h, p, n) for states.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels.contract import unpack_returns
from kernels.registry import ALL_OPTIONS, Backward, KernelInfo, check_call


def _mm(a: torch.Tensor, b: torch.Tensor, spec: str, dtype: torch.dtype) -> torch.Tensor:
    """einsum with operands rounded to `dtype` and fp32 accumulation, like a tensor-core mma."""
    return torch.einsum(spec, a.to(dtype).float(), b.to(dtype).float())


def _pad_len(t: torch.Tensor, dim: int, chunk_size: int) -> torch.Tensor:
    """Zero-pad `dim` up to a multiple of chunk_size."""
    extra = (-t.shape[dim]) % chunk_size
    if extra == 0:
        return t
    pad = [0, 0] * (t.dim() - dim - 1) + [0, extra]
    return F.pad(t, pad)


def _chunks(t: torch.Tensor, chunk_size: int) -> torch.Tensor:
    """(b, l, ...) -> (b, c, L, ...), zero-padded."""
    t = _pad_len(t, 1, chunk_size)
    return t.reshape(t.shape[0], t.shape[1] // chunk_size, chunk_size, *t.shape[2:])


def _heads(t: torch.Tensor, nheads: int) -> torch.Tensor:
    """Broadcast groups to heads along dim -2: head i reads group i // (nheads // ngroups)."""
    return t.repeat_interleave(nheads // t.shape[-2], dim=-2)


def chunk_cumsum(dt, A, chunk_size, dt_bias=None, dt_softplus=False, dt_limit=(0.0, math.inf)):
    """dt (b,l,h), A (h) -> (dA_cumsum, dt_out), both fp32 (b, h, c, L); padding has dt_out = 0."""
    b, l, h = dt.shape
    d = dt.float()
    if dt_bias is not None:
        d = d + dt_bias.float()
    if dt_softplus:
        d = torch.where(d <= 20.0, F.softplus(d), d)
    # Always clamped, as mamba_ssm's cumsum kernel does: the default (0, inf) maps negative dt to 0.
    d = d.clamp(min=dt_limit[0], max=dt_limit[1])
    d = _chunks(d, chunk_size)                       # (b, c, L, h); padded tokens hold 0 here ...
    valid = _chunks(torch.ones(b, l, 1, device=dt.device), chunk_size) > 0
    d = torch.where(valid, d, 0.0)                   # ... but softplus(0) was not 0: mask after it.
    dt_out = d.permute(0, 3, 1, 2).contiguous()      # (b, h, c, L)
    dA = dt_out * A.float().view(1, h, 1, 1)
    return torch.cumsum(dA, dim=-1), dt_out


def _seq_chunks(seq_idx, chunk_size, seqlen):
    """seq_idx (b,l) -> per-token (b,c,L) (padding repeats the last index), chunk-end (b,c),
    and the index at the end of the previous chunk (b,c), 0 before the first chunk."""
    s = seq_idx.long()
    extra = (-seqlen) % chunk_size
    if extra:
        s = torch.cat([s, s[:, -1:].expand(-1, extra)], dim=1)
    tok = s.reshape(s.shape[0], -1, chunk_size)
    end = tok[:, :, -1]
    prev = torch.cat([torch.zeros_like(end[:, :1]), end[:, :-1]], dim=1)
    return tok, end, prev


def chunk_state(B, x, dt_out, dA_cumsum, seq_idx=None):
    """Each chunk's own state from zero, decayed to the chunk end: (b, c, h, p, n) fp32."""
    b, l, h, p = x.shape
    L = dA_cumsum.shape[-1]
    decay = torch.exp(dA_cumsum[..., -1:] - dA_cumsum) * dt_out       # (b, h, c, L)
    if seq_idx is not None:
        tok, end, _ = _seq_chunks(seq_idx, L, l)
        decay = decay * (tok == end[..., None]).unsqueeze(1)          # only the chunk end's sequence
    Bh = _heads(_chunks(B, L), h).float()                              # (b, c, L, h, n)
    Bd = Bh * decay.permute(0, 2, 3, 1)[..., None]
    return _mm(_chunks(x, L), Bd, "bclhp,bclhn->bchpn", x.dtype)


def state_passing(states, dA_cumsum, initial_states=None, seq_idx=None):
    """Carry states across chunks: (states entering each chunk (b,c,h,p,n), final (b,h,p,n)), fp32."""
    b, c, h, p, n = states.shape
    L = dA_cumsum.shape[-1]
    carry = states.new_zeros(b, h, p, n) if initial_states is None else initial_states.float()
    chunk_decay = torch.exp(dA_cumsum[..., -1]).permute(0, 2, 1)       # (b, c, h)
    if seq_idx is not None:
        _, end, prev = _seq_chunks(seq_idx, L, seq_idx.shape[1])
        chunk_decay = chunk_decay * (end == prev)[..., None]            # reset where a sequence starts
    entering = []
    for k in range(c):
        entering.append(carry)
        carry = chunk_decay[:, k, :, None, None] * carry + states[:, k]
    return torch.stack(entering, dim=1), carry


def chunk_scan(B, C, x, dt_out, dA_cumsum, states_in, D=None, z=None, seq_idx=None):
    """Output from chunk quantities: intra-chunk masked C B^T (dt x) plus C (state in); (b,l,h,p) x.dtype."""
    b, l, h, p = x.shape
    L = dA_cumsum.shape[-1]
    dtype = x.dtype
    xc = _chunks(x, L)                                                  # (b, c, L, h, p)
    Bc, Cc = _heads(_chunks(B, L), h), _heads(_chunks(C, L), h)         # (b, c, L, h, n)
    cs = dA_cumsum.permute(0, 2, 3, 1)                                  # (b, c, L, h)
    scores = _mm(Cc, Bc, "bcihn,bcjhn->bchij", dtype)                   # (b, c, h, L, L)
    seg = cs.permute(0, 1, 3, 2)[..., :, None] - cs.permute(0, 1, 3, 2)[..., None, :]
    causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
    keep = causal.expand_as(seg)
    if seq_idx is not None:
        tok, _, prev = _seq_chunks(seq_idx, L, l)
        keep = keep & (tok[..., :, None] == tok[..., None, :]).unsqueeze(2)
    decay = torch.exp(torch.where(keep, seg, -math.inf))
    dtj = dt_out.permute(0, 2, 1, 3)[:, :, :, None, :]                 # (b, c, h, 1, L)
    y = _mm(scores * decay * dtj, xc, "bchij,bcjhp->bcihp", dtype)
    state_decay = torch.exp(cs)                                         # (b, c, L, h)
    if seq_idx is not None:
        state_decay = state_decay * (tok == prev[..., None])[..., None]
    y = y + _mm(Cc, states_in, "bcihn,bchpn->bcihp", dtype) * state_decay[..., None]
    y = y.reshape(b, -1, h, p)[:, :l]
    if D is not None:
        Df = D.float().view(1, 1, h, -1)
        y = y + x.float() * Df
    if z is not None:
        y = y * F.silu(z.float())
    return y.to(dtype)


def _varlen_states(B, x, dt_out, dA_cumsum, states_in, cu_seqlens):
    """State after each sequence's last token (batch 1): its tokens in the chunk of that token, plus
    the state entering the chunk when it belongs to the sequence: the sequence began before the
    chunk, or it starts at token 0 (then the state entering chunk 0 is initial_states). An empty
    sequence has no tokens: its state is zero."""
    L = dA_cumsum.shape[-1]
    h = x.shape[2]
    out = []
    bounds = cu_seqlens.tolist()
    for start, stop in zip(bounds[:-1], bounds[1:]):
        if stop == start:
            out.append(states_in.new_zeros(states_in.shape[2:]))
            continue
        end = stop - 1
        c, pos = divmod(end, L)
        lo = max(start - c * L, 0)
        cs = dA_cumsum[0, :, c]                                         # (h, L)
        w = torch.exp(cs[:, pos:pos + 1] - cs[:, lo:pos + 1]) * dt_out[0, :, c, lo:pos + 1]  # (h, k)
        toks = slice(c * L + lo, end + 1)
        Bt = _heads(B[0, toks], h).float() * w.t()[..., None]           # (k, h, n)
        st = _mm(x[0, toks], Bt, "khp,khn->hpn", x.dtype)
        with_entering = start < c * L or start == 0
        if with_entering:
            st = st + torch.exp(cs[:, pos])[:, None, None] * states_in[0, c]
        out.append(st)
    return torch.stack(out)


def ssd_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                return_final_states=False, return_varlen_states=False, return_states_dtype=None):
    """mamba_chunk_scan_combined's contract, computed chunk by chunk in working precision; with
    return_states_dtype (the extension) the final and varlen states are returned in that dtype."""
    check_call(INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states,
               return_states_dtype=return_states_dtype)
    dA_cumsum, dt_out = chunk_cumsum(dt, A, chunk_size, dt_bias, dt_softplus, dt_limit)
    states = chunk_state(B, x, dt_out, dA_cumsum, seq_idx)
    states_in, final_states = state_passing(states, dA_cumsum, initial_states, seq_idx)
    out = chunk_scan(B, C, x, dt_out, dA_cumsum, states_in, D, z, seq_idx)
    varlen = _varlen_states(B, x, dt_out, dA_cumsum, states_in, cu_seqlens) if return_varlen_states else None
    if return_states_dtype is not None:
        final_states = final_states.to(return_states_dtype)
        varlen = None if varlen is None else varlen.to(return_states_dtype)
    return unpack_returns(out, final_states, varlen, return_final_states, return_varlen_states)


INFO = KernelInfo(
    name="torch-ref",
    fn=ssd_forward,
    dtypes=("float32", "float16", "bfloat16"),
    chunk_sizes=(16, 32, 64, 128, 256),
    device="any",
    # the whole contract, and the caller's choice of the returned states' dtype (the extension vLLM
    # has), so the CPU suite draws a state cache in the model dtype end to end
    options=ALL_OPTIONS | {"return_states_dtype"},
    state_dtype="fp32",
    matmul="ieee",
    bitwise_batch_invariant=False,
    deterministic=True,
    stages={"chunk_cumsum": chunk_cumsum, "chunk_state": chunk_state,
            "state_passing": state_passing, "chunk_scan": chunk_scan},
    notes="plain PyTorch reference in working precision; CPU CI's implementation under test",
    # autograd through the forward: matmul operands, and so their gradients, are rounded to the input
    # dtype; the state entering each chunk is such an operand, so its gradient is too: state_dtype "input"
    backward=Backward(fn="autograd", grads=("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states"),
                      options=ALL_OPTIONS - {"varlen_states"}, state_dtype="input", matmul="ieee", deterministic=True),
)
