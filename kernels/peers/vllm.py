"""`vllm`: vLLM 0.33.0's Triton prefill SSD, `mamba_chunk_scan_combined_varlen`, under the contract.

The adapter has `mamba_chunk_scan_combined`'s signature. It checks the call (kernels.contract), maps
rows and seq_idx sequences onto vLLM's packed sequences (kernels/peers/vllm_packing.py), builds the
chunk metadata with vLLM's own `compute_varlen_chunk_metadata`, calls vLLM's entry point with a
preallocated `out`, and reads final and varlen states from vLLM's per-sequence states. It converts
arguments only, never the math. vLLM's files are loaded from the published fragment with stand-ins
for the modules outside it (kernels/peers/vllm_files.py says which and why).

Capabilities, from the 0.33.0 sources (vllm/model_executor/layers/mamba/ops/...):

* chunk sizes: any power of two (`assert is_int_pow_2(chunk_size)`, ssd_combined.py l.49); declared
  16..256 like mamba_ssm. Any headdim and dstate: every load is masked (`< hdim`, `< dstate`), dstate
  above 128 loops (ssd_chunk_scan.py l.300, l.335). Partial chunks: chunks never cross a sequence end.
* options: D (h) or (h, p) (ssd_combined.py l.60), z, dt_bias, dt_softplus, dt_limit, ngroups
  (l.52), one initial state per sequence (l.80) -> initial_states, varlen_initial_states;
  per-sequence final states (l.161) -> final_states, seq_idx, varlen_states; dt of any float dtype
  (the cumsum kernel loads it as fp32, ssd_chunk_state.py l.88-92).
* dtypes fp32, fp16, bf16; matmul: `tl.dot` of fp32 operands runs TF32 with the low 13 bits cut
  ("tf32-trunc", as mamba_ssm: Triton's default input_precision).
* states: chunk states fp32 (`states_in_fp32=True`, ssd_combined.py l.106); the states the scan reads
  are cast to C.dtype before its dot (`prev_states.to(C_ptr.dtype.element_ty)`, ssd_chunk_scan.py
  l.325, l.353) -> state_dtype="input"; the adapter passes `state_dtype=torch.float32`, one of vLLM's
  production settings (mamba_ssm_cache_dtype float32), so final and varlen states come back fp32.
* exp="fast": every decay is `fast_exp` (exp2 of x*log2(e), ex2.approx.f32; triton_helpers.py l.36-45),
  in every stage after the cumsum: state passing (ssd_state_passing.py l.104), chunk state (ssd_chunk_state.py
  l.284), chunk scan (ssd_chunk_scan.py l.299, l.384). softplus uses tl.math.exp (mamba_ssm.py l.198).
* deterministic: no atomics in the forward kernels; `launch_autotuned` keeps the first launch's pick
  per key (triton_helpers.py l.11-34). Not declared bitwise batch-invariant: the physical chunks are
  cut at packed positions (`pos % chunk_size`, mamba2_attn.py l.67), so a row's chunking depends on
  the rows before it.
* stages: none exposed. vLLM's stage launchers take its packed layouts (dA_cumsum (h, nchunks, L),
  states (nchunks, h, p, n), cu_chunk_seqlens), not the stage signatures prop_stages_match_oracle calls.

Autotune: as shipped, each kernel autotunes per key on first use; `_drop_racy_wgmma_configs`
(ssd_chunk_scan.py l.21-38) drops chunk-scan configs on sm90. VLLM_TRITON_FORCE_FIRST_CONFIG=1 (read by
vllm/triton_utils/__init__.py l.33 when the fragment is first imported) installs vLLM's own
force_first_config.py, which takes the first valid config of every Triton autotuner in the process,
keeping its pick per kernel and key values but not per dtype: fp32 after bf16 at the same key gets
bf16's pick, which does not fit (docs/findings/vllm-first-config-dtype.md), so first-config runs take
one input dtype per process (BY_DTYPE, below).
"""
from __future__ import annotations

import sys
import types

import torch

from kernels.contract import unpack_returns
from kernels.peers import PeerUnavailable, require_cuda
from kernels.peers.sources import PeerSourceMissing
from kernels.peers.vllm_files import FragmentMissing, load_chunk_metadata_fn, load_ops
from kernels.peers.vllm_packing import Packing, packing, sequence_initial_states
from kernels.registry import ALL_OPTIONS, EXTENSIONS, KernelInfo, check_call, jit_specialization_key

FIRST_CONFIG_ENV = "VLLM_TRITON_FORCE_FIRST_CONFIG"
_loaded: dict = {}


def _load():
    """(vLLM's mamba_chunk_scan_combined_varlen, its compute_varlen_chunk_metadata), once."""
    if not _loaded:
        try:
            ops = load_ops()
            _loaded.update(fn=ops.mamba_chunk_scan_combined_varlen, metadata=load_chunk_metadata_fn())
        except (FragmentMissing, PeerSourceMissing) as e:
            raise PeerUnavailable(str(e)) from e
        except ImportError as e:
            hint = " (needs triton: a CUDA build of torch brings it)" if "triton" in str(e) else ""
            raise PeerUnavailable(f"vllm: cannot import the 0.33.0 SSD fragment: {e}{hint}") from e
    return _loaded["fn"], _loaded["metadata"]


def entry_points():
    """(mamba_chunk_scan_combined_varlen, compute_varlen_chunk_metadata, where they came from) for the
    standalone reproducers: an installed vLLM's own first, else the published 0.33.0 fragment's."""
    try:
        from vllm.model_executor.layers.mamba.ops.ssd_combined import mamba_chunk_scan_combined_varlen
        from vllm.v1.attention.backends.mamba2_attn import compute_varlen_chunk_metadata
        return mamba_chunk_scan_combined_varlen, compute_varlen_chunk_metadata, "installed vllm"
    except ImportError:
        sys.modules.pop("vllm", None)
        fn, meta = _load()
        return fn, meta, "the published 0.33.0 fragment"


