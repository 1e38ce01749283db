"""The argument contract of `mamba_chunk_scan_combined`, checked once for every implementation.

Every implementation (and every oracle) calls `check_ssd_args` first, so a bad argument gets the
same clear error whichever implementation is under test:

    x (b, l, h, p)   dt (b, l, h)   A (h)   B, C (b, l, g, n) with g | h
    D (h) or (h, p)  z like x       dt_bias (h)   initial_states (b, h, p, n)
    seq_idx (b, l) integer, non-decreasing from 0    cu_seqlens (num_seqs + 1) integer

With cu_seqlens, seq_idx must change exactly where cu_seqlens starts a (non-empty) sequence, and
initial_states may instead hold one state per packed sequence, (num_seqs, h, p, n) (vLLM's and
FlashInfer's convention, option `varlen_initial_states`; batch 1 and seq_idx, as for varlen states).
"""
from __future__ import annotations

import math

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


class SSDArgumentError(ValueError):
    """A bad argument to an SSD forward; the message names the argument and what was expected."""


def _fail(name: str, expected: str, got: str) -> None:
    raise SSDArgumentError(f"{name}: expected {expected}, got {got}")


def _shape(t: torch.Tensor) -> str:
    return f"shape {tuple(t.shape)}"


def _tensor(name: str, t, expected_shape: tuple, *, floating: bool = True) -> None:
    if not isinstance(t, torch.Tensor):
        _fail(name, "a torch.Tensor", type(t).__name__)
    if t.dim() != len(expected_shape):
        _fail(name, f"{len(expected_shape)} dims {expected_shape}", f"{t.dim()} dims, {_shape(t)}")
    if tuple(t.shape) != tuple(expected_shape):
        _fail(name, f"shape {tuple(expected_shape)}", _shape(t))
    if floating and t.dtype not in FLOAT_DTYPES:
        _fail(name, "a floating dtype (float32, float16, bfloat16, float64)", str(t.dtype))
    if not floating and t.dtype not in (torch.int32, torch.int64):
        _fail(name, "an integer dtype (int32 or int64)", str(t.dtype))


def check_ssd_args(x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
                   seq_idx=None, cu_seqlens=None, dt_limit=(0.0, math.inf),
                   return_varlen_states=False, return_states_dtype=None) -> None:
    """Raise SSDArgumentError naming the first argument that breaks the contract."""
    if return_states_dtype is not None and return_states_dtype not in FLOAT_DTYPES:
        _fail("return_states_dtype", "None or a floating torch dtype (float32, float16, bfloat16, float64)",
              repr(return_states_dtype))
    if not isinstance(x, torch.Tensor) or x.dim() != 4:
        _fail("x", "a 4-dim tensor (batch, seqlen, nheads, headdim)",
              _shape(x) if isinstance(x, torch.Tensor) else type(x).__name__)
    b, l, h, p = x.shape
    if x.dtype not in FLOAT_DTYPES:
        _fail("x", "a floating dtype", str(x.dtype))
    if min(b, l, h, p) < 1:
        _fail("x", "every dimension >= 1", _shape(x))
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        _fail("chunk_size", "a positive int", repr(chunk_size))
    if not isinstance(B, torch.Tensor) or B.dim() != 4:
        _fail("B", "a 4-dim tensor (batch, seqlen, ngroups, dstate)",
              _shape(B) if isinstance(B, torch.Tensor) else type(B).__name__)
    g, n = B.shape[2], B.shape[3]
    if g < 1 or h % g != 0:
        _fail("B", f"ngroups (dim 2) dividing nheads={h}", f"ngroups={g}")
    _tensor("dt", dt, (b, l, h))
    _tensor("A", A, (h,))
    _tensor("B", B, (b, l, g, n))
    _tensor("C", C, (b, l, g, n))
    if D is not None:
        if not isinstance(D, torch.Tensor) or tuple(D.shape) not in ((h,), (h, p)):
            _fail("D", f"shape ({h},) or ({h}, {p})",
                  _shape(D) if isinstance(D, torch.Tensor) else type(D).__name__)
        _tensor("D", D, tuple(D.shape))
    if z is not None:
        _tensor("z", z, (b, l, h, p))
    if dt_bias is not None:
        _tensor("dt_bias", dt_bias, (h,))
    if initial_states is not None:
        _check_initial_states(initial_states, (b, h, p, n), cu_seqlens, seq_idx)
    if seq_idx is not None:
        _tensor("seq_idx", seq_idx, (b, l), floating=False)
    if not (isinstance(dt_limit, (tuple, list)) and len(dt_limit) == 2):
        _fail("dt_limit", "a pair (lo, hi)", repr(dt_limit))
    lo, hi = float(dt_limit[0]), float(dt_limit[1])
    if not (lo <= hi) or math.isnan(lo) or math.isnan(hi):
        _fail("dt_limit", "lo <= hi, no NaN", repr(dt_limit))
    if return_varlen_states:
        if cu_seqlens is None:
            _fail("cu_seqlens", "a tensor when return_varlen_states=True", "None")
        if seq_idx is None:
            _fail("seq_idx", "a tensor when return_varlen_states=True (mamba_ssm resets states only where "
                  "seq_idx changes, so varlen states without it mix sequences)", "None")
        if b != 1:
            _fail("x", "batch == 1 with return_varlen_states (sequences are packed along seqlen)",
                  f"batch={b}")
    if cu_seqlens is not None:
        if not isinstance(cu_seqlens, torch.Tensor) or cu_seqlens.dim() != 1 or cu_seqlens.numel() < 2:
            _fail("cu_seqlens", "a 1-dim tensor of num_seqs + 1 offsets",
                  _shape(cu_seqlens) if isinstance(cu_seqlens, torch.Tensor) else type(cu_seqlens).__name__)
        _tensor("cu_seqlens", cu_seqlens, tuple(cu_seqlens.shape), floating=False)
    tensors = {"x": x, "dt": dt, "A": A, "B": B, "C": C, "D": D, "z": z, "dt_bias": dt_bias,
               "initial_states": initial_states, "seq_idx": seq_idx, "cu_seqlens": cu_seqlens}
    for name, t in tensors.items():
        if t is not None and t.device != x.device:
            _fail(name, f"a tensor on x's device {x.device}", f"device {t.device}")
    for name in ("B", "C", "z"):
        t = tensors[name]
        if t is not None and t.dtype != x.dtype:
            _fail(name, f"x's dtype {x.dtype}", str(t.dtype))
    # Value checks need a host sync; they guard index math that would otherwise read out of bounds.
    if seq_idx is not None and l > 0:
        s = seq_idx.detach()
        if int(s[:, 0].min()) != 0 or int(s[:, 0].max()) != 0:
            _fail("seq_idx", "every row to start at 0", f"first column {s[:, 0].tolist()}")
        if l > 1 and bool((s[:, 1:] < s[:, :-1]).any()):
            _fail("seq_idx", "non-decreasing rows", "a decreasing step")
    if cu_seqlens is not None:
        c = cu_seqlens.detach().cpu()
        if int(c[0]) != 0 or int(c[-1]) != l or bool((c[1:] < c[:-1]).any()):
            _fail("cu_seqlens", f"non-decreasing offsets from 0 to seqlen={l}", str(c.tolist()))
        if seq_idx is not None:
            _check_agreement(seq_idx, c)


