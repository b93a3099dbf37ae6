"""Every fast path of one turn's rebuild gives what the general path gives (issue 23 item 4).

The fast reading of a stored message (``responses._plain_message_turn``) is compared with the general reading
of the same message (a non-dict mapping takes the general path: same fields, same checks) on generated messages
of every shape, edge shapes included; the rebuilt ids and flags of the official golden turns are compared
through both readings."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimi_recon import responses
from kimi_recon.errors import KimiReconError
from kimi_recon.models import FINISH_REASONS, AssistantTurn, ToolCall, _call_of_proven_fields, _turn_of_proven_fields
from kimi_recon.reconstruct import reconstruct_output_ids
from kimi_recon.render import render_turn_with_flags
from kimi_recon.responses import turn_from_response
from kimi_recon.segments import RenderedTurn, Segment

GOLDEN = Path(__file__).parent / "data" / "golden"
SPECIAL = st.sampled_from(["<|im_end|>", "</think>", "<think>", "<|open|>", "<|sep|>", "[EOS]", "<|tool_call_begin|>", "[BOS]"])
TEXT = st.one_of(st.text(max_size=12), SPECIAL, st.lists(st.text(max_size=4) | SPECIAL, max_size=4).map("".join))
ODD = st.one_of(st.none(), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
MAYBE_TEXT = st.one_of(st.none(), st.just(""), TEXT, ODD)
ARGUMENTS = st.one_of(
    st.none(), st.just(""), TEXT, st.just("{}"), st.just('{"a": 1.50, "b": [1, 2]}'), st.just("[1]"), st.just("{not json"),
    st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=2), st.integers(),
)
FINISH = st.sampled_from([None, "stop", "length", "tool_calls", "error", "content_filter", "weird"])
CALL_ID = st.one_of(st.none(), st.just(""), st.just("functions.get:0"), st.just("call_abc"), TEXT, st.integers())


@st.composite
def tool_call(draw: st.DrawFn) -> Any:
    function: dict[str, Any] = {}
    if draw(st.booleans()):
        function["name"] = draw(st.one_of(st.sampled_from(["get", "search_web", "名前"]), st.just(""), st.none(), TEXT, st.integers()))
    if draw(st.booleans()):
        function["arguments"] = draw(ARGUMENTS)
    call: dict[str, Any] = {"function": draw(st.just(function) | st.just(function) | ODD)}
    for key, value in (("id", CALL_ID), ("type", st.sampled_from(["function", "custom", None])), ("index", st.integers(0, 3))):
        if draw(st.booleans()):
            call[key] = draw(value)
    return draw(st.just(call) | st.just(call) | st.just(call) | ODD)


@st.composite
def message(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {}
    for key, value in (
        ("role", st.sampled_from(["assistant", "assistant", "user", None, 1])),
        ("content", MAYBE_TEXT | st.just([{"type": "text", "text": "a"}])),
        ("reasoning", MAYBE_TEXT),
        ("reasoning_content", MAYBE_TEXT),
        ("tool_calls", st.one_of(st.none(), st.just([]), st.lists(tool_call(), max_size=3), ODD)),
        ("finish_reason", st.one_of(FINISH, ODD)),  # stored dumps put it in the message, where it wins
    ):
        if draw(st.booleans()):
            msg[key] = draw(value)
    if draw(st.integers(0, 5)) == 0:  # a key the fast reading does not take: the general reading decides
        extra = draw(st.sampled_from(["finish_reason", "model", "reasoning_details", "logprobs", "id", "usage", "error", "message", "choices", "x"]))
        msg[extra] = draw(st.one_of(st.none(), TEXT, st.just([]), st.just({"type": "reasoning.summary"})))
    if draw(st.booleans()) and msg.get("reasoning") and draw(st.booleans()):
        msg["reasoning_content"] = msg["reasoning"]  # both names, one text
    return msg


def outcome(read: Any) -> tuple[Any, ...]:
    """What a reading gives: the turn with its metadata (compare=False on the dataclass), or the error."""
    try:
        turn = read()
    except KimiReconError as err:
        return ("error", type(err), str(err))
    assert isinstance(turn, AssistantTurn)
    return ("turn", turn, dict(turn.metadata), type(turn.content), type(turn.reasoning))


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(message(), FINISH, st.integers(0, 3))
def test_fast_reading_of_a_stored_message_is_the_general_reading(msg: dict[str, Any], finish: str | None, offset: int) -> None:
    fast = outcome(lambda: turn_from_response(msg, lenient=True, finish_reason=finish, call_index_offset=offset))
    general = outcome(lambda: turn_from_response(MappingProxyType(msg), lenient=True, finish_reason=finish, call_index_offset=offset))
    assert fast == general


@settings(max_examples=300, deadline=None)
@given(message(), FINISH, st.integers(0, 3))
def test_fast_reading_never_raises_and_only_takes_what_the_general_reading_accepts(msg: dict[str, Any], finish: str | None, offset: int) -> None:
    fast = responses._plain_message_turn(msg, offset, finish)  # never raises: anything unusual is None
    if fast is not None:
        general = turn_from_response(MappingProxyType(msg), lenient=True, finish_reason=finish, call_index_offset=offset)
        assert outcome(lambda: fast) == outcome(lambda: general)


def _golden(folder: str) -> list[dict[str, Any]]:
    return [json.loads(line) for name in ("turns.jsonl", "turns_adversarial.jsonl") for line in (GOLDEN / folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize(("profile", "folder"), [("kimi-k2.5", "official-k2.5-dev"), ("kimi-k3", "official-k3-dev")])
def test_golden_turns_take_the_fast_reading_and_rebuild_the_official_ids_and_the_general_flags(profile: str, folder: str) -> None:
    rows = _golden(folder)
    assert all(responses._plain_message_turn(r["turn"], 0, "stop") is not None for r in rows)  # the fast path is what is tested
    for r in rows:
        fast = reconstruct_output_ids(r["turn"], None, profile, r["thinking"])
        general = reconstruct_output_ids(MappingProxyType(r["turn"]), None, profile, r["thinking"])
        assert fast.ids == r["output_ids"] == general.ids
        assert fast.flags == general.flags and fast.text == general.text == r["output"]


def test_special_texts_are_not_built_by_rendering_and_equal_a_scan_when_read() -> None:
    turn = AssistantTurn(reasoning="a <|im_end|> [EOS]", content="b")
    rendered = render_turn_with_flags(turn, "kimi-k2.5")
    assert "special_texts" not in rendered.__dict__  # nothing built per turn that no caller reads
    assert rendered.special_texts == {"<|im_end|>", "[EOS]", "</think>"}
    k3 = render_turn_with_flags(turn, "kimi-k3")
    assert k3.special_texts == {s.text for s in k3.segments if s.special}


def test_a_set_where_rendered_turns_once_took_their_special_texts_is_refused() -> None:
    with pytest.raises(KimiReconError, match="fields_plain"):
        RenderedTurn((Segment("a", "content"),), (), frozenset({"<|im_end|>"}))  # type: ignore[arg-type]


ARG_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(TEXT, inner, max_size=2),
    max_leaves=4,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["get", "a&b\"c", "<|sep|>"]), st.dictionaries(TEXT, ARG_VALUES, max_size=3) | TEXT | st.just("[1]"), st.integers(0, 4))
def test_a_prompt_history_call_is_written_as_the_turn_writes_its_call(name: str, arguments: Any, j: int) -> None:
    from kimi_recon._render import k3 as _k3
    from kimi_recon._render import k3_prompt as _k3_prompt

    if isinstance(arguments, str) and _k3.arguments_problem(arguments) is not None:
        return  # refused in a prompt (the official renderer refuses it), rendered as a block in a turn
    turn_segments: list[Segment] = []
    _k3.call_segments(turn_segments, ToolCall(None, name, arguments).name, j + 1, "tool_calls[0]", _k3.parse_arguments(arguments), {}, [])
    history = _k3_prompt._history_call({"function": {"name": name, "arguments": arguments}}, j, "tool_calls[0]")
    assert history == turn_segments


def test_a_prompt_call_argument_json_cannot_write_is_a_named_error() -> None:
    from kimi_recon._render import k3_prompt as _k3_prompt
    from kimi_recon.errors import InvalidTurnError

    with pytest.raises(InvalidTurnError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.arguments"):
        _k3_prompt._history_call({"function": {"name": "f", "arguments": {"a": {1, 2}}}}, 0, "messages[1].tool_calls[0]")


@pytest.mark.parametrize("finish", [None, "stop", "length", "tool_calls"])
def test_a_stored_message_carrying_its_own_finish_reason_takes_the_fast_reading(finish: str | None) -> None:
    msg = {"role": "assistant", "reasoning_content": "think", "content": "answer", "finish_reason": finish}
    fast = responses._plain_message_turn(msg, 0, "stop")
    assert fast is not None and fast.finish_reason == finish  # the message's own key wins over the record's
    assert outcome(lambda: fast) == outcome(lambda: turn_from_response(MappingProxyType(msg), lenient=True, finish_reason="stop"))


def _rebuilt_by_the_public_constructors(turn: AssistantTurn) -> AssistantTurn:
    calls = tuple(ToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in turn.tool_calls)
    return AssistantTurn(
        reasoning=turn.reasoning,
        content=turn.content,
        tool_calls=calls,
        finish_reason=turn.finish_reason,
        reasoning_complete=turn.reasoning_complete,
        logprobs=turn.logprobs,
        metadata=turn.metadata,
    )


def _state(turn: AssistantTurn) -> tuple[Any, ...]:
    """Everything a turn holds, its calls' too, with the types (== on the dataclass skips metadata and types)."""
    fields = {k: (type(v), v) for k, v in vars(turn).items() if k != "tool_calls"}
    calls = [(type(c), {k: (type(v), v) for k, v in vars(c).items()}) for c in turn.tool_calls]
    return fields, type(turn.tool_calls), calls, repr(turn)


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(message(), FINISH, st.integers(0, 3))
def test_every_turn_the_fast_reading_builds_without_the_constructors_checks_passes_them_unchanged(
    msg: dict[str, Any], finish: str | None, offset: int
) -> None:
    fast = responses._plain_message_turn(msg, offset, finish)
    if fast is not None:  # the public constructors would raise on a field the fast reading failed to prove
        assert _state(fast) == _state(_rebuilt_by_the_public_constructors(fast))


