"""build-samples for the trainers' limits and the data tools (issue 33): ``--max-length N`` flags and counts the
rows SpecForge and vLLM speculators would cut without a word (or leaves them out, said on stderr), and
``-o rows.parquet`` writes the same rows as Parquet, through a temporary file, loadable by ``datasets``."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extras import require
from hypothesis import given, settings
from hypothesis import strategies as st
from testdata import OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, build_training_sample
from kimi_recon._batch.training_rows import ROW_COLUMNS, SampleResult, build_samples, sample_batch, training_row, write_training_rows
from kimi_recon.cli import main
from kimi_recon.errors import InvalidInputError, OutputFileError

CASES = read_jsonl(OFFICIAL / "turns.jsonl")
RECORDS = [{"id": f"c{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]} for i, c in enumerate(CASES[:30])]


def _lengths(tok: KimiTokenizer) -> list[tuple[int, int]]:
    """(ids, prompt ids) of each record's row, from build_training_sample directly (not the code under test)."""
    out = []
    for r in RECORDS:
        sample = build_training_sample(r["messages"], r["turn"], r["tools"], thinking=r["thinking"], tokenizer=tok)
        out.append((len(sample.input_ids), sample.prompt_len))
    return out


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _codes(row: dict[str, Any]) -> list[str]:
    return [c for c in row["flags"].split(",") if c]


# -- --max-length -------------------------------------------------------------------------------------