def _check_initial_states(initial_states, row_shape: tuple, cu_seqlens, seq_idx) -> None:
    """(b, h, p, n), or with cu_seqlens one state per packed sequence (num_seqs, h, p, n)."""
    b, h, p, n = row_shape
    num_seqs = cu_seqlens.numel() - 1 if isinstance(cu_seqlens, torch.Tensor) and cu_seqlens.dim() == 1 else None
    got = initial_states.shape if isinstance(initial_states, torch.Tensor) else None
    if num_seqs is None or got is None or got[0] == b or got[1:] != (h, p, n):
        _tensor("initial_states", initial_states, row_shape)
        return
    if got[0] != num_seqs:
        _fail("initial_states", f"shape {row_shape} (one per row) or ({num_seqs}, {h}, {p}, {n}) "
              f"(one per cu_seqlens sequence)", _shape(initial_states))
    if b != 1:
        _fail("x", "batch == 1 with one initial state per cu_seqlens sequence", f"batch={b}")
    if seq_idx is None:
        _fail("seq_idx", "a tensor with one initial state per cu_seqlens sequence (states reset only "
              "where seq_idx changes)", "None")
    _tensor("initial_states", initial_states, (num_seqs, h, p, n))


def _check_agreement(seq_idx: torch.Tensor, cu: torch.Tensor) -> None:
    """seq_idx must change exactly where cu_seqlens starts a non-empty sequence (labels are free)."""
    l = seq_idx.shape[1]
    starts = sorted({int(v) for v in cu.tolist()} - {0, l})
    s = seq_idx.detach().cpu()
    for row in range(s.shape[0]):
        changes = (torch.nonzero(s[row, 1:] != s[row, :-1]).flatten() + 1).tolist()
        if changes != starts:
            _fail("seq_idx", f"to change exactly where cu_seqlens starts a sequence (positions {starts}; "
                  f"cu_seqlens={cu.tolist()})", f"changes at {changes[:16]}{' ...' if len(changes) > 16 else ''}"
                  f"{f' in row {row}' if s.shape[0] > 1 else ''}")


def unpack_returns(out, final_states, varlen_states, return_final_states, return_varlen_states):
    """mamba_ssm's return convention: out, (out, final), (out, varlen) or (out, final, varlen)."""
    if not return_final_states and not return_varlen_states:
        return out
    if not return_varlen_states:
        return out, final_states
    if not return_final_states:
        return out, varlen_states
    return out, final_states, varlen_states
