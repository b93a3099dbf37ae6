"""Outputs named as the inputs are read (issue 33, a new user's trial): ``-o rows.jsonl.gz`` wrote plain text
under a ``.gz`` name (``zcat`` and ``datasets.load_dataset("json")`` then fail on it) and put the errors in
``rows.jsonl.gz.errors.jsonl``; reconstruct rows did not say which chat format rebuilt them."""

from __future__ import annotations

import gzip
import json
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest
from extras import require
from testdata import OFFICIAL, read_jsonl

from kimi_recon import load_tokenizer
from kimi_recon.cli import main

SAMPLE = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
CASES = read_jsonl(OFFICIAL / "turns.jsonl")
RECORDS = [{"id": f"c{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]} for i, c in enumerate(CASES[:6])]


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _gunzip_lines(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_reconstruct_to_a_gz_name_writes_gzip(tmp_path: Path) -> None:
    plain, packed = tmp_path / "ids.jsonl", tmp_path / "ids.jsonl.gz"
    main(["reconstruct", SAMPLE, "-o", str(plain), "-q"])
    main(["reconstruct", SAMPLE, "-o", str(packed), "-q"])
    assert packed.read_bytes()[:2] == b"\x1f\x8b"
    assert _gunzip_lines(packed) == read_jsonl(plain)
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")]


def test_build_samples_to_a_gz_name_loads_in_datasets_and_keeps_its_errors_beside_it(tmp_path: Path) -> None:
    datasets = require("datasets")
    data = _write(tmp_path / "in.jsonl", [*RECORDS, {"id": "no-response", "messages": RECORDS[0]["messages"]}])
    assert main(["build-samples", str(data), "-o", str(tmp_path / "rows.jsonl"), "-q"]) == 1
    assert main(["build-samples", str(data), "-o", str(tmp_path / "rows.jsonl.gz"), "-q"]) == 1
    table = datasets.load_dataset("json", data_files=str(tmp_path / "rows.jsonl.gz"), split="train")
    assert table.to_list() == read_jsonl(tmp_path / "rows.jsonl")
    assert [e["id"] for e in read_jsonl(tmp_path / "rows.errors.jsonl")] == ["no-response"]
    assert not (tmp_path / "rows.jsonl.gz.errors.jsonl").exists()


def test_audit_reports_and_records_to_gz_names(tmp_path: Path) -> None:
    records, report = tmp_path / "v.jsonl.gz", tmp_path / "r.json.gz"
    assert main(["audit", "--sample", "--records", str(records), "--json", str(report), "-q"]) == 0
    assert len(_gunzip_lines(records)) == 37
    with gzip.open(report, "rt", encoding="utf-8") as f:
        assert json.load(f)["total"] == 37


def test_a_zst_name_without_zstandard_stops_before_any_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)
    out = tmp_path / "ids.jsonl.zst"
    out.write_bytes(b"old")
    assert main(["reconstruct", SAMPLE, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "zstandard" in err and "kimi-recon[zstd]" in err
    assert out.read_bytes() == b"old"


def test_a_zst_name_writes_zstandard(tmp_path: Path) -> None:
    zstandard = require("zstandard")
    out = tmp_path / "ids.jsonl.zst"
    main(["reconstruct", SAMPLE, "-o", str(out), "-q"])
    text = zstandard.ZstdDecompressor().stream_reader(out.read_bytes()).read().decode("utf-8")
    assert len(text.splitlines()) == 37
    main(["reconstruct", str(out), "-o", str(tmp_path / "again.jsonl"), "-q"])  # and it reads back as an input
    assert len(read_jsonl(tmp_path / "again.jsonl")) == 37


def test_reconstruct_rows_name_the_chat_format_they_were_rebuilt_in(tmp_path: Path) -> None:
    k3 = {"id": "k3", "response": {"model": "moonshotai/kimi-k3-20260115", "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}}
    k25 = {"id": "k25", "thinking": False, "response": {"model": "moonshotai/kimi-k2.5", "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}}
    out = tmp_path / "ids.jsonl"
    main(["reconstruct", str(_write(tmp_path / "in.jsonl", [k3, k25, {"id": "bad"}])), "-o", str(out), "-q"])
    rows = read_jsonl(out)
    assert [(r["id"], r["profile"]) for r in rows] == [("k3", "kimi-k3"), ("k25", "kimi-k2.5"), ("bad", None)]
    # K3's own markers, not K2.5's <|im_end|>: the row's profile is the one its ids are in
    k3_tok = load_tokenizer(profile="kimi-k3")
    assert k3_tok.decode(rows[0]["output_ids"][-1:]) == "<|end_of_msg|>" and rows[1]["output_ids"][-1] == 163586


def test_a_parquet_name_for_json_text_is_refused_before_any_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``reconstruct -o ids.parquet`` wrote JSON Lines under a Parquet name; only training rows are Parquet."""
    for command in (["reconstruct", SAMPLE, "-o", str(tmp_path / "ids.parquet")], ["audit", SAMPLE, "--json", str(tmp_path / "r.parquet")],
                    ["audit", SAMPLE, "--records", str(tmp_path / "v.parquet")]):
        assert main(command) == 2
        out, err = capsys.readouterr()
        assert "Parquet" in err and command[-2] in err and out == ""
    data = _write(tmp_path / "in.jsonl", RECORDS[:1])
    assert main(["build-samples", str(data), "-o", str(tmp_path / "rows.jsonl"), "--errors", str(tmp_path / "e.parquet")]) == 2
    assert "--errors" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_a_zst_report_name_without_zstandard_stops_before_the_audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "zstandard", None)
    assert main(["audit", "--sample", "--json", str(tmp_path / "r.json.zst")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--json" in err and "zstandard" in err  # no summary: nothing was audited
    assert main(["reconstruct", SAMPLE, "-o", str(tmp_path / "ids.jsonl.zst")]) == 2
    assert "field '--output'" in capsys.readouterr().err
