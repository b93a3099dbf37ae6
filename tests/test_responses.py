"""The core response parser (kimi_recon.responses): every shape a response comes in reads to one turn."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon import KimiReconError, turn_from_response
from kimi_recon.dataset import turn_of_record
from kimi_recon.errors import GenerationFailedError, InvalidResponseError, InvalidTurnError, ServerReportedError
from kimi_recon.training import count_tool_calls

GOLDEN_TURNS = [case["turn"] for case in read_jsonl(OFFICIAL / "turns.jsonl")]


def message(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", **fields}


def completion(choice: dict[str, Any]) -> dict[str, Any]:
    return {"id": "gen-1", "object": "chat.completion", "model": "moonshotai/kimi-k2.5", "choices": [{"index": 0, **choice}]}


def call(name: str, arguments: Any, call_id: str | None = None) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


LOGPROBS = {"content": [{"token": "Hi", "logprob": -0.1, "bytes": [72, 105], "top_logprobs": []}]}


# -- the shapes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("lenient", [False, True])
def test_a_bare_assistant_message_reads_like_the_completion_holding_it(lenient: bool) -> None:
    msg = message(content="Paris.", reasoning_content="capital of France", tool_calls=[call("f", '{"a": 1}', "functions.f:0")])
    bare = turn_from_response(msg, finish_reason="tool_calls", lenient=lenient)
    whole = turn_from_response(completion({"message": msg, "finish_reason": "tool_calls"}), lenient=lenient)
    assert bare == whole
    assert (bare.content, bare.reasoning, bare.finish_reason) == ("Paris.", "capital of France", "tool_calls")
    assert [(c.id, c.name, c.arguments) for c in bare.tool_calls] == [("functions.f:0", "f", '{"a": 1}')]


@pytest.mark.parametrize("lenient", [False, True])
def test_a_bare_choice_carries_its_finish_reason_and_logprobs(lenient: bool) -> None:
    choice = {"message": message(content="Hi"), "finish_reason": "length", "logprobs": LOGPROBS}
    turn = turn_from_response(choice, lenient=lenient)
    assert turn.truncated and turn.content == "Hi"
    assert turn.logprobs == tuple(LOGPROBS["content"])
    assert turn == turn_from_response(completion(choice), lenient=lenient)


def test_golden_messages_read_the_same_bare_as_a_choice_and_as_a_completion() -> None:
    for msg in GOLDEN_TURNS:
        bare = turn_from_response(msg, finish_reason="stop", lenient=True)
        assert turn_from_response({"message": msg, "finish_reason": "stop"}, lenient=True) == bare
        assert turn_from_response(completion({"message": msg, "finish_reason": "stop"}), lenient=True) == bare


def test_chat_completion_reasoning_details_text_is_the_reasoning_when_strict() -> None:
    details = [{"type": "reasoning.text", "text": "First, "}, {"type": "reasoning.text", "text": "then."}]
    turn = turn_from_response(completion({"message": message(content="A", reasoning_details=details), "finish_reason": "stop"}))
    assert turn.reasoning == "First, then." and turn.reasoning_complete
    assert turn.metadata["reasoning_source"] == "reasoning_details"


def test_chat_completion_with_only_a_reasoning_summary_is_incomplete_in_both_modes() -> None:
    details = [{"type": "reasoning.summary", "summary": "I thought."}]
    resp = completion({"message": message(content="A", reasoning="I thought.", reasoning_details=details), "finish_reason": "stop"})
    strict = turn_from_response(resp)
    assert strict.reasoning is None and strict.reasoning_complete is False
    assert strict.metadata["reasoning_summary"] == "I thought."
    lenient = turn_from_response(resp, lenient=True)  # a stored summary is still not the reasoning
    assert lenient.reasoning is None and lenient.reasoning_complete is False


@pytest.mark.parametrize("lenient", [False, True])
def test_different_reasoning_and_reasoning_content_are_refused_naming_both_fields(lenient: bool) -> None:
    msg = message(content="A", reasoning="from reasoning", reasoning_content="from reasoning_content")
    with pytest.raises(InvalidResponseError, match="reasoning 'from reasoning' and reasoning_content 'from reasoning_content' differ") as err:
        turn_from_response(completion({"message": msg, "finish_reason": "stop"}), sample="r1", lenient=lenient)
    assert err.value.field == "choices[0].message.reasoning, choices[0].message.reasoning_content"
    assert err.value.sample == "r1"


@pytest.mark.parametrize("lenient", [False, True])
def test_equal_reasoning_and_reasoning_content_are_one_text(lenient: bool) -> None:
    msg = message(content="A", reasoning="same", reasoning_content="same")
    assert turn_from_response(msg, lenient=lenient).reasoning == "same"


@pytest.mark.parametrize("empty,full", [("reasoning", "reasoning_content"), ("reasoning_content", "reasoning")])
def test_an_empty_reasoning_name_defers_to_the_other(empty: str, full: str) -> None:
    turn = turn_from_response(message(content="A", **{empty: "", full: "thought"}))
    assert turn.reasoning == "thought" and turn.metadata["reasoning_source"] == full


# -- record-level fallbacks ----------------------------------------------------------------------------


def test_record_level_finish_reason_and_logprobs_fill_in_what_the_response_lacks() -> None:
    turn = turn_from_response(message(content="Hi"), finish_reason="length", logprobs=LOGPROBS["content"], lenient=True)
    assert turn.truncated and turn.logprobs == tuple(LOGPROBS["content"])


def test_the_responses_own_finish_reason_and_logprobs_win_over_the_record_level_ones() -> None:
    choice = {"message": message(content="Hi"), "finish_reason": "stop", "logprobs": LOGPROBS}
    turn = turn_from_response(choice, finish_reason="length", logprobs=[{"token": "other", "logprob": 0.0}], lenient=True)
    assert turn.finish_reason == "stop" and turn.logprobs == tuple(LOGPROBS["content"])


def test_a_bad_record_level_fallback_is_named_as_a_record_field() -> None:
    with pytest.raises(InvalidResponseError) as err:
        turn_from_response(message(content="Hi"), logprobs="nope", field="response", lenient=True)
    assert err.value.field == "logprobs"
    with pytest.raises(InvalidResponseError) as err:
        turn_from_response(message(content="Hi"), finish_reason=3, field="response", lenient=True)  # type: ignore[arg-type]
    assert err.value.field == "finish_reason"


def test_the_dataset_reader_is_the_lenient_core_parser_with_the_records_fallbacks() -> None:
    msg = message(content="Hi")
    record = {"response": msg, "finish_reason": "length", "logprobs": LOGPROBS}
    assert turn_of_record(record) == turn_from_response(msg, finish_reason="length", logprobs=LOGPROBS, lenient=True)
    assert turn_of_record({"response": msg}).finish_reason == "stop"  # a record without one: "stop"


# -- errors name the field -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("response", "path"),
    [
        (completion({"message": message(tool_calls=[call("", "{}")])}), "response.choices[0].message.tool_calls[0].function.name"),
        ({"message": message(tool_calls=[call("", "{}")])}, "response.message.tool_calls[0].function.name"),
        (message(tool_calls=[call("", "{}")]), "response.tool_calls[0].function.name"),
        (message(tool_calls="oops"), "response.tool_calls"),
        (completion({"message": message(content="x"), "logprobs": {"content": 5}}), "response.choices[0].logprobs.content"),
        ("[1, 2]", "response"),
    ],
)
@pytest.mark.parametrize("lenient", [False, True])
def test_errors_name_the_field_path_inside_the_record(response: Any, path: str, lenient: bool) -> None:
    with pytest.raises(InvalidResponseError) as err:
        turn_from_response(response, field="response", sample="rec-1", lenient=lenient)
    assert err.value.field == path
    assert "sample 'rec-1'" in str(err.value)
    assert isinstance(err.value, InvalidTurnError)


# -- where strict and lenient differ -------------------------------------------------------------------


def test_an_empty_turn_is_refused_when_strict_and_accepted_when_lenient() -> None:
    with pytest.raises(InvalidResponseError, match="neither content nor tool calls nor reasoning"):
        turn_from_response(completion({"message": message(content=""), "finish_reason": None}))
    # only the stop token generated, or cut before the first token: an empty turn in both modes
    for finish in ("stop", "length"):
        assert turn_from_response(completion({"message": message(content=""), "finish_reason": finish})).content == ""
    turn = turn_from_response(completion({"message": message(content=""), "finish_reason": "stop"}), lenient=True)
    assert turn.content == "" and not turn.tool_calls


@pytest.mark.parametrize("arguments", [{"city": "Paris"}, None])
def test_parsed_or_missing_arguments_are_refused_when_strict_and_kept_when_lenient(arguments: Any) -> None:
    msg = message(content=None, tool_calls=[call("f", arguments)])
    with pytest.raises(InvalidResponseError, match="argument text"):
        turn_from_response(msg)
    turn = turn_from_response(msg, lenient=True)
    assert turn.tool_calls[0].arguments == (arguments if arguments is not None else "")


def test_an_error_object_raises_a_response_error_in_both_modes() -> None:
    resp = completion({"message": message(content="partial"), "finish_reason": "stop"})
    resp["error"] = {"code": 502, "message": "Provider returned error", "metadata": {"provider_name": "X"}}
    with pytest.raises(ServerReportedError) as err:
        turn_from_response(resp, sample="p3")
    assert (err.value.code, err.value.message) == (502, "Provider returned error")
    assert not hasattr(err.value, "retryable")  # a network field: the adapter's OpenRouterError carries it
    assert err.value.metadata == {"provider_name": "X"} and isinstance(err.value, KimiReconError)
    assert "p3" in str(err.value)
    with pytest.raises(ServerReportedError):
        turn_from_response(resp, lenient=True)


def test_finish_reason_error_raises_in_both_modes() -> None:
    resp = completion({"message": message(content="part"), "finish_reason": "error", "native_finish_reason": 503})
    with pytest.raises(ServerReportedError, match="finish_reason 'error'") as err:
        turn_from_response(resp)
    assert err.value.code == 503 and isinstance(err.value, GenerationFailedError)
    with pytest.raises(ServerReportedError, match="finish_reason 'error'"):
        turn_from_response(resp, lenient=True)


def test_an_unknown_finish_reason_is_kept_raw_when_strict_and_refused_when_lenient() -> None:
    resp = completion({"message": message(content="x"), "finish_reason": "weird"})
    turn = turn_from_response(resp)
    assert turn.finish_reason is None and turn.metadata["finish_reason_raw"] == "weird"
    with pytest.raises(InvalidResponseError, match="unknown finish_reason 'weird'") as err:
        turn_from_response(resp, field="response", lenient=True)
    assert err.value.field == "response.choices[0].finish_reason"


def test_native_finish_reason_truncates_in_both_modes() -> None:
    resp = completion({"message": message(content="cut"), "finish_reason": "stop", "native_finish_reason": "MAX_TOKENS"})
    assert turn_from_response(resp).truncated
    assert turn_from_response(resp, lenient=True).truncated


def test_the_openrouter_adapter_raises_its_own_subclass_of_the_core_error() -> None:
    from kimi_recon.openrouter import OpenRouterError, turn_from_openrouter

    body = {"error": {"code": 429, "message": "slow down"}}
    with pytest.raises(ServerReportedError) as core:
        turn_from_response(body)
    assert not isinstance(core.value, OpenRouterError)
    with pytest.raises(OpenRouterError) as adapter:
        turn_from_openrouter(body, sample="p1")
    assert isinstance(adapter.value, ServerReportedError)
    assert (adapter.value.code, adapter.value.kind, adapter.value.prompt_id) == (429, "body", "p1")
    assert adapter.value.retryable  # the network fields live on the adapter's error


@pytest.mark.parametrize(
    ("body", "retryable"),
    [
        ({"error": {"code": 502, "message": "Provider returned error"}}, True),
        ({"error": {"code": "rate_limit_exceeded", "message": "x"}}, True),
        ({"error": {"code": 400, "message": "bad request"}}, False),
        ({"error": {"code": "invalid_prompt", "message": "x"}}, False),
        (completion({"message": message(content="part"), "finish_reason": "error", "native_finish_reason": 400}), True),
    ],
)
def test_the_adapter_decides_what_is_retryable_as_the_core_error_did(body: dict[str, Any], retryable: bool) -> None:
    from kimi_recon.openrouter import OpenRouterError, turn_from_openrouter

    with pytest.raises(OpenRouterError) as adapter:
        turn_from_openrouter(body)
    assert adapter.value.retryable is retryable
    assert type(adapter.value)(**adapter.value.fields()).fields() == adapter.value.fields()


# -- odds and ends -------------------------------------------------------------------------------------


def test_the_core_parser_imports_neither_the_openrouter_adapter_nor_openai() -> None:
    code = "import sys, kimi_recon.responses; print([m for m in sys.modules if m.startswith(('kimi_recon.openrouter', 'openai'))])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_count_tool_calls_ignores_tool_calls_that_are_not_lists() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "assistant", "tool_calls": [call("f", "{}"), call("g", "{}")]},
        {"role": "assistant", "tool_calls": "oops"},
        {"role": "assistant", "tool_calls": {"not": "a list"}},
        {"role": "assistant", "tool_calls": None},
        {"role": "user", "tool_calls": [call("h", "{}")]},
    ]
    assert count_tool_calls(messages) == 2
