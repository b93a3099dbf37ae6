"""One home for exceptions: every one is defined in kimi_recon/errors.py (the adapter's in
kimi_recon/openrouter/errors.py), and the tree drawn in each module's docstring is the real hierarchy."""

from __future__ import annotations

import builtins
import importlib
import inspect
import pkgutil
import re

import pytest

import kimi_recon
from kimi_recon import errors
from kimi_recon.openrouter import errors as openrouter_errors

HOMES = {"kimi_recon.errors", "kimi_recon.openrouter.errors"}


def _all_modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(kimi_recon.__path__, "kimi_recon.")]
    return [n for n in names if not n.endswith("__main__")]


def _tree(home: str) -> list[tuple[int, type]]:
    """(column of the name, the class) for each line of the tree drawn in ``home``'s docstring."""
    module = importlib.import_module(home)
    doc = module.__doc__ or ""
    drawing = []
    for line in doc.split("::\n", 1)[1].splitlines():
        if line and not line[0].isspace():  # the drawing is the indented block after "::"
            break
        drawing.append(line)
    nodes = []
    for line in drawing:
        m = re.match(r"^([\s│├└─]*)([\w.]+)", line)
        if m is None or not m.group(2)[0].isalpha():
            continue
        name = m.group(2).rsplit(".", 1)[-1]
        cls = getattr(module, name, None) or getattr(errors, name, None) or getattr(openrouter_errors, name, None) or getattr(builtins, name, None)
        assert inspect.isclass(cls) and issubclass(cls, BaseException), f"{m.group(2)} in the tree of {home} is not an exception"
        nodes.append((len(m.group(1)), cls))
    return nodes


def test_every_exception_and_warning_is_defined_in_an_errors_module() -> None:
    strays = []
    for name in _all_modules():
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                if name not in HOMES and not attr.startswith("_"):
                    strays.append(f"{name}.{attr}")
    assert strays == []


@pytest.mark.parametrize("home", sorted(HOMES))
def test_every_exception_of_an_errors_module_is_drawn_in_its_tree(home: str) -> None:
    module = importlib.import_module(home)
    defined = {v for v in vars(module).values() if inspect.isclass(v) and issubclass(v, BaseException) and v.__module__ == home}
    drawn = {cls for _, cls in _tree(home)}
    assert defined <= drawn, f"not drawn: {sorted(c.__name__ for c in defined - drawn)}"


@pytest.mark.parametrize("home", sorted(HOMES))
def test_each_drawn_child_derives_from_the_parent_it_is_drawn_under(home: str) -> None:
    stack: list[tuple[int, type]] = []
    checked = 0
    for column, cls in _tree(home):
        while stack and stack[-1][0] >= column:
            stack.pop()
        if stack:
            assert issubclass(cls, stack[-1][1]), f"{cls.__name__} is drawn under {stack[-1][1].__name__} but does not derive from it"
            checked += 1
        stack.append((column, cls))
    assert checked >= 3


def test_network_fields_live_on_the_adapter_error_only() -> None:
    core = errors.ServerReportedError("x", code=502)
    assert not hasattr(core, "retryable") and not hasattr(core, "retries")
    adapter = openrouter_errors.OpenRouterError.from_response_error(core)
    assert (adapter.retryable, adapter.retries) == (True, None)


def test_the_tree_in_docs_api_is_the_errors_module_docstring() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text(encoding="utf-8")
    drawn = doc.split("<!-- errors-tree -->\n```text\n", 1)[1].split("\n```", 1)[0]
    module_tree = []
    for line in (errors.__doc__ or "").split("::\n", 1)[1].splitlines():
        if line and not line[0].isspace():
            break
        module_tree.append(line[4:])
    assert drawn == "\n".join(module_tree).strip("\n")
