"""Every ```python block in docs/ and the README runs as written (blocks after `<!-- no-run -->` are skipped)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
BLOCK = re.compile(r"(<!-- no-run -->\s*)?```python\n(.*?)```", re.S)


def _blocks() -> list[object]:
    params = []
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]):
        for i, m in enumerate(BLOCK.finditer(path.read_text(encoding="utf-8"))):
            if not m.group(1):
                params.append(pytest.param(m.group(2), id=f"{path.name}-{i}"))
    return params


BLOCKS = _blocks()


def test_docs_have_runnable_examples() -> None:
    assert len(BLOCKS) >= 8


@pytest.mark.parametrize("code", BLOCKS)
def test_doc_example_runs(code: str) -> None:
    exec(compile(code, "<doc>", "exec"), {"__name__": "__doc_example__"})
