"""Compiling TileGym's autotune candidates ahead of its searches, on the CPU.

TileGym as shipped tunes each new shape with `cuda.tile.tune.exhaustive_search`, which launches every
config of a kernel's search space one after another in the calling process, and each launch of a new
specialization waits for its compile: up to 15 + 36 + 72 compiles per forward class (cumsum, state,
output), serial. Compiles are CPU work that other processes can do at once.

    jobs = plan(module, args, kwargs)   # TileGym's mamba2 module, mamba2_chunk_forward's arguments on
                                        # CPU tensors (kernels/peers/tilegym.py _peer_args): no GPU needed
    build(module, jobs[0], "sm_90")     # into cuTile's compile cache, where the search's launch finds it

plan() runs mamba2_chunk_forward on CPU tensors with its CUDA calls stubbed (stream, device
properties, cuTile's launch) and each search recorded instead of run: every candidate a search would
launch, and the launch of the config it picks, becomes a job (kernel attribute name, compiler hints,
the symbol of the signature cuTile's JIT derives from the launch's arguments,
kernels/cutile/precompile.py `launch_signature`). build() compiles one with cuTile's export path,
which shares compile_tile, and so the disk cache and its key, with the JIT. A search recorded in a
tuning file (kernels/peers/tilegym_tuning.py) compiles only its choice; planning every candidate
anyway leaves the class's candidates compiled for the next shape of that class, which searches for
real. With TILEGYM_DISABLE_AUTOTUNE=1 set, the plan is what that runs: each space's first config.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
from types import SimpleNamespace

import torch

SM_COUNT = 132   # any count: a persistent grid's size changes no compile


def _base_name(module, kernel) -> str:
    """The module attribute naming the @ct.kernel that `kernel` (perhaps with hints replaced) was made from."""
    for name, value in vars(module).items():
        if getattr(value, "_pyfunc", None) is kernel._pyfunc:
            return name
    raise LookupError(f"kernel {kernel._pyfunc.__name__!r}: not a kernel of {module.__name__}")


def _hints(kernel) -> tuple:
    """The compiler hints a kernel object carries, as sorted (name, value) pairs (picklable)."""
    return tuple(sorted(dataclasses.asdict(kernel._compiler_options).items()))


@contextlib.contextmanager
def _recorded(module, seen: list, tuning=None):
    """TileGym's module with each exhaustive_search and ct.launch appending (kernel, args) to `seen`
    (a search: every candidate, in order, and it picks the first; a search `tuning` (a
    tilegym_tuning.Tuning) holds a usable choice for: that candidate alone, as the GPU run takes it
    without searching) and its CUDA queries stubbed; its tuning caches empty meanwhile, so every search
    of the call is seen. Not thread-safe: it swaps module attributes."""
    import cuda.tile as ct
    from kernels.peers.tilegym_tuning import kernel_names
    name_of = kernel_names(module)

    def search(configs, stream, grid_fn, kernel, args_fn, hints_fn=None, *more, **kw):
        configs = list(configs)
        chosen = None if tuning is None else tuning.recorded(name_of(kernel), configs, args_fn)
        if chosen is not None:
            configs = [chosen]
        for cfg in configs:
            base = kernel if isinstance(kernel, ct.kernel) else kernel(cfg)
            seen.append((base.replace_hints(**(hints_fn(cfg) if hints_fn else {})), args_fn(cfg)))
        return SimpleNamespace(best=SimpleNamespace(config=configs[0]))

    saved = (module.exhaustive_search, ct.launch, torch.cuda.current_stream, torch.cuda.get_device_properties)
    caches = {k: dict(v) for k, v in vars(module).items() if k.endswith("_tune_cache") and isinstance(v, dict)}
    for k in caches:
        getattr(module, k).clear()
    module.exhaustive_search = search
    ct.launch = lambda stream, grid, kernel, args: seen.append((kernel, args))
    torch.cuda.current_stream = lambda device=None: None
    torch.cuda.get_device_properties = lambda device=None: SimpleNamespace(multi_processor_count=SM_COUNT)
    try:
        yield
    finally:
        module.exhaustive_search, ct.launch, torch.cuda.current_stream, torch.cuda.get_device_properties = saved
        for k, v in caches.items():
            getattr(module, k).clear()
            getattr(module, k).update(v)


def plan(module, args: tuple, kwargs: dict, tuning=None) -> list[tuple[str, tuple, str]]:
    """The compiles module.mamba2_chunk_forward(*args, **kwargs) makes (CPU tensors), each once, in launch
    order: (kernel attribute name, compiler hints, JIT kernel symbol); a search `tuning` recorded costs
    its chosen candidate only."""
    from cuda.tile.compilation import mangle_kernel_name
    from kernels.cutile.precompile import launch_signature
    seen: list = []
    with _recorded(module, seen, tuning):
        module.mamba2_chunk_forward(*args, **kwargs)
    jobs = []
    for kernel, launch_args in seen:
        symbol = mangle_kernel_name(kernel._pyfunc.__name__, launch_signature(kernel, launch_args))
        job = (_base_name(module, kernel), _hints(kernel), symbol)
        if job not in jobs:
            jobs.append(job)
    return jobs


def build(module, job: tuple[str, tuple, str], arch: str) -> None:
    """Compile one plan() job for `arch` ("sm_90") through cuTile's compile cache (a hit costs the
    bytecode only). Raises what the compile raises."""
    from cuda.tile.compilation import demangle_kernel_name, export_kernel
    name, hints, symbol = job
    kernel = getattr(module, name).replace_hints(**dict(hints))
    _, sig = demangle_kernel_name(symbol)
    export_kernel(kernel, [sig], io.BytesIO(), gpu_code=arch, output_format="cubin")
