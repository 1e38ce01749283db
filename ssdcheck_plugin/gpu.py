"""GPU hosts: xdist workers per CPU core spread over the GPUs, the cuTile compile cache, compile vs run time.

* `pytest -n auto` on a GPU host starts one worker per CPU core, at least one per GPU
  (`auto_num_workers`: a cold run is compile-bound, and compiles are CPU work), and worker `gwN`
  pins itself to GPU `N % device_count` with `torch.cuda.set_device` (`pin_xdist_worker`), so the
  workers spread over the GPUs round-robin and `"cuda"` tensors, kernels and streams of a worker
  live on its GPU.
* cuTile (cuda-tile 1.7) keeps compiled cubins in an SQLite cache whose directory it reads from
  `CUDA_TILE_CACHE_DIR` when `cuda.tile` is imported (`cutile_cache._env.get_cache_dir_from_env`;
  default `$XDG_CACHE_HOME/cutile-python`, "off"/"0"/"none" disable it; `CUDA_TILE_CACHE_SIZE`
  caps it, 2 GiB by default). We set that variable before anything imports cuda.tile and, if it
  is already imported, also `cuda.tile._cext.default_tile_context.config.cache_dir`.
* `CompileTimer` wraps `cuda.tile._compile.compile_tile` (every compile, cache hits included) and
  `compile_cubin` (the tileiras run on a cache miss) to add up their wall time. cuda.tile imports
  `_compile` lazily at the first launch, and importing it ourselves costs seconds, so `watch()`
  adds a post-import hook that wraps the two functions the moment the code under test imports it.
* cuTile's disk cache has no lock: xdist workers that miss on the same kernel variant at once each
  run tileiras for it (common early in a cold gate run, where 16 workers draw similar problems).
  With `dedup_dir` set, `CompileTimer` also wraps `compile_cubin` in `once_per_input`: one process
  compiles an input while the others wait on a file lock, then copy its cubin.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib.abc
import importlib.util
import inspect
import os
import shutil
import sys
import threading
import time
from pathlib import Path

DEFAULT_COMPILE_CACHE = ".ssdcheck-cache/cutile"


def worker_index(worker_id: str | None) -> int | None:
    """'gw3' -> 3; None or 'master' -> None."""
    if not worker_id or not worker_id.startswith("gw"):
        return None
    try:
        return int(worker_id[2:])
    except ValueError:
        return None


def worker_device(worker_id: str | None, device_count: int) -> int | None:
    """The GPU a worker uses: gwN -> N % device_count (None without xdist or without GPUs)."""
    n = worker_index(worker_id)
    if n is None or device_count <= 0:
        return None
    return n % device_count


def pin_xdist_worker(worker_id: str | None = None, cuda=None) -> int | None:
    """Pin this xdist worker to its GPU; returns the device index, or None when nothing was pinned."""
    worker_id = worker_id if worker_id is not None else os.environ.get("PYTEST_XDIST_WORKER")
    if worker_index(worker_id) is None:
        return None
    if cuda is None:
        import torch
        cuda = torch.cuda
    if not cuda.is_available():
        return None
    device = worker_device(worker_id, cuda.device_count())
    if device is not None:
        cuda.set_device(device)
    return device


def gpu_count(cuda=None) -> int:
    if cuda is None:
        import torch
        cuda = torch.cuda
    return cuda.device_count() if cuda.is_available() else 0


def cpu_cores() -> int:
    """The CPU cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def auto_num_workers(numprocesses, env=os.environ, cuda=None, cores=None) -> int | None:
    """`-n auto` on a GPU host: one worker per CPU core, at least one per GPU. A cold run is
    compile-bound and compiling is CPU work, so on one GPU every core's worker shares it (one worker
    per GPU left 15 of 16 cores idle); workers spread over several GPUs round-robin (worker_device).
    None lets xdist decide (the CPU count) where no GPU is visible."""
    if numprocesses != "auto" or env.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    n = gpu_count(cuda)
    return max(n, cores if cores is not None else cpu_cores()) if n > 0 else None


def resolve_compile_cache(option: str | None, rootdir: str | Path, env=os.environ) -> str | None:
    """Where cuTile caches cubins: --ssd-compile-cache, else $SSDCHECK_COMPILE_CACHE, else an explicit
    $CUDA_TILE_CACHE_DIR, else <rootdir>/.ssdcheck-cache/cutile (the plugin passes its state folder as
    rootdir: $SSDCHECK_STATE_DIR or pytest's rootdir). "off" (or 0/none) disables the cache."""
    choice = option or env.get("SSDCHECK_COMPILE_CACHE") or env.get("CUDA_TILE_CACHE_DIR")
    if choice is None:
        return str(Path(rootdir) / DEFAULT_COMPILE_CACHE)
    if choice.strip().lower() in ("0", "off", "none", ""):
        return None
    p = Path(choice)
    return str(p if p.is_absolute() else Path(rootdir) / p)


def apply_compile_cache(cache_dir: str | None, env=os.environ) -> None:
    """Point cuTile at `cache_dir` (None: disable) for this process and the ones it starts."""
    env["CUDA_TILE_CACHE_DIR"] = cache_dir if cache_dir is not None else "off"
    if "cuda.tile" in sys.modules:    # already imported: its context read the variable at import
        try:
            from cuda.tile._cext import default_tile_context
            default_tile_context.config.cache_dir = cache_dir
        except Exception:
            pass


