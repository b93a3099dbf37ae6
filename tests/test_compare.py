"""compare_ids classifies each kind of difference, and is_canonical tells greedy encodes from sampled splits."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kimi_recon import AssistantTurn, KimiTokenizer, ToolCall, load_tokenizer
from kimi_recon.compare import (
    BENIGN_KINDS,
    KINDS,
    NON_CANONICAL_BPE,
    REASONING_MISSING,
    SPECIAL_TOKEN_MISMATCH,
    TEXT_MISMATCH,
    TOOL_CALL_FORMAT,
    WHITESPACE_DRIFT,
    Comparison,
    compare_ids,
    is_canonical,
)
from kimi_recon.errors import InvalidInputError
from kimi_recon.reconstruct import reconstruct_output_ids
from kimi_recon.responses import as_turn

GOLDEN = Path(__file__).parent / "data" / "golden" / "official-k2.5-dev"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


TURNS = _read_jsonl(GOLDEN / "turns.jsonl")
WITH_TOOLS = [t for t in TURNS if t["turn"].get("tool_calls")]
TOK = load_tokenizer()
IM_END_ID = 163586
WRONG_IM_END_ID = 163533  # decodes to "chas": the wrong constant some code used for <|im_end|>
THINK_END_ID = 163607

# Text without special-token text: no "<" (no <|...|>, </think>) and no "[" (no [EOS] etc.).
plain_alphabet = st.characters(codec="utf-8", exclude_characters="<[", categories=("L", "M", "N", "P", "S", "Z", "Cc"))
plain = st.text(plain_alphabet, max_size=40)
word_texts = st.sampled_from(
    [" hello", " world", " reasoning", " tokenizer", "中文", "世界", "你", " Здравствуй", "ありがとう", " function", "ing", "```python\n"]
)
non_ws_text = st.text(plain_alphabet, min_size=1, max_size=40).filter(lambda s: bool(s.strip()))


def output_ids(reasoning: str, content: str) -> list[int]:
    return TOK.encode(f"{reasoning}</think>{content}<|im_end|>")


def two_token_splits(tok: KimiTokenizer, token_id: int) -> list[tuple[int, int]]:
    """Pairs of ordinary vocabulary tokens whose bytes concatenate to ``token_id``'s bytes."""
    data = tok.token_bytes(token_id)
    pairs = []
    for k in range(1, len(data)):
        left, right = tok.id_of_bytes(data[:k]), tok.id_of_bytes(data[k:])
        if left is not None and right is not None and not tok.is_special(left) and not tok.is_special(right):
            pairs.append((left, right))
    return pairs


@st.composite
def split_sequences(draw: st.DrawFn, base: st.SearchStrategy[list[int]]) -> tuple[list[int], list[int], int]:
    """(canonical ids, the same bytes with one multi-byte token split in two, index of the split)."""
    ids = draw(base)
    candidates = [i for i, t in enumerate(ids) if not TOK.is_special(t) and len(TOK.token_bytes(t)) > 1]
    i = draw(st.sampled_from(candidates))
    left, right = draw(st.sampled_from(two_token_splits(TOK, ids[i])))
    return ids, ids[:i] + [left, right] + ids[i + 1 :], i


random_outputs = st.builds(lambda r, a, w, b: output_ids(r, a + w + b), plain, plain, word_texts, plain)
golden_outputs = st.sampled_from([t["output_ids"] for t in TURNS])


# -- non-canonical BPE -----------------------------------------------------------------------------


@given(split_sequences(random_outputs))
def test_a_sampled_split_of_one_token_is_non_canonical_bpe(case: tuple[list[int], list[int], int]) -> None:
    canonical, sampled, i = case
    c = compare_ids(sampled, canonical, TOK)
    assert c.kind == NON_CANONICAL_BPE and c.benign and not c.exact
    assert c.first_diff == i
    assert (c.reference_canonical, c.reconstructed_canonical) == (False, True)
    assert is_canonical(canonical, TOK) and not is_canonical(sampled, TOK)


