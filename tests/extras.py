"""Optional dependencies in tests: skip cleanly where an extra is missing, but never in CI.

CI installs every extra (``pip install -e '.[dev]'``) and sets ``CI=true``; there a missing extra is a
failure, so a test that needs a real part (transformers, tokenizers, datasets, ray, openai) always runs.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def require(name: str) -> ModuleType:
    """The module ``name`` (an optional extra): the calling test is skipped without it, except in CI."""
    if in_ci():
        return importlib.import_module(name)
    module: ModuleType = pytest.importorskip(name, reason=f"{name} is an optional extra (pip install -e '.[dev]'); CI runs this test")
    return module
