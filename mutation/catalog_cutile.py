"""Mutants of the cuTile SSD forward (kernels/cutile/kernels.py and launcher.py).

Same idea as catalog_torch_ref.py, plus the bugs only a tiled kernel can have: tile indices and loop
bounds (a chunk of 128 or 256 tokens is 2 or 4 tiles of BL = 64; headdim and dstate above the tile
width loop over tiles), log2-unit decays, the 2-D tile grid decode, runtime flags. Several only show
for some shapes (chunk_size > 64, dstate 256, headdim 128, ngroups strictly between 1 and nheads),
which is what the GPU strategy's menus and weights are for.

Running them needs a GPU: `python -m mutation.run --catalog cutile --budget-s 300` (the first call of
each kernel configuration compiles it). `tests/test_mutants_cpu.py` only checks that every snippet
still applies exactly once, so a refactor of the kernels shows up as catalog rot, not as silent
dead mutants. Dispatch facts used below (dispatch.py): chunk_state always runs with PF=0, BP=64, on
the general path (_state_tiles) with (BL, BN) in {(64, 32), (64, 16), (128, 16)} and on the FAST path
(aligned problems without seq_idx, catalog_cutile_fast.py) with (64, 32), (128, 16), (128, 64), (256, 32),
(256, 64); chunk_scan with PERSIST=0, BL=BP=64, BN in {64, 128}, and when aligned FAST = the chunk size
(64: catalog_cutile_fast.py; 128 and 256 in 64-row tiles: catalog_cutile_fastr.py); varlen_state with
BP=BN=64.
"""
from __future__ import annotations

from mutation.catalog import maker

IMPL = "cutile"
K = "kernels/cutile/kernels.py"
LAUNCHER = "kernels/cutile/launcher.py"


_m = maker(K)


