"""Training rows: what build-samples and export write, checked against the trainers' own loader rules,
and sample_batch equal to the per-record row for any batch shape."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from testdata import OFFICIAL, read_jsonl
from trainer_rules import Rejected, specforge_prompts, speculators_rows

from kimi_recon import KimiTokenizer, build_training_sample, sample_batch
from kimi_recon._batch.training_rows import (
    BATCH_COLUMNS,
    ROW_COLUMNS,
    SampleResult,
    training_row,
    write_training_rows,
)
from kimi_recon.cli import main

CASES = read_jsonl(OFFICIAL / "turns.jsonl")
GOOD = [
    {"id": f"c{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]}
    for i, c in enumerate(CASES)
]
BAD: list[Any] = [
    {"id": "no-messages", "turn": CASES[0]["turn"]},
    {"id": "no-response", "messages": CASES[0]["messages"]},
    {"id": "bad-profile", "messages": CASES[0]["messages"], "turn": CASES[0]["turn"], "profile": "gpt-9"},
]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def expected_row(record: dict[str, Any], tok: KimiTokenizer) -> dict[str, Any]:
    """The row a record must give, from build_training_sample directly (not from the code under test)."""
    sample = build_training_sample(record["messages"], record["turn"], record.get("tools"), thinking=record["thinking"], tokenizer=tok)
    return {
        "id": record["id"],
        "input_ids": sample.input_ids,
        "loss_mask": sample.loss_mask,
        "prompt_len": sample.prompt_len,
        "flags": ",".join(f.code for f in sample.flags),
        "max_severity": max((f.severity for f in sample.flags), default=None) and max(f.severity for f in sample.flags).value or "",
        "token_counts": "",
    }


# -- build-samples ---------------------------------------------------------------------------------


def test_build_samples_writes_only_training_rows_and_every_failure_to_the_errors_file(
    tmp_path: Path, tok: KimiTokenizer, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [*BAD[:1], *GOOD[:20], "{not json", *BAD[1:]]
    out = tmp_path / "samples.jsonl"
    assert main(["build-samples", str(write_jsonl(tmp_path / "in.jsonl", records)), "-o", str(out)]) == 1
    rows = read_jsonl(out)
    assert rows == [expected_row(r, tok) for r in GOOD[:20]]
    assert all(set(row) == set(ROW_COLUMNS) for row in rows)
    errors = read_jsonl(tmp_path / "samples.errors.jsonl")
    assert [(e["id"], e["line"], e["field"]) for e in errors] == [
        ("no-messages", 1, "messages"), (None, 22, None), ("no-response", 23, "response"), ("bad-profile", 24, "profile"),
    ]  # fmt: skip
    assert all(e["error"] for e in errors)
    err = capsys.readouterr().err
    assert "20 training rows" in err and "4 failed records" in err


def test_build_samples_counts_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [*GOOD[:3], BAD[0]])
    main(["build-samples", str(path), "-o", str(tmp_path / "o.jsonl")])
    err = capsys.readouterr().err
    assert "3 training rows to" in err and "1 failed records to" in err and "o.errors.jsonl" in err


def test_build_samples_with_two_workers_writes_the_same_files(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", [*GOOD[:40], BAD[0], *GOOD[40:70]])
    assert main(["build-samples", str(path), "-o", str(tmp_path / "one.jsonl")]) == 1
    assert main(["build-samples", str(path), "-o", str(tmp_path / "two.jsonl"), "--workers", "2"]) == 1
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()
    assert (tmp_path / "one.errors.jsonl").read_bytes() == (tmp_path / "two.errors.jsonl").read_bytes()


def test_build_samples_without_failures_exits_0_and_empties_a_stale_errors_file(tmp_path: Path) -> None:
    (tmp_path / "o.errors.jsonl").write_text('{"id": "stale"}\n')
    assert main(["build-samples", str(write_jsonl(tmp_path / "in.jsonl", GOOD[:2])), "-o", str(tmp_path / "o.jsonl")]) == 0
    assert (tmp_path / "o.errors.jsonl").read_text() == ""


def test_build_samples_refuses_to_write_over_its_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "in.jsonl", GOOD[:2])
    before = path.read_bytes()
    assert main(["build-samples", str(path), "-o", str(path)]) == 2
    assert path.read_bytes() == before and "is also the input" in capsys.readouterr().err


def test_a_missing_input_leaves_the_old_output_untouched(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text("old\n")
    assert main(["build-samples", str(tmp_path / "nope.jsonl"), "-o", str(out)]) == 2
    assert out.read_text() == "old\n" and not (tmp_path / "o.errors.jsonl").exists()


def test_an_interrupted_write_leaves_the_old_files_and_no_temp_files(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    out.write_text("old\n")

    def results() -> Any:
        yield SampleResult(0, 1, "a", {"id": "a", "input_ids": [1], "loss_mask": [1], "prompt_len": 0, "flags": ""})
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_training_rows(results(), str(out))
    assert out.read_text() == "old\n" and sorted(os.listdir(tmp_path)) == ["o.jsonl"]


def test_build_samples_to_stdout_reports_failures_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str], tok: KimiTokenizer) -> None:
    assert main(["build-samples", str(write_jsonl(tmp_path / "in.jsonl", [GOOD[0], BAD[0]])), "-o", "-"]) == 1
    captured = capsys.readouterr()
    assert [json.loads(line) for line in captured.out.splitlines()] == [expected_row(GOOD[0], tok)]
    assert "no-messages" in captured.err and "field 'messages'" in captured.err


def test_a_turn_with_no_output_token_is_an_error_not_an_untrainable_row(tmp_path: Path) -> None:
    empty = {"id": "cut", "messages": [{"role": "user", "content": "q"}], "thinking": False,
             "turn": {"role": "assistant", "content": ""}, "finish_reason": "length"}  # fmt: skip
    assert main(["build-samples", str(write_jsonl(tmp_path / "in.jsonl", [GOOD[0], empty])), "-o", str(tmp_path / "o.jsonl")]) == 1
    assert [e["id"] for e in read_jsonl(tmp_path / "o.errors.jsonl")] == ["cut"]
    assert "nothing to train on" in read_jsonl(tmp_path / "o.errors.jsonl")[0]["error"]


# -- the trainers' loaders -------------------------------------------------------------------------


def test_the_loader_rules_reject_the_old_rows_with_errors_inline(tmp_path: Path) -> None:
    """The rule checks can fail: the rows build-samples used to write are refused by both."""
    old = [{"line": 1, "id": "x", "error": "bad"}, {"line": 2, "id": "y", "input_ids": [1, 2], "loss_mask": [0, 1], "error": None}]
    path = write_jsonl(tmp_path / "old.jsonl", old)
    with pytest.raises(Rejected, match="read the whole file as conversations"):
        specforge_prompts(path)
    inline_null = write_jsonl(tmp_path / "null.jsonl", [old[1], {"id": "x", "input_ids": None, "loss_mask": None, "error": "bad"}])
    with pytest.raises(Rejected, match="NoneType"):
        speculators_rows(inline_null)
    with pytest.raises(Rejected, match="must be 0 or 1"):
        specforge_prompts(write_jsonl(tmp_path / "m.jsonl", [{"input_ids": [1], "loss_mask": [2]}]))
    with pytest.raises(Rejected, match="skipped silently"):
        specforge_prompts(write_jsonl(tmp_path / "z.jsonl", [{"input_ids": [1], "loss_mask": [0]}]))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("built")
    path = write_jsonl(tmp / "in.jsonl", [BAD[0], *GOOD, *BAD[1:]])  # a failure first: it must not decide the format
    assert main(["build-samples", str(path), "-o", str(tmp / "samples.jsonl"), "--workers", "2"]) == 1
    return tmp / "samples.jsonl"


def test_build_samples_output_is_accepted_by_specforge_online_prompts_path(built: Path, tok: KimiTokenizer) -> None:
    prompts = specforge_prompts(built)
    assert prompts == [{"input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in (expected_row(g, tok) for g in GOOD)]


def test_build_samples_output_is_accepted_by_speculators_prepare_data(built: Path) -> None:
    rows = speculators_rows(built)
    assert len(rows) == len(GOOD)
    assert rows == [{"input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in read_jsonl(built)]


def test_columns_keep_one_type_past_the_json_loaders_first_block(tmp_path: Path) -> None:
    """datasets' JSON loader types a column from its first 10 MB; a later row of another type fails it.
    Rows without flags or usage check fill the first block here, a row with both comes after."""
    plain = {"input_ids": list(range(163000, 163600)), "loss_mask": [0] * 300 + [1] * 300, "prompt_len": 300}
    n = (11 << 20) // len(json.dumps(plain)) + 1
    results = [SampleResult(i, i + 1, None, {"id": f"line-{i + 1}", **plain, "flags": "", "max_severity": "", "token_counts": ""}) for i in range(n)]
    flagged = training_row(GOOD[0]) | {"flags": "reasoning_incomplete,foreign_tool_call_id", "max_severity": "loss", "token_counts": '{"completion_tokens": {"delta": 1}}'}
    results.append(SampleResult(n, n + 1, "c0", flagged))
    out = tmp_path / "big.jsonl"
    write_training_rows(iter(results), str(out))
    rows = speculators_rows(out)
    assert len(rows) == n + 1 and rows[-1]["input_ids"] == flagged["input_ids"]


# -- export of a generate log ----------------------------------------------------------------------


def log_rows(tok: KimiTokenizer) -> list[Any]:
    sample = build_training_sample(GOOD[5]["messages"], GOOD[5]["turn"], GOOD[5]["tools"], thinking=GOOD[5]["thinking"], tokenizer=tok)
    ok = {"id": "p1", "status": "ok", "line": 1, "output_ids": sample.output_ids, "flags": [], "truncated": False,
          "sample": sample.to_dict(), "response": {}}  # fmt: skip
    return [
        {"id": "p0", "status": "error", "line": 1, "error": {"type": "http", "code": 502, "message": "bad gateway"}},
        ok,
        dict(ok, id="p2", sample=None, prompt_ids=sample.prompt_ids),
        dict(ok, id="p3", sample=None),
        dict(ok, id="p4", flags=[{"code": "reasoning_incomplete", "message": "m", "field": "reasoning"}]),
        dict(ok, id="p5", truncated=True),
        "{torn",
    ]


def test_export_writes_the_training_row_of_every_ok_prompt_and_the_rest_as_errors(tmp_path: Path, tok: KimiTokenizer) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", log_rows(tok))
    before = log.read_bytes()
    out = tmp_path / "train.jsonl"
    assert main(["export", str(log), "-o", str(out)]) == 1
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["p1", "p2", "p4", "p5"]
    assert rows[0]["input_ids"] == rows[1]["input_ids"] and rows[2]["flags"] == "reasoning_incomplete"
    errors = read_jsonl(tmp_path / "train.errors.jsonl")
    assert [(e["id"], e["field"]) for e in errors] == [("p0", "status"), ("p3", "sample"), (None, None)]
    assert "bad gateway" in errors[0]["error"] and "--training-sample" in errors[1]["error"]
    assert log.read_bytes() == before
    specforge_prompts(out)
    speculators_rows(out)


def test_export_can_route_flagged_and_truncated_rows_to_the_errors_file(tmp_path: Path, tok: KimiTokenizer) -> None:
    log = write_jsonl(tmp_path / "log.jsonl", log_rows(tok))
    assert main(["export", str(log), "-o", str(tmp_path / "t.jsonl"), "--skip-flagged", "--skip-truncated"]) == 1
    assert [r["id"] for r in read_jsonl(tmp_path / "t.jsonl")] == ["p1", "p2"]
    assert {e["id"]: e["field"] for e in read_jsonl(tmp_path / "t.errors.jsonl")}.items() >= {"p4": "flags", "p5": "truncated"}.items()


# -- sample_batch ----------------------------------------------------------------------------------

POOL = GOOD[:12] + GOOD[-6:]


def as_column(values: list[Any], numpy: bool) -> Any:
    if not numpy:
        return values
    column = np.empty(len(values), dtype=object)
    for i, v in enumerate(values):
        column[i] = v
    return column


@st.composite
def batches(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any] | None], bool]:
    """A batch of good and bad records, nested columns as objects or JSON text, lists or numpy arrays, and
    whether every nested column is JSON text."""
    picks = draw(st.lists(st.integers(0, len(POOL) + 1), max_size=6))
    records: list[dict[str, Any] | None] = [POOL[p] if p < len(POOL) else None for p in picks]
    text = draw(st.fixed_dictionaries({k: st.booleans() for k in ("messages", "tools", "turn")}))
    numpy = draw(st.booleans())
    batch: dict[str, Any] = {"id": as_column([r["id"] if r else f"bad{i}" for i, r in enumerate(records)], numpy)}
    for key in ("messages", "tools", "turn"):
        values = []
        for r in records:
            value = r[key] if r else ("{not json" if key == "messages" else None)
            values.append(json.dumps(value) if text[key] and isinstance(value, (list, dict)) else value)
        batch[key] = as_column(values, numpy)
    batch["thinking"] = as_column([r["thinking"] if r else None for r in records], numpy)
    return batch, records, all(text.values())


@given(batches())
def test_sample_batch_rows_equal_the_per_record_rows_and_bad_records_become_error_rows(
    tok: KimiTokenizer, drawn: tuple[dict[str, Any], list[dict[str, Any] | None], bool]
) -> None:
    batch, records, all_text = drawn
    out = sample_batch(batch, tok)
    assert set(out) == set(BATCH_COLUMNS) and all(len(v) == len(records) for v in out.values())
    for i, record in enumerate(records):
        got = {k: out[k][i] for k in BATCH_COLUMNS}
        if record is None:
            assert got["error"] and got["input_ids"] == [] and got["loss_mask"] == [] and got["id"] == f"bad{i}"
        elif got["error"] is not None and not all_text:
            # objects in a batch are Arrow's: those that may not be the original's are refused (tests/test_arrow_batches.py)
            assert "JSON text" in got["error"] and got["input_ids"] == [], got["error"]
        else:
            assert got == {**expected_row(record, tok), "error": None}


def test_sample_batch_of_nothing_has_every_column(tok: KimiTokenizer) -> None:
    assert sample_batch({}, tok) == {k: [] for k in BATCH_COLUMNS}
    assert sample_batch({"messages": []}, tok) == {k: [] for k in BATCH_COLUMNS}


def test_sample_batch_reads_numpy_objects_as_arrow_gives_them(tok: KimiTokenizer) -> None:
    # Ray's view of an Arrow column of objects: a filled null that renders as nothing is removed ...
    messages = as_column([np.array([{"role": "user", "content": "q", "name": None}], dtype=object)], True)
    out = sample_batch({"id": ["a"], "messages": messages, "turn": [{"content": "x"}]}, tok)
    assert out["error"] == [None]
    assert out["input_ids"][0] == build_training_sample([{"role": "user", "content": "q"}], {"content": "x"}, tokenizer=tok).input_ids
    # ... arguments whose nulls may be Arrow's are refused
    turn = {"content": "", "tool_calls": [{"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": {"a": None}}}]}
    out = sample_batch({"id": ["a"], "messages": messages, "turn": as_column([turn], True)}, tok)
    assert out["input_ids"] == [[]] and "store this column as JSON text" in out["error"][0]
