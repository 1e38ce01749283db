"""`mamba-ssm`: state-spaces/mamba 2.3.2.post1's Triton `mamba_chunk_scan_combined`, called as is.

mamba_ssm defines the contract, so the adapter passes every argument through unchanged; it only
validates first (the shared contract checks, so errors read the same as for every implementation)
and loads the Triton module without mamba_ssm's package `__init__`.

Loading: `import mamba_ssm` runs `mamba_ssm/__init__.py`, which imports `selective_scan_cuda`, a
compiled extension we do not build. The Triton SSD modules need only torch, triton, einops and
packaging, so `load_ssd_combined` registers a bare module object for `mamba_ssm` whose `__path__` is
the source folder (found on sys.path/PYTHONPATH, e.g. $SSDCHECK_GPU_TMP/peers-src/mamba_ssm-2.3.2.post1
after `source .gpu-bundle/setup.sh`, or named by $SSDCHECK_MAMBA_SSM_SRC), then imports
`mamba_ssm.ops.triton.ssd_combined` (`mamba_ssm.ops`, `.ops.triton` and `.utils` have plain
`__init__`s). A `mamba_ssm` already imported for real is used as it is.

Capabilities, from the 2.3.2.post1 sources (mamba_ssm/ops/triton/...):

* every option of the contract: D (h) or (h,p), z, dt_bias, dt_softplus, dt_limit, initial_states,
  final states, seq_idx, cu_seqlens + varlen states (batch 1), ngroups (ssd_combined.py l.343-393).
* any headdim, dstate and chunk size: every load is masked (`offs < chunk_size`, `< hdim`,
  `< dstate`); dstate > 128 loops over it (ssd_chunk_scan.py l.105-131). Declared chunk sizes
  16..256; Mamba-2 uses 256.
* dtypes fp32, fp16, bf16; dt may be any float dtype (the cumsum kernel loads it as fp32).
* states: chunk states fp32 (`states_in_fp32=True`, ssd_combined.py l.375); the states entering each
  chunk are written in C.dtype (`out_dtype=C.dtype`, l.381) -> state_dtype="input"; final states
  fp32 (ssd_state_passing.py l.208); varlen states in that chunk-state dtype (ssd_chunk_state.py l.1029).
* matmul: `tl.dot` with fp32 operands runs TF32 (Triton's default input_precision), and Triton hands
  the fp32 bits to the tensor core unrounded, which ignores the low 13 mantissa bits -> "tf32-trunc"
  (triton-lang/triton#4574; on the H200 the truncating yardstick reproduces mamba_ssm's fp32 error to
  4 digits, the rounding one is 4.5x off: lab/reports/2026-11-30-peers-suite.md, finding 1).
* deterministic: the forward kernels use no atomics (those in ssd_chunk_state.py / ssd_chunk_scan.py
  are all in backward kernels); the autotuned config is cached per key (chunk_size, hdim, dstate).
  Not declared bitwise batch-invariant (nothing in mamba_ssm promises it).

Known bug, declared (VARLEN_STATE0, docs/findings/mamba-ssm-varlen-state0.md): with cu_seqlens and
initial_states, varlen state 0 leaves the initial state out when sequence 0 ends inside chunk 0 or on
its last token (ssd_chunk_state.py:701); the suite reports it as a known deviation, not a failure.

Stages: mamba_ssm's own stage launchers, exposed with the stage signatures prop_stages_match_oracle
calls: `_chunk_cumsum_fwd` and `_chunk_state_fwd` as they are; `_state_passing_fwd` with states
flattened to (p*n) and the chunk-end cumsum, as ssd_combined.py l.379-382 calls it; chunk_scan =
`_bmm_chunk_fwd(C, B, output_dtype=fp32)` then `_chunk_scan_fwd` (l.385-386).

Backward: autograd. `MambaChunkScanCombinedFn.backward` (ssd_combined.py l.616) runs
`_mamba_chunk_scan_combined_bwd` (l.396): dx, ddt, dA, dB, dC, dD, dz, ddt_bias, dinitial_states, and
asserts return_varlen_states off (l.618). Precision: the states and state gradients that feed its
matmuls are stored in x.dtype (`dstates_dtype=x.dtype, states_dtype=x.dtype`, l.465-466), CB and dCB
fp32, tl.dot as in the forward ("tf32-trunc" for fp32). Not deterministic: dA, ddt_bias (ssd_chunk_state.py
l.167, l.174) and the dB/dC/ddA partial sums take `tl.atomic_add` unless MAMBA_DETERMINISTIC is set.

Autotune: Triton autotunes each kernel per key on first use (about 40 configs per chunk size and
dstate). MAMBA_DETERMINISTIC=1, read when the module is first imported, makes mamba_ssm keep only
its cheapest config (utils/determinism.py `autotune_configs`): correctness runs set it, timings must not.
"""
from __future__ import annotations

