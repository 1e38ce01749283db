"""TileGym's autotuning choices, kept across processes so that a later race re-times TileGym at the
configuration its own exhaustive search chose, without tuning again.

TileGym 1.5.1 tunes each new shape with `cuda.tile.tune.exhaustive_search` (2-3 minutes per shape on
an H200) and keeps the choice only in module dictionaries, so every race process paid it again and
the race needed ~55 device-minutes. `install(path)` wraps the `exhaustive_search` name that
`tilegym.ops.cutile.mamba2` imported (the peer's files stay untouched):

* a search whose kernel and arguments match a recorded choice returns that choice, as the very
  candidate object TileGym passed in (TileGym reads only `result.best.config`);
* any other search runs for real, and its choice is recorded with the time it took.

A choice is used only on the GPU model and TileGym version it was tuned on. The race's JSON says for
each TileGym timing whether its configuration was tuned in the run or recorded earlier, and the file
keeps when and where each choice was tuned.

The property suite uses it too: with `SSDCHECK_TILEGYM_TUNING=PATH`, the shipped `tilegym` mode
(kernels/peers/tilegym.py) installs it at the peer's first call. Each pytest-xdist worker then writes
its own file beside PATH (`STEM.gw3.json` for `STEM.json`), so workers never overwrite each other, and
every process reads PATH and all those siblings. Which choice TileGym runs is still its own search's;
only the search is not repeated. A rerun with the same derandomized draws therefore skips the tuning
the run before it paid, and a fill cut by its time budget goes on where it stopped.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

SCHEMA = "ssdcheck-tilegym-tuning/1"


def signature(kernel_name: str, args) -> str:
    """What identifies a search: the kernel and the shapes, strides and dtypes of its arguments (as
    TileGym's own `_tuning_key`), taken from the first candidate's arguments."""
    def one(a):
        if hasattr(a, "shape") and hasattr(a, "stride") and hasattr(a, "dtype"):
            return [list(a.shape), list(a.stride()), str(a.dtype)]
        if a is None or isinstance(a, (bool, int, float, str)):
            return a
        return type(a).__name__
    return json.dumps([kernel_name, [one(a) for a in args]])


class Tuning:
    """Recorded choices (loaded from and saved to `path`) and what this process did with them."""

    def __init__(self, path: str | os.PathLike, device: str, version: str | None, writer: str | None = None):
        self.path, self.device, self.version = Path(path), device, version
        # with a writer (e.g. an xdist worker's id) this process saves to its own sibling of path
        self.save_path = self.path if writer is None else self.path.with_name(
            f"{self.path.stem}.{writer}{self.path.suffix}")
        self.entries: dict[str, dict] = {}
        self.context: dict = {}            # set by the caller: which shape and chunk are running
        self.events: list[dict] = []       # {"kind": "recorded" | "tuned", "kernel", "seconds", ...}
        siblings = sorted(self.path.parent.glob(f"{self.path.stem}.*{self.path.suffix}"))
        for f in ([self.path] if self.path.exists() else []) + siblings:
            try:
                doc = json.loads(f.read_text())
            except json.JSONDecodeError as e:
                raise ValueError(f"{f}: not a tuning file ({e})") from None
            if doc.get("schema") != SCHEMA:
                raise ValueError(f"{f}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
            for e in doc["entries"]:
                self.entries.setdefault(e["signature"], e)

    def usable(self, entry: dict) -> bool:
        return entry.get("device") == self.device and entry.get("tilegym") == self.version

    def knows(self, **context) -> bool:
        """Whether every search seen under this context (e.g. shape=..., chunk=...) has a usable choice."""
        hits = [e for e in self.entries.values() if all(e.get("context", {}).get(k) == v for k, v in context.items())]
        return bool(hits) and all(self.usable(e) for e in hits)

    def save(self) -> None:
        doc = {"schema": SCHEMA, "entries": sorted(self.entries.values(), key=lambda e: e["signature"])}
        tmp = self.save_path.with_suffix(self.save_path.suffix + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        os.replace(tmp, self.save_path)

    def recorded(self, kernel_name: str, configs: list, args_fn):
        """The candidate of `configs` a usable recorded choice names for this search, or None."""
        entry = self.entries.get(signature(kernel_name, args_fn(configs[0])))
        if entry is not None and self.usable(entry):
            return next((c for c in configs if vars(c) == entry["config"]), None)
        return None

    def search(self, real, kernel_name: str, configs, stream, grid_fn, kernel, args_fn, hints_fn):
        """real(configs, stream, grid_fn, kernel, args_fn, hints_fn) (exhaustive_search), recorded."""
        configs = list(configs)
        chosen = self.recorded(kernel_name, configs, args_fn)
        if chosen is not None:
            self.events.append({"kind": "recorded", "kernel": kernel_name, "seconds": 0.0})
            return SimpleNamespace(best=SimpleNamespace(config=chosen))
        sig = signature(kernel_name, args_fn(configs[0]))
        t = time.monotonic()
        result = real(configs, stream, grid_fn, kernel, args_fn, hints_fn)
        seconds = round(time.monotonic() - t, 2)
        self.entries[sig] = {"signature": sig, "kernel": kernel_name, "config": dict(vars(result.best.config)),
                             "device": self.device, "tilegym": self.version, "tune_s": seconds,
                             "context": dict(self.context),
                             "tuned": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        self.events.append({"kind": "tuned", "kernel": kernel_name, "seconds": seconds})
        self.save()
        return result

    def take_events(self) -> list[dict]:
        out, self.events = self.events, []
        return out


def install(path: str | os.PathLike, module=None, device: str | None = None, version: str | None = None,
            writer: str | None = None) -> Tuning:
    """Wrap `module.exhaustive_search` (default: tilegym.ops.cutile.mamba2's) with a Tuning on `path`
    (saved to its `writer` sibling when given), for this GPU model and TileGym version unless given."""
    if module is None:
        import tilegym.ops.cutile.mamba2 as module
    if device is None:
        import torch
        device = torch.cuda.get_device_name()
    tuning = Tuning(path, device, installed_version() if version is None else version, writer)
    real = getattr(module, "exhaustive_search")
    real = getattr(real, "__wrapped__", real)          # installing twice wraps the real search once
    name_of = kernel_names(module)

    def exhaustive_search(configs, stream, grid_fn, kernel, args_fn, hints_fn, *more, **kw):
        name = name_of(kernel)
        return tuning.search(lambda *a: real(*a, *more, **kw), name, configs, stream, grid_fn, kernel, args_fn,
                             hints_fn)

    exhaustive_search.__wrapped__ = real
    module.exhaustive_search = exhaustive_search
    return tuning


def installed_version() -> str | None:
    """The installed TileGym's version (None for a peer imported from a source tree)."""
    import importlib.metadata
    try:
        return importlib.metadata.version("tilegym")
    except importlib.metadata.PackageNotFoundError:
        return None


def kernel_names(module):
    """kernel -> the name `module` holds it under (a search's kernel_name; its type's name if none)."""
    names = {id(v): k for k, v in vars(module).items()}
    return lambda kernel: names.get(id(kernel), type(kernel).__name__)
