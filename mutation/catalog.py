"""Mutants as data: one realistic kernel bug each, applied as an exact text substitution.

A `Mutant` names a kernel file, an exact snippet that must occur there exactly once, its replacement,
and the real-world mistake it models. A catalog is a module `mutation/catalog_<name>.py` defining

    IMPL = "torch-ref"          # the --impl the suite runs against the mutated copy
    MUTANTS = (Mutant(...), ...)
    TESTS = "tests/test_gradients.py"       # optional: the test file that judges a mutant
                                            # (default tests/test_properties.py, the forward suite)
    PYTEST_ARGS = ("-k", "not slow")        # optional: more arguments of that command

and is registered in `CATALOGS` below. A peer catalog also sets `PEER = "tilegym"` (a name of
kernels/peers/sources.py): its files are paths inside a copy of that peer's published package
(mutation/peer_copy.py), not of this repository. `check_catalog` finds catalog rot (a snippet that no
longer occurs exactly once, duplicate ids, unknown categories) without running anything.

An equivalent mutant computes the same function as the original for every input the contract allows;
it carries the written argument in `equivalent`, stays in the catalog (and the report), and is left
out of the score.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent   # where the catalog's TESTS file lives

# What kind of mistake a mutant models (the report groups by these).
CATEGORIES = {
    "mask": "causal / sequence mask",
    "decay": "decay sign, scale, units or position",
    "state": "state carried between chunks or from initial_states",
    "groups": "B/C group-to-head mapping",
    "dt": "dt processing: bias, softplus, limits",
    "cumsum": "per-chunk cumulative sum of dt*A",
    "padding": "the partial last chunk",
    "seq_idx": "packed sequences (seq_idx)",
    "varlen": "varlen states (cu_seqlens)",
    "output": "D skip term and z gate",
    "precision": "operand or accumulation precision",
    "layout": "strides, transposes and reshapes",
    "tiling": "tile loops, bounds and indices of a tiled kernel",
}

# Registered catalogs: name -> module (imported lazily).
CATALOGS = {
    "torch_ref": "mutation.catalog_torch_ref",
    "cutile": "mutation.catalog_cutile",
    "cutile_fast": "mutation.catalog_cutile_fast",
    "cutile_fastr": "mutation.catalog_cutile_fastr",
    "cutile_walk": "mutation.catalog_cutile_walk",
    "cutile_seg": "mutation.catalog_cutile_seg",
    "tilegym": "mutation.catalog_tilegym",
    "mamba_ssm": "mutation.catalog_mamba_ssm",
    "tilegym_bwd": "mutation.catalog_tilegym_bwd",
    "mamba_ssm_bwd": "mutation.catalog_mamba_ssm_bwd",
}

DEFAULT_TESTS = "tests/test_properties.py"   # the forward property suite


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str           # path relative to the repository root
    original: str       # exact text; must occur exactly once in `file`
    replacement: str
    description: str    # the real-world mistake this models, one line
    category: str
    equivalent: str | None = None   # why it computes the same function; excluded from the score

    def apply(self, source: str) -> str:
        """The mutated source; ValueError unless `original` occurs exactly once."""
        count = source.count(self.original)
        if count != 1:
            raise ValueError(f"mutant {self.id}: snippet occurs {count} times in {self.file} (expected exactly once):\n"
                             f"{self.original}")
        # A shorter replacement is padded with blank lines: the lines after it keep their numbers,
        # so the kernels it does not touch keep their debug info and hit the compile cache.
        short = self.original.count("\n") - self.replacement.count("\n")
        return source.replace(self.original, self.replacement + "\n" * max(short, 0), 1)

    def apply_to_tree(self, root: Path) -> None:
        path = Path(root) / self.file
        path.write_text(self.apply(path.read_text()))


def maker(default_file: str):
    """A catalog's short Mutant constructor: positional id, category, description, original,
    replacement; `file` defaults to the catalog's main kernel file."""
    def make(id, category, description, original, replacement, equivalent=None, file=default_file):
        return Mutant(id=id, file=file, original=original, replacement=replacement, description=description,
                      category=category, equivalent=equivalent)
    return make


