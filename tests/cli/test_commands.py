"""The kimi-recon command line on small files, and the pytest plugin in a user's own suite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon.cli import main

CASES = read_jsonl(OFFICIAL / "turns.jsonl")[:6]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_reconstruct_writes_one_row_per_record_errors_included(tmp_path: Path) -> None:
    rows: list[Any] = [{"id": i, "turn": c["turn"], "thinking": c["thinking"]} for i, c in enumerate(CASES)]
    rows.insert(3, "{not json")
    out = tmp_path / "out.jsonl"
    assert main(["reconstruct", str(write_jsonl(tmp_path / "in.jsonl", rows)), "-o", str(out)]) == 1
    got = read_jsonl(out)
    assert len(got) == len(rows)
    assert got[3]["error"] is not None and got[3]["line"] == 4
    good = [g for g in got if g["error"] is None]
    assert [g["output_ids"] for g in good] == [c["output_ids"] for c in CASES]


def test_audit_passes_and_fails_on_min_exact(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": i, "turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"]} for i, c in enumerate(CASES)]
    wrong = dict(rows[0], reference_ids=[163533 if t == 163586 else t for t in CASES[0]["output_ids"]])
    path = write_jsonl(tmp_path / "in.jsonl", rows + [wrong])
    assert main(["audit", str(path), "--min-exact", "0.8", "--json", str(tmp_path / "r.json")]) == 0
    assert main(["audit", str(path), "--min-exact", "0.9"]) == 1
    out = capsys.readouterr()
    assert "special_token_mismatch" in out.out and "below --min-exact 0.9" in out.err
    assert json.loads((tmp_path / "r.json").read_text())["total"] == 7


def test_missing_input_file_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err


def test_pytest_plugin_fixtures_in_a_user_suite(pytester: pytest.Pytester) -> None:
    good = write_jsonl(pytester.path / "good.jsonl", [{"turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"]} for c in CASES])
    bad = write_jsonl(pytester.path / "bad.jsonl", [{"turn": CASES[0]["turn"], "thinking": CASES[0]["thinking"], "reference_ids": CASES[0]["output_ids"][:-1]}])
    pytester.makepyfile(
        f"""
        def test_good(kimi_roundtrip_audit):
            kimi_roundtrip_audit({str(good)!r})

        def test_bad(kimi_roundtrip_audit):
            kimi_roundtrip_audit({str(bad)!r})

        def test_tokens(kimi_special_tokens_audit):
            kimi_special_tokens_audit(constants={{"IM_END_TOKEN_ID": 163586}})

        def test_wrong_constant(kimi_special_tokens_audit):
            kimi_special_tokens_audit(constants={{"IM_END_TOKEN_ID": 163533}})
        """
    )
    result = pytester.runpytest_subprocess()  # the plugin loads through its entry point, as for a user
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(["*exact rate 0.0000 < 1.0*", "*decodes to 'chas'*"])
