"""The import graph of a package, built from its source with ``ast``: every import of one of its modules counts,
lazy ones inside functions too, ``if TYPE_CHECKING:`` blocks aside (their ``else`` branch runs, so it counts).
Used by tests/test_import_graph.py (no cycle) and tests/test_architecture.py (no import points up a layer)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path


def _module_name(path: Path, root: Path) -> str:
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.Module, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` imports anywhere in its source, lazily or not."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(nodes: Iterable[ast.AST]) -> None:
        for child in nodes:
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                visit(child.orelse)  # the else branch runs
                continue
            if isinstance(child, ast.Import):
                found.update(alias.name for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (child.level - 1)]
                    base = ".".join([*parts, base] if base else parts)
                for alias in child.names:
                    submodule = f"{base}.{alias.name}"
                    found.add(submodule if submodule in known else base)  # `from . import x`: the submodule x
            visit(ast.iter_child_nodes(child))

    visit(tree.body)
    return {m for m in found if m in known and m != module}


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the modules of the package under ``root`` it imports."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    known = set(paths)
    return {
        module: _imported(ast.parse(path.read_text(encoding="utf-8")), module, path.name == "__init__.py", known)
        for module, path in paths.items()
    }


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(cycles)
