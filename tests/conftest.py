from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kimi_recon import KimiTokenizer, load_tokenizer

pytest_plugins = ["pytester"]

settings.register_profile("ci", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


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
