"""Every door a turn comes in by (a message dict, a chat completion dict or its JSON text, one choice,
openai SDK objects, a dataset record) goes through one parser and gives the same AssistantTurn or a
named error."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
from extras import require
from hypothesis import given
from hypothesis import strategies as st
from testdata import OFFICIAL, read_jsonl

from kimi_recon import AssistantTurn, KimiReconError, KimiTokenizer, ToolCall, reconstruct_output_ids, turn_from_response
from kimi_recon.dataset import reconstruct_record, turn_of_record
from kimi_recon.errors import InvalidResponseError
from kimi_recon.render import render_assistant_turn

openai_chat = require("openai.types.chat")
ChatCompletion = openai_chat.ChatCompletion
ChatCompletionMessage = openai_chat.ChatCompletionMessage
Choice = require("openai.types.chat.chat_completion").Choice

CASE = read_jsonl(OFFICIAL / "turns.jsonl")[1]


def completion(message: dict[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "id": "gen-1",
        "object": "chat.completion",
        "created": 1,
        "model": "moonshotai/kimi-k2.5",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


# -- the examples of the issue -------------------------------------------------------------------------


def test_reasoning_and_reasoning_content_that_differ_are_refused_by_every_door(tok: KimiTokenizer) -> None:
    # The issue: reconstruct_output_ids rendered B, turn_from_response rendered A.
    message = {"content": "hi", "reasoning": "A", "reasoning_content": "B"}
    doors: list[Callable[[], object]] = [
        lambda: reconstruct_output_ids(message, tok),
        lambda: render_assistant_turn(message),
        lambda: turn_from_response(message),
        lambda: turn_from_response(message, lenient=True),
        lambda: turn_from_response(completion(message)),
        lambda: turn_of_record({"response": message}),
        lambda: reconstruct_record({"id": "r", "response": message}, tok),
    ]
    for door in doors:
        with pytest.raises(InvalidResponseError, match="reasoning 'A' and reasoning_content 'B' differ") as err:
            door()
        assert err.value.field is not None
        assert "reasoning" in err.value.field and "reasoning_content" in err.value.field


def test_a_whole_chat_completion_where_a_message_is_expected_is_read_as_a_completion(tok: KimiTokenizer) -> None:
    # The issue: it became an empty turn, </think><|im_end|>, with no flag.
    turn = CASE["turn"]
    whole = completion(turn, "tool_calls" if turn.get("tool_calls") else "stop")
    assert reconstruct_output_ids(whole, tok, thinking=CASE["thinking"]).ids == CASE["output_ids"]
    assert reconstruct_output_ids(json.dumps(whole), tok, thinking=CASE["thinking"]).ids == CASE["output_ids"]


@pytest.mark.parametrize("shape", [{"object": "chat.completion"}, {"id": "x", "text": "hi"}, {}])
def test_a_mapping_that_is_no_completion_choice_or_message_is_refused_not_an_empty_turn(tok: KimiTokenizer, shape: dict[str, Any]) -> None:
    with pytest.raises(InvalidResponseError):
        reconstruct_output_ids(shape, tok)
    with pytest.raises(InvalidResponseError):
        turn_of_record({"response": shape})


def test_an_openai_chat_completion_message_is_accepted_by_reconstruct_output_ids(tok: KimiTokenizer) -> None:
    # The issue: refused by reconstruct_output_ids although turn_from_response took it.
    sdk = ChatCompletionMessage.model_validate(CASE["turn"])
    assert reconstruct_output_ids(sdk, tok, thinking=CASE["thinking"]).ids == CASE["output_ids"]


def test_models_module_holds_data_only() -> None:
    from kimi_recon import models

    assert not hasattr(AssistantTurn, "from_message")
    assert not any(name in vars(models) for name in ("content_text", "tool_call_from_dict"))


# -- the property: every door, one turn --------------------------------------------------------------

_text = st.text(st.characters(codec="utf-8", exclude_characters="<>|"), max_size=12)
_name = st.from_regex(r"[a-z][a-z_]{0,6}", fullmatch=True)


@st.composite
def messages(draw: st.DrawFn) -> tuple[dict[str, Any], str, AssistantTurn]:
    """An assistant message as a server sends it, its finish reason, and the turn it stands for."""
    content = draw(st.one_of(st.none(), _text))
    reasoning = draw(st.one_of(st.none(), _text))
    names = draw(st.sampled_from([("reasoning",), ("reasoning_content",), ("reasoning", "reasoning_content")]))
    calls = []
    for i in range(draw(st.integers(0, 2))):
        name = draw(_name)
        call_id = draw(st.sampled_from([f"functions.{name}:{i}", f"call_{i}abc"]))
        arguments = json.dumps(draw(st.dictionaries(_name, st.integers() | _text, max_size=2)))
        calls.append((call_id, name, arguments))
    finish_reason = draw(st.sampled_from(["stop", "length", "tool_calls"]))
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        message.update({n: reasoning for n in names})
    if calls:
        message["tool_calls"] = [{"id": c, "type": "function", "function": {"name": n, "arguments": a}} for c, n, a in calls]
    expected = AssistantTurn(
        reasoning=reasoning,
        content=content,
        tool_calls=tuple(ToolCall(c, n, a) for c, n, a in calls),
        finish_reason=finish_reason,
    )
    return message, finish_reason, expected


def doors(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    whole = completion(message, finish_reason)
    choice = whole["choices"][0]
    own = {**message, "finish_reason": finish_reason}  # a bare message carries its own finish reason
    return {
        "message dict": own,
        "completion dict": whole,
        "completion JSON text": json.dumps(whole),
        "completion JSON bytes": json.dumps(whole).encode("utf-8"),
        "choice dict": choice,
        "SDK ChatCompletion": ChatCompletion.model_validate(whole),
        "SDK Choice": Choice.model_validate(choice),
        "SDK ChatCompletionMessage": ChatCompletionMessage.model_validate(own),
    }


def _outcome(read: Callable[[], AssistantTurn]) -> AssistantTurn | str:
    try:
        return read()
    except KimiReconError as err:
        return type(err).__name__


@given(messages())
def test_every_door_gives_the_same_turn(drawn: tuple[dict[str, Any], str, AssistantTurn]) -> None:
    message, finish_reason, expected = drawn
    for lenient in (False, True):
        seen = {name: _outcome(functools.partial(turn_from_response, door, lenient=lenient)) for name, door in doors(message, finish_reason).items()}
        seen["dataset record"] = _outcome(lambda: turn_of_record({"response": message, "finish_reason": finish_reason})) if lenient else seen["message dict"]
        empty = not expected.content and not expected.reasoning and not expected.tool_calls
        stopped = expected.finish_reason in ("stop", "length")  # nothing but the stop token, or cut at once: a turn
        want: AssistantTurn | str = "InvalidResponseError" if empty and not lenient and not stopped else expected
        assert seen == dict.fromkeys(seen, want), (lenient, message)


@given(messages())
def test_every_door_gives_the_same_ids(drawn: tuple[dict[str, Any], str, AssistantTurn]) -> None:
    from kimi_recon import load_tokenizer

    tok = load_tokenizer()
    message, finish_reason, expected = drawn
    want = reconstruct_output_ids(expected, tok).ids
    for name, door in doors(message, finish_reason).items():
        assert reconstruct_output_ids(door, tok).ids == want, name


def test_a_record_that_is_itself_a_message_reads_the_same_with_one_worker_and_two(tmp_path: Any) -> None:
    # reasoning_details is a message field: the record slimmed for worker processes must keep it.
    from kimi_recon.dataset import reconstruct_records

    details = [{"type": "reasoning.text", "text": "Think first."}]
    records = [{"id": str(i), "role": "assistant", "content": f"Answer {i}.", "reasoning_details": details, "prompt": "x" * 10} for i in range(4)]
    one = [r.ids for r in reconstruct_records(records, workers=1)]
    two = [r.ids for r in reconstruct_records(records, workers=2, chunk_size=1)]
    assert one == two
    assert one[0] is not None and "Think first." in load_tok().decode(list(one[0]))


def load_tok() -> KimiTokenizer:
    from kimi_recon import load_tokenizer

    return load_tokenizer()
