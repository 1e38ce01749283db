"""`tilegym`: NVIDIA TileGym 1.5.1's cuTile Mamba-2 forward behind mamba_chunk_scan_combined's contract.

The peer: `tilegym.ops.cutile.mamba2.mamba2_chunk_forward(x, a, b, c, d, dt, init_state,
chunk_size=64) -> (out, final_state)`, three cuTile kernels (chunk cumsum in log2 units | chunk state
fused with state passing | output). This adapter converts arguments only:

    D=None               -> d = zeros(h) fp32      (y + 0*x: the same output)
    D (h,), A            -> float32                (mamba_ssm loads both as fp32 too)
    initial_states=None  -> init_state = zeros(b,h,p,n) fp32   (a zero start state)
    initial_states       -> float32, contiguous    (the kernel accumulates into it: it must be fp32;
                                                    a bf16/fp16 state cache converts exactly)
    D in x's dtype       -> float32                (exact)
    return_final_states  -> returns the peer's final_state (fp32), else drops it

Capabilities, read from tilegym/ops/cutile/mamba2.py of the 1.5.1 wheel (line numbers of that file):

* seqlen % chunk_size == 0: `_validate_chunk_size` (l.1393) raises otherwise.
* chunk sizes 64 and 128: the two TileGym's own tests and perf runs use (64 takes the swap output
  kernel, l.1518; >= 128 adds a state variant, l.649). 32 and 256 compile for sm_90
  (lab/scripts/tilegym_compile_probe.py) but TileGym never runs them, and at 256 the output kernel holds
  a (256, 256) fp32 score tile (l.44, 256 KiB): not declared.
* nheads % 4 == 0: the cumsum kernel's only head tiles are BLOCK_H in (4, 8, 16) and a config needs
  `num_heads % BLOCK_H == 0` (l.641-643); otherwise "autotune search space is empty" (l.1438):
  declared as nheads_multiple_of=4.
* headdim: BLOCK_HEAD = min(64, headdim) must divide headdim (l.655, l.675, l.694) and a tile side
  is a power of two: headdim a power of two up to 64, or a multiple of 64.
* dstate: a multiple of 16, since the state kernel's BLOCK_STATE is 16, 32 or 64 (l.652).
* D of shape (h,) only: `ct.load(d, index=(head,), shape=(1,))` (l.85, l.159); always required.
* no z, seq_idx, cu_seqlens/varlen states, dt_bias, dt_softplus or dt_limit: the signature has none.
  dt is used as given; mamba_ssm clamps dt to dt_limit=(0, inf) by default, TileGym does not, so the
  two agree for dt >= 0 only (not checked per call: that would cost a host sync).
* dt in fp32 or in x's dtype: the cumsum kernel casts it to fp32 (l.813); TileGym's tests pass bf16 dt.
* dtypes: bf16 is what TileGym tests. fp16 and fp32 are declared because the kernels are
  dtype-generic (ct.mma takes f16, bf16, f32 operands) and compile for sm_90 with them
  (lab/scripts/tilegym_compile_probe.py); the GPU property run is their first test.
* states: chunk-entry states are stored in c.dtype (`state_dtype=c.dtype`, l.1931; `hiddens`, l.1457)
  and carried in fp32 on chip; final_state is the fp32 accumulator (l.977) in init_state's dtype
  (`empty_like(init_state)`, l.1458): hence state_dtype="input", fp32 final states.
* matmul: the intra-chunk product is TF32 whatever the input dtype (`astype(ct.tfloat32)`, l.84,
  l.158); the other products take the input dtype (fp32 operands stay fp32). Declared "tf32" so the
  yardstick rounds fp32 operands to TF32, as STYLE.md asks.
* deterministic: no atomics in the forward kernels; configs are cached per shape (`_tuning_key`).
  Not declared bitwise batch-invariant: the autotuned config depends on every tensor shape.

Backward: `mamba2_chunk_backward(x, a, b, c, d, dt, init_state, dout, dfinal_state, chunk_size=64,
state_dtype=torch.float32) -> dx, da, db, dc, dd, ddt, dinit_state` (l.1938), four cuTile kernels (a
forward state pass that keeps fp32 and narrowed states, the reverse state pass, dx/dD/dCB, and
dA/dB/dC/ddt). `tilegym_backward` maps it onto the contract's names: dx -> x, da -> A, db -> B,
dc -> C, dd -> D (only when the call passed D), ddt -> dt, dinit_state -> initial_states (only when
passed); dfinal_states=None is a zero dfinal_state. Its precision: the state gradients (`dhiddens`)
and the states read for dC are narrowed to the input dtype (`narrow_dtype`, l.1404, l.1953, l.1963),
dCB is stored in c.dtype (l.1735), fp32 operands of its ct.mma stay fp32 (no tfloat32 cast in the
backward kernels): state_dtype="input", matmul="ieee". Not deterministic where ngroups < nheads: db
and dc are then summed over a group's heads with `atomic_store_add` (l.598-603, REDUCE_HEADS).
Its ddt is `rs / dt_tile` (l.435), where rs already carries the factor dt: at a token with dt == 0
(padding to a whole number of chunks, which TileGym requires, or a negative dt clamped to 0 upstream)
that is 0/0, and ddt is NaN there, though the true gradient is finite. Declared as the deviation
ZERO_DT_DDT (docs/findings/tilegym-ddt-at-zero-dt.md): ddt on backward problems with skipped tokens.

Two registered modes. `tilegym` (INFO) runs as shipped: the first call of each new shape autotunes by
exhaustive search (minutes), whatever the caller's environment says (the adapter clears
TILEGYM_DISABLE_AUTOTUNE around each call; TileGym reads it per call, `tilegym/autotune.py`
`is_autotune_disabled`, and keys its tuning caches by it). `tilegym-first-config` (FIRST_CONFIG), for
fast fuzzing: the same call with TILEGYM_DISABLE_AUTOTUNE=1, TileGym's own switch, so the first config
of each search space runs.

TileGym keys each search on every argument's shape and stride (`_tuning_key`), so each new (batch,
seqlen) searches again, and a fill of the suite is bound by the searches. With
`SSDCHECK_TILEGYM_TUNING=PATH` the peer's search is wrapped at its first call
(kernels/peers/tilegym_tuning.py): a shape searched in an earlier run (or by another xdist worker
whose file was there at start) takes the recorded choice of TileGym's own search; others search, and
are recorded. The report's `meta.env` records the setting.
"""
from __future__ import annotations

