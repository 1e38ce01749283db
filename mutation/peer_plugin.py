"""pytest plugin for peer mutant runs: the peer copy's modules compile under path-independent names.

Loaded with `-p mutation.peer_plugin` by mutation.run for a peer whose kernels are cuTile (TileGym).
cuTile's disk cache keys on the kernel bytecode, whose debug info names the source file: a copy of the
package in each mutant's own temporary folder would miss every entry the unmutated copy compiled.
With $SSDCHECK_MUTATION_PEER_ROOT set, modules of the packages in $SSDCHECK_MUTATION_PEER_PACKAGES
(comma-separated) found under that root compile with their path below it as file name
(`tilegym/ops/cutile/mamba2.py`), their source registered in linecache under that name so that
cuTile's parser (inspect.findsource) still reads it, as kernels/cutile/kernels.py does for our own
kernels. The code is unchanged; only the name its debug info carries is.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import linecache
import os
import sys
from pathlib import Path

ROOT_ENV = "SSDCHECK_MUTATION_PEER_ROOT"
PACKAGES_ENV = "SSDCHECK_MUTATION_PEER_PACKAGES"


class StableNameLoader(importlib.machinery.SourceFileLoader):
    """Compiles the module's source with `stable_name` as its file name (no bytecode cache used)."""

    def __init__(self, fullname: str, path: str, stable_name: str):
        super().__init__(fullname, path)
        self.stable_name = stable_name

    def get_code(self, fullname):
        source = self.get_data(self.path)
        text = source.decode("utf-8")
        linecache.cache[self.stable_name] = (len(text), None, text.splitlines(True), self.stable_name)
        return compile(source, self.stable_name, "exec", dont_inherit=True)


class StableNames(importlib.abc.MetaPathFinder):
    """Finds `packages`' modules under `root` and hands them a StableNameLoader."""

    def __init__(self, root: str | Path, packages):
        self.root = Path(root).resolve()
        self.packages = frozenset(packages)

    def find_spec(self, fullname, path, target=None):
        if fullname.partition(".")[0] not in self.packages:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path if path is not None else [str(self.root)])
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        try:
            rel = Path(spec.origin).resolve().relative_to(self.root)
        except ValueError:      # found outside the copy: leave it alone
            return spec
        spec.loader = StableNameLoader(fullname, spec.origin, rel.as_posix())
        return spec


def install(root: str | Path, packages) -> StableNames:
    finder = StableNames(root, packages)
    sys.meta_path.insert(0, finder)
    return finder


def pytest_configure(config):
    root, packages = os.environ.get(ROOT_ENV), os.environ.get(PACKAGES_ENV, "")
    if root and packages and not any(isinstance(f, StableNames) for f in sys.meta_path):
        install(root, [p for p in packages.split(",") if p])
