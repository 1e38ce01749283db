"""The build backend of pyproject.toml (PEP 517/660, in-tree through `backend-path`): editable only.

ssdcheck runs from its checkout (tests/, conftest.py, tolerances.toml and the top-level packages
kernels, oracles, properties, ... belong together), and a regular wheel would put those generic
names into site-packages, where a `kernels` distribution from PyPI already lives. So this backend
builds only editable wheels, and even those expose one name: a .pth file imports a small finder
module that resolves the top-level `ssdcheck` package to the checkout (nothing else of it becomes
importable; the `ssdcheck` command puts the checkout on sys.path for its own run), plus the console
script and the metadata. A regular wheel (`pip install .`) fails with a message saying what to run.
"""
from __future__ import annotations

import base64
import hashlib
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFUSAL = ("ssdcheck installs only as an editable checkout, because it runs from its repository (tests/, "
           "conftest.py, tolerances.toml) and would otherwise put generic top-level packages such as "
           "`kernels` into site-packages. Install it with\n"
           "    python3 -m pip install -r requirements-cpu.txt     (CPU: pinned torch, toolchain, the suite)\n"
           "or  python3 -m pip install -e .                         (a host that brings its own torch)")


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


def _dist_info_files(project: dict) -> dict[str, bytes]:
    return {"METADATA": _metadata(project).encode(), "entry_points.txt": _entry_points(project).encode(),
            "WHEEL": b"Wheel-Version: 1.0\nGenerator: ssdcheck._build\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}


# ---------------------------------------------------------------------------------------- PEP 517 / 660 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    raise SystemExit(REFUSAL)


def build_sdist(sdist_directory, config_settings=None):
    raise SystemExit(REFUSAL)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    project = _project()
    dist_info = Path(metadata_directory) / f"{_dist_name(project)}.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    for name, data in _dist_info_files(project).items():
        (dist_info / name).write_bytes(data)
    return dist_info.name


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    project = _project()
    base = _dist_name(project)
    files = {f"{FINDER}.pth": f"import {FINDER}\n".encode(),
             f"{FINDER}.py": FINDER_SOURCE.format(root=str(ROOT)).encode()}
    files.update({f"{base}.dist-info/{name}": data for name, data in _dist_info_files(project).items()})
    record_name = f"{base}.dist-info/RECORD"
    record = "".join(_record_line(n, d) + "\n" for n, d in files.items()) + f"{record_name},,\n"
    wheel = Path(wheel_directory) / f"{base}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(record_name, record)
    return wheel.name