def chunk_metadata(pk: Packing, chunk_size: int, device, metadata_fn=None) -> dict:
    """vLLM's chunk metadata for a packing: cu_chunk_seqlens, last_chunk_indices, seq_idx per chunk,
    from vLLM's own compute_varlen_chunk_metadata (host work: build it outside a timed region)."""
    fn = metadata_fn or _load()[1]
    cu = torch.tensor(pk.cu_seqlens, dtype=torch.int32, device=device)
    cu_chunk, last_chunk, seq_idx_chunks = fn(cu, chunk_size)
    return {"cu_seqlens": cu, "cu_chunk_seqlens": cu_chunk, "last_chunk_indices": last_chunk,
            "seq_idx": seq_idx_chunks}


def varlen_call(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
                cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf"))):
    """(pk, the keyword arguments of mamba_chunk_scan_combined_varlen except the chunk metadata)."""
    b, l, h, p = x.shape
    pk = packing(b, l, seq_idx, cu_seqlens)

    def flat(t):
        return None if t is None else t.reshape(b * l, *t.shape[2:])

    xp = flat(x)
    kwargs = dict(x=xp, dt=flat(dt), A=A, B=flat(B), C=flat(C), chunk_size=chunk_size,
                  out=torch.empty_like(xp), D=D, z=flat(z), dt_bias=dt_bias,
                  initial_states=sequence_initial_states(pk, initial_states), dt_softplus=dt_softplus,
                  dt_limit=tuple(dt_limit), state_dtype=torch.float32)
    return pk, kwargs


def _bound(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
           cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")), return_final_states=False,
           return_varlen_states=False):
    """Check the call, then (packing, vLLM's function, its complete keyword arguments)."""
    check_call(INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    require_cuda("vllm", x)
    fn, _ = _load()
    pk, kwargs = varlen_call(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias,
                             initial_states=initial_states, seq_idx=seq_idx, cu_seqlens=cu_seqlens,
                             dt_softplus=dt_softplus, dt_limit=dt_limit)
    kwargs.update(chunk_metadata(pk, chunk_size, x.device))
    return pk, fn, kwargs


def vllm_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                 seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                 return_final_states=False, return_varlen_states=False):
    """mamba_chunk_scan_combined's contract on vLLM 0.33.0's mamba_chunk_scan_combined_varlen."""
    pk, fn, kwargs = _bound(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                            seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
                            return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    states = fn(**kwargs)                               # (num_sequences, h, p, n), fp32
    out = kwargs["out"].reshape(x.shape)
    final = states[list(pk.row_last)] if return_final_states else None
    varlen = states if return_varlen_states else None
    return unpack_returns(out, final, varlen, return_final_states, return_varlen_states)


def prepared(x, dt, A, B, C, chunk_size, **options):
    """A zero-argument call of vLLM's entry point on these inputs (options as vllm_forward's, without the
    return flags), its chunk metadata and `out` built now: what a benchmark times (vLLM builds the
    metadata once per batch, for all layers, outside the layers' SSD calls). The call returns out
    (b, l, h, p), written in place each time."""
    _, fn, kwargs = _bound(x, dt, A, B, C, chunk_size, **options)
    out = kwargs["out"].reshape(x.shape)

    def call():
        fn(**kwargs)
        return out
    return call


def version() -> str:
    import sys  # noqa: PLC0415
    return getattr(sys.modules.get("vllm"), "__version__", "not loaded")


INFO = KernelInfo(
    name="vllm",
    fn=vllm_forward,
    dtypes=("float32", "float16", "bfloat16"),
    chunk_sizes=(16, 32, 64, 128, 256),
    headdims=None,
    dstates=None,
    seqlen_multiple_of_chunk=False,
    options=ALL_OPTIONS | EXTENSIONS,
    stages=None,
    device="cuda",
    state_dtype="input",
    matmul="tf32-trunc",
    exp="fast",
    bitwise_batch_invariant=False,
    deterministic=True,
    # Triton's JIT specialization, which also covers the autotune keys (chunk size, headdim, dstate) but
    # nheads (the cumsum kernel's, 6 cheap configs): a drawn problem in a battery problem's class
    # reuses its compiles and, as shipped, its autotune picks
    compile_key=jit_specialization_key,
    notes=("vLLM 0.33.0 Triton mamba_chunk_scan_combined_varlen from the published fragment; rows and "
           "seq_idx sequences packed; chunk metadata from vLLM's compute_varlen_chunk_metadata; "
           "state_dtype=float32; fast_exp decays; truncating TF32 tl.dot for fp32"),
)

# One input dtype each, for first-config runs (`--impl kernels.peers.vllm:BY_DTYPE.float32`): vLLM's
# force_first_config caches its pick per kernel and key values without the dtypes, so a process that
# runs fp16 or bf16 first and then fp32 at the same key fails (docs/findings/vllm-first-config-dtype.md);
# a process serving one model has one dtype, and so does each first-config process of scripts/gpu_vllm.sh.
BY_DTYPE = types.SimpleNamespace(**{d: INFO.replace(name=f"kernels.peers.vllm:BY_DTYPE.{d}", dtypes=(d,))
                                    for d in INFO.dtypes})

__all__ = ["BY_DTYPE", "FIRST_CONFIG_ENV", "INFO", "chunk_metadata", "prepared", "varlen_call", "version",
           "vllm_forward"]
