"""Compiling a forward's kernels before the forward runs, on the CPU: what a call will compile, and one compile.

    jobs = plan(**kwargs)        # kwargs as for ssd_forward, on CPU tensors: no GPU needed
    build(jobs[0], "sm_90")      # into cuTile's compile cache, where the JIT finds it

plan() runs ssd_forward's Python side with its CUDA calls stubbed (launches_stubbed) and turns each
launch's arguments into the KernelSignature cuTile's JIT derives from them (launch_signature). A job is
(kernel function name, occupancy hint, worker-warps hint, the JIT's kernel symbol): plain data that
another process can take, since the symbol demangles to the signature (the symbol field aside, which
compile_tile fills the same way for the JIT). build() compiles that signature with cuTile's export
path, which shares compile_tile, and so the disk cache and its key, with the JIT: the launch that
follows finds the cubin instead of running tileiras. A model that missed the JIT's rule would only
cost a useless compile; the count of tileiras runs of the launching process shows it
(ssdcheck_plugin/precompile.py reports both).
"""
from __future__ import annotations

import contextlib
import inspect
import io
from types import SimpleNamespace

import torch


@contextlib.contextmanager
def launches_stubbed(launch=None, current_stream=None):
    """ssd_forward on CPU tensors with every CUDA call it makes stubbed out (the device check, the
    device context, the stream lookup, cuTile's launch): what is left is the Python side, on any
    machine. `launch(stream, grid, kernel, args)` and `current_stream(device=None)` replace the no-op
    stubs (plan() and tests record with them). Not thread-safe: it swaps module attributes."""
    from kernels.cutile import launcher
    saved = (launcher._require_cuda, launcher._ct, torch.cuda.device, torch.cuda.current_stream,
             torch.cuda.current_device)
    launcher._require_cuda = lambda x: None
    launcher._ct = lambda: SimpleNamespace(launch=launch or (lambda stream, grid, kernel, args: None))
    torch.cuda.device = lambda device: contextlib.nullcontext()
    torch.cuda.current_stream = current_stream or (lambda device=None: None)
    torch.cuda.current_device = lambda: 0
    try:
        yield
    finally:
        (launcher._require_cuda, launcher._ct, torch.cuda.device, torch.cuda.current_stream,
         torch.cuda.current_device) = saved


def jit_array(t: torch.Tensor):
    """The ArrayConstraint cuTile's JIT derives from tensor `t` at a launch, as modelled here: dimensions
    of size 1 constant, the others divisible by 16 or not; strides divisible by 16 bytes or not, strides
    of 1 (the last, and any other) the constant 1; no aliasing. The model is checked against a symbol
    Nsight Compute recorded (tests/test_cutile_compile.py)."""
    import cuda.tile as ct
    from cuda.tile.compilation import ArrayConstraint
    dtypes = {torch.bfloat16: ct.bfloat16, torch.float16: ct.float16, torch.float32: ct.float32, torch.int32: ct.int32}
    n, unit = t.dim(), max(16 // t.element_size(), 1)
    inner = t.stride()[:-1]   # a stride of 1 is a constant too (D as (h, 1): Nsight Compute, lab/reports/2026-11-30-ftz-decays.md)
    return ArrayConstraint(
        dtypes[t.dtype], n, index_dtype=ct.int32, alias_groups=(),
        stride_lower_bound_incl=tuple(None if st == 1 else 0 for st in inner) + (None,),
        may_alias_internally=False, stride_constant=tuple(1 if st == 1 else None for st in inner) + (1,),
        shape_constant=tuple(1 if d == 1 else None for d in t.shape),
        stride_divisible_by=tuple(unit if st % unit == 0 else 1 for st in t.stride()[:-1]) + (1,),
        shape_divisible_by=tuple(1 if d == 1 else (16 if d % 16 == 0 else 1) for d in t.shape),
        base_addr_divisible_by=16)


def launch_signature(kernel, args: tuple):
    """The KernelSignature cuTile's JIT compiles `kernel` with for a launch with `args` (jit_array for
    tensors, constants by annotation, other scalars int32 or float32)."""
    import cuda.tile as ct
    from cuda.tile.compilation import CallingConvention, ConstantConstraint, KernelSignature, ScalarConstraint
    params = []
    for p, a in zip(inspect.signature(kernel._pyfunc).parameters.values(), args):
        if isinstance(a, torch.Tensor):
            params.append(jit_array(a))
        elif "Constant" in str(p.annotation):
            params.append(ConstantConstraint(a))
        else:
            params.append(ScalarConstraint(ct.float32 if isinstance(a, float) else ct.int32))
    return KernelSignature(params, CallingConvention.cutile_python_v2())


def recorded_launches(kwargs: dict) -> list[tuple[object, object]]:
    """[(kernel as launched, with its hints; its launch_signature)] of ssd_forward(**kwargs) on CPU tensors."""
    from kernels.cutile.launcher import ssd_forward
    seen = []
    with launches_stubbed(launch=lambda stream, grid, kernel, args: seen.append((kernel, args))):
        ssd_forward(**kwargs)
    return [(kernel, launch_signature(kernel, args)) for kernel, args in seen]


def _hints_of(kernel) -> tuple[str, int | None, int | None]:
    """(base kernel's function name, occupancy, worker warps) of a kernel the launcher launched."""
    from kernels.cutile import launcher
    for (_, occupancy, warps), hinted in launcher._HINTED.items():
        if hinted is kernel:
            return kernel._pyfunc.__name__, occupancy, warps
    return kernel._pyfunc.__name__, None, None


def plan(**kwargs) -> list[tuple[str, int | None, int | None, str]]:
    """The compiles ssd_forward(**kwargs) needs, each once, in launch order (see the module docstring).
    kwargs on CPU tensors; their values are never read by the kernels' host side, only shapes,
    strides and dtypes."""
    from cuda.tile.compilation import mangle_kernel_name
    jobs = []
    for kernel, sig in recorded_launches(kwargs):
        name, occupancy, warps = _hints_of(kernel)
        job = (name, occupancy, warps, mangle_kernel_name(name, sig))
        if job not in jobs:
            jobs.append(job)
    return jobs


def build(job: tuple[str, int | None, int | None, str], arch: str) -> None:
    """Compile one plan() job for `arch` ("sm_90") through cuTile's compile cache (a hit costs the
    bytecode only). Raises what the compile raises."""
    from cuda.tile.compilation import demangle_kernel_name, export_kernel
    from kernels.cutile import kernels as K
    name, occupancy, warps, symbol = job
    kfn = getattr(K, name)
    hints = {k: v for k, v in (("occupancy", occupancy), ("num_worker_warps", warps)) if v is not None}
    if hints:
        kfn = kfn.replace_hints(**hints)
    _, sig = demangle_kernel_name(symbol)
    export_kernel(kfn, [sig], io.BytesIO(), gpu_code=arch, output_format="cubin")
