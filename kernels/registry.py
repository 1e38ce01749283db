"""Implementations under test, described as data (like PyTorch's OpInfo).

A `KernelInfo` says what an implementation supports; strategies read it so a kernel is only given
problems it claims to handle, and `check_supported` turns anything else into a clear error.

Lookup takes a registered short name (`torch-ref`, `cutile`, `tilegym`, `mamba-ssm`, `vllm`: each peer as it
ships, autotuned; `vllm-first-config`, `tilegym-first-config`: the same peers with their first configs
forced, for fast fuzzing), an import
path `package.module:function` for any user revision, or a file `path/to/file.py:function` (relative
to the current directory). Such a function declares its capabilities
with a `KernelInfo` in its `ssd_info` attribute; without one it gets `default_info`, which assumes the
full contract of `mamba_chunk_scan_combined` on CUDA (so a revision is never silently under-tested).
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path
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
    "states_input_dtype",  # initial_states in x's dtype (a state cache in the model dtype) instead of float32
    "params_input_dtype",  # D and dt_bias in x's dtype (a model cast to it) instead of float32
})
# Conventions beyond mamba_ssm's own: declared explicitly, never assumed (ALL_OPTIONS is the default).
EXTENSIONS = frozenset({
    "varlen_initial_states",  # with cu_seqlens: initial_states (num_seqs, h, p, n), one per sequence (vLLM)
    # the keyword return_states_dtype (a torch dtype): final and varlen states are returned in it, the
    # caller's state cache dtype (vLLM's state_dtype); without it final states are float32 and varlen
    # states in the declared state_dtype, as mamba_ssm returns them
    "return_states_dtype",
})
# The argument of mamba_chunk_scan_combined that turns each option on, for error messages.
OPTION_ARGUMENT = {"D": "D", "D_headdim": "D", "z": "z", "dt_bias": "dt_bias", "dt_softplus": "dt_softplus",
                   "dt_limit": "dt_limit", "initial_states": "initial_states",
                   "final_states": "return_final_states", "seq_idx": "seq_idx",
                   "varlen_states": "return_varlen_states", "ngroups": "B", "dt_input_dtype": "dt",
                   "varlen_initial_states": "initial_states", "states_input_dtype": "initial_states",
                   "params_input_dtype": "D", "return_states_dtype": "return_states_dtype"}
ALL_DTYPES = ("float32", "float16", "bfloat16")
MATMULS = ("ieee", "tf32", "tf32-trunc")   # what fp32 matmul operands become; the yardstick models each
EXPS = ("ieee", "fast")   # the decays' exp: libdevice expf, or exp2(x*log2 e) on ex2.approx.f32 (vLLM's fast_exp)
STAGE_NAMES = ("chunk_cumsum", "chunk_state", "state_passing", "chunk_state_and_passing", "chunk_scan")
# Inputs of the contract that have a gradient (keys of a backward's result), in mamba_ssm's order.
GRAD_INPUTS = ("x", "dt", "A", "B", "C", "D", "z", "dt_bias", "initial_states")


@dataclass(frozen=True)
class Backward:
    """How an implementation differentiates its forward, as data.

    fn: "autograd" (the forward is differentiable: torch.autograd through `KernelInfo.fn`), or a
    callable `fn(dy, dfinal_states, **forward_kwargs) -> {input name: gradient}` with dy (b,l,h,p)
    in x.dtype and dfinal_states (b,h,p,n) fp32 or None (no gradient into the final states).
    grads: the GRAD_INPUTS it returns (an option's input only where the call uses that option).
    options: the forward options its backward supports; what a backward problem may use is these and
    KernelInfo.options both (`backward_options`), so narrowing a KernelInfo's options narrows its backward's.
    state_dtype / matmul: its precision, as for the forward: the dtype the states and state gradients
    are stored in between kernels, and what fp32 matmul operands become; the backward yardstick models both.
    explore_one_in: where each new compile class costs the backward minutes, gradient draws explore a
    new class in one draw of this many instead of the forward's 1 in 8 (properties/strategies.py); the
    others reuse the triage battery's classes. None: as the forward.
    """
    fn: Callable | str
    grads: tuple[str, ...]
    options: frozenset[str]
    state_dtype: str = "fp32"
    matmul: str = "ieee"
    deterministic: bool = True
    explore_one_in: int | None = None
    notes: str = ""

    def check(self, owner: str, forward_options: frozenset[str]) -> None:
        where = f"KernelInfo({owner!r}).backward"
        if not (self.fn == "autograd" or callable(self.fn)):
            raise ValueError(f"{where}.fn: expected 'autograd' or a callable, got {self.fn!r}")
        odd = set(self.grads) - set(GRAD_INPUTS)
        if odd or not self.grads:
            raise ValueError(f"{where}.grads: expected a non-empty subset of {GRAD_INPUTS}, got {self.grads}")
        unknown = set(self.options) - ALL_OPTIONS
        if unknown:
            raise ValueError(f"{where}.options: unknown {sorted(unknown)}; known: {sorted(ALL_OPTIONS)}")
        if self.state_dtype not in ("fp32", "input"):
            raise ValueError(f"{where}.state_dtype: expected fp32 or input, got {self.state_dtype!r}")
        if self.matmul not in MATMULS:
            raise ValueError(f"{where}.matmul: expected one of {MATMULS}, got {self.matmul!r}")
        if self.explore_one_in is not None and (not isinstance(self.explore_one_in, int) or self.explore_one_in < 1):
            raise ValueError(f"{where}.explore_one_in: expected None or an int >= 1, got {self.explore_one_in!r}")


@dataclass(frozen=True)
class Deviation:
    """A known bug of an implementation, declared rather than absorbed (OpInfo's DecorateInfo, scoped).

    `condition(problem, *variants)` is a predicate on the SSDProblem a property runs, as narrow as the
    bug; `variants` are the same problem at the other settings a property compares it with (for
    prop_chunk_size_invariance, the other chunk size), so a condition can say when two runs differ.
    Where it holds, the comparisons of `outputs` in `props` are reported as this known deviation
    instead of failing; the other outputs are still checked, and every problem outside the condition
    is checked as before. A problem that meets the condition and passes anyway is an unexpected pass.
    `examples` (SSDProblem field dicts meeting the condition) run in the gate, so the count is never
    silently 0; `finding` is the write-up (docs/findings/...). `model` (optional) wraps a correct
    forward into one with this bug: where a problem meets the condition and passes, the suite runs the
    same check on the float64 oracle so wrapped, and counts an unexpected pass only if that fails (else
    the bug is below what the check resolves on that problem, e.g. an initial state decayed to nothing).
    """
    props: tuple[str, ...]
    outputs: tuple[str, ...]
    condition: Callable[..., bool]
    reason: str
    finding: str
    examples: tuple[dict, ...]
    model: Callable[[Callable], Callable] | None = None

    def __post_init__(self):
        for name in ("props", "outputs", "examples"):
            if not isinstance(getattr(self, name), tuple) or not getattr(self, name):
                raise ValueError(f"Deviation.{name}: expected a non-empty tuple, got {getattr(self, name)!r}")
        if self.model is not None and not callable(self.model):
            raise ValueError(f"Deviation.model: expected a function wrapping a forward, got {self.model!r}")
        if not callable(self.condition):
            raise ValueError(f"Deviation.condition: expected a predicate on the SSDProblem, got {self.condition!r}")
        if not self.reason or not self.finding:
            raise ValueError("Deviation.reason and Deviation.finding: expected the bug in words and its write-up")

    def applies(self, prop: str, problem, variants=()) -> bool:
        return prop in self.props and bool(self.condition(problem, *variants))


@dataclass(frozen=True)
class Precompile:
    """How a test run can compile an implementation's kernels ahead of its calls, in other processes on
    the CPU cores, while the GPU runs examples (ssdcheck_plugin/precompile.py): `plan(**kwargs)` takes
    a call's arguments on CPU tensors (values unread) and returns the compiles the call needs, as plain
    picklable jobs; `build(job, arch)` runs one ("sm_90") into the compile cache the call will read."""
    plan: Callable
    build: Callable


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
    deviations: tuple[Deviation, ...] = ()   # known bugs, declared (Deviation)
    notes: str = ""
    # What costs a compile: problem -> a hashable key; problems with equal keys reuse every compiled
    # kernel, so strategies draw mostly within the keys of a few problems (properties/strategies.py).
    # None: compiling costs nothing worth counting (torch-ref), draws are left as they are.
    compile_key: Callable | None = None
    backward: Backward | None = None         # None: forward only (no gradient properties run)
    # The implementation's own code paths a run reached: () -> {path name: launches in this process so
    # far}, 0 for a path not reached (cutile: its dispatch table's rows; a name ending in FORCED_ONLY is
    # a path only a switch selects). Reports sum it over workers. None: no paths to show.
    coverage: Callable | None = None
    precompile: Precompile | None = None    # None: nothing to compile ahead (Precompile)
    # GPU draws explore a new compile class in 1 of this many (properties/strategies.py); 0: they stay in
    # the triage battery's classes (a peer whose every new class costs minutes of compiles before its
    # first answer); None: EXPLORE_ONE_IN (1 in 8).
    explore_one_in: int | None = None

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
        if not all(isinstance(d, Deviation) for d in self.deviations):
            raise ValueError(f"KernelInfo({self.name!r}).deviations: expected a tuple of Deviation")
        if self.backward is not None:
            if not isinstance(self.backward, Backward):
                raise ValueError(f"KernelInfo({self.name!r}).backward: expected a Backward or None, "
                                 f"got {type(self.backward).__name__}")
            self.backward.check(self.name, self.options)
        if self.explore_one_in is not None and (type(self.explore_one_in) is not int or self.explore_one_in < 0):
            raise ValueError(f"KernelInfo({self.name!r}).explore_one_in: expected None or an int >= 0, "
                             f"got {self.explore_one_in!r}")
        if self.exp not in EXPS:
            raise ValueError(f"KernelInfo({self.name!r}).exp: expected one of {EXPS}, got {self.exp!r}")

    def supports(self, option: str) -> bool:
        return option in self.options

    def backward_options(self) -> frozenset[str]:
        """The options a backward problem may use: declared by both the forward and its backward."""
        return frozenset() if self.backward is None else self.backward.options & self.options

    def replace(self, **changes) -> "KernelInfo":
        return dataclasses.replace(self, **changes)

    def deviations_for(self, prop: str, problem, variants=()) -> tuple[Deviation, ...]:
        return tuple(d for d in self.deviations if d.applies(prop, problem, variants))

    def compile_class(self, problem) -> tuple | None:
        """The compile key of `problem` (None when the implementation declares none)."""
        return None if self.compile_key is None else tuple(self.compile_key(problem))


FORCED_ONLY = "(forced only)"   # KernelInfo.coverage: the end of a path's name that only a switch selects


def _size_class(n: int) -> str:
    """How a JIT sees an integer size or stride: the constant 1, divisible by 16, or neither."""
    return "1" if n == 1 else ("16" if n % 16 == 0 else "-")


def jit_specialization_key(problem, ignore: frozenset = frozenset()) -> tuple:
    """The compile key of a JIT that specializes on dtypes, compile-time constants and the
    divisibility by 16 of every size and stride (cuTile's JIT; Triton specializes integer arguments and
    pointer alignment the same way): dtypes, chunk size, headdim, dstate, the options the call uses
    (an absent tensor is another kernel signature), and each size's class (1, divisible by 16 or
    not) for batch, seqlen, heads, groups and chunks, and whether each input's strides are
    multiples of 16 bytes. `ignore`: options that do not change the call (an adapter that passes zeros
    for an absent tensor). Takes any object with SSDProblem's fields (kernels import no properties)."""
    b, l, h, p, g, n = (problem.batch, problem.seqlen, problem.nheads, problem.headdim, problem.ngroups,
                        problem.dstate)
    nchunks = -(-l // problem.chunk_size)
    # strides in bytes divisible by 16 or not: the element strides of x, dt, B/C (h*p, h, g*n per token,
    # l times those per sample) taken to gcd with 16, which covers every element size
    strides = tuple(math.gcd(16, s) for s in (h, l * h, h * p, l * h * p, g * n, l * g * n))
    return (problem.dtype, problem.dt_dtype if problem.dtype != "float32" else "float32", problem.chunk_size,
            problem.headdim, problem.dstate, tuple(sorted(problem.options() - ignore)),
            tuple(_size_class(k) for k in (b, l, h, g, nchunks, h // g)), strides)


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
                    return_varlen_states=False, dt=None, x=None, cu_seqlens=None,
                    return_states_dtype=None) -> set[str]:
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
    if x is not None and x.dtype != torch.float32:
        narrow = {"dt_input_dtype": (dt,), "states_input_dtype": (initial_states,), "params_input_dtype": (D, dt_bias)}
        used.update(k for k, ts in narrow.items() if any(t is not None and t.dtype == x.dtype for t in ts))
    if return_states_dtype is not None:
        used.add("return_states_dtype")
    if (initial_states is not None and cu_seqlens is not None and x is not None
            and initial_states.shape[0] != x.shape[0]):  # one per sequence (the contract checked the count)
        used.add("varlen_initial_states")
    return used


def check_call(info: KernelInfo, x, dt, A, B, C, chunk_size, D=None, z=None, dt_bias=None, initial_states=None,
               seq_idx=None, cu_seqlens=None, dt_softplus=False, dt_limit=(0.0, float("inf")),
               return_final_states=False, return_varlen_states=False, return_states_dtype=None) -> None:
    """The first line of every implementation: the contract (kernels.contract.check_ssd_args), then
    what `info` declares; either raises an error that names the argument."""
    from kernels.contract import check_ssd_args  # noqa: PLC0415 (contract needs nothing from here)
    check_ssd_args(x, dt, A, B, C, chunk_size, D=D, z=z, dt_bias=dt_bias, initial_states=initial_states,
                   seq_idx=seq_idx, cu_seqlens=cu_seqlens, dt_limit=dt_limit,
                   return_varlen_states=return_varlen_states, return_states_dtype=return_states_dtype)
    check_supported(info, dtype=str(x.dtype).removeprefix("torch."), chunk_size=chunk_size, seqlen=x.shape[1],
                    headdim=x.shape[3], dstate=B.shape[3], ngroups=B.shape[2], nheads=x.shape[2],
                    options=options_of_call(D=D, z=z, dt_bias=dt_bias, dt_softplus=dt_softplus, dt_limit=dt_limit,
                                            initial_states=initial_states, seq_idx=seq_idx,
                                            return_final_states=return_final_states,
                                            return_varlen_states=return_varlen_states, dt=dt, x=x,
                                            cu_seqlens=cu_seqlens, return_states_dtype=return_states_dtype))


# Registered short names -> "module:attribute" of their KernelInfo; imported lazily so that a
# missing GPU toolchain or peer package only matters when that implementation is asked for.
_REGISTERED: dict[str, str] = {
    "torch-ref": "kernels.torch_ref:INFO",
    "cutile": "kernels.cutile:INFO",
    "tilegym": "kernels.peers.tilegym:INFO",
    "mamba-ssm": "kernels.peers.mamba_ssm:INFO",
    "vllm": "kernels.peers.vllm:INFO",
    "vllm-first-config": "kernels.peers.vllm:FIRST_CONFIG",
    "tilegym-first-config": "kernels.peers.tilegym:FIRST_CONFIG",
}


def registered_names() -> tuple[str, ...]:
    return tuple(_REGISTERED)


def default_info(fn: Callable, name: str) -> KernelInfo:
    """What an undeclared `module:function` revision is assumed to support: the whole contract."""
    return KernelInfo(name=name, fn=fn, device="cuda", notes="undeclared: assumed full contract")


def split_file_spec(spec: str) -> tuple[str, str] | None:
    """(file, attribute) of a `path/to/file.py:function` spec; None for any other spec."""
    path, sep, attr = spec.rpartition(":")
    return (path, attr) if sep and path.endswith(".py") else None


def _load_file(path: str, what: str):
    """Import a Python file as a module of its own (its directory first on sys.path while it loads,
    so its sibling modules import); the same file gives the same module on every lookup."""
    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise ValueError(f"{what}: no such file {path!r} (resolved to {file}); expected path/to/file.py:function")
    name = f"ssdcheck_impl_{file.stem}_{hashlib.sha1(str(file).encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module            # before exec: dataclasses and pickling look modules up by name
    sys.path.insert(0, str(file.parent))
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise ValueError(f"{what}: importing {str(file)!r} failed ({type(e).__name__}: {e})") from e
    finally:
        sys.path.remove(str(file.parent))
    return module


def _import_attr(path: str, what: str):
    in_file = split_file_spec(path)
    if in_file:
        (module_name, attr), module = in_file, _load_file(in_file[0], what)
    else:
        module_name, _, attr = path.partition(":")
        if not module_name or not attr:
            raise ValueError(f"{what}: expected a registered name {registered_names()}, "
                             f"'package.module:function' or 'path/to/file.py:function', got {path!r}")
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
    """A KernelInfo for a registered name, a `package.module:function` or a `path/to/file.py:function`."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"impl: expected a registered name {registered_names()}, "
                         f"'package.module:function' or 'path/to/file.py:function', got {spec!r}")
    if spec in _REGISTERED:
        return _import_attr(_REGISTERED[spec], f"impl {spec!r}")
    if ":" not in spec:
        raise ValueError(f"impl: unknown implementation {spec!r}; registered: {', '.join(registered_names())}; "
                         f"or give 'package.module:function' or 'path/to/file.py:function'")
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
