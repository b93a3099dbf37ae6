"""Response parsing: OpenRouter chat completions (dicts, SDK objects, streams) -> AssistantTurn, exactly."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from extras import require
from hypothesis import given, settings
from hypothesis import strategies as st
from openrouter_wire import call, completion, error_chunk, sse, stream_chunks

from kimi_recon.errors import InvalidTurnError, KimiReconError
from kimi_recon.openrouter import (
    InvalidResponseError,
    OpenRouterError,
    assemble_stream,
    count_tool_calls,
    is_model_call_id,
    iter_sse_lines,
    replace_foreign_call_ids,
    turn_from_openrouter,
    turn_from_stream,
)

# -- non-streamed responses ---------------------------------------------------------------------------


def test_content_null_with_tool_calls_keeps_ids_names_and_argument_text_verbatim() -> None:
    args = '{"city":  "Paris",\n "unit":"C"}'  # odd spacing: must survive byte for byte
    resp = completion(
        {"content": None, "reasoning": "need weather", "tool_calls": [call("functions.get_weather:0", "get_weather", args)]},
        "tool_calls",
    )
    turn = turn_from_openrouter(resp)
    assert turn.content is None
    assert turn.reasoning == "need weather"
    assert turn.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("functions.get_weather:0", "get_weather", args)]
    assert "foreign_tool_call_ids" not in turn.metadata


def test_reasoning_only_in_reasoning_details_is_the_text_entries_in_order() -> None:
    details = [
        {"type": "reasoning.text", "text": "First, ", "format": "unknown", "index": 0},
        {"type": "reasoning.text", "text": None, "signature": "sig"},  # signature-only entry adds no text
        {"type": "reasoning.text", "text": "then second.", "format": "unknown", "index": 1},
    ]
    turn = turn_from_openrouter(completion({"content": "Answer", "reasoning_details": details}))
    assert turn.reasoning == "First, then second."
    assert turn.reasoning_complete
    assert turn.metadata["reasoning_source"] == "reasoning_details"


def test_reasoning_content_field_is_read_when_reasoning_is_absent() -> None:
    turn = turn_from_openrouter(completion({"content": "A", "reasoning_content": "thought"}))
    assert turn.reasoning == "thought"
    assert turn.metadata["reasoning_source"] == "reasoning_content"


def test_disagreeing_reasoning_sources_are_recorded() -> None:
    details = [{"type": "reasoning.text", "text": "other"}]
    turn = turn_from_openrouter(completion({"content": "A", "reasoning": "thought", "reasoning_details": details}))
    assert turn.reasoning == "thought"
    assert turn.metadata["reasoning_sources_disagree"] is True


@pytest.mark.parametrize(
    "details",
    [
        [{"type": "reasoning.summary", "summary": "I considered the weather."}],
        [{"type": "reasoning.encrypted", "data": "gAAAAB..."}],
    ],
    ids=["summary", "encrypted"],
)
def test_summary_or_encrypted_reasoning_only_marks_the_turn_incomplete(details: list[dict[str, Any]]) -> None:
    # OpenRouter fills ``reasoning`` with the summary in this case; it must not pass for the raw reasoning.
    reasoning = details[0].get("summary")
    turn = turn_from_openrouter(completion({"content": "Answer", "reasoning": reasoning, "reasoning_details": details}))
    assert turn.reasoning_complete is False
    assert turn.reasoning is None
    if reasoning:
        assert turn.metadata["reasoning_summary"] == reasoning


def test_several_parallel_tool_calls_keep_order_and_flag_server_issued_ids() -> None:
    calls = [
        call("call_abc123", "search", '{"q": "a"}', 0),
        call("functions.fetch:4", "fetch", '{"url": "u"}', 1),
        call("chatcmpl-tool-9f", "search", '{"q": "b"}', 2),
    ]
    turn = turn_from_openrouter(completion({"content": "", "tool_calls": calls}, "tool_calls"), call_index_offset=3)
    assert [c.id for c in turn.tool_calls] == ["call_abc123", "functions.fetch:4", "chatcmpl-tool-9f"]
    assert [c.name for c in turn.tool_calls] == ["search", "fetch", "search"]
    assert turn.metadata["foreign_tool_call_ids"] == [
        {"index": 0, "id": "call_abc123", "suggested_id": "functions.search:3"},
        {"index": 2, "id": "chatcmpl-tool-9f", "suggested_id": "functions.search:5"},
    ]


def test_replace_foreign_call_ids_uses_the_conversation_wide_index_and_keeps_the_originals() -> None:
    calls = [call("call_a", "search", "{}", 0), call("functions.fetch:3", "fetch", "{}", 1)]
    turn = turn_from_openrouter(completion({"content": None, "tool_calls": calls}, "tool_calls"), call_index_offset=2)
    fixed = replace_foreign_call_ids(turn)
    assert [c.id for c in fixed.tool_calls] == ["functions.search:2", "functions.fetch:3"]
    assert fixed.metadata["replaced_tool_call_ids"] == [{"index": 0, "id": "call_a", "suggested_id": "functions.search:2"}]
    assert "foreign_tool_call_ids" not in fixed.metadata
    assert replace_foreign_call_ids(fixed) is fixed  # nothing left to replace


def test_model_call_id_shape() -> None:
    assert is_model_call_id("functions.get_weather:12")
    assert is_model_call_id("functions.ns.tool:0")
    assert is_model_call_id(None)
    assert not is_model_call_id("call_abc")
    assert not is_model_call_id("functions.get_weather")
    assert not is_model_call_id("chatcmpl-tool-123")


def test_count_tool_calls_counts_only_assistant_calls_across_the_conversation() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [call("a", "f", "{}"), call("b", "g", "{}")]},
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "assistant", "content": None, "tool_calls": [call("c", "f", "{}")]},
        {"role": "user", "content": "again"},
    ]
    assert count_tool_calls(messages) == 3


def test_length_truncation_inside_reasoning() -> None:
    turn = turn_from_openrouter(completion({"content": None, "reasoning": "Let me think about"}, "length"))
    assert turn.truncated
    assert turn.reasoning == "Let me think about"
    assert turn.content is None
    assert turn.metadata["truncated_in"] == "reasoning"


def test_length_truncation_inside_content() -> None:
    turn = turn_from_openrouter(completion({"content": "The answer is", "reasoning": "done"}, "length"))
    assert turn.truncated
    assert turn.content == "The answer is"
    assert turn.metadata["truncated_in"] == "content"


def test_native_finish_reason_max_tokens_means_truncated() -> None:
    turn = turn_from_openrouter(completion({"content": "cut"}, "stop", native_finish_reason="MAX_TOKENS"))
    assert turn.truncated
    assert turn.metadata["finish_reason_raw"] == "stop"
    assert turn.metadata["native_finish_reason"] == "MAX_TOKENS"


def test_unknown_finish_reason_becomes_none_and_is_kept_raw() -> None:
    turn = turn_from_openrouter(completion({"content": "x"}, "weird"))
    assert turn.finish_reason is None
    assert turn.metadata["finish_reason_raw"] == "weird"


def test_provider_usage_logprobs_and_ids_are_carried() -> None:
    logprobs = {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]}
    turn = turn_from_openrouter(completion({"content": "Hi"}, logprobs=logprobs, system_fingerprint="fp"))
    assert turn.logprobs == tuple(logprobs["content"])
    assert turn.metadata["provider"] == "Moonshot AI"
    assert turn.metadata["usage"]["cost"] == 0.00042
    assert turn.metadata["response_id"] == "gen-123"
    assert turn.metadata["native_finish_reason"] == "stop"
    assert turn.metadata["system_fingerprint"] == "fp"


def test_content_given_as_text_parts_is_joined() -> None:
    turn = turn_from_openrouter(completion({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}))
    assert turn.content == "ab"


def test_response_as_json_text_parses_like_the_dict() -> None:
    resp = completion({"content": "x", "reasoning": "r"})
    assert turn_from_openrouter(json.dumps(resp)) == turn_from_openrouter(resp)


# -- openai SDK objects -------------------------------------------------------------------------------


def test_openai_sdk_completion_reads_extra_fields_from_model_extra() -> None:
    ChatCompletion = require("openai.types.chat").ChatCompletion

    resp = completion(
        {
            "content": None,
            "reasoning": "think",
            "reasoning_details": [{"type": "reasoning.text", "text": "think"}],
            "tool_calls": [call("call_1", "f", '{"a":1}')],
        },
        "tool_calls",
    )
    obj = ChatCompletion.model_validate(resp)
    # the premise: the SDK does not model these fields, they sit in model_extra
    assert obj.choices[0].message.model_extra is not None
    assert "reasoning" in obj.choices[0].message.model_extra
    assert "native_finish_reason" in (obj.choices[0].model_extra or {})
    turn = turn_from_openrouter(obj)
    assert turn == turn_from_openrouter(resp)
    assert turn.reasoning == "think"
    assert turn.metadata["provider"] == "Moonshot AI"
    assert turn.metadata["native_finish_reason"] == "tool_calls"
    assert turn.metadata["foreign_tool_call_ids"][0]["id"] == "call_1"


def test_openai_sdk_chunks_assemble_like_dicts() -> None:
    ChatCompletionChunk = require("openai.types.chat").ChatCompletionChunk

    chunks = stream_chunks(completion({"content": "Hello there", "reasoning": "hmm ok"}), pieces=3)
    objects = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert turn_from_stream(objects) == turn_from_stream(chunks)
    assert turn_from_stream(objects).reasoning == "hmm ok"


# -- bad input ----------------------------------------------------------------------------------------


def test_no_choices_is_an_error_naming_the_prompt() -> None:
    resp = completion({"content": "x"})
    resp["choices"] = []
    with pytest.raises(InvalidResponseError, match=r"'p-7'.*no choices") as info:
        turn_from_openrouter(resp, sample="p-7")
    assert isinstance(info.value, InvalidTurnError) and isinstance(info.value, KimiReconError)
    assert info.value.sample == "p-7"


def test_choice_with_nothing_generated_is_an_error_unless_the_model_stopped() -> None:
    with pytest.raises(InvalidResponseError, match="neither content nor tool calls nor reasoning"):
        turn_from_openrouter(completion({"content": "", "reasoning": None}, None), sample="p1")
    # a generation of only the stop token is a turn (the usage check and the server flags say when it is not)
    assert turn_from_openrouter(completion({"content": "", "reasoning": None}), sample="p1").content == ""


@pytest.mark.parametrize("arguments", [{"city": "Paris"}, None, 3])
def test_arguments_that_are_not_a_string_are_refused(arguments: Any) -> None:
    resp = completion({"content": None, "tool_calls": [call("functions.f:0", "f", arguments)]}, "tool_calls")
    with pytest.raises(InvalidResponseError, match=r"'p2'.*arguments") as info:
        turn_from_openrouter(resp, sample="p2")
    assert info.value.field == "choices[0].message.tool_calls[0].function.arguments"


def test_error_body_raises_openrouter_error_with_code_and_message() -> None:
    body = {"error": {"code": 502, "message": "Provider returned error", "metadata": {"provider_name": "X"}}}
    with pytest.raises(OpenRouterError) as info:
        turn_from_openrouter(body, sample="p3")
    assert info.value.code == 502
    assert info.value.message == "Provider returned error"
    assert info.value.retryable
    assert info.value.metadata == {"provider_name": "X"}
    assert "p3" in str(info.value)


def test_choice_level_error_and_finish_reason_error_raise() -> None:
    resp = completion({"content": "part"}, "error")
    with pytest.raises(OpenRouterError, match="finish_reason 'error'"):
        turn_from_openrouter(resp)
    resp = completion({"content": "part"})
    resp["choices"][0]["error"] = {"code": "server_error", "message": "boom"}
    with pytest.raises(OpenRouterError, match="boom") as info:
        turn_from_openrouter(resp)
    assert info.value.code == "server_error"


def test_non_function_tool_call_and_wrong_role_are_refused() -> None:
    resp = completion({"content": None, "tool_calls": [{"id": "x", "type": "custom", "custom": {}}]}, "tool_calls")
    with pytest.raises(InvalidResponseError, match="type"):
        turn_from_openrouter(resp)
    with pytest.raises(InvalidResponseError, match="role"):
        turn_from_openrouter(completion({"role": "user", "content": "x"}))


def test_redacted_error_drops_the_secret_everywhere() -> None:
    err = OpenRouterError("bad key sk-or-SECRET", code=401, metadata={"echo": "Bearer sk-or-SECRET"})
    clean = err.redacted("sk-or-SECRET")
    assert "sk-or-SECRET" not in str(clean) and "sk-or-SECRET" not in json.dumps(clean.to_dict())
    assert clean.code == 401


# -- streams ------------------------------------------------------------------------------------------


def test_stream_merges_reasoning_content_and_tool_calls_by_index() -> None:
    resp = completion(
        {
            "content": None,
            "reasoning": "I will call two tools.",
            "tool_calls": [call("functions.a:0", "a", '{"x": 1}', 0), call("functions.b:1", "b", '{"y": [1, 2]}', 1)],
        },
        "tool_calls",
    )
    turn = turn_from_stream(stream_chunks(resp, pieces=4))
    assert turn.reasoning == "I will call two tools."
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("functions.a:0", "a", '{"x": 1}'),
        ("functions.b:1", "b", '{"y": [1, 2]}'),
    ]
    assert turn.finish_reason == "tool_calls"
    assert turn.metadata["usage"]["cost"] == 0.00042
    assert turn.metadata["provider"] == "Moonshot AI"


def test_stream_interleaved_tool_call_deltas_merge_by_index() -> None:
    base = {"id": "g", "model": "m", "object": "chat.completion.chunk"}

    def tc(delta: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": {"tool_calls": delta}, "finish_reason": finish}]}

    chunks = [
        tc([{"index": 0, "id": "call_x", "type": "function", "function": {"name": "f", "arguments": '{"a"'}}]),
        tc([{"index": 1, "id": "call_y", "type": "function", "function": {"name": "g", "arguments": "{"}}]),
        tc([{"index": 0, "function": {"arguments": ": 1}"}}]),
        tc([{"index": 1, "function": {"arguments": "}"}}], "tool_calls"),
    ]
    turn = turn_from_stream(chunks, call_index_offset=1)
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [("call_x", "f", '{"a": 1}'), ("call_y", "g", "{}")]
    assert [e["suggested_id"] for e in turn.metadata["foreign_tool_call_ids"]] == ["functions.f:1", "functions.g:2"]


def test_raw_sse_lines_with_processing_comments_equal_the_dict_chunks() -> None:
    resp = completion({"content": "Bonjour", "reasoning": "French greeting"})
    chunks = stream_chunks(resp, pieces=3)
    assert turn_from_stream(sse(chunks)) == turn_from_stream(chunks)
    # the same stream as one block of text, and as bytes
    assert turn_from_stream("\n".join(sse(chunks))) == turn_from_stream(chunks)
    assert turn_from_stream([line.encode() for line in sse(chunks)]) == turn_from_stream(chunks)


def test_sse_without_blank_separators_is_still_framed_per_data_line() -> None:
    chunks = stream_chunks(completion({"content": "abc"}), pieces=3)
    lines = [line for line in sse(chunks, comments=False) if line]
    assert turn_from_stream(lines).content == "abc"


def test_mid_stream_error_chunk_raises_with_code_message_and_partial_response() -> None:
    chunks = stream_chunks(completion({"content": "Hello world", "reasoning": "r"}), pieces=2)[:-2]
    with pytest.raises(OpenRouterError) as info:
        turn_from_stream(sse(chunks + [error_chunk("server_error", "Provider disconnected unexpectedly")]), sample="p9")
    err = info.value
    assert err.code == "server_error"
    assert err.message == "Provider disconnected unexpectedly"
    assert err.kind == "stream"
    assert err.retryable
    assert err.prompt_id == "p9"
    assert err.response is not None and err.response["choices"][0]["message"]["content"] == "Hello world"


def test_sse_stream_cut_before_done_without_finish_reason_raises() -> None:
    chunks = stream_chunks(completion({"content": "Hello"}), pieces=2)[:-2]  # no finish chunk, no usage
    lines = sse(chunks)[:-2]  # and no [DONE]
    with pytest.raises(OpenRouterError, match="before \\[DONE\\]") as info:
        assemble_stream(lines)
    assert info.value.code == "incomplete_stream"


def test_stream_length_truncation_inside_reasoning() -> None:
    resp = completion({"content": None, "reasoning": "long thought that got cut"}, "length")
    turn = turn_from_stream(stream_chunks(resp, pieces=5))
    assert turn.truncated and turn.reasoning == "long thought that got cut"
    assert turn.metadata["truncated_in"] == "reasoning"


def test_stream_with_conflicting_tool_call_ids_is_refused() -> None:
    base = {"id": "g", "object": "chat.completion.chunk"}
    chunks = [
        base | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]}}]},
        base | {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "b", "function": {"arguments": "{}"}}]}}]},
    ]
    with pytest.raises(InvalidResponseError, match="changed id"):
        turn_from_stream(chunks)


def test_empty_stream_is_an_error() -> None:
    with pytest.raises(InvalidResponseError, match="no chunks"):
        turn_from_stream([": OPENROUTER PROCESSING", "", "data: [DONE]", ""])


texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=40)


@settings(max_examples=60, deadline=None)
@given(
    reasoning=texts,
    content=texts,
    args=st.lists(texts.map(lambda s: json.dumps({"v": s}, ensure_ascii=False)), max_size=3),
    pieces=st.integers(1, 7),
    finish=st.sampled_from(["stop", "length", "tool_calls"]),
)
def test_streamed_turn_equals_the_whole_response(
    reasoning: str, content: str, args: list[str], pieces: int, finish: str
) -> None:
    """Property: however the text is split into deltas, the stream rebuilds the same turn as the
    non-streamed response, character for character."""
    calls = [call(f"functions.t{i}:{i}", f"t{i}", a, i) for i, a in enumerate(args)]
    resp = completion({"content": content or None, "reasoning": reasoning or None, "tool_calls": calls or None}, finish)
    try:
        expected = turn_from_openrouter(copy.deepcopy(resp))
    except InvalidResponseError:
        with pytest.raises(InvalidResponseError):
            turn_from_stream(sse(stream_chunks(resp, pieces)))
        return
    got = turn_from_stream(sse(stream_chunks(resp, pieces)))
    assert got.reasoning == expected.reasoning
    assert (got.content or None) == (expected.content or None)  # a stream always has content "" at least
    assert got.tool_calls == expected.tool_calls
    assert got.finish_reason == expected.finish_reason


def test_unicode_line_separators_inside_json_do_not_split_sse_lines() -> None:
    content = "line\u2028sep\u2029para\x85nel"
    body = "\n".join(sse(stream_chunks(completion({"content": content, "reasoning": "r"}), pieces=1))).encode()
    assert len(body.decode().splitlines()) > len(list(iter_sse_lines([body])))  # the premise: splitlines over-splits
    assert turn_from_stream(iter_sse_lines([body])).content == content


@settings(max_examples=60, deadline=None)
@given(content=texts, reasoning=texts, cuts=st.lists(st.integers(0, 10_000), max_size=8), eol=st.sampled_from(["\n", "\r\n", "\r"]))
def test_sse_bytes_split_anywhere_give_the_same_turn(content: str, reasoning: str, cuts: list[int], eol: str) -> None:
    """Property: cutting the raw body into blocks at arbitrary byte offsets (inside UTF-8 characters,
    between CR and LF) changes nothing; any SSE line ending works."""
    resp = completion({"content": content or "x", "reasoning": reasoning or None})
    body = eol.join(sse(stream_chunks(resp, pieces=3))).encode()
    points = sorted({c % (len(body) + 1) for c in cuts})
    blocks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert turn_from_stream(iter_sse_lines(blocks)) == turn_from_stream(stream_chunks(resp, pieces=3))


@pytest.mark.parametrize("name", ["reasoning_details", "tool_calls"])
@pytest.mark.parametrize(("value", "kind"), [("x", "str"), ({"a": 1}, "dict"), (5, "int"), (b"y", "bytes"), (True, "bool")])
def test_a_stream_delta_list_that_is_not_a_list_is_refused_naming_its_field(name: str, value: object, kind: str) -> None:
    chunk = {"choices": [{"index": 0, "delta": {name: value}}]}
    with pytest.raises(KimiReconError) as err:
        assemble_stream([chunk], sample="s1")
    assert str(err.value) == f"sample 's1', field 'stream.delta.{name}': must be a list, got {kind}"


@pytest.mark.parametrize("name", ["reasoning_details", "tool_calls"])
@pytest.mark.parametrize("value", [None, []])
def test_an_empty_or_null_stream_delta_list_adds_nothing(name: str, value: object) -> None:
    response = assemble_stream([{"choices": [{"index": 0, "delta": {name: value}}]}])
    assert response["choices"][0]["message"] == {"role": "assistant", "content": None}
