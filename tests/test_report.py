"""The audit report: the streaming breakdown behind it, the HTML page as a view of the JSON, the CLI, the bundled
sample and the pytest plugin's report on failure. (The page in a real browser: tests/test_report_browser.py.)"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from report_helpers import (
    CASES,
    CHAS,
    IM_END,
    at,
    crafted_records,
    figures_of,
    shown,
    write_jsonl,
)
from testdata import OFFICIAL, read_jsonl

from kimi_recon import load_tokenizer
from kimi_recon._batch.audit_breakdown import POSITION_BINS, BreakdownTally, position_bin
from kimi_recon._batch.report_html import render_html
from kimi_recon._batch.sample import SAMPLE_PATH, SAMPLE_SHA256, sample_path
from kimi_recon.cli import main
from kimi_recon.compare import KINDS, Comparison, TokenView
from kimi_recon.dataset import DatasetAudit, RecordError, RecordResult, audit_dataset
from kimi_recon.errors import BundledDataError, InvalidInputError
from kimi_recon.flags import Flag, FlagCode

ROOT = Path(__file__).resolve().parent.parent


def crafted_audit(**kwargs: Any) -> DatasetAudit:
    return audit_dataset(crafted_records(), load_tokenizer(), progress=False, **kwargs)


_CRAFTED: list[dict[str, Any]] = []


def crafted_audit_dict() -> dict[str, Any]:
    """A fresh copy of the crafted audit's JSON form (audited once per session)."""
    if not _CRAFTED:
        _CRAFTED.append(crafted_audit().to_dict())
    copied: dict[str, Any] = json.loads(json.dumps(_CRAFTED[0]))
    return copied


# -- the breakdown: histogram and worst records, in constant memory ---------------------------------------


def test_first_differences_are_binned_by_region_and_relative_position() -> None:
    report = crafted_audit()
    hist = report.to_dict()["first_diff_histogram"]
    assert hist["bins"] == POSITION_BINS == 10
    # the wrong <|im_end|> is the reference's last id: the end region, last bin; dropped reasoning differs at id 0
    assert hist["counts"]["end"] == [0] * 9 + [1]
    assert hist["counts"]["reasoning"] == [1] + [0] * 9
    assert hist["counts"]["content"] == hist["counts"]["tool_calls"] == [0] * 10
    assert hist["region_totals"] == {"reasoning": 1, "content": 0, "tool_calls": 0, "end": 1}


@given(st.integers(0, 10_000), st.integers(1, 10_000))
def test_position_bin_is_the_decile_of_the_relative_position(first: int, length: int) -> None:
    b = position_bin(first, length)
    assert 0 <= b < POSITION_BINS
    if first < length:
        assert b / POSITION_BINS <= first / length < (b + 1) / POSITION_BINS
    else:
        assert b == POSITION_BINS - 1  # at or past the reference's end


def _result(index: int, kind: str, size: int) -> RecordResult:
    window = (TokenView(0, 1, b"x", False),)
    cmp = Comparison(kind, (kind,), "d", 100, 100, 50, "content", window, window, size)  # type: ignore[arg-type]
    return RecordResult(index, index + 1, f"r{index}", cmp, "rendered")


def test_worst_records_take_each_kind_in_turn_most_serious_first_and_stay_bounded() -> None:
    tally = BreakdownTally(limit=4)
    sizes = {"text_mismatch": [5, 1, 9], "whitespace_drift": [100, 50], "special_token_mismatch": [2]}
    index = 0
    for kind, values in sizes.items():
        for size in values:
            tally.add(_result(index, kind, size))
            index += 1
    for i in range(2000):  # many more records: memory holds at most `limit` per kind
        tally.add(_result(index + i, "non_canonical_bpe", i % 7))
    assert all(len(h) <= 4 for h in tally.heaps.values())
    worst = tally.freeze().worst
    got = [(r.kind, r.comparison.diff_size) for r in worst if r.comparison]
    # round one: the top of each kind (text 9, special 2, whitespace 100, bpe 6); the limit stops it there
    assert got == [("text_mismatch", 9), ("special_token_mismatch", 2), ("whitespace_drift", 100), ("non_canonical_bpe", 6)]


def test_worst_limit_zero_keeps_no_records_and_a_negative_limit_is_refused() -> None:
    assert crafted_audit(worst=0).breakdown is not None
    assert crafted_audit(worst=0).to_dict()["worst"] == []
    with pytest.raises(InvalidInputError, match="worst"):
        crafted_audit(worst=-1)


