"""Mutants of TileGym 1.5.1's cuTile Mamba-2 forward (tilegym/ops/cutile/mamba2.py), one real bug each.

Applied to a copy of the package unpacked from the published wheel ($SSDCHECK_PEERS_DIR; the pristine
file is never edited: mutation/peer_copy.py). The mutants run under `tilegym-first-config`, the
fast-fuzzing mode (TILEGYM_DISABLE_AUTOTUNE=1 around each call; `tilegym`, as shipped, would spend
minutes of exhaustive search on each new shape), so every launch takes the first config of its search space: the state
kernel's non-SWAP, BHT variant with BLOCK_STATE 16; the output kernel persistent, the swap kernel
(`_co_swap_tile`) at chunk 64 and `_co_tile` at chunk 128. Each mutant sits in code that config runs.
"""
from mutation.catalog import maker

IMPL = "tilegym-first-config"   # the adapter of `tilegym` turns TileGym's autotune on for each call
PEER = "tilegym"
ENV = {"TILEGYM_DISABLE_AUTOTUNE": "1"}   # the first config, no minutes of exhaustive search per shape
F = "tilegym/ops/cutile/mamba2.py"
_m = maker(F)

MUTANTS = (
    _m("tg_causal_mask_strict", "mask",
       "chunk-64 output tile: causal mask i > j instead of i >= j, so a token's own input (the diagonal) is dropped",
       "    cb_tile = ct.where(idx[:, None] >= idx[None, :], cb_tile, 0.0)\n"
       "    out_T_tile = out_T_tile * ct.exp2(d_tile[None, :])",
       "    cb_tile = ct.where(idx[:, None] > idx[None, :], cb_tile, 0.0)\n"
       "    out_T_tile = out_T_tile * ct.exp2(d_tile[None, :])"),
    _m("tg_causal_mask_next_token", "mask",
       "chunk-128 output tile: causal mask off by one (i >= j - 1), so the next token leaks into each output",
       "    cb_tile = ct.where(idx[:, None] >= idx[None, :], cb_tile, 0.0)\n"
       "    out_tile = out_tile * ct.exp2(d_tile[:, None])",
       "    cb_tile = ct.where(idx[:, None] >= idx[None, :] - 1, cb_tile, 0.0)\n"
       "    out_tile = out_tile * ct.exp2(d_tile[:, None])"),
    _m("tg_log2e_dropped", "decay",
       "chunk cumsum left in natural-log units while every consumer takes exp2: the log2(e) factor dropped",
       "    d_tile = ct.cumsum(a_tile * dt_tile, axis=1) * LOG2E",
       "    d_tile = ct.cumsum(a_tile * dt_tile, axis=1)"),
    _m("tg_cumsum_in_dt_dtype", "cumsum",
       "chunk cumsum of A*dt accumulated in dt's own dtype (bf16/fp16 when dt comes in the input dtype), not fp32",
       "    d_tile = ct.cumsum(a_tile * dt_tile, axis=1) * LOG2E",
       "    d_tile = ct.cumsum((a_tile * dt_tile).astype(dt_raw.dtype), axis=1) * LOG2E"),
    _m("tg_state_not_decayed", "state",
       "state kernel: the state carried into a chunk is not decayed across it before the chunk's inputs are added",
       "            b_dt_d = b_tile * (dt_tile * ct.exp2(d_last - d_tile))[:, None]\n"
       "            hid_tile = ct.exp2(d_last) * hid_tile\n",
       "            b_dt_d = b_tile * (dt_tile * ct.exp2(d_last - d_tile))[:, None]\n"
       "            hid_tile = hid_tile\n"),
    _m("tg_initial_state_not_decayed", "state",
       "state kernel: the initial state enters the first chunk's end state undecayed (the decay skipped at chunk 0)",
       "            b_dt_d = b_tile * (dt_tile * ct.exp2(d_last - d_tile))[:, None]\n"
       "            hid_tile = ct.exp2(d_last) * hid_tile\n",
       "            b_dt_d = b_tile * (dt_tile * ct.exp2(d_last - d_tile))[:, None]\n"
       "            if chunk_idx > 0: hid_tile = ct.exp2(d_last) * hid_tile\n"),
    _m("tg_chunk_end_off_by_one", "decay",
       "state kernel reads the chunk-end cumsum one position early (chunk_size - 2): the last step's decay is lost",
       "        d_last = ct.extract(d_tile, index=(chunk_size - 1,), shape=(1,))\n\n        if SWAP:\n"
       "            b_dt_d_t",
       "        d_last = ct.extract(d_tile, index=(chunk_size - 2,), shape=(1,))\n\n        if SWAP:\n"
       "            b_dt_d_t"),
    _m("tg_state_groups_tiled", "groups",
       "state kernel maps heads to B groups tiled (h % g) instead of interleaved (h // (h/g))",
       "    head = batch_head % x.shape[2]\n    group = head // num_heads_per_group\n\n    if SWAP:\n"
       "        hid_tile = ct.load(\n            init_state,",
       "    head = batch_head % x.shape[2]\n    group = head % (x.shape[2] // num_heads_per_group)\n\n    if SWAP:\n"
       "        hid_tile = ct.load(\n            init_state,"),
    _m("tg_d_times_dt_x", "output",
       "chunk-64 output: the D skip term multiplies dt*x instead of x",
       "    out_T_tile = out_T_tile + d_val * x_tile.transpose()",
       "    out_T_tile = out_T_tile + d_val * dt_x.transpose()"),
    _m("tg_d_dropped", "output",
       "chunk-128 output: the D skip term is never added",
       "    out_tile = out_tile + d_val * x_tile",
       "    out_tile = out_tile"),
    _m("tg_state_contribution_not_decayed", "decay",
       "chunk-64 output: the entering state's contribution C*h is not decayed to each position in the chunk",
       "    out_T_tile = out_T_tile * ct.exp2(d_tile[None, :])",
       "    out_T_tile = out_T_tile"),
    _m("tg_intra_decay_sign", "decay",
       "chunk-128 output: intra-chunk decay with the sign flipped, exp2(cs_j - cs_i): it grows instead of decaying",
       "    cb_tile = cb_tile * ct.exp2(d_tile[:, None] - d_tile[None, :])\n"
       "    idx = ct.arange(chunk_size, dtype=ct.int32)\n"
       "    cb_tile = ct.where(idx[:, None] >= idx[None, :], cb_tile, 0.0)\n"
       "    out_tile = out_tile * ct.exp2(d_tile[:, None])",
       "    cb_tile = cb_tile * ct.exp2(d_tile[None, :] - d_tile[:, None])\n"
       "    idx = ct.arange(chunk_size, dtype=ct.int32)\n"
       "    cb_tile = ct.where(idx[:, None] >= idx[None, :], cb_tile, 0.0)\n"
       "    out_tile = out_tile * ct.exp2(d_tile[:, None])"),
    _m("tg_last_tile_skipped", "tiling",
       "persistent output loop bound off by one: the last tile (last batch, chunk and head) is never computed",
       "        total = num_chunks * num_head_tiles * num_heads * batch_size\n"
       "        for tile_idx in range(start_idx, total, num_sms):",
       "        total = num_chunks * num_head_tiles * num_heads * batch_size\n"
       "        for tile_idx in range(start_idx, total - 1, num_sms):"),
    _m("tg_launch_cache_shape_blind", "layout",
       "launch cache keyed on dtype and device only: the config (tiles, grid) chosen for one shape is reused for another",
       "        (tuple(arg.shape), tuple(arg.stride()), arg.dtype, str(arg.device)) if torch.is_tensor(arg) else arg",
       "        (arg.dtype, str(arg.device)) if torch.is_tensor(arg) else arg"),
    _m("tg_dt_copy_in_bf16", "precision",
       "the transposed dt copy the state and output kernels read is allocated in bf16 whatever dt's dtype",
       "    dt_bht = torch.empty(batch_size, num_heads, num_tokens, dtype=dt.dtype, device=dt.device)",
       "    dt_bht = torch.empty(batch_size, num_heads, num_tokens, dtype=torch.bfloat16, device=dt.device)"),
    _m("tg_num_chunks_floor", "padding",
       "state kernel counts chunks with floor division, which would drop a partial last chunk",
       "    num_chunks = ct.cdiv(b.shape[1], chunk_size)",
       "    num_chunks = b.shape[1] // chunk_size",
       equivalent="mamba2_chunk_forward calls _validate_chunk_size first, which raises unless num_tokens % "
                  "chunk_size == 0; for every sequence the peer accepts floor and ceiling division agree"),
)
