"""Record options (profile, thinking, tools, call_index_offset, template_kwargs) mean the same in every
command and API: one parser, kimi_recon.record_options.parse_options."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from extras import require
from hypothesis import given, settings
from hypothesis import strategies as st
from testdata import OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, build_training_sample, load_tokenizer, reconstruct_output_ids, render_prompt, sample_batch
from kimi_recon.cli import main
from kimi_recon.dataset import audit_record, audit_row, reconstruct_record
from kimi_recon.errors import InvalidInputError
from kimi_recon.record_options import arrow_tools, parse_options
from kimi_recon.render import render_assistant_turn
from kimi_recon.training import sample_from_record

CASES = read_jsonl(OFFICIAL / "turns.jsonl")
WITH_TOOLS = [c for c in CASES if c["tools"] and c["turn"].get("tool_calls")]
TOOL_TURN = {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}


def record(case: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"id": "r1", "messages": case["messages"], "tools": case["tools"], "turn": case["turn"], "thinking": case["thinking"], **extra}


# -- thinking ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["false", "true", 0, 1, "no", [], 0.0])
def test_thinking_that_is_not_a_bool_is_refused_naming_field_and_sample(value: object) -> None:
    with pytest.raises(InvalidInputError, match=r"sample 'r7', field 'thinking': must be true or false") as err:
        parse_options({"thinking": value}, sample="r7")
    assert err.value.field == "thinking"


def test_thinking_false_as_text_is_an_error_row_in_build_samples_and_reconstruct(tmp_path: Path) -> None:
    # The issue: build-samples read "false" as thinking on, while reconstruct refused it.
    case = CASES[0]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(record(case, thinking="false")) + "\n", encoding="utf-8")
    for command in ("build-samples", "reconstruct"):
        out = tmp_path / f"{command}.jsonl"
        assert main([command, str(src), "-o", str(out)]) == 1
        if command == "build-samples":  # no training row; the failure is in the errors file
            assert read_jsonl(out) == []
            row = read_jsonl(tmp_path / f"{command}.errors.jsonl")[0]
        else:
            row = read_jsonl(out)[0]
        error = row["error"] if isinstance(row["error"], str) else f"field {row['error']['field']!r}: {row['error']['message']}"
        assert "field 'thinking': must be true or false" in error, (command, row)
        assert "input_ids" not in row and row.get("output_ids") is None


def test_numpy_bool_thinking_from_arrow_batches_is_a_bool() -> None:
    np = require("numpy")
    assert parse_options({"thinking": np.bool_(False)}).thinking is False


# -- call_index_offset ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [1.5, -3, "2", True, 2.0])
def test_call_index_offset_must_be_a_non_negative_int_everywhere(tok: KimiTokenizer, value: Any) -> None:
    # The issue: 1.5 and -3 wrote functions.f:1.5 / functions.f:-3; "2" raised a bare TypeError.
    calls: list[Callable[[], object]] = [
        lambda: render_assistant_turn(TOOL_TURN, call_index_offset=value),
        lambda: reconstruct_output_ids(TOOL_TURN, tok, call_index_offset=value),
        lambda: build_training_sample([{"role": "user", "content": "q"}], TOOL_TURN, tokenizer=tok, call_index_offset=value),
        lambda: reconstruct_record({"id": "r", "response": TOOL_TURN, "call_index_offset": value}, tok),
        lambda: sample_from_record({"id": "r", "messages": [{"role": "user", "content": "q"}], "response": TOOL_TURN, "call_index_offset": value}, tok),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError, match="must be a non-negative integer") as err:
            call()
        assert err.value.field == "call_index_offset"


def test_record_call_index_offset_numbers_the_calls_of_a_training_sample(tok: KimiTokenizer) -> None:
    rec = {"id": "r", "messages": [{"role": "user", "content": "q"}], "response": TOOL_TURN, "call_index_offset": 4}
    sample = sample_from_record(rec, tok)
    assert "functions.f:4" in tok.decode(sample.output_ids)


# -- tools as JSON text --------------------------------------------------------------------------------


@pytest.mark.parametrize("case", WITH_TOOLS[:6], ids=[f"tools-{i}" for i in range(6)])
def test_tools_as_json_text_give_the_official_sample(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    # The issue: JSON text was iterated character by character into the declaration.
    text = json.dumps(case["tools"], ensure_ascii=False)
    expected = case["prompt_ids"] + case["output_ids"]
    assert render_prompt(case["messages"], text, thinking=case["thinking"]) == case["prompt"]
    assert build_training_sample(case["messages"], case["turn"], text, thinking=case["thinking"], tokenizer=tok).input_ids == expected
    assert sample_from_record(record(case, tools=text), tok).input_ids == expected


@pytest.mark.parametrize(
    "value,message",
    [("{not json", "is text but not JSON"), ('{"type": "function"}', "must be a list of tool objects"), ("[1]", "must be a tool object"), (5, "must be a list of tool objects")],
)
def test_tools_that_are_not_a_list_of_objects_are_refused(value: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as err:
        parse_options({"tools": value}, sample="s")
    assert err.value.field is not None and err.value.field.startswith("tools") and err.value.sample == "s"


# -- Arrow round trips -----------------------------------------------------------------------------------


def _arrow_round_trip(tool_lists: list[Any]) -> list[Any]:
    datasets = require("datasets")
    return list(datasets.Dataset.from_list([{"tools": tools} for tools in tool_lists])["tools"])


def test_tools_after_an_arrow_round_trip_give_the_official_sample(tok: KimiTokenizer) -> None:
    # HF datasets fills every key another row's tools had with null; the issue: the declaration then
    # switched to the JSON fallback. Every golden case with tools, round-tripped together.
    cases = WITH_TOOLS[:12]
    round_tripped = _arrow_round_trip([c["tools"] for c in cases])
    assert any("None" in repr(tools) for tools in round_tripped)  # the round trip did fill nulls
    for case, tools in zip(cases, round_tripped, strict=True):
        sample = sample_from_record(record(case, tools=tools), tok)
        assert sample.input_ids == case["prompt_ids"] + case["output_ids"]
        if tools != case["tools"]:
            assert "tools_null_fields_removed" in [f.code for f in sample.flags]


def test_arrow_filled_nulls_are_removed_exactly() -> None:
    original = [
        [{"type": "function", "function": {"name": "a", "description": "A", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]}}}],
        [{"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"y": {"type": "integer", "minimum": 1}}}}}],
    ]
    for tools, filled in zip(original, _arrow_round_trip(original), strict=True):
        assert filled != tools
        options = parse_options({"tools": filled})
        assert options.tools is not None and list(options.tools) == tools
        assert [f.code for f in options.flags] == ["tools_null_fields_removed"]


def test_a_null_that_may_be_real_in_arrow_filled_tools_is_refused_saying_so() -> None:
    # "default" may be null on purpose; next to Arrow's fillers it cannot be told from one.
    original = [
        [{"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {"x": {"type": "string", "default": "d"}}}}}],
        [{"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {"x": {"type": "string"}}}}}],
        [{"type": "function", "function": {"name": "c", "description": "C", "parameters": {"type": "object", "properties": {}}}}],
    ]
    filled = _arrow_round_trip(original)[1]
    with pytest.raises(InvalidInputError, match=r"went through Arrow .* tools\[0\]\.function\.parameters\.properties\.x\.default is null") as err:
        parse_options({"tools": filled}, sample="r2")
    assert err.value.field == "tools" and err.value.sample == "r2"
    assert "store tools as JSON text" in str(err.value)


def test_a_lone_filled_default_is_refused_in_a_batch_where_no_other_filler_shows() -> None:
    # Hypothesis found it: the first tool's "x" got "default": null from the second, and nothing else in
    # the record was filled, so it was kept as if real. The batch functions know the column is Arrow's.
    original = [
        [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}],
        [
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "description": ""}}}}},
            {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "description": "", "default": "d"}}}}},
        ],
    ]
    datasets = require("datasets")
    messages = json.dumps([{"role": "user", "content": "q"}])
    ds = datasets.Dataset.from_list([{"id": f"r{i}", "messages": messages, "response": json.dumps({"content": "a"}), "tools": t} for i, t in enumerate(original)])
    assert ds[1]["tools"][0]["function"]["parameters"]["properties"]["x"]["default"] is None  # the round trip filled it
    rows = ds.map(sample_batch, batched=True, remove_columns=ds.column_names)
    assert rows[0]["error"] is None
    error = rows[1]["error"]
    assert error is not None and "r1" in error and "tools" in error and "properties.x.default" in error and "cannot be told" in error


def test_audit_row_reads_a_lone_null_default_as_arrow_filled_and_audit_record_as_real() -> None:
    # audit_row is a datasets.map function: its record is an Arrow row. The usage check renders the prompt,
    # which the ambiguous null stops there (prompt_tokens_unchecked) but not from a JSON record.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "default": None}}}}}]
    rec = {"id": "u", "messages": [{"role": "user", "content": "q"}], "response": {"content": "a"}, "tools": tools,
           "reference_ids": [64, 163586], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}
    from_arrow = audit_row(rec)
    assert from_arrow["audit_flags"].split(",").count("prompt_tokens_unchecked") == 1
    as_json = audit_record(rec)
    assert as_json.error is None and "prompt_tokens_unchecked" not in as_json.flag_codes


def test_a_real_null_default_without_arrow_fillers_is_kept() -> None:
    # pydantic writes "default": null for optional fields; nothing says these tools went through Arrow.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}}}}}]
    options = parse_options({"tools": tools})
    assert options.tools is not None and list(options.tools) == tools and options.flags == ()


# -- template options --------------------------------------------------------------------------------


def test_template_kwargs_in_a_record_reach_the_template(tok: KimiTokenizer) -> None:
    template = "{% for m in messages %}{{ m.content }}{% endfor %}[{{ marker }}]<|im_assistant|>assistant<|im_middle|>"
    rec = {"id": "t", "messages": [{"role": "user", "content": "q"}], "response": {"content": "a"}, "profile": "kimi-k2-instruct", "template_kwargs": {"marker": "M"}}
    sample = sample_from_record(rec, tok, template=template)
    assert tok.decode(sample.prompt_ids) == "q[M]<|im_assistant|>assistant<|im_middle|>"


@pytest.mark.parametrize("value,message", [("x", "is text but not JSON"), ([1], "must be an object"), ({"thinking": False}, "sets thinking"), ({"tools": []}, "sets tools")])
def test_bad_template_kwargs_are_refused_naming_the_field(value: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message) as err:
        parse_options({"template_kwargs": value})
    assert err.value.field == "template_kwargs"


def test_record_options_win_over_the_arguments_and_nulls_take_them() -> None:
    options = parse_options({"profile": "k2-thinking", "thinking": False, "call_index_offset": None}, profile="kimi-k2.5", thinking=True, call_index_offset=3)
    assert (options.profile.name, options.thinking, options.call_index_offset) == ("kimi-k2-thinking", False, 3)


def test_unknown_profile_in_a_record_is_an_error_row_naming_the_field() -> None:
    result = audit_record({"id": "p", "response": {"content": "x"}, "reference_ids": [1], "profile": "kimi-k9"})
    assert result.error is not None and result.error.field == "profile"


@pytest.mark.parametrize("depth", [120, 900, 20000])
def test_tools_nested_too_deeply_are_refused_naming_the_field_in_every_profile(tok: KimiTokenizer, depth: int) -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    rec = {"id": "deep", "messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}], "response": {"content": "a"}}
    for profile in ("kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct"):
        with pytest.raises(InvalidInputError, match="nested more than 200 levels deep") as err:
            sample_from_record({**rec, "profile": profile}, tok)
        assert (err.value.field, err.value.sample) == ("tools", "deep")


def test_tools_just_below_the_depth_limit_render_in_every_profile(tok: KimiTokenizer) -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(98):  # 200 levels with the tool and its function
        schema = {"type": "object", "properties": {"a": schema}}
    rec = {"id": "d", "messages": [{"role": "user", "content": "q"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}], "response": {"content": "a"}}
    for profile in ("kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct"):
        prompt = tok.decode(sample_from_record({**rec, "profile": profile}, tok).prompt_ids)
        assert prompt.count('"a"') == 98 or prompt.count("a?: ") == 98, profile


@pytest.mark.parametrize("profile", ["kimi-k2.5", "kimi-k2-thinking", "kimi-k3"])
def test_tools_with_a_key_that_is_not_a_string_are_refused_naming_the_place(tok: KimiTokenizer, profile: str) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {1: "a", "b": 2}}}]
    with pytest.raises(InvalidInputError, match=r"tools\[0\]\.function\.parameters has a key that is not a string: 1") as err:
        build_training_sample([{"role": "user", "content": "q"}], {"content": "a"}, tools, profile, tokenizer=tok)
    assert err.value.field == "tools"


_prop_names = st.sampled_from(["city", "unit", "q", "limit"])
_prop = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer"])},
    optional={"description": st.text(max_size=5), "enum": st.lists(st.sampled_from(["a", "b"]), max_size=2), "default": st.sampled_from(["x", "y"])},
)
_tool = st.builds(
    lambda name, desc, props, required: {
        "type": "function",
        "function": {"name": name, **desc, "parameters": {"type": "object", "properties": props, **required}},
    },
    st.sampled_from(["f", "g", "h"]),
    st.just({}) | st.builds(lambda d: {"description": d}, st.text(max_size=5)),
    st.dictionaries(_prop_names, _prop, max_size=3),
    st.just({}) | st.builds(lambda r: {"required": r}, st.lists(_prop_names, max_size=2)),
)


@settings(max_examples=30)
@given(st.lists(st.lists(_tool, min_size=1, max_size=2), min_size=1, max_size=4))
def test_an_arrow_round_trip_is_undone_exactly_or_refused_saying_so(rows: list[list[dict[str, Any]]]) -> None:
    # The batch functions mark tools read from an Arrow column (arrow_tools); so does this test.
    for original, filled in zip(rows, _arrow_round_trip(rows), strict=True):
        try:
            options = parse_options({"tools": arrow_tools(filled)})
        except InvalidInputError as err:
            # Only a null where a real null is legal ("default") is refused.
            assert "went through Arrow" in str(err) and ".default" in str(err) and "cannot be told" in str(err)
            assert "default" in json.dumps(rows)
            continue
        assert options.tools is not None and list(options.tools) == original
        assert bool(options.flags) == (filled != original)


# -- the request a record was made with says whether thinking was on, and K3's effort (issue 33) ---------------

_TEXT_TURN = {"model": "moonshotai/kimi-k2.5", "choices": [{"message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}]}


@pytest.mark.parametrize(
    ("said", "thinking"),
    [
        ({"request": {"reasoning": {"enabled": False}}}, False),
        ({"reasoning": {"effort": "none"}}, False),
        ({"thinking": {"type": "disabled"}}, False),
        ({"request": {"thinking": {"type": "enabled"}}}, True),
        ({"request": {"chat_template_kwargs": {"thinking": False}}}, False),
        ({"thinking": False, "request": {"reasoning": {"enabled": True}}}, False),  # the record's own key wins
        ({"reasoning": "a reasoning text, not a request setting"}, True),
    ],
)
def test_a_thinking_off_request_is_rebuilt_without_think_end(tok: KimiTokenizer, said: dict[str, Any], thinking: bool) -> None:
    record = {"id": "r", "messages": [{"role": "user", "content": "q"}], "response": _TEXT_TURN, **said}
    result = reconstruct_record(record, tok)
    assert result.thinking is thinking
    assert result.ids == tok.encode(("</think>" if thinking else "") + "Hello<|im_end|>", allowed_special="all")
    assert sample_from_record(record, tok).output_ids == result.ids


@pytest.mark.parametrize(
    ("said", "effort"),
    [({}, "max"), ({"reasoning_effort": "high"}, "high"), ({"request": {"reasoning_effort": "low"}}, "low"),
     ({"request": {"reasoning": {"effort": "low"}}}, "low"), ({"thinking_effort": "high", "reasoning_effort": "low"}, "high")],
    # (OpenRouter's "medium" was rendered as max without a word; now it is refused: tests/test_k3_template_and_effort.py)
)
def test_a_k3_prompt_takes_the_requests_reasoning_effort(said: dict[str, Any], effort: str) -> None:
    record = {"id": "k", "messages": [{"role": "user", "content": "q"}], "response": {**_TEXT_TURN, "model": "moonshotai/kimi-k3"}, **said}
    prompt = load_tokenizer(profile="kimi-k3").decode(sample_from_record(record).prompt_ids)
    assert f"thinking_effort={effort}`" in prompt


def test_every_door_numbers_a_replaced_call_id_from_the_records_messages(tok: KimiTokenizer) -> None:
    """``reconstruct`` and ``audit`` numbered a server-issued call id (``call_abc123``) from 0 without looking at the
    record's ``messages``; the training rows counted the calls there (issue 33). Every door counts them now."""
    history = [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"functions.get_weather:{i}", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}} for i in range(3)]},
        *({"role": "tool", "tool_call_id": f"functions.get_weather:{i}", "content": "sunny"} for i in range(3)),
        {"role": "user", "content": "and tomorrow?"},
    ]
    call = {"id": "call_abc123", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    response = {"choices": [{"message": {"role": "assistant", "content": "", "reasoning_content": "Check.", "tool_calls": [call]}, "finish_reason": "tool_calls"}]}
    record = {"id": "r", "messages": history, "response": response}
    rebuilt = reconstruct_record(record, tok)
    assert "functions.get_weather:3" in rebuilt.text
    assert sample_from_record(record, tok).output_ids == rebuilt.ids
    # the whole conversation stored, the answer last: the answer's own calls are not counted
    whole = {**record, "messages": [*history, response["choices"][0]["message"]]}
    assert reconstruct_record(whole, tok).ids == rebuilt.ids
    assert "functions.get_weather:5" in reconstruct_record({**record, "call_index_offset": 5}, tok).text  # the record's own key wins
    audited = audit_record({**record, "reference_ids": rebuilt.ids}, tok)
    assert audited.comparison is not None and audited.comparison.exact
