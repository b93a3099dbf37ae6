"""The bundled audit sample: official Kimi-K2.5 dev conversations as responses plus reference ids.

Built by ``scripts/make_dev_sample.py`` (provenance in ``kimi_recon/data/NOTICE``); ``kimi-recon audit --sample``
audits it, so a fresh install shows what an audit finds without any data of one's own.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

from ..errors import BundledDataError

SAMPLE_PATH: Final = Path(__file__).parents[1] / "data" / "sample" / "k2.5-dev-sample.jsonl"
SAMPLE_SHA256: Final = "16a84818f709b6e409466532622a092a8beb123663d51083f27fc61fc071f565"


def sample_path() -> Path:
    """The bundled sample's path, after checking its sha256 (a changed file is an error, never a silent other audit)."""
    try:
        digest = hashlib.sha256(SAMPLE_PATH.read_bytes()).hexdigest()
    except OSError as err:
        raise BundledDataError(f"the bundled audit sample {SAMPLE_PATH} cannot be read: {err}") from err
    if digest != SAMPLE_SHA256:
        raise BundledDataError(f"the bundled audit sample {SAMPLE_PATH} has sha256 {digest}, expected {SAMPLE_SHA256}")
    return SAMPLE_PATH
