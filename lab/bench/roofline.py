"""Bytes, FLOPs and floors of one SSD forward: the two numbers METHOD.md asks for before timing.

Names follow mamba_ssm: x (b,l,h,p), dt (b,l,h), A (h), B, C (b,l,g,n), D (h), y (b,l,h,p).

* I/O floor: every input read once and the output written once, over the measured copy bandwidth
  (a device-to-device copy, bytes read + written): bytes(x, dt, A, B, C, D, y) / copy_bw.
* states floor: the I/O floor plus one write and one read of the chunk states, what a design that
  passes states between kernels through memory moves at least: 2 * b * nchunks * h * p * n * state bytes
  (state bytes: 2 for states kept in bf16/fp16, 4 for fp32), with the implementation's chunk size.
* FLOPs: the matrix products of the chunked algorithm, dense tiles (the causal half of the
  intra-chunk tiles is counted, as the kernels compute it), per batch and chunk of length L:
      heads  x (2*L*p*n  [chunk states: x^T (B * decay)]
               + 2*L*p*n [inter-chunk output: C @ state]
               + 2*L*L*p [intra-chunk output: scores @ (dt x)])
    + groups x  2*L*L*n  [C B^T, once per group]
  Elementwise work (decays, cumsum, state passing) is left out: it is not tensor-core work.
"""
from __future__ import annotations

import math

DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float64": 8}


def _get(shape, name):
    return shape[name] if isinstance(shape, dict) else getattr(shape, name)


def _dims(shape):
    return tuple(_get(shape, k) for k in ("batch", "seqlen", "nheads", "headdim", "dstate", "ngroups"))


def nchunks(seqlen: int, chunk: int) -> int:
    return math.ceil(seqlen / chunk)


def io_bytes(shape) -> int:
    """Bytes of x, dt, A, B, C, D read once and y written once."""
    b, l, h, p, n, g = _dims(shape)
    e, edt = DTYPE_BYTES[_get(shape, "dtype")], DTYPE_BYTES[_get(shape, "dt_dtype")]
    x = y = b * l * h * p * e
    dt = b * l * h * edt
    bc = 2 * b * l * g * n * e
    a = d = h * 4
    return x + y + dt + bc + a + d


def input_bytes(shape) -> int:
    """Bytes of the inputs alone (what must exceed L2 for a cold-cache timing)."""
    b, l, h, p, _, _ = _dims(shape)
    return io_bytes(shape) - b * l * h * p * DTYPE_BYTES[_get(shape, "dtype")]


def state_bytes(shape, chunk: int, state_elem_bytes: int) -> int:
    """b * nchunks * h * p * n * bytes: the chunk states, once."""
    b, l, h, p, n, _ = _dims(shape)
    return b * nchunks(l, chunk) * h * p * n * state_elem_bytes


def flops(shape, chunk: int) -> int:
    b, l, h, p, n, g = _dims(shape)
    L = chunk
    per_chunk = h * (4 * L * p * n + 2 * L * L * p) + g * 2 * L * L * n
    return b * nchunks(l, chunk) * per_chunk


def floors_ms(shape, chunk: int, state_elem_bytes: int, copy_GBps: float) -> tuple[float, float]:
    """(I/O floor, I/O + one write and one read of the chunk states) in ms at copy_GBps (1e9 B/s)."""
    io = io_bytes(shape)
    st = state_bytes(shape, chunk, state_elem_bytes)
    per_ms = copy_GBps * 1e6   # bytes per ms
    return io / per_ms, (io + 2 * st) / per_ms


def metrics(shape, chunk: int, ms: float, state_elem_bytes: int, copy_GBps: float | None,
            matmul_TFLOPs: float | None) -> dict:
    """Achieved rates and floors for one timed result; fractions against the measured ceilings."""
    f = flops(shape, chunk)
    io = io_bytes(shape)
    st = state_bytes(shape, chunk, state_elem_bytes)
    out = {"flops": f, "io_bytes": io, "state_bytes": st,
           "TFLOPs": f / (ms * 1e9), "io_GBps": io / (ms * 1e6), "io_states_GBps": (io + 2 * st) / (ms * 1e6)}
    if copy_GBps:
        fio, fst = floors_ms(shape, chunk, state_elem_bytes, copy_GBps)
        out.update(floor_io_ms=fio, floor_states_ms=fst, x_floor_io=ms / fio, x_floor_states=ms / fst,
                   frac_copy=out["io_GBps"] / copy_GBps)
    if matmul_TFLOPs:
        out["frac_matmul"] = out["TFLOPs"] / matmul_TFLOPs
    return out
