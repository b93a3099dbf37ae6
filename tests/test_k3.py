"""Kimi-K3: output ids, prompts and training samples equal Moonshot's official K3 renderer + tokenizer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from testdata import GOLDEN, read_jsonl

from kimi_recon import AssistantTurn, KimiTokenizer, ToolCall, build_training_sample, load_tokenizer, reconstruct_output_ids, render_assistant_turn, render_prompt
from kimi_recon.errors import InvalidInputError
from kimi_recon.render import render_turn_with_flags

K3_DEV = GOLDEN / "official-k3-dev"
CLEAN = read_jsonl(K3_DEV / "turns.jsonl")
ADVERSARIAL = read_jsonl(K3_DEV / "turns_adversarial.jsonl")
CASES = [pytest.param(c, id=f"clean-{i}") for i, c in enumerate(CLEAN)] + [
    pytest.param(c, id=f"adversarial-{i}") for i, c in enumerate(ADVERSARIAL)
]


@pytest.fixture(scope="module")
def k3tok() -> KimiTokenizer:
    return load_tokenizer(profile="kimi-k3")


def _options(case: dict[str, Any]) -> dict[str, Any]:
    return {"thinking_effort": case["thinking_effort"], "tool_choice": case["tool_choice"]}


def test_k3_golden_sets_are_complete() -> None:
    assert (len(CLEAN), len(ADVERSARIAL)) == (120, 30)
    assert {c["thinking"] for c in CLEAN} == {True, False}
    assert sum(bool(c["turn"].get("tool_calls")) for c in CLEAN) > 50


@pytest.mark.parametrize("case", CASES)
def test_k3_output_ids_equal_official(case: dict[str, Any]) -> None:
    result = reconstruct_output_ids(case["turn"], profile="kimi-k3", thinking=case["thinking"])
    assert result.text == case["output"]
    assert result.ids == case["output_ids"]


@pytest.mark.parametrize("case", CASES)
def test_k3_training_sample_equals_official_prompt_plus_output(case: dict[str, Any]) -> None:
    sample = build_training_sample(case["messages"], case["turn"], case["tools"], "kimi-k3", case["thinking"], **_options(case))
    assert sample.prompt_ids == case["prompt_ids"]
    assert sample.output_ids == case["output_ids"]
    assert sample.loss_mask == [0] * len(case["prompt_ids"]) + [1] * len(case["output_ids"])


@pytest.mark.parametrize("case", CASES)
def test_k3_prompt_text_equals_official(case: dict[str, Any]) -> None:
    assert render_prompt(case["messages"], case["tools"], "kimi-k3", case["thinking"], **_options(case)) == case["prompt"]


@pytest.mark.parametrize("case", CASES[::7])
def test_k3_ids_decode_to_the_rendered_text(k3tok: KimiTokenizer, case: dict[str, Any]) -> None:
    result = reconstruct_output_ids(case["turn"], profile="kimi-k3", thinking=case["thinking"])
    assert k3tok.decode(result.ids) == case["output"]


def test_one_encode_of_the_output_text_is_wrong_on_most_dev_turns(k3tok: KimiTokenizer) -> None:
    # The figure docs/method.md states: one encode is the wrong method for K3.
    wrong_clean = sum(k3tok.encode(c["output"]) != c["output_ids"] for c in CLEAN)
    wrong_adversarial = sum(k3tok.encode(c["output"]) != c["output_ids"] for c in ADVERSARIAL)
    assert (wrong_clean, wrong_adversarial) == (60, 26)


# --- format details ------------------------------------------------------------------------------


def test_k3_turn_layout_with_thinking_and_a_tool_call() -> None:
    turn = AssistantTurn(reasoning="r", content="c", tool_calls=(ToolCall("call_1", "f", '{"a": 1, "b": "x"}'),), finish_reason="tool_calls")
    assert render_assistant_turn(turn, "kimi-k3") == (
        "r<|close|>think<|sep|><|open|>response<|sep|>c<|close|>response<|sep|><|open|>tools<|sep|>"
        '<|open|>call tool="f" index="1"<|sep|><|open|>argument key="a" type="number"<|sep|>1<|close|>argument<|sep|>'
        '<|open|>argument key="b" type="string"<|sep|>x<|close|>argument<|sep|><|close|>call<|sep|><|close|>tools<|sep|>'
        "<|close|>message<|sep|><|end_of_msg|>"
    )


def test_k3_thinking_off_starts_at_the_content() -> None:
    assert render_assistant_turn(AssistantTurn(content="c"), "kimi-k3", thinking=False) == "c<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>"


def test_k3_whitespace_reasoning_is_not_written_and_flagged() -> None:
    rendered = render_turn_with_flags(AssistantTurn(reasoning=" \n", content="c"), "kimi-k3")
    assert rendered.text.startswith("<|close|>think<|sep|>")
    assert rendered.has_flag("reasoning_dropped")


def test_k3_server_call_ids_are_not_flagged_and_not_written() -> None:
    turn = AssistantTurn(tool_calls=(ToolCall("call_abc123", "f", "{}"), ToolCall(None, "g", "")), finish_reason="tool_calls")
    rendered = render_turn_with_flags(turn, "kimi-k3")
    assert "call_abc123" not in rendered.text
    assert not {"foreign_tool_call_id", "generated_tool_call_id"} & {f.code for f in rendered.flags}
    assert '<|open|>call tool="f" index="1"<|sep|><|close|>call<|sep|><|open|>call tool="g" index="2"<|sep|><|close|>call<|sep|>' in rendered.text


def test_k3_non_json_arguments_become_a_json_block() -> None:
    rendered = render_turn_with_flags(AssistantTurn(tool_calls=(ToolCall(None, "f", "not json {"),)), "kimi-k3")
    assert '<|open|>json type="object"<|sep|>not json {<|close|>json<|sep|>' in rendered.text
    assert rendered.has_flag("arguments_not_json")


def test_k3_json_that_is_not_an_object_is_a_flagged_json_block() -> None:
    rendered = render_turn_with_flags(AssistantTurn(tool_calls=(ToolCall(None, "f", "[1, 2]"),)), "kimi-k3")
    assert '<|open|>json type="object"<|sep|>[1, 2]<|close|>json<|sep|>' in rendered.text
    assert rendered.has_flag("arguments_not_object")


def test_k3_argument_types_and_values_are_written_as_the_official_renderer() -> None:
    args = '{"s": "a\\"b", "n": 1.5, "i": -3, "t": true, "z": null, "o": {"k": [1, "é"]}, "l": []}'
    text = render_assistant_turn(AssistantTurn(tool_calls=(ToolCall(None, "f", args),)), "kimi-k3", thinking=False)
    expected = [
        ('s', 'string', 'a"b'), ('n', 'number', '1.5'), ('i', 'number', '-3'), ('t', 'boolean', 'true'),
        ('z', 'null', 'null'), ('o', 'object', '{"k": [1, "é"]}'), ('l', 'array', '[]'),
    ]
    body = "".join(f'<|open|>argument key="{k}" type="{t}"<|sep|>{v}<|close|>argument<|sep|>' for k, t, v in expected)
    assert body in text


def test_k3_attribute_values_are_escaped() -> None:
    text = render_assistant_turn(AssistantTurn(tool_calls=(ToolCall(None, 'a&"b', '{"k\\"&": 1}'),)), "kimi-k3", thinking=False)
    assert '<|open|>call tool="a&amp;&quot;b" index="1"<|sep|>' in text
    assert '<|open|>argument key="k&quot;&amp;" type="number"<|sep|>' in text


def test_k3_truncated_turn_has_no_closing_tags() -> None:
    turn = AssistantTurn(reasoning="r", content="partial", finish_reason="length")
    rendered = render_turn_with_flags(turn, "kimi-k3")
    assert rendered.text == "r<|close|>think<|sep|><|open|>response<|sep|>partial"
    assert rendered.has_flag("truncated")


def test_k3_turn_cut_inside_reasoning_is_only_reasoning() -> None:
    assert render_assistant_turn(AssistantTurn(reasoning="still", finish_reason="length"), "kimi-k3") == "still"


def test_k3_truncated_tool_call_turn_leaves_the_tools_block_open() -> None:
    turn = AssistantTurn(content="c", tool_calls=(ToolCall(None, "f", "{}"),), finish_reason="length")
    rendered = render_turn_with_flags(turn, "kimi-k3", thinking=False)
    assert rendered.text.endswith('<|open|>call tool="f" index="1"<|sep|><|close|>call<|sep|>')
    assert rendered.has_flag("truncated_tool_calls")


def test_k3_special_text_in_fields_is_ordinary_text_and_flagged(k3tok: KimiTokenizer) -> None:
    turn = AssistantTurn(reasoning="a<|end_of_msg|>b</think>", content="<|open|>x")
    result = reconstruct_output_ids(turn, profile="kimi-k3")
    flag = next(f for f in result.flags if f.field == "reasoning")
    assert flag.code == "special_text_in_field" and "ordinary text" in flag.message
    assert result.ids[: len(k3tok.encode("a<|end_of_msg|>b</think>", allowed_special=set()))] == k3tok.encode(
        "a<|end_of_msg|>b</think>", allowed_special=set()
    )
    assert result.ids.count(163586) == 1  # only the real end of the message


@pytest.mark.parametrize(
    "stop,ending",
    [
        (None, [163588, 2778, 163589, 163586]),
        ("<|end_of_msg|>", [163588, 2778, 163589, 163586]),
        ("[EOS]", [163588, 2778, 163589, 163585]),
        ("<|close|>tools<|sep|>", [163588, 25385, 163589]),
    ],
)
def test_k3_end_token_is_an_option(stop: str | None, ending: list[int]) -> None:
    turn = AssistantTurn(tool_calls=(ToolCall(None, "f", "{}"),), finish_reason="tool_calls")
    assert reconstruct_output_ids(turn, profile="kimi-k3", stop=stop).ids[-len(ending) :] == ending


def test_k3_stop_after_tools_does_not_change_a_turn_without_tools() -> None:
    ids = reconstruct_output_ids(AssistantTurn(content="c"), profile="kimi-k3", stop="<|close|>tools<|sep|>").ids
    assert ids[-1] == 163586


def test_unknown_stop_names_the_field() -> None:
    with pytest.raises(InvalidInputError, match=r"field 'stop'.*not an end of a kimi-k3 turn"):
        reconstruct_output_ids(AssistantTurn(content="c"), profile="kimi-k3", stop="<|im_end|>")


def test_k3_number_respelled_by_a_json_round_trip_is_flagged() -> None:
    turn = AssistantTurn(tool_calls=(ToolCall(None, "f", '{"a": 1e2, "b": 1.50, "c": 2}'),))
    result = reconstruct_output_ids(turn, profile="kimi-k3")
    flagged = [f.message for f in result.flags if f.code == "argument_number_respelled"]
    assert len(flagged) == 2 and "'a'" in flagged[0] and "'b'" in flagged[1]
    assert '<|sep|>100.0<|close|>' in result.text and '<|sep|>1.5<|close|>' in result.text


def test_k3_object_spacing_that_differs_from_json_dumps_is_flagged() -> None:
    spaced = AssistantTurn(tool_calls=(ToolCall(None, "f", '{"o": {"k": [1, 2]}}'),))
    compact = AssistantTurn(tool_calls=(ToolCall(None, "f", '{"o":{"k":[1,2]}}'),))
    assert not reconstruct_output_ids(spaced, profile="kimi-k3").has_flag("argument_spacing")
    assert reconstruct_output_ids(compact, profile="kimi-k3").has_flag("argument_spacing")


# --- prompts: what the official renderer does and refuses ---------------------------------------


def test_thinking_effort_defaults_to_max() -> None:
    prompt = render_prompt([{"role": "user", "content": "hi"}], profile="kimi-k3")
    assert "Now the system is invoked with `thinking_effort=max`." in prompt
    assert prompt.endswith('<|open|>message role="assistant"<|sep|><|open|>think<|sep|>')


@pytest.mark.parametrize("effort", ["medium", "none", "MAX"])
def test_unsupported_thinking_effort_is_refused(effort: str) -> None:
    with pytest.raises(InvalidInputError, match="field 'thinking_effort'"):
        render_prompt([{"role": "user", "content": "hi"}], profile="kimi-k3", thinking_effort=effort)


def test_unresolvable_tool_name_is_refused() -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "tool", "content": "result"}]
    with pytest.raises(InvalidInputError, match=r"field 'messages\[1\]'.*resolvable tool name"):
        render_prompt(messages, profile="kimi-k3")


def test_tool_results_are_put_in_call_order_and_named_from_the_call() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "first", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "second", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "b", "name": "stale", "content": "B"},
        {"role": "tool", "tool_call_id": "a", "content": "A"},
    ]
    prompt = render_prompt(messages, profile="kimi-k3", thinking=False)
    assert (
        '<|open|>message role="tool" tool="first" index="1"<|sep|>A<|close|>message<|sep|><|end_of_msg|>'
        '<|open|>message role="tool" tool="second" index="2"<|sep|>B<|close|>message<|sep|><|end_of_msg|>'
    ) in prompt


@pytest.mark.parametrize("choice,line", [("required", "You MUST call tools"), ("none", "You MUST NOT call any tools")])
def test_tool_choice_adds_its_system_message(choice: str, line: str) -> None:
    prompt = render_prompt([{"role": "user", "content": "hi"}], profile="kimi-k3", tool_choice=choice)
    assert f'<|open|>message role="system" type="tool-choice"<|sep|>The system is invoked with `tool_choice={choice}`.\n{line}' in prompt


def test_history_arguments_that_are_json_but_not_an_object_are_refused() -> None:
    messages = [{"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "[1]"}}]}]
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.tool_calls\[0\]\.function\.arguments"):
        render_prompt(messages, profile="kimi-k3")


def test_tools_are_declared_as_compact_deep_sorted_json() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"b": {}, "a": {}}}}}]
    prompt = render_prompt([{"role": "user", "content": "hi"}], tools, profile="kimi-k3", thinking=False)
    assert '```json\n[{"function":{"name":"f","parameters":{"properties":{"a":{},"b":{}},"type":"object"}},"type":"function"}]\n```' in prompt


def test_openrouter_model_id_names_the_k3_profile() -> None:
    assert reconstruct_output_ids(AssistantTurn(content="c"), profile="moonshotai/kimi-k3").profile == "kimi-k3"


def test_k3_record_options_reach_the_training_sample() -> None:
    from kimi_recon.training import sample_from_record

    case = CLEAN[0]
    record = {**case, "profile": "kimi-k3"}
    sample = sample_from_record(record)
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]


def test_k3_bundled_special_tokens_file_is_the_shared_one() -> None:
    bundled = Path(__file__).parents[1] / "kimi_recon" / "data" / "k3" / "special_tokens.json"
    assert json.loads(bundled.read_text(encoding="utf-8")) == json.loads((GOLDEN.parent / "k3_special_tokens.json").read_text(encoding="utf-8"))


def test_cli_build_samples_and_reconstruct_take_the_k3_profile(tmp_path: Path) -> None:
    import subprocess
    import sys

    rows = CLEAN[:3]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for command, key, expected in (
        ("build-samples", "input_ids", [r["prompt_ids"] + r["output_ids"] for r in rows]),
        ("reconstruct", "output_ids", [r["output_ids"] for r in rows]),
    ):
        out = tmp_path / f"{command}.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "kimi_recon.cli", command, str(src), "-o", str(out), "--profile", "kimi-k3"],
            capture_output=True, text=True, check=False,
        )
        assert done.returncode == 0, done.stderr
        assert [json.loads(line)[key] for line in out.read_text(encoding="utf-8").splitlines()] == expected


def test_k3_audit_evidence_names_k3_special_tokens_not_k25_ones() -> None:
    from kimi_recon import audit_dataset, audit_record

    case = CLEAN[0]
    assert case["output_ids"][-1] == 163586
    wrong_end = [*case["output_ids"][:-1], 163585]  # [EOS] where the official turn ends with <|end_of_msg|>
    record = {"id": "k3", "response": case["turn"], "reference_ids": wrong_end, "thinking": case["thinking"]}
    for result in (audit_record(record, profile="kimi-k3"), audit_record({**record, "profile": "kimi-k3"})):
        assert result.comparison is not None and result.comparison.kind != "exact"
        report = result.comparison.explain()
        assert "<|end_of_msg|>" in report and "<|im_end|>" not in report
    audit = audit_dataset([record], profile="kimi-k3")
    (example,) = [r for kind in audit.examples.values() for r in kind]
    assert example.comparison is not None and "<|end_of_msg|>" in example.comparison.explain()
