"""render_assistant_turn / reconstruct_output_ids reproduce the official output text and ids."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon import AssistantTurn, KimiTokenizer, ToolCall
from kimi_recon.errors import InvalidInputError, InvalidTurnError
from kimi_recon.reconstruct import reconstruct_output_ids
from kimi_recon.render import ReasoningDroppedWarning, render_assistant_turn, render_turn_with_flags
from kimi_recon.responses import as_turn, turn_from_response

TURNS = read_jsonl(OFFICIAL / "turns.jsonl")
ADVERSARIAL = read_jsonl(OFFICIAL / "turns_adversarial.jsonl")


def test_golden_sets_are_complete() -> None:
    assert (len(TURNS), len(ADVERSARIAL)) == (120, 30)


@pytest.mark.parametrize("case", TURNS + ADVERSARIAL, ids=[f"turn-{i}" for i in range(len(TURNS))] + [f"adv-{i}" for i in range(len(ADVERSARIAL))])
def test_render_and_ids_match_official(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    turn = as_turn(case["turn"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReasoningDroppedWarning)
        assert render_assistant_turn(turn, thinking=case["thinking"]) == case["output"]
    assert reconstruct_output_ids(turn, tok, thinking=case["thinking"]).ids == case["output_ids"]


@pytest.mark.parametrize("case", ADVERSARIAL, ids=[f"adv-{i}" for i in range(len(ADVERSARIAL))])
def test_special_text_inside_fields_is_flagged(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    turn = as_turn(case["turn"])
    result = reconstruct_output_ids(turn, tok, thinking=case["thinking"])
    rendered = render_turn_with_flags(turn, thinking=case["thinking"])
    field_texts = "".join(s.text for s in rendered.segments if not s.is_marker)
    has_special = any(t in field_texts for t in tok.special_tokens)
    assert result.has_flag("special_text_in_field") == has_special


def test_ordinary_mode_keeps_special_text_as_text(tok: KimiTokenizer) -> None:
    turn = AssistantTurn(reasoning="r", content="say <|im_end|> now")
    special = reconstruct_output_ids(turn, tok)
    ordinary = reconstruct_output_ids(turn, tok, special_text="ordinary")
    assert special.ids.count(163586) == 2 and ordinary.ids.count(163586) == 1
    assert tok.decode(ordinary.ids) == tok.decode(special.ids) == "r</think>say <|im_end|> now<|im_end|>"
    assert ordinary.has_flag("special_text_in_field")


def test_ordinary_mode_equals_one_encode_without_special_text(tok: KimiTokenizer) -> None:
    case = TURNS[0]
    turn = as_turn(case["turn"])
    assert reconstruct_output_ids(turn, tok, thinking=case["thinking"], special_text="ordinary").ids == case["output_ids"]


def test_k25_layout() -> None:
    turn = AssistantTurn(
        reasoning="think",
        content="ok",
        tool_calls=(ToolCall("functions.f:0", "f", '{"a": 1}'), ToolCall("functions.g:1", "g", {"b": "é"})),
        finish_reason="tool_calls",
    )
    assert render_assistant_turn(turn) == (
        "think</think>ok<|tool_calls_section_begin|>"
        '<|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{"a": 1}<|tool_call_end|>'
        '<|tool_call_begin|>functions.g:1<|tool_call_argument_begin|>{"b": "é"}<|tool_call_end|>'
        "<|tool_calls_section_end|><|im_end|>"
    )


def test_truncated_turn_has_no_im_end() -> None:
    turn = AssistantTurn(reasoning="r", content="partial answ", finish_reason="length")
    assert render_assistant_turn(turn) == "r</think>partial answ"
    assert render_turn_with_flags(turn).has_flag("truncated")


def test_turn_cut_inside_reasoning_has_no_think_end() -> None:
    turn = AssistantTurn(reasoning="still thinking", content=None, finish_reason="length")
    assert render_assistant_turn(turn) == "still thinking"
    assert render_assistant_turn(turn, profile="kimi-k2-thinking") == "<think>still thinking"


def test_missing_tool_call_ids_use_conversation_index() -> None:
    turn = AssistantTurn(tool_calls=(ToolCall(None, "search", "{}"), ToolCall(None, "fetch", "{}")), finish_reason="tool_calls")
    text = render_assistant_turn(turn, call_index_offset=3)
    assert "<|tool_call_begin|>functions.search:3<|tool_call_argument_begin|>" in text
    assert "<|tool_call_begin|>functions.fetch:4<|tool_call_argument_begin|>" in text
    assert [f.field for f in render_turn_with_flags(turn).flags if f.code == "generated_tool_call_id"] == ["tool_calls[0].id", "tool_calls[1].id"]


def test_server_issued_tool_call_id_is_written_as_the_models_own_and_flagged() -> None:
    turn = AssistantTurn(tool_calls=(ToolCall("call_abc123", "f", "{}"),), finish_reason="tool_calls")
    assert render_turn_with_flags(turn, call_index_offset=3).has_flag("replaced_tool_call_id")
    assert "functions.f:3" in render_assistant_turn(turn, call_index_offset=3) and "call_abc123" not in render_assistant_turn(turn)
    kept = dataclasses.replace(turn, metadata={"keep_server_call_ids": True})  # generate --keep-server-call-ids
    assert render_turn_with_flags(kept).has_flag("foreign_tool_call_id") and "call_abc123" in render_assistant_turn(kept)


def test_thinking_off_drops_reasoning_with_a_warning() -> None:
    turn = AssistantTurn(reasoning="secret", content="hi")
    with pytest.warns(ReasoningDroppedWarning, match="6 characters of reasoning"):
        assert render_assistant_turn(turn, thinking=False) == "hi<|im_end|>"
    assert reconstruct_output_ids(turn, thinking=False).has_flag("reasoning_dropped")


def test_thinking_off_without_reasoning_is_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert render_assistant_turn(AssistantTurn(content="hi"), thinking=False) == "hi<|im_end|>"


def test_k2_thinking_layout() -> None:
    turn = AssistantTurn(reasoning="r", content="c")
    assert render_assistant_turn(turn, profile="kimi-k2-thinking") == "<think>r</think>c<|im_end|>"
    assert render_assistant_turn(AssistantTurn(content="c"), profile="kimi-k2-thinking") == "<think></think>c<|im_end|>"


def test_k2_instruct_layout_drops_reasoning() -> None:
    turn = AssistantTurn(reasoning="r", content="c", tool_calls=(ToolCall("functions.f:0", "f", "{}"),))
    with pytest.warns(ReasoningDroppedWarning):
        text = render_assistant_turn(turn, profile="kimi-k2-instruct")
    assert text == "c<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|><|im_end|>"


def test_k26_is_an_alias_of_k25() -> None:
    turn = AssistantTurn(reasoning="r", content="c")
    assert render_assistant_turn(turn, profile="kimi-k2.6") == render_assistant_turn(turn)


def test_unknown_profile_names_the_field() -> None:
    with pytest.raises(InvalidInputError, match="field 'profile': unknown profile 'kimi-k9'"):
        render_assistant_turn(AssistantTurn(content="c"), profile="kimi-k9")


def test_invalid_json_arguments_are_kept_verbatim_and_flagged() -> None:
    turn = AssistantTurn(tool_calls=(ToolCall("functions.f:0", "f", '{"a": '),))
    rendered = render_turn_with_flags(turn)
    assert '<|tool_call_argument_begin|>{"a": <|tool_call_end|>' in rendered.text
    assert [f.field for f in rendered.flags if f.code == "arguments_not_json"] == ["tool_calls[0].function.arguments"]


def test_mapping_arguments_serialise_like_tojson() -> None:
    call = ToolCall("functions.f:0", "f", {"q": "中文", "n": [1, None, True]})
    assert call.arguments_text == '{"q": "中文", "n": [1, null, true]}'


# ---- bad input -------------------------------------------------------------------------------


def test_unknown_finish_reason_names_the_field() -> None:
    with pytest.raises(InvalidTurnError, match="field 'finish_reason': unknown finish_reason 'halted'"):
        AssistantTurn(content="x", finish_reason="halted")


def test_tool_call_without_name_names_the_field() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}
    with pytest.raises(InvalidTurnError, match=r"sample 7, field 'tool_calls\[0\].function.name'"):
        turn_from_response(message, sample=7, lenient=True)


def test_image_part_in_assistant_content_is_refused() -> None:
    message = {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]}
    with pytest.raises(InvalidTurnError, match=r"field 'content\[1\]': has type 'image_url'"):
        as_turn(message)


def test_text_parts_are_joined() -> None:
    message = {"role": "assistant", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "reasoning": "r"}
    turn = as_turn(message)
    assert (turn.content, turn.reasoning) == ("ab", "r")


@pytest.mark.parametrize(
    "message,field",
    [
        ({"role": "assistant", "content": 5}, "content"),
        ({"role": "assistant", "content": "x", "reasoning_content": ["a"]}, "reasoning_content"),
        ({"role": "assistant", "tool_calls": {"id": "x"}}, "tool_calls"),
        ({"role": "assistant", "tool_calls": [{"id": 3, "function": {"name": "f", "arguments": "{}"}}]}, "tool_calls[0].id"),
        ({"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": 3}}]}, "tool_calls[0].function.arguments"),
        ({"role": "user", "content": "x"}, "role"),
    ],
)
def test_wrong_types_name_the_field(message: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidTurnError) as err:
        as_turn(message)
    assert err.value.field == field


def test_reconstruct_accepts_a_message_dict(tok: KimiTokenizer) -> None:
    case = TURNS[1]
    assert reconstruct_output_ids(case["turn"], tok, thinking=case["thinking"]).ids == case["output_ids"]


def test_k3_tag_text_in_a_k2_field_says_the_data_may_be_k3() -> None:
    """K3's tag text inside a K2.x field was encoded as ordinary text without a word (issue 35): the likelier
    story is a K3 turn read with a K2.x profile, which is a loss flag naming the profile to use."""
    from kimi_recon import reconstruct_output_ids
    from kimi_recon._profile_check import suggested_profile
    from kimi_recon.flags import FlagCode

    (flag,) = reconstruct_output_ids({"content": "Hi<|close|>response<|sep|>"}, thinking=True).flags
    assert flag.code is FlagCode.PROFILE_MISMATCH and flag.field == "content" and suggested_profile(flag) == "kimi-k3"
    assert reconstruct_output_ids({"content": "a <|im_end| b"}, thinking=True).flags == ()  # K2.5's own text shapes: not K3's
