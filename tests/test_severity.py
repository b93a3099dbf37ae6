"""Flag severity reaches every output: the audit summary, its JSON and HTML, the audit columns, training rows;
batch users can drop rows at or above a severity, and a dropped row is an error row, never missing."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from testdata import OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, audit_dataset, reconstruct_output_ids, sample_batch
from kimi_recon._batch.report_html import render_html
from kimi_recon._batch.training_rows import training_row
from kimi_recon._records.record import audit_row
from kimi_recon.cli import main

CASES = read_jsonl(OFFICIAL / "turns.jsonl")


def _case(i: int = 0) -> dict[str, Any]:
    c = CASES[i]
    # official turns, never through a server parser: the flags are the renderer's alone
    return {"id": f"c{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"], "server": "none"}


def _cut(record: dict[str, Any]) -> dict[str, Any]:
    """The record with its turn cut by the length limit (``truncated``, a ``risk`` flag)."""
    out = copy.deepcopy(record)
    out["turn"] = {**out["turn"], "finish_reason": "length", "tool_calls": None}
    out["turn"]["content"] = out["turn"].get("content") or "partial"
    return out


def _with_summary_reasoning(record: dict[str, Any]) -> dict[str, Any]:
    """The record whose reasoning came back only as a summary (``reasoning_incomplete``, a ``loss`` flag)."""
    out = copy.deepcopy(record)
    out["turn"] = {**out["turn"], "reasoning_details": [{"type": "reasoning.summary", "summary": "s"}]}
    return out


def test_the_audit_summary_json_and_html_show_each_flags_severity(tok: KimiTokenizer) -> None:
    turn = {"role": "assistant", "content": "Hi", "reasoning_content": "Hm, a greeting"}
    ids = reconstruct_output_ids(turn, tok).ids
    cut = {"id": "cut", "response": {"choices": [{"message": turn, "finish_reason": "length"}]}, "reference_ids": ids[:-1]}
    plain = {"id": "ok", "response": {"choices": [{"message": turn, "finish_reason": "stop"}]}, "reference_ids": ids}
    report = audit_dataset([cut, plain], tok, progress=False)
    assert "truncated (risk) 1" in report.summary()
    assert "records by worst flag: loss 0, risk 1, unlikely 0, info 0, none 1" in report.summary()
    written = json.loads(json.dumps(report.to_dict()))
    assert written["severity_counts"] == {"risk": 1, "none": 1}
    assert written["flag_severities"] == {"truncated": "risk"}
    html = render_html(written)
    assert '<span class="sev sev-risk">risk</span>' in html


def test_audit_json_records_and_audit_columns_carry_the_severity(tok: KimiTokenizer) -> None:
    turn = {"role": "assistant", "content": "Hi", "reasoning_content": "Hm, a greeting"}
    ids = reconstruct_output_ids(turn, tok).ids
    record = {"id": "cut", "response": {"choices": [{"message": turn, "finish_reason": "length"}]}, "reference_ids": ids[:-1]}
    row = audit_row(record, tok)
    assert row["audit_flags"] == "truncated" and row["audit_max_severity"] == "risk"
    assert audit_row({**record, "response": {"choices": [{"message": turn}]}, "reference_ids": ids}, tok)["audit_max_severity"] == ""


def test_training_rows_carry_max_severity_beside_the_codes(tok: KimiTokenizer) -> None:
    assert training_row(_case(), tok)["max_severity"] == ""
    row = training_row(_with_summary_reasoning(_case()), tok)
    assert "reasoning_incomplete" in row["flags"].split(",") and row["max_severity"] == "loss"


def test_sample_batch_drop_severity_turns_rows_at_or_above_it_into_error_rows(tok: KimiTokenizer) -> None:
    records = [_case(), _cut(_case()), _with_summary_reasoning(_case())]
    batch = {k: [r[k] for r in records] for k in ("id", "messages", "tools", "turn", "thinking", "server")}
    kept = sample_batch(batch, tok)
    assert kept["error"] == [None, None, None] and kept["max_severity"] == ["", "risk", "loss"]
    dropped = sample_batch(batch, tok, drop_severity="loss")
    assert dropped["error"][:2] == [None, None] and dropped["input_ids"][2] == []
    assert "reasoning_incomplete (loss)" in dropped["error"][2] and "'loss'" in dropped["error"][2]
    strict = sample_batch(batch, tok, drop_severity="risk")
    assert strict["error"][0] is None and all(e is not None for e in strict["error"][1:])


def test_build_samples_drop_severity_sends_the_flagged_records_to_the_errors_file(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [_case(), _with_summary_reasoning(_case())]), encoding="utf-8")
    out = tmp_path / "rows.jsonl"
    assert main(["build-samples", str(src), "-o", str(out), "--drop-severity", "loss"]) == 1
    assert [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()] == ["c0"]
    (error,) = [json.loads(line) for line in (tmp_path / "rows.errors.jsonl").read_text(encoding="utf-8").splitlines()]
    assert error["field"] == "flags" and "reasoning_incomplete" in error["error"]