@given(split_sequences(golden_outputs))
def test_a_sampled_split_of_official_output_ids_is_non_canonical_bpe(case: tuple[list[int], list[int], int]) -> None:
    canonical, sampled, _ = case
    assert compare_ids(sampled, canonical, TOK).kind == NON_CANONICAL_BPE
    assert not is_canonical(sampled, TOK)


def test_official_output_ids_are_canonical() -> None:
    assert all(is_canonical(t["output_ids"], TOK) for t in TURNS)


def test_is_canonical_decodes_bytes_when_a_split_cuts_a_utf8_character() -> None:
    canonical = TOK.encode("你 world")
    assert TOK.token_bytes(canonical[0]) == "你".encode()
    left, right = two_token_splits(TOK, canonical[0])[0]
    sampled = [left, right] + canonical[1:]
    assert TOK.token_bytes(left).decode("utf-8", "replace") != TOK.token_bytes(left).decode("utf-8", "ignore")  # a partial character
    assert not is_canonical(sampled, TOK)
    c = compare_ids(sampled, canonical, TOK)
    assert c.kind == NON_CANONICAL_BPE
    assert "\\x" in c.explain()  # the partial character is shown as escapes, not lost


def test_is_canonical_accepts_canonical_ids_that_end_inside_a_character() -> None:
    partial = TOK.id_of_bytes("你".encode()[:1])
    assert partial is not None
    assert is_canonical(TOK.encode("hello") + [partial], TOK)
    left, right = two_token_splits(TOK, TOK.encode("hello")[0])[0]
    assert not is_canonical([left, right, partial], TOK)


def test_special_token_text_spelled_with_ordinary_ids_is_not_canonical() -> None:
    assert not is_canonical(TOK.encode("a<|im_end|>", allowed_special=set()), TOK)
    assert is_canonical(TOK.encode("a<|im_end|>"), TOK)


# -- whitespace, reasoning ---------------------------------------------------------------------------


@given(non_ws_text, non_ws_text, st.sampled_from(["strip", "collapse", "pad"]))
def test_texts_differing_only_in_whitespace_are_whitespace_drift(reasoning: str, content: str, how: str) -> None:
    body = f" \n{content}  \t{content}\n\n"
    drifted = {"strip": body.strip(), "collapse": " ".join(body.split()), "pad": body + "\n"}[how]
    ref, rec = output_ids(reasoning, body), output_ids(reasoning, drifted)
    c = compare_ids(ref, rec, TOK)
    assert c.kind == WHITESPACE_DRIFT and not c.benign
    assert compare_ids(rec, ref, TOK).kind == WHITESPACE_DRIFT


@given(non_ws_text, plain, st.booleans(), st.booleans())
def test_reasoning_present_on_one_side_only_is_reasoning_missing(reasoning: str, content: str, keep_think_end: bool, swap: bool) -> None:
    with_reasoning = AssistantTurn(reasoning=reasoning, content=content)
    without = AssistantTurn(reasoning=None, content=content)
    ref = reconstruct_output_ids(with_reasoning, TOK).ids
    rec = reconstruct_output_ids(without, TOK, thinking=keep_think_end).ids  # thinking=False: no </think> at all
    if swap:
        ref, rec = rec, ref
    c = compare_ids(ref, rec, TOK)
    assert c.kind == REASONING_MISSING
    assert c.region == "reasoning" or not keep_think_end
    assert "reasoning" in c.detail


def test_reasoning_missing_plus_a_text_difference_is_text_mismatch() -> None:
    c = compare_ids(output_ids("think hard", "answer"), output_ids("", "another answer"), TOK)
    assert c.kind == TEXT_MISMATCH and REASONING_MISSING in c.kinds


def test_different_reasoning_text_on_both_sides_is_text_mismatch() -> None:
    c = compare_ids(output_ids("think hard", "answer"), output_ids("think less", "answer"), TOK)
    assert c.kind == TEXT_MISMATCH and c.region == "reasoning"


