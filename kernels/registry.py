"""Implementations under test, described as data (like PyTorch's OpInfo).

A `KernelInfo` says what an implementation supports; strategies read it so a kernel is only given
problems it claims to handle, and `check_supported` turns anything else into a clear error.

Lookup takes a registered short name (`torch-ref`, `cutile`, `tilegym`, `mamba-ssm`, `vllm`) or an import
path `package.module:function` for any user revision. Such a function declares its capabilities
with a `KernelInfo` in its `ssd_info` attribute; without one it gets `default_info`, which assumes the
full contract of `mamba_chunk_scan_combined` on CUDA (so a revision is never silently under-tested).
"""
from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Callable

import torch

# Options of the contract an implementation may support; strategies draw only declared ones.
ALL_OPTIONS = frozenset({
    "D",               # D of shape (h,)
    "D_headdim",       # D of shape (h, p)
    "z",               # output gate silu(z)
    "dt_bias",
    "dt_softplus",
    "dt_limit",
    "initial_states",
    "final_states",    # return_final_states=True
    "seq_idx",
    "varlen_states",   # cu_seqlens + return_varlen_states=True
    "ngroups",         # ngroups > 1 (ngroups == 1 is always allowed)
    "dt_input_dtype",  # dt in x's dtype instead of float32
})
# Conventions beyond mamba_ssm's own: declared explicitly, never assumed (ALL_OPTIONS is the default).
EXTENSIONS = frozenset({
    "varlen_initial_states",  # with cu_seqlens: initial_states (num_seqs, h, p, n), one per sequence (vLLM)
})
# The argument of mamba_chunk_scan_combined that turns each option on, for error messages.
OPTION_ARGUMENT = {"D": "D", "D_headdim": "D", "z": "z", "dt_bias": "dt_bias", "dt_softplus": "dt_softplus",
                   "dt_limit": "dt_limit", "initial_states": "initial_states",
                   "final_states": "return_final_states", "seq_idx": "seq_idx",
                   "varlen_states": "return_varlen_states", "ngroups": "B", "dt_input_dtype": "dt",
                   "varlen_initial_states": "initial_states"}
ALL_DTYPES = ("float32", "float16", "bfloat16")
MATMULS = ("ieee", "tf32", "tf32-trunc")   # what fp32 matmul operands become; the yardstick models each
EXPS = ("ieee", "fast")   # the decays' exp: libdevice expf, or exp2(x*log2 e) on ex2.approx.f32 (vLLM's fast_exp)
STAGE_NAMES = ("chunk_cumsum", "chunk_state", "state_passing", "chunk_state_and_passing", "chunk_scan")


@dataclass(frozen=True)
class XFail:
    """A known failure, scoped to a property (and optionally a dtype), with the reason."""
    reason: str
    prop: str | None = None
    dtype: str | None = None

    def applies(self, prop: str, dtype: str) -> bool:
        return (self.prop in (None, prop)) and (self.dtype in (None, dtype))


