"""Where the suite lives and how a user's revision becomes importable from any directory.

The suite runs from its checkout (ROOT: tests/, conftest.py, tolerances.toml), while a user's
revision is importable from the directory they run ssdcheck in. Both go on sys.path, and on the
PYTHONPATH of the pytest processes ssdcheck starts (xdist workers, the fuzz child, mutant copies).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROPERTY_TESTS = ROOT / "tests" / "test_properties.py"


def make_importable(cwd: Path | None = None) -> None:
    """ROOT first (the suite's own packages win), then the caller's directory, in this process and in
    the environment its children inherit."""
    cwd = Path.cwd() if cwd is None else cwd
    for p in (str(cwd), str(ROOT)):
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(0, p)
    old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in (str(ROOT), str(cwd))]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(cwd), *old])


def absolute_impl(spec: str, cwd: Path | None = None) -> str:
    """A `path/to/file.py:function` spec with its file made absolute, so that it resolves the same in
    a pytest process started elsewhere (the fuzz child runs in ROOT) and in a saved reproducer."""
    from kernels.registry import split_file_spec  # noqa: PLC0415 (kernels imports torch: not for --help)
    in_file = split_file_spec(spec)
    if not in_file:
        return spec
    path, attr = in_file
    base = Path.cwd() if cwd is None else cwd
    return f"{(base / Path(path).expanduser()).resolve()}:{attr}"
