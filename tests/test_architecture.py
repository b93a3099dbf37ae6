"""docs/architecture.md is the map of the package: every module is on it once, under one layer, and no module
imports from a layer above its own (lazy imports inside functions count; ``if TYPE_CHECKING:`` blocks do not).
The two paths it walks (one turn, one record) name only modules that exist."""

from __future__ import annotations

import re
from pathlib import Path

from import_graph import import_graph

import kimi_recon

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kimi_recon"
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
LAYER = re.compile(r"^### (\d+)\. (.+)$", re.MULTILINE)
ROW = re.compile(r"^\| `(kimi_recon[\w.]*)` \| (.+) \|$", re.MULTILINE)
NAMED = re.compile(r"`(kimi_recon[\w.]*)")


def layers_of(doc: str) -> dict[str, int]:
    """module -> the number of the layer the map lists it under (an error if it is listed twice)."""
    body = doc.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    heads = list(LAYER.finditer(body))
    found: dict[str, int] = {}
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        for module, job in ROW.findall(body[head.end() : after.start() if after else len(body)]):
            assert module not in found, f"{module} is listed twice"
            assert job.strip(), f"{module}: no job given"
            found[module] = int(head.group(1))
    return found


def upward_imports(layer: dict[str, int], graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{a} (layer {layer[a]}) imports {b} (layer {layer[b]})"
        for a, targets in graph.items()
        for b in targets
        if layer[b] > layer[a]
    )


def test_the_layers_are_numbered_from_the_bottom_up_without_gaps() -> None:
    body = DOC.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    assert [int(n) for n, _ in LAYER.findall(body)] == list(range(13))


def test_every_module_of_the_package_is_on_the_map_once_and_only_those() -> None:
    modules, listed = set(import_graph(PACKAGE)), set(layers_of(DOC))
    assert sorted(modules - listed) == [], "add these to docs/architecture.md, one line each"
    assert sorted(listed - modules) == [], "docs/architecture.md lists modules that do not exist"


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    assert upward_imports(layers_of(DOC), import_graph(PACKAGE)) == []


def test_an_import_up_a_layer_is_found_and_named() -> None:
    doc = (
        "<!-- layers -->\n### 0. Low\n\n| module | job |\n|---|---|\n| `kimi_recon.low` | below |\n\n"
        "### 1. High\n\n| module | job |\n|---|---|\n| `kimi_recon.high` | above |\n<!-- /layers -->\n"
    )
    layer = layers_of(doc)
    assert layer == {"kimi_recon.low": 0, "kimi_recon.high": 1}
    assert upward_imports(layer, {"kimi_recon.low": set(), "kimi_recon.high": {"kimi_recon.low"}}) == []
    assert upward_imports(layer, {"kimi_recon.low": {"kimi_recon.high"}, "kimi_recon.high": set()}) == [
        "kimi_recon.low (layer 0) imports kimi_recon.high (layer 1)"
    ]


def test_the_paths_of_one_turn_and_one_record_name_only_modules_that_exist() -> None:
    modules = set(import_graph(PACKAGE))
    for title in ("## The path of one turn", "## The path of one record"):
        assert title in DOC
        section = DOC.split(title, 1)[1].split("\n## ", 1)[0]
        named = set(NAMED.findall(section))
        assert len(named) >= 5, f"{title}: name the modules it passes through"
        # a dotted name is a module, or a public name of one (kimi_recon.audit_dataset)
        assert sorted(n for n in named if n not in modules and n.rpartition(".")[0] not in modules) == []


def test_no_module_fills_a_slot_of_another_module_at_import() -> None:
    """A lower module may not call an upper one through a module-level slot another module fills
    (``wiring.profile_lookup = ...`` in the package root was such a slot, issue 36): no module-level statement
    assigns an attribute of an imported module, and no module rebinds another's name with ``setattr``."""
    import ast

    root = Path(kimi_recon.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {
            (alias.asname or alias.name).split(".")[0]
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
            for target in targets:
                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id in imported:
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
            if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(node.value.func, "id", None) == "setattr":
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert found == []