def test_max_length_flags_and_counts_the_rows_a_trainer_would_cut(tmp_path: Path, tok: KimiTokenizer, capsys: pytest.CaptureFixture[str]) -> None:
    lengths = _lengths(tok)
    limit = sorted(n for n, _ in lengths)[len(lengths) // 2]
    over = [i for i, (n, _) in enumerate(lengths) if n > limit]
    assert 0 < len(over) < len(lengths)
    out = tmp_path / "rows.jsonl"
    main(["build-samples", str(_write(tmp_path / "in.jsonl", RECORDS)), "-o", str(out), "--max-length", str(limit)])
    rows = read_jsonl(out)
    assert len(rows) == len(RECORDS)  # never dropped without being asked
    assert [i for i, row in enumerate(rows) if "over_max_length" in _codes(row)] == over
    assert all(len(row["input_ids"]) == n for row, (n, _) in zip(rows, lengths, strict=True))  # flagged, not cut
    err = capsys.readouterr().err
    longest = max(n for n, _ in lengths)
    assert f"{len(over)} record(s) longer than --max-length {limit:,} ids, the longest {longest:,}" in err
    assert "--drop-over-length" in err and "data.max_length" in err and "--seq-length" in err


def test_without_max_length_no_row_is_flagged_for_its_length(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    main(["build-samples", str(_write(tmp_path / "in.jsonl", RECORDS[:5])), "-o", str(out)])
    assert not any("over_max_length" in _codes(row) for row in read_jsonl(out))


def test_drop_over_length_sends_them_to_the_errors_file_and_says_so(tmp_path: Path, tok: KimiTokenizer, capsys: pytest.CaptureFixture[str]) -> None:
    lengths = _lengths(tok)
    limit = sorted(n for n, _ in lengths)[len(lengths) // 2]
    over = {f"c{i}" for i, (n, _) in enumerate(lengths) if n > limit}
    out = tmp_path / "rows.jsonl"
    code = main(["build-samples", str(_write(tmp_path / "in.jsonl", RECORDS)), "-o", str(out), "--max-length", str(limit), "--drop-over-length"])
    assert code == 1  # records left out are failed records, as with --drop-severity
    rows, errors = read_jsonl(out), read_jsonl(tmp_path / "rows.errors.jsonl")
    assert {row["id"] for row in rows} == {r["id"] for r in RECORDS} - over
    assert all(len(row["input_ids"]) <= limit for row in rows)
    assert {e["id"] for e in errors} == over and all(e["field"] == "input_ids" and f"{limit:,}" in e["error"] for e in errors)
    assert f"left out {len(over)} of them (--drop-over-length" in capsys.readouterr().err


def test_bad_length_options_stop_before_any_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, out = _write(tmp_path / "in.jsonl", RECORDS[:2]), tmp_path / "rows.jsonl"
    out.write_text("old\n", encoding="utf-8")
    assert main(["build-samples", str(data), "-o", str(out), "--drop-over-length"]) == 2
    assert "--drop-over-length" in capsys.readouterr().err
    for bad in ("0", "-5", "2k"):
        with pytest.raises(SystemExit) as stop:
            main(["build-samples", str(data), "-o", str(out), "--max-length", bad])
        assert stop.value.code == 2
    assert out.read_text(encoding="utf-8") == "old\n"


def test_max_length_in_the_library_flags_at_the_boundary(tok: KimiTokenizer) -> None:
    record = RECORDS[0]
    n, prompt = _lengths(tok)[0]
    assert "over_max_length" not in _codes(training_row(record, tok, max_length=n))
    flagged = training_row(record, tok, max_length=n - 1)
    assert "over_max_length" in _codes(flagged) and flagged["max_severity"] != ""  # info at least
    batch = sample_batch({k: [record[k]] for k in ("id", "messages", "tools", "turn", "thinking")}, tok, max_length=prompt)
    assert "over_max_length" in batch["flags"][0].split(",")
    with pytest.raises(InvalidInputError, match="max_length"):
        training_row(record, tok, max_length=0)
    with pytest.raises(InvalidInputError, match="drop_over_length"):
        list(build_samples(RECORDS[:1], tok, drop_over_length=True))


# -- Parquet --------------------------------------------------------------------------------------------


def test_parquet_rows_load_in_datasets_as_the_jsonl_rows_do(tmp_path: Path) -> None:
    datasets = require("datasets")
    data = _write(tmp_path / "in.jsonl", [*RECORDS[:12], {"id": "no-response", "messages": RECORDS[0]["messages"]}])
    assert main(["build-samples", str(data), "-o", str(tmp_path / "rows.jsonl"), "-q"]) == 1
    assert main(["build-samples", str(data), "-o", str(tmp_path / "rows.parquet"), "-q"]) == 1
    from_json = datasets.load_dataset("json", data_files=str(tmp_path / "rows.jsonl"), split="train")
    from_parquet = datasets.load_dataset("parquet", data_files=str(tmp_path / "rows.parquet"), split="train")
    assert from_parquet.features == from_json.features and from_parquet.column_names == list(ROW_COLUMNS)
    assert from_parquet.to_list() == from_json.to_list() == read_jsonl(tmp_path / "rows.jsonl")
    # the failed record goes to the JSONL errors file next to it, named without the .parquet
    assert [e["id"] for e in read_jsonl(tmp_path / "rows.errors.jsonl")] == ["no-response"]


def _result(i: int, row_id: str, ids: list[int], prompt_len: int) -> SampleResult:
    row = {"id": row_id, "input_ids": ids, "loss_mask": [0] * prompt_len + [1] * (len(ids) - prompt_len), "prompt_len": prompt_len,
           "flags": "", "max_severity": "", "token_counts": ""}
    return SampleResult(i, i + 1, row_id, row)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=8), st.lists(st.integers(0, 163_839), min_size=1, max_size=40), st.integers(0, 39)), max_size=12))
def test_parquet_round_trips_any_rows(rows: list[tuple[str, list[int], int]]) -> None:
    pq = require("pyarrow.parquet")
    import tempfile

    results = [_result(i, rid, ids, min(p, len(ids) - 1)) for i, (rid, ids, p) in enumerate(rows)]
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "rows.parquet")
        summary = write_training_rows(iter(results), path)
        assert summary.rows == len(rows) and summary.errors == 0
        assert pq.read_table(path).to_pylist() == [r.row for r in results]


def test_parquet_row_groups_stay_small(tmp_path: Path) -> None:
    pq = require("pyarrow.parquet")
    results = [_result(i, f"r{i}", list(range(1000)), 10) for i in range(3000)]  # 3 M ids
    path = str(tmp_path / "rows.parquet")
    write_training_rows(iter(results), path)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_rows == 3000 and meta.num_row_groups >= 3  # written as it goes, not held whole


