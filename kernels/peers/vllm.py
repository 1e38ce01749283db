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
  l.325, l.353) -> state_dtype="input". A server passes its SSM state cache's dtype as `state_dtype`
  (the model dtype, or float32 with mamba_ssm_cache_dtype float32) and its initial states from that
  cache: the adapter passes `state_dtype=return_states_dtype` (the contract's extension), else the
  initial states' dtype, else float32, so final and varlen states come back in the cache's dtype.
  vLLM's chunk scan needs initial states in that dtype (it reads them through the pointer it reads
  the chunk states through: ssd_chunk_scan.py l.264-277; other dtypes fail to compile,
  docs/findings/vllm-initial-states-dtype.md); wider initial states than the cache (bf16 states, a
  float32 cache) are converted exactly, narrower ones refused by name.
* exp="fast": every decay is `fast_exp` (exp2 of x*log2(e), ex2.approx.f32; triton_helpers.py l.36-45),
  in every stage after the cumsum: state passing (ssd_state_passing.py l.104), chunk state (ssd_chunk_state.py
  l.284), chunk scan (ssd_chunk_scan.py l.299, l.384). softplus uses tl.math.exp (mamba_ssm.py l.198).
* deterministic: no atomics in the forward kernels; `launch_autotuned` keeps the first launch's pick
  per key (triton_helpers.py l.11-34). Not declared bitwise batch-invariant: the physical chunks are
  cut at packed positions (`pos % chunk_size`, mamba2_attn.py l.67), so a row's chunking depends on
  the rows before it.
* stages: none exposed. vLLM's stage launchers take its packed layouts (dA_cumsum (h, nchunks, L),
  states (nchunks, h, p, n), cu_chunk_seqlens), not the stage signatures prop_stages_match_oracle calls.

Two registered modes, each fixed for the process at the fragment's first import (vLLM reads
VLLM_TRITON_FORCE_FIRST_CONFIG once, vllm/triton_utils/__init__.py l.33):
* `vllm` (INFO), as shipped: each kernel autotunes per key on first use, and
  `_drop_racy_wgmma_configs` (ssd_chunk_scan.py l.21-38) drops chunk-scan configs on sm90. The adapter
  loads the fragment with the variable unset, whatever the caller's environment says.
