"""The package has no import cycle: every import of a module of the package counts, lazy ones inside functions
too (a lazy import that breaks a cycle at run time is still a cycle to the reader), ``if TYPE_CHECKING:`` blocks
aside. The graph is built from the source with ``ast``; the planted packages below show the check can fail."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import import_cycles, import_graph

PACKAGE = Path(__file__).resolve().parent.parent / "kimi_recon"


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

    renderers = {"kimi_recon._render.k2", "kimi_recon._render.k3", "kimi_recon._render.k3_prompt", "kimi_recon._render.formats", "kimi_recon.render"}
    assert below("kimi_recon.profiles") & renderers == set()
    assert {"kimi_recon._render.k2", "kimi_recon._render.k3", "kimi_recon._render.k3_prompt"} <= below("kimi_recon._render.formats")
    assert "kimi_recon.training" not in below("kimi_recon._records.record")  # one record's work does not reach up
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
