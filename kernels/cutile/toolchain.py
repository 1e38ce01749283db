"""Why a cuTile compile or launch fails: diagnose the toolchain from where its parts come from.

cuTile (cuda-tile 1.7) looks for the `tileiras` compiler in this order, and we replay it:

1. the pip packages nvidia-cuda-tileiras, nvidia-cuda-nvcc and nvidia-nvvm (same major.minor), in
   nvidia/cu13/bin; cuTile then strips CUDA_HOME/CUDA_PATH from the compiler's environment;
2. `tileiras` on PATH; 3. $CUDA_HOME/bin (CUDA_PATH on Windows); 4. /usr/local/cuda*/bin.
In cases 2 and 3 CUDA_HOME/CUDA_PATH reach tileiras, which then loads libnvvm from that toolkit.

Causes, each decided from paths and versions (never from the compiler's error text):

* `no-tileiras`        no compiler anywhere in that search.
* `tileiras-too-old`   the compiler predates the GPU: cuTile needs tileiras 13.1+ for Blackwell
                       (sm_10x, sm_11x, sm_12x), 13.2+ for Ampere/Ada (sm_8x), 13.3+ for Hopper (sm_90).
* `cuda-home-libnvvm`  CUDA_HOME/CUDA_PATH is set, reaches tileiras, and points at a toolkit whose
                       libnvvm is not the one beside tileiras (another version, or none): every
                       compile then fails with "failed to compile Tile IR program".

* `override-broken`    SSDCHECK_TILEIRAS names no runnable tileiras (see below).

Choosing another toolchain: SSDCHECK_TILEIRAS=PATH makes every cuTile compile of this process use
the tileiras at PATH instead of cuTile's search. PATH is the executable, a folder holding it, a
toolkit prefix (PATH/bin/tileiras) or a folder pip installed the wheels into with `--target`
(PATH/nvidia/cu13/bin/tileiras). CUDA_HOME/CUDA_PATH never reach it (as with the pip packages);
tileiras finds its libnvvm beside itself. kernels/cutile/__init__.py installs it on import
(install_override), so it holds for the suite, compile_matrix and the lab scripts alike; a broken
value fails the first compile with a ToolchainError that says what is wrong, never falls back.

`python -m kernels.cutile.toolchain [sm_90]` prints the findings; identity() the versions a report records.
"""
from __future__ import annotations

import filecmp
import glob
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Mapping, Sequence

PIP_PACKAGES = ("nvidia-cuda-tileiras", "nvidia-cuda-nvcc", "nvidia-nvvm")
OVERRIDE_VAR = "SSDCHECK_TILEIRAS"

# Oldest tileiras (major, minor) that compiles for a GPU family, keyed by compute-capability major.
MIN_TILEIRAS = {8: (13, 2), 9: (13, 3), 10: (13, 1), 11: (13, 1), 12: (13, 1)}


class ToolchainError(RuntimeError):
    """A cuTile compile/launch failed and the toolchain explains why."""


@dataclass(frozen=True)
class Diagnosis:
    cause: str            # "no-tileiras" | "tileiras-too-old" | "cuda-home-libnvvm" | "gpu-unsupported"
    explanation: str      # one line
    fix: str

    def __str__(self) -> str:
        return f"[{self.cause}] {self.explanation} Fix: {self.fix}"


@dataclass(frozen=True)
class Toolchain:
    tileiras: str | None          # path of the compiler cuTile would run
    source: str                   # "pip", "PATH", "CUDA_HOME", "default" or "none"
    version: tuple[int, int] | None
    version_text: str
    libnvvm: str | None           # the libnvvm shipped beside that tileiras
    cuda_home_var: str | None     # "CUDA_HOME" or "CUDA_PATH" when set
    cuda_home: str | None
    passes_cuda_home: bool        # whether cuTile lets CUDA_HOME reach tileiras
    override_error: str | None = None   # why SSDCHECK_TILEIRAS names no usable tileiras

    def describe(self) -> str:
        v = ".".join(map(str, self.version)) if self.version else "unknown version"
        home = f"{self.cuda_home_var}={self.cuda_home}" if self.cuda_home else "CUDA_HOME unset"
        return (f"tileiras: {self.tileiras or 'not found'} ({self.source}, {v}); "
                f"libnvvm beside it: {self.libnvvm or 'none'}; {home}"
                f"{' (passed to tileiras)' if self.cuda_home and self.passes_cuda_home else ''}")


