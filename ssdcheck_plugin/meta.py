"""Run metadata for the report: when, where, on what GPU and driver, with which versions and settings.

Nothing here initialises CUDA on a host without a GPU, and every probe is best effort: a missing tool
gives null, never an error.
"""
from __future__ import annotations

import datetime
import hashlib
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _run(cmd: list[str], cwd: str | None = None, timeout: float = 10.0) -> str | None:
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def driver_version() -> str | None:
    """The NVIDIA driver version: /proc first (no subprocess), then nvidia-smi."""
    try:
        first = Path("/proc/driver/nvidia/version").read_text().splitlines()[0]
        for word in first.split():
            if word.count(".") >= 1 and word.replace(".", "").isdigit():
                return word
    except OSError:
        pass
    if shutil.which("nvidia-smi"):
        out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
        if out:
            return out.splitlines()[0].strip()
    return None


def gpus() -> dict:
    import torch
    info = {"available": bool(torch.cuda.is_available()), "cuda_runtime": torch.version.cuda,
            "devices": [], "driver": None}
    if not info["available"]:
        return info
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        info["devices"].append({"index": i, "name": p.name, "capability": f"{p.major}.{p.minor}",
                                "memory_gib": round(p.total_memory / 2**30, 1)})
    info["driver"] = driver_version()
    info["visible_devices"] = os.environ.get("CUDA_VISIBLE_DEVICES")
    return info


def source_digest(root: str, folder: str = "kernels") -> str:
    """sha256 of the Python sources under root/folder (paths and contents, sorted): which kernels ran.
    The GPU host's copy of the tree can carry an older .git than its files (seen on 2026-11-30: the
    commit read 912d72d, dirty, while the files were aba3ec1's), so the commit alone does not say it."""
    h = hashlib.sha256()
    base = Path(root)
    for path in sorted((base / folder).rglob("*.py")):
        if "__pycache__" not in path.parts:
            h.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def git_state(root: str) -> dict:
    commit = _run(["git", "rev-parse", "HEAD"], cwd=root, timeout=5.0)
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, timeout=5.0)
    return {"commit": commit, "dirty": bool(dirty) if dirty is not None else None,
            "kernels_sha256": source_digest(root)}


def tolerance_policy() -> dict:
    try:
        from properties.tolerance import POLICY_PATH, load_policy
        data = Path(POLICY_PATH).read_bytes()
        return {"path": str(POLICY_PATH), "sha256": hashlib.sha256(data).hexdigest(), "k": load_policy().k}
    except Exception as e:  # the report still says why the policy is missing
        return {"path": None, "sha256": None, "k": None, "error": f"{type(e).__name__}: {e}"}


def hypothesis_settings(profile: str | None) -> dict:
    from hypothesis import settings
    s = settings.default
    return {"profile": profile, "max_examples": s.max_examples, "derandomize": s.derandomize,
            "database": None if s.database is None else repr(s.database),
            "phases": [p.name for p in s.phases]}


def toolchain() -> dict:
    """The compilers this run's kernels come from (kernels/cutile/toolchain.py identity(): tileiras
    and the ptxas beside it, with path and where cuTile found them, cuda-tile, torch, Triton); a field
    that cannot be read is None. SSDCHECK_TILEIRAS, when set, is the tileiras recorded."""
    keys = ("tileiras", "tileiras_path", "tileiras_source", "ptxas", "ptxas_path", "cuda_tile", "torch", "triton")
    try:
        from kernels.cutile.toolchain import identity  # noqa: PLC0415
        return identity()
    except Exception as e:  # noqa: BLE001 - a report without cuda-tile still says which torch ran
        out = dict.fromkeys(keys)
        out.update(cuda_tile=_version("cuda-tile"), triton=_version("triton"), error=f"{type(e).__name__}: {e}")
        try:
            import torch  # noqa: PLC0415
            out["torch"] = torch.__version__
        except ImportError:
            pass
        return out


def _program() -> list[str]:
    name = Path(sys.argv[0]).name if sys.argv else "pytest"
    return ["python", "-m", "pytest"] if name in ("__main__.py", "pytest.py") else [name]


def collect(config, *, profile: str | None) -> dict:
    import torch
    root = str(config.rootpath)
    args = list(config.invocation_params.args)
    tools = toolchain()
    return {
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "command": [*_program(), *args],
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "rootdir": root,
        "impls": config.getoption("impl", None),
        "hypothesis": hypothesis_settings(profile),
        "versions": {"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                     "cuda_tile": _version("cuda-tile"), "hypothesis": _version("hypothesis"),
                     "pytest": _version("pytest"), "pytest_xdist": _version("pytest-xdist"),
                     "numpy": _version("numpy"), "tileiras": tools["tileiras"], "ptxas": tools["ptxas"],
                     "triton": tools["triton"]},
        "toolchain": tools,
        "git": git_state(root),
        "gpu": gpus(),
        "tolerance_policy": tolerance_policy(),
        # switches that change what runs: config overrides, the peers' autotuning
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith("SSDCHECK_") or k in ("TILEGYM_DISABLE_AUTOTUNE", "MAMBA_DETERMINISTIC",
                                                     "VLLM_TRITON_FORCE_FIRST_CONFIG")},
    }