import contextlib
import os

import torch

from kernels.contract import unpack_returns
from kernels.peers import PeerUnavailable, require_cuda
from kernels.registry import (Backward, Deviation, KernelInfo, Precompile, UnsupportedProblem, check_call,
                              jit_specialization_key)

PEER_MODULE = "tilegym.ops.cutile.mamba2"
TUNING_ENV = "SSDCHECK_TILEGYM_TUNING"   # a tuning file: TileGym's search runs once per shape across runs
PLAN_GPU_ENV = "SSDCHECK_TILEGYM_PLAN_GPU"   # a precompile plan off the GPU: the GPU model whose recorded searches it reads
NHEADS_MULTIPLE_OF = 4
_peer_fn = None


def _peer_module():
    """TileGym's mamba2 module, imported (PeerUnavailable saying what to install if it cannot be)."""
    import importlib
    try:
        return importlib.import_module(PEER_MODULE)
    except Exception as e:  # ImportError, or cuda.tile failing to initialise without a GPU
        raise PeerUnavailable(
            f"tilegym: cannot import {PEER_MODULE} ({type(e).__name__}: {e}). Install tilegym 1.5.1 "
            f"(pip install tilegym==1.5.1, or its wheel from $SSDCHECK_PEERS_DIR) and cuda-tile; on a "
            f"GPU host `source .gpu-bundle/setup.sh` does both (docs/gpu-host.md)") from e


def _load():
    """tilegym's mamba2_chunk_forward, imported at the first call."""
    global _peer_fn
    if _peer_fn is None:
        module = _peer_module()
        tuning = os.environ.get(TUNING_ENV)
        if tuning:   # TileGym's own choices, kept across processes (kernels/peers/tilegym_tuning.py)
            from kernels.peers import tilegym_tuning  # noqa: PLC0415
            tilegym_tuning.install(tuning, module, writer=os.environ.get("PYTEST_XDIST_WORKER") or f"pid{os.getpid()}")
        _peer_fn = module.mamba2_chunk_forward
    return _peer_fn


