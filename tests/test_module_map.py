"""Every module whose name does not start with ``_`` is a documented submodule: docs/api.md's module map lists it
and says what it offers, and every name it lists there exists in that module."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kimi_recon"
API = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
MAP = API.split("<!-- module-map -->", 1)[1].split("<!-- /module-map -->", 1)[0]
ROW = re.compile(r"^\| `(kimi_recon[\w.]*)` \| (.*) \|$", re.MULTILINE)
ROWS = {module: offers for module, offers in ROW.findall(MAP)}
IDENTIFIER = re.compile(r"`([A-Za-z_]\w*)`")


def _public_modules() -> set[str]:
    found = set()
    for path in [*PACKAGE.glob("*.py"), *PACKAGE.glob("*/*.py")]:
        parts = path.relative_to(ROOT).with_suffix("").parts
        if any(p.startswith("_") and p not in ("__init__", "__main__") for p in parts):
            continue
        found.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_module_not_named_private_is_in_the_module_map() -> None:
    missing = _public_modules() - set(ROWS)
    assert not missing, f"document these in docs/api.md's module map, or make them private (_name): {sorted(missing)}"


def test_the_module_map_names_only_modules_that_exist_and_are_not_private() -> None:
    assert set(ROWS) <= _public_modules()


@pytest.mark.parametrize("module", sorted(m for m in ROWS if not m.endswith("__main__")))
def test_every_name_the_module_map_lists_exists_in_its_module(module: str) -> None:
    names = IDENTIFIER.findall(ROWS[module])
    assert names, f"{module}: the map lists nothing it offers"
    loaded = importlib.import_module(module)
    assert [n for n in names if not hasattr(loaded, n)] == []
