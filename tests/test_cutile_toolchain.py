"""kernels/cutile/toolchain.py: each cause of a failing cuTile compile, recreated on the CPU.

The diagnosis is decided from where tileiras and libnvvm come from (paths, versions), so a fake
PATH, a fake `tileiras` script and a fake CUDA_HOME are enough to reproduce every cause.
"""
from __future__ import annotations

import json
import os
import stat

import pytest

from kernels.cutile import toolchain as tc


def _fake_toolkit(root, version="13.4", *, libnvvm=b"nvvm-beside-tileiras"):
    """root/bin/tileiras printing `version`, root/lib/libnvvm.so.4 (the pip wheel's layout)."""
    os.makedirs(root / "bin", exist_ok=True)
    script = root / "bin" / "tileiras"
    script.write_text("#!/bin/sh\n"
                      "echo 'tileiras: NVIDIA (R) Cuda Tile IR optimizing assembler'\n"
                      f"echo 'Cuda compilation tools, release {version}, V{version}.77'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if libnvvm is not None:
        os.makedirs(root / "lib", exist_ok=True)
        (root / "lib" / "libnvvm.so.4").write_bytes(libnvvm)
    return root


def _fake_cuda_home(root, version="13.0", *, libnvvm=b"nvvm-of-another-toolkit"):
    """A system-toolkit layout: root/nvvm/lib64/libnvvm.so and root/version.json."""
    os.makedirs(root, exist_ok=True)
    (root / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": f"{version}.1"}}))
    if libnvvm is not None:
        os.makedirs(root / "nvvm" / "lib64", exist_ok=True)
        (root / "nvvm" / "lib64" / "libnvvm.so").write_bytes(libnvvm)
    return root


def _diagnose(arch, env):
    """diagnose() on a machine holding only what `env` shows: no pip tileiras, no /usr/local/cuda."""
    return tc.diagnose(arch, env=env, use_pip=False, default_prefixes=())


def _causes(found):
    return [d.cause for d in found]


def test_no_tileiras(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    found = _diagnose("sm_90", {"PATH": str(empty)})
    assert _causes(found) == ["no-tileiras"]
    text = str(found[0])
    assert "no tileiras" in text and "pip install 'cuda-tile[tileiras]'" in text
    assert tc.find_toolchain({"PATH": str(empty)}, use_pip=False, default_prefixes=()).source == "none"


def test_tileiras_from_cuda_home_bin_is_found(tmp_path):
    home = _fake_toolkit(tmp_path / "cuda", "13.4")
    found = tc.find_toolchain({"PATH": str(tmp_path), "CUDA_HOME": str(home)}, use_pip=False, default_prefixes=())
    assert found.source == "CUDA_HOME" and found.version == (13, 4) and found.passes_cuda_home


@pytest.mark.parametrize("version,arch,too_old", [
    ("13.1", "sm_90", True),     # Hopper needs 13.3
    ("13.2", (9, 0), True),
    ("13.3", "sm_90", False),
    ("13.1", "sm_80", True),     # Ampere/Ada need 13.2
    ("13.2", "sm_89", False),
    ("13.1", "sm_100", False),   # Blackwell since 13.1
    ("13.1", "sm_120", False),
])
def test_tileiras_too_old_for_the_gpu(tmp_path, version, arch, too_old):
    tk = _fake_toolkit(tmp_path / "tk", version)
    found = _diagnose(arch, {"PATH": str(tk / "bin")})
    assert ("tileiras-too-old" in _causes(found)) == too_old, found
    if too_old:
        d = next(d for d in found if d.cause == "tileiras-too-old")
        assert version in d.explanation and str(tk / "bin" / "tileiras") in d.explanation
        assert "pip install -U" in d.fix


def test_version_is_read_from_the_compiler_not_guessed(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", "13.4")
    found = tc.find_toolchain({"PATH": str(tk / "bin")}, use_pip=False, default_prefixes=())
    assert found.source == "PATH" and found.version == (13, 4)
    assert found.libnvvm == str(tk / "lib" / "libnvvm.so.4")
    assert tc.parse_version("Cuda compilation tools, release 13.4, V13.4.92") == (13, 4)
    assert tc.parse_version("no version here") is None


def test_cuda_home_with_another_libnvvm(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", "13.4")
    home = _fake_cuda_home(tmp_path / "cuda-13.0", "13.0")
    found = _diagnose("sm_90", {"PATH": str(tk / "bin"), "CUDA_HOME": str(home)})
    assert _causes(found) == ["cuda-home-libnvvm"]
    d = found[0]
    assert f"CUDA_HOME={home}" in d.explanation and "CUDA 13.0" in d.explanation
    assert str(home / "nvvm" / "lib64" / "libnvvm.so") in d.explanation
    assert str(tk / "lib" / "libnvvm.so.4") in d.explanation
    assert "failed to compile Tile IR program" in d.explanation
    assert d.fix.startswith("unset CUDA_HOME")


def test_cuda_home_without_libnvvm(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", "13.4")
    home = _fake_cuda_home(tmp_path / "not-a-toolkit", libnvvm=None)
    found = _diagnose("sm_90", {"PATH": str(tk / "bin"), "CUDA_HOME": str(home)})
    assert _causes(found) == ["cuda-home-libnvvm"] and "holds no libnvvm" in found[0].explanation


def test_cuda_home_pointing_at_tileiras_own_toolkit_is_fine(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", "13.4")
    assert _diagnose("sm_90", {"PATH": str(tk / "bin"), "CUDA_HOME": str(tk)}) == []


def test_cuda_home_with_an_identical_libnvvm_is_fine(tmp_path):
    tk = _fake_toolkit(tmp_path / "tk", "13.4", libnvvm=b"same-bytes")
    home = _fake_cuda_home(tmp_path / "copy", "13.4", libnvvm=b"same-bytes")
    assert _diagnose("sm_90", {"PATH": str(tk / "bin"), "CUDA_HOME": str(home)}) == []


def test_pip_tileiras_never_sees_cuda_home(tmp_path):
    """cuTile strips CUDA_HOME from a pip-installed tileiras, so a stray CUDA_HOME is harmless."""
    if tc._pip_tileiras() is None:
        pytest.skip("no pip-installed tileiras on this machine")
    home = _fake_cuda_home(tmp_path / "cuda-12.0", "12.0")
    found = tc.diagnose("sm_90", env={"PATH": "/usr/bin", "CUDA_HOME": str(home)}, default_prefixes=())
    assert "cuda-home-libnvvm" not in _causes(found)
    assert tc.find_toolchain({"PATH": "/usr/bin", "CUDA_HOME": str(home)}).source == "pip"


def test_this_machine_toolchain_is_healthy():
    tool = tc.find_toolchain()
    if tool.tileiras is None:
        pytest.skip("no tileiras here")
    assert tc.diagnose("sm_90") == [], tool.describe()


def test_explain_wraps_a_failure_with_the_diagnosis(monkeypatch):
    d = tc.Diagnosis("no-tileiras", "cuTile found no tileiras compiler.", "pip install 'cuda-tile[tileiras]'.")
    monkeypatch.setattr(tc, "diagnose", lambda arch=None, **kw: [d])
    err = tc.explain(RuntimeError("failed to compile Tile IR program"), (9, 0))
    assert isinstance(err, tc.ToolchainError)
    assert "[no-tileiras]" in str(err) and "failed to compile Tile IR program" in str(err)
    monkeypatch.setattr(tc, "diagnose", lambda arch=None, **kw: [])
    assert tc.explain(RuntimeError("x"), (9, 0)) is None
    monkeypatch.setattr(tc, "diagnose", lambda arch=None, **kw: 1 / 0)
    assert tc.explain(RuntimeError("x"), (9, 0)) is None      # diagnosing never hides the error


class _FailingCt:
    class TileCompilerExecutionError(Exception):
        pass

    def launch(self, *a, **k):
        raise self.TileCompilerExecutionError("failed to compile Tile IR program")


def test_launch_failure_in_ssd_forward_carries_the_diagnosis(monkeypatch, tmp_path):
    """The launcher's error path: a failing launch becomes a ToolchainError when a cause applies."""
    import torch

    from kernels.cutile import dispatch, launcher
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(launcher, "_ct", lambda: _FailingCt())
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    real = tc.diagnose
    monkeypatch.setattr(tc, "diagnose", lambda arch=None, **kw: real(
        arch, env={"PATH": str(empty)}, use_pip=False, default_prefixes=()))
    cfg = dispatch.Config((("BL", 64),))
    with pytest.raises(tc.ToolchainError, match=r"\[no-tileiras\]") as info:
        launcher._launch((1, 1, 1), object(), cfg, (), torch.device("cpu"))
    assert isinstance(info.value.__cause__, _FailingCt.TileCompilerExecutionError)
    # nothing to diagnose: the original error comes through unchanged
    monkeypatch.setattr(tc, "diagnose", lambda arch=None, **kw: [])
    with pytest.raises(_FailingCt.TileCompilerExecutionError):
        launcher._launch((1, 1, 1), object(), cfg, (), torch.device("cpu"))


def test_cli_reports(capsys):
    rc = tc.main(["sm_90"])
    out = capsys.readouterr().out
    assert "tileiras:" in out
    assert rc in (0, 1)


# ------------------------------------------------------------------- SSDCHECK_TILEIRAS: another toolchain

def _fake_ptxas(root, version):
    script = root / "bin" / "ptxas"
    script.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {version}, V{version}.37'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


@pytest.mark.parametrize("layout", ["binary", "bin-folder", "prefix", "pip-target"])
def test_the_override_names_a_tileiras_in_each_layout(tmp_path, layout):
    root = _fake_toolkit(tmp_path / "nvidia" / "cu13" if layout == "pip-target" else tmp_path / "tk", "13.5")
    value = {"binary": root / "bin" / "tileiras", "bin-folder": root / "bin", "prefix": root,
             "pip-target": tmp_path}[layout]
    found = tc.find_toolchain({"PATH": "", tc.OVERRIDE_VAR: str(value)})
    assert (found.tileiras, found.source, found.version) == (str(root / "bin" / "tileiras"), tc.OVERRIDE_VAR, (13, 5))
    assert tc.diagnose("sm_90", toolchain=found) == []


@pytest.mark.parametrize("broken", ["missing", "empty-folder", "not-executable", "not-tileiras"])
def test_a_broken_override_is_diagnosed_and_never_falls_back(tmp_path, broken):
    good = _fake_toolkit(tmp_path / "good", "13.4")     # a working tileiras on PATH is not used instead
    value = tmp_path / "tc"
    if broken == "empty-folder":
        value.mkdir()
    elif broken in ("not-executable", "not-tileiras"):
        value.write_text("#!/bin/sh\necho hello\n")
        value.chmod(0o755 if broken == "not-tileiras" else 0o644)
    env = {"PATH": str(good / "bin"), tc.OVERRIDE_VAR: str(value)}
    found = tc.find_toolchain(env, use_pip=False)
    assert found.tileiras is None and found.source == tc.OVERRIDE_VAR
    (d,) = tc.diagnose("sm_90", toolchain=found)
    why = {"missing": "no such file or folder", "empty-folder": "no tileiras in it",
           "not-executable": "not executable", "not-tileiras": "prints no CUDA release"}[broken]
    assert d.cause == "override-broken" and why in d.explanation and str(value) in d.explanation


def test_install_override_makes_cutile_compile_with_that_tileiras(tmp_path, monkeypatch):
    _compile = pytest.importorskip("cuda.tile._compile")
    root = _fake_toolkit(tmp_path / "tk", "13.5")
    monkeypatch.setattr(_compile, "_find_compiler_bin", _compile._find_compiler_bin)   # restored after the test
    assert tc.install_override({"PATH": "", tc.OVERRIDE_VAR: str(root)}) == str(root / "bin" / "tileiras")
    chosen = _compile._find_compiler_bin()
    assert chosen.path == str(root / "bin" / "tileiras") and chosen.pass_cuda_home_var is False
    assert tc.install_override({"PATH": "", tc.OVERRIDE_VAR: str(tmp_path / "nope")}) is None
    with pytest.raises(tc.ToolchainError, match=r"\[override-broken\] SSDCHECK_TILEIRAS=.*nope: no such file"):
        _compile._find_compiler_bin()
    monkeypatch.setattr(_compile, "_find_compiler_bin", lambda: "untouched")
    assert tc.install_override({"PATH": ""}) is None and _compile._find_compiler_bin() == "untouched"


def test_identity_reads_the_chosen_tileiras_and_the_ptxas_beside_it(tmp_path):
    root = _fake_toolkit(tmp_path / "tk", "13.5")
    _fake_ptxas(root, "13.5")
    ident = tc.identity({"PATH": "", tc.OVERRIDE_VAR: str(root)})
    assert (ident["tileiras"], ident["ptxas"], ident["tileiras_source"]) == ("13.5.77", "13.5.37", tc.OVERRIDE_VAR)
    assert ident["ptxas_path"] == str(root / "bin" / "ptxas")
    assert set(tc.IDENTITY_FIELDS) <= set(ident)
    assert tc.identity({"PATH": "", tc.OVERRIDE_VAR: str(tmp_path / "nope")})["tileiras"] is None
    assert tc.full_version("Cuda compilation tools, release 13.4, V13.4.92") == "13.4.92"
