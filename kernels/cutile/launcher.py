"""Host side of the cuTile SSD forward: argument checks, layout, dispatch, launches.

`ssd_forward` has mamba_ssm's `mamba_chunk_scan_combined` signature and return convention. The
stage entry points (`chunk_cumsum`, `chunk_state_and_passing`, `chunk_scan`) take and return
mamba_ssm's layouts, with dA_cumsum in natural log; inside, decays are kept in log2 units (the
conversion by ln 2 happens here, at this boundary only).

Input policy (every rule raises a ValueError naming the argument, before any launch):
* x, B, C, z share one dtype: float16, bfloat16 or float32. dt is float32 or x's dtype. A is float32.
  D, dt_bias, initial_states are float32 or x's dtype (converted to float32 here; they are tiny).
  seq_idx / cu_seqlens are int32 or int64 (converted to int32).
* chunk_size 64, 128 or 256; headdim and dstate powers of two in 16..256; any seqlen >= 1.
* All tensors on one CUDA device. Non-contiguous tensors, and tensors whose storage is not 16-byte
  aligned, are copied to fresh contiguous ones on purpose (the kernels index dense layouts).
* Problems whose tensors exceed 2^31 - 1 elements are split along the batch (kernels index in
  int32); one batch element that large is rejected.

Precision (declared in INFO): matmul operands are in the input dtype with fp32 accumulation;
dt, the cumsum, decays and the carried state are fp32; the state entering each chunk is stored in
the input dtype (state_dtype="input", as mamba_ssm does); final_states are fp32 and
varlen_states are in the state dtype (x.dtype), as mamba_ssm returns them.

varlen_states (cu_seqlens, batch 1): a sequence's tokens in the chunk of its last token plus the state
entering the chunk if it began before that chunk or starts at token 0; that state comes from a
pass whose seq_idx is derived from cu_seqlens (token 0's sequence is 0), so every packed sequence
starts from zero, the one holding token 0 from initial_states, whatever seq_idx was given.

NaN / Inf are passed through, never sanitized: a NaN in x at (t, h, p) reaches y[:, t:, h, p] of
its sequence through the carried state, and y[t', h, p] for every t' of t's chunk, earlier ones
included, because the masked-out score is still multiplied by x inside the tensor-core product
(0 * NaN = NaN; mamba_ssm behaves the same). A sequence reset (seq_idx) is a select, so a NaN
state does not cross into the next sequence. NaN in B, C, dt or A spreads likewise.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
from typing import Sequence

import torch

from kernels.contract import SSDArgumentError, unpack_returns
from kernels.cutile import dispatch
from kernels.cutile.dispatch import Problem
from kernels.registry import jit_specialization_key

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
INT32_MAX = 2**31 - 1
CHUNK_SIZES = (64, 128, 256)
POW2_DIMS = (16, 32, 64, 128, 256)
_TORCH_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}

# A config override for experiments: {kernel name: dispatch.Config}; absent kernels use the table.
# $SSDCHECK_CUTILE_CONFIG fills it for a whole run (dispatch.parse_configs; reports record it).
_OVERRIDE: dict[str, dispatch.Config] = dispatch.parse_configs(os.environ.get(dispatch.CONFIG_ENV, ""))
# $SSDCHECK_CUTILE_SEGMENTS forces the segmented walk (at most N segments) or, at 1, turns it off
# (dispatch.SEGMENTS_ENV); None: the table decides.
_SEGMENTS: int | None = dispatch.parse_segments(os.environ.get(dispatch.SEGMENTS_ENV, ""))


class CutileUnavailable(RuntimeError):
    """cuTile cannot run here (no GPU, or the package is missing)."""


def _bad(name: str, expected: str, got) -> SSDArgumentError:
    return SSDArgumentError(f"{name}: expected {expected}, got {got}")


def _ct():
    try:
        import cuda.tile as ct  # noqa: PLC0415
    except ImportError as e:  # pragma: no cover - cuda-tile is a dependency
        raise CutileUnavailable(f"cutile: the cuda-tile package is not importable ({e})") from e
    return ct


_K = None


def _kernels():
    global _K
    if _K is None:   # imported on first use: importing kernels.cutile must not need cuda.tile to work
        from kernels.cutile import kernels as K  # noqa: PLC0415
        _K = K
    return _K


def _dense(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor whose storage starts 16-byte aligned (copied only if needed)."""
    if not t.is_contiguous() or t.data_ptr() % 16:
        t = t.clone(memory_format=torch.contiguous_format)
        if t.data_ptr() % 16:  # pragma: no cover - the caching allocator aligns to 512 bytes
            raise RuntimeError("cutile: could not get a 16-byte aligned copy")
    return t


def _require_cuda(x: torch.Tensor) -> None:
    if not torch.cuda.is_available():
        raise CutileUnavailable("cutile: ssd_forward needs a CUDA GPU, and torch sees none "
                                "(importing kernels.cutile works without one; running does not)")
    if x.device.type != "cuda":
        raise _bad("x", "a CUDA tensor (cutile runs on the GPU)", f"device {x.device}")


