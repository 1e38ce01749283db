"""Adapters that put the peer implementations under test: `tilegym`, `mamba-ssm` and `vllm`.

Each adapter has exactly `mamba_chunk_scan_combined`'s signature and return convention and a
`KernelInfo` `INFO` declaring the peer's real capabilities (read from its source; each module says
which lines). An adapter only converts arguments (never the math) and checks, before it touches the
peer, everything the peer does not support, naming the argument (`UnsupportedProblem`).

Peers are imported lazily, at the first call: importing these modules needs neither the peer nor a
GPU; calling without them raises `PeerUnavailable` with what to install or set.
"""
from __future__ import annotations

import torch


class PeerUnavailable(RuntimeError):
    """The peer cannot run here: its package, its toolchain or a CUDA GPU is missing."""


def require_cuda(peer: str, x: torch.Tensor) -> None:
    """Raise PeerUnavailable unless `x` is a CUDA tensor and torch sees a GPU."""
    if x.device.type != "cuda":
        raise PeerUnavailable(f"{peer}: runs on CUDA tensors only, got x on device {x.device} "
                              f"(validation passed; the peer itself needs a GPU)")
    if not torch.cuda.is_available():  # pragma: no cover - a CUDA tensor implies a GPU
        raise PeerUnavailable(f"{peer}: needs a CUDA GPU and torch sees none")


__all__ = ["PeerUnavailable", "require_cuda"]
