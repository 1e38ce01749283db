"""Mutants of the cuTile FAST paths (kernels.py `_state_chunks`, `_scan_chunk`; launcher `_fast_config`).

The FAST paths run where a dispatch row asks for them (FAST = chunk size: chunk_state and chunk_scan at
chunk 64, 128 and 256; the scan's column tiles at 128/256 are catalog_cutile_fastr.py's) and only on
aligned problems without seq_idx (seqlen % chunk == 0),
6.8% of the general tests' GPU draws in the FACT gate (lab/reports/2026-12-01-fact-scan.md), and every draw of
test_matches_oracle_model_layer; every other problem runs the general path. A surviving mutant here
means the suite draws too few FAST problems or checks them too loosely (the fc_fact guard mutants
survived until the model-layer test; fl_pairs_across_groups until the GPU draws had 6 heads). Which
dispatch row a draw reaches is checked on the CPU (tests/test_strategies.py: every row in at least 1%
of some regime's draws).
Running them needs a GPU: `python -m mutation.run --catalog cutile_fast --budget-s 300`.
"""
from __future__ import annotations

from mutation.catalog import maker

IMPL = "cutile"
K = "kernels/cutile/kernels.py"
LAUNCHER = "kernels/cutile/launcher.py"

_m = maker(K)