def _dtype_name(name: str, t: torch.Tensor) -> str:
    if t.dtype not in _TORCH_DTYPES:
        raise _bad(name, "float16, bfloat16 or float32", t.dtype)
    return _TORCH_DTYPES[t.dtype]


def _check_small(name: str, t, x_dtype) -> None:
    if t is not None and t.dtype not in (torch.float32, x_dtype):
        raise _bad(name, f"float32 or x's dtype {x_dtype}", t.dtype)


def _check_dims(headdim: int, dstate: int, chunk_size: int) -> None:
    if headdim not in POW2_DIMS:
        raise _bad("x", f"headdim (dim 3) in {POW2_DIMS}", headdim)
    if dstate not in POW2_DIMS:
        raise _bad("B", f"dstate (dim 3) in {POW2_DIMS}", dstate)
    if chunk_size not in CHUNK_SIZES:
        raise _bad("chunk_size", f"one of {CHUNK_SIZES}", chunk_size)


def _config(kernel: str, problem: Problem) -> dispatch.Config:
    """The override for this chunk size (KERNEL@CHUNK), else the kernel's plain override where it fits
    (its token tile BL divides the chunk size), else the table."""
    if _OVERRIDE:   # empty outside experiments: no key to build on the hot path
        for cfg in (_OVERRIDE.get(f"{kernel}@{problem.chunk_size}"), _OVERRIDE.get(kernel)):
            if cfg is not None and problem.chunk_size % dict(cfg.constants).get("BL", 1) == 0:
                return cfg
    return dispatch.choose(kernel, problem)


_CHOSEN: dict = {}   # (table, kernel, problem) -> launch Config: the table is data, read once per problem


def _launch_config(kernel: str, problem: Problem) -> dispatch.Config:
    """_config, with FAST dropped where the problem is not one the FAST path serves (_fast_config);
    memoized while no override is set (choosing costs host time on every launch otherwise)."""
    if _OVERRIDE:
        return _fast_config(kernel, _config(kernel, problem), problem)
    key = (id(dispatch.TABLE), kernel, problem)
    cfg = _CHOSEN.get(key)
    if cfg is None:
        cfg = _CHOSEN[key] = _fast_config(kernel, dispatch.choose(kernel, problem), problem)
    return cfg


# (kernel, table row) -> launches decided by that row in this process: the dispatch paths a run reached
# (KernelInfo.coverage; compile keys and recorded launches choose rows too, but do not count here)
LAUNCHED: dict = {}
_ROWS: dict = {}


def _record(kernel: str, problem: Problem) -> None:
    if _OVERRIDE:   # an override replaced the table's choice: no row of the table ran
        return
    key = (id(dispatch.TABLE), kernel, problem)
    r = _ROWS.get(key)
    if r is None:
        r = _ROWS[key] = (kernel, dispatch.row(kernel, problem))
    LAUNCHED[r] = LAUNCHED.get(r, 0) + 1


def _record_segment_row(prob: Problem, segs) -> None:
    """Count segment_state's row where it decided what ran: its segmented row where the table, not the
    force switch, chose the segments; its "no segments" row where none ran. A segmented row that hands
    the problem on (no S >= 2 divides the chunks) decided nothing, and a forced plan is no table row."""
    chose = _launch_config("segment_state", prob) != dispatch.SEG_OFF   # memoized: no table walk per call
    if (segs is not None) == chose and (segs is None or _SEGMENTS is None):
        _record("segment_state", prob)


def coverage() -> dict[str, int]:
    """KernelInfo.coverage: launches per dispatch table row in this process, 0 for a row not reached;
    rows that only a force switch reaches are named with dispatch.FORCED_ONLY."""
    return {name: LAUNCHED.get((kernel, i), 0) for kernel, i, name in dispatch.row_names()}


_HINTED: dict = {}


def _kernel_for(kfn, cfg: dispatch.Config):
    if cfg.occupancy is None and cfg.worker_warps is None:
        return kfn
    key = (id(kfn), cfg.occupancy, cfg.worker_warps)
    if key not in _HINTED:
        _HINTED[key] = kfn.replace_hints(**cfg.hints())
    return _HINTED[key]


def _launch(grid: tuple, kfn, cfg: dispatch.Config, args: tuple, device: torch.device, stream=None) -> None:
    """Launch on `stream`, or on the device's current stream (a forward looks it up once for its launches)."""
    ct = _ct()
    consts = tuple(v for _, v in cfg.constants)
    if stream is None:
        stream = torch.cuda.current_stream(device)
    try:
        ct.launch(stream, grid, _kernel_for(kfn, cfg), args + consts)
    except Exception as e:
        from kernels.cutile.toolchain import explain  # noqa: PLC0415
        cc = torch.cuda.get_device_capability(device)
        err = explain(e, cc)
        if err is not None:
            raise err from e
        raise


# --------------------------------------------------------------------------- kernel wrappers
# These take dense internal layouts: cs / dtc are (b, h, Lpad) fp32, cs in log2 units.

