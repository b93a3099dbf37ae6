from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from kimi_recon import KimiTokenizer, load_tokenizer

pytest_plugins = ["pytester"]

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"
OFFICIAL = GOLDEN / "official-k2.5-dev"

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="session")
def tok() -> KimiTokenizer:
    return load_tokenizer()


@pytest.fixture()
def tokenizer_dir(tmp_path: Path) -> Iterator[Path]:
    """A writable copy of the bundled K2.5 tokenizer directory, for corrupting."""
    import shutil
    from importlib import resources

    src = resources.files("kimi_recon") / "data" / "k2.5"
    with resources.as_file(src) as path:
        dst = tmp_path / "k2.5"
        shutil.copytree(path, dst)
    yield dst
