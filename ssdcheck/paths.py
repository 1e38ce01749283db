"""Where the suite lives, where its state goes, and how a user's revision becomes importable.

The suite (tests/, conftest.py, tolerances.toml and the packages kernels, oracles, properties, ...)
is ROOT: the checkout, for an editable install or a run from the repository, or the folder
ssdcheck/_suite of an installed wheel (docs/install.md says why it lives there). The user's revision
is importable from the directory they run ssdcheck in. Both go on sys.path, and on the PYTHONPATH of
the pytest processes ssdcheck starts (xdist workers, the fuzz child, mutant copies).

State the runs keep (.ssdcheck-cache: the example database, fuzz output, compiled kernels) goes
under the checkout in a checkout, and under the directory ssdcheck runs in where the suite is
installed (never into site-packages): STATE_ENV tells the pytest plugin, in every process.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
INSTALLED = (PACKAGE / "_suite" / "conftest.py").is_file()
ROOT = PACKAGE / "_suite" if INSTALLED else PACKAGE.parent
PROPERTY_TESTS = ROOT / "tests" / "test_properties.py"
STATE_ENV = "SSDCHECK_STATE_DIR"


def state_root(cwd: Path | None = None) -> Path:
    """The folder .ssdcheck-cache lives in: $SSDCHECK_STATE_DIR, else the checkout, else where you are."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    return (Path.cwd() if cwd is None else cwd) if INSTALLED else ROOT


def make_importable(cwd: Path | None = None) -> None:
    """ROOT first (the suite's own packages win), then the caller's directory, in this process and in
    the environment its children inherit; and the state folder, for the plugin in every process."""
    cwd = Path.cwd() if cwd is None else cwd
    for p in (str(cwd), str(ROOT)):
        if p in sys.path:
            sys.path.remove(p)
        sys.path.insert(0, p)
    old = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p not in (str(ROOT), str(cwd))]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(cwd), *old])
    os.environ[STATE_ENV] = str(state_root(cwd))


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
