"""Mutants of mamba_ssm 2.3.2.post1's Triton SSD backward (`_mamba_chunk_scan_combined_bwd` and its
kernels in mamba_ssm/ops/triton/), one realistic bug each, killed (or not) by tests/test_gradients.py.

Applied to a copy of the package unpacked from the published sdist, like mutation/catalog_mamba_ssm.py.
The suite runs with MAMBA_DETERMINISTIC=1 (one autotune config, and the deterministic reductions in
place of tl.atomic_add), so no mutant sits in an atomic-only branch. The group mutant only differs
where 1 < ngroups < nheads.
"""
from mutation.catalog import maker

IMPL = "mamba-ssm"
PEER = "mamba-ssm"
TESTS = "tests/test_gradients.py"           # the suite that judges a backward mutant
ENV = {"MAMBA_DETERMINISTIC": "1"}
_T = "mamba_ssm/ops/triton/"
CS, SC, SP, COMB = _T + "ssd_chunk_state.py", _T + "ssd_chunk_scan.py", _T + "ssd_state_passing.py", _T + "ssd_combined.py"
_m = maker(COMB)

_BMM = ("    _bmm_chunk_bwd(C, dCB, residual=dB, out=dB_given)\n"
        "    _bmm_chunk_bwd(B, rearrange(dCB, \"... l s -> ... s l\"), residual=dC, out=dC_given)")

MUTANTS = (
    _m("msb_softplus_derivative_dropped", "dt",
       "ddt not multiplied by softplus's derivative sigmoid(dt + dt_bias)",
       "        ddt = tl.where(dt_presoftplus <= 20.0, ddt * tl.sigmoid(dt_presoftplus), ddt)",
       "        ddt = ddt", file=CS),
    _m("msb_clamp_passes_gradient", "dt",
       "the dt_limit clamp's subgradient ignored: ddt flows where dt was clamped",
       "    ddt = tl.where(clamp_mask, 0.0, ddt)\n",
       "    ddt = ddt\n", file=CS),
    _m("msb_chunk_end_term_missing", "decay",
       "the decay gradient misses the chunk-end term from state passing (ddA_chunk_cumsum)",
       "    ddA_cumsum_prev[..., -1] += ddA_chunk_cumsum\n",
       "    ddA_cumsum_prev = ddA_cumsum_prev\n"),
    _m("msb_reverse_cumsum_forward", "cumsum",
       "the gradient of the cumsum taken as a forward cumsum instead of a reverse one",
       "    ddA_prev = ddA_cumsum_prev.flip([-1]).cumsum(dim=-1).flip([-1])",
       "    ddA_prev = ddA_cumsum_prev.cumsum(dim=-1)"),
    _m("msb_chunk_state_decay_term_missing", "decay",
       "the decay gradient through each chunk's own state (ddA_next) left out",
       "    ddA += ddA_next + ddA_prev",
       "    ddA += ddA_prev"),
    _m("msb_db_dc_swapped", "layout",
       "dB and dC swapped in the C.B product's backward: dCB not transposed for dB, transposed for dC",
       _BMM,
       "    _bmm_chunk_bwd(C, rearrange(dCB, \"... l s -> ... s l\"), residual=dB, out=dB_given)\n"
       "    _bmm_chunk_bwd(B, dCB, residual=dC, out=dC_given)"),
    _m("msb_dstates_not_decayed", "state",
       "reverse state passing: the state gradient is carried to the previous chunk without its decay",
       "        dstates = scale * dstates + dout\n        tl.store(dstates_ptrs, dstates, mask=offs_m < dim)",
       "        dstates = dstates + dout\n        tl.store(dstates_ptrs, dstates, mask=offs_m < dim)", file=SP),
    _m("msb_dinit_not_decayed", "state",
       "dinitial_states: the state gradient reaches the initial state without the first chunk's decay",
       "        dstates = scale * dstates + dout\n        tl.store(dinitstates_ptr",
       "        dstates = dstates + dout\n        tl.store(dinitstates_ptr", file=SP),
    _m("msb_dx_mask_off_by_one", "mask",
       "dx kernel: causal mask k > m instead of k >= m, so each token's own output is left out of its dx",
       "        mask = (k + offs_k[None, :] >= offs_m[:, None]) & (k + offs_k[None, :] < K_MAX)",
       "        mask = (k + offs_k[None, :] > offs_m[:, None]) & (k + offs_k[None, :] < K_MAX)"),
    _m("msb_dx_state_not_decayed", "decay",
       "dx's state term misses the decay exp(cs_end - cs_m) from the token to the chunk end (dstate <= 128 path)",
       "        acc = tl.dot(b, dstates) * scale[:, None]",
       "        acc = tl.dot(b, dstates)"),
    _m("msb_dx_skip_dropped", "output",
       "dx misses the D skip connection's term D * dy",
       "        dx += dout_res * D\n",
       "        dx = dx\n"),
    _m("msb_dz_derivative", "output",
       "dz takes sigmoid(z) for silu's derivative, dropping the (1 + z (1 - sigmoid(z))) factor",
       "    dz = dout * out * z_sigmoid * (1 + z * (1 - z_sigmoid))",
       "    dz = dout * out * z_sigmoid", file=SC),
    _m("msb_dcb_mask_off_by_one", "mask",
       "dCB kernel: causal mask m > n instead of m >= n, so the diagonal's dCB (and dB, dC from it) is zeroed",
       "    mask = offs_m[:, None] >= offs_n[None, :]\n    acc = tl.where(mask, acc, 0.0)\n    dcb_ptr +=",
       "    mask = offs_m[:, None] > offs_n[None, :]\n    acc = tl.where(mask, acc, 0.0)\n    dcb_ptr +=", file=SC),
    _m("msb_db_group_of_wrong_heads", "groups",
       "dB kernel reads x of heads g + s instead of group g's heads g * (h/g) + s: the group sums the wrong heads",
       "    x_ptr += pid_b * stride_x_batch + pid_c * chunk_size * stride_x_seqlen + (pid_g * (nheads // ngroups) + pid_s * nheads_per_program) * stride_x_head",
       "    x_ptr += pid_b * stride_x_batch + pid_c * chunk_size * stride_x_seqlen + (pid_g + pid_s * nheads_per_program) * stride_x_head",
       file=CS),
)