import importlib
import importlib.machinery
import os
import re
import sys
import types

import torch

from kernels.peers import PeerUnavailable, require_cuda
from kernels.registry import ALL_OPTIONS, Backward, Deviation, KernelInfo, check_call, jit_specialization_key

PACKAGE = "mamba_ssm"
MODULE = "mamba_ssm.ops.triton.ssd_combined"
SRC_ENV = "SSDCHECK_MAMBA_SSM_SRC"
_MARKER = os.path.join("ops", "triton", "ssd_combined.py")
_peer_fn = None


def find_package_dir(search_path=None) -> str:
    """The `mamba_ssm` source package folder: $SSDCHECK_MAMBA_SSM_SRC first, then sys.path entries
    (or `search_path`). A root may be the folder holding `mamba_ssm/` or that package folder itself."""
    roots = []
    if os.environ.get(SRC_ENV):
        roots.append(os.environ[SRC_ENV])
    roots += list(sys.path if search_path is None else search_path)
    for root in roots:
        root = root or os.getcwd()
        for cand in (os.path.join(root, PACKAGE), root):
            if os.path.basename(os.path.normpath(cand)) == PACKAGE and os.path.isfile(os.path.join(cand, _MARKER)):
                return os.path.abspath(cand)
    raise PeerUnavailable(
        f"mamba-ssm: no mamba_ssm source folder (one holding {_MARKER}) on sys.path"
        f"{'' if search_path is None else ' / search_path'} or in ${SRC_ENV}. Unpack mamba-ssm 2.3.2.post1's "
        f"sdist (mamba_ssm-2.3.2.post1.tar.gz in $SSDCHECK_PEERS_DIR: pip download mamba-ssm==2.3.2.post1 "
        f"--no-deps --no-binary :all:) and put its top folder on PYTHONPATH or in ${SRC_ENV} "
        f"(on a GPU host `source .gpu-bundle/setup.sh` does it: docs/gpu-host.md)")


def _version_of(pkg_dir: str) -> str:
    try:
        with open(os.path.join(pkg_dir, "__init__.py"), encoding="utf-8") as f:
            m = re.search(r"""__version__\s*=\s*["']([^"']+)["']""", f.read())
        return m.group(1) if m else "unknown"
    except OSError:
        return "unknown"


def register_stub_package(pkg_dir: str) -> types.ModuleType:
    """Put a bare `mamba_ssm` package (no __init__ code run) in sys.modules, its __path__ = pkg_dir."""
    stub = types.ModuleType(PACKAGE, "mamba_ssm source package registered by ssdcheck without its __init__")
    spec = importlib.machinery.ModuleSpec(PACKAGE, loader=None, is_package=True)
    spec.submodule_search_locations = [pkg_dir]
    stub.__spec__ = spec
    stub.__path__ = [pkg_dir]
    stub.__package__ = PACKAGE
    stub.__version__ = _version_of(pkg_dir)
    stub.__ssdcheck_stub__ = True
    sys.modules[PACKAGE] = stub
    return stub