# -- special tokens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", TURNS[:40], ids=[f"turn-{i}" for i in range(40)])
def test_wrong_im_end_constant_163533_is_special_token_mismatch(case: dict[str, Any]) -> None:
    ref = case["output_ids"]
    assert ref[-1] == IM_END_ID
    rec = ref[:-1] + [WRONG_IM_END_ID]
    c = compare_ids(ref, rec, TOK)
    assert (c.kind, c.kinds) == (SPECIAL_TOKEN_MISMATCH, (SPECIAL_TOKEN_MISMATCH,))
    assert (c.first_diff, c.region) == (len(ref) - 1, "end")
    assert compare_ids(rec, ref, TOK).kind == SPECIAL_TOKEN_MISMATCH


def test_comparison_explains_the_wrong_constant_with_both_tokens_decoded() -> None:
    ref = output_ids("r", "Hello world")
    text = str(compare_ids(ref, ref[:-1] + [WRONG_IM_END_ID], TOK))
    for expected in ("special_token_mismatch", f"index {len(ref) - 1}", "<|im_end|>", "163586", "163533", "'chas'", "' world'"):
        assert expected in text


@given(golden_outputs, st.data())
def test_a_truncated_output_is_special_token_mismatch(ref: list[int], data: st.DataObject) -> None:
    cut = data.draw(st.integers(1, len(ref) - 1))
    c = compare_ids(ref, ref[:cut], TOK)
    assert c.kind == SPECIAL_TOKEN_MISMATCH and "cut short" in c.detail
    assert c.first_diff == cut
    assert compare_ids(ref[:cut], ref, TOK).kind == SPECIAL_TOKEN_MISMATCH


def test_missing_im_end_is_special_token_mismatch_at_the_end() -> None:
    ref = TURNS[0]["output_ids"]
    c = compare_ids(ref, ref[:-1], TOK)
    assert (c.kind, c.region, c.first_diff) == (SPECIAL_TOKEN_MISMATCH, "end", len(ref) - 1)


def test_extra_special_token_with_same_text_elsewhere_is_special_token_mismatch() -> None:
    ref = output_ids("r", "Hello world")
    rec = ref[:-1] + [163585, IM_END_ID]  # an extra [EOS]
    assert compare_ids(ref, rec, TOK).kind == SPECIAL_TOKEN_MISMATCH


def test_special_token_text_spelled_as_ordinary_ids_is_special_token_mismatch() -> None:
    ref = TOK.encode("r</think>say <|im_end|> now<|im_end|>")
    rec = TOK.encode("r</think>say ") + TOK.encode("<|im_end|>", allowed_special=set()) + TOK.encode(" now<|im_end|>")
    c = compare_ids(ref, rec, TOK)
    assert c.kind == SPECIAL_TOKEN_MISMATCH and "ordinary" in c.detail


def test_special_token_mismatch_plus_a_split_difference_stays_special_token_mismatch() -> None:
    canonical = output_ids("r", " hello world")
    i = canonical.index(TOK.encode(" hello")[0])
    left, right = two_token_splits(TOK, canonical[i])[0]
    sampled = canonical[:i] + [left, right] + canonical[i + 1 :]
    c = compare_ids(sampled, canonical[:-1] + [WRONG_IM_END_ID], TOK)
    assert c.kind == SPECIAL_TOKEN_MISMATCH and NON_CANONICAL_BPE in c.kinds


def test_special_token_mismatch_plus_a_text_difference_elsewhere_is_text_mismatch() -> None:
    ref = output_ids("r", "Hello world, how are you?")
    rec = output_ids("r", "Hello there, how are you?")[:-1] + [WRONG_IM_END_ID]
    c = compare_ids(ref, rec, TOK)
    assert c.kind == TEXT_MISMATCH and SPECIAL_TOKEN_MISMATCH in c.kinds


def test_a_changed_word_before_a_missing_im_end_is_text_mismatch_not_a_substitution() -> None:
    c = compare_ids(output_ids("r", "Hello world"), output_ids("r", "Hello there")[:-1], TOK)
    assert c.kind == TEXT_MISMATCH


# -- tool calls --------------------------------------------------------------------------------------


