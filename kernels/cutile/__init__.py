"""`cutile`: our Mamba-2 SSD forward in cuTile (cuda.tile), three kernels plus one for varlen states.

    from kernels.cutile import ssd_forward, STAGES, INFO

Importing needs no GPU (the kernels are only compiled at the first launch, or on the CPU by
kernels/cutile/compile_matrix.py); calling ssd_forward without one raises CutileUnavailable.
See kernels.py for the kernel design, dispatch.py for the constants, launcher.py for the input
policy (dtypes, copies, NaN passthrough) and toolchain.py for compile-failure diagnosis.
"""
from __future__ import annotations

from kernels.cutile.launcher import (
    STAGES,
    CutileUnavailable,
    chunk_cumsum,
    chunk_scan,
    chunk_state_and_passing,
    compile_key,
    coverage,
    ssd_forward,
)
from kernels.cutile.toolchain import ToolchainError, diagnose, install_override
from kernels.cutile.precompile import build, plan
from kernels.registry import KernelInfo, Precompile

install_override()   # SSDCHECK_TILEIRAS: compile with another tileiras (toolchain.py)

INFO = KernelInfo(
    name="cutile",
    fn=ssd_forward,
    dtypes=("float32", "float16", "bfloat16"),
    chunk_sizes=(64, 128, 256),
    headdims=(16, 32, 64, 128, 256),
    dstates=(16, 32, 64, 128, 256),
    seqlen_multiple_of_chunk=False,
    options=frozenset({"D", "D_headdim", "z", "dt_bias", "dt_softplus", "dt_limit", "initial_states",
                       "final_states", "seq_idx", "varlen_states", "ngroups", "dt_input_dtype",
                       # D, dt_bias and initial states in x's dtype: converted to float32 on the host (tiny)
                       "states_input_dtype", "params_input_dtype"}),
    stages=dict(STAGES),
    device="cuda",
    state_dtype="input",
    matmul="ieee",
    bitwise_batch_invariant=True,
    deterministic=True,
    compile_key=compile_key,
    coverage=coverage,
    precompile=Precompile(plan=plan, build=build),
    notes=("cuTile kernels: chunk cumsum (log2) | chunk state fused with state passing | fused output "
           "(C B^T on chip) | varlen states; states entering chunks stored in the input dtype; "
           "final states fp32, varlen states in the input dtype"),
)

__all__ = ["INFO", "STAGES", "ssd_forward", "chunk_cumsum", "chunk_state_and_passing", "chunk_scan",
           "CutileUnavailable", "ToolchainError", "diagnose"]
