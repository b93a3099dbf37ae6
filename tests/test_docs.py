"""Every ```python block in docs/ and the README runs as written, on the extras its doc names.

Each doc with Python examples says which extras they need, in one line the tests read::

    Examples on this page run on the base install (`pip install -e .` in a clone; `pip install kimi-recon` once it is on PyPI).
    Examples on this page need `pip install -e '.[fast,hf]'` (in a clone).

A doc's blocks run in a fresh Python process where the packages of every other extra cannot be imported by
the example or by kimi_recon (a package an installed one pulls in is still there, as after a real install),
so an example that needs more than its doc says fails here, in CI, where every extra is installed. A block
after ``<!-- no-run: why -->`` is not run; the reason is required.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import pytest
import tomllib
from extras import in_ci

ROOT = Path(__file__).parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
BLOCK = re.compile(r"(?:<!-- no-run(?::\s*(.*?))?\s*-->\s*)?```python\n(.*?)```", re.S)
NO_RUN = re.compile(r"<!-- no-run(?::\s*(.*?))?\s*-->\s*```python\n", re.S)
EXTRAS_LINE = re.compile(
    r"^Examples on this page (?:run on the base install \(`pip install -e \.` in a clone; `pip install kimi-recon` once it is on PyPI\)"
    r"|need `pip install -e '\.\[([a-z0-9,-]+)\]'` \(in a clone\))\.",
    re.M,
)

# Runs in the child: refuses, to the examples and to kimi_recon, the top-level modules of the extras not named.
_RUNNER = r'''
import importlib.abc, json, sys, traceback

job = json.load(sys.stdin)
blocked = frozenset(job["blocked"])

class ExtraNotNamed(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in blocked:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith(("<frozen", "<builtin")):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__", "") if frame is not None else ""
        if importer == "__doc_example__" or importer.partition(".")[0] == "kimi_recon":
            raise ModuleNotFoundError(f"No module named {name!r}: its extra is not one this doc names", name=name)
        return None

sys.meta_path.insert(0, ExtraNotNamed())
results = []
for i, code in enumerate(job["blocks"]):
    try:
        exec(compile(code, f"<{job['doc']} block {i}>", "exec"), {"__name__": "__doc_example__"})
        results.append(None)
    except BaseException:
        results.append(traceback.format_exc())
with open(job["out"], "w", encoding="utf-8") as f:
    json.dump(results, f)
'''


def _blocks(path: Path) -> list[tuple[bool, str | None, str]]:
    """Every python block of ``path``: (runs, the no-run reason, code)."""
    out = []
    for m in BLOCK.finditer(path.read_text(encoding="utf-8")):
        skipped = m.group(0).startswith("<!-- no-run")
        out.append((not skipped, m.group(1), m.group(2)))
    return out


def named_extras(path: Path) -> set[str] | None:
    """The extras ``path`` says its examples need (empty: the base install); None when it does not say."""
    found = EXTRAS_LINE.findall(path.read_text(encoding="utf-8"))
    if len(found) != 1:
        return None
    return {e for e in found[0].split(",") if e}


@functools.cache
def extras_modules() -> dict[str, frozenset[str]]:
    """Each extra of pyproject.toml (but ``dev``) and the top-level modules its packages install."""
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    modules_of: dict[str, set[str]] = {}
    for module, dists in metadata.packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(_normal(dist), set()).add(module)
    out = {}
    for extra, requirements in optional.items():
        if extra == "dev":
            continue
        names = {_normal(re.match(r"[A-Za-z0-9_.-]+", r).group(0)) for r in requirements}  # type: ignore[union-attr]
        out[extra] = frozenset(m for n in names for m in modules_of.get(n, {n.replace("-", "_")}) if not m.startswith("_"))
    return out


def _normal(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def blocked_modules(extras: set[str]) -> set[str]:
    allowed = set().union(*(extras_modules()[e] for e in extras)) if extras else set()
    return set().union(*extras_modules().values()) - allowed


@functools.cache
def run_doc(name: str) -> tuple[str | None, ...]:
    """Run the runnable blocks of doc ``name`` in one fresh process on its named extras: each block's traceback or None."""
    path = next(p for p in DOCS if p.name == name)
    extras = named_extras(path)
    assert extras is not None, f"{name} does not say which extras its examples need"
    blocks = [code for runs, _, code in _blocks(path) if runs]
    with tempfile.TemporaryDirectory() as tmp:
        result_path = Path(tmp) / "results.json"
        job = {"doc": name, "blocked": sorted(blocked_modules(extras)), "blocks": blocks, "out": str(result_path)}
        proc = subprocess.run(
            [sys.executable, "-c", _RUNNER], input=json.dumps(job), check=False, capture_output=True, text=True,
            cwd=tmp, env={**os.environ, "TQDM_DISABLE": "1"}, timeout=600,
        )  # fmt: skip
        if not result_path.exists():
            pytest.fail(f"{name}: the example runner died (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        return tuple(json.loads(result_path.read_text(encoding="utf-8")))


def _params() -> list[object]:
    params: list[object] = []
    for path in DOCS:
        runnable = [code for runs, _, code in _blocks(path) if runs]
        for i in range(len(runnable)):
            params.append(pytest.param(path.name, i, id=f"{path.name}-{i}"))
    return params


PARAMS = _params()


def test_docs_have_runnable_examples() -> None:
    total = sum(len(_blocks(p)) for p in DOCS)
    assert len(PARAMS) >= 41 and total - len(PARAMS) <= 2


def test_every_doc_with_python_examples_says_which_extras_they_need() -> None:
    """Fails on the old docs: none said it."""
    missing = [p.name for p in DOCS if _blocks(p) and named_extras(p) is None]
    assert missing == []


def test_the_extras_the_docs_name_are_extras_of_the_package() -> None:
    for path in DOCS:
        unknown = (named_extras(path) or set()) - set(extras_modules())
        assert not unknown, f"{path.name} names extras {unknown} that pyproject.toml does not define"


def test_every_no_run_block_says_why() -> None:
    for path in DOCS:
        for m in NO_RUN.finditer(path.read_text(encoding="utf-8")):
            assert m.group(1), f"{path.name}: a <!-- no-run --> block gives no reason"


def test_the_fast_extra_alone_does_not_give_transformers() -> None:
    """What fast-tokenizer.md's examples import: transformers is the hf extra's, not the fast extra's."""
    assert "transformers" in extras_modules()["hf"] and "transformers" in blocked_modules({"fast"})
    assert "tokenizers" not in blocked_modules({"fast"})


def test_an_import_of_an_extra_the_doc_does_not_name_fails(tmp_path: Path) -> None:
    """The guard works: an example importing a module of an unnamed extra fails, a named one runs."""
    pytest.importorskip("tokenizers")
    doc = tmp_path / "x.md"
    doc.write_text("Examples on this page need `pip install -e '.[hf]'` (in a clone).\n", encoding="utf-8")
    job = {"doc": "x.md", "blocked": sorted(blocked_modules(set())), "blocks": ["import tokenizers", "import json"],
           "out": str(tmp_path / "r.json")}  # fmt: skip
    subprocess.run([sys.executable, "-c", _RUNNER], input=json.dumps(job), text=True, check=True, timeout=120)
    first, second = json.loads((tmp_path / "r.json").read_text())
    assert "ModuleNotFoundError" in first and "tokenizers" in first and second is None


@pytest.mark.parametrize(("doc", "index"), PARAMS)
def test_doc_example_runs_on_the_extras_its_doc_names(doc: str, index: int) -> None:
    path = next(p for p in DOCS if p.name == doc)
    extras = named_extras(path) or set()
    if not in_ci():
        for extra in extras:
            for module in extras_modules()[extra]:
                pytest.importorskip(module, reason=f"{doc} needs the {extra} extra; CI runs this test")
    error = run_doc(doc)[index]
    assert error is None, f"{doc}, python block {index} (counting run blocks) failed:\n{error}"
