"""No import circles among the repository's modules.

Every `import` and `from ... import` of every module, at the top or inside a function, is an edge to
the module it names (`from pkg import mod` names pkg.mod where that is a module, else pkg). A circle,
even through an import made lazy to dodge the cycle at start-up, means two modules that cannot be
understood, tested or moved apart: what both need belongs in a third (mutation/engine.py for the
runner and the time-to-failure mode; lab/bench/triton_precompile_worker.py for the race and its
precompile driver; properties/menus.py for the strategies and the triage battery).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP_DIRS = {"__pycache__", "build", "dist"}


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under root outside hidden and build folders."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(p.startswith(".") or p in SKIP_DIRS for p in rel.parts[:-1]):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            out[".".join(parts)] = path
    return out


def _known(name: str, mods: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of mods."""
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of mods that module `name` (at `path`) imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(m for a in node.names if (m := _known(a.name, mods)))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for a in node.names:
                target = f"{source}.{a.name}"
                m = target if target in mods else _known(source, mods)
                if m:
                    found.add(m)
    found.discard(name)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def import_graph(root: Path) -> dict[str, set[str]]:
    mods = modules(root)
    return {name: imports(name, path, mods) for name, path in mods.items()}


def test_no_module_imports_itself_back_through_others():
    found = circles(import_graph(ROOT))
    assert not found, "import circles (move what both sides need into a module of its own):\n" + "\n".join(
        " <-> ".join(c) for c in found)


def test_a_circle_is_found_even_through_a_lazy_import(tmp_path):
    (tmp_path / "room").mkdir()
    (tmp_path / "room" / "__init__.py").write_text("")
    (tmp_path / "room" / "a.py").write_text("from room import b\n")
    (tmp_path / "room" / "b.py").write_text("def f():\n    from room.c import g\n")
    (tmp_path / "room" / "c.py").write_text("def g():\n    from . import a\n")
    (tmp_path / "room" / "d.py").write_text("import room.a\nfrom room.b import f\n")
    graph = import_graph(tmp_path)
    assert graph["room.d"] == {"room.a", "room.b"}
    assert circles(graph) == [["room.a", "room.b", "room.c"]]
    (tmp_path / "room" / "c.py").write_text("def g():\n    return 1\n")
    assert circles(import_graph(tmp_path)) == []
