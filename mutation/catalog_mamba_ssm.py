"""Mutants of mamba_ssm 2.3.2.post1's Triton SSD forward (mamba_ssm/ops/triton/ssd_*.py), one real bug each.

Applied to a copy of the package unpacked from the published sdist ($SSDCHECK_PEERS_DIR; the pristine
files are never edited: mutation/peer_copy.py); the mamba-ssm adapter finds the copy through
$SSDCHECK_MAMBA_SSM_SRC. The suite runs with MAMBA_DETERMINISTIC=1, as the project's correctness runs
do (one autotune config per kernel); every mutant is in code the forward runs whatever the config.
"""
from mutation.catalog import maker

IMPL = "mamba-ssm"
PEER = "mamba-ssm"
ENV = {"MAMBA_DETERMINISTIC": "1"}   # the cheapest config, no autotuning per key
_T = "mamba_ssm/ops/triton/"
CS, SC, SP = _T + "ssd_chunk_state.py", _T + "ssd_chunk_scan.py", _T + "ssd_state_passing.py"
BMM, COMB = _T + "ssd_bmm.py", _T + "ssd_combined.py"
_m = maker(SC)

_BIAS = ("    if HAS_DT_BIAS:\n"
         "        dt_bias = tl.load(dt_bias_ptr + offs_h * stride_dt_bias_head, mask=offs_h < nheads, other=0.0)"
         ".to(tl.float32)\n"
         "        dt += dt_bias[:, None]\n")
_SOFTPLUS = ("    if DT_SOFTPLUS:\n"
             "        dt = tl.where(dt <= 20.0, softplus(dt), dt)\n")
_CLAMP = "    dt = tl.minimum(tl.maximum(dt, dt_min), dt_max)\n"
_PAD = "    dt = tl.where((offs_h[:, None] < nheads) & (offs_c[None, :] < chunk_size_limit), dt, 0.0)\n"
_DT_STORE = "    tl.store(dt_out_ptrs, dt, mask="

