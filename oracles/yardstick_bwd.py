"""The backward yardstick: the chunked SSD backward, written out, in an implementation's working precision.

What a backward kernel can reach in its declared precision, so a gradient is held to
err_impl <= k * err_yardstick + floor, as the forward is (oracles/yardstick.py). Autograd through the
forward yardstick is not that: its backward would run in fp32 throughout and set budgets too tight
for a backward that stores state gradients in bf16. Precision model (mamba_ssm 2.3.2's
_mamba_chunk_scan_combined_bwd, TileGym 1.5.1's mamba2_chunk_backward):
  - dt processing, dt*A, its per-chunk cumsum, decays and every elementwise product: fp32;
  - every matmul operand rounded to x.dtype (and to TF32 with matmul="tf32", cut to TF32 with
    "tf32-trunc"), products accumulated in fp32 one k at a time (yardstick._mm);
  - the states entering each chunk (recomputed) and the state gradients of the reverse scan are
    stored in the state dtype (x.dtype for state_dtype="input"): that matters where they enter an
    elementwise product (the chunk-end decay gradient sum(G * h_in), TileGym's dd_last partials),
    since matmul operands are rounded to x.dtype anyway; the reverse scan itself carries fp32;
  - with z, the pre-gate output is recomputed and rounded to x.dtype (what mamba_ssm saves) and the
    gated dy is rounded to x.dtype;
  - gradients returned in their input's dtype (dA, dD, ddt_bias, dinitial_states as their fp32 inputs).
precision="f64" runs the same algorithm in float64 with no rounding: tests/test_grad_oracles.py checks
it against the float64 oracles (1e-10), which is what makes its working-precision errors meaningful.

FROZEN like the forward yardstick: its numbers define the budget; never edit it to make a kernel pass.
Chunked layouts here: (b, c, h, L, .) for token tensors, (b, c, h, p, n) for states.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from kernels.contract import check_ssd_args
from oracles.yardstick import _TF32, MATMULS, _fp32_cumsum, _mm, _seq_split, _split

_F32 = torch.float32


class _Precision:
    """Where the working precision rounds: matmul operands (`op`) and stored states (`store`)."""

    def __init__(self, dtype, state_dtype: str, matmul: str, exact: bool):
        self.work = torch.float64 if exact else _F32
        self.exact = exact
        self.dtype = dtype
        self.sdtype = dtype if state_dtype == "input" else _F32
        self.tf32 = None if exact else _TF32[matmul]

    def op(self, t):
        if self.exact:
            return t.to(self.work)
        t = t.to(self.dtype).to(_F32)
        return self.tf32(t) if self.tf32 else t

    def store(self, t):
        return t.to(self.work) if self.exact else t.to(self.sdtype).to(_F32)

    def mm(self, a, b):
        """(..., m, k) @ (..., k, n), operands rounded by `op`, fixed accumulation order."""
        return _mm(self.op(a), self.op(b))


def _tokens(t, chunk_size, work, nheads=None):
    """(b, l, g|h, d) -> (b, c, h, L, d) in `work`, zero-padded; groups repeated to heads when nheads."""
    t = _split(t.to(work), chunk_size)                       # (b, c, L, g, d)
    if nheads is not None:
        t = t.repeat_interleave(nheads // t.shape[3], dim=3)
    return t.permute(0, 1, 3, 2, 4)


def _untokens(t, seqlen):
    """(b, c, h, L, d) -> (b, l, h, d)."""
    b, c, h, L, d = t.shape
    return t.permute(0, 1, 3, 2, 4).reshape(b, c * L, h, d)[:, :seqlen]


def _steps(dt, dt_bias, dt_softplus, dt_limit, work):
    """dt (b,l,h) -> (processed steps, d steps / d dt) in `work`: bias, softplus (identity above 20),
    clamp (the gradient passes where lo <= value <= hi, as torch.clamp and mamba_ssm's clamp mask)."""
    v = dt.to(work)
    if dt_bias is not None:
        v = v + dt_bias.to(work)
    slope = torch.ones_like(v)
    if dt_softplus:
        below = v <= 20.0
        slope = torch.where(below, torch.sigmoid(v), slope)
        v = torch.where(below, F.softplus(v, threshold=math.inf) if work == torch.float64 else F.softplus(v), v)
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    slope = slope * ((v >= lo) & (v <= hi)).to(work)
    return v.clamp(min=lo, max=hi), slope


def ssd_yardstick_bwd(x, dt, A, B, C, chunk_size, dy, dfinal_states=None, D=None, z=None, dt_bias=None,
                      initial_states=None, seq_idx=None, dt_softplus=False, dt_limit=(0.0, math.inf), *,
                      state_dtype="fp32", matmul="ieee", precision="working", term_scales=None, **ignored):
    """Gradients of <dy, out> + <dfinal_states, final_states> for mamba_chunk_scan_combined's inputs.

    x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n), dy (b,l,h,p), dfinal_states (b,h,p,n) or None,
    D (h) or (h,p), z (b,l,h,p), dt_bias (h), initial_states (b,h,p,n), seq_idx (b,l).
    state_dtype "fp32" | "input", matmul "ieee" | "tf32" | "tf32-trunc", precision "working" | "f64".
    `ignored` takes the forward's other keywords (return_final_states, ...), which change nothing here.
    Returns {input name: gradient} for x, dt, A, B, C and each optional input given. `term_scales`, a
    dict, receives for the gradients that are sums over tokens (A, D, dt_bias, and dt through the
    chunk's cumsum) the root of the sum of their squared terms: the scale their rounding errors have,
    however much the sum cancels.
    """
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, dt_limit=dt_limit)
    if ignored.get("return_varlen_states"):
        raise ValueError("return_varlen_states: the backward contract has no varlen-state gradient")
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"dy: expected shape {tuple(x.shape)} (x's), got {tuple(dy.shape)}")
    if dfinal_states is not None and tuple(dfinal_states.shape) != (x.shape[0], x.shape[2], x.shape[3], B.shape[3]):
        raise ValueError(f"dfinal_states: expected shape (b,h,p,n)={(x.shape[0], x.shape[2], x.shape[3], B.shape[3])}, "
                         f"got {tuple(dfinal_states.shape)}")
    if state_dtype not in ("fp32", "input"):
        raise ValueError(f"state_dtype: expected 'fp32' or 'input', got {state_dtype!r}")
    if matmul not in MATMULS:
        raise ValueError(f"matmul: expected one of {MATMULS}, got {matmul!r}")
    if precision not in ("working", "f64"):
        raise ValueError(f"precision: expected 'working' or 'f64', got {precision!r}")
    P = _Precision(x.dtype, state_dtype, matmul, exact=precision == "f64")
    W = P.work
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    L = chunk_size

    # -- dt processing and the decays (fp32, as every peer)
    step, slope = _steps(dt, dt_bias, dt_softplus, dt_limit, W)
    dtc = _tokens(step[..., None], L, W)[..., 0]                     # (b,c,h,L), 0 past seqlen
    acs = _fp32_cumsum(dtc * A.to(W)[:, None])                       # (b,c,h,L)
    nchunks = dtc.shape[1]
    end = acs[..., -1:]
    keep = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()  # (i, j): j <= i
    gate_in = torch.ones_like(acs)      # token i sees the state entering its chunk
    gate_own = torch.ones_like(acs)     # token j counts in its chunk's own state
    carry_gate = torch.ones_like(acs[..., 0])   # (b,c,h): the state entering chunk c+1 keeps chunk c's
    if seq_idx is not None:
        s_tok, s_before = _seq_split(seq_idx, L)                     # (b,c,L), (b,c)
        s_tok = s_tok[:, :, None]
        keep = keep & (s_tok[..., :, None] == s_tok[..., None, :])
        gate_in = (s_tok == s_before[:, :, None, None]).to(W).expand_as(acs)
        gate_own = (s_tok == s_tok[..., -1:]).to(W).expand_as(acs)
        carry_gate = (s_tok[..., -1] == s_before[:, :, None]).to(W).expand_as(carry_gate)
    decay = torch.exp(torch.where(keep, acs[..., :, None] - acs[..., None, :], torch.full((), -math.inf,
                                                                                            device=x.device)))
    into = torch.exp(acs) * gate_in                                  # (b,c,h,L)
    own_w = torch.exp(end - acs) * gate_own                          # chunk-end decay of token j
    carry = torch.exp(end[..., 0]) * carry_gate                      # (b,c,h)

    xs = _tokens(x, L, W)                                            # (b,c,h,L,p)
    Bs, Cs = _tokens(B, L, W, h), _tokens(C, L, W, h)                # (b,c,h,L,n)

    # -- recompute the chunk states and the states entering each chunk
    q = own_w * dtc                                                  # (b,c,h,L): weight of x_j B_j in its state
    own = P.mm(xs.transpose(-1, -2), Bs * q[..., None])             # (b,c,h,p,n)
    state = x.new_zeros(b, h, p, n, dtype=W) if initial_states is None else initial_states.to(W)
    entering = []
    for c in range(nchunks):
        entering.append(state)
        state = carry[:, c, :, None, None] * state + own[:, c]
    entering = torch.stack(entering, dim=1)                          # (b,c,h,p,n)
    entering_st = P.store(entering)

    cb = P.mm(Cs, Bs.transpose(-1, -2))                              # (b,c,h,L,S): C_i . B_j
    scores = cb * decay * dtc[..., None, :]

    # -- the output gate and D (dy becomes the gradient of the pre-gate output y, in x.dtype)
    grads, scales = {}, {}
    dout = dy.to(W)
    if z is not None:
        # the pre-gate output, as the forward saves it (mamba_ssm keeps it in x.dtype)
        y_pre = _untokens(P.mm(scores, xs) + P.mm(Cs, entering_st.transpose(-1, -2)) * into[..., None], l)
        if D is not None:
            y_pre = y_pre + x.to(W) * (D.to(W) if D.dim() == 2 else D.to(W)[:, None])
        if not P.exact:
            y_pre = y_pre.to(x.dtype).to(W)
        zf = z.to(W)
        sig = torch.sigmoid(zf)
        grads["z"] = dout * y_pre * sig * (1 + zf * (1 - sig))
        dout = dout * zf * sig
        if not P.exact:
            dout = dout.to(x.dtype).to(W)
    if D is not None:
        prod = dout * x.to(W)
        grads["D"] = prod.sum(dim=(0, 1)) if D.dim() == 2 else prod.sum(dim=(0, 1, 3))
        sq = prod ** 2
        scales["D"] = (sq.sum(dim=(0, 1)) if D.dim() == 2 else sq.sum(dim=(0, 1, 3))).sqrt()
        dx_skip = dout * (D.to(W) if D.dim() == 2 else D.to(W)[:, None])
    dys = _tokens(dout, L, W)                                        # (b,c,h,L,p)

    # -- the reverse scan: gradient of the state entering each chunk
    # each chunk's share of the state gradient, from its tokens' outputs; stored in the state dtype
    # (autograd through a forward that rounds the state operand to x.dtype rounds its gradient too;
    # mamba_ssm and TileGym keep this share in fp32 and round the sum, so for them it is one rounding
    # more per chunk than they make)
    from_y = P.store(P.mm(dys.transpose(-1, -2), Cs * into[..., None]))   # (b,c,h,p,n)
    G = x.new_zeros(b, h, p, n, dtype=W) if dfinal_states is None else dfinal_states.to(W)
    d_own, d_carry = [None] * nchunks, [None] * nchunks
    for c in reversed(range(nchunks)):
        d_own[c] = G                                                 # d(state after chunk c) = d(own state c)
        d_carry[c] = (P.store(G) * entering[:, c]).sum(dim=(-1, -2))  # (b,h); TileGym reads the stored G
        G = from_y[:, c] + carry[:, c, :, None, None] * G
    if initial_states is not None:
        grads["initial_states"] = G
    d_own = P.store(torch.stack(d_own, dim=1))                       # (b,c,h,p,n)
    d_carry = torch.stack(d_carry, dim=1)                            # (b,c,h)

    # -- intra-chunk term y_i += sum_j (C_i.B_j) decay_ij dt_j x_j
    dyx = P.mm(dys, xs.transpose(-1, -2))                            # dy_i . x_j
    d_cb = dyx * decay * dtc[..., None, :]
    # dx and ddt as mamba_ssm's _chunk_scan_chunk_state_bwd_dx and TileGym's dxtd: one matmul whose
    # operand is the decayed C.B tile in the input dtype, then scaled by dt_j (dx) or dotted with x_j (ddt)
    dx_pre = P.mm((cb * decay).transpose(-1, -2), dys)               # (b,c,h,S,p): sum_i cb_ij decay_ij dy_i
    dx_c = dx_pre * dtc[..., None]
    ddt_c = (dx_pre * xs).sum(dim=-1)
    dC_c = P.mm(d_cb, Bs)
    dB_c = P.mm(d_cb.transpose(-1, -2), Cs)
    t_ij = dyx * scores                                              # d out / d (acs_i - acs_j)
    dacs = t_ij.sum(dim=-1) - t_ij.sum(dim=-2)

    # -- the state entering the chunk, read by every token: y_i += into_i C_i . h_in
    dC_in = P.mm(dys, entering_st) * into[..., None]                # (b,c,h,L,n)
    dC_c = dC_c + dC_in
    dacs = dacs + (dC_in * Cs).sum(dim=-1)

    # -- each chunk's own state: own = sum_j q_j x_j B_j^T
    bg = P.mm(Bs, d_own.transpose(-1, -2))                           # (b,c,h,S,p): B_j . G[p, :]
    dx_c = dx_c + bg * q[..., None]
    dB_c = dB_c + P.mm(xs, d_own) * q[..., None]
    dq = (xs * bg).sum(dim=-1)                                       # (b,c,h,S)
    ddt_c = ddt_c + dq * own_w
    dq_q = dq * q
    dacs = dacs - dq_q
    dacs[..., -1] = dacs[..., -1] + dq_q.sum(dim=-1) + d_carry * carry

    # -- back through the cumsum and dt*A
    revsum = lambda t: torch.flip(_fp32_cumsum(torch.flip(t, dims=(-1,))), dims=(-1,))  # noqa: E731
    d_a = revsum(dacs)
    ddt_c = ddt_c + d_a * A.to(W)[:, None]
    grads["A"] = (d_a * dtc).sum(dim=(0, 1, 3))
    ddt = _untokens(ddt_c[..., None], l)[..., 0] * slope             # (b,l,h)
    if dt_bias is not None:
        grads["dt_bias"] = ddt.sum(dim=(0, 1))
    grads["dt"] = ddt
    if term_scales is not None:
        # The scale of the rounding errors of every gradient that is a sum over tokens: dA, ddt_bias, dD,
        # and ddt through d(dt*A)_k, the cumsum gradient of the rest of its chunk. Each term carries a
        # rounding error of its own size, and independent errors add up like a random walk: the root of
        # the sum of the squared terms, whatever the sum itself cancels to.
        dacs_abs = t_ij.abs().sum(dim=-1) + t_ij.abs().sum(dim=-2) + (dC_in * Cs).abs().sum(dim=-1) + dq_q.abs()
        dacs_abs[..., -1] = dacs_abs[..., -1] + dq_q.abs().sum(dim=-1) + (d_carry * carry).abs()
        d_a_rms = revsum(dacs_abs ** 2).sqrt()
        ddt_scale_c = (dx_pre * xs).abs().sum(dim=-1) + (dq * own_w).abs() + d_a_rms * A.to(W).abs()[:, None]
        ddt_scale = _untokens(ddt_scale_c[..., None], l)[..., 0] * slope
        scales.update(dt=ddt_scale, A=((d_a_rms * dtc) ** 2).sum(dim=(0, 1, 3)).sqrt())
        if dt_bias is not None:
            scales["dt_bias"] = (ddt_scale ** 2).sum(dim=(0, 1)).sqrt()
    dx = _untokens(dx_c, l)
    if D is not None:
        dx = dx + dx_skip
    grads["x"] = dx
    rep = h // g
    grads["B"] = _untokens(dB_c, l).reshape(b, l, g, rep, n).sum(dim=3)
    grads["C"] = _untokens(dC_c, l).reshape(b, l, g, rep, n).sum(dim=3)
    if not P.exact:
        inputs = dict(x=x, dt=dt, A=A, B=B, C=C, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states)
        grads = {k: v.to(inputs[k].dtype) for k, v in grads.items()}
    if term_scales is not None:
        term_scales.update(scales)
    return grads
