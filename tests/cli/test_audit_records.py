"""Per-record verdicts (issue 33: ``audit --json`` had only aggregates and the 20 worst records, nothing a script
could filter per record): ``"records"`` in the JSON report and ``audit --records FILE`` as JSON Lines, both
streamed. The report's run line names the thresholds as they were applied."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extras import require

from kimi_recon import load_tokenizer
from kimi_recon._batch.sample import SAMPLE_PATH
from kimi_recon.cli import main
from kimi_recon.dataset import RecordResult, audit_dataset
from kimi_recon.errors import InvalidInputTypeError

KEYS = ["index", "line", "id", "profile", "kind", "exact", "benign", "first_diff", "region", "detail", "source", "flags", "max_severity", "error_field", "error"]


def _sample_lines() -> list[str]:
    return [line for line in SAMPLE_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]


def _read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_records_writes_one_verdict_per_record_in_input_order(tmp_path: Path) -> None:
    records, report = tmp_path / "verdicts.jsonl", tmp_path / "r.json"
    assert main(["audit", "--sample", "--records", str(records), "--json", str(report), "-q"]) == 0
    lines, verdicts = _sample_lines(), _read_lines(records)
    assert len(verdicts) == len(lines) == 37
    assert [v["index"] for v in verdicts] == list(range(37)) and [v["line"] for v in verdicts] == list(range(1, 38))
    assert all(list(v) == KEYS for v in verdicts)  # one table: the same keys, in one order, on every line
    for verdict, line in zip(verdicts[:-1], lines[:-1], strict=True):
        assert verdict["id"] == json.loads(line)["id"] and verdict["profile"] == "kimi-k2.5"
        assert isinstance(verdict["first_diff"], int) and isinstance(verdict["flags"], str) and verdict["error"] == ""
    # the sample's last line is cut short on purpose: its verdict is the error, not a missing line
    assert verdicts[-1]["kind"] == "error" and verdicts[-1]["id"] is None and "not JSON" in verdicts[-1]["error"]
    # the truncated turn and the wrong <|im_end|> id the sample holds are not exact, and say where they differ
    assert sum(not v["exact"] for v in verdicts[:-1]) >= 2
    assert all(v["first_diff"] >= 0 for v in verdicts[:-1] if not v["exact"])
    data = json.loads(report.read_text(encoding="utf-8"))
    assert Counter(v["kind"] for v in verdicts if v["kind"] != "error") == Counter({k: n for k, n in data["counts"].items() if n})
    assert data["run"]["records_file"] == str(records)
    # the JSON report holds the same verdicts, last, one a line
    assert data["records"] == verdicts and list(data)[-1] == "records"
    assert sum(line.startswith('    {"index": ') for line in report.read_text(encoding="utf-8").splitlines()) == 37


def test_records_load_as_a_table() -> None:
    datasets = require("datasets")
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "v.jsonl"
        assert main(["audit", "--sample", "--records", str(path), "-q"]) == 0
        table = datasets.load_dataset("json", data_files=str(path), split="train")
        assert table.num_rows == 37 and table.column_names == KEYS


def test_the_json_report_alone_holds_every_verdict(tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    assert main(["audit", "--sample", "--json", str(report), "-q"]) == 0
    data = json.loads(report.read_text(encoding="utf-8"))
    assert [v["line"] for v in data["records"]] == list(range(1, 38)) and "records_file" not in data["run"]
    assert [v["id"] for v in data["records"][:-1]] == [json.loads(line)["id"] for line in _sample_lines()[:-1]]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    main(["audit", str(empty), "--json", str(report), "-q"])
    assert json.loads(report.read_text(encoding="utf-8"))["records"] == []


def test_records_to_stdout_moves_the_summary_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--sample", "--records", "-"]) == 0
    out, err = capsys.readouterr()
    assert len([json.loads(line) for line in out.splitlines()]) == 37
    assert "kimi-recon audit: 37 records" in err


def test_records_may_not_replace_the_input_or_another_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("".join(line + "\n" for line in _sample_lines()[:3]), encoding="utf-8")
    before = data.read_bytes()
    assert main(["audit", str(data), "--records", str(data)]) == 2
    assert data.read_bytes() == before and "--records" in capsys.readouterr().err
    report = tmp_path / "r.json"
    assert main(["audit", str(data), "--records", str(report), "--json", str(report)]) == 2
    assert not report.exists()


def test_an_audit_that_stops_keeps_the_old_records_file(tmp_path: Path) -> None:
    data, records = tmp_path / "d.jsonl", tmp_path / "v.jsonl"
    data.write_text("".join(line + "\n" for line in _sample_lines()[:3]), encoding="utf-8")
    records.write_text("old\n", encoding="utf-8")
    assert main(["audit", str(data), "--records", str(records), "--profile", "kimi-k9"]) == 2  # a bad option: before any output
    assert records.read_text(encoding="utf-8") == "old\n"
    assert main(["audit", str(data), "--records", str(records), "-q"]) == 0
    assert len(_read_lines(records)) == 3 and not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_on_record_is_called_as_the_records_stream_not_at_the_end() -> None:
    """Memory stays flat: the first verdict arrives long before the last record is read, and the audit keeps none."""
    lines = _sample_lines()[:-1]
    pulled = 0

    def records() -> Iterator[dict[str, Any]]:
        nonlocal pulled
        for i in range(2_000):
            pulled += 1
            yield json.loads(lines[i % len(lines)])

    seen: list[tuple[int, int]] = []

    def on_record(result: RecordResult) -> None:
        seen.append((result.index, pulled))

    report = audit_dataset(records(), load_tokenizer(), workers=1, progress=False, on_record=on_record)
    assert [i for i, _ in seen] == list(range(2_000)) and report.total == 2_000
    assert seen[0][1] < 500  # the first verdict came when a few chunks had been read, not all 2,000 records
    assert not any(isinstance(v, tuple) and len(v) > 100 for v in vars(report).values())


def test_on_record_must_be_a_function() -> None:
    with pytest.raises(InvalidInputTypeError, match="on_record"):
        audit_dataset([], load_tokenizer(), progress=False, on_record=5)  # type: ignore[arg-type]


def test_the_run_line_gives_the_thresholds_as_applied(tmp_path: Path) -> None:
    """``--max-errors`` was reported as None (any number) when no option was given, though the audit allowed 0;
    the rules every audit has were written as ``True``."""
    data, report, page = tmp_path / "d.jsonl", tmp_path / "r.json", tmp_path / "r.html"
    data.write_text("".join(line + "\n" for line in _sample_lines()[:3]), encoding="utf-8")
    assert main(["audit", str(data), "--json", str(report), "--html", str(page), "-q"]) == 0
    thresholds = json.loads(report.read_text(encoding="utf-8"))["run"]["thresholds"]
    assert thresholds["--max-errors"] == 0 and thresholds["at least one record exact or benign"] is True
    html = page.read_text(encoding="utf-8")
    assert "--max-errors 0" in html and "at least one record compared" in html and " True" not in html
    assert main(["audit", str(data), "--json", str(report), "--allow-errors", "-q"]) == 0
    assert json.loads(report.read_text(encoding="utf-8"))["run"]["thresholds"]["--max-errors"] is None


def test_the_summary_header_names_the_profiles_of_a_mixed_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """"kimi-recon audit: 4 records (profile kimi-k2.5, ...)" for a file with a K3 record."""
    k3 = {"id": "k3", "response": {"model": "moonshotai/kimi-k3", "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]},
          "reference_ids": load_tokenizer(profile="kimi-k3").encode("<|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")}
    data = tmp_path / "mixed.jsonl"
    data.write_text("".join(line + "\n" for line in [*_sample_lines()[:3], json.dumps(k3)]), encoding="utf-8")
    main(["audit", str(data)])
    first = capsys.readouterr().out.splitlines()[0]
    assert "profiles kimi-k2.5 3, kimi-k3 1" in first and "profile kimi-k2.5," not in first