* `vllm-first-config` (FIRST_CONFIG), for fast fuzzing: loaded with the variable set, so vLLM's own
  force_first_config.py takes the first valid config of every Triton autotuner in the process. It
  keeps its pick per kernel and key values but not per dtype: fp32 after bf16 at the same key gets
  bf16's pick, which does not fit (docs/findings/vllm-first-config-dtype.md), so this mode takes one
  input dtype per process: bfloat16 (a served model's), or `kernels.peers.vllm:BY_DTYPE.<dtype>`.
A process that loaded one mode refuses the other, naming both.
"""
from __future__ import annotations

import os
import sys
import types

import torch

from kernels.contract import unpack_returns
from kernels.peers import PeerUnavailable, require_cuda
from kernels.peers.sources import PeerSourceMissing
from kernels.peers.vllm_files import FragmentMissing, load_chunk_metadata_fn, load_ops
from kernels.peers.vllm_packing import Packing, packing, sequence_initial_states
from kernels.registry import (ALL_OPTIONS, EXTENSIONS, KernelInfo, UnsupportedProblem, check_call,
                              jit_specialization_key)

FIRST_CONFIG_ENV = "VLLM_TRITON_FORCE_FIRST_CONFIG"
SHIPPED, FIRST_CONFIG_MODE = "shipped", "first-config"
_loaded: dict = {}


def env_mode() -> str:
    """The mode the environment asks for (the standalone reproducers follow the variable)."""
    return FIRST_CONFIG_MODE if os.environ.get(FIRST_CONFIG_ENV, "") not in ("", "0") else SHIPPED


def _load(mode: str = SHIPPED):
    """(vLLM's mamba_chunk_scan_combined_varlen, its compute_varlen_chunk_metadata), loaded once per
    process in `mode`: VLLM_TRITON_FORCE_FIRST_CONFIG set while the fragment imports, or unset."""
    if _loaded:
        if _loaded["mode"] != mode:
            raise PeerUnavailable(
                f"vllm: this process loaded vLLM {_loaded['mode']} (registered as "
                f"{'vllm' if _loaded['mode'] == SHIPPED else 'vllm-first-config'}); the {mode} mode needs a "
                f"process of its own, since vLLM reads {FIRST_CONFIG_ENV} once, when its files are imported")
        return _loaded["fn"], _loaded["metadata"]
    saved = os.environ.pop(FIRST_CONFIG_ENV, None)
    if mode == FIRST_CONFIG_MODE:
        os.environ[FIRST_CONFIG_ENV] = "1"
    try:
        ops = load_ops()
        _loaded.update(fn=ops.mamba_chunk_scan_combined_varlen, metadata=load_chunk_metadata_fn(), mode=mode)
    except (FragmentMissing, PeerSourceMissing) as e:
        raise PeerUnavailable(str(e)) from e
    except ImportError as e:
        hint = " (needs triton: a CUDA build of torch brings it)" if "triton" in str(e) else ""
        raise PeerUnavailable(f"vllm: cannot import the 0.33.0 SSD fragment: {e}{hint}") from e
    finally:
        os.environ.pop(FIRST_CONFIG_ENV, None)
        if saved is not None:
            os.environ[FIRST_CONFIG_ENV] = saved
    return _loaded["fn"], _loaded["metadata"]


def loaded_mode() -> str | None:
    return _loaded.get("mode")


def entry_points():
    """(mamba_chunk_scan_combined_varlen, compute_varlen_chunk_metadata, where they came from) for the
    standalone reproducers: an installed vLLM's own first, else the published 0.33.0 fragment's, in
    the mode $VLLM_TRITON_FORCE_FIRST_CONFIG asks for."""
    try:
        from vllm.model_executor.layers.mamba.ops.ssd_combined import mamba_chunk_scan_combined_varlen
        from vllm.v1.attention.backends.mamba2_attn import compute_varlen_chunk_metadata
        return mamba_chunk_scan_combined_varlen, compute_varlen_chunk_metadata, "installed vllm"
    except ImportError:
        sys.modules.pop("vllm", None)
        fn, meta = _load(env_mode())
        return fn, meta, f"the published 0.33.0 fragment ({env_mode()})"


def chunk_metadata(pk: Packing, chunk_size: int, device, metadata_fn=None) -> dict:
    """vLLM's chunk metadata for a packing: cu_chunk_seqlens, last_chunk_indices, seq_idx per chunk,
    from vLLM's own compute_varlen_chunk_metadata (host work: build it outside a timed region)."""
    fn = metadata_fn or _loaded.get("metadata") or load_chunk_metadata_fn()   # host code: any mode
    cu = torch.tensor(pk.cu_seqlens, dtype=torch.int32, device=device)
    cu_chunk, last_chunk, seq_idx_chunks = fn(cu, chunk_size)
    return {"cu_seqlens": cu, "cu_chunk_seqlens": cu_chunk, "last_chunk_indices": last_chunk,
            "seq_idx": seq_idx_chunks}


def state_cache_dtype(initial_states, return_states_dtype) -> torch.dtype:
    """vLLM's state_dtype for a call: the caller's state cache (return_states_dtype), else the dtype of
    the initial states it passed (a server takes both from its cache), else float32."""
    if return_states_dtype is not None:
        return return_states_dtype
    return initial_states.dtype if initial_states is not None else torch.float32


def cache_initial_states(initial_states, state_dtype):
    """Initial states in the state cache's dtype, as vLLM's chunk scan needs them: a narrower dtype
    converted exactly, a wider one refused (converting it would round the caller's states)."""
    if initial_states is None or initial_states.dtype == state_dtype:
        return initial_states
    if torch.finfo(initial_states.dtype).bits > torch.finfo(state_dtype).bits:
        raise UnsupportedProblem(
            f"initial_states: vllm takes initial states in its state dtype {state_dtype} (a server's state cache; "
            f"return_states_dtype), got the wider {initial_states.dtype}, which it would have to round")
    return initial_states.to(state_dtype)


def varlen_call(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
                cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")), return_states_dtype=None):
    """(pk, the keyword arguments of mamba_chunk_scan_combined_varlen except the chunk metadata)."""
    b, l, h, p = x.shape
    pk = packing(b, l, seq_idx, cu_seqlens)

    def flat(t):
        return None if t is None else t.reshape(b * l, *t.shape[2:])

    xp = flat(x)
    state_dtype = state_cache_dtype(initial_states, return_states_dtype)
    kwargs = dict(x=xp, dt=flat(dt), A=A, B=flat(B), C=flat(C), chunk_size=chunk_size,
                  out=torch.empty_like(xp), D=D, z=flat(z), dt_bias=dt_bias,
                  initial_states=sequence_initial_states(pk, cache_initial_states(initial_states, state_dtype)),
                  dt_softplus=dt_softplus, dt_limit=tuple(dt_limit), state_dtype=state_dtype)
    return pk, kwargs


def _bound(mode, x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None, seq_idx=None,
           cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")), return_final_states=False,
           return_varlen_states=False, return_states_dtype=None):
    """Check the call, then (packing, vLLM's function in `mode`, its complete keyword arguments)."""
    check_call(INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states,
               return_states_dtype=return_states_dtype)
    require_cuda("vllm", x)
    pk, kwargs = varlen_call(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias,
                             initial_states=initial_states, seq_idx=seq_idx, cu_seqlens=cu_seqlens,
                             dt_softplus=dt_softplus, dt_limit=dt_limit, return_states_dtype=return_states_dtype)
    fn, metadata_fn = _load(mode)
    kwargs.update(chunk_metadata(pk, chunk_size, x.device, metadata_fn))
    return pk, fn, kwargs


def _forward(mode, x, dt, A, B, C, chunk_size, return_final_states=False, return_varlen_states=False, **options):
    pk, fn, kwargs = _bound(mode, x, dt, A, B, C, chunk_size, return_final_states=return_final_states,
                            return_varlen_states=return_varlen_states, **options)
    states = fn(**kwargs)                               # (num_sequences, h, p, n), in state_dtype
    out = kwargs["out"].reshape(x.shape)
    final = states[list(pk.row_last)] if return_final_states else None
    varlen = states if return_varlen_states else None
    return unpack_returns(out, final, varlen, return_final_states, return_varlen_states)


def vllm_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                 seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                 return_final_states=False, return_varlen_states=False, return_states_dtype=None):
    """mamba_chunk_scan_combined's contract on vLLM 0.33.0's mamba_chunk_scan_combined_varlen, as shipped
    (autotuned)."""
    return _forward(SHIPPED, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                    seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
                    return_final_states=return_final_states, return_varlen_states=return_varlen_states,
                    return_states_dtype=return_states_dtype)


def vllm_first_config_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                              seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                              return_final_states=False, return_varlen_states=False, return_states_dtype=None):
    """vllm_forward with vLLM's VLLM_TRITON_FORCE_FIRST_CONFIG: each kernel's first config that fits."""
    return _forward(FIRST_CONFIG_MODE, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias,
                    initial_states=initial_states, seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus,
                    dt_limit=dt_limit, return_final_states=return_final_states,
                    return_varlen_states=return_varlen_states, return_states_dtype=return_states_dtype)


def prepared(x, dt, A, B, C, chunk_size, mode=SHIPPED, **options):
    """A zero-argument call of vLLM's entry point on these inputs (options as vllm_forward's, without the
    return flags), its chunk metadata and `out` built now: what a benchmark times (vLLM builds the
    metadata once per batch, for all layers, outside the layers' SSD calls). The call returns out
    (b, l, h, p), written in place each time."""
    _, fn, kwargs = _bound(mode, x, dt, A, B, C, chunk_size, **options)
    out = kwargs["out"].reshape(x.shape)

    def call():
        fn(**kwargs)
        return out
    return call


def compile_key(problem) -> tuple:
    """Triton's JIT specialization (registry.jit_specialization_key), which also covers the autotune keys
    (chunk size, headdim, dstate) but nheads (the cumsum kernel's, 6 cheap configs), so a drawn problem
    in a battery problem's class reuses its compiles and, as shipped, its autotune picks; plus the state
    cache's dtype, which is the dtype of the chunk states every later kernel reads, initial states or not."""
    states = problem.states_dtype if problem.dtype != "float32" else "float32"
    return jit_specialization_key(problem) + (states,)


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
    compile_key=compile_key,
    notes=("vLLM 0.33.0 Triton mamba_chunk_scan_combined_varlen from the published fragment, autotuned as "
           "shipped; rows and seq_idx sequences packed; chunk metadata from vLLM's "
           "compute_varlen_chunk_metadata; state_dtype = the caller's state cache dtype; fast_exp decays; "
           "truncating TF32 tl.dot for fp32"),
)

# The fast-fuzzing mode, one input dtype per process: vLLM's force_first_config caches its pick per
# kernel and key values without the dtypes, so a process that runs fp16 or bf16 first and then fp32 at
# the same key fails (docs/findings/vllm-first-config-dtype.md); a process serving one model has one
# dtype. `vllm-first-config` is bfloat16's; `kernels.peers.vllm:BY_DTYPE.<dtype>` names each.
BY_DTYPE = types.SimpleNamespace(**{
    d: INFO.replace(name=f"kernels.peers.vllm:BY_DTYPE.{d}", fn=vllm_first_config_forward, dtypes=(d,),
                    notes=INFO.notes.replace("autotuned as shipped", "first config forced (VLLM_TRITON_FORCE_FIRST_CONFIG)")
                    + f"; {d} only")
    for d in INFO.dtypes})
FIRST_CONFIG = BY_DTYPE.bfloat16.replace(name="vllm-first-config")

__all__ = ["BY_DTYPE", "FIRST_CONFIG", "FIRST_CONFIG_ENV", "INFO", "chunk_metadata", "prepared", "varlen_call",
           "version", "vllm_first_config_forward", "vllm_forward"]
