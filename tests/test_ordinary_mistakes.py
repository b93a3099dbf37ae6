"""Ordinary mistakes that used to give wrong ids or a wrong verdict without a word (issue 21, done-item 2):
a conversation that already ends with the answer, tools without their wrapper, a failed token check that
is truthy. Expected ids are Moonshot's official ones (tests/data/golden), never this package's own output.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from testdata import DATA, OFFICIAL, read_jsonl

import kimi_recon
from kimi_recon import build_samples, build_training_sample, sample_batch
from kimi_recon.errors import InvalidInputError
from kimi_recon.flags import FlagCode

K25_TURNS = read_jsonl(OFFICIAL / "turns.jsonl")
# final turns the stock K2.5 template renders as the official set did (tool calls: SOURCES.md §9)
WITH_CALLS = [c for c in K25_TURNS if c["turn"].get("tool_calls")]


def test_messages_that_end_with_the_same_turn_give_the_official_ids_once() -> None:
    for case in WITH_CALLS[:15]:
        whole = [*case["messages"], case["turn"]]
        sample = build_training_sample(whole, case["turn"], case["tools"], thinking=case["thinking"])
        assert sample.input_ids == case["prompt_ids"] + case["output_ids"]
        assert sample.prompt_len == len(case["prompt_ids"])


def test_a_last_message_without_the_reasoning_is_still_the_turn() -> None:
    case = next(c for c in WITH_CALLS if c["turn"].get("reasoning_content") and c["thinking"])
    history_copy = {k: v for k, v in case["turn"].items() if k != "reasoning_content"}
    sample = build_training_sample([*case["messages"], history_copy], case["turn"], case["tools"], thinking=True)
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]


def test_messages_that_end_with_another_assistant_message_are_refused_naming_it() -> None:
    case = WITH_CALLS[0]
    other = {"role": "assistant", "content": "something else"}
    messages = [*case["messages"], other]
    with pytest.raises(InvalidInputError, match="differs from the turn") as err:
        build_training_sample(messages, case["turn"], case["tools"], thinking=case["thinking"])
    assert err.value.field == f"messages[{len(messages) - 1}]"


def test_build_samples_and_sample_batch_take_a_record_whose_messages_hold_the_answer() -> None:
    case = WITH_CALLS[0]
    record = {"id": "r1", "messages": [*case["messages"], case["turn"]], "tools": case["tools"],
              "response": case["turn"], "thinking": case["thinking"]}
    (result,) = list(build_samples([record]))
    assert result.error is None and result.row is not None
    assert result.row["input_ids"] == case["prompt_ids"] + case["output_ids"]
    batch = sample_batch({k: [json.dumps(v) if k in ("messages", "response", "tools") else v] for k, v in record.items()})
    assert batch["error"] == [None] and list(batch["input_ids"][0]) == case["prompt_ids"] + case["output_ids"]
    bad = {**record, "messages": [*case["messages"], {"role": "assistant", "content": "other"}]}
    (failed,) = list(build_samples([bad]))
    assert failed.error is not None and failed.error.field == f"messages[{len(case['messages'])}]"


def _unwrapped(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [tool["function"] for tool in tools]


def test_tools_without_the_wrapper_are_read_wrapped_and_flagged() -> None:
    case = next(c for c in WITH_CALLS if c["tools"])
    for tools in (_unwrapped(case["tools"]), [{"type": "function", **t} for t in _unwrapped(case["tools"])]):
        sample = build_training_sample(case["messages"], case["turn"], tools, thinking=case["thinking"])
        assert sample.input_ids == case["prompt_ids"] + case["output_ids"]
        assert FlagCode.TOOLS_WRAPPED in [f.code for f in sample.flags]
    wrapped = build_training_sample(case["messages"], case["turn"], case["tools"], thinking=case["thinking"])
    assert FlagCode.TOOLS_WRAPPED not in [f.code for f in wrapped.flags]


def test_a_tool_that_is_neither_wrapped_nor_a_function_definition_is_refused_naming_it() -> None:
    with pytest.raises(InvalidInputError, match="has no 'function' object") as err:
        kimi_recon.render_prompt([{"role": "user", "content": "hi"}], [{"type": "function", "parameters": {}}])
    assert err.value.field == "tools[0]"


def test_the_stock_k25_template_would_declare_an_unwrapped_tool_as_json() -> None:
    # why wrapping matters: the official code declares a tool it does not recognise as JSON, not TypeScript
    from kimi_recon.tool_declaration import render_tools_declaration

    tool = {"name": "f", "parameters": {"type": "object", "properties": {}}}
    assert render_tools_declaration([tool]).startswith("[{")
    assert render_tools_declaration([{"type": "function", "function": tool}]).startswith("# Tools")


def test_a_failed_token_check_is_falsy_and_a_passing_one_truthy() -> None:
    assert not kimi_recon.check_token_ids({"IM_END_TOKEN_ID": 163533})
    assert kimi_recon.check_token_ids({"IM_END_TOKEN_ID": 163586})
    assert kimi_recon.check_special_tokens()
    with pytest.raises(AssertionError):
        assert kimi_recon.check_token_ids({"IM_END_TOKEN_ID": 163533})


def test_the_bundled_template_copy_is_the_preserve_thinking_test_template() -> None:
    from importlib import resources

    bundled = (resources.files("kimi_recon") / "data" / "templates" / "kimi-k2.5-preserve-thinking.jinja").read_bytes()
    assert bundled == (DATA / "templates" / "kimi-k2.5.miles-fixed.chat_template.jinja").read_bytes()