def _with_call_id(turn: dict[str, Any], call_id: str | None) -> dict[str, Any]:
    calls = [dict(c) for c in turn["tool_calls"]]
    calls[0] = {**calls[0], "id": call_id}
    return {**turn, "tool_calls": calls}


@pytest.mark.parametrize("case", WITH_TOOLS[:20], ids=[f"tools-{i}" for i in range(20)])
def test_a_changed_tool_call_id_is_tool_call_format(case: dict[str, Any]) -> None:
    turn = as_turn(_with_call_id(case["turn"], "call_0a1b2c3d"))  # a server-issued id instead of the model's own
    kept = dataclasses.replace(turn, metadata={**turn.metadata, "keep_server_call_ids": True})  # written verbatim
    rec = reconstruct_output_ids(kept, TOK, thinking=case["thinking"]).ids
    c = compare_ids(case["output_ids"], rec, TOK)
    assert (c.kind, c.region) == (TOOL_CALL_FORMAT, "tool_calls")


def test_a_generated_tool_call_index_off_by_the_conversation_offset_is_tool_call_format() -> None:
    case = WITH_TOOLS[0]
    rec = reconstruct_output_ids(_with_call_id(case["turn"], None), TOK, thinking=case["thinking"], call_index_offset=57).ids
    assert compare_ids(case["output_ids"], rec, TOK).kind == TOOL_CALL_FORMAT


def test_argument_json_whitespace_is_tool_call_format_not_whitespace_drift() -> None:
    model = AssistantTurn(reasoning="r", tool_calls=(ToolCall("functions.f:0", "f", '{"a":1,"b":[1,2]}'),), finish_reason="tool_calls")
    server = dataclasses.replace(model, tool_calls=(ToolCall("functions.f:0", "f", {"a": 1, "b": [1, 2]}),))
    c = compare_ids(reconstruct_output_ids(model, TOK).ids, reconstruct_output_ids(server, TOK).ids, TOK)
    assert c.kind == TOOL_CALL_FORMAT and c.region == "tool_calls"


def test_a_missing_tool_call_section_is_tool_call_format() -> None:
    case = WITH_TOOLS[0]
    rec = reconstruct_output_ids({**case["turn"], "tool_calls": []}, TOK, thinking=case["thinking"]).ids
    c = compare_ids(case["output_ids"], rec, TOK)
    assert c.kind == TOOL_CALL_FORMAT and "has none" in c.detail and c.region == "tool_calls"


def test_text_added_at_the_end_of_content_before_tool_calls_is_in_the_content_region() -> None:
    case = WITH_TOOLS[0]
    turn = {**case["turn"], "content": (case["turn"].get("content") or "") + " extra"}
    c = compare_ids(case["output_ids"], reconstruct_output_ids(turn, TOK, thinking=case["thinking"]).ids, TOK)
    assert (c.kind, c.region) == (TEXT_MISMATCH, "content")


def test_a_content_difference_is_text_mismatch_in_the_content_region() -> None:
    c = compare_ids(output_ids("r", "Hello world"), output_ids("r", "Hello there"), TOK)
    assert (c.kind, c.region) == (TEXT_MISMATCH, "content")


# -- logprobs give the exact sampled ids ---------------------------------------------------------------


@given(split_sequences(random_outputs))
def test_logprobs_rebuild_a_non_canonical_split_exactly(case: tuple[list[int], list[int], int]) -> None:
    canonical, sampled, _ = case
    text = TOK.decode(canonical)
    reasoning, _, rest = text.partition("</think>")
    content = rest.removesuffix("<|im_end|>")
    logprobs = [{"token": TOK.token_bytes(t).decode("utf-8", "replace"), "logprob": -0.1, "bytes": list(TOK.token_bytes(t))} for t in sampled]
    turn = AssistantTurn(reasoning=reasoning, content=content, logprobs=tuple(logprobs))
    rebuilt = reconstruct_output_ids(turn, TOK)
    assert rebuilt.source == "logprobs"
    assert rebuilt.ids == sampled
    assert compare_ids(sampled, rebuilt.ids, TOK).exact
    assert compare_ids(sampled, reconstruct_output_ids(turn, TOK, use_logprobs=False).ids, TOK).kind == NON_CANONICAL_BPE