@dataclass(frozen=True)
class KernelInfo:
    name: str
    fn: Callable
    dtypes: tuple[str, ...] = ALL_DTYPES
    chunk_sizes: tuple[int, ...] = (64, 128, 256)
    headdims: tuple[int, ...] | None = None  # None: any headdim
    dstates: tuple[int, ...] | None = None   # None: any dstate
    seqlen_multiple_of_chunk: bool = False
    nheads_multiple_of: int = 1              # e.g. a kernel that tiles heads in blocks of 4
    options: frozenset[str] = ALL_OPTIONS
    stages: dict[str, Callable] | None = None
    device: str = "cuda"                     # "cuda", "cpu" or "any"
    state_dtype: str = "fp32"                # chunk states stored in fp32 or the input dtype
    matmul: str = "ieee"                     # fp32 operands: one of MATMULS (tf32 rounds, tf32-trunc cuts)
    exp: str = "ieee"                        # the decays' exp: one of EXPS; the yardstick models each
    bitwise_batch_invariant: bool = False
    deterministic: bool = True
    xfails: tuple[XFail, ...] = ()
    notes: str = ""

    def __post_init__(self):
        unknown = set(self.options) - ALL_OPTIONS - EXTENSIONS
        if unknown:
            raise ValueError(f"KernelInfo({self.name!r}).options: unknown {sorted(unknown)}; "
                             f"known: {sorted(ALL_OPTIONS | EXTENSIONS)}")
        bad = set(self.dtypes) - set(ALL_DTYPES)
        if bad:
            raise ValueError(f"KernelInfo({self.name!r}).dtypes: unknown {sorted(bad)}; known {ALL_DTYPES}")
        if self.stages:
            odd = set(self.stages) - set(STAGE_NAMES)
            if odd:
                raise ValueError(f"KernelInfo({self.name!r}).stages: unknown {sorted(odd)}; known {STAGE_NAMES}")
        if self.device not in ("cuda", "cpu", "any"):
            raise ValueError(f"KernelInfo({self.name!r}).device: expected cuda, cpu or any, got {self.device!r}")
        if self.state_dtype not in ("fp32", "input"):
            raise ValueError(f"KernelInfo({self.name!r}).state_dtype: expected fp32 or input")
        if self.matmul not in MATMULS:
            raise ValueError(f"KernelInfo({self.name!r}).matmul: expected one of {MATMULS}, got {self.matmul!r}")
        if self.exp not in EXPS:
            raise ValueError(f"KernelInfo({self.name!r}).exp: expected one of {EXPS}, got {self.exp!r}")

    def supports(self, option: str) -> bool:
        return option in self.options

    def replace(self, **changes) -> "KernelInfo":
        return dataclasses.replace(self, **changes)

    def xfail_for(self, prop: str, dtype: str) -> XFail | None:
        return next((x for x in self.xfails if x.applies(prop, dtype)), None)


class UnsupportedProblem(ValueError):
    """An argument asks for something the implementation does not declare."""


def check_supported(info: KernelInfo, *, dtype: str, chunk_size: int, seqlen: int, headdim: int,
                    dstate: int, ngroups: int, options: set[str], nheads: int | None = None) -> None:
    """Raise UnsupportedProblem naming the argument an implementation does not support."""
    if nheads is not None and nheads % info.nheads_multiple_of:
        raise UnsupportedProblem(f"x: {info.name} needs nheads divisible by {info.nheads_multiple_of}, "
                                 f"got nheads={nheads}")
    if dtype not in info.dtypes:
        raise UnsupportedProblem(f"x: {info.name} supports dtypes {info.dtypes}, got {dtype}")
    if chunk_size not in info.chunk_sizes:
        raise UnsupportedProblem(f"chunk_size: {info.name} supports {info.chunk_sizes}, got {chunk_size}")
    if info.headdims is not None and headdim not in info.headdims:
        raise UnsupportedProblem(f"x: {info.name} supports headdim in {info.headdims}, got {headdim}")
    if info.dstates is not None and dstate not in info.dstates:
        raise UnsupportedProblem(f"B: {info.name} supports dstate in {info.dstates}, got {dstate}")
    if info.seqlen_multiple_of_chunk and seqlen % chunk_size:
        raise UnsupportedProblem(f"x: {info.name} needs seqlen divisible by chunk_size={chunk_size}, "
                                 f"got seqlen={seqlen}")
    if ngroups > 1:
        options = options | {"ngroups"}
    missing = sorted(options - info.options)
    if missing:
        raise UnsupportedProblem(f"{OPTION_ARGUMENT[missing[0]]}: option {missing[0]!r} is not supported by "
                                 f"{info.name} (it declares {sorted(info.options)})")


