"""The near-linear compare_ids gives the same Comparison as the quadratic one it replaced (kept verbatim in
tests/compare_reference.py) on inputs where that one is fast, and its pieces agree with their oracles."""

from __future__ import annotations

import json
import os
from difflib import SequenceMatcher
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from compare_reference import reference_compare
from hypothesis import given
from hypothesis import strategies as st

from kimi_recon import compare as compare_module
from kimi_recon import load_tokenizer
from kimi_recon._compare.align import (
    _common_prefix,
    _common_suffix,
    _matching_blocks,
    _same_apart_from_whitespace,
    _squash,
)
from kimi_recon.compare import (
    NON_CANONICAL_BPE,
    TEXT_MISMATCH,
    WHITESPACE_DRIFT,
    compare_ids,
)

GOLDEN = Path(__file__).parent / "data" / "golden" / "official-k2.5-dev"
TOK = load_tokenizer()
with (GOLDEN / "turns.jsonl").open(encoding="utf-8") as f:
    TURNS = [json.loads(line) for line in f if line.strip()]
OUTPUTS = [t["output_ids"] for t in TURNS]

IM_END, EOS, THINK_END, SECTION_BEGIN, SECTION_END, CALL_BEGIN = 163586, 163585, 163607, 163595, 163596, 163597
CHAS = 163533  # "chas": the wrong constant once used for <|im_end|>
# A few ordinary ids (" the", "\n", ",", " hello", ...), and special ids, for dense random sequences.
ORDINARY = [220, 198, 11, 2695, 633, 1008, 13, 25, 401]
SPECIAL = [IM_END, EOS, THINK_END, SECTION_BEGIN, SECTION_END, CALL_BEGIN]
pool = st.sampled_from([*ORDINARY, *SPECIAL, CHAS])


def _edited(ids: list[int], changes: list[tuple[str, int, int]]) -> list[int]:
    out = list(ids)
    for op, pos, token in changes:
        i = pos % (len(out) + 1)
        if op == "insert":
            out.insert(i, token)
        elif i < len(out):
            if op == "delete":
                del out[i]
            else:
                out[i] = token
    return out


edits = st.lists(st.tuples(st.sampled_from(["insert", "delete", "replace"]), st.integers(0, 10**6), pool), min_size=1, max_size=8)
words = st.sampled_from([" hello", " world", "中文", "\n", "  ", " the", "<|im_end|>", "</think>", "[EOS]", " x", "ing"])
texts = st.lists(words, max_size=30).map("".join)


def _same(ref: list[int], rec: list[int]) -> None:
    expected = reference_compare(ref, rec, TOK).to_dict()
    assert compare_ids(ref, rec, TOK).to_dict() == expected
    assert compare_ids(rec, ref, TOK).to_dict() == reference_compare(rec, ref, TOK).to_dict()


@given(st.sampled_from(OUTPUTS), edits)
def test_official_outputs_with_edits_compare_as_the_quadratic_reference_did(ref: list[int], changes: list[tuple[str, int, int]]) -> None:
    _same(ref, _edited(ref, changes))


@given(st.lists(pool, max_size=60), st.lists(pool, max_size=60))
def test_dense_special_sequences_compare_as_the_quadratic_reference_did(a: list[int], b: list[int]) -> None:
    _same(a, b)


@given(st.lists(pool, max_size=60), edits)
def test_dense_special_sequences_with_edits_compare_as_the_quadratic_reference_did(a: list[int], changes: list[tuple[str, int, int]]) -> None:
    _same(a, _edited(a, changes))


@given(texts, texts, st.booleans())
def test_texts_with_special_token_text_compare_as_the_quadratic_reference_did(a: str, b: str, share: bool) -> None:
    ref = TOK.encode(a + "</think>" + b + "<|im_end|>")
    rec = TOK.encode((a if share else b) + "</think>" + a + "<|im_end|>")
    _same(ref, rec)


@given(st.sampled_from(OUTPUTS), st.data())
def test_cut_and_split_official_outputs_compare_as_the_quadratic_reference_did(ref: list[int], data: st.DataObject) -> None:
    cut = data.draw(st.integers(0, len(ref)))
    _same(ref, ref[:cut])
    i = data.draw(st.integers(0, len(ref) - 1))
    token = TOK.token_bytes(ref[i])
    k = data.draw(st.integers(1, max(1, len(token) - 1)))
    left, right = TOK.id_of_bytes(token[:k]), TOK.id_of_bytes(token[k:])
    if len(token) > 1 and left is not None and right is not None and not TOK.is_special(ref[i]):
        _same(ref, ref[:i] + [left, right] + ref[i + 1 :])


