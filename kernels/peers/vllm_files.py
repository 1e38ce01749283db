"""vLLM 0.33.0's SSD files, loaded deliberately: the kernel modules as they are, stand-ins for the rest.

The published files (`vllm-0.33.0-mamba-ssd.tar.gz`, kernels/peers/sources.py) are a fragment of vLLM:
imported as they are they ask for modules outside the fragment. `install_stand_ins` puts in
`sys.modules` a bare `vllm` package whose `__path__` is the unpacked fragment (so vLLM's own files
load from it, unchanged) and a stand-in for each outside module, answering exactly what is asked:

  vllm.envs              VLLM_TRITON_FORCE_FIRST_CONFIG   triton_utils/__init__.py l.5, l.33
                         VLLM_TRITON_USE_TD               triton_utils/tensor_descriptor.py l.11
                         (both read from the environment, as vLLM's own envs.py does)
  vllm.logger            init_logger(name)                triton_utils/importing.py l.8,
                                                          force_first_config.py l.5
  vllm.platforms         current_platform.is_cuda/is_cpu/is_xpu/is_rocm/is_device_capability(90),
                         vllm_version_matches_substr      importing.py l.9, l.34, l.55;
                                                          ssd_chunk_scan.py l.15, l.30;
                                                          ssd_combined.py l.247, l.249; tensor_descriptor.py l.14
  vllm.utils.math_utils  cdiv                             importing.py l.10 (TritonPlaceholder only)
  ...ops.mamba_ssm       softplus                         ssd_chunk_state.py l.17; the function is vLLM's
                         own, compiled from ops/mamba_ssm.py l.194-205 (that file also imports
                         vLLM's compiled `_custom_ops`, which is not in the fragment)

`current_platform` answers from torch, truthfully: on an H200 `is_device_capability(90)` is True, so
`_drop_racy_wgmma_configs` drops the configs vLLM says Triton miscompiles on sm90, as vLLM does.

CPU tests need vLLM's `compute_varlen_chunk_metadata` (v1/attention/backends/mamba2_attn.py l.27-92),
whose module imports vLLM's config and attention backends at module level; `load_chunk_metadata_fn`
compiles that one function from the file's text (line numbers kept), with `async_tensor_h2d`
(vllm/utils/torch_utils.py, outside the fragment) stood in by a host tensor moved to the device.
"""
from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import itertools
import logging
import os
import sys
import tarfile
import types

import torch

from kernels.peers.sources import peer_file

VERSION = "0.33.0"
TOP = "vllm-0.33.0-mamba-ssd"          # the tarball's top folder
SRC_ENV = "SSDCHECK_VLLM_SRC"          # a folder holding vllm/ (the unpacked fragment)
OPS = "vllm/model_executor/layers/mamba/ops"
METADATA_FILE = "vllm/v1/attention/backends/mamba2_attn.py"
MARKER = f"{OPS}/ssd_combined.py"
STAND_IN = "__ssdcheck_stand_in__"


class FragmentMissing(LookupError):
    """vLLM's SSD files are neither unpacked on sys.path nor in $SSDCHECK_PEERS_DIR."""


def find_root(search_path=None) -> str:
    """The folder holding the fragment's `vllm/`: $SSDCHECK_VLLM_SRC first, then sys.path (or
    `search_path`) entries, each either that folder or one holding `vllm-0.33.0-mamba-ssd/`."""
    roots = [os.environ[SRC_ENV]] if os.environ.get(SRC_ENV) else []
    roots += list(sys.path if search_path is None else search_path)
    for root in roots:
        root = root or os.getcwd()
        for cand in (root, os.path.join(root, TOP)):
            if os.path.isfile(os.path.join(cand, MARKER)):
                return os.path.abspath(cand)
    raise FragmentMissing(f"vllm: no folder holding {MARKER} on sys.path or in ${SRC_ENV}; unpack "
                          f"vllm-0.33.0-mamba-ssd.tar.gz and put {TOP}/ on PYTHONPATH "
                          f"(`source .gpu-bundle/setup.sh` does it on the GPU host)")