class CompileTimer:
    """Adds up the wall time cuTile spends compiling (all compiles) and in tileiras (cache misses)."""

    def __init__(self, dedup_dir: str | Path | None = None):
        self.compile_calls = 0
        self.compile_s = 0.0
        self.tileiras_calls = 0
        self.tileiras_s = 0.0
        self.installed = False
        self.dedup_dir = dedup_dir      # see once_per_input; tileiras_* then count real runs only
        self._lock = threading.Lock()
        self._hook = None

    MODULE = "cuda.tile._compile"

    def watch(self) -> None:
        """Time compiles from now on: wrap now if cuda.tile._compile is loaded, else when it loads."""
        if not self.maybe_install() and self._hook is None:
            self._hook = _PostImportHook(self.MODULE, self._install_into)
            sys.meta_path.insert(0, self._hook)

    def unwatch(self) -> None:
        if self._hook is not None and self._hook in sys.meta_path:
            sys.meta_path.remove(self._hook)
        self._hook = None

    def maybe_install(self) -> bool:
        """Install if cuda.tile._compile is imported (never import it ourselves)."""
        if not self.installed and self.MODULE in sys.modules:
            self._install_into(sys.modules[self.MODULE])
        return self.installed

    def _install_into(self, mod) -> None:
        for name, attr in (("compile_tile", "compile"), ("compile_cubin", "tileiras")):
            fn = getattr(mod, name, None)
            if fn is not None and not getattr(fn, "_ssdcheck_timed", False):
                wrapped = self._timed(fn, attr)
                if name == "compile_cubin" and self.dedup_dir is not None:
                    wrapped = once_per_input(wrapped, self.dedup_dir)
                setattr(mod, name, wrapped)
        self.installed = True

    def _timed(self, fn, attr: str):
        timer = self

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                dt = time.perf_counter() - t0
                with timer._lock:
                    setattr(timer, f"{attr}_calls", getattr(timer, f"{attr}_calls") + 1)
                    setattr(timer, f"{attr}_s", getattr(timer, f"{attr}_s") + dt)
        timed._ssdcheck_timed = True
        timed.__wrapped__ = fn
        return timed

    def to_dict(self) -> dict:
        return {"measured": self.installed, "compile_calls": self.compile_calls,
                "compile_s": round(self.compile_s, 3), "tileiras_calls": self.tileiras_calls,
                "tileiras_s": round(self.tileiras_s, 3)}

    @staticmethod
    def merge(a: dict, b: dict) -> dict:
        return {"measured": bool(a.get("measured") or b.get("measured")),
                **{k: round(a.get(k, 0) + b.get(k, 0), 3) for k in
                   ("compile_calls", "compile_s", "tileiras_calls", "tileiras_s")}}


def once_per_input(compile_cubin, directory: str | Path):
    """Wrap cuTile's `compile_cubin(fname_bytecode, compiler_options, sm_arch, ...)` so that processes
    sharing `directory` run tileiras once per identical input (bytecode, options, arch, preview
    features, linker inputs, toolchain): the first takes a file lock and compiles, the others wait on
    it and copy the cubin it left. Anything unexpected falls back to compiling as usual."""
    directory = Path(directory)
    real = inspect.unwrap(compile_cubin)

    def once(fname_bytecode, compiler_options, sm_arch, *args, **kwargs):
        try:
            named = inspect.signature(real).bind(fname_bytecode, compiler_options, sm_arch, *args, **kwargs).arguments
            h = hashlib.sha256(Path(fname_bytecode).read_bytes())
            tool = shutil.which("tileiras") or ""
            h.update(repr((repr(compiler_options), sm_arch, tuple(named.get("preview_features", ())),
                           tuple(map(str, named.get("linker_inputs", ()))), tool,
                           os.stat(tool).st_mtime_ns if tool else 0)).encode())
            key = h.hexdigest()
            directory.mkdir(parents=True, exist_ok=True)
            lock = open(directory / f"{key}.lock", "w")
        except Exception:  # noqa: BLE001 (best effort: an odd call compiles as if unwrapped)
            return compile_cubin(fname_bytecode, compiler_options, sm_arch, *args, **kwargs)
        done = directory / f"{key}.cubin"
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)      # released when the file closes
            except OSError:                           # a file system without locks: compile alone
                return compile_cubin(fname_bytecode, compiler_options, sm_arch, *args, **kwargs)
            if done.exists():
                out = Path(fname_bytecode).with_suffix(".cubin")
                shutil.copyfile(done, out)
                return out
            out = compile_cubin(fname_bytecode, compiler_options, sm_arch, *args, **kwargs)
            tmp = directory / f"{key}.{os.getpid()}.tmp"
            shutil.copyfile(out, tmp)
            os.replace(tmp, done)
            return out

    once._ssdcheck_timed = True
    once.__wrapped__ = compile_cubin
    return once


class _PostImportHook(importlib.abc.MetaPathFinder):
    """Calls `callback(module)` right after the module `name` is executed by a normal import."""

    def __init__(self, name: str, callback):
        self.name = name
        self.callback = callback
        self._busy = False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self._busy:
            return None
        self._busy = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        exec_module, callback = spec.loader.exec_module, self.callback

        def exec_then_callback(module):
            exec_module(module)
            try:
                callback(module)
            except Exception:  # timing is best effort; never break the import
                pass
        spec.loader.exec_module = exec_then_callback
        return spec