def test_a_lone_surrogate_id_is_a_failed_record_in_parquet(tmp_path: Path) -> None:
    pq = require("pyarrow.parquet")
    path = str(tmp_path / "rows.parquet")
    summary = write_training_rows(iter([_result(0, "ok", [1, 2], 1), _result(1, "bad\ud800", [1, 2], 1)]), path)
    assert (summary.rows, summary.errors) == (1, 1)
    assert pq.read_table(path).column("id").to_pylist() == ["ok"]
    assert read_jsonl(tmp_path / "rows.errors.jsonl")[0]["field"] == "id"


def test_an_interrupted_parquet_write_keeps_the_old_file(tmp_path: Path) -> None:
    require("pyarrow.parquet")
    path = tmp_path / "rows.parquet"
    path.write_bytes(b"old")

    def results() -> Iterator[SampleResult]:
        yield _result(0, "a", [1, 2], 1)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_training_rows(results(), str(path))
    assert path.read_bytes() == b"old" and sorted(p.name for p in tmp_path.iterdir()) == ["rows.parquet"]


def test_parquet_without_pyarrow_is_a_clear_error_before_any_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    data, out = _write(tmp_path / "in.jsonl", RECORDS[:2]), tmp_path / "rows.parquet"
    assert main(["build-samples", str(data), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pyarrow" in err and "--output" in err and "kimi-recon[parquet]" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]  # no rows file, no errors file
    with pytest.raises(OutputFileError, match="pyarrow"):
        write_training_rows(iter([]), str(out))


# -- export: the same limit for the rows of a generate log ----------------------------------------------


def _log(tmp_path: Path, tok: KimiTokenizer) -> tuple[Path, int]:
    """A generate log of two ok rows, the first of the record's full length; and that length."""
    r = RECORDS[0]
    sample = build_training_sample(r["messages"], r["turn"], r["tools"], thinking=r["thinking"], tokenizer=tok)
    ok = {"id": "p1", "status": "ok", "line": 1, "output_ids": sample.output_ids, "flags": [], "truncated": False, "sample": sample.to_dict(), "response": {}}
    short = build_training_sample([{"role": "user", "content": "hi"}], {"role": "assistant", "content": "Hello."}, thinking=False, tokenizer=tok)
    ok2 = {**ok, "id": "p2", "output_ids": short.output_ids, "sample": short.to_dict()}
    return _write(tmp_path / "log.jsonl", [ok, ok2]), len(sample.input_ids)


def test_export_flags_or_drops_rows_over_max_length(tmp_path: Path, tok: KimiTokenizer, capsys: pytest.CaptureFixture[str]) -> None:
    log, n = _log(tmp_path, tok)
    out = tmp_path / "train.jsonl"
    assert main(["export", str(log), "-o", str(out), "--max-length", str(n - 1)]) == 0
    rows = read_jsonl(out)
    assert [("over_max_length" in _codes(r)) for r in rows] == [True, False] and rows[0]["max_severity"] != ""
    assert f"1 record(s) longer than --max-length {n - 1:,} ids, the longest {n:,}" in capsys.readouterr().err
    assert main(["export", str(log), "-o", str(out), "--max-length", str(n - 1), "--drop-over-length"]) == 1
    assert [r["id"] for r in read_jsonl(out)] == ["p2"]
    assert [e["field"] for e in read_jsonl(tmp_path / "train.errors.jsonl")] == ["input_ids"]
    assert main(["export", str(log), "-o", str(out), "--drop-over-length"]) == 2


def test_the_loss_line_names_the_loss_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rows.jsonl"
    main(["build-samples", str(_write(tmp_path / "in.jsonl", RECORDS[:8])), "-o", str(out)])
    n = sum("reasoning_dropped" in _codes(row) for row in read_jsonl(out))  # (a loss flag: api.md's table)
    assert n > 0 and f"loss flag (reasoning_dropped {n})" in capsys.readouterr().err
