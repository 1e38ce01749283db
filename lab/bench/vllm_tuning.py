"""vLLM's autotuning choices, kept across processes: a later race times vLLM at the configurations its
own autotuner chose, without tuning again (as kernels/peers/tilegym_tuning.py does for TileGym).

vLLM 0.33.0 launches every SSD kernel through `launch_autotuned` (ops/triton_helpers.py l.11-34): the
first launch for a key autotunes, and the pick is kept in the module dictionary `_autotuned_configs`,
keyed by (kernel, the kernel's autotune key values, the dtype or None of every argument); later
launches call `kernel.fn[grid](**kwargs, **config.all_kwargs())`. `save` writes that dictionary out;
`install` fills it back before the first launch, each config as the `all_kwargs()` it was launched
with, so a recorded key never autotunes. The peer's files stay untouched.

A choice is used only on the GPU model, Triton version and vLLM version it was tuned on, and never
when VLLM_TRITON_FORCE_FIRST_CONFIG is set (that mode picks by order, not by time).
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from pathlib import Path

import torch

SCHEMA = "ssdcheck-vllm-tuning/1"
HELPERS = "vllm.model_executor.layers.mamba.ops.triton_helpers"
# the five SSD kernels, by the module that defines each
KERNELS = {
    "_chunk_cumsum_fwd_kernel": "ssd_chunk_state",
    "_chunk_state_fwd_kernel": "ssd_chunk_state",
    "_state_passing_fwd_kernel": "ssd_state_passing",
    "_bmm_chunk_fwd_kernel": "ssd_bmm",
    "_chunk_scan_fwd_kernel": "ssd_chunk_scan",
}


def dumps(entries: list[dict]) -> str:
    """The file's text: one entry per line (a pick's key runs to 25 values: indented, the file was 3.5x
    the size, and it is tracked)."""
    lines = ",\n".join(" " + json.dumps(e, separators=(",", ":")) for e in entries)
    return f'{{"schema": "{SCHEMA}", "entries": [\n{lines}\n]}}\n'


class RecordedConfig:
    """What launch_autotuned reads of a config on a cache hit: `all_kwargs()` (and `pre_hook`)."""

    def __init__(self, kwargs: dict):
        self.kwargs, self.pre_hook = dict(kwargs), None

    def all_kwargs(self) -> dict:
        return dict(self.kwargs)


def _encode(v):
    return {"dtype": str(v).removeprefix("torch.")} if isinstance(v, torch.dtype) else v


def _decode(v):
    return getattr(torch, v["dtype"]) if isinstance(v, dict) else v


def _kernels() -> dict:
    base = HELPERS.rpartition(".")[0]
    return {name: getattr(sys.modules[f"{base}.{mod}"], name) for name, mod in KERNELS.items()}


class Tuning:
    """Recorded choices (loaded from and saved to `path`) for one GPU model, Triton and vLLM version."""

    def __init__(self, path: str | os.PathLike, device: str, triton: str | None, vllm: str):
        self.path, self.device, self.triton, self.vllm = Path(path), device, triton, vllm
        self.entries: list[dict] = []
        self.installed = 0
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            if doc.get("schema") != SCHEMA:
                raise ValueError(f"{self.path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
            self.entries = list(doc["entries"])

    def usable(self, entry: dict) -> bool:
        return (entry.get("device"), entry.get("triton"), entry.get("vllm")) == (self.device, self.triton, self.vllm)

    def install(self) -> int:
        """Fill vLLM's launch cache with the usable recorded choices; returns how many."""
        cache, kernels = sys.modules[HELPERS]._autotuned_configs, _kernels()
        for e in filter(self.usable, self.entries):
            key = (kernels[e["kernel"]], *(_decode(v) for v in e["key"]))
            if key not in cache:
                cache[key] = RecordedConfig(e["config"])
                self.installed += 1
        return self.installed

    def tuned_since_install(self) -> int:
        """Keys vLLM autotuned in this process so far (not recorded before)."""
        return sum(not isinstance(c, RecordedConfig) for c in sys.modules[HELPERS]._autotuned_configs.values())

    def save(self) -> int:
        """Merge this process's picks into the file; returns the number of entries written."""
        names = {id(k): n for n, k in _kernels().items()}
        known = {(e["kernel"], json.dumps(e["key"]), e.get("device"), e.get("triton"), e.get("vllm"))
                 for e in self.entries}
        now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
        for key, config in sys.modules[HELPERS]._autotuned_configs.items():
            if isinstance(config, RecordedConfig) or id(key[0]) not in names:   # recorded, or not an SSD kernel
                continue
            entry = {"kernel": names[id(key[0])], "key": [_encode(v) for v in key[1:]],
                     "config": config.all_kwargs(), "device": self.device, "triton": self.triton,
                     "vllm": self.vllm, "tuned": now}
            ident = (entry["kernel"], json.dumps(entry["key"]), self.device, self.triton, self.vllm)
            if ident not in known:
                known.add(ident)
                self.entries.append(entry)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(dumps(self.entries))
        os.replace(tmp, self.path)
        return len(self.entries)


def install(path: str | os.PathLike) -> Tuning:
    """Load vLLM's fragment (kernels.peers.vllm), then its recorded choices for this GPU."""
    if os.environ.get("VLLM_TRITON_FORCE_FIRST_CONFIG", "").strip().lower() in ("1", "true"):
        raise RuntimeError("VLLM_TRITON_FORCE_FIRST_CONFIG is set: recorded autotune choices do not apply")
    from kernels.peers import vllm  # noqa: PLC0415 (the peer loads lazily)
    vllm._load()
    import triton  # noqa: PLC0415
    tuning = Tuning(path, torch.cuda.get_device_name(0), triton.__version__, vllm.version())
    tuning.install()
    return tuning


__all__ = ["RecordedConfig", "SCHEMA", "Tuning", "install"]
