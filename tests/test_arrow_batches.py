"""Records through a real Arrow round trip (``datasets.Dataset.from_list(rows)``, then ``map(batched=True)``):
every batch entry point gives the ids of the record as it was written, or an error row naming the field and
saying to store the column as JSON text; never the ids of what Arrow made of it (nulls filled in from other
rows, key order and number types taken from other rows)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from extras import require
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kimi_recon import KimiTokenizer, sample_batch
from kimi_recon._batch.training_rows import training_row
from kimi_recon.dataset import audit_batch, audit_row

datasets = require("datasets")

arrow_round_trip = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))

#: Argument values by key: one type per key, or Arrow refuses the column (a loud failure, not ours).
ARG_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "city": st.sampled_from(["Paris", "Oslo"]),
    "n": st.integers(0, 3),
    "x": st.sampled_from([0.5, 2.0, 3.0]),
    "flag": st.booleans(),
}
arguments = st.lists(st.sampled_from(sorted(ARG_VALUES)), unique=True, max_size=3).flatmap(
    lambda keys: st.fixed_dictionaries({k: ARG_VALUES[k] for k in keys})
)


def tool_call(index: int, args: dict[str, Any], as_text: bool) -> dict[str, Any]:
    return {"id": f"functions.get_weather:{index}", "type": "function", "function": {"name": "get_weather", "arguments": json.dumps(args) if as_text else args}}


@st.composite
def conversations(draw: st.DrawFn, args_as_text: bool) -> dict[str, Any]:
    """A record: user, then assistant turns with or without reasoning_content (and tool calls with their results)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": draw(st.sampled_from(["hi", "weather?"]))}]
    calls = 0
    for _ in range(draw(st.integers(0, 2))):
        assistant: dict[str, Any] = {"role": "assistant", "content": draw(st.sampled_from(["ok", "sure"]))}
        if draw(st.booleans()):
            assistant["reasoning_content"] = draw(st.sampled_from(["think", "hmm"]))
        if draw(st.booleans()):
            assistant["tool_calls"] = [tool_call(calls, draw(arguments), args_as_text)]
            messages.append(assistant)
            messages.append({"role": "tool", "tool_call_id": f"functions.get_weather:{calls}", "content": "sunny"})
            calls += 1
        else:
            messages.append(assistant)
            messages.append({"role": "user", "content": "more"})
    response: dict[str, Any] = {"role": "assistant", "content": draw(st.sampled_from(["done", ""]))}
    if draw(st.booleans()):
        response["reasoning_content"] = "because"
    if draw(st.booleans()):
        response["tool_calls"] = [tool_call(calls, draw(arguments), args_as_text)]
    record: dict[str, Any] = {"messages": messages, "response": response, "tools": None}  # from_list takes row 0's keys
    if draw(st.booleans()):
        properties = draw(st.lists(st.sampled_from(["city", "unit", "days"]), unique=True, min_size=1, max_size=3))
        record["tools"] = [
            {"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {
                "type": "object", "properties": {p: {"type": "string", "description": p} for p in properties}, "required": properties[:1]}}}
        ]
    return record


@st.composite
def tables(draw: st.DrawFn) -> list[dict[str, Any]]:
    """2-5 records of one table; tool-call arguments are objects in some tables and JSON text in others."""
    as_text = draw(st.booleans())
    records = draw(st.lists(conversations(as_text), min_size=2, max_size=5))
    return [{"id": f"r{i}", **r} for i, r in enumerate(records)]


def through_arrow(records: list[dict[str, Any]], fn: Any, tok: KimiTokenizer) -> list[dict[str, Any]]:
    ds = datasets.Dataset.from_list(copy.deepcopy(records))
    # One batch: Arrow types the output from the first batch, and an all-error first batch types input_ids as
    # a list of nulls that a later batch cannot be cast to (a datasets limit, not the property under test).
    # The bundled tokenizer (loaded once per process) is the one ``tok`` is; passing it would make datasets hash it.
    assert tok.source.endswith("(bundled)")
    out = ds.map(fn, batched=True, batch_size=len(records), remove_columns=ds.column_names, keep_in_memory=True, new_fingerprint="t")
    return list(out)


def as_json_text(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: json.dumps(v) if k in ("messages", "response", "tools") else v for k, v in r.items()} for r in records]


@pytest.fixture(autouse=True)
def _quiet_datasets() -> Any:
    datasets.disable_progress_bars()
    yield
    datasets.enable_progress_bars()


@arrow_round_trip
@given(tables())
def test_sample_batch_through_arrow_gives_the_written_records_ids_or_a_row_error_naming_the_field(tok: KimiTokenizer, records: list[dict[str, Any]]) -> None:
    rows = through_arrow(records, sample_batch, tok)
    assert len(rows) == len(records)
    for record, row in zip(records, rows, strict=True):
        expected = training_row(record, tok)
        if row["error"] is None:
            assert row["input_ids"] == expected["input_ids"], record["id"]
            assert row["loss_mask"] == expected["loss_mask"]
        else:
            assert "field '" in row["error"] and "JSON text" in row["error"], row["error"]
            assert row["input_ids"] == []


