"""The backward mutant catalogs (mutation/catalog_{tilegym,mamba_ssm}_bwd.py) against the pristine peers.

Every snippet must occur exactly once in the file of the published package it mutates, and the
mutated file must parse; skipped with the reason when $SSDCHECK_PEERS_DIR does not hold the peers.
Running them needs a GPU (the commands are in the catalogs' docstrings and the report).
"""
from __future__ import annotations

import importlib
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from kernels.peers.sources import PeerSourceMissing, peer_file
from mutation import catalog as registry
from mutation.catalog import check_catalog, load_catalog

CATALOGS = ("mutation.catalog_tilegym_bwd", "mutation.catalog_mamba_ssm_bwd")


def _load(module_name: str):
    """The module and its registered catalog (mutation/catalog.py CATALOGS)."""
    name = module_name.rsplit(".", 1)[1].removeprefix("catalog_")
    assert registry.CATALOGS.get(name) == module_name, f"{module_name} is not registered as {name!r} in CATALOGS"
    return importlib.import_module(module_name), load_catalog(name)


def _unpack_files(peer: str, files: set[str], dest: Path) -> Path:
    """Extract just `files` (paths inside the peer's package copy) from its published archive."""
    try:
        archive = Path(peer_file(peer))
    except PeerSourceMissing as e:
        pytest.skip(str(e))
    if archive.name.endswith(".whl"):
        with zipfile.ZipFile(archive) as z:
            for name in files:
                (dest / name).parent.mkdir(parents=True, exist_ok=True)
                (dest / name).write_bytes(z.read(name))
    else:
        with tarfile.open(archive) as t:
            for member in t.getmembers():
                rel = str(PurePosixPath(*PurePosixPath(member.name).parts[1:]))   # drop the sdist's top folder
                if rel in files:
                    (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                    (dest / rel).write_bytes(t.extractfile(member).read())
    missing = [f for f in files if not (dest / f).is_file()]
    assert not missing, f"{archive.name} has no {missing}"
    return dest


def test_catalog_sizes():
    sizes = {name: len(_load(name)[1].mutants) for name in CATALOGS}
    assert all(n >= 6 for n in sizes.values()) and sum(sizes.values()) >= 15, sizes


@pytest.mark.parametrize("module_name", CATALOGS)
def test_snippets_occur_exactly_once_in_the_pristine_peer(module_name, tmp_path):
    module, catalog = _load(module_name)
    assert catalog.tests == "tests/test_gradients.py"
    root = _unpack_files(module.PEER, {m.file for m in catalog.mutants}, tmp_path)
    problems = check_catalog(catalog, root)
    assert not problems, "\n".join(problems)


def test_tilegym_mutants_keep_line_numbers(tmp_path):
    """cuTile's compile cache keys on debug info: a mutant must not move the lines after it."""
    module, catalog = _load("mutation.catalog_tilegym_bwd")
    root = _unpack_files(module.PEER, {module.F}, tmp_path)
    src = (root / module.F).read_text()
    for m in catalog.mutants:
        assert m.apply(src).count("\n") == src.count("\n"), m.id