def load_ssd_combined(search_path=None) -> types.ModuleType:
    """mamba_ssm.ops.triton.ssd_combined, imported without running mamba_ssm/__init__.py."""
    if MODULE in sys.modules:
        return sys.modules[MODULE]
    if PACKAGE not in sys.modules:
        register_stub_package(find_package_dir(search_path))
    try:
        return importlib.import_module(MODULE)
    except ImportError as e:
        pkg = sys.modules.get(PACKAGE)
        where = getattr(pkg, "__path__", ["?"])[0]
        hint = (" (the GPU host has einops; elsewhere: pip install einops)" if "einops" in str(e)
                else " (needs triton: a CUDA build of torch brings it)" if "triton" in str(e) else "")
        raise PeerUnavailable(f"mamba-ssm: cannot import {MODULE} from {where}: {e}{hint}") from e


def version() -> str:
    return getattr(sys.modules.get(PACKAGE), "__version__", "not loaded")


def _load():
    global _peer_fn
    if _peer_fn is None:
        _peer_fn = load_ssd_combined().mamba_chunk_scan_combined
    return _peer_fn


def mamba_ssm_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                      seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                      return_final_states=False, return_varlen_states=False):
    """mamba_ssm's own mamba_chunk_scan_combined, validated first, arguments passed through unchanged."""
    check_call(INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    require_cuda("mamba-ssm", x)
    return _load()(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
                   return_final_states=return_final_states, return_varlen_states=return_varlen_states)


def _stage(name):
    def call(*args, **kwargs):
        first = next(a for a in args if isinstance(a, torch.Tensor))
        require_cuda("mamba-ssm", first)
        return _STAGE_IMPLS[name](load_ssd_combined(), *args, **kwargs)
    call.__name__ = f"mamba_ssm_{name}"
    call.__doc__ = f"mamba_ssm's {name} stage (loaded at the first call)."
    return call


def _dense_last(t):
    return t if t is None or t.stride(-1) == 1 else t.contiguous()


def _chunk_cumsum(m, dt, A, chunk_size, dt_bias=None, dt_softplus=False, dt_limit=(0.0, float("inf"))):
    """-> (dA_cumsum, dt_out), fp32 (b, h, c, L)."""
    return m._chunk_cumsum_fwd(dt, A, chunk_size, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit)


def _chunk_state(m, B, x, dt_out, dA_cumsum, seq_idx=None):
    """-> each chunk's own state (b, c, h, p, n), fp32."""
    return m._chunk_state_fwd(_dense_last(B), x, dt_out, dA_cumsum, seq_idx=seq_idx, states_in_fp32=True)


def _state_passing(m, states, dA_cumsum, initial_states=None, seq_idx=None):
    """-> (states entering each chunk (b, c, h, p, n), final states (b, h, p, n) fp32)."""
    b, c, h, p, n = states.shape
    init = None if initial_states is None else initial_states.reshape(b, h, p * n)
    out, final = m._state_passing_fwd(states.reshape(b, c, h, p * n), dA_cumsum[:, :, :, -1], initial_states=init,
                                      seq_idx=seq_idx, chunk_size=dA_cumsum.shape[-1])
    return out.reshape(b, c, h, p, n), final.reshape(b, h, p, n)


def _chunk_scan(m, B, C, x, dt_out, dA_cumsum, states_in, D=None, z=None, seq_idx=None):
    """-> out (b, l, h, p) in x.dtype."""
    B, C, D = _dense_last(B), _dense_last(C), _dense_last(D)
    CB = m._bmm_chunk_fwd(C, B, dA_cumsum.shape[-1], seq_idx=seq_idx, output_dtype=torch.float32)
    out, _ = m._chunk_scan_fwd(CB, x, dt_out, dA_cumsum, C, states_in, D=D, z=z, seq_idx=seq_idx)
    return out


_STAGE_IMPLS = {"chunk_cumsum": _chunk_cumsum, "chunk_state": _chunk_state, "state_passing": _state_passing,
                "chunk_scan": _chunk_scan}
STAGES = {name: _stage(name) for name in _STAGE_IMPLS}


def _drops_initial_states(problem) -> bool:
    """chunk_state_varlen (ssd_chunk_state.py:701) adds the state entering the chunk of a sequence's
    last token only if the sequence began before that chunk, never for chunk 0, where that state is
    initial_states: so varlen state 0 misses them when sequence 0 ends inside chunk 0 or on its last token."""
    first_end = problem.seq_starts[0] if problem.seq_starts else problem.seqlen
    return problem.varlen and problem.initial_states and first_end <= problem.chunk_size


def varlen_state0_misses_initial_states(problem, *variants) -> bool:
    """The problem meets the bug; compared with variants (another chunk size), exactly where one
    run meets it and another does not (both missing the initial states agree with each other)."""
    hits = {_drops_initial_states(p) for p in (problem, *variants)}
    return hits == {True, False} if variants else hits == {True}


def drop_initial_states_from_varlen_state0(forward):
    """`forward` (keyword arguments of mamba_chunk_scan_combined) with this bug: varlen state 0 as if
    initial_states were None where sequence 0 ends inside chunk 0 or on its last token."""
    def buggy(**kw):
        out = forward(**kw)
        cu, h0 = kw.get("cu_seqlens"), kw.get("initial_states")
        if not kw.get("return_varlen_states") or h0 is None or int(cu[1]) > kw["chunk_size"]:
            return out
        varlen = out[-1].clone()
        varlen[0] = forward(**{**kw, "initial_states": None})[-1][0]
        return (*out[:-1], varlen)
    return buggy


VARLEN_STATE0 = Deviation(
    props=("prop_matches_oracle", "prop_chunk_size_invariance", "prop_seq_idx_packing"),
    outputs=("varlen_states",),
    condition=varlen_state0_misses_initial_states,
    reason=("varlen state 0 leaves initial_states out when sequence 0 ends inside chunk 0 or on its last "
            "token (chunk_state_varlen adds the state entering the chunk only if start_idx < chunk_start)"),
    finding="docs/findings/mamba-ssm-varlen-state0.md",
    model=drop_initial_states_from_varlen_state0,
    examples=(  # sequence 0 ends inside chunk 0; then exactly on its last token
        dict(batch=1, seqlen=96, nheads=2, headdim=16, dstate=16, chunk_size=64, dtype="float32",
             initial_states=True, seq_starts=(40,), varlen=True, seed=0),
        dict(batch=1, seqlen=160, nheads=2, headdim=16, dstate=16, chunk_size=64, dtype="bfloat16",
             initial_states=True, seq_starts=(64, 100), varlen=True, seed=0),
    ),
)


INFO = KernelInfo(
    name="mamba-ssm",
    fn=mamba_ssm_forward,
    dtypes=("float32", "float16", "bfloat16"),
    chunk_sizes=(16, 32, 64, 128, 256),
    headdims=None,
    dstates=None,
    seqlen_multiple_of_chunk=False,
    options=ALL_OPTIONS,
    stages=dict(STAGES),
    device="cuda",
    state_dtype="input",
    matmul="tf32-trunc",
    # Triton specializes on dtypes, constexprs (HAS_D, HAS_Z, HAS_SEQ_IDX, the autotuned tiles keyed by
    # chunk size, headdim and dstate) and each integer argument's divisibility by 16 or being 1
    compile_key=jit_specialization_key,
    bitwise_batch_invariant=False,
    deterministic=True,
    deviations=(VARLEN_STATE0,),
    notes=("mamba_ssm 2.3.2.post1 Triton mamba_chunk_scan_combined, loaded without its package __init__; "
           "chunk states fp32, states entering chunks in C.dtype, final states fp32; truncating TF32 tl.dot for fp32"),
    backward=Backward(
        fn="autograd", grads=("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states"),
        options=ALL_OPTIONS - {"varlen_states"}, state_dtype="input", matmul="tf32-trunc", deterministic=False,
        notes="MambaChunkScanCombinedFn.backward (Triton); states and state gradients in x.dtype; tl.atomic_add sums"),
)

__all__ = ["INFO", "STAGES", "VARLEN_STATE0", "mamba_ssm_forward", "load_ssd_combined", "find_package_dir", "register_stub_package",
           "version"]