def read_source(rel_path: str) -> tuple[str, str]:
    """(text, filename) of one file of the fragment: from the unpacked folder if there is one, else
    straight out of the published tarball (PeerSourceMissing, from sources.py, if neither)."""
    try:
        path = os.path.join(find_root(), rel_path)
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except FragmentMissing:
        pass
    tarball = peer_file("vllm")
    with tarfile.open(tarball, "r:gz") as tar:
        member = tar.extractfile(f"{TOP}/{rel_path}")
        if member is None:
            raise FragmentMissing(f"vllm: {TOP}/{rel_path} is not in {tarball}")
        return member.read().decode("utf-8"), f"{tarball}!{TOP}/{rel_path}"


def compile_definitions(text: str, filename: str, names: set[str], namespace: dict) -> dict:
    """Execute, in `namespace`, only the top-level statements of `text` that define one of `names`
    (a `def`, or an `if` whose branches define it, as `if TRITON3: def softplus ...`). Line numbers are
    kept, so tracebacks and `inspect.getsource` (which Triton's JIT calls) point into the real file."""
    tree = ast.parse(text, filename)

    def defines(node) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            return node.name in names
        if isinstance(node, ast.If):
            return any(defines(n) for n in node.body + node.orelse)
        return False

    picked = [node for node in tree.body if defines(node)]
    found = {n.name for node in picked for n in ast.walk(node) if isinstance(n, ast.FunctionDef)} & names
    if found != names:
        raise FragmentMissing(f"vllm: {filename} no longer defines {sorted(names - found)}")
    exec(compile(ast.Module(body=picked, type_ignores=[]), filename, "exec"), namespace)  # noqa: S102
    return namespace


def _async_tensor_h2d(data, dtype, device, pin_memory=False):
    """Stand-in for vllm.utils.torch_utils.async_tensor_h2d: a host tensor, copied to `device`."""
    return torch.tensor(data, dtype=dtype, device="cpu").to(device)


def load_chunk_metadata_fn():
    """vLLM's own compute_varlen_chunk_metadata(query_start_loc, chunk_size), from mamba2_attn.py."""
    text, filename = read_source(METADATA_FILE)
    ns = {"__name__": "vllm.v1.attention.backends.mamba2_attn", "torch": torch, "itertools": itertools,
          "async_tensor_h2d": _async_tensor_h2d}
    return compile_definitions(text, filename, {"compute_varlen_chunk_metadata"}, ns)[
        "compute_varlen_chunk_metadata"]


# -- the stand-ins for modules outside the fragment ------------------------------------------------

class Platform:
    """vllm.platforms.current_platform, answered from torch (only the questions the files ask)."""

    def is_cuda(self) -> bool:
        return torch.version.cuda is not None and torch.cuda.is_available()

    def is_rocm(self) -> bool:
        return getattr(torch.version, "hip", None) is not None and torch.cuda.is_available()

    def is_xpu(self) -> bool:
        return hasattr(torch, "xpu") and torch.xpu.is_available()

    def is_cpu(self) -> bool:
        return not (self.is_cuda() or self.is_rocm() or self.is_xpu())

    def is_device_capability(self, capability, device_id: int = 0) -> bool:
        """vLLM's signature: an int such as 90, or a (major, minor) pair."""
        if not (self.is_cuda() or self.is_rocm()):
            return False
        major, minor = torch.cuda.get_device_capability(device_id)
        if isinstance(capability, tuple):
            return (major, minor) == capability
        return major * 10 + minor == capability


def _env_flag(name: str):
    value = os.environ.get(name)
    return None if value is None else value.strip().lower() in ("1", "true")


def _module(name: str, doc: str, package_path: list[str] | None = None, **attrs) -> types.ModuleType:
    mod = types.ModuleType(name, doc)
    if package_path is not None:
        spec = importlib.machinery.ModuleSpec(name, loader=None, is_package=True)
        spec.submodule_search_locations = list(package_path)
        mod.__spec__, mod.__path__ = spec, list(package_path)
    for key, value in attrs.items():
        setattr(mod, key, value)
    setattr(mod, STAND_IN, True)
    return mod


