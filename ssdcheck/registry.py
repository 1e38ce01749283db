"""The declarations a kernel team's own module needs, importable wherever ssdcheck is installed:

    from ssdcheck.registry import KernelInfo, check_call

the same objects as the suite's `kernels.registry` (that module, made importable from the installed
suite or the checkout), so a declaration made here is the one the strategies read.
"""
from __future__ import annotations

import sys

from ssdcheck.paths import ROOT

if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))   # after the caller's own entries: `kernels` of the suite, not shadowing theirs

from kernels.registry import ALL_OPTIONS, EXTENSIONS, Backward, Deviation, KernelInfo, check_call  # noqa: E402

__all__ = ["ALL_OPTIONS", "EXTENSIONS", "Backward", "Deviation", "KernelInfo", "check_call"]