def _run_cumsum(dt, A32, bias32, chunk_size, dt_softplus, dt_limit, stream=None):
    b, l, h = dt.shape
    nchunks = -(-l // chunk_size)
    lpad = nchunks * chunk_size
    dtc = torch.empty(b, h, lpad, device=dt.device, dtype=torch.float32)
    cs = torch.empty_like(dtc)
    # mamba_ssm clamps unconditionally: the default (0, inf) maps a negative dt to 0
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    prob = Problem(_TORCH_DTYPES[dt.dtype], 0, 0, chunk_size)
    cfg = _launch_config("chunk_cumsum", prob)
    _record("chunk_cumsum", prob)
    grid = (nchunks, -(-h // cfg.get("BH")), b)
    has_bias = bias32 is not None
    args = (dt, A32, bias32 if has_bias else A32, dtc, cs,
            l, chunk_size, int(has_bias), int(bool(dt_softplus)), lo, hi)
    _launch(grid, _kernels().chunk_cumsum_kernel, cfg, args, dt.device, stream)
    return cs, dtc


def _fast_config(kernel: str, cfg: dispatch.Config, problem: Problem) -> dispatch.Config:
    """The Config to launch: `cfg`, or `cfg` with FAST=0 when the problem is not one its FAST path
    serves. FAST = c promises the kernel an aligned problem (seqlen % c == 0) without seq_idx at
    chunk size c, in BL-token tiles (chunk_state: one BL = c tile per chunk; chunk_scan: BL = c, or a
    divisor of c, one row tile per block); a problem outside that runs the general path with the same
    tiles (the same answer, masked). A FAST the Config's BL does not fit is a table error. A Config
    without FAST (chunk_cumsum's, varlen_state's) is returned as it is."""
    if not any(k == "FAST" for k, _ in cfg.constants):
        return cfg
    fast, bl = cfg.get("FAST"), cfg.get("BL")
    if fast == 0:
        return cfg
    if kernel == "chunk_scan":
        if fast % bl:
            raise ValueError(f"{kernel} Config {cfg}: FAST must be a multiple of BL")
        if cfg.get("HB") != 1 and (cfg.get("HB") != 2 or fast != bl or cfg.get("PERSIST")):
            raise ValueError(f"{kernel} Config {cfg}: HB=2 needs FAST = BL (one tile per chunk), no PERSIST")
    elif fast != bl:
        raise ValueError(f"{kernel} Config {cfg}: FAST must equal BL")
    if problem.aligned and fast == problem.chunk_size:
        return cfg
    if kernel == "chunk_scan" and cfg.get("HB") != 1:
        return cfg.replace(FAST=0, HB=1)    # the head pairs are a FAST path
    return cfg.replace(FAST=0)


def _problem(x, B, chunk_size: int, seq32) -> Problem:
    """What the table looks at for chunk_state and chunk_scan."""
    b, l, h, p = x.shape
    return Problem(_TORCH_DTYPES[x.dtype], p, B.shape[3], chunk_size, b * h, seqlen=l,
                   aligned=l % chunk_size == 0 and seq32 is None)


def _run_state(x, B, dtc, cs, init32, seq32, chunk_size, state_dtype, stream=None, prob=None):
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    nchunks = -(-l // chunk_size)
    states = torch.empty(b, nchunks, h, p, n, device=x.device, dtype=state_dtype)
    final = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
    prob = prob if prob is not None else _problem(x, B, chunk_size, seq32)
    cfg = _launch_config("chunk_state", prob)
    _record("chunk_state", prob)
    grid = (-(-p // cfg.get("BP")) * -(-n // cfg.get("BN")), h, b)
    args = (x, B, dtc, cs, init32 if init32 is not None else final,
            seq32 if seq32 is not None else _dummy_int(x.device), states, final,
            l, chunk_size, nchunks, h // g, int(init32 is not None), int(seq32 is not None))
    _launch(grid, _kernels().chunk_state_kernel, cfg, args, x.device, stream)
    return states, final


def _scan_launch_config(prob: Problem, nheads: int, ngroups: int) -> dispatch.Config:
    """chunk_scan's Config as launched: _launch_config's, with one head per block (HB=1) where a group
    has an odd head count (a pair of heads shares its group's C and B)."""
    cfg = _launch_config("chunk_scan", prob)
    if cfg.get("HB") == 2 and (nheads // ngroups) % 2:
        cfg = cfg.replace(HB=1)
    return cfg


def _run_scan(x, z, B, C, dtc, cs, states, D32, seq32, chunk_size, stream=None, prob=None):
    b, l, h, p = x.shape
    g = B.shape[2]
    nchunks = -(-l // chunk_size)
    out = torch.empty_like(x)
    prob = prob if prob is not None else _problem(x, B, chunk_size, seq32)
    cfg = _scan_launch_config(prob, h, g)
    _record("chunk_scan", prob)
    bl = cfg.get("BL")
    tiles = b * nchunks * (chunk_size // bl) * -(-p // cfg.get("BP")) * h // cfg.get("HB")
    if cfg.get("PERSIST"):
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        tiles = min(tiles, sms * (cfg.occupancy or 1))
    grid = (tiles, 1, 1)
    args = (x, z if z is not None else x, B, C, dtc, cs, states,
            D32 if D32 is not None else cs[0], seq32 if seq32 is not None else _dummy_int(x.device), out,
            l, chunk_size, nchunks, h // g, int(seq32 is not None), int(D32 is not None), int(z is not None))
    _launch(grid, _kernels().chunk_scan_kernel, cfg, args, x.device, stream)
    return out


def _walk_config(prob: Problem) -> dispatch.Config | None:
    """chunk_walk's Config for this problem, or None where the state and scan kernels run instead:
    the row is WALK_OFF, or (an override) its BN is not the dstate, or the problem is not aligned at
    the walk's one-tile chunk."""
    cfg = _launch_config("chunk_walk", prob)
    if cfg.get("BN") != prob.dstate or not prob.aligned or prob.chunk_size != cfg.get("BL"):
        return None
    return cfg


def _run_walk(cfg, x, z, B, C, dtc, cs, init32, D32, stream=None):
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    out = torch.empty_like(x)
    final = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
    grid = (-(-p // cfg.get("BP")), h, b)
    args = (x, z if z is not None else x, B, C, dtc, cs, init32 if init32 is not None else final,
            D32 if D32 is not None else cs[0], out, final,
            l // cfg.get("BL"), h // g, int(init32 is not None), int(D32 is not None), int(z is not None))
    _launch(grid, _kernels().chunk_walk_kernel, cfg, args, x.device, stream)
    return out, final


_SMS: dict = {}


def _sm_count(device) -> int:
    """The device's SM count (cached), or an H200's where torch sees no GPU: compile keys and recorded
    launches on the CPU choose S as an H200 would."""
    if device not in _SMS:
        try:
            _SMS[device] = torch.cuda.get_device_properties(device).multi_processor_count
        except (AssertionError, RuntimeError, ValueError):     # torch without CUDA, no GPU, a CPU device
            _SMS[device] = dispatch.DEFAULT_SMS
    return _SMS[device]


def _segment_plan(prob: Problem, nchunks: int, sms: int):
    """(S, pass-1, pass-2, pass-3 Configs) of the segmented walk for this problem, or None where another
    path runs: the segment_state row is off (unless SSDCHECK_CUTILE_SEGMENTS forces it), or the passes
    cannot serve the problem (they have no masks: aligned at their one-tile chunk, no seq_idx; pass 3 is
    the walk, whose BN must be the dstate: its segment rows cover dstate 64 and 128), or S < 2."""
    if _SEGMENTS == 1:
        return None
    state = _launch_config("segment_state", prob)
    if _SEGMENTS is not None and state.get("BN") == 0:
        state = dispatch.SEGMENT_STATE
    if state.get("BN") == 0 or not prob.aligned or prob.chunk_size != state.get("BL"):
        return None
    walk = _launch_config("chunk_walk", dataclasses.replace(prob, segmented=True))
    if walk.get("BN") != prob.dstate or prob.chunk_size != walk.get("BL"):
        return None
    walks = prob.batch_heads * -(-prob.headdim // walk.get("BP"))
    s = dispatch.segments(nchunks, walks, sms * (walk.occupancy or 1), _SEGMENTS)
    if s < 2:
        return None
    return s, state, _launch_config("segment_pass", prob), walk


def _run_segments(plan, x, z, B, C, dt, A32, bias32, init32, D32, chunk_size, dt_softplus, dt_limit, stream=None):
    """The segmented walk: the batch viewed as b*S segments (row b*S + s: segment s of sample b, whole
    chunks, so a free reshape), the cumsum on that view, pass 1 (each segment's end state and decay),
    pass 2 (each segment's entering state, and the final state), pass 3 (the walk on every segment
    from its entering state). -> (out, final_states)."""
    nseg, state_cfg, pass_cfg, walk_cfg = plan
    b, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    rows, lseg = b * nseg, l // nseg
    xs, Bs, Cs = x.view(rows, lseg, h, p), B.view(rows, lseg, g, n), C.view(rows, lseg, g, n)
    zs = z.view(rows, lseg, h, p) if z is not None else None
    cs, dtc = _run_cumsum(dt.view(rows, lseg, h), A32, bias32, chunk_size, dt_softplus, dt_limit, stream)
    cols = -(-p // state_cfg.get("BP")) * -(-n // state_cfg.get("BN"))
    ends = torch.empty(rows, h, p, n, device=x.device, dtype=torch.float32)
    decay = torch.empty(rows, h, cols, device=x.device, dtype=torch.float32)
    _launch((cols, h, rows), _kernels().segment_state_kernel, state_cfg,
            (xs, Bs, dtc, cs, ends, decay, lseg // chunk_size, h // g), x.device, stream)
    entering = torch.empty_like(ends)
    final = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
    pcols = -(-p // pass_cfg.get("BP")) * -(-n // pass_cfg.get("BN"))
    _launch((pcols, h, b), _kernels().segment_pass_kernel, pass_cfg,
            (ends, decay, init32 if init32 is not None else final, entering, final, nseg, int(init32 is not None)),
            x.device, stream)
    y, _ = _run_walk(walk_cfg, xs, zs, Bs, Cs, dtc, cs, entering, D32, stream)
    return y.view(b, l, h, p), final


def _run_varlen(x, B, dtc, cs, states, cu32, chunk_size):
    _, l, h, p = x.shape
    g, n = B.shape[2], B.shape[3]
    nseq = cu32.numel() - 1
    out = torch.empty(nseq, h, p, n, device=x.device, dtype=states.dtype)
    vprob = Problem(_TORCH_DTYPES[x.dtype], p, n, chunk_size)
    cfg = _config("varlen_state", vprob)
    _record("varlen_state", vprob)
    grid = (nseq * h, -(-p // cfg.get("BP")) * -(-n // cfg.get("BN")), 1)
    args = (x, B, dtc, cs, states, cu32, out, chunk_size, h // g)
    _launch(grid, _kernels().varlen_state_kernel, cfg, args, x.device)
    return out


def _on(device: torch.device):
    """torch.cuda.device(device), or no context where it is already the current device (entering one
    costs host time on every call; x on another GPU still gets its own)."""
    if device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


_DUMMIES: dict = {}


def _dummy_int(device):
    if device not in _DUMMIES:
        _DUMMIES[device] = torch.zeros(1, 16, dtype=torch.int32, device=device)
    return _DUMMIES[device]


def _batch_part(b0: int, b1: int, b: int):
    """t -> rows b0:b1 of a batch-first tensor t (None stays None). The whole batch passes as it is:
    slicing a tensor costs host time, paid per tensor and per launch."""
    if (b0, b1) == (0, b):
        return lambda t: t
    return lambda t: None if t is None else t[b0:b1]


def _batch_slices(b: int, per_batch: Sequence[int]) -> list[tuple[int, int]]:
    """Batch ranges whose every tensor stays within int32 indexing."""
    worst = max(per_batch)
    if worst > INT32_MAX:
        raise _bad("x", f"at most {INT32_MAX} elements per batch element in every tensor "
                        f"(kernels index in int32)", f"{worst}")
    step = max(1, INT32_MAX // worst)
    return [(i, min(b, i + step)) for i in range(0, b, step)]


# --------------------------------------------------------------------------- public API

_INFO = None   # kernels.cutile.INFO, once _check_forward first looks it up


def _check_forward(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
                   dt_limit, return_final_states, return_varlen_states) -> None:
    """Every argument check of ssd_forward that looks at the arguments alone: the contract, INFO's
    declarations, then cutile's own (whether a GPU is there is _require_cuda's, checked on every call)."""
    global _INFO
    from kernels.registry import check_call, lookup  # noqa: PLC0415
    if _INFO is None:   # INFO lives in the package __init__, which imports this module: the registry hands it over
        _INFO = lookup("cutile")
    check_call(_INFO, x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
               seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_softplus=dt_softplus, dt_limit=dt_limit,
               return_final_states=return_final_states, return_varlen_states=return_varlen_states)
    _dtype_name("x", x)
    if dt.dtype not in (torch.float32, x.dtype):
        raise _bad("dt", f"float32 or x's dtype {x.dtype}", dt.dtype)
    if A.dtype != torch.float32:
        raise _bad("A", "float32", A.dtype)
    for name, t in (("D", D), ("dt_bias", dt_bias), ("initial_states", initial_states)):
        _check_small(name, t, x.dtype)
    _check_dims(x.shape[3], B.shape[3], chunk_size)


_PASSED: dict = {}   # _passed_key -> True: argument metadata whose every check passed in this process
_PASSED_MAX = 256    # distinct call signatures kept (cleared when full: a cache, not a record)


def _passed_key(x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus,
                dt_limit, return_final_states, return_varlen_states):
    """All that _check_forward's verdict depends on, for calls whose checks read no tensor values: each
    tensor's shape, dtype and device, and the plain arguments with their exact types. None where a check
    reads values (seq_idx, cu_seqlens) or an argument is not of a plain type: that call is checked in
    full, every time. Host time: the checks cost about 40 us per forward, this key about 8 (2-core CPU)."""
    if seq_idx is not None or cu_seqlens is not None or type(chunk_size) is not int:
        return None
    flags = (dt_softplus, return_final_states, return_varlen_states)
    if any(type(f) is not bool for f in flags):
        return None
    if type(dt_limit) not in (tuple, list) or len(dt_limit) != 2 or any(type(v) not in (int, float) for v in dt_limit):
        return None
    meta = []
    for t in (x, dt, A, B, C, D, z, dt_bias, initial_states):
        if t is None:
            meta.append(None)
        elif type(t) is torch.Tensor:
            meta.append((t.shape, t.dtype, t.device))
        else:
            return None
    return (chunk_size, flags, type(dt_limit), tuple(dt_limit), tuple(meta))


def ssd_forward(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                return_final_states=False, return_varlen_states=False):
    """mamba_chunk_scan_combined on cuTile: returns out, (out, final_states), (out, varlen_states)
    or (out, final_states, varlen_states). Shapes: x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n),
    D (h) or (h,p), z like x, dt_bias (h), initial_states (b,h,p,n), seq_idx (b,l),
    cu_seqlens (nseq+1) with batch 1. out and varlen_states are x.dtype; final_states float32."""
    args = (x, dt, A, B, C, chunk_size, D, z, dt_bias, initial_states, seq_idx, cu_seqlens, dt_softplus, dt_limit,
            return_final_states, return_varlen_states)
    key = _passed_key(*args)
    if key is None or key not in _PASSED:
        _check_forward(*args)
        if key is not None:
            if len(_PASSED) >= _PASSED_MAX:
                _PASSED.clear()
            _PASSED[key] = True
    _require_cuda(x)     # not cached: whether torch sees a GPU is not in the key (tests stub it)
    b, l, h, p = x.shape
    n = B.shape[3]
    nchunks = -(-l // chunk_size)
    lpad = nchunks * chunk_size
    with _on(x.device):
        x, B, C = _dense(x), _dense(B), _dense(C)
        z = _dense(z) if z is not None else None
        dt = _dense(dt)
        A32 = _dense(A.float())
        bias32 = _dense(dt_bias.float()) if dt_bias is not None else None
        D32 = _dense(D.float().reshape(h, -1)) if D is not None else None   # (h, 1) or (h, p): no host-side expand
        init32 = _dense(initial_states.float()) if initial_states is not None else None
        seq32 = _dense(seq_idx.to(torch.int32)) if seq_idx is not None else None
        per_batch = [l * h * p, l * B.shape[2] * n, h * lpad, nchunks * h * p * n]
        slices = _batch_slices(b, per_batch)
        if len(slices) > 1:   # one slice (the usual case) returns the kernels' own outputs
            out = torch.empty_like(x)
            final = torch.empty(b, h, p, n, device=x.device, dtype=torch.float32)
        varlen = None
        stream = torch.cuda.current_stream(x.device)   # once: each lookup costs host time
        for b0, b1 in slices:
            part = _batch_part(b0, b1, b)
            prob = _problem(part(x), B, chunk_size, seq32)     # once: the choices below read it
            # the walks keep the chunk states on chip; varlen_states need them in memory
            segs = None if return_varlen_states else _segment_plan(prob, nchunks, _sm_count(x.device))
            if not return_varlen_states:
                _record_segment_row(prob, segs)
            if segs is not None:
                _record("segment_pass", prob)
                _record("chunk_walk", dataclasses.replace(prob, segmented=True))
                y, fin = _run_segments(segs, part(x), part(z), part(B), part(C), part(dt), A32, bias32, part(init32),
                                       D32, chunk_size, dt_softplus, dt_limit, stream)
                if len(slices) == 1:
                    out, final = y, fin
                else:
                    out[b0:b1].copy_(y)
                    final[b0:b1].copy_(fin)
                continue
            cs, dtc = _run_cumsum(part(dt), A32, bias32, chunk_size, dt_softplus, dt_limit, stream)
            walk = None if return_varlen_states else _walk_config(prob)
            if not return_varlen_states:
                _record("chunk_walk", prob)   # a walk row, or "otherwise: chunk_state and chunk_scan"
            if walk is not None:
                y, fin = _run_walk(walk, part(x), part(z), part(B), part(C), dtc, cs, part(init32), D32, stream)
            else:
                states, fin = _run_state(part(x), part(B), dtc, cs, part(init32), part(seq32), chunk_size,
                                         x.dtype, stream, prob)
                y = _run_scan(part(x), part(z), part(B), part(C), dtc, cs, states, D32, part(seq32), chunk_size,
                              stream, prob)
            if len(slices) == 1:
                out, final = y, fin
            else:
                out[b0:b1].copy_(y)
                final[b0:b1].copy_(fin)
            if return_varlen_states:
                # Each packed sequence starts from zero (initial_states belong to sequence 0): the
                # states come from a pass whose seq_idx is derived from cu_seqlens. With the usual
                # call (seq_idx matching cu_seqlens) that is the pass above; otherwise run it again.
                cu32 = _dense(cu_seqlens.to(device=x.device, dtype=torch.int32))
                derived = torch.bucketize(torch.arange(l, device=x.device, dtype=torch.int32),
                                          cu32[1:], right=True).to(torch.int32).reshape(1, l)
                derived = derived - derived[:, :1]   # token 0's sequence is 0 (empty ones may precede it)
                if seq32 is None or not torch.equal(seq32, derived):
                    states, _ = _run_state(x, B, dtc, cs, init32, _dense(derived), chunk_size, x.dtype)
                varlen = _run_varlen(x, B, dtc, cs, states, cu32, chunk_size)
    return unpack_returns(out, final, varlen, return_final_states, return_varlen_states)


def _check_chunked(name: str, t, shape: tuple) -> None:
    if not isinstance(t, torch.Tensor):
        raise _bad(name, "a torch.Tensor", type(t).__name__)
    if tuple(t.shape) != tuple(shape):
        raise _bad(name, f"shape {tuple(shape)}", f"shape {tuple(t.shape)}")


def _check_int32(**named) -> None:
    """Stage entry points do not split the batch: every tensor must fit int32 indexing."""
    for name, t in named.items():
        count = t.numel() if isinstance(t, torch.Tensor) else t
        if count is not None and count > INT32_MAX:
            raise _bad(name, f"at most {INT32_MAX} elements (kernels index in int32; ssd_forward splits "
                             f"the batch, the stage entry points do not)", f"{count}")


def _check_x(x) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        raise _bad("x", "a 4-dim tensor (batch, seqlen, nheads, headdim)", getattr(x, "shape", type(x).__name__))
    if min(x.shape) < 1:
        raise _bad("x", "every dimension >= 1", tuple(x.shape))


def _same_device(x: torch.Tensor, **named) -> None:
    for name, t in named.items():
        if t is not None and t.device != x.device:
            raise _bad(name, f"a tensor on {x.device}", f"device {t.device}")


def chunk_cumsum(dt, A, chunk_size, dt_bias=None, dt_softplus=False, dt_limit=(0.0, float("inf"))):
    """dt (b,l,h), A (h) -> (dA_cumsum, dt_out), both float32 (b, h, nchunks, chunk_size);
    dA_cumsum in natural log; past seqlen dt_out = 0 and dA_cumsum repeats its last value."""
    if not isinstance(dt, torch.Tensor) or dt.dim() != 3:
        raise _bad("dt", "a 3-dim tensor (batch, seqlen, nheads)", getattr(dt, "shape", type(dt).__name__))
    b, l, h = dt.shape
    if min(dt.shape) < 1:
        raise _bad("dt", "every dimension >= 1", tuple(dt.shape))
    _dtype_name("dt", dt)
    _check_chunked("A", A, (h,))
    if A.dtype != torch.float32:
        raise _bad("A", "float32", A.dtype)
    if dt_bias is not None:
        _check_chunked("dt_bias", dt_bias, (h,))
        # any of the three: the forward takes dt_bias in float32 or x's dtype, and a float32 dt beside
        # a 16-bit x is common; this stage sees dt alone, not x, so it cannot hold dt_bias to x's dtype
        _dtype_name("dt_bias", dt_bias)
    if chunk_size not in CHUNK_SIZES:
        raise _bad("chunk_size", f"one of {CHUNK_SIZES}", chunk_size)
    _same_device(dt, A=A, dt_bias=dt_bias)
    _check_int32(dt=dt, dA_cumsum=b * h * -(-l // chunk_size) * chunk_size)
    _require_cuda(dt)
    with _on(dt.device):
        bias32 = _dense(dt_bias.float()) if dt_bias is not None else None
        cs, dtc = _run_cumsum(_dense(dt), _dense(A.float()), bias32, chunk_size, dt_softplus, dt_limit)
    nchunks = cs.shape[-1] // chunk_size
    return (cs * LN2).view(b, h, nchunks, chunk_size), dtc.view(b, h, nchunks, chunk_size)


def _log2_cs(dA_cumsum):
    b, h, c, L = dA_cumsum.shape
    return _dense((dA_cumsum.float() * LOG2E).reshape(b, h, c * L))


def chunk_state_and_passing(B, x, dt_out, dA_cumsum, initial_states=None, seq_idx=None):
    """Kernel 2 (chunk states fused with the scan across chunks).
    -> (states_in (b, c, h, p, n) in x.dtype: the state entering each chunk, final_states (b,h,p,n) fp32)."""
    _check_x(x)
    b, l, h, p = x.shape
    _dtype_name("x", x)
    if not isinstance(B, torch.Tensor) or B.dim() != 4 or B.shape[:2] != x.shape[:2] or h % B.shape[2]:
        raise _bad("B", f"(b, l, g, n) with b, l = {b}, {l} and g dividing {h}", getattr(B, "shape", None))
    if B.dtype != x.dtype:
        raise _bad("B", f"x's dtype {x.dtype}", B.dtype)
    n = B.shape[3]
    L, c = _check_cumsum_outputs(dt_out, dA_cumsum, b, l, h, p, n)
    if initial_states is not None:
        _check_chunked("initial_states", initial_states, (b, h, p, n))
        _check_small("initial_states", initial_states, x.dtype)
    if seq_idx is not None:
        _check_chunked("seq_idx", seq_idx, (b, l))
    _same_device(x, B=B, dt_out=dt_out, dA_cumsum=dA_cumsum, initial_states=initial_states, seq_idx=seq_idx)
    _check_int32(x=x, B=B, dA_cumsum=dA_cumsum, states_in=b * c * h * p * n)
    _require_cuda(x)
    with _on(x.device):
        return _run_state(_dense(x), _dense(B), _dense(dt_out.float().reshape(b, h, c * L)), _log2_cs(dA_cumsum),
                          _dense(initial_states.float()) if initial_states is not None else None,
                          _dense(seq_idx.to(torch.int32)) if seq_idx is not None else None, L, x.dtype)


def _check_cumsum_outputs(dt_out, dA_cumsum, b, l, h, p, n) -> tuple[int, int]:
    """Kernel 1's outputs as later stages take them: both (b, h, nchunks, chunk_size). -> (L, nchunks)."""
    if not isinstance(dA_cumsum, torch.Tensor) or dA_cumsum.dim() != 4:
        raise _bad("dA_cumsum", "(b, h, nchunks, chunk_size)", getattr(dA_cumsum, "shape", None))
    L = dA_cumsum.shape[-1]
    _check_dims(p, n, L)
    c = -(-l // L)
    _check_chunked("dA_cumsum", dA_cumsum, (b, h, c, L))
    _check_chunked("dt_out", dt_out, (b, h, c, L))
    return L, c


def chunk_scan(B, C, x, dt_out, dA_cumsum, states_in, D=None, z=None, seq_idx=None):
    """Kernel 3: out (b,l,h,p) in x.dtype from the chunk quantities. states_in (b,c,h,p,n) is used
    in x.dtype (rounded here if given in float32), as the fused pipeline stores it."""
    _check_x(x)
    b, l, h, p = x.shape
    _dtype_name("x", x)
    for name, t in (("B", B), ("C", C)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.shape[:2] != x.shape[:2] or h % t.shape[2]:
            raise _bad(name, f"(b, l, g, n) with b, l = {b}, {l} and g dividing {h}", getattr(t, "shape", None))
        if t.dtype != x.dtype:
            raise _bad(name, f"x's dtype {x.dtype}", t.dtype)
    if C.shape != B.shape:
        raise _bad("C", f"B's shape {tuple(B.shape)}", tuple(C.shape))
    n = B.shape[3]
    L, c = _check_cumsum_outputs(dt_out, dA_cumsum, b, l, h, p, n)
    _check_chunked("states_in", states_in, (b, c, h, p, n))
    if states_in.dtype not in (torch.float32, x.dtype):
        raise _bad("states_in", f"float32 or x's dtype {x.dtype}", states_in.dtype)
    if D is not None:
        if tuple(D.shape) not in ((h,), (h, p)):
            raise _bad("D", f"shape ({h},) or ({h}, {p})", tuple(D.shape))
        _check_small("D", D, x.dtype)
    if z is not None:
        _check_chunked("z", z, (b, l, h, p))
        if z.dtype != x.dtype:
            raise _bad("z", f"x's dtype {x.dtype}", z.dtype)
    if seq_idx is not None:
        _check_chunked("seq_idx", seq_idx, (b, l))
    _same_device(x, B=B, C=C, dt_out=dt_out, dA_cumsum=dA_cumsum, states_in=states_in, D=D, z=z, seq_idx=seq_idx)
    _check_int32(x=x, B=B, dA_cumsum=dA_cumsum, states_in=states_in)
    _require_cuda(x)
    with _on(x.device):
        D32 = _dense(D.float().reshape(h, -1)) if D is not None else None
        return _run_scan(_dense(x), _dense(z) if z is not None else None, _dense(B), _dense(C),
                         _dense(dt_out.float().reshape(b, h, c * L)), _log2_cs(dA_cumsum),
                         _dense(states_in.to(x.dtype)), D32,
                         _dense(seq_idx.to(torch.int32)) if seq_idx is not None else None, L)


STAGES = {
    "chunk_cumsum": chunk_cumsum,
    "chunk_state_and_passing": chunk_state_and_passing,
    "chunk_scan": chunk_scan,
}


# --------------------------------------------------------------------------- what costs a compile

def compile_key(problem) -> tuple:
    """KernelInfo.compile_key of cutile: the JIT's specialization of every launch's arrays
    (registry.jit_specialization_key: dtypes, constants, divisibility of sizes and strides, absent
    tensors) and the Config of each kernel that `ssd_forward` launches for `problem` (tiles, FAST,
    head pairs, hints: other constants, another compile). Problems with equal keys launch the same
    kernel signatures (tests/test_compile_classes.py checks it against the recorded launches).
    Shapes only: no tensor, no GPU."""
    dt_dtype = problem.dtype if problem.dt_dtype == "input" else "float32"
    configs = [_launch_config("chunk_cumsum", Problem(dt_dtype, 0, 0, problem.chunk_size))]
    prob = Problem(problem.dtype, problem.headdim, problem.dstate, problem.chunk_size,
                   problem.batch * problem.nheads,
                   aligned=problem.seqlen % problem.chunk_size == 0 and not problem.uses_seq_idx,
                   seqlen=problem.seqlen)
    nchunks = -(-problem.seqlen // problem.chunk_size)
    segs = None if problem.varlen else _segment_plan(prob, nchunks, _sm_count(None))
    walk = None if problem.varlen or segs is not None else _walk_config(prob)
    if segs is not None:
        # the segment views: b*S rows of seqlen / S tokens (their sizes' classes are other compiles)
        nseg = segs[0]
        configs += [("segments", nseg, (problem.batch * nseg) % 16 == 0, (problem.seqlen // nseg) % 16 == 0,
                     (nchunks // nseg) % 16 == 0), *segs[1:]]
    elif walk is not None:
        configs.append(walk)
    else:
        configs += [_launch_config("chunk_state", prob), _scan_launch_config(prob, problem.nheads, problem.ngroups)]
    if problem.varlen:
        configs.append(_config("varlen_state", Problem(problem.dtype, problem.headdim, problem.dstate,
                                                       problem.chunk_size)))
    # D, dt_bias and initial states reach the kernels in float32 whatever dtype they came in
    return jit_specialization_key(problem, ignore=HOST_CONVERTED) + tuple(configs)


HOST_CONVERTED = frozenset({"states_input_dtype", "params_input_dtype"})
