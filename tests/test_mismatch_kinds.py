"""Mismatch kinds are one str Enum; the docs' table is checked against it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kimi_recon.compare import BENIGN_KINDS, KINDS, MismatchKind

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_kinds_table_in_docs_audit_lists_every_kind_in_severity_order() -> None:
    text = (DOCS / "audit.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| `(\w+)` \| .* \| (yes|no) \|$", text, flags=re.M)
    assert [kind for kind, _ in table] == [k.value for k in MismatchKind]
    assert {kind for kind, benign in table if benign == "yes"} == {k.value for k in BENIGN_KINDS}


def test_kinds_are_the_enum_in_order_and_behave_as_their_strings() -> None:
    assert KINDS == tuple(MismatchKind)
    for kind in MismatchKind:
        assert kind == kind.value and hash(kind) == hash(kind.value)
        assert str(kind) == f"{kind}" == kind.value
        assert json.dumps({kind: kind}) == json.dumps({kind.value: kind.value})
