"""No import circles inside the package, counting imports inside functions too (a lazy import
hides a circle from Python, not from the reader)."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "shiftwork"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports anywhere in its code (a name imported from a package
    counts as the submodule of that name where there is one, else as the package)."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    found.add(sub)
                elif base in modules:
                    found.add(base)
    return found - {here}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_circles_are_found_in_a_hand_made_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e2"}, "e2": set()}
    assert circles(graph) == [["a", "b", "c"]]


def test_a_lazy_import_counts(tmp_path, monkeypatch):
    pkg = tmp_path / "shiftwork"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from shiftwork.b import g\n")
    (pkg / "b.py").write_text("from . import a\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", pkg)
    modules = {"shiftwork", "shiftwork.a", "shiftwork.b"}
    assert imports(pkg / "a.py", modules) == {"shiftwork.b"}
    assert imports(pkg / "b.py", modules) == {"shiftwork.a"}


def test_the_package_has_no_import_circle():
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    graph = {module_name(p): imports(p, modules) for p in paths}
    assert len(graph) > 50
    found = circles(graph)
    if found:
        pytest.fail("import circles: " + "; ".join(" -> ".join(c) for c in found))
