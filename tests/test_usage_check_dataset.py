"""The usage check on records read by ``audit``, ``reconstruct`` and ``build-samples``.

True counts come from the golden turns (Moonshot's official prompt and output ids); each record's
``usage`` is right, off by the stop token, or off by a few tokens.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from testdata import OFFICIAL, read_jsonl

from kimi_recon.dataset import audit_dataset, audit_record

#: (provider, completion shift, prompt shift, expected flags)
CASES = [
    ("Exact Inc", 0, 0, []),
    ("NoStop AI", -1, 0, []),
    ("Loose Ltd", 2, 0, ["completion_tokens_mismatch"]),
    ("Injector", 0, 12, ["prompt_tokens_mismatch"]),
]


def records(n: int) -> list[tuple[dict[str, Any], list[str], int, int]]:
    """(record, expected usage flags, completion shift, prompt shift) for the first ``n`` golden turns."""
    out = []
    for i, golden in enumerate(read_jsonl(OFFICIAL / "turns.jsonl")[:n]):
        provider, c_shift, p_shift, flags = CASES[i % len(CASES)]
        record = {
            "id": f"r{i}",
            "messages": golden["messages"],
            "tools": golden["tools"],
            "thinking": golden["thinking"],
            "response": {"provider": provider, "choices": [{"message": golden["turn"], "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": len(golden["prompt_ids"]) + p_shift, "completion_tokens": len(golden["output_ids"]) + c_shift}},
            "reference_ids": golden["output_ids"],
        }
        out.append((record, flags, c_shift, p_shift))
    return out


def test_audit_checks_usage_of_every_record_and_reports_per_provider(tmp_path: Path) -> None:
    cases = records(16)
    for record, flags, c_shift, p_shift in cases:
        result = audit_record(record)
        assert result.error is None and result.comparison is not None and result.comparison.exact, result
        assert [f for f in result.flag_codes if f.endswith("_tokens_mismatch")] == flags, record["id"]
        assert result.token_counts is not None and result.provider == record["response"]["provider"]
        assert result.token_counts.completion is not None and result.token_counts.completion.delta == c_shift
        assert result.token_counts.prompt is not None and result.token_counts.prompt.delta == p_shift
        assert result.to_dict()["token_counts"]["completion_tokens"]["reported"] == len(record["reference_ids"]) + c_shift

    path = tmp_path / "records.jsonl"
    no_usage = {"id": "no-usage", **{k: v for k, v in cases[0][0].items() if k != "response"}, "turn": cases[0][0]["response"]["choices"][0]["message"]}
    path.write_text("".join(json.dumps(r) + "\n" for r, *_ in cases) + json.dumps(no_usage) + "\n")
    report = audit_dataset(path, workers=2, progress=False).to_dict()["token_counts"]
    assert report["rows_checked"] == 16 and report["rows_unchecked"] == 1
    providers = report["providers"]
    assert {name: (p["rows"], p["agree"]) for name, p in providers.items()} == {
        "Exact Inc": (4, 4), "NoStop AI": (4, 4), "Loose Ltd": (4, 0), "Injector": (4, 0)
    }
    assert providers["NoStop AI"]["fields"]["completion_tokens"]["conventions"] == {"without_stop": 4}
    assert providers["Injector"]["fields"]["prompt_tokens"]["top_deltas"] == [{"delta": 12, "rows": 4}]


def test_prompt_length_comes_from_the_official_prompt_ids_when_rendered() -> None:
    record, *_ = records(1)[0]
    golden = read_jsonl(OFFICIAL / "turns.jsonl")[0]
    counts = audit_record(record).token_counts
    assert counts is not None and counts.prompt is not None and counts.prompt.rebuilt == len(golden["prompt_ids"])
    # without the messages, a record's own prompt_ids give the length
    slim = {k: v for k, v in record.items() if k not in ("messages", "tools")} | {"prompt_ids": golden["prompt_ids"][:-3]}
    counts = audit_record(slim).token_counts
    assert counts is not None and counts.prompt is not None and counts.prompt.delta == 3
    # with neither, the prompt figure is not checked (the output figure still is)
    bare = {k: v for k, v in record.items() if k not in ("messages", "tools")}
    counts = audit_record(bare).token_counts
    assert counts is not None and counts.prompt is None and counts.completion is not None


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kimi_recon.cli", *args], check=False, capture_output=True, text=True, timeout=300)


def test_reconstruct_and_build_samples_rows_carry_the_usage_check(tmp_path: Path) -> None:
    cases = records(4)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r, *_ in cases))
    for command in ("reconstruct", "build-samples"):
        out = tmp_path / f"{command}.jsonl"
        done = run_cli(command, str(path), "-o", str(out))
        assert done.returncode == 0, done.stderr
        rows = read_jsonl(out)
        assert len(rows) == len(cases)
        for written, (_record, flags, c_shift, p_shift) in zip(rows, cases, strict=True):
            if command == "build-samples":  # training rows keep one type per column: JSON text, comma-separated codes
                row = written | {"token_counts": json.loads(written["token_counts"]), "flags": written["flags"].split(",")}
            else:  # reconstruct rows write flag objects; a usage mismatch carries its delta
                mismatches = [f for f in written["flags"] if f["code"] == "completion_tokens_mismatch"]
                assert [f["delta"] for f in mismatches] == ([c_shift] if mismatches else []), written["id"]
                row = written | {"flags": [f["code"] for f in written["flags"]]}
            assert row["token_counts"]["completion_tokens"]["delta"] == c_shift, (command, row["id"])
            assert [f for f in row["flags"] if f.endswith("_tokens_mismatch")] == flags, (command, row["id"])
            if command == "build-samples":
                assert row["token_counts"]["prompt_tokens"]["delta"] == p_shift
                assert row["prompt_len"] == row["token_counts"]["prompt_tokens"]["rebuilt"]


def test_audit_summary_and_json_report_the_usage_check(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r, *_ in records(4)))
    done = run_cli("audit", str(path), "--json", str(tmp_path / "report.json"))
    assert done.returncode == 0, done.stderr
    assert "Loose Ltd: 0/1 rows agree (0.0%)" in done.stdout
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["token_counts"]["providers"]["Exact Inc"]["agree_rate"] == 1.0


def test_k3_records_are_checked_with_k3s_prompt_renderer_and_stop_token() -> None:
    goldens = read_jsonl(OFFICIAL.parent / "official-k3-dev" / "turns.jsonl")[:8]
    for i, golden in enumerate(goldens):
        assert golden["output_ids"][-1] == 163586  # <|end_of_msg|> in K3
        shift = (-1, 0, 4, 3)[i % 4]  # stop token not counted, exact, off by four, the answer's opener counted
        record = {
            "id": f"k3-{i}", "profile": "kimi-k3", "messages": golden["messages"], "tools": golden["tools"],
            "thinking": golden["thinking"], "thinking_effort": golden["thinking_effort"], "tool_choice": golden["tool_choice"],
            "response": {"choices": [{"message": golden["turn"], "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": len(golden["prompt_ids"]), "completion_tokens": len(golden["output_ids"]) + shift}},
            "reference_ids": golden["output_ids"],
        }
        result = audit_record(record)
        assert result.error is None and result.token_counts is not None, result
        assert result.token_counts.prompt is not None and result.token_counts.prompt.rebuilt == len(golden["prompt_ids"])
        assert result.token_counts.prompt.agrees
        assert [f for f in result.flag_codes if f.endswith("_mismatch")] == (["completion_tokens_mismatch"] if shift == 4 else [])


def test_html_report_shows_the_usage_check_figures_of_the_json() -> None:
    from report_helpers import at, figures_of, shown

    from kimi_recon._batch.report_html import render_html

    d = json.loads(json.dumps(audit_dataset([r for r, *_ in records(8)], progress=False).to_dict()))
    page = render_html(d)
    keys = set()
    for path, fmt, text in figures_of(page).figures:
        assert text == shown(at(d, path), fmt), path
        keys.add(json.dumps(path))
    base = ["token_counts", "providers"]
    for name in ("Exact Inc", "NoStop AI", "Loose Ltd", "Injector"):
        assert {json.dumps([*base, name, k]) for k in ("rows", "agree", "agree_rate")} <= keys
    assert json.dumps([*base, "NoStop AI", "fields", "completion_tokens", "conventions", "without_stop"]) in keys
    assert json.dumps([*base, "Injector", "fields", "prompt_tokens", "top_deltas", 0, "rows"]) in keys
    assert 'id="usage"' in page and "+12 ×" in page
    without = dict(d, token_counts={"rows_checked": 0, "rows_unchecked": 8, "providers": {}})
    assert 'id="usage"' not in render_html(without)


def test_a_record_whose_prompt_cannot_be_rendered_keeps_its_other_figures_checked() -> None:
    record, *_ = records(1)[0]
    record = dict(record, messages=[{"content": "no role"}])
    result = audit_record(record)
    assert result.error is None and "prompt_tokens_unchecked" in result.flag_codes
    (unchecked,) = [f for f in result.flags if f.code == "prompt_tokens_unchecked"]
    assert unchecked.field == "usage.prompt_tokens" and "could not be rendered" in unchecked.message
    assert result.token_counts is not None and result.token_counts.prompt is None
    assert result.token_counts.completion is not None and result.token_counts.completion.agrees