def test_json_report_holds_the_exact_rate_of_all_records_and_lists_the_unreadable_one() -> None:
    d = crafted_audit().to_dict()
    assert (d["total"], d["counts"]["exact"], d["error_count"]) == (10, 7, 1)
    assert d["exact_rate_of_all"] == 0.7 and d["exact_rate"] == 7 / 9
    assert [(e["index"], e["field"]) for e in d["errors"]] == [(9, None)]
    worst = {r["id"]: r for r in d["worst"]}
    assert worst["wrong-im-end"]["kind"] == "special_token_mismatch"
    assert worst["no-reasoning"]["kind"] == "reasoning_missing"
    ref = worst["wrong-im-end"]["comparison"]["reference_window"]
    assert ref[-1]["id"] == CHAS and ref[-1]["text"] == "chas"


# -- the HTML page is a view of the JSON --------------------------------------------------------------------


def test_every_figure_on_the_page_equals_the_json_report() -> None:
    d = crafted_audit().to_dict()
    page = render_html(d)
    found = figures_of(page).figures
    for path, fmt, text in found:
        assert text == shown(at(d, path), fmt), (path, text)
    keys = {json.dumps(p) for p, _, _ in found}
    wanted: list[list[Any]] = [["total"], ["counts", "exact"], ["exact_rate_of_all"], ["error_count"], ["error_rate"], ["compared"],
              ["benign_count"], ["benign_rate"], ["exact_rate"]]
    wanted += [["counts", k] for k in KINDS] + [["rates", k] for k in KINDS]
    wanted += [["flag_counts", f] for f in d["flag_counts"]] + [["source_counts", s] for s in d["source_counts"]]
    wanted += [["first_diff_histogram", "counts", r, b] for r in d["first_diff_histogram"]["regions"] for b in range(10)]
    wanted += [["first_diff_histogram", "region_totals", r] for r in d["first_diff_histogram"]["regions"]]
    assert {json.dumps(w) for w in wanted} <= keys


def test_page_lists_worst_records_with_anchors_special_tokens_boxed_and_ids_beside() -> None:
    d = crafted_audit().to_dict()
    page = render_html(d)
    wrong = next(r for r in d["worst"] if r["id"] == "wrong-im-end")
    name = f'line-{wrong["line"]}' if wrong.get("line") is not None else f'record-{wrong["index"]}'
    anchor = f'id="{name}"'
    assert anchor in page and f'href="#{name}"' in page
    card = page[page.index(anchor) :]
    card = card[: card.index('<div class="record"', 1) if '<div class="record"' in card[1:] else len(card)]
    assert "special_token_mismatch" in card and "wrong-im-end" in card
    assert f'<span class="tokid">{CHAS}</span>' in card and f'<span class="tokid">{IM_END}</span>' in card
    assert re.search(r'<span class="sp" title="id 163586[^"]*special token">&lt;\|im_end\|&gt;</span>', card)
    assert 'title="id 163533 · bytes 63686173">chas</span>' in card  # the ordinary id is not boxed
    assert 'id="unreadable"' in page and "record 9" in page


HOSTILE = '</td></table><script>alert(1)</script><img src=x onerror=alert(2)>"\'&\u202e\ud800'


def test_hostile_record_ids_and_text_are_escaped() -> None:
    rows = crafted_records()
    rows[7]["id"] = HOSTILE
    rows[-1] = '{"id": "' + HOSTILE.replace('"', '\\"').replace("\ud800", "\\ud800") + '", "turn": 1}'
    turn = {"role": "assistant", "content": "<b>bold</b><script>x()</script>", "reasoning_content": ""}
    rows.append({"id": "<i>", "turn": turn, "thinking": False, "reference_ids": [27, 65, 29]})  # "<b>" vs the rest
    report = audit_dataset(rows, load_tokenizer(), progress=False)
    page = report.to_html()
    page.encode("utf-8")  # valid UTF-8 despite the lone surrogate
    parser = figures_of(page)
    assert [t for t, _ in parser.tags if t in ("script", "img", "b", "i", "iframe", "object")] == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "\\ud800" in page
    assert HOSTILE.replace("\ud800", "\\ud800") in "".join(parser.text)  # shown as text, whole