class _Envs(types.ModuleType):
    """vllm.envs: the two flags the fragment reads, from the environment as vLLM's envs.py does."""

    @property
    def VLLM_TRITON_FORCE_FIRST_CONFIG(self) -> bool:  # noqa: N802 (vLLM's name)
        return bool(_env_flag("VLLM_TRITON_FORCE_FIRST_CONFIG"))

    @property
    def VLLM_TRITON_USE_TD(self):  # noqa: N802 (vLLM's name)
        return _env_flag("VLLM_TRITON_USE_TD")


def _softplus_module(root: str) -> types.ModuleType:
    """...ops.mamba_ssm with only vLLM's own `softplus`, compiled from that file in the namespace its
    lines ask for: `tl`, `triton`, `HAS_TRITON` from vllm.triton_utils (l.21), TRITON3 as l.30 sets it."""
    name = "vllm.model_executor.layers.mamba.ops.mamba_ssm"
    mod = _module(name, "stand-in: vLLM's softplus alone, compiled from ops/mamba_ssm.py")
    from packaging import version  # noqa: PLC0415 (vLLM's own dependency)
    tu = importlib.import_module("vllm.triton_utils")
    mod.__dict__.update(tl=tu.tl, triton=tu.triton, HAS_TRITON=tu.HAS_TRITON,
                        TRITON3=tu.HAS_TRITON and version.parse(tu.triton.__version__) >= version.parse("3.0.0"))
    path = os.path.join(root, OPS, "mamba_ssm.py")
    with open(path, encoding="utf-8") as f:
        compile_definitions(f.read(), path, {"softplus"}, mod.__dict__)
    return mod


def install_stand_ins(root: str) -> None:
    """Register the bare `vllm` package (path: the fragment) and the stand-ins in sys.modules."""
    existing = sys.modules.get("vllm")
    if existing is not None and not getattr(existing, STAND_IN, False):
        raise RuntimeError("vllm: a real vllm package is already imported in this process; the adapter "
                           "loads the published 0.33.0 fragment and cannot share the name")
    if existing is not None:
        return
    modules = {
        "vllm": _module("vllm", "stand-in: the vLLM 0.33.0 SSD fragment, without vLLM's __init__",
                        [os.path.join(root, "vllm")], __version__=VERSION),
        "vllm.logger": _module("vllm.logger", "stand-in", init_logger=logging.getLogger),
        "vllm.platforms": _module("vllm.platforms", "stand-in", current_platform=Platform(),
                                  vllm_version_matches_substr=lambda substr: substr in VERSION),
        "vllm.utils": _module("vllm.utils", "stand-in", []),
        "vllm.utils.math_utils": _module("vllm.utils.math_utils", "stand-in", cdiv=lambda a, b: -(a // -b)),
    }
    envs = _Envs("vllm.envs", "stand-in: the flags the SSD fragment reads")
    setattr(envs, STAND_IN, True)
    modules["vllm.envs"] = envs
    sys.modules.update(modules)
    for name, mod in modules.items():
        if "." in name:
            parent, _, child = name.rpartition(".")
            setattr(sys.modules[parent], child, mod)
    # the ops package is vLLM's own (an empty __init__); its mamba_ssm is the softplus stand-in
    ops = importlib.import_module(OPS.replace("/", "."))
    sys.modules[f"{ops.__name__}.mamba_ssm"] = _softplus_module(root)


def load_ops(search_path=None) -> types.ModuleType:
    """vllm.model_executor.layers.mamba.ops.ssd_combined, vLLM's file, with the stand-ins in place."""
    name = MARKER.removesuffix(".py").replace("/", ".")
    if name in sys.modules:
        return sys.modules[name]
    if importlib.util.find_spec("triton") is None:   # checked first: nothing is registered without it
        raise ImportError("vllm: the SSD kernels need triton, which is not installed here "
                          "(a CUDA build of torch brings it)")
    install_stand_ins(find_root(search_path))
    return importlib.import_module(name)


__all__ = ["FragmentMissing", "Platform", "VERSION", "compile_definitions", "find_root", "install_stand_ins",
           "load_chunk_metadata_fn", "load_ops", "read_source"]
