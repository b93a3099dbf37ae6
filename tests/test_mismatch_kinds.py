"""Mismatch kinds are one str Enum; the docs' table is checked against it."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

from kimi_recon import KimiTokenizer, compare_ids
from kimi_recon.compare import BENIGN_KINDS, KINDS, MismatchKind

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_the_kinds_table_in_docs_audit_lists_every_kind_in_severity_order() -> None:
    text = (DOCS / "audit.md").read_text(encoding="utf-8")
    table = re.findall(r"^\| `(\w+)` \| .* \| (yes|no) \|$", text, flags=re.M)
    assert [kind for kind, _ in table] == [k.value for k in MismatchKind]
    assert {kind for kind, benign in table if benign == "yes"} == set(BENIGN_KINDS)


def test_kinds_the_kind_type_and_the_constants_are_the_enum_in_order() -> None:
    from kimi_recon import compare

    values = tuple(k.value for k in MismatchKind)
    assert KINDS == values
    assert get_args(compare.Kind) == values
    for kind in MismatchKind:
        constant = getattr(compare, kind.name)
        assert constant == kind.value and type(constant) is str  # results carry plain strings, as before


def test_a_comparison_carries_plain_string_kinds_that_name_enum_members(tok: KimiTokenizer) -> None:
    hel, lo = tok.id_of_bytes(b" hel"), tok.id_of_bytes(b"lo")
    assert hel is not None and lo is not None
    result = compare_ids(tok.encode(" hello"), [hel, lo], tok)
    assert type(result.kind) is str and MismatchKind(result.kind) is MismatchKind.NON_CANONICAL_BPE
    assert json.loads(json.dumps(result.to_dict()))["kind"] == "non_canonical_bpe"