MUTANTS = (
    # ------------------------------------------------------------------ 1. chunk_cumsum_kernel
    _m("cu_log2e_dropped", "decay",
       "A not converted to log2 units, while every decay downstream is an exp2",
       "a = ct.load(A, (hb,), shape=(BH,), padding_mode=ZERO) * LOG2E",
       "a = ct.load(A, (hb,), shape=(BH,), padding_mode=ZERO)"),
    _m("cu_bias_dropped", "dt",
       "dt_bias loaded but never added",
       "d = d.astype(ct.float32) + bias[None, :]",
       "d = d.astype(ct.float32)"),
    _m("cu_softplus_branch_swapped", "dt",
       "softplus branch swapped: identity below 20, softplus above",
       "d = ct.where(d > 20.0, d, sp)",
       "d = ct.where(d > 20.0, sp, d)"),
    _m("cu_dt_max_dropped", "dt",
       "dt_limit's upper bound not applied (only the max with dt_min)",
       "d = ct.minimum(ct.maximum(d, dt_min, propagate_nan=True), dt_max, propagate_nan=True)",
       "d = ct.maximum(d, dt_min, propagate_nan=True)"),
    _m("cu_dt_padding_unmasked", "padding",
       "dt past seqlen not zeroed after bias/softplus (the ZERO-padded load became softplus(bias))",
       "            d = ct.where((pos < seqlen)[:, None], d, 0.0)\n",
       ""),
    _m("cu_cumsum_carry_dropped", "tiling",
       "cumsum restarts at every 64-token tile instead of every chunk (wrong for chunk_size > 64)",
       "run = ct.cumsum(d * a[None, :], axis=0) + carry",
       "run = ct.cumsum(d * a[None, :], axis=0)"),
    _m("cu_cumsum_carry_row", "tiling",
       "carry between tiles taken from row BL-2 instead of the tile's last row",
       "carry = ct.extract(run, (BL - 1, 0), shape=(1, BH))",
       "carry = ct.extract(run, (BL - 2, 0), shape=(1, BH))"),

    # ------------------------------------------------------------------ 2. chunk_state_kernel
    _m("cu_state_tile_decode_swapped", "layout",
       "2-D (p tile, n tile) grid index decoded column-major instead of row-major",
       "    pt = tile // n_ntiles\n    nt = tile % n_ntiles\n    g = hh // heads_per_group\n    n_sub = chunk_size // BL\n",
       "    pt = tile % n_ntiles\n    nt = tile // n_ntiles\n    g = hh // heads_per_group\n    n_sub = chunk_size // BL\n"),
    _m("cu_state_groups_tiled", "groups",
       "B group of head hh taken as hh % ngroups (tile) instead of hh // heads_per_group",
       "    g = hh // heads_per_group\n    n_sub = chunk_size // BL\n    ntiles",
       "    g = hh % (x.shape[2] // heads_per_group)\n    n_sub = chunk_size // BL\n    ntiles"),
    _m("cu_state_init_under_seq_flag", "state",
       "initial state loaded under the has_seq flag instead of has_init (copy-paste of a runtime flag)",
       "    if has_init != 0:\n        state = ct.load(init",
       "    if has_seq != 0:\n        state = ct.load(init"),
    _m("cu_state_weight_sign", "decay",
       "chunk-state weights 2^(cs_j - cs_end) instead of 2^(cs_end - cs_j)",
       "w = ct.where(keep, ct.exp2(csl - csc) * dtc_t, 0.0)",
       "w = ct.where(keep, ct.exp2(csc - csl) * dtc_t, 0.0)"),
    _m("cu_state_weight_no_dt", "dt",
       "chunk-state weights miss the dt factor",
       "w = ct.where(keep, ct.exp2(csl - csc) * dtc_t, 0.0)",
       "w = ct.where(keep, ct.exp2(csl - csc), 0.0)"),
    _m("cu_state_seq_mask_dropped", "seq_idx",
       "chunk state sums tokens of every sequence in the tile, not only the chunk end's sequence",
       "            keep = keep & (seqs == sql)\n",
       ""),
    _m("cu_state_keep_padding", "padding",
       "tokens past seqlen kept in the chunk-state sum",
       "keep = (t * BL + ct.arange(BL, dtype=ct.int32)) < seqlen",
       "keep = (t * BL + ct.arange(BL, dtype=ct.int32)) >= 0",
       equivalent="past seqlen the x and B tiles load zeros (ZERO padding) and dtc is 0 (chunk_cumsum writes 0 "
                  "there; the stage entry point gets the caller's dt_out, and every property passes the "
                  "oracle's, also 0), while cs repeats a finite value: the weight times x is exactly 0 either "
                  "way. Defensive masking the suite cannot see."),
    _m("cu_state_reset_dropped", "seq_idx",
       "carried state not reset where a new sequence starts",
       "state = ct.where(sql == seq_prev, state * ct.exp2(csl), 0.0)",
       "state = state * ct.exp2(csl)"),
    _m("cu_state_not_decayed", "decay",
       "carried state not decayed by the chunk's total 2^cs_end",
       "state = ct.where(sql == seq_prev, state * ct.exp2(csl), 0.0)",
       "state = ct.where(sql == seq_prev, state, 0.0)"),
    _m("cu_state_stored_at_wrong_chunk", "state",
       "state after chunk c stored as the state entering chunk c instead of c + 1",
       "ct.store(states, (b, c + 1, hh, pt, nt),",
       "ct.store(states, (b, c, hh, pt, nt),"),

    # ------------------------------------------------------------------ 3. chunk_scan_kernel
    _m("cu_scan_causal_strict", "mask",
       "diagonal-tile causal mask i > j instead of i >= j",
       "keep = (pos_i[:, None] >= pos_i[None, :]) & (pos_i < seqlen)[None, :]",
       "keep = (pos_i[:, None] > pos_i[None, :]) & (pos_i < seqlen)[None, :]"),
    _m("cu_scan_diag_exp_not_exp2", "decay",
       "diagonal-tile decay uses exp on log2-unit cumsums",
       "w = ct.where(keep, cb * ct.exp2(cs_i[:, None] - cs_i[None, :]) * dt_i[None, :], 0.0)",
       "w = ct.where(keep, cb * ct.exp(cs_i[:, None] - cs_i[None, :]) * dt_i[None, :], 0.0)"),
    _m("cu_scan_state_decay_dropped", "decay",
       "incoming state term not decayed to token i (2^cs_i missing)",
       "acc = ct.where((seq_i == seq_prev)[:, None], acc * ct.exp2(cs_i)[:, None], 0.0)",
       "acc = ct.where((seq_i == seq_prev)[:, None], acc, 0.0)"),
    _m("cu_scan_seq_prev_off_by_one", "seq_idx",
       "sequence before the chunk read at the chunk's first token instead of the previous chunk's last",
       "seq_prev = ct.load(seq_idx, (b, c * chunk_size - 1), shape=())",
       "seq_prev = ct.load(seq_idx, (b, c * chunk_size), shape=())"),
    _m("cu_scan_offdiag_seq_mask_dropped", "seq_idx",
       "off-diagonal column tiles not masked across sequences (only shows for chunk_size > 64)",
       "                wj = ct.where(seq_i[:, None] == seq_j[None, :], wj, 0.0)\n",
       ""),
    _m("cu_scan_offdiag_loop_short", "tiling",
       "off-diagonal loop stops one column tile early (only shows for chunk_size > 128)",
       "        for j in range(m):",      # _scan_tile's (indented under its guard), not _scan_chunk's
       "        for j in range(m - 1):"),
    _m("cu_scan_offdiag_dt_of_row_tile", "tiling",
       "off-diagonal weights use the row tile's dt instead of the column tile's (chunk_size > 64)",
       "wj = cbj * ct.exp2(cs_i[:, None] - cs_j[None, :]) * dt_j[None, :]",
       "wj = cbj * ct.exp2(cs_i[:, None] - cs_j[None, :]) * dt_i[None, :]"),
    _m("cu_scan_state_ktile_fixed", "tiling",
       "incoming state always read from dstate tile 0 (only shows when dstate > BN, i.e. dstate 256)",
       "sk = ct.load(states, (b, c, hh, pt, k),",
       "sk = ct.load(states, (b, c, hh, pt, 0),"),
    _m("cu_scan_D_ptile_fixed", "tiling",
       "D read for headdim tile 0 whatever the tile (only shows for headdim > 64 with D (h, p))",
       "dv = ct.load(D, (head, ptile), shape=(1, BP), padding_mode=ZERO)",
       "dv = ct.load(D, (head, 0), shape=(1, BP), padding_mode=ZERO)"),
    _m("cu_scan_D_head_fixed", "output",
       "D with one value per head (h,), passed unexpanded, read for head 0 whatever the head",
       "dv = dv + ct.load(D, (head, 0), shape=(1, 1))",
       "dv = dv + ct.load(D, (0, 0), shape=(1, 1))"),
    _m("cu_scan_z_sigmoid", "output",
       "gate sigmoid(z) instead of silu(z)",
       "acc = acc * (zf / (1.0 + ct.exp(-zf)))",
       "acc = acc * (1.0 / (1.0 + ct.exp(-zf)))"),

    # ------------------------------------------------------------------ 4. varlen_state_kernel
    _m("cu_varlen_boundary_off_by_one", "varlen",
       "a sequence starting exactly on a chunk edge also takes the state entering that chunk",
       "if (start < c0) | (start == 0):",
       "if (start <= c0) | (start == 0):"),
    _m("cu_varlen_state0_drops_initial_states", "varlen",
       "varlen state 0 without initial_states when sequence 0 ends inside chunk 0 or on its last token "
       "(mamba_ssm 2.3.2.post1's chunk_state_varlen; cutile's behaviour before the fix)",
       "if (start < c0) | (start == 0):",
       "if start < c0:"),
    _m("cu_varlen_from_chunk_start", "varlen",
       "varlen state sums from the chunk start instead of the sequence start",
       "keep = (pos >= start) & (pos < end)",
       "keep = pos < end"),
    _m("cu_varlen_cs_last_off_by_one", "varlen",
       "varlen decay measured to token end instead of end - 1",
       "cs_last = ct.load(cs, (0, hh, end - 1), shape=())",
       "cs_last = ct.load(cs, (0, hh, end), shape=())"),

    # ------------------------------------------------------------------ host side (launcher.py)
    _m("cu_host_heads_per_group", "groups",
       "scan kernel gets ngroups where it expects heads_per_group (right when g * g == h)",
       "l, chunk_size, nchunks, h // g, int(seq32 is not None), int(D32 is not None), int(z is not None))",
       "l, chunk_size, nchunks, g, int(seq32 is not None), int(D32 is not None), int(z is not None))",
       file=LAUNCHER),
    _m("cu_host_D_column_major", "layout",
       "D (h, p) flattened column-major on the host: right for D (h,) only",
       "        D32 = _dense(D.float().reshape(h, -1)) if D is not None else None   #",
       "        D32 = _dense(D.float().reshape(-1, h).t()) if D is not None else None   #",
       file=LAUNCHER),
    _m("cu_host_stage_ln2", "decay",
       "chunk_cumsum stage converts log2 units back with log2(e) instead of ln 2",
       "return (cs * LN2).view(b, h, nchunks, chunk_size)",
       "return (cs * LOG2E).view(b, h, nchunks, chunk_size)",
       file=LAUNCHER),
    _m("cu_host_stage_log2e", "decay",
       "stage entry points convert natural-log dA_cumsum with ln 2 instead of log2(e)",
       "return _dense((dA_cumsum.float() * LOG2E).reshape(b, h, c * L))",
       "return _dense((dA_cumsum.float() * LN2).reshape(b, h, c * L))",
       file=LAUNCHER),
)