FIELD_TEXT = st.none() | TEXT
CALLS = st.lists(st.tuples(st.none() | TEXT, st.sampled_from(["get", "名前"]), TEXT), max_size=3)


@given(FIELD_TEXT, FIELD_TEXT, CALLS, st.sampled_from([None, *sorted(FINISH_REASONS)]), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
def test_the_private_constructors_build_what_the_public_ones_build_from_proven_fields(
    reasoning: str | None, content: str | None, calls: list[tuple[str | None, str, str]], finish: str | None, metadata: dict[str, Any]
) -> None:
    private = _turn_of_proven_fields(reasoning, content, tuple(_call_of_proven_fields(*c) for c in calls), finish, metadata)
    public = AssistantTurn(reasoning, content, tuple(ToolCall(*c) for c in calls), finish, metadata=metadata)
    assert _state(private) == _state(public) and private == public


def test_the_public_constructors_still_check_what_the_private_ones_trust() -> None:
    with pytest.raises(KimiReconError, match="finish_reason"):
        AssistantTurn(content="a", finish_reason="weird")
    with pytest.raises(KimiReconError, match="content"):
        AssistantTurn(content=1)  # type: ignore[arg-type]
    with pytest.raises(KimiReconError, match="tool_calls"):
        AssistantTurn(tool_calls=({"name": "f"},))  # type: ignore[arg-type]
    with pytest.raises(KimiReconError, match=r"function\.name"):
        ToolCall(None, "", "{}")


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(message())
def test_as_turn_of_a_stored_message_is_the_general_reading_as_a_stored_response(msg: dict[str, Any]) -> None:
    # as_turn takes the fast reading before turn_from_response's argument checks (its arguments need none)
    general = outcome(lambda: turn_from_response(MappingProxyType(msg), lenient=True, finish_reason="stop"))
    assert outcome(lambda: responses.as_turn(msg)) == general


_WHITESPACE = "".join(chr(c) for c in range(0x110000) if chr(c).isspace() or chr(c).strip() == "")


@given(st.text(alphabet=st.sampled_from(_WHITESPACE), max_size=4) | st.text(max_size=6) | st.lists(st.sampled_from(_WHITESPACE) | st.text(max_size=2), max_size=5).map("".join))
def test_k3_reads_whitespace_only_reasoning_with_isspace_as_strip_did(reasoning: str) -> None:
    # render_k3_turn writes the reasoning when `bool(reasoning) and not reasoning.isspace()` (was: bool(reasoning.strip()))
    assert (bool(reasoning) and not reasoning.isspace()) == bool(reasoning.strip())
    rendered = render_turn_with_flags(AssistantTurn(reasoning=reasoning, content="a"), "kimi-k3")
    assert any(s.field == "reasoning" for s in rendered.segments) == bool(reasoning.strip())


@pytest.mark.parametrize("profile", ["kimi-k2.5", "kimi-k3"])
def test_the_renderers_without_render_turn_with_flags_still_refuse_a_turn_that_is_not_one(profile: str) -> None:

    from kimi_recon._render import formats
    from kimi_recon.errors import InvalidInputTypeError
    from kimi_recon.profiles import get_profile
    from kimi_recon.render import render_k2_turn

    prof = get_profile(profile)
    with pytest.raises(InvalidInputTypeError, match="turn"):
        formats.render_turn(prof, {"content": "a"}, True, call_index_offset=0, stop=prof.stop_token)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputTypeError, match="turn"):
        render_k2_turn({"content": "a"}, prof, True, call_index_offset=0, stop=prof.stop_token)  # type: ignore[arg-type]