@dataclass(frozen=True)
class Catalog:
    name: str
    impl: str
    mutants: tuple[Mutant, ...]
    env: tuple[tuple[str, str], ...] = ()   # environment the baseline and every mutant run with
    peer: str | None = None   # a peer catalog: files are relative to a copy of this peer's package
    tests: str = DEFAULT_TESTS          # the test file whose failure kills a mutant
    pytest_args: tuple[str, ...] = ()   # more arguments of the command (after the runner's own)

    def by_id(self, mutant_id: str) -> Mutant:
        for m in self.mutants:
            if m.id == mutant_id:
                return m
        raise KeyError(f"catalog {self.name}: no mutant {mutant_id!r}; ids: {', '.join(m.id for m in self.mutants)}")


def available_catalogs() -> list[str]:
    """Registered catalogs whose module exists (a catalog may be registered before it is written)."""
    import importlib.util
    return [n for n, mod in CATALOGS.items() if importlib.util.find_spec(mod) is not None]


def load_catalog(name: str) -> Catalog:
    if name not in CATALOGS:
        raise ValueError(f"--catalog: unknown catalog {name!r}; known: {', '.join(CATALOGS)}")
    module = importlib.import_module(CATALOGS[name])
    tests = getattr(module, "TESTS", DEFAULT_TESTS)
    if not (isinstance(tests, str) and tests.startswith("tests/test_") and tests.endswith(".py")):
        raise ValueError(f"{CATALOGS[name]}.TESTS: expected a test file path 'tests/test_*.py', got {tests!r}")
    extra = getattr(module, "PYTEST_ARGS", ())
    if not (isinstance(extra, tuple) and all(isinstance(a, str) for a in extra)):
        raise ValueError(f"{CATALOGS[name]}.PYTEST_ARGS: expected a tuple of strings, got {extra!r}")
    return Catalog(name=name, impl=module.IMPL, mutants=tuple(module.MUTANTS),
                   env=tuple(sorted(getattr(module, "ENV", {}).items())), peer=getattr(module, "PEER", None),
                   tests=tests, pytest_args=extra)


def check_catalog(catalog: Catalog, root: Path) -> list[str]:
    """Every way the catalog disagrees with the source tree at `root`; empty when it is sound."""
    problems = []
    if not (REPO / catalog.tests).is_file():
        problems.append(f"{catalog.name}: TESTS {catalog.tests} does not exist in {REPO}")
    seen = set()
    for m in catalog.mutants:
        where = f"{catalog.name}:{m.id}"
        if m.id in seen:
            problems.append(f"{where}: duplicate id")
        seen.add(m.id)
        if m.category not in CATEGORIES:
            problems.append(f"{where}: unknown category {m.category!r} (known: {', '.join(CATEGORIES)})")
        if not m.description.strip() or "\n" in m.description.strip():
            problems.append(f"{where}: description must be one non-empty line")
        if m.original == m.replacement:
            problems.append(f"{where}: replacement equals the original")
        if m.equivalent is not None and not m.equivalent.strip():
            problems.append(f"{where}: an equivalent mutant needs its written argument")
        path = Path(root) / m.file
        if not path.is_file():
            problems.append(f"{where}: {m.file} does not exist")
            continue
        count = path.read_text().count(m.original)
        if count != 1:
            problems.append(f"{where}: snippet occurs {count} times in {m.file} (expected exactly once)")
        else:
            try:
                compile(m.apply(path.read_text()), str(path), "exec")
            except SyntaxError as e:
                problems.append(f"{where}: the mutated {m.file} does not parse ({e.msg}, line {e.lineno})")
    return problems
