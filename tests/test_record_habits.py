"""The data shapes other tools write (issue 33, a new user's trial): an OpenAI fine-tuning record whose
``messages`` end with the answer, SpecForge's and ShareGPT's ``conversations``. They are refused, since which
message is the answer is the user's to say, with an error that says how to give it (before: "is missing ... (it
has: id, messages)", nothing about what to move where)."""

from __future__ import annotations

from typing import Any

import pytest

from kimi_recon import KimiTokenizer, audit_record
from kimi_recon._batch.training_rows import training_row
from kimi_recon.dataset import reconstruct_record
from kimi_recon.errors import InvalidInputError

FINE_TUNING = {"id": "ft", "messages": [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}]}
SHAREGPT = {"id": "sg", "conversations": [{"from": "human", "value": "What is 2+2?"}, {"from": "gpt", "value": "4"}]}


@pytest.mark.parametrize("read", [reconstruct_record, training_row])
def test_a_fine_tuning_record_is_told_to_move_its_answer(read: Any, tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputError, match=r'end with an assistant message.*under "response"') as caught:
        read(FINE_TUNING, tok)
    assert caught.value.field == "response"


@pytest.mark.parametrize("read", [reconstruct_record, training_row])
def test_conversations_are_told_to_be_messages_and_a_response(read: Any, tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputError, match=r"'conversations'.*\"messages\".*\"response\""):
        read(SHAREGPT, tok)


def test_the_audit_says_so_too(tok: KimiTokenizer) -> None:
    result = audit_record({**FINE_TUNING, "reference_ids": [19, 163586]}, tok)
    assert result.error is not None and "end with an assistant message" in result.error.message


def test_a_record_with_its_response_is_read_as_before(tok: KimiTokenizer) -> None:
    record = {"messages": FINE_TUNING["messages"][:1], "response": FINE_TUNING["messages"][1], "thinking": False}
    assert training_row(record, tok)["input_ids"][-2:] == [19, 163586]


def test_stream_chunks_given_as_a_response_say_where_they_go() -> None:
    """An openai SDK user who streamed holds chunks; ``turn_from_response(chunks)`` said only "got list"."""
    import kimi_recon
    from kimi_recon.errors import InvalidResponseError
    from kimi_recon.openrouter import turn_from_stream

    chunks = [
        {"id": "g", "object": "chat.completion.chunk", "created": 1, "model": "moonshotai/kimi-k2.5",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "reasoning": "Easy."}, "finish_reason": None}]},
        {"id": "g", "object": "chat.completion.chunk", "created": 1, "model": "moonshotai/kimi-k2.5",
         "choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": "stop"}]},
    ]  # fmt: skip
    for held in (chunks, iter(chunks)):
        with pytest.raises(InvalidResponseError, match="turn_from_stream"):
            kimi_recon.turn_from_response(held)
    whole = {"model": "moonshotai/kimi-k2.5", "choices": [{"message": {"role": "assistant", "content": "4", "reasoning": "Easy."}, "finish_reason": "stop"}]}
    assert kimi_recon.reconstruct_output_ids(turn_from_stream(chunks)).ids == kimi_recon.reconstruct_output_ids(whole).ids


@pytest.mark.parametrize(
    "extra_body",
    [
        {"chat_template_kwargs": {"thinking": False}},  # vLLM / SGLang, as their docs pass it through the openai SDK
        {"chat_template_kwargs": {"enable_thinking": False}},
        {"reasoning": {"enabled": False}},  # OpenRouter
        {"thinking": {"type": "disabled"}},  # Moonshot
    ],
)
def test_request_settings_under_the_openai_sdks_extra_body_are_read(extra_body: dict[str, Any], tok: KimiTokenizer) -> None:
    """The openai SDK sends ``extra_body`` merged into the request; a record of the call's arguments keeps it
    nested, and the thinking-off answer gained a ``</think>`` (flagged thinking_assumed)."""
    answer = {"model": "moonshotai/kimi-k2.5", "choices": [{"message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}]}
    off = reconstruct_record({"response": answer, "thinking": False}, tok)
    for record in ({"request": {"model": "moonshotai/kimi-k2.5", "extra_body": extra_body}, "response": answer},
                   {"model": "moonshotai/kimi-k2.5", "extra_body": extra_body, "response": answer}):
        rebuilt = reconstruct_record(record, tok)
        assert rebuilt.ids == off.ids == [19, 163586] and rebuilt.flags == ()


def test_a_responses_api_object_says_which_endpoint_to_ask() -> None:
    import kimi_recon
    from kimi_recon.errors import InvalidResponseError

    response = {"id": "resp_1", "object": "response", "model": "moonshotai/kimi-k2.5", "status": "completed",
                "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4"}]}]}  # fmt: skip
    with pytest.raises(InvalidResponseError, match=r"Responses API.*chat completions"):
        kimi_recon.turn_from_response(response)