MUTANTS = (
    # ------------------------------------------------------------------ _state_chunks
    _m("fs_end_row", "decay",
       "chunk-end decay read one token early (the extract index off by one)",
       "end = ct.extract(cst, (CH - 1,), shape=(1,))",
       "end = ct.extract(cst, (CH - 2,), shape=(1,))"),
    _m("fs_weight_sign", "decay",
       "chunk-state weights 2^(cs_j - cs_end) instead of 2^(cs_end - cs_j)",
       "ct.exp2(end - cst) * dtt",
       "ct.exp2(cst - end) * dtt"),
    _m("fs_dt_dropped", "dt",
       "dt left out of the chunk-state weights",
       "ct.exp2(end - cst) * dtt",
       "ct.exp2(end - cst)"),
    _m("fs_state_not_decayed", "state",
       "the carried state enters the next chunk without the chunk's decay",
       "carried = ct.mma(lhs, rhs, carried * ct.exp2(end).reshape((1, 1)))",
       "carried = ct.mma(lhs, rhs, carried)"),
    _m("fs_group_zero", "layout",
       "every head reads group 0's B (ngroups > 1 broken)",
       "    grp = head // heads_per_group\n    # SWAP",
       "    grp = 0 * head\n    # SWAP"),
    # SWAP=1 (the chunk-128/256 state rows for >= 264 blocks: the GPU draws reach them only through the
    # model layer's wide half, batch 8 x 32-36 heads, since 2026-12-01)
    _m("fs_swap_tiles_unswapped", "layout",
       "SWAP stores the transposed state at the untransposed tile coordinates (wrong once dstate > BN)",
       "at = (ntile, ptile) if SWAP != 0 else (ptile, ntile)",
       "at = (ptile, ntile)"),
    _m("fs_swap_states_untransposed", "layout",
       "SWAP's per-chunk states stored without the transpose (the scan reads the state with p and n swapped)",
       "perm5 = (0, 1, 2, 4, 3) if SWAP != 0 else (0, 1, 2, 3, 4)",
       "perm5 = (0, 1, 2, 3, 4)"),
    _m("fs_swap_final_untransposed", "state",
       "SWAP's final state stored without the transpose (final_states wrong, y right)",
       "carried.reshape((1, 1, rows, cols)), order=perm4, latency=_lat(SLAT))",
       "carried.reshape((1, 1, rows, cols)), order=(0, 1, 2, 3), latency=_lat(SLAT))"),
    # ------------------------------------------------------------------ _scan_chunk
    _m("fc_state_not_decayed", "state",
       "C . S_in not decayed to the row's position",
       "    yt = yt * ct.exp2(cst)[:, None]\n",
       "\n"),
    _m("fc_diagonal_dropped", "tiling",
       "causal mask strict: a token does not see itself",
       "tok[:, None] >= tok[None, :]",
       "tok[:, None] > tok[None, :]"),
    _m("fc_mask_flipped", "tiling",
       "anti-causal mask: rows see later tokens",
       "tok[:, None] >= tok[None, :]",
       "tok[:, None] <= tok[None, :]"),
    _m("fc_dt_of_row", "dt",
       "intra-chunk weight takes dt of the output row instead of the source token",
       "scores * ct.exp2(cst[:, None] - cst[None, :], flush_to_zero=ftz) * dtt[None, :]",
       "scores * ct.exp2(cst[:, None] - cst[None, :], flush_to_zero=ftz) * dtt[:, None]"),
    # the factored decay (FACT=1 rows; chunks whose |cs| stays below FACT_RANGE, which is most drawn ones)
    _m("fc_fact_col_sign", "decay",
       "column factor 2^+cs_j instead of 2^-cs_j",
       "scores * (ct.exp2(-cst, flush_to_zero=ftz) * dtt)[None, :]",
       "scores * (ct.exp2(cst, flush_to_zero=ftz) * dtt)[None, :]"),
    _m("fc_fact_dt_of_row", "dt",
       "factored weight takes the output row's factor instead of the source token's",
       "scores * (ct.exp2(-cst, flush_to_zero=ftz) * dtt)[None, :]",
       "scores * (ct.exp2(-cst, flush_to_zero=ftz) * dtt)[:, None]"),
    _m("fc_fact_row_dropped", "decay",
       "row factor 2^cs_i never applied to the factored row",
       "yt = ct.mma(wd.astype(xt.dtype), xt, yt) * ct.exp2(cst)[:, None]",
       "yt = ct.mma(wd.astype(xt.dtype), xt, yt)"),
    _m("fc_fact_mask_strict", "tiling",
       "factored path's causal mask strict: a token does not see itself",
       "wd = ct.where(causal, scores * (ct.exp2(-cst",
       "wd = ct.where(tok[:, None] > tok[None, :], scores * (ct.exp2(-cst"),
    _m("fc_fact_guard_inverted", "decay",
       "the factored form taken exactly where its factors can overflow",
       "propagate_nan=True) < FACT_RANGE",
       "propagate_nan=True) >= FACT_RANGE"),
    _m("fc_fact_fp16_allowed", "precision",
       "the factored form also for float16, whose range cannot hold the column factor",
       "if FACT != 0 and CH == BL and xt.dtype != ct.float16:",
       "if FACT != 0 and CH == BL:"),
    # ------------------------------------------------------------------ head pairs (HB = 2)
    _m("fp_state_of_first", "state",
       "the second head of a pair reads the first head's incoming state",
       "s1 = ct.load(states, (bi, c, h1, ptile, k)",
       "s1 = ct.load(states, (bi, c, h0, ptile, k)"),
    _m("fp_cs_of_first", "decay",
       "the second head of a pair decays with the first head's cumulative sums",
       "cs1 = ct.load(cs, (bi, h1, c)",
       "cs1 = ct.load(cs, (bi, h0, c)"),
    _m("fp_x_of_first", "layout",
       "the second head of a pair takes the first head's x",
       "x1 = ct.load(x, (bi, c, h1, ptile)",
       "x1 = ct.load(x, (bi, c, h0, ptile)"),
    _m("fp_second_unstored", "tiling",
       "the second head's output written over the first's (its own never written)",
       "_chunk_store(y1, x1, z, D, out, bi, c, h1, ptile",
       "_chunk_store(y1, x1, z, D, out, bi, c, h0, ptile"),
    _m("fc_d_dropped", "output",
       "D skip term left out (every scan path's and the walk's)",
       "return yt + xt.astype(ct.float32) * dv",
       "return yt"),
    # ------------------------------------------------------------------ the launcher's promise
    _m("fl_seq_idx_ignored", "seq_idx",
       "FAST path also taken with seq_idx: sequence boundaries ignored inside a chunk and across chunks",
       "aligned=l % chunk_size == 0 and seq32 is None)",
       "aligned=l % chunk_size == 0)",
       file=LAUNCHER),
    _m("fl_pairs_across_groups", "layout",
       "head pairs also with odd heads per group: a pair's second head reads the wrong group's C and B",
       "if cfg.get(\"HB\") == 2 and (nheads // ngroups) % 2:",
       "if cfg.get(\"HB\") == 2 and nheads % 2:",
       file=LAUNCHER),
)
