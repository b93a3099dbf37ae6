"""Turns encoded together give the ids each gives alone (issue 23, items 2 and 4).

A chunk of records is rendered first, then every text between markers of every turn goes to tiktoken in one
call, joined by a special token (``KimiTokenizer.encode_many``), so threads hand the GIL over once a
chunk instead of a few times a record. Each claim is checked against the one-at-a-time encode, which the golden
tests check against the official ids: the texts alone, whole rendered turns of both formats, and whole records
(ids, flags, errors at their indices) through ``reconstruct_records`` and ``audit_dataset``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from turn_strategies import turns

from kimi_recon import AssistantTurn, load_tokenizer
from kimi_recon._batch.pool import _audit_chunk, _Job
from kimi_recon._records.record import _options, audit_record, reconstruct_record
from kimi_recon.dataset import audit_dataset, reconstruct_records
from kimi_recon.errors import KimiReconError
from kimi_recon.profiles import get_profile
from kimi_recon.record_options import parse_options
from kimi_recon.render import render_turn_with_flags
from kimi_recon.responses import as_turn
from kimi_recon.segments import TOGETHER_MAX_CHARS, encode_rendered_together, encode_segments
from kimi_recon.tokenizer import MAX_RUN_CHARS, KimiTokenizer, may_be_cut

K25 = load_tokenizer()
K3 = load_tokenizer(profile="kimi-k3")
TOKENIZERS = {"kimi-k2.5": K25, "kimi-k3": K3}
SEPARATOR = "<|reserved_token_163837|>"  # the slot both tables join with (written out: the test must not ask the code)
SPECIALS = ["<|im_end|>", "</think>", "<think>", "<|open|>", "<|sep|>", "[EOS]", "[start_header_id]", "<osagent_mode>", SEPARATOR, "<|reserved_token_16383", "7|>"]
TEXT = st.lists(
    st.one_of(st.text(max_size=6), st.sampled_from(SPECIALS), st.sampled_from(["\ud83d", "\ude00", "\ud83d\ude00", "  ", "\n\n", " 12", "名前"])), max_size=8
).map("".join)
GOLDEN = Path(__file__).parent / "data" / "golden"


def test_the_separator_is_the_reserved_slot_written_out_and_no_bpe_rank() -> None:
    for tok in TOKENIZERS.values():
        assert tok._separator == (SEPARATOR, 163837) and tok.special_tokens[SEPARATOR] == 163837
        assert tok.encode(SEPARATOR, allowed_special=set()) != [163837]  # as ordinary text it is not the special id


ALLOWED: st.SearchStrategy[Any] = st.one_of(st.just("all"), st.just(frozenset()), st.sets(st.sampled_from(SPECIALS)))


@settings(max_examples=400, deadline=None)
@given(st.lists(TEXT, max_size=12), st.sampled_from(sorted(TOKENIZERS)), ALLOWED)
def test_texts_encoded_together_equal_each_encoded_alone(texts: list[str], name: str, allowed: Any) -> None:
    tok = TOKENIZERS[name]
    assert tok.encode_many(texts, allowed_special=allowed) == [tok.encode(t, allowed_special=allowed) for t in texts]


def test_a_text_holding_the_separator_or_cut_by_the_official_chunking_is_encoded_alone_with_the_same_ids() -> None:
    long = "word " * (MAX_RUN_CHARS // 4) + "x" * (MAX_RUN_CHARS + 10)  # official chunking cuts the run
    assert may_be_cut(long)
    texts = ["a b", SEPARATOR + " c", long, "", "d <|im_end|>"]
    for tok in TOKENIZERS.values():
        allowed: Any
        for allowed in ("all", frozenset()):
            assert tok.encode_many(texts, allowed_special=allowed) == [tok.encode(t, allowed_special=allowed) for t in texts]
            some = [texts[0], long, texts[4]]
            assert tok.encode_many(some, allowed_special=allowed) == [tok.encode(t, allowed_special=allowed) for t in some]


def test_a_tokenizer_with_no_reserved_slot_encodes_each_text_alone() -> None:
    import tiktoken

    encoding = K25.encoding
    plain = tiktoken.Encoding("no-reserved", pat_str=encoding._pat_str, mergeable_ranks=encoding._mergeable_ranks, special_tokens={"<|im_end|>": 163586})
    tok = KimiTokenizer(plain, source="test")
    assert tok._separator is None
    assert tok.encode_many(["a b", "x<|im_end|>"]) == [K25.encode("a b"), K25.encode("x<|im_end|>")]


def _turns() -> st.SearchStrategy[AssistantTurn]:
    return turns(TEXT, arguments=TEXT | st.just('{"a": 1}'))


@settings(max_examples=200, deadline=None)
@given(st.lists(_turns(), min_size=1, max_size=6), st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k3"]), st.booleans())
def test_rendered_turns_encoded_together_equal_each_encoded_alone(turns: list[AssistantTurn], profile: str, thinking: bool) -> None:
    prof = get_profile(profile)
    tok = K3 if profile == "kimi-k3" else K25
    rendered = [render_turn_with_flags(t, prof, thinking) for t in turns]
    together = encode_rendered_together(rendered, tok, prof)
    alone = [encode_segments(r.segments, tok, prof, fields_plain=r.fields_plain, text=r.text) for r in rendered]
    assert together == (alone if len(rendered) > 1 else [None])  # (one turn alone takes the one-turn encode)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_turns(), st.booleans()), min_size=1, max_size=6), st.sampled_from(["kimi-k2.5", "kimi-k3"]))
def test_turns_longer_than_the_limit_are_left_to_their_own_encode_and_the_others_still_equal_each_alone(
    drafts: list[tuple[AssistantTurn, bool]], profile: str
) -> None:
    prof = get_profile(profile)
    tok = K3 if profile == "kimi-k3" else K25
    padding = "word " * (TOGETHER_MAX_CHARS // 5 + 1)
    turns = [dataclasses.replace(t, content=padding + (t.content or "")) if long else t for t, long in drafts]
    rendered = [render_turn_with_flags(t, prof) for t in turns]
    together = encode_rendered_together(rendered, tok, prof)
    short = [len(r.text) <= TOGETHER_MAX_CHARS for r in rendered]
    assert not any(s and long for s, (_, long) in zip(short, drafts, strict=True))
    for r, ids, is_short in zip(rendered, together, short, strict=True):
        if is_short and sum(short) > 1:
            assert ids == encode_segments(r.segments, tok, prof, fields_plain=r.fields_plain, text=r.text)
        else:
            assert ids is None  # the caller encodes it on its own


def _rows(folder: str) -> list[dict[str, Any]]:
    return [json.loads(line) for name in ("turns.jsonl", "turns_adversarial.jsonl") for line in (GOLDEN / folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def _records() -> list[Any]:
    k25, k3 = _rows("official-k2.5-dev"), _rows("official-k3-dev")
    records: list[Any] = [{"id": f"a{i}", "response": r["turn"], "reference_ids": r["output_ids"], "thinking": r["thinking"]} for i, r in enumerate(k25)]
    records += [{"id": f"b{i}", "response": r["turn"], "reference_ids": r["output_ids"], "thinking": r["thinking"], "profile": "kimi-k3"} for i, r in enumerate(k3)]
    records[3:3] = ['{"not json', {"id": "no-response"}, {"id": "bad", "response": k25[0]["turn"], "reference_ids": [1], "profile": "kimi-k9"}, 7]
    records.insert(40, {"id": "sep", "response": {"content": f"a {SEPARATOR} b", "reasoning_content": "r"}, "reference_ids": [1], "profile": "kimi-k3"})
    return records


RECORDS = _records()


@pytest.mark.parametrize("chunk_size", [1, 5, 64])
def test_records_rebuilt_in_chunks_equal_each_record_rebuilt_alone_and_the_official_ids(chunk_size: int) -> None:
    got = list(reconstruct_records(RECORDS, chunk_size=chunk_size))
    assert [r.index for r in got] == list(range(len(RECORDS)))
    for rec, result in zip(RECORDS, got, strict=True):
        if result.error is not None:
            with pytest.raises(Exception):  # noqa: B017 - whatever it is, the record alone fails too
                reconstruct_record(rec)
            continue
        alone = reconstruct_record(rec)
        assert list(result.ids or ()) == alone.ids and result.flags == alone.flags and result.source == alone.source
        if isinstance(rec, dict) and rec["id"][0] in "ab":
            assert alone.ids == rec["reference_ids"]  # the golden turns: the official ids
    assert sum(r.error is not None for r in got) == 4


@pytest.mark.parametrize("chunk_size", [1, 7, 64])
def test_a_chunk_audit_equals_each_record_audited_alone(chunk_size: int) -> None:
    items: list[tuple[int, int | None, Any]] = [(i, None, rec) for i, rec in enumerate(RECORDS)]
    job = _Job(None, None, True, True)
    together = [r for k in range(0, len(items), chunk_size) for r in _audit_chunk(items[k : k + chunk_size], job)]
    alone = [audit_record(rec, index=i) for i, rec in enumerate(RECORDS)]
    assert [r.to_dict() for r in together] == [r.to_dict() for r in alone]
    assert sum(r.kind == "exact" for r in alone) == 300 and sum(r.error is not None for r in alone) == 4  # every golden turn; the four bad records
    sep = next(r for r in alone if r.record_id == "sep")
    assert sep.error is None and sep.kind != "exact"  # its reference is made up; its separator text is ordinary text
    summary = audit_dataset(RECORDS, chunk_size=chunk_size)
    assert summary.total == len(RECORDS) and summary.counts == audit_dataset(RECORDS, chunk_size=1).counts


@pytest.mark.parametrize(("profile", "folder"), [("kimi-k2.5", "official-k2.5-dev"), ("kimi-k3", "official-k3-dev")])
def test_golden_turns_encoded_together_are_the_official_ids(profile: str, folder: str) -> None:
    prof, tok = get_profile(profile), TOKENIZERS[profile]
    rows = _rows(folder)
    rendered = [render_turn_with_flags(as_turn(r["turn"]), prof, r["thinking"]) for r in rows]
    assert encode_rendered_together(rendered, tok, prof) == [r["output_ids"] for r in rows]  # (no None: every one shared the call)


def _general_options(record: dict[str, Any], profile: Any, thinking: Any, model: Any) -> Any:
    try:
        options = parse_options(record, profile=profile, thinking=thinking, read=("profile", "thinking", "call_index_offset"), model=model)
    except KimiReconError as err:
        return type(err), str(err)
    return options.profile.name, options.thinking, options.call_index_offset or 0


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["profile", "thinking", "call_index_offset", "model", "id", "response"]),
                    st.sampled_from([None, "kimi-k3", "kimi-k2.5", "moonshotai/kimi-k3", "kimi-k9", True, False, 0, 2, -1, "x"]), max_size=4),
    st.sampled_from([None, "kimi-k2.5", "kimi-k3", "kimi-k2-instruct", "nope"]),
    st.sampled_from([True, False, "false", 1]),
    st.sampled_from([None, "moonshotai/kimi-k3", "kimi-k2-instruct", "other", 3]),
)
def test_the_options_of_a_record_that_sets_none_are_the_general_reading(record: dict[str, Any], profile: Any, thinking: Any, model: Any) -> None:
    try:
        got: Any = _options(record, profile, thinking, model)
    except KimiReconError as err:
        got = (type(err), str(err))
    assert got == _general_options(record, profile, thinking, model)