@given(st.sampled_from(OUTPUTS), edits)
def test_pairing_by_unique_units_past_the_budget_changes_only_how_stretches_between_special_ids_read(
    ref: list[int], changes: list[tuple[str, int, int]]
) -> None:
    rec = _edited(ref, changes)
    expected = reference_compare(ref, rec, TOK)
    budget = compare_module.ALIGN_BUDGET
    compare_module.ALIGN_BUDGET = 0  # every stretch is paired by unique units
    try:
        got = compare_ids(ref, rec, TOK)
    finally:
        compare_module.ALIGN_BUDGET = budget
    stretch_kinds = {NON_CANONICAL_BPE, WHITESPACE_DRIFT, TEXT_MISMATCH}  # what a stretch between paired special ids adds
    assert set(got.kinds) - stretch_kinds == set(expected.kinds) - stretch_kinds
    assert (got.benign, got.first_diff, got.region, got.diff_size) == (expected.benign, expected.first_diff, expected.region, expected.diff_size)


# -- the pieces ------------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_matching_blocks_within_the_budget_are_difflibs(a: list[int], b: list[int]) -> None:
    expected = [(i + k, j + k) for i, j, n in SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks() for k in range(n)]
    got = [(i + k, j + k) for i, j, n in _matching_blocks(a, b, 10**9) for k in range(n)]
    assert got == expected


@given(st.lists(st.integers(0, 5), max_size=60), st.lists(st.integers(0, 5), max_size=60), st.integers(0, 200))
def test_matching_blocks_past_the_budget_pair_equal_units_in_order(a: list[int], b: list[int], budget: int) -> None:
    pairs = [(i + k, j + k) for i, j, n in _matching_blocks(a, b, budget) for k in range(n)]
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(i1 < i2 and j1 < j2 for (i1, j1), (i2, j2) in pairwise(pairs))
    unique = [(i + k, j + k) for i, j, n in _matching_blocks(a, b, 0) for k in range(n)]
    common = _common_prefix(a, b)
    assert [(k, k) for k in range(common)] == unique[:common]  # pairing by unique units keeps the common start


def test_a_million_unrelated_units_pair_in_near_linear_time() -> None:
    a = [k % 7 for k in range(200_000)]
    b = [k % 5 for k in range(200_000)]
    blocks = _matching_blocks(a, b, compare_module.ALIGN_BUDGET)  # difflib alone would scan ~10^10 pairs
    assert all(a[i : i + n] == b[j : j + n] for i, j, n in blocks)


@given(st.binary(max_size=64))
def test_squash_of_ascii_bytes_drops_what_str_isspace_calls_whitespace(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    assert _squash(data) == "".join(ch for ch in text if not ch.isspace())


@given(st.text(st.sampled_from("ab \n\u3000\u00a0你"), max_size=30), st.integers(4000, 4200), st.text(st.sampled_from("ab \n\u3000你"), max_size=30))
def test_whitespace_comparison_deciding_from_the_head_agrees_with_the_full_one(tail_a: str, pad: int, tail_b: str) -> None:
    # Texts whose heads are cut inside a multi-byte character at the 4096-byte mark.
    head = "你" * (pad // 3) + " " * (pad % 3)
    for a, b in [(head + tail_a, head + tail_b), (head + tail_a, " " + head + tail_a), (tail_a + head, tail_b + head)]:
        ba, bb = a.encode(), b.encode()
        assert _same_apart_from_whitespace(ba, bb) == (_squash(ba) == _squash(bb))


@given(st.lists(st.integers(0, 2), max_size=300), st.lists(st.integers(0, 2), max_size=300))
def test_common_prefix_and_suffix_match_a_plain_scan(a: list[int], b: list[int]) -> None:
    n = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), min(len(a), len(b)))
    m = next((k for k in range(min(len(a), len(b))) if a[-1 - k] != b[-1 - k]), min(len(a), len(b)))
    assert (_common_prefix(a, b), _common_suffix(a, b)) == (n, m)
    sa, sb = "".join(map(str, a)), "".join(map(str, b))
    assert _common_prefix(sa, sb) == len(os.path.commonprefix([sa, sb]))


@pytest.mark.parametrize("case", TURNS[:30], ids=[f"turn-{i}" for i in range(30)])
def test_wrong_constants_on_official_outputs_compare_as_the_quadratic_reference_did(case: dict[str, Any]) -> None:
    ref = case["output_ids"]
    _same(ref, ref[:-1] + [CHAS])
    _same(ref, ref[:-1] + [EOS, IM_END])
