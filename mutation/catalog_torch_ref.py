"""Mutants of kernels/torch_ref.py: realistic SSD forward bugs, each one small text substitution.

Each one models a mistake seen (or easy to make) in real SSD kernels: mamba_ssm's Triton kernels,
TileGym's cuTile port, ssd_minimal. `tests/test_mutants_cpu.py` requires every non-equivalent one to be
killed by `tests/test_properties.py --hypothesis-profile=mutant`.
"""
from __future__ import annotations

from mutation.catalog import maker

IMPL = "torch-ref"
FILE = "kernels/torch_ref.py"


_m = maker(FILE)


MUTANTS = (
    # ------------------------------------------------------------------ masks
    _m("causal_mask_strict", "mask",
       "causal mask j < i instead of j <= i: the diagonal (a token's own input) is dropped",
       "causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()",
       "causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril(-1)"),
    _m("causal_mask_leaks_next", "mask",
       "causal mask j <= i + 1: token i sees the next token's input",
       "causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()",
       "causal = torch.ones(L, L, dtype=torch.bool, device=x.device).tril(1)"),
    _m("mask_after_exp", "mask",
       "mask multiplied in after exp: the masked upper triangle overflows to inf, and inf * 0 = NaN",
       "decay = torch.exp(torch.where(keep, seg, -math.inf))",
       "decay = torch.exp(seg) * keep"),

    # ------------------------------------------------------------------ decays
    _m("chunk_state_decay_sign", "decay",
       "chunk-state weights exp(cs_j - cs_end) instead of exp(cs_end - cs_j): decay sign flipped",
       "decay = torch.exp(dA_cumsum[..., -1:] - dA_cumsum) * dt_out",
       "decay = torch.exp(dA_cumsum - dA_cumsum[..., -1:]) * dt_out"),
    _m("state_decay_exp2", "decay",
       "exp2 applied to a natural-log cumsum (log2-domain kernel missing its log2(e) prescale)",
       "state_decay = torch.exp(cs)",
       "state_decay = torch.exp2(cs)"),
    _m("state_decay_exclusive", "decay",
       "incoming state decayed to token i-1 (exclusive cumsum) instead of token i (inclusive)",
       "state_decay = torch.exp(cs)",
       "state_decay = torch.exp(F.pad(cs, (0, 0, 1, 0))[:, :, :-1])"),
    _m("carry_not_decayed", "decay",
       "carried state added without the chunk's total decay exp(cs_end)",
       "carry = chunk_decay[:, k, :, None, None] * carry + states[:, k]",
       "carry = carry + states[:, k]"),
    _m("chunk_decay_early", "decay",
       "chunk decay read at position L-2 instead of L-1: the last token's decay step is lost",
       "chunk_decay = torch.exp(dA_cumsum[..., -1]).permute(0, 2, 1)",
       "chunk_decay = torch.exp(dA_cumsum[..., -2]).permute(0, 2, 1)"),

    # ------------------------------------------------------------------ states
    _m("state_from_wrong_chunk", "state",
       "chunk c reads the state after its own update (states[c]) instead of the one entering it",
       "        entering.append(carry)\n"
       "        carry = chunk_decay[:, k, :, None, None] * carry + states[:, k]\n",
       "        carry = chunk_decay[:, k, :, None, None] * carry + states[:, k]\n"
       "        entering.append(carry)\n"),
    _m("initial_states_ignored", "state",
       "initial_states accepted but never loaded: the carry always starts at zero",
       "carry = states.new_zeros(b, h, p, n) if initial_states is None else initial_states.float()",
       "carry = states.new_zeros(b, h, p, n)"),
    _m("initial_states_batch_stride0", "layout",
       "initial_states read with batch stride 0: every batch element starts from batch 0's state",
       "carry = states.new_zeros(b, h, p, n) if initial_states is None else initial_states.float()",
       "carry = states.new_zeros(b, h, p, n) if initial_states is None else initial_states[:1].float().expand(b, -1, -1, -1)"),
    _m("zero_state_transposed", "layout",
       "zero start state allocated (n, p) instead of (p, n): identical when headdim == dstate, wrong shape otherwise",
       "carry = states.new_zeros(b, h, p, n) if initial_states is None else initial_states.float()",
       "carry = states.new_zeros(b, h, n, p) if initial_states is None else initial_states.float()"),
    _m("state_read_transposed", "layout",
       "incoming state read with (n, p) strides instead of (p, n): a plain transpose when headdim == dstate",
       '_mm(Cc, states_in, "bcihn,bchpn->bcihp", dtype)',
       '_mm(Cc, states_in.transpose(-1, -2).reshape(states_in.shape), "bcihn,bchpn->bcihp", dtype)'),

    # ------------------------------------------------------------------ groups
    _m("groups_tiled", "groups",
       "B/C groups tiled (head i reads group i % g) instead of repeat_interleave (group i // (h/g))",
       "return t.repeat_interleave(nheads // t.shape[-2], dim=-2)",
       "return t.repeat(*[1] * (t.dim() - 2), nheads // t.shape[-2], 1)"),

    # ------------------------------------------------------------------ dt processing
    _m("bias_after_softplus", "dt",
       "dt_bias added after softplus instead of before",
       "    if dt_bias is not None:\n"
       "        d = d + dt_bias.float()\n"
       "    if dt_softplus:\n"
       "        d = torch.where(d <= 20.0, F.softplus(d), d)\n",
       "    if dt_softplus:\n"
       "        d = torch.where(d <= 20.0, F.softplus(d), d)\n"
       "    if dt_bias is not None:\n"
       "        d = d + dt_bias.float()\n"),
    _m("softplus_only_with_bias", "dt",
       "softplus skipped on the no-bias path (it lives inside the has_bias branch)",
       "    if dt_softplus:\n",
       "    if dt_softplus and dt_bias is not None:\n"),
    _m("dt_limit_before_softplus", "dt",
       "dt_limit clamp applied to the raw dt, before bias and softplus",
       "    d = dt.float()\n"
       "    if dt_bias is not None:\n",
       "    d = dt.float()\n"
       "    if tuple(dt_limit) != (0.0, math.inf):\n"
       "        d = d.clamp(min=dt_limit[0], max=dt_limit[1])\n"
       "        dt_limit = (0.0, math.inf)\n"
       "    if dt_bias is not None:\n"),
    _m("dt_limit_max_dropped", "dt",
       "dt_limit's upper bound ignored (only the lower clamp applied)",
       "d = d.clamp(min=dt_limit[0], max=dt_limit[1])",
       "d = d.clamp(min=dt_limit[0])"),
    _m("softplus_threshold_explicit_dropped", "dt",
       "explicit 'identity above 20' branch dropped in favour of F.softplus alone",
       "d = torch.where(d <= 20.0, F.softplus(d), d)",
       "d = F.softplus(d)",
       equivalent="F.softplus(d) has beta=1, threshold=20 and already returns d where d > 20; at d <= 20 both "
                  "sides compute F.softplus(d). Same function, bit for bit."),

    # ------------------------------------------------------------------ cumsum
    _m("cumsum_not_reset", "cumsum",
       "cumsum of dt*A runs over the whole sequence instead of restarting in every chunk",
       "return torch.cumsum(dA, dim=-1), dt_out",
       "return torch.cumsum(dA.flatten(-2), dim=-1).view_as(dA), dt_out"),
    _m("cumsum_in_dt_dtype", "precision",
       "cumsum of dt*A accumulated in dt's dtype: fine for fp32 dt, wrong when dt comes in bf16/fp16",
       "return torch.cumsum(dA, dim=-1), dt_out",
       "return torch.cumsum(dA.to(dt.dtype), dim=-1).float(), dt_out"),

    # ------------------------------------------------------------------ partial last chunk
    _m("dt_padding_unmasked", "padding",
       "dt padded with zeros before bias/softplus/clamp (masked load, other=0) and not masked after",
       "    d = dt.float()\n",
       "    d = _pad_len(dt.float(), 1, chunk_size)\n"
       "    l = d.shape[1]\n"),
    _m("dt_padding_mask_removed", "padding",
       "the explicit mask of padded dt after softplus removed",
       "    d = torch.where(valid, d, 0.0)                   # ... but softplus(0) was not 0: mask after it.\n",
       "",
       equivalent="here bias, softplus and clamp run on the unpadded (b, l, h) dt and `_chunks` zero-pads "
                  "afterwards, so padded entries already hold 0 and `valid` is True on every real token: "
                  "the torch.where is an identity."),

    # ------------------------------------------------------------------ packed sequences
    _m("seq_reset_dropped", "seq_idx",
       "carried state not reset where a new sequence starts (seq_idx ignored in state passing)",
       "        chunk_decay = chunk_decay * (end == prev)[..., None]            # reset where a sequence starts\n",
       ""),
    _m("seq_state_mask_dropped", "seq_idx",
       "incoming state reaches tokens of a sequence that starts inside the chunk",
       "    if seq_idx is not None:\n"
       "        state_decay = state_decay * (tok == prev[..., None])[..., None]\n",
       ""),
    _m("seq_intra_mask_dropped", "seq_idx",
       "intra-chunk scores not masked across sequence boundaries",
       "        keep = keep & (tok[..., :, None] == tok[..., None, :]).unsqueeze(2)\n",
       ""),
    _m("seq_chunk_state_mask_dropped", "seq_idx",
       "chunk state sums tokens of every sequence in the chunk, not only the chunk end's sequence",
       "        decay = decay * (tok == end[..., None]).unsqueeze(1)          # only the chunk end's sequence\n",
       ""),

    # ------------------------------------------------------------------ varlen states
    _m("varlen_boundary_off_by_one", "varlen",
       "varlen: a sequence starting exactly at a chunk edge also takes the previous sequence's state",
       "with_entering = start < c * L or start == 0",
       "with_entering = start <= c * L or start == 0"),
    _m("varlen_state0_drops_initial_states", "varlen",
       "varlen state 0 without initial_states when sequence 0 ends inside chunk 0 or on its last token "
       "(mamba_ssm 2.3.2.post1's chunk_state_varlen; once the oracles' and torch-ref's behaviour too)",
       "with_entering = start < c * L or start == 0",
       "with_entering = start < c * L"),
    _m("varlen_from_chunk_start", "varlen",
       "varlen state sums from the chunk start instead of the sequence start",
       "lo = max(start - c * L, 0)",
       "lo = 0"),

    # ------------------------------------------------------------------ D and z
    _m("D_vector_dropped", "output",
       "D of shape (h,) ignored: only the per-channel (h, p) branch implemented",
       "    if D is not None:\n",
       "    if D is not None and D.dim() == 2:\n"),
    _m("z_sigmoid", "output",
       "gate sigmoid(z) instead of silu(z) = z * sigmoid(z)",
       "y = y * F.silu(z.float())",
       "y = y * torch.sigmoid(z.float())"),
    _m("z_before_D", "output",
       "gate applied before the D skip term is added (y = silu(z) * y + D x)",
       "    if D is not None:\n"
       "        Df = D.float().view(1, 1, h, -1)\n"
       "        y = y + x.float() * Df\n"
       "    if z is not None:\n"
       "        y = y * F.silu(z.float())\n",
       "    if z is not None:\n"
       "        y = y * F.silu(z.float())\n"
       "    if D is not None:\n"
       "        Df = D.float().view(1, 1, h, -1)\n"
       "        y = y + x.float() * Df\n"),
    _m("D_headdim_column_major", "layout",
       "D (h, p) read with column-major strides: right for D (h,) and for one head only",
       "Df = D.float().view(1, 1, h, -1)",
       "Df = D.float().reshape(1, 1, -1, h).transpose(-1, -2)"),

    # ------------------------------------------------------------------ precision
    _m("mm_narrow_accumulate", "precision",
       "matmul accumulator in the input dtype (bf16/fp16): every partial sum over k is rounded",
       "    return torch.einsum(spec, a.to(dtype).float(), b.to(dtype).float())\n",
       "    (ia, ib), out = spec.split(\"->\")[0].split(\",\"), spec.split(\"->\")[1]\n"
       "    k = next(ch for ch in ia if ch in ib and ch not in out)\n"
       "    acc = None\n"
       "    for j in range(a.shape[ia.index(k)]):\n"
       "        t = torch.einsum(spec, a.narrow(ia.index(k), j, 1).to(dtype).float(),\n"
       "                         b.narrow(ib.index(k), j, 1).to(dtype).float())\n"
       "        acc = (t if acc is None else acc + t).to(dtype).float()\n"
       "    return acc\n"),
    _m("dA_cumsum_in_input_dtype", "precision",
       "dA_cumsum buffer stored in the input dtype: cs_i - cs_j then cancels catastrophically in bf16/fp16",
       "cs = dA_cumsum.permute(0, 2, 3, 1)  ",
       "cs = dA_cumsum.permute(0, 2, 3, 1).to(dtype).float()  "),
    _m("carry_in_bf16", "precision",
       "state accumulator carried in bf16 between chunks instead of fp32",
       "carry = chunk_decay[:, k, :, None, None] * carry + states[:, k]",
       "carry = (chunk_decay[:, k, :, None, None] * carry + states[:, k]).bfloat16().float()"),
    _m("states_in_rounded_early", "precision",
       "states entering each chunk stored in x.dtype before the scan (state_dtype='input')",
       "out = chunk_scan(B, C, x, dt_out, dA_cumsum, states_in, D, z, seq_idx)",
       "out = chunk_scan(B, C, x, dt_out, dA_cumsum, states_in.to(x.dtype), D, z, seq_idx)",
       equivalent="chunk_scan uses states_in only as an operand of `_mm`, which rounds it to x.dtype anyway; "
                  "rounding an fp32 value to x.dtype once or twice gives the same value (the second cast is "
                  "exact), and _varlen_states still gets the fp32 states."),

    # ------------------------------------------------------------------ layouts
    _m("chunks_column_major", "layout",
       "sequence split into chunks with column-major strides: right only when there is one chunk",
       "return t.reshape(t.shape[0], t.shape[1] // chunk_size, chunk_size, *t.shape[2:])",
       "return t.reshape(t.shape[0], chunk_size, t.shape[1] // chunk_size, *t.shape[2:]).transpose(1, 2)"),
)
