"""Copies of the pristine peer packages for mutant runs: unpack the published file, never edit it.

A peer catalog (`PEER = "tilegym"` in its module) mutates a file of the peer's package, named relative
to the unpacked copy's root (`tilegym/ops/cutile/mamba2.py`). The published file comes only from
$SSDCHECK_PEERS_DIR through `kernels.peers.sources.peer_file`; `unpack` extracts just the Python
package from it into a folder that then goes first on the run's PYTHONPATH:

    tilegym    tilegym-1.5.1-py3-none-any.whl   -> <dest>/tilegym/...
    mamba-ssm  mamba_ssm-2.3.2.post1.tar.gz     -> <dest>/mamba_ssm/...   (the sdist's top folder dropped)

`run_env` says how a run finds the copy: the tilegym adapter imports `tilegym.ops.cutile.mamba2`
(the copy first on sys.path shadows an installed wheel), the mamba-ssm adapter reads
$SSDCHECK_MAMBA_SSM_SRC before sys.path.
"""
from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from kernels.peers.sources import PeerSourceMissing, peer_file

# peer -> the package folder inside the published file, after the archive's own top folder (if any).
PACKAGES = {"tilegym": "tilegym", "mamba-ssm": "mamba_ssm"}
MAMBA_SRC_ENV = "SSDCHECK_MAMBA_SSM_SRC"   # kernels/peers/mamba_ssm.py: SRC_ENV
STABLE_NAMES = {"tilegym"}   # cuTile peers: their disk cache keys on debug info, which names the file


def _package_member(name: str, package: str, strip_top: bool) -> str | None:
    """The path below the copy's root of archive member `name`, or None if it is outside `package`."""
    parts = PurePosixPath(name).parts
    if strip_top:
        parts = parts[1:]
    if not parts or parts[0] != package or ".." in parts:
        return None
    return str(PurePosixPath(*parts))


def unpack(peer: str, dest: Path, archive: str | Path | None = None) -> Path:
    """Extract `peer`'s Python package from its published file (default: $SSDCHECK_PEERS_DIR's) into
    `dest`; returns `dest`, the folder to put first on sys.path. PeerSourceMissing if the file is absent."""
    if peer not in PACKAGES:
        raise ValueError(f"peer: expected one of {sorted(PACKAGES)}, got {peer!r}")
    package = PACKAGES[peer]
    archive = Path(archive) if archive is not None else Path(peer_file(peer))
    dest = Path(dest)
    count = 0
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                rel = _package_member(info.filename, package, strip_top=False)
                if rel is None or info.is_dir():
                    continue
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(z.read(info))
                count += 1
    elif archive.name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(archive) as t:
            for member in t.getmembers():
                rel = _package_member(member.name, package, strip_top=True)
                if rel is None or not member.isfile():
                    continue
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(t.extractfile(member).read())
                count += 1
    else:
        raise ValueError(f"archive: expected a .whl or .tar.gz, got {archive.name!r}")
    if not count:
        raise ValueError(f"archive: {archive.name} holds no {package}/ package")
    return dest


def run_env(peer: str, root: Path) -> tuple[list[str], dict[str, str]]:
    """(sys.path entries to put first, environment variables) that make a run use the copy at `root`."""
    env = {}
    if peer == "mamba-ssm":
        env[MAMBA_SRC_ENV] = str(Path(root) / PACKAGES[peer])
    if peer in STABLE_NAMES:
        from mutation import peer_plugin
        env.update({peer_plugin.ROOT_ENV: str(root), peer_plugin.PACKAGES_ENV: PACKAGES[peer]})
    return [str(root)], env


def pytest_plugins(peer: str | None) -> list[str]:
    """Extra pytest arguments of a peer's runs: a cuTile peer's modules get path-independent names
    (mutation/peer_plugin.py), so the kernels a mutant leaves alone hit the compile cache the
    unmutated copy filled."""
    return ["-p", "mutation.peer_plugin"] if peer in STABLE_NAMES else []


__all__ = ["PeerSourceMissing", "PACKAGES", "STABLE_NAMES", "unpack", "run_env", "pytest_plugins"]