_ZEROS: dict = {}


def _zeros(shape: tuple, device) -> torch.Tensor:
    """A cached fp32 zero tensor: TileGym only reads d and init_state, so a zero start state or D
    costs no allocation and memset inside a timed call."""
    key = (tuple(shape), str(device))
    t = _ZEROS.get(key)
    if t is None:
        if len(_ZEROS) >= 8:
            _ZEROS.clear()
        t = _ZEROS[key] = torch.zeros(shape, dtype=torch.float32, device=device)
    return t


def _check_shape_rules(x: torch.Tensor, B: torch.Tensor) -> None:
    """What TileGym's search spaces require beyond KernelInfo's fields (see the module docstring),
    for headdims and dstates outside the declared menus."""
    p, n = x.shape[3], B.shape[3]
    if not ((p <= 64 and p & (p - 1) == 0) or p % 64 == 0):
        raise UnsupportedProblem(f"x: tilegym needs headdim a power of two <= 64 or a multiple of 64, "
                                 f"got headdim={p}")
    if n % 16:
        raise UnsupportedProblem(f"B: tilegym needs dstate divisible by 16, got dstate={n}")


AUTOTUNE_ENV = "TILEGYM_DISABLE_AUTOTUNE"


@contextlib.contextmanager
def autotune(enabled: bool):
    """TileGym's own switch, TILEGYM_DISABLE_AUTOTUNE, set for one call as the mode says (restored after)."""
    saved = os.environ.pop(AUTOTUNE_ENV, None)
    if not enabled:
        os.environ[AUTOTUNE_ENV] = "1"
    try:
        yield
    finally:
        os.environ.pop(AUTOTUNE_ENV, None)
        if saved is not None:
            os.environ[AUTOTUNE_ENV] = saved


def tilegym_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                    seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                    return_final_states=False, return_varlen_states=False):
    """mamba_chunk_scan_combined on TileGym as shipped (autotuned)."""
    with autotune(True):
        return _forward(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                        seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
                        return_final_states=return_final_states, return_varlen_states=return_varlen_states)


def tilegym_first_config_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                                 seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                                 return_final_states=False, return_varlen_states=False):
    """tilegym_forward with TILEGYM_DISABLE_AUTOTUNE=1: the first config of each search space."""
    with autotune(False):
        return _forward(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                        seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
                        return_final_states=return_final_states, return_varlen_states=return_varlen_states)


def _peer_args(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
               seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
               return_final_states=False, return_varlen_states=False):
    """mamba2_chunk_forward's arguments for a call under the contract's names: (positional, keyword).

    x (b,l,h,p), dt (b,l,h) already >= 0, A (h), B, C (b,l,g,n), D (h), initial_states (b,h,p,n).
    Everything is validated (and anything TileGym lacks rejected, naming the argument) here, before
    the peer is imported, so the errors are the same on a machine without it.
    """
    check_call(INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    _check_shape_rules(x, B)
    b, _, h, p = x.shape
    n = B.shape[3]
    d = _zeros((h,), x.device) if D is None else D.float().contiguous()
    if initial_states is None:
        init_state = _zeros((b, h, p, n), x.device)
    else:
        init_state = initial_states.float().contiguous()
    return ((x.contiguous(), A.float().contiguous(), B.contiguous(), C.contiguous(), d, dt.contiguous(), init_state),
            {"chunk_size": chunk_size})


def _forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
             seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
             return_final_states=False, return_varlen_states=False):
    """mamba_chunk_scan_combined on TileGym (_peer_args). Returns out, or (out, final_states) with
    final_states fp32."""
    args, kwargs = _peer_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                              seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
                              return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    require_cuda("tilegym", x)
    out, final_state = _load()(*args, **kwargs)
    return unpack_returns(out, final_state, None, return_final_states, False)