# -- general -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", TURNS[:10], ids=[f"turn-{i}" for i in range(10)])
def test_identical_ids_are_exact_with_no_evidence(case: dict[str, Any]) -> None:
    c = compare_ids(case["output_ids"], list(case["output_ids"]), TOK)
    assert c.exact and c.kinds == ("exact",) and c.first_diff is None and c.diff_size == 0


def test_kind_is_the_most_serious_of_the_kinds_found() -> None:
    ref = output_ids("r", "Hello world, how are you?")
    rec = output_ids("r", "Hello there, how are you?")[:-1] + [WRONG_IM_END_ID]
    c = compare_ids(ref, rec, TOK)
    assert c.kind == max(c.kinds, key=KINDS.index)
    assert BENIGN_KINDS == {"exact", "non_canonical_bpe"}


def test_reference_ids_outside_the_vocabulary_name_the_reference_field() -> None:
    with pytest.raises(InvalidInputError) as err:
        compare_ids([1, 2, 10**6], [1, 2], TOK)
    assert err.value.field == "reference" and "1000000" in str(err.value) and "index 2" in str(err.value)
    with pytest.raises(InvalidInputError) as err:
        compare_ids([1, 2], [-1], TOK)
    assert err.value.field == "reconstructed"


@pytest.mark.parametrize("bad", ["abc", [1, "2"], [1.5], [True], {"ids": [1]}, None])
def test_non_integer_ids_are_refused_with_the_field_named(bad: Any) -> None:
    with pytest.raises(InvalidInputError) as err:
        compare_ids(bad, [1], TOK)
    assert err.value.field == "reference"


def test_comparison_is_frozen_and_its_dict_is_json() -> None:
    ref = output_ids("r", "Hello world")
    c = compare_ids(ref, ref[:-1] + [WRONG_IM_END_ID], TOK)
    assert isinstance(c, Comparison)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.kind = "exact"  # type: ignore[misc]
    data = json.loads(json.dumps(c.to_dict()))
    assert data["kind"] == SPECIAL_TOKEN_MISMATCH and data["reference_window"][-1]["id"] == IM_END_ID


def test_default_tokenizer_is_the_bundled_one() -> None:
    ref = output_ids("r", "x")
    assert compare_ids(ref, ref[:-1]).kind == SPECIAL_TOKEN_MISMATCH
    assert is_canonical(ref)


edits = st.lists(
    st.tuples(
        st.sampled_from(["insert", "delete", "replace"]),
        st.integers(0, 10**6),
        st.sampled_from([IM_END_ID, WRONG_IM_END_ID, THINK_END_ID, 163585, 163595, 220, 198, 11, 2695, 633]),
    ),
    min_size=1,
    max_size=3,
)


@given(golden_outputs, edits)
def test_benign_and_whitespace_kinds_guarantee_what_they_claim(ref: list[int], changes: list[tuple[str, int, int]]) -> None:
    rec = list(ref)
    for op, pos, token in changes:
        i = pos % (len(rec) + 1)
        if op == "insert":
            rec.insert(i, token)
        elif rec and i < len(rec):
            if op == "delete":
                del rec[i]
            else:
                rec[i] = token
    c = compare_ids(ref, rec, TOK)
    assert c.kind in KINDS and c.kind == c.kinds[-1]
    assert c.exact == (ref == rec)
    specials = [t for t in ref if TOK.is_special(t)] == [t for t in rec if TOK.is_special(t)]
    if c.kind == NON_CANONICAL_BPE:
        assert specials and TOK.decode_bytes(ref) == TOK.decode_bytes(rec)
    if c.kind == WHITESPACE_DRIFT:
        assert specials and "".join(TOK.decode(ref).split()) == "".join(TOK.decode(rec).split())
    if c.first_diff is not None:
        assert ref[: c.first_diff] == rec[: c.first_diff] and (c.first_diff == min(len(ref), len(rec)) or ref[c.first_diff] != rec[c.first_diff])