@given(
    st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct", "kimi-k3"]),
    st.sampled_from([True, False, 1, 0, None, "true"]),
    st.one_of(st.integers(-2, 5), st.booleans(), st.none(), st.just(1.0)),
)
def test_turn_options_of_a_profile_object_are_those_of_its_name(profile: str, thinking: Any, offset: Any) -> None:
    # a profile object with the usual options returns them at once; a name takes every rule
    from kimi_recon.profiles import get_profile
    from kimi_recon.record_options import turn_options

    def read(p: Any) -> Any:
        try:
            return turn_options(p, thinking, offset)
        except KimiReconError as err:
            return type(err), str(err)

    assert read(get_profile(profile)) == read(profile)


CALL_IDS = st.one_of(st.none(), st.sampled_from(["functions.get:0", "functions.a.b:12", "call_abc", "chatcmpl-tool-1f", "functions.get:x", ""]), st.text(max_size=8))


@given(st.lists(st.tuples(CALL_IDS, st.sampled_from(["get", "名前"])), max_size=4), st.integers(0, 3))
def test_foreign_calls_are_the_calls_whose_id_is_not_the_models_own(calls: list[tuple[str | None, str]], offset: int) -> None:
    tool_calls = [ToolCall(call_id, name, "{}") for call_id, name in calls]
    expected = [i for i, c in enumerate(tool_calls) if not responses.is_model_call_id(c.id)]  # the public test of an id
    assert [entry["index"] for entry in responses._foreign_calls(tool_calls, offset)] == expected


