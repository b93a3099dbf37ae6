"""Training samples and prompts match the official apply_chat_template output."""

from __future__ import annotations

import re
from typing import Any

import pytest
from testdata import DATA, OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, build_training_sample, render_prompt
from kimi_recon.errors import InvalidInputError
from kimi_recon.training import sample_from_record

CASES = read_jsonl(OFFICIAL / "turns.jsonl") + read_jsonl(OFFICIAL / "turns_adversarial.jsonl")
WITH_TOOL_CALLS = [c for c in CASES if c["turn"].get("tool_calls")]
WITHOUT_TOOL_CALLS = [c for c in CASES if not c["turn"].get("tool_calls")]
MILES = (DATA / "templates" / "kimi-k2.5.miles-fixed.chat_template.jinja").read_text(encoding="utf-8")


def test_golden_split() -> None:
    assert (len(WITH_TOOL_CALLS), len(WITHOUT_TOOL_CALLS)) == (122, 28)


@pytest.mark.parametrize("case", WITH_TOOL_CALLS, ids=[f"tools-{i}" for i in range(len(WITH_TOOL_CALLS))])
def test_training_sample_equals_official_prompt_plus_output(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    sample = build_training_sample(case["messages"], case["turn"], case["tools"], thinking=case["thinking"], tokenizer=tok)
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]
    assert sample.prompt_len == len(case["prompt_ids"])
    assert sample.loss_mask == [0] * len(case["prompt_ids"]) + [1] * len(case["output_ids"])


@pytest.mark.parametrize("case", WITH_TOOL_CALLS, ids=[f"tools-{i}" for i in range(len(WITH_TOOL_CALLS))])
def test_prompt_equals_official_apply_chat_template(case: dict[str, Any]) -> None:
    assert render_prompt(case["messages"], case["tools"], thinking=case["thinking"]) == case["prompt"]


@pytest.mark.parametrize("case", WITHOUT_TOOL_CALLS, ids=[f"plain-{i}" for i in range(len(WITHOUT_TOOL_CALLS))])
def test_prompt_with_preserve_thinking_template_equals_official(case: dict[str, Any]) -> None:
    # The official set rendered these with the preserve_thinking template (SOURCES.md §9).
    prompt = render_prompt(case["messages"], case["tools"], thinking=case["thinking"], template=MILES, template_kwargs={"preserve_thinking": True})
    assert prompt == case["prompt"]


def test_missing_tool_call_ids_continue_the_conversation_count(tok: KimiTokenizer) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": "r"},
    ]
    turn = {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "g", "arguments": "{}"}}]}
    sample = build_training_sample(messages, turn, tokenizer=tok)
    assert "functions.g:1" in tok.decode(sample.output_ids)


def test_profile_template_mismatch_is_caught() -> None:
    with pytest.raises(InvalidInputError, match=re.escape("does not end with the kimi-k2.5 generation prompt")):
        render_prompt([{"role": "user", "content": "q"}], template="{{ messages[0].content }}")


def test_sample_row_is_json_ready(tok: KimiTokenizer) -> None:
    case = WITH_TOOL_CALLS[0]
    row = sample_from_record({"id": "a", "messages": case["messages"], "tools": case["tools"], "turn": case["turn"], "thinking": case["thinking"]}, tok).to_dict()
    assert set(row) == {"input_ids", "loss_mask", "prompt_len", "flags"}
    assert row["input_ids"] == case["prompt_ids"] + case["output_ids"]


def test_record_without_messages_names_field_and_id(tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputError, match="sample 'r7', field 'messages'"):
        sample_from_record({"id": "r7", "response": {"content": "x"}}, tok)