@given(st.text(max_size=200), st.dictionaries(st.text(min_size=1, max_size=30), st.integers(0, 10**9), max_size=5))
def test_any_record_id_and_flag_name_reads_back_as_text_and_every_figure_matches(rid: str, flags: dict[str, int]) -> None:
    d = crafted_audit_dict()
    d["flag_counts"] = flags
    d["worst"][0]["id"] = rid
    page = render_html(d)
    parsed = figures_of(page)
    text = "".join(parsed.text)
    shown_id = rid.encode("utf-8", "backslashreplace").decode("utf-8")
    assert (shown_id if len(shown_id) <= 120 else shown_id[:120]) in text
    assert all(f"{name}" in text for name in flags if len(name.encode("utf-8", "backslashreplace").decode()) == len(name))
    for path, fmt, value in parsed.figures:
        assert value == shown(at(d, path), fmt)
    assert [t for t, _ in parsed.tags if t in ("script", "img", "iframe")] == []


def test_an_empty_audit_says_nothing_was_compared_and_an_all_exact_one_says_so() -> None:
    assert "No record was compared." in audit_dataset([], load_tokenizer(), progress=False).to_html()
    exact_only = audit_dataset(crafted_records()[:3], load_tokenizer(), progress=False).to_html()
    assert "Every compared record is exact." in exact_only and 'class="record"' not in exact_only


def test_page_makes_no_network_request_and_needs_no_script() -> None:
    page = crafted_audit().to_html()
    tags = figures_of(page).tags
    assert not [t for t, _ in tags if t in ("script", "link", "img", "iframe", "object", "embed", "base")]
    for _, attrs in tags:
        for name in ("src", "href", "action", "srcset", "xlink:href", "poster"):
            value = attrs.get(name)
            assert value is None or value.startswith("#"), (name, value)
    assert "url(" not in page and "@import" not in page and "http" not in page.lower().replace("http-equiv", "")
    csp = next(a["content"] for t, a in tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert csp is not None and "default-src 'none'" in csp and "script-src" not in csp


def test_page_for_a_million_record_audit_stays_under_5_mb() -> None:
    """The page's size depends on the bounded parts (errors kept, worst records), not on the number of records:
    a synthetic tally of 1M records with every bounded part full of the longest strings it can hold."""
    long = "\u00e9" * 50_000
    tok = TokenView(0, 5, ("\u4e2d" * 60).encode(), False)
    window = tuple(TokenView(i, 5, tok.data, i % 2 == 0) for i in range(9))
    worst = tuple(
        RecordResult(i, i + 1, long, Comparison("text_mismatch", KINDS[1:], long, 10**6, 10**6, 500_000, "content", window, window, 10**6), "rendered", (Flag(FlagCode.TRUNCATED, long, long),) * 20)
        for i in range(20)
    )
    errors = tuple(RecordError(i, i + 1, long, long, long, "InvalidRecordError") for i in range(100))
    counts: dict[str, int] = {str(k): 0 for k in KINDS}
    counts |= {"exact": 900_000, "text_mismatch": 99_900}
    from kimi_recon._batch.audit_breakdown import REGIONS, AuditBreakdown

    hist = {r: tuple([10_000] * POSITION_BINS) for r in REGIONS}
    report = DatasetAudit(10**6, counts, 100, errors, {}, {"truncated": 10**6}, {"rendered": 10**6}, "kimi-k2.5", True,
                          breakdown=AuditBreakdown(hist, worst, 20))
    size = len(report.to_html().encode("utf-8"))
    assert size < 5 * 1024 * 1024, size
    assert size < 1024 * 1024  # in fact far less: long strings are clipped on the page


# -- the command line -------------------------------------------------------------------------------------


def test_cli_audit_writes_the_html_and_json_reports_with_the_same_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", crafted_records())
    html_path, json_path = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["audit", str(src), "--html", str(html_path), "--json", str(json_path), "--html-examples", "1", "--allow-errors"]) == 0
    d = json.loads(json_path.read_text(encoding="utf-8"))
    assert d["worst_limit"] == 1 and [r["id"] for r in d["worst"]] == ["wrong-im-end"]
    page = html_path.read_text(encoding="utf-8")
    for path, fmt, text in figures_of(page).figures:
        assert text == shown(at(d, path), fmt)
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind
    assert f"wrote {html_path}" in capsys.readouterr().err


