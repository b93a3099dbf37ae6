"""ruff is a live gate: the project's rule set (pyproject.toml [tool.ruff]) fails on a planted finding of each
kind it is there for, and passes on the repository as it is. CI runs ``ruff check .`` before pytest; this test
keeps that step honest (a config that selects nothing, or a path left out, would pass CI silently)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"

#: One planted finding per rule kept for the bugs it catches (see the comments on `select` in pyproject.toml).
PLANTED = {
    "F401": "import os\n",
    "B905": "def pairs(a: list[int], b: list[int]) -> list[tuple[int, int]]:\n    return list(zip(a, b))\n",
    "B023": "fns = []\nfor i in range(3):\n    fns.append(lambda: i)\n",
    "PLW1510": "import subprocess\n\nsubprocess.run(['true'])\n",
    "PLW2901": "def f(xs: list[str]) -> None:\n    for x in xs:\n        x = x.strip()\n        print(x)\n",
    "BLE001": "def f() -> None:\n    try:\n        print(1)\n    except Exception:\n        pass\n",
    "PGH004": "import os  # noqa\n",
    "RUF043": "import pytest\n\n\ndef test_x() -> None:\n    with pytest.raises(ValueError, match='a.b'):\n        raise ValueError('a.b')\n",
    "E501": "x = '" + "y" * 200 + "'\n",
    "I001": "import sys\nimport os\n\nprint(os, sys)\n",
    "UP007": "from typing import Union\n\nx: Union[int, str] = 1\n",
}


def _ruff(*args: str | Path) -> subprocess.CompletedProcess[str]:
    # python -m ruff: the ruff of this environment (the dev extra pins it), never one found on PATH
    return subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", *map(str, args)],
        check=False, capture_output=True, text=True, cwd=ROOT, timeout=300,
    )  # fmt: skip


@pytest.mark.parametrize("code", sorted(PLANTED))
def test_ruff_fails_on_a_planted_finding_with_the_project_config(tmp_path: Path, code: str) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED[code], encoding="utf-8")
    done = _ruff("--config", CONFIG, planted)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert f" {code} " in done.stdout, done.stdout


def test_ruff_passes_on_the_repository() -> None:
    done = _ruff(".")
    assert done.returncode == 0, done.stdout + done.stderr
