"""``import kimi_recon`` and the command line stay light: heavy modules load only when a name or a command needs them."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import kimi_recon
import kimi_recon.openrouter

HEAVY = ("tiktoken", "jinja2", "concurrent.futures", "openai", "regex")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    ["import kimi_recon", "import kimi_recon.cli", "import kimi_recon.openrouter", "import kimi_recon.openrouter.cli"],
)
def test_importing_the_package_or_the_cli_loads_no_heavy_module(code: str) -> None:
    loaded = _modules_after(code)
    assert not {m for m in HEAVY if m in loaded}, f"{code!r} imported {[m for m in HEAVY if m in loaded]}"


def test_building_the_cli_parser_loads_no_heavy_module() -> None:
    loaded = _modules_after("from kimi_recon.cli import build_parser\nbuild_parser()")
    assert not {m for m in HEAVY if m in loaded}


def test_a_public_name_loads_its_module_on_first_use() -> None:
    loaded = _modules_after("import kimi_recon\nkimi_recon.load_tokenizer")
    assert "tiktoken" in loaded and "kimi_recon.tokenizer" in loaded


def test_every_exported_name_resolves_to_the_object_its_module_defines() -> None:
    import importlib

    for package in (kimi_recon, kimi_recon.openrouter):
        for name in package.__all__:
            home = importlib.import_module(f"{package.__name__}.{package._EXPORTS[name]}")
            assert getattr(package, name) is getattr(home, name), name


def test_dir_lists_every_exported_name_before_it_is_loaded() -> None:
    assert set(kimi_recon.__all__) <= set(dir(kimi_recon))
    assert set(kimi_recon.openrouter.__all__) <= set(dir(kimi_recon.openrouter))


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        kimi_recon.not_a_name  # type: ignore[attr-defined]  # noqa: B018


def test_all_spells_out_exactly_the_lazily_exported_names() -> None:
    for package in (kimi_recon, kimi_recon.openrouter):
        assert sorted(package.__all__) == sorted(package._EXPORTS) == package.__all__