def options_of_call(*, D=None, z=None, dt_bias=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
                    initial_states=None, seq_idx=None, return_final_states=False,
                    return_varlen_states=False, dt=None, x=None, cu_seqlens=None) -> set[str]:
    """The contract options a concrete call uses, named as in ALL_OPTIONS."""
    used = set()
    if D is not None:
        used.add("D_headdim" if D.dim() == 2 else "D")
    for name, on in (("z", z is not None), ("dt_bias", dt_bias is not None), ("dt_softplus", dt_softplus),
                     ("dt_limit", tuple(dt_limit) != (0.0, float("inf"))),
                     ("initial_states", initial_states is not None), ("seq_idx", seq_idx is not None),
                     ("final_states", return_final_states), ("varlen_states", return_varlen_states)):
        if on:
            used.add(name)
    if dt is not None and x is not None and dt.dtype != torch.float32 and dt.dtype == x.dtype:
        used.add("dt_input_dtype")
    if (initial_states is not None and cu_seqlens is not None and x is not None
            and initial_states.shape[0] != x.shape[0]):  # one per sequence (the contract checked the count)
        used.add("varlen_initial_states")
    return used


def check_call(info: KernelInfo, x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
               seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
               return_final_states=False, return_varlen_states=False) -> None:
    """The first line of every implementation: the contract (kernels.contract.check_ssd_args), then
    what `info` declares; either raises an error that names the argument."""
    from kernels.contract import check_ssd_args  # noqa: PLC0415 (contract needs nothing from here)
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_limit=dt_limit,
                   return_varlen_states=return_varlen_states)
    check_supported(info, dtype=str(x.dtype).removeprefix("torch."), chunk_size=chunk_size, seqlen=x.shape[1],
                    headdim=x.shape[3], dstate=B.shape[3], ngroups=B.shape[2], nheads=x.shape[2],
                    options=options_of_call(D=D, z=z, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit,
                                            initial_states=initial_states, seq_idx=seq_idx,
                                            return_final_states=return_final_states,
                                            return_varlen_states=return_varlen_states, dt=dt, x=x,
                                            cu_seqlens=cu_seqlens))


# Registered short names -> "module:attribute" of their KernelInfo; imported lazily so that a
# missing GPU toolchain or peer package only matters when that implementation is asked for.
_REGISTERED: dict[str, str] = {
    "torch-ref": "kernels.torch_ref:INFO",
    "cutile": "kernels.cutile:INFO",
    "tilegym": "kernels.peers.tilegym:INFO",
    "mamba-ssm": "kernels.peers.mamba_ssm:INFO",
    "vllm": "kernels.peers.vllm:INFO",
}


def registered_names() -> tuple[str, ...]:
    return tuple(_REGISTERED)


def default_info(fn: Callable, name: str) -> KernelInfo:
    """What an undeclared `module:function` revision is assumed to support: the whole contract."""
    return KernelInfo(name=name, fn=fn, device="cuda", notes="undeclared: assumed full contract")


def _import_attr(path: str, what: str):
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ValueError(f"{what}: expected a registered name {registered_names()} or "
                         f"'package.module:function', got {path!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as e:
        raise ValueError(f"{what}: cannot import module {module_name!r} ({e})") from e
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{what}: module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def lookup(spec: str) -> KernelInfo:
    """A KernelInfo for a registered name or a `package.module:function` path."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"impl: expected a registered name {registered_names()} or "
                         f"'package.module:function', got {spec!r}")
    if spec in _REGISTERED:
        return _import_attr(_REGISTERED[spec], f"impl {spec!r}")
    if ":" not in spec:
        raise ValueError(f"impl: unknown implementation {spec!r}; registered: {', '.join(registered_names())}; "
                         f"or give 'package.module:function'")
    obj = _import_attr(spec, "impl")
    if isinstance(obj, KernelInfo):
        return obj
    if not callable(obj):
        raise ValueError(f"impl: {spec!r} is neither callable nor a KernelInfo")
    declared = getattr(obj, "ssd_info", None)
    if declared is None:
        return default_info(obj, spec)
    if not isinstance(declared, KernelInfo):
        raise ValueError(f"impl: {spec!r}.ssd_info must be a kernels.registry.KernelInfo, "
                         f"got {type(declared).__name__}")
    # The spec is the name, so failure messages print an --impl that resolves again.
    return declared.replace(fn=obj, name=spec)
