"""The in-tree build backend (ssdcheck/_build.py): a wheel that installs one top-level name with the
suite inside it, an editable wheel pointing at the checkout, and the first README command installing
the suite. (A real install into a fresh virtual environment, run from outside the checkout, is
.ci/wheel's; these checks need no pip and no network.)"""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ssdcheck import _build

ROOT = Path(__file__).resolve().parents[1]


def _check_record(files: dict[str, bytes], info: str) -> None:
    for line in files[info + "RECORD"].decode().splitlines():          # every hash as pip checks it
        path, digest, size = line.split(",")
        if path == info + "RECORD":
            continue
        want = base64.urlsafe_b64encode(hashlib.sha256(files[path]).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={want}" and int(size) == len(files[path]), path


def test_the_wheel_installs_ssdcheck_alone_with_the_suite_inside_it(tmp_path):
    (tmp_path / "dist").mkdir()
    name = _build.build_wheel(str(tmp_path / "dist"))
    assert name == "ssdcheck-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / "dist" / name) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
        zf.extractall(tmp_path / "site")
    info = "ssdcheck-0.1.0.dist-info/"
    assert {n.split("/")[0] for n in files} == {"ssdcheck", info.rstrip("/")}
    suite = {n.removeprefix("ssdcheck/_suite/") for n in files if n.startswith("ssdcheck/_suite/")}
    for needed in ("conftest.py", "tolerances.toml", "pyproject.toml", "kernels/registry.py", "kernels/peers/vllm.py",
                   "oracles/recurrence_f64.py", "properties/strategies.py", "tests/test_properties.py",
                   "ssdcheck_plugin/plugin.py", "mutation/run.py", "docs/contract.md"):
        assert needed in suite, needed
    assert not any(n.startswith("lab/") for n in suite), "the lab stays out of the wheel"
    assert not set(_build.REPOSITORY_TESTS) & suite
    assert "ssdcheck/cli.py" in files and "ssdcheck/_build.py" not in files
    assert "ssdcheck = ssdcheck.cli:main" in files[info + "entry_points.txt"].decode()
    _check_record(files, info)
    # as installed: the suite is the package's _suite, and the generic names are not importable
    probe = ("import importlib.util, ssdcheck.paths as p; "
             "print(p.INSTALLED, p.ROOT, [importlib.util.find_spec(n) for n in ('kernels', 'oracles')])")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SSDCHECK_STATE_DIR")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path / "site")},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["True", str(tmp_path / "site" / "ssdcheck" / "_suite"), "[None,", "None]"], out


def test_an_sdist_is_refused_with_what_to_run(tmp_path):
    with pytest.raises(SystemExit) as e:
        _build.build_sdist(str(tmp_path))
    assert "pip install ." in str(e.value) and "pip wheel" in str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_the_editable_wheel_points_at_the_checkout_and_installs_the_command(tmp_path):
    name = _build.build_editable(str(tmp_path))
    with zipfile.ZipFile(tmp_path / name) as zf:
        files = {n: zf.read(n) for n in zf.namelist()}
    assert name == "ssdcheck-0.1.0-py3-none-any.whl"
    info = "ssdcheck-0.1.0.dist-info/"
    assert set(files) - {n for n in files if n.startswith(info)} == {"_ssdcheck_checkout.pth", "_ssdcheck_checkout.py"}
    assert files["_ssdcheck_checkout.pth"] == b"import _ssdcheck_checkout\n"
    # the finder, as site.py runs it from another directory: ssdcheck imports, the generic names do not
    (tmp_path / "_ssdcheck_checkout.py").write_bytes(files["_ssdcheck_checkout.py"])
    probe = ("import importlib.util, _ssdcheck_checkout, ssdcheck; "
             "print(ssdcheck.__file__, [importlib.util.find_spec(n) for n in ('kernels', 'oracles')])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == [str(ROOT / "ssdcheck" / "__init__.py"), "[None,", "None]"], out
    assert "ssdcheck = ssdcheck.cli:main" in files[info + "entry_points.txt"].decode()
    meta = files[info + "METADATA"].decode()
    assert "Name: ssdcheck" in meta and "Requires-Dist: torch>=2.4" in meta
    _check_record(files, info)


def test_the_first_readme_command_installs_the_suite_with_the_pinned_cpu_torch():
    reqs = (ROOT / "requirements-cpu.txt").read_text().splitlines()
    assert "-e ." in reqs and "torch==2.13.0" in reqs and any(r.startswith("pyyaml") for r in reqs)
    assert "python3 -m pip install -r requirements-cpu.txt" in (ROOT / "README.md").read_text()
