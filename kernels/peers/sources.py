"""Where the pristine peer packages are: one setting, `$SSDCHECK_PEERS_DIR`.

It names a folder that holds the peers' files exactly as published (nothing unpacked, nothing edited):

    tilegym-1.5.1-py3-none-any.whl      pip download tilegym==1.5.1 --no-deps
    mamba_ssm-2.3.2.post1.tar.gz        pip download mamba-ssm==2.3.2.post1 --no-deps --no-binary :all:
    vllm-0.33.0-mamba-ssd.tar.gz        vLLM 0.33.0's SSD files (docs/gpu-host.md says how to cut it
                                        from `pip download vllm==0.33.0 --no-deps`)

Tests and scripts that need a peer's sources (mutant catalogs copy them, CPU tests read vLLM's metadata
function) call `peer_file`, which raises `PeerSourceMissing` with the reason; tests turn that into a skip.
Running a peer needs it importable as well (installed, or unpacked onto PYTHONPATH).
"""
from __future__ import annotations

import os

ENV = "SSDCHECK_PEERS_DIR"

# Published file of each peer, by the name the registry uses.
FILES = {
    "tilegym": "tilegym-1.5.1-py3-none-any.whl",
    "mamba-ssm": "mamba_ssm-2.3.2.post1.tar.gz",
    "vllm": "vllm-0.33.0-mamba-ssd.tar.gz",
}


class PeerSourceMissing(LookupError):
    """A peer's published file is not where $SSDCHECK_PEERS_DIR says; the message says what to do."""


def peers_dir() -> str:
    """The folder $SSDCHECK_PEERS_DIR names, or PeerSourceMissing if unset or not a folder."""
    d = os.environ.get(ENV, "")
    if not d:
        raise PeerSourceMissing(f"${ENV} is not set: point it at a folder holding the published peer "
                                f"files ({', '.join(FILES.values())})")
    if not os.path.isdir(d):
        raise PeerSourceMissing(f"${ENV}={d!r} is not a folder")
    return os.path.abspath(d)


def peer_file(peer: str) -> str:
    """Path of `peer`'s published file inside $SSDCHECK_PEERS_DIR (PeerSourceMissing if absent)."""
    if peer not in FILES:
        raise ValueError(f"peer: expected one of {sorted(FILES)}, got {peer!r}")
    path = os.path.join(peers_dir(), FILES[peer])
    if not os.path.isfile(path):
        raise PeerSourceMissing(f"{peer}: {FILES[peer]} is not in ${ENV}={os.environ[ENV]!r}")
    return path


def unpack_wheel(peer: str, dest) -> str:
    """Unpack `peer`'s published wheel (TileGym's) into folder `dest`, which then goes on sys.path to
    import it; returns `dest` (PeerSourceMissing if the wheel is absent)."""
    import zipfile
    path = peer_file(peer)
    if not path.endswith(".whl"):
        raise ValueError(f"peer: {peer} is published as {FILES[peer]}, not a wheel")
    zipfile.ZipFile(path).extractall(dest)
    return str(dest)


__all__ = ["ENV", "FILES", "PeerSourceMissing", "peer_file", "peers_dir", "unpack_wheel"]