def _cu13_root() -> str | None:
    try:
        import nvidia.cu13 as cu13  # noqa: PLC0415
        return list(cu13.__path__)[0]
    except (ImportError, AttributeError, IndexError):
        return None


def _pip_tileiras() -> str | None:
    """cuTile's first choice: the pip packages, when all three share major.minor."""
    try:
        versions = [importlib.metadata.version(p) for p in PIP_PACKAGES]
    except importlib.metadata.PackageNotFoundError:
        return None
    if len({tuple(v.split(".")[:2]) for v in versions}) != 1:
        return None
    root = _cu13_root()
    return shutil.which("tileiras", path=os.path.join(root, "bin")) if root else None


def _default_prefixes() -> list[str]:
    prefix = "/usr/local"
    found = [(float("inf"), float("inf"), "cuda")]
    try:
        for sub in os.listdir(prefix):
            m = re.fullmatch(r"cuda-([0-9]+)(\.[0-9]+)?", sub)
            if m:
                found.append((int(m.group(1)), int(m.group(2)[1:]) if m.group(2) else float("inf"), sub))
    except OSError:
        pass
    return [os.path.join(prefix, s) for _, _, s in sorted(found, reverse=True)]


def parse_version(text: str) -> tuple[int, int] | None:
    """(major, minor) from `tileiras --version` ("... release 13.4, V13.4.92")."""
    m = re.search(r"release\s+(\d+)\.(\d+)", text) or re.search(r"\bV(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _run_version(path: str) -> str:
    try:
        return subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _libnvvm_candidates(root: str) -> list[str]:
    pats = ("nvvm/lib64/libnvvm.so*", "nvvm/lib/libnvvm.so*", "lib/libnvvm.so*", "lib64/libnvvm.so*",
            "nvvm/bin/nvvm64*.dll", "bin/nvvm64*.dll")
    out: list[str] = []
    for p in pats:
        out += sorted(glob.glob(os.path.join(root, p)))
    return [p for p in out if os.path.isfile(p)]


def _toolkit_version(root: str) -> tuple[int, int] | None:
    """A toolkit's CUDA version from version.json / version.txt, if it says."""
    try:
        with open(os.path.join(root, "version.json")) as f:
            v = json.load(f).get("cuda", {}).get("version", "")
        m = re.match(r"(\d+)\.(\d+)", v)
        if m:
            return int(m.group(1)), int(m.group(2))
    except (OSError, ValueError, AttributeError):
        pass
    try:
        with open(os.path.join(root, "version.txt")) as f:
            m = re.search(r"(\d+)\.(\d+)", f.read())
        if m:
            return int(m.group(1)), int(m.group(2))
    except OSError:
        pass
    return None


def resolve_override(value: str) -> tuple[str | None, str | None]:
    """(tileiras path, None) for a SSDCHECK_TILEIRAS value, or (None, why it names none)."""
    value = os.path.expanduser(value)
    if not os.path.exists(value):
        return None, f"{OVERRIDE_VAR}={value}: no such file or folder"
    if os.path.isdir(value):
        cands = [os.path.join(value, *sub, "tileiras") for sub in ((), ("bin",), ("nvidia", "cu13", "bin"))]
        found = [c for c in cands if os.path.isfile(c)]
        if not found:
            return None, (f"{OVERRIDE_VAR}={value}: no tileiras in it (looked for "
                          f"{', '.join(os.path.relpath(c, value) for c in cands)})")
        value = found[0]
    if not os.access(value, os.X_OK):
        return None, f"{OVERRIDE_VAR}={value}: not executable"
    if parse_version(_run_version(value)) is None:
        return None, f"{OVERRIDE_VAR}={value}: `{value} --version` prints no CUDA release (not a tileiras?)"
    return os.path.abspath(value), None


def find_toolchain(env: Mapping[str, str] | None = None, *, use_pip: bool = True,
                   default_prefixes: Sequence[str] | None = None) -> Toolchain:
    """Which tileiras cuTile would run under `env` (default: os.environ), and what it would see.
    `use_pip=False` and `default_prefixes=()` let tests model a machine without those."""
    env = os.environ if env is None else env
    home_var = "CUDA_PATH" if sys.platform == "win32" and env.get("CUDA_PATH") else "CUDA_HOME"
    cuda_home = env.get(home_var) or None
    path, source, passes, why = None, "none", False, None
    if env.get(OVERRIDE_VAR):
        path, why = resolve_override(env[OVERRIDE_VAR])
        source = OVERRIDE_VAR
    elif use_pip and (p := _pip_tileiras()):
        path, source = p, "pip"
    elif p := shutil.which("tileiras", path=env.get("PATH", "")):
        path, source, passes = p, "PATH", True
    elif cuda_home and (p := shutil.which("tileiras", path=os.path.join(cuda_home, "bin"))):
        path, source, passes = p, "CUDA_HOME", True
    else:
        for prefix in (_default_prefixes() if default_prefixes is None else default_prefixes):
            cand = os.path.join(prefix, "bin", "tileiras")
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                path, source = cand, "default"
                break
    text = _run_version(path) if path else ""
    libnvvm = None
    if path:
        own = _libnvvm_candidates(os.path.dirname(os.path.dirname(os.path.realpath(path))))
        libnvvm = own[0] if own else None
    return Toolchain(tileiras=path, source=source, version=parse_version(text), version_text=text.strip(),
                     libnvvm=libnvvm, cuda_home_var=home_var if cuda_home else None, cuda_home=cuda_home,
                     passes_cuda_home=passes, override_error=why)


def _arch_major_minor(arch) -> tuple[int, int] | None:
    if arch is None:
        return None
    if isinstance(arch, tuple):
        return int(arch[0]), int(arch[1])
    m = re.fullmatch(r"(?:sm_|compute_)?(\d+?)(\d)[af]?", str(arch).strip())
    if not m:
        raise ValueError(f"arch: expected 'sm_XY' or (major, minor), got {arch!r}")
    return int(m.group(1)), int(m.group(2))


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.getsize(a) == os.path.getsize(b) and filecmp.cmp(a, b, shallow=False)
    except OSError:
        return False


def diagnose(arch=None, *, env: Mapping[str, str] | None = None, use_pip: bool = True,
             default_prefixes: Sequence[str] | None = None, toolchain: Toolchain | None = None
             ) -> list[Diagnosis]:
    """Every toolchain cause that applies for a GPU of `arch` ('sm_90' or (9, 0); None skips the
    version check). Empty when nothing is wrong that we know of."""
    tc = toolchain or find_toolchain(env, use_pip=use_pip, default_prefixes=default_prefixes)
    out: list[Diagnosis] = []
    if tc.source == OVERRIDE_VAR and tc.tileiras is None:
        out.append(Diagnosis(
            "override-broken", f"{tc.override_error}; cuTile does not fall back to another tileiras.",
            f"point {OVERRIDE_VAR} at a tileiras (or the folder pip installed the nvidia-cuda-tileiras, "
            f"nvidia-cuda-nvcc and nvidia-nvvm wheels into), or unset it for the pinned toolchain."))
        return out
    if tc.tileiras is None:
        out.append(Diagnosis(
            "no-tileiras",
            "cuTile found no tileiras compiler (not in the nvidia-cuda-tileiras pip package, not on PATH, "
            "not in $CUDA_HOME/bin or /usr/local/cuda*/bin).",
            "pip install 'cuda-tile[tileiras]' (or put a CUDA 13.3+ toolkit's bin/ on PATH)."))
        return out
    cc = _arch_major_minor(arch)
    if cc is not None:
        need = MIN_TILEIRAS.get(cc[0])
        sm = f"sm_{cc[0]}{cc[1]}"
        if need is None:
            out.append(Diagnosis(
                "gpu-unsupported", f"cuTile does not compile for {sm} (it supports sm_8x, sm_90, sm_10x-12x).",
                "run on an Ampere or newer GPU."))
        elif tc.version is not None and tc.version < need:
            out.append(Diagnosis(
                "tileiras-too-old",
                f"tileiras {tc.version[0]}.{tc.version[1]} at {tc.tileiras} ({tc.source}) is too old for "
                f"{sm}, which needs {need[0]}.{need[1]}+.",
                f"pip install -U 'cuda-tile[tileiras]' (tileiras >= {need[0]}.{need[1]}), or put a newer "
                f"toolkit first on PATH."))
    if tc.cuda_home and tc.passes_cuda_home:
        home_nvvm = _libnvvm_candidates(tc.cuda_home)
        home_ver = _toolkit_version(tc.cuda_home)
        var = tc.cuda_home_var
        if not home_nvvm:
            out.append(Diagnosis(
                "cuda-home-libnvvm",
                f"{var}={tc.cuda_home} reaches tileiras ({tc.tileiras}, from {tc.source}) but holds no libnvvm, "
                f"so tileiras cannot load the libnvvm it needs.",
                f"unset {var} (or point it at the toolkit that contains {tc.tileiras})."))
        elif tc.libnvvm is None or not _same_file(home_nvvm[0], tc.libnvvm):
            ver = f"CUDA {home_ver[0]}.{home_ver[1]}" if home_ver else "another toolkit"
            tv = f"{tc.version[0]}.{tc.version[1]}" if tc.version else "unknown"
            out.append(Diagnosis(
                "cuda-home-libnvvm",
                f"{var}={tc.cuda_home} ({ver}) reaches tileiras {tv} ({tc.tileiras}, from {tc.source}), "
                f"which then loads {home_nvvm[0]} instead of its own "
                f"{tc.libnvvm or 'libnvvm'}: every compile fails with 'failed to compile Tile IR program'.",
                f"unset {var} (or point it at the toolkit that contains {tc.tileiras})."))
    return out


def full_version(text: str) -> str | None:
    """'13.4.92' from a CUDA tool's --version text ("... release 13.4, V13.4.92")."""
    m = re.search(r"\bV(\d+\.\d+\.\d+)", text)
    if m:
        return m.group(1)
    v = parse_version(text)
    return f"{v[0]}.{v[1]}" if v else None


def _dist_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def identity(env: Mapping[str, str] | None = None) -> dict:
    """The toolchain a compile in this process uses, as a report records it: tileiras (version, path,
    where it was found), the ptxas beside it, cuda-tile, torch and Triton (None where absent)."""
    tc = find_toolchain(env)
    ptxas = shutil.which("ptxas", path=os.path.dirname(tc.tileiras)) if tc.tileiras else None
    try:
        import torch  # noqa: PLC0415
        torch_version = torch.__version__
    except ImportError:
        torch_version = None
    try:
        import triton  # noqa: PLC0415
        triton_version = getattr(triton, "__version__", None) or _dist_version("triton")
    except ImportError:
        triton_version = None
    return {"tileiras": full_version(tc.version_text), "tileiras_path": tc.tileiras, "tileiras_source": tc.source,
            "ptxas": full_version(_run_version(ptxas)) if ptxas else None, "ptxas_path": ptxas,
            "cuda_tile": _dist_version("cuda-tile"), "torch": torch_version, "triton": triton_version}


# The fields of identity() that make two runs' machine code differ; what `ssdcheck gate` compares.
IDENTITY_FIELDS = ("tileiras", "ptxas", "cuda_tile", "torch", "triton")


def install_override(env: Mapping[str, str] | None = None) -> str | None:
    """When SSDCHECK_TILEIRAS is set, make cuTile compile with that tileiras (its path returned); a
    value naming no tileiras makes every compile raise a ToolchainError carrying the diagnosis."""
    env = os.environ if env is None else env
    if not env.get(OVERRIDE_VAR):
        return None
    try:
        from cuda.tile import _compile  # noqa: PLC0415
    except ImportError:
        return None
    path, why = resolve_override(env[OVERRIDE_VAR])
    if path is None:
        message = str(diagnose(env=env)[0])

        def broken():
            raise ToolchainError(f"cuTile compile: toolchain diagnosis:\n  {message}")
        broken.ssdcheck_override = env[OVERRIDE_VAR]
        _compile._find_compiler_bin = broken
        return None
    binary = _compile._CompilerBinary(path, env.get("PATH", ""), env.get("LD_LIBRARY_PATH", ""),
                                      pass_cuda_home_var=False)

    def chosen():
        return binary
    chosen.ssdcheck_override = path
    _compile._find_compiler_bin = chosen
    return path


def explain(exc: BaseException, arch=None) -> ToolchainError | None:
    """A ToolchainError carrying the diagnosis for a failed compile/launch, or None if none applies."""
    try:
        found = diagnose(arch)
    except Exception:  # diagnosing must never hide the original error
        return None
    if not found:
        return None
    lines = "\n".join(f"  {d}" for d in found)
    return ToolchainError(f"cuTile compile/launch failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})\n"
                          f"toolchain diagnosis:\n{lines}")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    arch = args[0] if args else None
    if arch is None:
        try:
            import torch  # noqa: PLC0415
            if torch.cuda.is_available():
                arch = torch.cuda.get_device_capability()
        except ImportError:
            pass
    print(find_toolchain().describe())
    print("identity: " + ", ".join(f"{k} {v}" for k, v in identity().items() if k in IDENTITY_FIELDS))
    found = diagnose(arch)
    for d in found:
        print(d)
    if not found:
        print(f"no toolchain problem found{f' for {arch}' if arch else ''}")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