def test_cli_html_to_stdout_carries_the_page_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", crafted_records())
    assert main(["audit", str(src), "--html", "-", "--allow-errors"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("<!DOCTYPE html>") and out.rstrip().endswith("</html>")
    assert "kimi-recon audit: 10 records" in err and "kimi-recon audit" not in out.split("<title>")[0]


def test_cli_refuses_a_report_that_would_overwrite_the_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", crafted_records())
    before = src.read_bytes()
    assert main(["audit", str(src), "--html", str(src)]) == 2
    assert main(["audit", str(src), "--html", str(tmp_path / "a"), "--json", str(tmp_path / "a")]) == 2
    assert main(["audit", str(src), "--html", "-", "--json", "-"]) == 2
    assert src.read_bytes() == before and not (tmp_path / "a").exists()
    err = capsys.readouterr().err
    assert "is also the input" in err and "is also the --json report's file" in err and "field '--html'" in err


def test_cli_writes_reports_for_records_whose_ids_hold_lone_surrogates(tmp_path: Path) -> None:
    rows = crafted_records()
    rows[7] = json.dumps(dict(rows[7], id="x")).replace('"id": "x"', '"id": "bad\\ud800<b>"')
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    html_path, json_path = tmp_path / "r.html", tmp_path / "r.json"
    assert main(["audit", str(src), "--html", str(html_path), "--json", str(json_path), "--allow-errors"]) == 0
    ids = [r["id"] for r in json.loads(json_path.read_text(encoding="utf-8"))["worst"]]
    assert "bad\ud800<b>" in ids  # read back as the same string
    assert "bad\\ud800&lt;b&gt;" in html_path.read_text(encoding="utf-8")


def test_cli_needs_an_input_or_the_sample_but_not_both(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit"]) == 2
    assert main(["audit", "x.jsonl", "--sample"]) == 2
    assert main(["audit", "--sample", "--html-examples", "-1"]) == 2
    err = capsys.readouterr().err
    assert "field 'input'" in err and "give an input file or --sample, not both" in err
    assert "field '--html-examples'" in err


# -- the bundled sample -------------------------------------------------------------------------------------


def _load_script() -> Any:
    spec = importlib.util.spec_from_file_location("make_dev_sample", ROOT / "scripts" / "make_dev_sample.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundled_sample_is_what_the_script_builds_from_the_official_dev_turns(tmp_path: Path) -> None:
    out = tmp_path / "sample.jsonl"
    _load_script().main([str(OFFICIAL / "turns.jsonl"), str(out)])
    assert out.read_bytes() == SAMPLE_PATH.read_bytes()
    assert hashlib.sha256(out.read_bytes()).hexdigest() == SAMPLE_SHA256


def test_bundled_sample_holds_official_turns_a_tool_call_a_truncation_and_a_wrong_im_end() -> None:
    official = read_jsonl(OFFICIAL / "turns.jsonl")
    lines = sample_path().read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines[:-1]]
    assert len(records) >= 30
    by_id = {r["id"]: r for r in records}
    untouched = [r for r in records if re.fullmatch(r"turns-\d{3}", r["id"])]
    for r in untouched:
        row = official[int(r["id"][6:])]
        # a thinking-off answer carries no reasoning (the official conversation keeps one its template never renders)
        turn = row["turn"] if row["thinking"] else {k: v for k, v in row["turn"].items() if k != "reasoning_content"}
        assert r["reference_ids"] == row["output_ids"] and r["response"]["choices"][0]["message"] == turn
        assert r["response"]["usage"] == {"completion_tokens": len(row["output_ids"])} and r["server"] == "none"
    assert any(not r["thinking"] for r in untouched)
    assert any(r["response"]["choices"][0]["message"].get("tool_calls") for r in untouched)
    cut = by_id["turns-032-truncated"]
    assert cut["response"]["choices"][0]["finish_reason"] == "length"
    assert official[32]["output_ids"][: len(cut["reference_ids"])] == cut["reference_ids"] and IM_END not in cut["reference_ids"]
    wrong = by_id["turns-033-wrong-im-end"]["reference_ids"]
    assert wrong == [CHAS if t == IM_END else t for t in official[33]["output_ids"]] and wrong[-1] == CHAS
    with pytest.raises(json.JSONDecodeError):
        json.loads(lines[-1])  # the one unreadable line


def test_sample_audit_finds_exactly_the_planted_problems() -> None:
    report = audit_dataset(str(sample_path()), progress=False)
    assert report.error_count == 1 and report.exact_count == report.total - 4
    kinds = {r.record_id: r.kind for r in report.breakdown.worst} if report.breakdown else {}
    assert kinds == {
        "turns-033-wrong-im-end": "special_token_mismatch",
        "turns-034-reasoning-dropped": "reasoning_missing",
        "turns-038-newlines-normalized": "whitespace_drift",
    }
    assert report.flag_counts.get("truncated") == 1
    # the first screen tells the truth: the planted faults, nothing flagged on the untouched official turns
    assert report.severity_counts == {"loss": 1, "risk": 1, "unlikely": 1, "none": 33}
    assert report.flag_counts == {"completion_tokens_mismatch": 1, "truncated": 1, "special_text_in_field": 1}


def test_a_changed_sample_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kimi_recon._batch.sample as sample

    copy = tmp_path / "s.jsonl"
    copy.write_bytes(SAMPLE_PATH.read_bytes().replace(b"163586", b"163585", 1))
    monkeypatch.setattr(sample, "SAMPLE_PATH", copy)
    with pytest.raises(BundledDataError, match="sha256"):
        sample.sample_path()


def test_readme_main_job_audits_the_sample_and_writes_the_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```bash\n(.*?)\n```", readme, re.DOTALL)
    assert len(commands) == 2 and "pip install -e . " in commands[0] and "[dev]" not in commands[0]
    job = commands[0].split("&& kimi-recon ", 1)[1].split()
    monkeypatch.chdir(tmp_path)
    assert main(job) == 0
    out = capsys.readouterr().out
    assert "kimi-recon audit: 37 records" in out and "exact 33/36" in out
    html_arg = job[job.index("--html") + 1]
    assert "turns-033-wrong-im-end" in (tmp_path / html_arg).read_text(encoding="utf-8")


# -- the pytest plugin -------------------------------------------------------------------------------------


def test_failing_roundtrip_fixture_prints_where_the_report_is(pytester: pytest.Pytester) -> None:
    bad = write_jsonl(pytester.path / "bad.jsonl", crafted_records())
    pytester.makepyfile(
        f"""
        def test_dataset(kimi_roundtrip_audit):
            kimi_roundtrip_audit({str(bad)!r}, min_exact=0.9)
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    match = re.search(r"report: (\S+report\.html) \(JSON: (\S+report\.json)\)", out)
    assert match, out
    page, data = Path(match.group(1)).read_text(encoding="utf-8"), json.loads(Path(match.group(2)).read_text(encoding="utf-8"))
    assert data["counts"]["exact"] == 7 and data["total"] == 10
    assert all(text == shown(at(data, p), f) for p, f, text in figures_of(page).figures)
    assert "wrong-im-end" in page
    assert CASES  # the crafted audit is built from the official dev turns


def test_the_reports_say_what_was_audited_by_which_version_when_and_the_verdict(tmp_path: Path) -> None:
    """The HTML header said ``profile kimi-k2.5`` for a file of K3 records and named no input, version, date or
    verdict (issue 33): both reports carry ``run`` and the page shows it first, with the profiles used."""
    from importlib.metadata import version

    from kimi_recon.cli import main

    k3 = {"id": "k3", "response": {"model": "moonshotai/kimi-k3", "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]},
          "reference_ids": load_tokenizer(profile="kimi-k3").encode("<|open|>response<|sep|>Hi<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>")}
    lines = SAMPLE_PATH.read_text(encoding="utf-8").splitlines()[:3] + [json.dumps(k3)]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    assert main(["audit", str(path), "--json", str(json_path), "--html", str(html_path), "--min-exact", "0.99", "-q"]) == 1
    run = json.loads(json_path.read_text(encoding="utf-8"))["run"]
    assert run["input"] == str(path) and run["kimi_recon_version"] == version("kimi-recon") and run["written_at"].endswith("Z")
    assert run["passed"] is False and run["thresholds"]["--min-exact"] == 0.99 and "--min-exact" in run["failures"][0]
    page = html_path.read_text(encoding="utf-8")
    assert "<strong>FAIL</strong>" in page and str(path) in page and version("kimi-recon") in page
    assert "<code>kimi-k2.5</code> 3" in page and "<code>kimi-k3</code> 1" in page
