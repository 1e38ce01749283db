"""Mutants of TileGym 1.5.1's cuTile Mamba-2 backward (tilegym/ops/cutile/mamba2.py,
`mamba2_chunk_backward`), one realistic bug each, killed (or not) by tests/test_gradients.py.

Applied to a copy of the package unpacked from the published wheel ($SSDCHECK_PEERS_DIR; the pristine
file is never edited), like mutation/catalog_tilegym.py. The suite runs with TILEGYM_DISABLE_AUTOTUNE=1,
so every launch takes the first config of its search space: the reverse state pass with BLOCK_STATE
16, and the dx/dD/dCB and dA/dB/dC/ddt kernels persistent. Every mutant sits in code that config
runs; the group mutant only differs where 1 < ngroups < nheads (prop_grad_group_broadcast draws it).
Every mutant compiles for sm_90 (lab/scripts/tilegym_bwd_compile_probe.py --mutants: the kernel it
changes, fp32, chunk 64, the first config). The baseline meets TileGym's declared ZERO_DT_DDT (NaN ddt
at dt == 0) on the problems with skipped tokens; every other gradient is checked there.
"""
from mutation.catalog import maker

IMPL = "tilegym-first-config"   # TILEGYM_DISABLE_AUTOTUNE=1 around each forward call too
PEER = "tilegym"
TESTS = "tests/test_gradients.py"           # the suite that judges a backward mutant
ENV = {"TILEGYM_DISABLE_AUTOTUNE": "1"}
F = "tilegym/ops/cutile/mamba2.py"
_m = maker(F)

_DX = "        dx_tile = d_val * dout_tile + (dxtd + bdh * coef[:, None]) * dt_tile[:, None]"
_DBDC = ("        db_tile = ct.mma(dcb_tile.astype(c_tile.dtype), c_tile, db_tile)\n"
         "        dc_tile = ct.mma(dcb_tile.transpose().astype(b_tile.dtype), b_tile, dc_tile)")

MUTANTS = (
    _m("tgb_dstate_not_decayed", "state",
       "reverse state pass: the state gradient carried to the previous chunk is not decayed across this one",
       "        dhid_tile = ct.exp2(d_last) * dhid_tile\n        dhid_tile = ct.mma(dout_tile_t",
       "        dhid_tile = dhid_tile\n        dhid_tile = ct.mma(dout_tile_t"),
    _m("tgb_reverse_scan_wrong_start", "state",
       "reverse state pass starts from chunk 0 (modular index off by one), then walks down from the last",
       "        chunk_idx = num_chunks - 1 - i\n        ct.store(\n            dhiddens,",
       "        chunk_idx = (num_chunks - i) % num_chunks\n        ct.store(\n            dhiddens,"),
    _m("tgb_dstate_c_not_decayed", "decay",
       "reverse state pass: C enters the state gradient without its decay exp(cs_i) from the chunk start",
       "        c_d = c_tile * ct.exp2(d_tile)[:, None]",
       "        c_d = c_tile"),
    _m("tgb_dcb_mask_off_by_one", "mask",
       "dx/dCB kernel: causal mask j > i instead of j >= i, so each token's own pair (the diagonal) is dropped",
       "    causal_mask_t = idx[None, :] >= idx[:, None]\n\n    W = ct.exp2(",
       "    causal_mask_t = idx[None, :] > idx[:, None]\n\n    W = ct.exp2("),
    _m("tgb_dcb_dt_of_wrong_token", "layout",
       "dCB scaled by dt of the output token (row) instead of the source token (column)",
       "    dcbT_out = xdoT * W * dt_tile[:, None]",
       "    dcbT_out = xdoT * W * dt_tile[None, :]"),
    _m("tgb_dx_state_term_without_dt", "dt",
       "dx: the state-gradient term is not multiplied by the source token's dt",
       _DX,
       "        dx_tile = d_val * dout_tile + dxtd * dt_tile[:, None] + bdh * coef[:, None]"),
    _m("tgb_dx_skip_dropped", "output",
       "dx misses the D skip connection's term D * dy",
       _DX,
       "        dx_tile = (dxtd + bdh * coef[:, None]) * dt_tile[:, None]"),
    _m("tgb_dd_all_pairs", "output",
       "dD summed over every (token, token) pair of x . dy instead of each token with itself",
       "    dd_row = ct.sum(ct.where(idx[None, :] == idx[:, None], xdoT, 0.0), axis=1)",
       "    dd_row = ct.sum(xdoT, axis=1)"),
    _m("tgb_db_dc_swapped", "layout",
       "dB and dC swapped in the intra-chunk product: dB takes dCB^T B and dC takes dCB C",
       _DBDC,
       "        db_tile = ct.mma(dcb_tile.transpose().astype(b_tile.dtype), b_tile, db_tile)\n"
       "        dc_tile = ct.mma(dcb_tile.astype(c_tile.dtype), c_tile, dc_tile)"),
    _m("tgb_dc_state_not_decayed", "decay",
       "dC's state term misses the decay exp(cs_i) of the state entering the chunk",
       "        dc_d = dc_d * ct.exp2(d_tile[:, None])",
       "        dc_d = dc_d"),
    _m("tgb_chunk_end_term_missing", "decay",
       "the decay gradient misses the chunk-end term (the carried state's gradient, dd_last)",
       "    dd_tile = dd_last + ct.extract(cumsum_result, index=(chunk_size - 1,), shape=(1,)) - cumsum_result + dd_tile",
       "    dd_tile = ct.extract(cumsum_result, index=(chunk_size - 1,), shape=(1,)) - cumsum_result + dd_tile"),
    _m("tgb_ddt_decay_term_sign", "dt",
       "ddt gets the decay gradient's A term with the wrong sign (d(dt*A)/d dt = A taken as -A)",
       "    ddt_tile += dd_tile * a_val",
       "    ddt_tile -= dd_tile * a_val"),
    _m("tgb_group_of_wrong_heads", "groups",
       "dA/dB/dC kernel maps heads to groups tiled (h % g) instead of interleaved (h // (h/g)): dB, dC of a group sum the wrong heads",
       "            batch = idx // num_chunks\n            group = head // num_heads_per_group\n"
       "            _compute_da_db_dc_ddt_tile(",
       "            batch = idx // num_chunks\n            group = head % (x.shape[2] // num_heads_per_group)\n"
       "            _compute_da_db_dc_ddt_tile("),
)