MUTANTS = (
    _m("ms_causal_mask_strict", "mask",
       "chunk scan causal mask i > j instead of i >= j: a token's own input (the diagonal) is dropped",
       "            mask = offs_m[:, None] >= k + offs_k[None, :]",
       "            mask = offs_m[:, None] > k + offs_k[None, :]"),
    _m("ms_bias_after_softplus", "dt",
       "dt_bias added after the softplus instead of before it",
       _BIAS + _SOFTPLUS + "    # As of Triton",
       _SOFTPLUS + _BIAS + "    # As of Triton", file=CS),
    _m("ms_dt_limit_upper_ignored", "dt",
       "dt clamped to dt_limit's lower bound only: the upper limit is ignored",
       _CLAMP + _PAD + _DT_STORE,
       "    dt = tl.maximum(dt, dt_min)\n" + _PAD + _DT_STORE, file=CS),
    _m("ms_dt_padding_unmasked", "padding",
       "dt past the sequence end not zeroed after bias/softplus: the partial last chunk's cumsum keeps decaying",
       _PAD + _DT_STORE,
       "    dt = tl.where(offs_h[:, None] < nheads, dt, 0.0)\n" + _DT_STORE, file=CS),
    _m("ms_cumsum_buffer_in_dt_dtype", "cumsum",
       "chunk cumsum buffer allocated in dt's dtype: a bf16/fp16 dt gets a bf16/fp16 cumsum",
       "    dA_cumsum = torch.empty(batch, nheads, nchunks, chunk_size, device=dt.device, dtype=torch.float32)\n"
       "    grid_chunk_cs",
       "    dA_cumsum = torch.empty(batch, nheads, nchunks, chunk_size, device=dt.device, dtype=dt.dtype)\n"
       "    grid_chunk_cs", file=CS),
    _m("ms_chunk_state_decay_sign", "decay",
       "chunk state: decay to the chunk end with the sign flipped (then clipped at 0, so no decay at all)",
       "            scale = tl.exp(tl.minimum((dA_cs_last - dA_cs_k), 0.0)) * dt_k",
       "            scale = tl.exp(tl.minimum((dA_cs_k - dA_cs_last), 0.0)) * dt_k", file=CS),
    _m("ms_chunk_state_seq_idx_ignored", "seq_idx",
       "chunk state sums the tokens of every sequence in the chunk, not only the last sequence's",
       "scale = tl.where((seq_idx_last >= 0) & (seq_idx_k == seq_idx_last), ",
       "scale = tl.where((seq_idx_last >= 0), ", file=CS),
    _m("ms_chunk_state_groups_tiled", "groups",
       "chunk state maps heads to B groups tiled (h % g) instead of interleaved (h // (h/g))",
       "    b_ptr += pid_b * stride_b_batch + pid_c * chunk_size * stride_b_seqlen + (pid_h // nheads_ngroups_ratio) "
       "* stride_b_head\n    x_ptr += pid_b * stride_x_batch + pid_c * chunk_size * stride_x_seqlen + pid_h * "
       "stride_x_head\n    dt_ptr += pid_b * stride_dt_batch + pid_c * stride_dt_chunk + pid_h * stride_dt_head\n"
       "    dA_cumsum_ptr += pid_b * stride_dA_cs_batch + pid_c * stride_dA_cs_chunk + pid_h * stride_dA_cs_head\n"
       "    if HAS_SEQ_IDX:\n        seq_idx_ptr += pid_b * stride_seq_idx_batch + pid_c * chunk_size * "
       "stride_seq_idx_seqlen\n\n    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)\n"
       "    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)\n    offs_k = tl.arange(0, BLOCK_SIZE_K)\n"
       "    x_ptrs = x_ptr + (offs_m[:, None] * stride_x_hdim + offs_k[None, :] * stride_x_seqlen)",
       "    b_ptr += pid_b * stride_b_batch + pid_c * chunk_size * stride_b_seqlen + (pid_h % (tl.num_programs(2) "
       "// nheads_ngroups_ratio)) * stride_b_head\n    x_ptr += pid_b * stride_x_batch + pid_c * chunk_size * "
       "stride_x_seqlen + pid_h * stride_x_head\n    dt_ptr += pid_b * stride_dt_batch + pid_c * stride_dt_chunk + "
       "pid_h * stride_dt_head\n    dA_cumsum_ptr += pid_b * stride_dA_cs_batch + pid_c * stride_dA_cs_chunk + "
       "pid_h * stride_dA_cs_head\n    if HAS_SEQ_IDX:\n        seq_idx_ptr += pid_b * stride_seq_idx_batch + "
       "pid_c * chunk_size * stride_seq_idx_seqlen\n\n    offs_m = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)\n"
       "    offs_n = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)\n    offs_k = tl.arange(0, BLOCK_SIZE_K)\n"
       "    x_ptrs = x_ptr + (offs_m[:, None] * stride_x_hdim + offs_k[None, :] * stride_x_seqlen)", file=CS),
    _m("ms_state_decay_exp2", "decay",
       "chunk scan decays the entering state with exp2 of a natural-log cumsum (the exponent's base confused)",
       "        if not HAS_SEQ_IDX:\n            scale_m = tl.exp(dA_cs_m)\n        else:\n"
       "            scale_m = tl.where(seq_idx_m == seq_idx_prev, tl.exp(dA_cs_m), 0.0)\n"
       "        if BLOCK_SIZE_DSTATE <= 128:\n            C = tl.load(C_ptrs, mask=(offs_m[:, None] < chunk_size_limit)",
       "        if not HAS_SEQ_IDX:\n            scale_m = tl.exp2(dA_cs_m)\n        else:\n"
       "            scale_m = tl.where(seq_idx_m == seq_idx_prev, tl.exp(dA_cs_m), 0.0)\n"
       "        if BLOCK_SIZE_DSTATE <= 128:\n            C = tl.load(C_ptrs, mask=(offs_m[:, None] < chunk_size_limit)"),
    _m("ms_states_from_wrong_chunk", "state",
       "state passing never advances past the initial state's slot: each chunk reads its own end state, not its start",
       "    tl.store(out_ptrs, states, mask=offs_m < dim)\n    out_ptrs += stride_out_chunk\n    seq_idx = 0\n",
       "    tl.store(out_ptrs, states, mask=offs_m < dim)\n    seq_idx = 0\n", file=SP),
    _m("ms_final_state_one_chunk_early", "state",
       "final state taken from the state entering the last chunk (one chunk early) instead of the state after it",
       'for t in [states, final_states]]',
       'for t in [states, states[:, -1]]]', file=COMB),
    _m("ms_seq_idx_reset_dropped", "seq_idx",
       "state passing's seq_idx reset never fires (>= instead of ==): a new sequence inherits the previous one's state",
       "            scale = tl.where(seq_idx_new == seq_idx, scale, 0.0)\n            seq_idx = seq_idx_new\n"
       "        states = scale * states + new_states",
       "            scale = tl.where(seq_idx_new >= seq_idx, scale, 0.0)\n            seq_idx = seq_idx_new\n"
       "        states = scale * states + new_states", file=SP),
    _m("ms_initial_state_not_decayed", "state",
       "state passing adds the initial state to the first chunk's state undecayed (the decay skipped at chunk 0)",
       "        states = scale * states + new_states",
       "        states = tl.where(c == 0, 1.0, scale) * states + new_states", file=SP),
    _m("ms_z_sigmoid_gate", "output",
       "z gate sigmoid(z) instead of silu(z) = z * sigmoid(z)",
       "other=0.0).to(tl.float32)\n        acc *= z * tl.sigmoid(z)",
       "other=0.0).to(tl.float32)\n        acc *= tl.sigmoid(z)"),
    _m("ms_last_chunk_limit_off_by_one", "padding",
       "chunk scan's valid length off by one in the last chunk: the sequence's final token is never written",
       "    chunk_size_limit = min(chunk_size, seqlen - pid_c * chunk_size)\n    if HAS_SEQ_IDX:\n"
       "        seq_idx_prev = tl.load(seq_idx_ptr - stride_seq_idx_seqlen, mask=pid_c >= 1, other=0)\n"
       "        seq_idx_m = tl.load(seq_idx_ptr + offs_m * stride_seq_idx_seqlen, mask=offs_m < chunk_size_limit, "
       "other=-1)\n    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)\n\n    # Without the if",
       "    chunk_size_limit = min(chunk_size, seqlen - pid_c * chunk_size - 1)\n    if HAS_SEQ_IDX:\n"
       "        seq_idx_prev = tl.load(seq_idx_ptr - stride_seq_idx_seqlen, mask=pid_c >= 1, other=0)\n"
       "        seq_idx_m = tl.load(seq_idx_ptr + offs_m * stride_seq_idx_seqlen, mask=offs_m < chunk_size_limit, "
       "other=-1)\n    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)\n\n    # Without the if"),
    _m("ms_cb_transposed", "layout",
       "C*B chunk scores written with their two chunk strides swapped: the score matrix is stored transposed",
       "out.stride(2), out.stride(-2), out.stride(-1),",
       "out.stride(2), out.stride(-1), out.stride(-2),", file=BMM),
    _m("ms_cb_fp32_in_bf16", "precision",
       "C*B chunk scores of fp32 inputs computed with bf16 operands",
       "                 (tl.float16 if a.dtype == torch.float16 or b.dtype == torch.float16 else tl.float32))",
       "                 (tl.float16 if a.dtype == torch.float16 or b.dtype == torch.float16 else tl.bfloat16))",
       file=BMM),
    _m("ms_d_stride_assumed_one", "output",
       "chunk scan loads a per-head D (h,) at D_ptr + head, assuming its stride is 1",
       "        else:\n            D = tl.load(D_ptr + pid_h * stride_D_head).to(tl.float32)\n"
       "        x_residual = tl.load(x_ptr + (offs_m[:, None] * stride_x_seqlen + offs_n[None, :] * stride_x_hdim),\n"
       "                             mask=(offs_m[:, None] < chunk_size_limit) & (offs_n[None, :] < hdim), "
       "other=0.0).to(tl.float32)\n        acc += x_residual * D\n\n    if HAS_Z:\n        out_x_ptr +=",
       "        else:\n            D = tl.load(D_ptr + pid_h).to(tl.float32)\n"
       "        x_residual = tl.load(x_ptr + (offs_m[:, None] * stride_x_seqlen + offs_n[None, :] * stride_x_hdim),\n"
       "                             mask=(offs_m[:, None] < chunk_size_limit) & (offs_n[None, :] < hdim), "
       "other=0.0).to(tl.float32)\n        acc += x_residual * D\n\n    if HAS_Z:\n        out_x_ptr +=",
       equivalent="a 1-D D reaches the kernel with stride 1: _mamba_chunk_scan_combined_fwd (and the adapter's "
                  "chunk_scan stage) make D contiguous when D.stride(-1) != 1, so stride_D_head = D.stride(0) = 1"),
)
