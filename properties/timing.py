"""Where a property check's time goes: inputs, implementation, reference, comparison (per process).

The plugin takes the totals after each test (`take`), so a GPU report says per test whether a slow
property is spending its time in the kernel under test (compiles included), in the float64
reference, in comparing, or in generating inputs. A phase ends with a CUDA synchronize when CUDA is
in use, so asynchronous kernel time is charged to the phase that launched it.
"""
from __future__ import annotations

import time
from contextlib import contextmanager

import torch

_seconds: dict[str, float] = {}


@contextmanager
def phase(name: str):
    t0 = time.perf_counter()
    try:
        yield
    finally:
        if torch.cuda.is_initialized():
            torch.cuda.synchronize()
        _seconds[name] = _seconds.get(name, 0.0) + time.perf_counter() - t0


def take() -> dict[str, float]:
    """The seconds per phase since the last call, and start again from zero."""
    out = dict(_seconds)
    _seconds.clear()
    return out
