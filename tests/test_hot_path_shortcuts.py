"""The shortcuts of the reconstruction hot path give exactly what the plain computation gives.

Each shortcut (a scan split in two, ids built between markers instead of one encode, a check skipped
when a cheaper one settles it) is compared here with the plain computation it replaces, written out in
the test, on hostile generated input.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from turn_strategies import turns

import kimi_recon.reconstruct as reconstruct_module
import kimi_recon.tokenizer as tokenizer_module
from kimi_recon import AssistantTurn, ToolCall, load_tokenizer, reconstruct_output_ids
from kimi_recon._render import k3
from kimi_recon.flags import Flag, FlagCode
from kimi_recon.profiles import get_profile
from kimi_recon.reconstruct import Reconstruction
from kimi_recon.render import render_turn_with_flags
from kimi_recon.segments import (
    RenderedTurn,
    Segment,
    _encode_between_markers,
    encode_segments,
    marker,
    rendered_turn,
    surrogate_flag,
    surrogate_flags,
)
from kimi_recon.special_tokens import (
    SPECIAL_TEXT_SHAPE,
    SPECIAL_TOKENS,
    registry_named,
    special_texts_in,
)
from kimi_recon.tokenizer import _find_space, _long_run, _long_runs, _may_have_long_run, may_be_cut, official_chunks

K25 = load_tokenizer()
K3_TOK = load_tokenizer(profile="kimi-k3")
SPECIAL_TEXTS = sorted({t.text for t in SPECIAL_TOKENS.named()} | {t.text for t in registry_named("kimi-k3").named()})
SHAPED = ["<|reserved_token_163700|>", "<|foo|>", "[ABC]", "[Abc]", "[a_b]", "<osagent_mode>", "<|", "|>", "<think", "[EO", "S]"]
CHARS = st.sampled_from(list('<>|[]/_ "&=:,.{}\n\tAZaz09') + ["é", "中", "🙂", "\u3000", "\ud83d", "\udc00"])
HOSTILE = st.lists(st.one_of(CHARS, st.sampled_from(SPECIAL_TEXTS + SHAPED), st.text(max_size=5)), max_size=10).map("".join)
PLAIN = st.text(st.characters(blacklist_characters="<[", blacklist_categories=["Cs"]), max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**15), 10**15) | st.floats(allow_nan=False, allow_infinity=False) | HOSTILE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE, inner, max_size=3),
    max_leaves=6,
)

#: The scans as they were written before they were split in two.
ONE_SHAPE = SPECIAL_TEXT_SHAPE
K3_FIELD_SHAPE = re.compile(r"<\|[A-Za-z0-9_]+\|>|\[[A-Za-z_]+\]|</?think>|<osagent_mode>")


@given(HOSTILE)
def test_special_texts_in_equals_the_one_regex_scan(text: str) -> None:
    assert special_texts_in(text) == ONE_SHAPE.findall(text)
    assert special_texts_in(text, K25.special_tokens) == [t for t in ONE_SHAPE.findall(text) if t in K25.special_tokens]


@given(HOSTILE)
def test_k3_field_scan_equals_the_one_regex_scan(text: str) -> None:
    known = {t.text for t in SPECIAL_TOKENS.named()} | {t.text for t in registry_named("kimi-k3").named()}
    assert k3._field_special_texts(text) == sorted({t for t in K3_FIELD_SHAPE.findall(text) if t in known})


def _turns(text: st.SearchStrategy[str]) -> st.SearchStrategy[AssistantTurn]:
    return turns(text, call_ids=st.none() | text.filter(bool), max_calls=3)


@given(_turns(HOSTILE), st.booleans(), st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct"]), st.sampled_from([None, "[EOS]"]))
def test_k2_reconstructed_ids_equal_one_encode_of_the_text(turn: AssistantTurn, thinking: bool, profile: str, stop: str | None) -> None:
    result = reconstruct_output_ids(turn, K25, profile, thinking, stop=stop, use_logprobs=False)
    assert result.ids == K25.encode(result.text)


@given(_turns(PLAIN), st.booleans(), st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct"]))
def test_k2_ids_between_markers_equal_one_encode(turn: AssistantTurn, thinking: bool, profile: str) -> None:
    # A turn with no special-token text: the ids are built between markers (not None), and equal one encode.
    rendered = render_turn_with_flags(turn, profile, thinking)
    assert rendered.fields_plain
    between = _encode_between_markers(rendered.segments, K25.special_tokens, K25.encoding.encode_ordinary)
    assert between is not None
    assert between == K25.encode(rendered.text)
    assert encode_segments(rendered.segments, K25, get_profile(profile), fields_plain=True, text=rendered.text) == between


@given(PLAIN, PLAIN, PLAIN)
def test_texts_next_to_each_other_are_one_span_between_markers(a: str, b: str, c: str) -> None:
    segments = [Segment(a, "x"), Segment(b, "y"), marker("<|im_end|>"), Segment(c, "z")]
    assert _encode_between_markers(segments, K25.special_tokens, K25.encoding.encode_ordinary) == K25.encode(a + b + "<|im_end|>" + c)


def test_texts_that_join_into_special_text_or_an_unknown_marker_are_left_to_one_encode() -> None:
    joined = [Segment("a<|im", "x"), Segment("_end|>b", "y")]
    assert _encode_between_markers(joined, K25.special_tokens, K25.encoding.encode_ordinary) is None
    unknown = [Segment("a", "x"), marker("<|not_a_token|>")]
    assert _encode_between_markers(unknown, K25.special_tokens, K25.encoding.encode_ordinary) is None
    assert encode_segments(unknown, K25, get_profile("kimi-k2.5"), fields_plain=True) == K25.encode("a<|not_a_token|>")


@given(_turns(HOSTILE), st.booleans(), st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct"]))
def test_k2_special_texts_and_fields_plain_match_a_scan_of_every_field(turn: AssistantTurn, thinking: bool, profile: str) -> None:
    rendered = render_turn_with_flags(turn, profile, thinking)
    in_fields = {t for s in rendered.segments if s.field is not None for t in ONE_SHAPE.findall(s.text)}
    assert rendered.special_texts == {s.text for s in rendered.segments if s.special} | in_fields
    assert rendered.fields_plain == (not in_fields)


@st.composite
def k3_turns(draw: st.DrawFn) -> AssistantTurn:
    args = st.dictionaries(HOSTILE, JSON_VALUES, max_size=3)
    calls = draw(
        st.lists(st.builds(ToolCall, st.none(), HOSTILE.filter(bool), args | args.map(json.dumps) | HOSTILE | st.just("[1]")), max_size=3)
    )
    return AssistantTurn(
        reasoning=draw(st.none() | HOSTILE | st.just("  ")),
        content=draw(st.none() | HOSTILE),
        tool_calls=tuple(calls),
        finish_reason=draw(st.sampled_from(["stop", "length", "tool_calls"])),
    )


@given(k3_turns(), st.booleans(), st.sampled_from([None, "[EOS]", "<|close|>tools<|sep|>"]))
def test_k3_special_texts_are_the_markers_written(turn: AssistantTurn, thinking: bool, stop: str | None) -> None:
    rendered = render_turn_with_flags(turn, "kimi-k3", thinking, stop=stop)
    assert rendered.special_texts == {s.text for s in rendered.segments if s.special}
    flagged = [f for f in rendered.flags if f.code == "special_text_in_field"]
    assert flagged == k3.special_text_flags(rendered.segments)  # the flags of one scan of the segments, in their order
    assert rendered.flags[len(rendered.flags) - len(flagged) :] == tuple(flagged)


@given(st.lists(st.tuples(HOSTILE, st.none() | st.sampled_from(["content", "reasoning"]), st.booleans()), max_size=40))
def test_surrogate_flags_equal_a_check_of_every_piece(pieces: list[tuple[str, str | None, bool]]) -> None:
    segments = [Segment(t, f, s) for t, f, s in pieces]
    expected = [f for seg in segments if not seg.special and (f := surrogate_flag(seg.text, seg.field)) is not None]
    assert surrogate_flags(segments, "".join(s.text for s in segments)) == expected
    assert surrogate_flags(segments) == expected
    assert surrogate_flags(iter(segments)) == expected


@given(st.dictionaries(HOSTILE, JSON_VALUES, max_size=4))
def test_arguments_written_as_json_dumps_are_written_member_by_member_the_same(args: dict[str, Any]) -> None:
    # Why argument_flags may stop early when the text is json.dumps of the object: every member's own
    # text is then what the renderer writes for its value (a string value is never compared: it is written
    # as the string itself).
    text = json.dumps(args, ensure_ascii=False)
    parsed = json.loads(text)
    members = k3.raw_argument_values(text)
    assert members is not None
    assert [key for key, _ in members] == list(parsed)
    assert all(raw == k3.xtml_value(parsed[key]) for key, raw in members if not isinstance(parsed[key], str))
    assert k3.argument_flags(ToolCall(None, "f", text), "tool_calls[0]", k3.parse_arguments(text)) == []


SPELLINGS: dict[str, Callable[[Any], str]] = {
    "json.dumps": lambda a: json.dumps(a, ensure_ascii=False),
    "json.dumps ascii": json.dumps,
    "compact": lambda a: json.dumps(a, ensure_ascii=False, separators=(",", ":")),
    "compact ascii": lambda a: json.dumps(a, separators=(",", ":")),
    "indented": lambda a: json.dumps(a, indent=2),
    "spaced": lambda a: json.dumps(a, separators=(" , ", " : ")),
}


@given(st.dictionaries(HOSTILE, JSON_VALUES, max_size=4), st.sampled_from(sorted(SPELLINGS)))
def test_argument_flags_of_any_spelling_equal_the_member_by_member_reading(args: dict[str, Any], spelling: str) -> None:
    text = SPELLINGS[spelling](args)
    parsed = k3.parse_arguments(text)
    written = {key: k3.xtml_value(value) for key, value in json.loads(text).items()}
    field = "tool_calls[0].function.arguments"
    expected = k3._flags_member_by_member(text, json.loads(text), written, field)
    if all(isinstance(v, str) for v in json.loads(text).values()):
        expected = []  # nothing to re-spell: argument_flags stops before reading members
    assert k3.argument_flags(ToolCall(None, "f", text), "tool_calls[0]", parsed, written) == expected
    assert k3.argument_flags(ToolCall(None, "f", text), "tool_calls[0]", parsed) == expected


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), -0.0, 1e300, 1e-7, 2**70, -(2**70), True, False, None, 0])
def test_xtml_value_of_a_scalar_is_what_json_dumps_writes(value: Any) -> None:
    assert k3.xtml_value(value) == json.dumps(value, ensure_ascii=False)


@given(JSON_VALUES)
def test_xtml_value_and_type_equal_json_dumps_and_the_isinstance_chain(value: Any) -> None:
    assert k3.xtml_value(value) == (value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    assert (k3._JSON_TYPE.get(type(value)) or k3.xtml_type(value)) == k3.xtml_type(value)


@pytest.mark.parametrize("text", ["", "1.50", '{"a": 1e2}', "[1, {\"b\": 2}]", '"x"'])
def test_numbers_and_spacing_come_from_one_tokenisation(text: str) -> None:
    tokens = k3._JSON_TOKEN.findall(text)
    assert k3._numbers(tokens) == [t for t in tokens if k3._NUMBER.fullmatch(t)]
    assert k3._spacing(tokens) == [t for t in tokens if t.isspace()]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30_000), st.booleans()), min_size=1, max_size=6))
def test_a_text_said_not_to_be_cut_is_one_official_chunk(runs: list[tuple[int, bool]]) -> None:
    text = "".join(("x" if non_space else " ") * n for n, non_space in runs)
    if not may_be_cut(text):
        assert list(official_chunks(text)) == [text]
    if max(len(m.group()) for m in re.finditer(r"\s+|\S+", text)) > 25_000:
        assert may_be_cut(text)


def test_a_text_over_the_chunk_size_may_be_cut() -> None:
    text = "a b " * 100_001
    assert may_be_cut(text) and len(list(official_chunks(text))) == 2


def test_a_long_plain_k2_turn_is_encoded_between_markers_and_equals_one_encode(monkeypatch: pytest.MonkeyPatch) -> None:
    turn = AssistantTurn(reasoning="word and more " * 3000, content="The answer, at length. " * 1500)
    rendered = render_turn_with_flags(turn, "kimi-k2.5")
    assert len(rendered.text) > 25_000 and not may_be_cut(rendered.text)
    expected = K25.encode(rendered.text)

    def one_encode(*_: object) -> list[int]:
        raise AssertionError("the one encode ran")

    monkeypatch.setattr(K25, "encode_with_specials", one_encode)
    assert reconstruct_output_ids(turn, K25, "kimi-k2.5").ids == expected


RUNS = st.lists(st.tuples(st.sampled_from([" ", "\n", "\u3000", "a", "字", "<|im_end|>"]), st.integers(1, 40)), max_size=12).map(
    lambda parts: "".join(ch * n for ch, n in parts)
)


@given(RUNS, st.integers(1, 12))
def test_long_runs_are_the_runs_the_regex_finds(text: str, max_run: int) -> None:
    assert list(_long_runs(text, max_run)) == [(m.start(), m.end()) for m in _long_run(max_run).finditer(text)]


#: Runs of pure-ASCII text, with every ASCII character ``str.isspace`` accepts: the ``str.find`` path.
ASCII_RUNS = st.lists(
    st.tuples(st.sampled_from([" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1f", "a", "+", "\x1b"]), st.integers(1, 40)), max_size=12
).map(lambda parts: "".join(ch * n for ch, n in parts))


@given(ASCII_RUNS, st.integers(1, 12))
def test_long_runs_of_ascii_text_are_the_runs_the_regex_finds(text: str, max_run: int) -> None:
    assert list(_long_runs(text, max_run)) == [(m.start(), m.end()) for m in _long_run(max_run).finditer(text)]
    assert _may_have_long_run(text, max_run) or _long_run(max_run).search(text) is None


@given(st.one_of(ASCII_RUNS, RUNS), st.integers(0, 60), st.integers(0, 60), st.integers(1, 8))
def test_find_space_is_the_first_whitespace_the_regex_finds(text: str, start: int, end: int, window: int) -> None:
    # with small search windows too, so the window-by-window search crosses window edges
    found = re.compile(r"\s").search(text, start, end)
    expected = found.start() if found is not None else -1
    assert _find_space(text, start, end, text.isascii()) == expected
    saved = tokenizer_module._FIND_WINDOW
    tokenizer_module._FIND_WINDOW = window
    try:
        assert _find_space(text, start, end, text.isascii()) == expected
    finally:
        tokenizer_module._FIND_WINDOW = saved


#: Zero as a provider may spell it: ``-0`` (json.loads reads 0, the renderer writes ``0``).
MINUS_ZERO = object()
SCALAR_MEMBERS = st.lists(
    # keys without surrogates: JSON would join a high+low pair into one character, another key
    st.tuples(st.text(st.characters(blacklist_categories=["Cs"]), max_size=8), st.one_of(st.integers(-(10**20), 10**20), st.booleans(), st.none(), HOSTILE, st.just(MINUS_ZERO))),
    max_size=5,
    unique_by=lambda member: member[0],
)


@given(SCALAR_MEMBERS, st.sampled_from([", ", ",", " , "]))
def test_argument_flags_of_scalar_values_flag_exactly_the_respelled_numbers(members: list[tuple[str, Any]], separator: str) -> None:
    # Strings, booleans, null and nonzero integers have one JSON spelling each (argument_flags stops early
    # when every value is one of them); zero spelled -0 is written 0, and only that is flagged.
    raw = {k: "-0" if v is MINUS_ZERO else json.dumps(v) for k, v in members}
    text = "{" + separator.join(f"{json.dumps(k)}: {raw[k]}" for k, _ in members) + "}"
    args = json.loads(text)
    respelled = [k for k, v in members if not isinstance(v, str) and raw[k] != k3.xtml_value(args[k])]
    assert respelled == [k for k, v in members if v is MINUS_ZERO]
    flags = k3.argument_flags(ToolCall(None, "f", text), "tool_calls[0]", k3.parse_arguments(text))
    assert [f.code for f in flags] == ["argument_number_respelled"] * len(respelled)
    assert all(repr(k) in f.message for k, f in zip(respelled, flags, strict=True))


def test_an_integer_spelled_minus_zero_is_flagged_as_respelled() -> None:
    text = '{"n": -0, "s": "2024-05-01"}'
    flags = k3.argument_flags(ToolCall(None, "f", text), "tool_calls[0]", k3.parse_arguments(text))
    assert [f.code for f in flags] == ["argument_number_respelled"]


# -- frozen dataclasses built without their __init__ on the hot path ------------------------------------------------


@given(_turns(HOSTILE), st.sampled_from(["kimi-k2.5", "kimi-k3"]), st.booleans(), st.booleans())
def test_a_rendered_turn_a_renderer_builds_is_the_one_the_dataclass_builds(turn: AssistantTurn, profile: str, plain: bool, ordinary: bool) -> None:
    rendered = render_turn_with_flags(turn, profile)
    built = rendered_turn(rendered.segments, rendered.flags, fields_plain=plain, fields_ordinary=ordinary)
    by_dataclass = RenderedTurn(rendered.segments, rendered.flags, fields_plain=plain, fields_ordinary=ordinary)
    assert vars(built) == vars(by_dataclass)  # every field, the text included, and nothing more
    assert built == by_dataclass and hash(built) == hash(by_dataclass)
    assert [f.name for f in dataclasses.fields(RenderedTurn)] == list(vars(built))  # a field added is a field built


@given(st.lists(st.integers(0, 163_839), max_size=5), HOSTILE, st.sampled_from(["rendered", "logprobs", "server_token_ids"]), st.booleans())
def test_a_reconstruction_the_rebuild_builds_is_the_one_the_dataclass_builds(ids: list[int], text: str, source: Any, thinking: bool) -> None:
    flags = (Flag(FlagCode.TRUNCATED, "cut", "finish_reason"),)
    built = reconstruct_module._built(ids, text, flags, source, "kimi-k3", thinking, "vllm==0.33.0")
    plain = Reconstruction(ids, text, flags, source, "kimi-k3", thinking, "vllm==0.33.0")
    assert vars(built) == vars(plain) and built == plain
    assert [f.name for f in dataclasses.fields(Reconstruction)] == list(vars(built))  # a field added is a field built


@given(
    _turns(HOSTILE),
    st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct", "kimi-k3"]),
    st.booleans(),
    st.booleans(),
    st.none() | st.fixed_dictionaries({"completion_tokens_details": st.fixed_dictionaries({"reasoning_tokens": st.integers(0, 9)})}),
)
def test_a_turn_with_reasoning_and_no_note_on_it_has_no_reasoning_flag(
    turn: AssistantTurn, profile: str, thinking: bool, stated: bool, usage: dict[str, Any] | None
) -> None:
    # the rebuild does not ask reasoning_flags about such a turn (reconstruct._finished)
    if turn.reasoning and not {"unread_reasoning_keys", "reasoning_sources_disagree"} & set(turn.metadata):
        assert reconstruct_module.reasoning_flags(turn, get_profile(profile), thinking, stated, usage) == []
