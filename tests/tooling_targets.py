"""Implementations with a planted bug, for the tests of the reporting/fuzzing tooling (test_reporting.py).

`broken_tail` is torch-ref except that the last token of y is off by 1.0: prop_matches_oracle fails
on the very first example (so the tooling tests do not depend on how fast the machine finds it),
while prop_causality, which never looks at the last token, still passes. Used as
`--impl tests.tooling_targets:broken_tail`.
"""
from __future__ import annotations

from kernels.torch_ref import INFO, ssd_forward


def broken_tail(**kwargs):
    out = ssd_forward(**kwargs)
    y, rest = (out[0], out[1:]) if isinstance(out, tuple) else (out, ())
    y = y.clone()
    y[:, -1] += 1.0
    return (y, *rest) if rest else y


broken_tail.ssd_info = INFO.replace(name="broken-tail", stages=None,
                                    notes="torch-ref with y[:, -1] += 1 (a planted bug)")