@arrow_round_trip
@given(tables())
def test_sample_batch_through_arrow_of_json_text_columns_is_exact_for_every_record(tok: KimiTokenizer, records: list[dict[str, Any]]) -> None:
    rows = through_arrow(as_json_text(records), sample_batch, tok)
    assert [(r["error"], r["input_ids"]) for r in rows] == [(None, training_row(rec, tok)["input_ids"]) for rec in records]


@arrow_round_trip
@given(tables())
def test_audit_batch_through_arrow_never_calls_a_changed_response_exact(tok: KimiTokenizer, records: list[dict[str, Any]]) -> None:
    with_refs = [{**r, "reference_ids": training_row(r, tok)["input_ids"][training_row(r, tok)["prompt_len"]:]} for r in records]
    rows = through_arrow(with_refs, audit_batch, tok)
    for record, row in zip(with_refs, rows, strict=True):
        if row["audit_error"]:
            assert "JSON text" in row["audit_error"] and row["audit_error_field"].startswith("response"), row
        else:
            assert row["audit_exact"], (record["id"], row)


def test_an_assistant_message_without_reasoning_next_to_one_with_it_is_not_rendered_with_none(tok: KimiTokenizer) -> None:
    # The history message without reasoning_content is in the prompt's suffix (after the last plain assistant
    # message), where K2.5 renders reasoning: Arrow's null would render <think>None</think> (main did).
    calls = [tool_call(0, {"city": "Paris"}, True)]
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
    ]
    with_reasoning: dict[str, Any] = {"id": "a", "messages": messages, "response": {"content": "done"}}
    without = copy.deepcopy(with_reasoning)
    without["id"] = "b"
    del without["messages"][1]["reasoning_content"]
    rows = through_arrow([with_reasoning, without], sample_batch, tok)
    assert rows[0]["input_ids"] == training_row(with_reasoning, tok)["input_ids"]
    assert rows[1]["input_ids"] == [] and "reasoning_content" in rows[1]["error"] and "JSON text" in rows[1]["error"]
    assert "None" not in tok.decode(training_row(without, tok)["input_ids"])


def test_tool_call_arguments_as_objects_do_not_gain_other_rows_keys(tok: KimiTokenizer) -> None:
    records = [
        {"id": "a", "messages": [{"role": "user", "content": "q"}], "response": {"content": "", "tool_calls": [tool_call(0, {"city": "Paris"}, False)]}},
        {"id": "b", "messages": [{"role": "user", "content": "q"}], "response": {"content": "", "tool_calls": [tool_call(0, {"n": 1}, False)]}},
    ]
    rows = through_arrow(records, sample_batch, tok)
    for row in rows:  # main gave {"city": "Paris", "n": null} and {"city": null, "n": 1}, no flag, no error
        assert row["input_ids"] == [] and "response.tool_calls[0].function.arguments" in row["error"], row


def test_one_key_arguments_without_nulls_or_whole_floats_are_read_back_exactly(tok: KimiTokenizer) -> None:
    records = [
        {"id": "a", "messages": [{"role": "user", "content": "q"}], "response": {"content": "", "tool_calls": [tool_call(0, {"city": "Paris"}, False)]}},
        {"id": "b", "messages": [{"role": "user", "content": "q"}], "response": {"content": "", "tool_calls": [tool_call(0, {"city": "Oslo"}, False)]}},
    ]
    rows = through_arrow(records, sample_batch, tok)
    assert [r["input_ids"] for r in rows] == [training_row(r, tok)["input_ids"] for r in records]


def test_audit_row_reads_an_arrow_row_as_the_batch_functions_do(tok: KimiTokenizer) -> None:
    record = {"id": "a", "messages": [{"role": "user", "content": "q"}], "response": {"content": "", "tool_calls": [tool_call(0, {"city": "Paris", "n": None}, False)]}, "reference_ids": [1]}
    row = audit_row(record, tok)
    assert row["audit_kind"] == "error" and row["audit_error_field"] == "response.tool_calls[0].function.arguments"


def test_batches_with_columns_of_different_lengths_are_refused_with_a_named_error(tok: KimiTokenizer) -> None:
    from kimi_recon.errors import InvalidInputError

    for fn in (sample_batch, audit_batch):
        with pytest.raises(InvalidInputError, match="differ in length"):
            fn({"id": ["a", "b"], "messages": [[{"role": "user", "content": "q"}]], "response": [{"content": "x"}] * 2}, tok)
        with pytest.raises(TypeError):  # also an InvalidInputError: a batch is a mapping of columns
            fn([{"id": "a"}], tok)  # type: ignore[arg-type]  # a list of rows on purpose: refused by name
