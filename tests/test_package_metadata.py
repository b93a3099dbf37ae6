"""The installed distribution's license metadata: an SPDX expression, with the notice of the bundled tokenizer
data shipped as its license file (setuptools refuses the old ``{ text = ... }`` table from 2027-02-18)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import kimi_recon

NOTICE = Path(kimi_recon.__file__).resolve().parent / "data" / "NOTICE"


def test_the_license_is_an_spdx_expression() -> None:
    meta = importlib.metadata.metadata("kimi-recon")
    assert meta.get("License-Expression") == "MIT"
    assert meta.get("License") is None  # the deprecated free-text field is gone


def test_the_notice_of_the_bundled_data_is_the_license_file() -> None:
    meta = importlib.metadata.metadata("kimi-recon")
    assert meta.get_all("License-File") == ["kimi_recon/data/NOTICE"]
    assert "Moonshot" in NOTICE.read_text(encoding="utf-8")
