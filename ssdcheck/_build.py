"""The build backend of pyproject.toml (PEP 517/660, in-tree through `backend-path`, no build deps).

A wheel (`pip install .`, `pip install git+URL`, `pip wheel .`) installs one top-level name, the
`ssdcheck` package, and the suite inside it as data: the repository's top-level trees and files that
a run needs (SUITE_TREES, SUITE_FILES) go to ssdcheck/_suite/ with the repository's layout. The
`ssdcheck` command puts that folder on sys.path and runs pytest with it as the rootdir, so the suite's
own absolute imports (`from oracles import ...`, `pytest_plugins = ["ssdcheck_plugin.plugin"]`) work
unchanged, while generic names such as `kernels` never land in site-packages, where a `kernels`
distribution from PyPI already lives. The lab (lab/: GPU probes, races, notes, reports) and the tests
of the repository itself (REPOSITORY_TESTS: the workflow, the README, the tracked tree, this backend)
stay out. docs/install.md has the reasoning.

An editable install (`pip install -e .`, requirements-cpu.txt) exposes the same one name: a .pth file
imports a small finder module that resolves the top-level `ssdcheck` package to the checkout, whose
suite is then the checkout itself. An sdist is refused: build the wheel from the repository.
"""
from __future__ import annotations

import base64
import hashlib
import subprocess
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE_DIR = "ssdcheck/_suite"
# the repository's top-level packages and folders a run imports or reads, and its top-level files
SUITE_TREES = ("kernels", "oracles", "properties", "tests", "mutation", "ssdcheck_plugin", "ssdcheck_fuzz",
               "scripts", "docs")
SUITE_FILES = ("conftest.py", "tolerances.toml", "pyproject.toml")
# tests of the repository, not of a kernel: they read the workflow, the README, git's tracked files or
# this backend's checkout, none of which a wheel has
REPOSITORY_TESTS = ("tests/test_workflow.py", "tests/test_tree_hygiene.py", "tests/test_packaging.py",
                    "tests/test_readme.py")
SKIP_PARTS = {"__pycache__", ".pytest_cache", ".hypothesis", ".ssdcheck-cache"}
SDIST_REFUSAL = ("ssdcheck builds no sdist: install the wheel built from the repository, e.g.\n"
                 "    python3 -m pip install .                      (a checkout)\n"
                 "    python3 -m pip install git+https://...        (its git URL)\n"
                 "    python3 -m pip wheel --no-deps -w dist .      (a wheel file to copy elsewhere)")


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _dist_name(project: dict) -> str:
    return f"{project['name'].replace('-', '_')}-{project['version']}"


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project.get('description', '')}", f"Requires-Python: {project.get('requires-python', '')}"]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    for extra, deps in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {d}; extra == "{extra}"' for d in deps]
    return "\n".join(lines) + "\n"


def _entry_points(project: dict) -> str:
    scripts = project.get("scripts", {})
    return "[console_scripts]\n" + "".join(f"{k} = {v}\n" for k, v in scripts.items())


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dist_info_files(project: dict) -> dict[str, bytes]:
    return {"METADATA": _metadata(project).encode(), "entry_points.txt": _entry_points(project).encode(),
            "WHEEL": b"Wheel-Version: 1.0\nGenerator: ssdcheck._build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}


def _write_wheel(path: Path, files: dict[str, bytes], dist_info: str) -> None:
    record_name = f"{dist_info}/RECORD"
    record = "".join(_record_line(n, d) + "\n" for n, d in files.items()) + f"{record_name},,\n"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(record_name, record)


# ---------------------------------------------------------------------------------------- the wheel's files

def source_files(root: Path = ROOT) -> list[str]:
    """The repository's files as paths relative to root: git's view (tracked, and untracked but not
    ignored) in a checkout, every file elsewhere (an unpacked archive); caches left out."""
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             check=True, capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
    if not files:
        files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    return sorted(f for f in set(files)
                  if not SKIP_PARTS.intersection(Path(f).parts) and not f.endswith(".pyc") and (root / f).is_file())


def wheel_contents(root: Path = ROOT) -> dict[str, bytes]:
    """Archive name -> bytes: the ssdcheck package (less this backend) and the suite under SUITE_DIR."""
    files = {}
    for rel in source_files(root):
        top = rel.split("/", 1)[0]
        if rel.startswith("ssdcheck/") and rel.count("/") == 1 and rel != "ssdcheck/_build.py":
            files[rel] = (root / rel).read_bytes()
        elif (top in SUITE_TREES and "/" in rel or rel in SUITE_FILES) and rel not in REPOSITORY_TESTS:
            files[f"{SUITE_DIR}/{rel}"] = (root / rel).read_bytes()
    return files


# ---------------------------------------------------------------------------------------- the editable finder

FINDER = "_ssdcheck_checkout"
FINDER_SOURCE = '''"""Editable install of ssdcheck (written by ssdcheck/_build.py): `import ssdcheck` finds the
package in the checkout at ROOT; no other top-level name of the checkout is importable through it."""
import importlib.machinery
import sys

ROOT = {root!r}


class SsdcheckCheckoutFinder:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name == "ssdcheck":
            return importlib.machinery.PathFinder.find_spec(name, [ROOT])
        return None


if not any(getattr(f, "__name__", "") == "SsdcheckCheckoutFinder" for f in sys.meta_path):
    sys.meta_path.append(SsdcheckCheckoutFinder)
'''


# ---------------------------------------------------------------------------------------- PEP 517 / 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project = _project()
    dist_info = Path(metadata_directory) / f"{_dist_name(project)}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    for name, data in _dist_info_files(project).items():
        (dist_info / name).write_bytes(data)
    return dist_info.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    base = _dist_name(project)
    files = wheel_contents()
    files.update({f"{base}.dist-info/{name}": data for name, data in _dist_info_files(project).items()})
    wheel = Path(wheel_directory) / f"{base}-py3-none-any.whl"
    _write_wheel(wheel, files, f"{base}.dist-info")
    return wheel.name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    base = _dist_name(project)
    files = {f"{FINDER}.pth": f"import {FINDER}\n".encode(),
             f"{FINDER}.py": FINDER_SOURCE.format(root=str(ROOT)).encode()}
    files.update({f"{base}.dist-info/{name}": data for name, data in _dist_info_files(project).items()})
    wheel = Path(wheel_directory) / f"{base}-py3-none-any.whl"
    _write_wheel(wheel, files, f"{base}.dist-info")
    return wheel.name


def build_sdist(sdist_directory, config_settings=None):
    raise SystemExit(SDIST_REFUSAL)