@given(st.lists(CALL_IDS.filter(lambda i: i != ""), min_size=1, max_size=3), st.booleans())  # (an empty id kept writes no segment)
def test_k2_writes_each_call_id_as_its_kind_says(ids: list[str | None], keep: bool) -> None:
    from kimi_recon.flags import FlagCode

    turn = AssistantTurn(tool_calls=tuple(ToolCall(i, "get", "{}") for i in ids), finish_reason="tool_calls", metadata={"keep_server_call_ids": keep})
    rendered = render_turn_with_flags(turn, "kimi-k2.5")
    expected = []
    for i in ids:
        if i is None:
            expected.append(FlagCode.GENERATED_TOOL_CALL_ID)
        elif not responses.is_model_call_id(i):
            expected.append(FlagCode.FOREIGN_TOOL_CALL_ID if keep else FlagCode.REPLACED_TOOL_CALL_ID)
    got = [f.code for f in rendered.flags if f.code in (FlagCode.GENERATED_TOOL_CALL_ID, FlagCode.FOREIGN_TOOL_CALL_ID, FlagCode.REPLACED_TOOL_CALL_ID)]
    assert got == expected
    written = [s.text for s in rendered.segments if s.field is not None and s.field.endswith(".id")]
    assert [w == i for w, i in zip(written, ids, strict=True)] == [i is not None and (keep or responses.is_model_call_id(i)) for i in ids]
