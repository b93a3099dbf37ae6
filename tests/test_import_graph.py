"""The package has no import cycle: every import of a module of the package counts, lazy ones inside functions
too (a lazy import that breaks a cycle at run time is still a cycle to the reader), ``if TYPE_CHECKING:`` blocks
aside. The graph is built from the source with ``ast``; the planted packages below show the check can fail."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "kimi_recon"


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


def test_the_package_has_no_import_cycle_lazy_imports_included() -> None:
    graph = import_graph(PACKAGE)
    assert len(graph) > 40 and sum(map(len, graph.values())) > 200  # the graph was read, not empty
    cycles = import_cycles(graph)
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_profiles_import_no_renderer_and_the_dispatch_sits_above_the_renderers() -> None:
    graph = import_graph(PACKAGE)

    def below(module: str) -> set[str]:
        seen: set[str] = set()
        todo = [module]
        while todo:
            for m in graph[todo.pop()] - seen:
                seen.add(m)
                todo.append(m)
        return seen

    renderers = {"kimi_recon._k2", "kimi_recon._k3", "kimi_recon._k3_prompt", "kimi_recon._formats", "kimi_recon.render"}
    assert below("kimi_recon.profiles") & renderers == set()
    assert {"kimi_recon._k2", "kimi_recon._k3", "kimi_recon._k3_prompt"} <= below("kimi_recon._formats")
    assert "kimi_recon.training" not in below("kimi_recon._records")  # one record's work does not reach up
    assert "kimi_recon.cli" not in below("kimi_recon.openrouter.cli")


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_planted_cycle_through_a_lazy_import_is_found_and_named(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "low.py": "def f():\n    from .high import g  # lazy: still a cycle\n    return g\n",
            "high.py": "from .low import f\n",
            "other.py": "from . import low\n",
        },
    )
    assert import_cycles(import_graph(root)) == [["pkg.high", "pkg.low"]]


@pytest.mark.parametrize(
    "low",
    [
        "from pkg.high import g\n",  # absolute
        "from . import high\n",  # `from . import x` is the submodule x
        "from .sub import deep\n",  # a subpackage's module
        "import pkg.high\n",
    ],
)
def test_every_spelling_of_an_import_makes_an_arrow(tmp_path: Path, low: str) -> None:
    root = _package(
        tmp_path,
        {"low.py": low, "high.py": "from .low import x\n", "sub/__init__.py": "", "sub/deep.py": "from ..high import y\n"},
    )
    cycles = import_cycles(import_graph(root))
    assert cycles and {"pkg.high", "pkg.low"} <= set(cycles[0])


def test_a_type_checking_import_is_no_arrow_but_its_else_branch_is(tmp_path: Path) -> None:
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import g\n"
    assert import_cycles(import_graph(_package(tmp_path / "a", {"low.py": typing_only, "high.py": "from .low import f\n"}))) == []
    with_else = typing_only + "else:\n    from .high import g\n"
    assert import_cycles(import_graph(_package(tmp_path / "b", {"low.py": with_else, "high.py": "from .low import f\n"}))) == [
        ["pkg.high", "pkg.low"]
    ]
