"""Implementations with a planted bug, for the tests of the reporting/fuzzing tooling (test_reporting.py).

`broken_tail` is torch-ref except that the last token of y is off by 1.0: prop_matches_oracle fails
on the very first example (so the tooling tests do not depend on how fast the machine finds it),
while prop_causality, which never looks at the last token, still passes. Used as
`--impl tests.tooling_targets:broken_tail`.
`hangs_once` is torch-ref whose first call in the process sleeps (an example that overruns its time
share, for the stall watchdog); `hangs_holding_gil` sleeps in a C call that keeps the GIL (as a
synchronous copy behind a hung kernel does), where only the faulthandler dump can report.
`slow_late_tail` is broken_tail's bug on sequences longer than 60 tokens only (the CPU triage battery's
are 48 and 53, so drawn examples find it and Hypothesis shrinks it), and every call sleeps
$SSDCHECK_TEST_CALL_S seconds (default 0.3): a slow, compile-like shrink, for --ssd-shrink-seconds and -x.
`precompiled` is torch-ref declaring a KernelInfo.precompile whose jobs are (x's dtype, chunk size) and
whose build appends "<pid> <arch> <job>" to $SSDCHECK_TEST_PRECOMPILE_LOG: what the battery precompile
(ssdcheck_plugin/precompile.py) built, and in which process.
"""
from __future__ import annotations

import os

from kernels.registry import Precompile
from kernels.torch_ref import INFO, ssd_forward


def broken_tail(**kwargs):
    out = ssd_forward(**kwargs)
    y, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    y = y.clone()
    y[:, -1] += 1.0
    return (y, *rest) if rest else y


broken_tail.ssd_info = INFO.replace(name="broken-tail", stages=None,
                                    notes="torch-ref with y[:, -1] += 1 (a planted bug)")


def eroded(**kwargs):
    """torch-ref with y scaled by (1 + 4e-7 * N(0, 1)): inside every tolerance, but its fp32 error
    grows a few times over torch-ref's, which the merge gate (--ssd-baseline) must catch."""
    import torch  # noqa: PLC0415
    out = ssd_forward(**kwargs)
    y, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    noise = torch.randn(y.shape, generator=torch.Generator().manual_seed(0)).to(y.device)
    y = (y.float() * (1 + 4e-7 * noise)).to(y.dtype)
    return (y, *rest) if rest else y


eroded.ssd_info = INFO.replace(name="eroded", stages=None, notes="torch-ref plus 4e-7 relative noise on y")


_HUNG = []


def hangs_once(**kwargs):
    """torch-ref; the first call in the process sleeps $SSDCHECK_TEST_HANG_S seconds (default 6)."""
    import os  # noqa: PLC0415
    import time  # noqa: PLC0415
    if not _HUNG:
        _HUNG.append(True)
        time.sleep(float(os.environ.get("SSDCHECK_TEST_HANG_S", "6")))
    return ssd_forward(**kwargs)


hangs_once.ssd_info = INFO.replace(name="hangs-once", stages=None, notes="torch-ref, first call sleeps")


_HUNG_GIL = []


def hangs_holding_gil(**kwargs):
    """torch-ref; the first call in the process sleeps $SSDCHECK_TEST_HANG_S seconds (default 5) inside
    libc's sleep called through ctypes.PyDLL, which does not release the GIL."""
    import ctypes  # noqa: PLC0415
    import os  # noqa: PLC0415
    if not _HUNG_GIL:
        _HUNG_GIL.append(True)
        ctypes.PyDLL(None).sleep(int(os.environ.get("SSDCHECK_TEST_HANG_S", "5")))
    return ssd_forward(**kwargs)


hangs_holding_gil.ssd_info = INFO.replace(name="hangs-holding-gil", stages=None,
                                          notes="torch-ref, first call sleeps holding the GIL")


def slow_late_tail(**kwargs):
    import os  # noqa: PLC0415
    import time  # noqa: PLC0415
    time.sleep(float(os.environ.get("SSDCHECK_TEST_CALL_S", "0.3")))
    return broken_tail(**kwargs) if kwargs["x"].shape[1] > 60 else ssd_forward(**kwargs)


slow_late_tail.ssd_info = INFO.replace(name="slow-late-tail", stages=None,
                                       notes="torch-ref, y[:, -1] += 1 past 60 tokens, every call slow")


def _plan(**kwargs):
    return [(str(kwargs["x"].dtype), kwargs["chunk_size"])]   # problems of one dtype and chunk share a job


def _build(job, arch):
    with open(os.environ["SSDCHECK_TEST_PRECOMPILE_LOG"], "a") as f:
        f.write(f"{os.getpid()} {arch} {job}\n")


def precompiled(**kwargs):
    return ssd_forward(**kwargs)


precompiled.ssd_info = INFO.replace(name="precompiled", precompile=Precompile(plan=_plan, build=_build),
                                    notes="torch-ref with a logging precompile")