def compile_key(problem) -> tuple:
    """cuTile's JIT specialization (registry.jit_specialization_key); this adapter always passes d and
    init_state (zeros when absent, float32 always), so D and initial_states change no signature. TileGym's kernels also
    take the heads per group as a compile-time constant (mamba2.py: `num_heads_per_group:
    ct.Constant[int]` in the forward and backward kernels, from `num_heads // num_groups`), so each
    value is a compile of its own. Its backward allocates fp32 (b, h, nchunks) arrays (mamba2.py: dd,
    da), whose strides nchunks and h * nchunks are multiples of 16 bytes or not: two more classes."""
    nchunks = -(-problem.seqlen // problem.chunk_size)
    return jit_specialization_key(problem, ignore=frozenset({"D", "initial_states", "final_states", "states_input_dtype",
                                                             "params_input_dtype"})) + (
        problem.nheads // problem.ngroups, nchunks % 4 == 0, problem.nheads * nchunks % 4 == 0)


def tilegym_backward(dy, dfinal_states, x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None,
                     initial_states=None, seq_idx=None, cu_seqlens=None, dt_softplus=False,
                     dt_limit=(0.0, float("inf")), return_final_states=False, return_varlen_states=False):
    """TileGym's mamba2_chunk_backward under the contract's names: {input name: gradient}.

    dy (b,l,h,p) in x.dtype, dfinal_states (b,h,p,n) fp32 or None; the forward's arguments as for
    tilegym_forward (validated the same way, so an unsupported option is refused before the peer loads).
    """
    check_call(INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    _check_shape_rules(x, B)
    if tuple(dy.shape) != tuple(x.shape):
        raise ValueError(f"dy: expected x's shape {tuple(x.shape)}, got {tuple(dy.shape)}")
    require_cuda("tilegym", x)
    backward = _load_backward()
    b, _, h, p = x.shape
    n = B.shape[3]
    d = _zeros((h,), x.device) if D is None else D.float().contiguous()
    init = _zeros((b, h, p, n), x.device) if initial_states is None else initial_states.float().contiguous()
    dfinal = _zeros((b, h, p, n), x.device) if dfinal_states is None else dfinal_states.float().contiguous()
    dx, da, db, dc, dd, ddt, dinit = backward(x.contiguous(), A.float().contiguous(), B.contiguous(), C.contiguous(),
                                              d, dt.contiguous(), init, dy.to(x.dtype).contiguous(), dfinal,
                                              chunk_size=chunk_size)
    grads = {"x": dx, "dt": ddt, "A": da, "B": db, "C": dc}
    if D is not None:
        grads["D"] = dd
    if initial_states is not None:
        grads["initial_states"] = dinit
    return grads


_peer_bwd = None


def _load_backward():
    global _peer_bwd
    if _peer_bwd is None:
        _load()
        import importlib
        _peer_bwd = importlib.import_module(PEER_MODULE).mamba2_chunk_backward
    return _peer_bwd


def skips_tokens(problem, *variants) -> bool:
    """A backward problem with skipped tokens (GradProblem.dt_zero_stride > 0): TileGym's dt is used as
    given (no bias, softplus or limit), so those tokens have dt exactly 0."""
    return getattr(problem, "dt_zero_stride", 0) > 0


# the gradient properties that compare ddt (seq_idx packing and determinism do not run on TileGym)
_DDT_PROPS = ("prop_grad_matches_oracle", "prop_grad_no_decay_is_linear_attention", "prop_grad_chunk_size_invariance",
              "prop_grad_split_invariance", "prop_grad_linearity", "prop_grad_group_broadcast",
              "prop_grad_finite_under_extreme_decay")
ZERO_DT_DDT = Deviation(
    props=_DDT_PROPS,
    outputs=("ddt",),
    condition=skips_tokens,
    reason=("ddt is NaN at every token with dt == 0: mamba2.py l.435 stores rs / dt_tile, and rs carries "
            "the factor dt (dcbT_out = xdoT * W * dt_tile), so it is 0/0 there; the true gradient is finite"),
    finding="docs/findings/tilegym-ddt-at-zero-dt.md",
    examples=(  # two chunks, every 5th token skipped (tokens 0, 5, ...: one on each chunk's first row)
        dict(batch=1, seqlen=128, nheads=4, headdim=16, dstate=16, chunk_size=64, dtype="float32",
             initial_states=True, final_states=True, dt_zero_stride=5, seed=0),
        dict(batch=2, seqlen=128, nheads=4, headdim=32, dstate=32, chunk_size=64, dtype="bfloat16",
             D="h", final_states=True, dfinal=False, dt_zero_stride=3, seed=1),
    ),
)


def _precompile_plan(autotune_on: bool = True, **kwargs):
    """Every compile tilegym_forward(**kwargs) makes (CPU tensors), its searches' candidates included
    (`autotune_on`; kernels/peers/tilegym_precompile.py)."""
    from kernels.peers import tilegym_precompile  # noqa: PLC0415 (cuda.tile and TileGym load only here)
    args, peer_kwargs = _peer_args(**kwargs)
    with autotune(autotune_on):   # a planning process never installs a tuning file (_load): that asks the GPU
        return tilegym_precompile.plan(_peer_module(), args, peer_kwargs, _planning_tuning() if autotune_on else None)


def _planning_tuning():
    """The tuning file the GPU calls will read ($SSDCHECK_TILEGYM_TUNING), for this host's GPU model (or
    $SSDCHECK_TILEGYM_PLAN_GPU's), or None (no file, or no GPU to name): a search it records compiles one
    candidate, not all."""
    path, gpu = os.environ.get(TUNING_ENV), os.environ.get(PLAN_GPU_ENV)
    if not path or not (gpu or torch.cuda.is_available()):
        return None
    from kernels.peers import tilegym_tuning  # noqa: PLC0415
    return tilegym_tuning.Tuning(path, gpu or torch.cuda.get_device_name(), tilegym_tuning.installed_version())


def _precompile_plan_first_config(**kwargs):
    """_precompile_plan for the first-config mode: the first config of each search space."""
    return _precompile_plan(False, **kwargs)


def _precompile_build(job, arch):
    from kernels.peers import tilegym_precompile  # noqa: PLC0415
    return tilegym_precompile.build(_peer_module(), job, arch)


INFO = KernelInfo(
    name="tilegym",
    fn=tilegym_forward,
    dtypes=("float32", "float16", "bfloat16"),
    chunk_sizes=(64, 128),
    headdims=(16, 32, 64, 128, 256),
    dstates=(16, 32, 64, 128, 256),
    nheads_multiple_of=NHEADS_MULTIPLE_OF,
    seqlen_multiple_of_chunk=True,
    options=frozenset({"D", "initial_states", "final_states", "ngroups", "dt_input_dtype", "states_input_dtype",
                       "params_input_dtype"}),
    stages=None,
    device="cuda",
    state_dtype="input",
    matmul="tf32",
    compile_key=compile_key,
    precompile=Precompile(plan=_precompile_plan, build=_precompile_build),
    # as shipped, a new compile class is a search that compiles each of its candidates (64 for the chunk-128
    # output kernel, a median 24 s each on a 2-core CPU: lab/scripts/precompile_cost.py) one after another
    # before its first answer, so drawn examples stay in the battery's classes, whose candidates the prime
    # builds on every core; tilegym-first-config (one config a class) explores new classes
    explore_one_in=0,
    bitwise_batch_invariant=False,
    deterministic=True,
    deviations=(ZERO_DT_DDT,),
    notes=("TileGym 1.5.1 mamba2_chunk_forward; dt must be >= 0 (no clamp); chunk states in the input dtype, final states fp32; TF32 intra-chunk product; "
           "bf16 is the only dtype TileGym itself tests"),
    backward=Backward(
        fn=tilegym_backward, grads=("x", "dt", "A", "B", "C", "D", "initial_states"),
        options=frozenset({"D", "initial_states", "final_states", "ngroups", "dt_input_dtype"}),
        state_dtype="input", matmul="ieee", deterministic=False,
        # a compile class is five kernels, about a minute of tileiras on the H200: at 1 in 8 a gradient
        # test's 200 draws took 9-13 classes, its compiles more than its time (lab/reports/2026-12-02-backward-h200.md)
        explore_one_in=48,
        notes="mamba2_chunk_backward; state gradients and dCB in the input dtype; atomic group sums of dB/dC"),
)

FIRST_CONFIG = INFO.replace(name="tilegym-first-config", fn=tilegym_first_config_forward, explore_one_in=None,
                            precompile=Precompile(plan=_precompile_plan_first_config, build=_precompile_build),
                            notes=INFO.notes + "; TILEGYM_DISABLE_AUTOTUNE=1 (first config of each search space)")

__all__ = ["FIRST_CONFIG", "INFO", "ZERO_DT_DDT", "skips_tokens", "tilegym_forward", "tilegym_first_config_forward",
           "tilegym_backward", "NHEADS_MULTIPLE_OF"]
