"""Where the test data lives, and a JSONL reader: imported by name (``from testdata import ...``) from any test folder.

(They used to live in tests/conftest.py, imported as ``conftest``; with a conftest.py in a subfolder that name
is ambiguous.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"
OFFICIAL = GOLDEN / "official-k2.5-dev"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
