"""The command line as a new user meets it: exit status that says whether anything was verified, help written
for users, quiet and progress options on every command, and nothing from the data driving the terminal."""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon._batch.pool import _progress_bar
from kimi_recon.cli import build_parser, main

CASES = read_jsonl(OFFICIAL / "turns.jsonl")[:6]
COMMANDS = ("audit", "reconstruct", "audit-tokens", "export-tokenizer", "build-samples", "export", "generate")


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def audit_rows() -> list[dict[str, Any]]:
    return [{"id": i, "turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"]} for i, c in enumerate(CASES)]


def with_one_unreadable(tmp_path: Path) -> Path:
    rows: list[Any] = audit_rows()
    rows.insert(2, "{not json")
    return write_jsonl(tmp_path / "d.jsonl", rows)


# -- audit's exit status ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows",
    [
        [],  # an empty file
        [{"id": 1, "answer": CASES[0]["turn"], "ids": CASES[0]["output_ids"]}],  # wrong field names
        [{"id": 1, "choices": [{"message": {"role": "assistant", "content": "hi"}}]}],  # raw responses, no reference ids
    ],
    ids=["empty", "wrong-fields", "raw-responses"],
)
def test_audit_fails_when_nothing_was_compared(tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[Any]) -> None:
    """Failed on the old code: `compared 0` and exit 0."""
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    assert main(["audit", str(path), "-q"]) == 1
    assert "FAIL: nothing was compared" in capsys.readouterr().err
    assert main(["audit", str(path), "-q", "--allow-errors"]) == 1  # still nothing verified


def test_audit_fails_on_an_unreadable_record_unless_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: exit 0 with one record unreadable."""
    path = with_one_unreadable(tmp_path)
    assert main(["audit", str(path), "-q"]) == 1
    assert "1 record could not be read" in capsys.readouterr().err
    assert main(["audit", str(path), "-q", "--allow-errors"]) == 0
    assert main(["audit", str(path), "-q", "--max-errors", "1"]) == 0
    assert main(["audit", str(path), "-q", "--max-errors", "0"]) == 1


def test_allow_errors_and_max_errors_cannot_be_combined(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["audit", str(with_one_unreadable(tmp_path)), "--allow-errors", "--max-errors", "3"])
    assert exit_info.value.code == 2


def test_min_benign_counts_exact_and_benign_records_out_of_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 6 exact + 1 special-token mismatch + 1 unreadable: exact or benign is 6 of 8 = 0.75
    rows: list[Any] = audit_rows()
    rows.append(dict(rows[0], id="wrong", reference_ids=[163533 if t == 163586 else t for t in CASES[0]["output_ids"]]))
    rows.append("{not json")
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    assert main(["audit", str(path), "-q", "--allow-errors", "--min-benign", "0.75"]) == 0
    assert main(["audit", str(path), "-q", "--allow-errors", "--min-benign", "0.76"]) == 1
    assert "exact + benign rate 0.7500 (6 of 8 records, 1 unreadable) is below --min-benign 0.76" in capsys.readouterr().err


def test_the_bundled_sample_passes_although_it_holds_an_unreadable_line_on_purpose(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--sample", "-q"]) == 0
    assert main(["audit", "--sample", "-q", "--max-errors", "0"]) == 1


def test_examples_caps_the_listed_errors_and_examples(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: no --examples; every kept error (up to 100) was listed."""
    rows: list[Any] = audit_rows() + [f"not json {i}" for i in range(30)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    main(["audit", str(path), "--examples", "2"])
    out = capsys.readouterr().out
    listed = [line for line in out.splitlines() if re.match(r"\s+line \d+: is not JSON", line)]
    assert len(listed) == 2 and "… and 28 more" in out
    main(["audit", str(path), "--examples", "0"])
    assert "… and 30 more" in capsys.readouterr().out


# -- help, quiet, progress ------------------------------------------------------------------------------


def subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_help_is_written_for_users(capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: the top help said "Heavy modules are imported inside each command", generate's ":func:`register`"."""
    with pytest.raises(SystemExit):
        main(["--help"])
    texts = [capsys.readouterr().out] + [p.format_help() for p in subparsers().values()]
    for text in texts:
        assert "Heavy modules" not in text and ":func:" not in text and "``" not in text


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_gives_an_example(command: str) -> None:
    """Failed on the old code: audit, reconstruct, audit-tokens, export-tokenizer had no example."""
    text = subparsers()[command].format_help()
    assert "Example:" in text and f"kimi-recon {command} " in text


@pytest.mark.parametrize(("command", "fields"), [
    ("audit", ['"response"', '"reference_ids"']),
    ("reconstruct", ['"response"', '"output_ids"']),
    ("build-samples", ['"messages"', '"response"']),
    ("generate", ['"messages"', '"tools"']),
])  # fmt: skip
def test_commands_that_read_records_describe_the_record_format(command: str, fields: list[str]) -> None:
    text = subparsers()[command].format_help()
    assert all(field in text for field in fields)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_no_progress_and_quiet(command: str) -> None:
    """Failed on the old code: --no-progress existed only on generate, --quiet nowhere."""
    options = {o for a in subparsers()[command]._actions for o in a.option_strings}
    assert {"--no-progress", "--quiet", "-q"} <= options


def test_quiet_prints_nothing_on_success(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", audit_rows())
    assert main(["audit", str(path), "-q", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""
    assert main(["reconstruct", str(path), "-q", "-o", str(tmp_path / "o.jsonl")]) == 0
    out = capsys.readouterr()
    # one row of these carries a loss flag, which is said even with -q (as build-samples does): nothing else is
    assert out.out == "" and "loss 1" in out.err and "1 of 6 rows carry a loss flag" in out.err and len(out.err.splitlines()) == 2


def test_a_progress_bar_over_a_file_has_its_record_count_as_total(tmp_path: Path) -> None:
    """Failed on the old code: total None (no ETA) for a path."""
    rows: list[Any] = audit_rows()
    rows.insert(1, "")  # blank lines are not records
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    with _progress_bar(str(path), True, "audit") as bar:
        assert bar.total == len(CASES)


def test_tqdm_disable_turns_every_bar_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Failed on the old code: TQDM_DISABLE was ignored when the bar was asked for."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    with _progress_bar([1, 2], True, "audit") as bar:
        assert bar.disable
    monkeypatch.setenv("TQDM_DISABLE", "0")
    with _progress_bar([1, 2], True, "audit") as bar:
        assert not bar.disable


# -- terminal safety ------------------------------------------------------------------------------------

HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202eevil"


def usage_rows(provider: str) -> list[dict[str, Any]]:
    c = CASES[0]
    usage = {"completion_tokens": len(c["output_ids"]) + 1, "prompt_tokens": 3}
    return [{"id": HOSTILE, "turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"][:-1], "provider": provider, "usage": usage}]


def test_audit_escapes_control_characters_from_the_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: the provider name and the id reached the terminal raw (ESC, OSC, CSI, bidi)."""
    path = write_jsonl(tmp_path / "d.jsonl", usage_rows(HOSTILE))
    main(["audit", str(path)])
    out = capsys.readouterr()
    for text in (out.out, out.err):
        assert not re.search("[\x1b\x07\x9b\u202e]", text)
    assert "\\x1b]0;pwned\\x07" in out.out


def test_a_lone_surrogate_in_the_provider_does_not_stop_the_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: UnicodeEncodeError printing the summary, after the work; no report written."""
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(usage_rows("prov\ud800x")[0]) + "\n", encoding="utf-8")  # json.dumps writes the \\ud800 escape
    json_path, html_path = tmp_path / "r.json", tmp_path / "r.html"
    # (its one record differs from its reference: the audit fails, no record being exact, but writes both reports)
    assert main(["audit", str(path), "--json", str(json_path), "--html", str(html_path)]) == 1
    assert "prov\\ud800x" in capsys.readouterr().out
    assert "prov\ud800x" in json.loads(json_path.read_text(encoding="utf-8"))["token_counts"]["providers"]
    assert "prov\\ud800x" in html_path.read_text(encoding="utf-8")


def test_audit_tokens_prints_a_constant_named_with_a_lone_surrogate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: UnicodeEncodeError (a traceback, exit 1 from Python) printing the report."""
    constants = tmp_path / "c.json"
    constants.write_text('{"IM_END\\ud800": 163533, "\\u001b]0;x\\u0007": 163586}', encoding="utf-8")
    assert main(["audit-tokens", "--constants", str(constants)]) in (0, 1)
    out = capsys.readouterr().out
    assert "\\ud800" in out and "\x1b" not in out


def test_the_html_report_stays_small_whatever_the_strings_in_the_data(tmp_path: Path) -> None:
    """Failed on the old code: one 1 MB provider name gave a 7 MB page."""
    big = "P" * 1_000_000
    rows = [dict(r, id=f"{big}{i}", provider=f"{big}{i}") for i, r in enumerate(usage_rows("x") * 8)]
    rows.append({"id": big, "response": {"content": "x"}, "reference_ids": "x" * 1_000_000})
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    html_path = tmp_path / "r.html"
    assert main(["audit", str(path), "-q", "--allow-errors", "--html", str(html_path)]) == 1  # no record is exact: the report is still written
    assert html_path.stat().st_size < 500_000


def test_the_pytest_plugin_message_escapes_the_data(pytester: pytest.Pytester) -> None:
    """Failed on the old code: the failure message carried the ESC sequences raw."""
    bad = write_jsonl(pytester.path / "bad.jsonl", usage_rows(HOSTILE))
    pytester.makepyfile(
        f"""
        def test_bad(kimi_roundtrip_audit):
            kimi_roundtrip_audit({str(bad)!r})
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(failed=1)
    text = "\n".join(result.outlines)
    assert "\\x1b]0;pwned" in text and "\x1b]0;pwned" not in text


def test_terminal_safe_keeps_newlines_tabs_and_printable_text() -> None:
    from kimi_recon._base.terminal import terminal_safe

    assert terminal_safe("a\tb\nc — ü 字 🙂") == "a\tb\nc — ü 字 🙂"
    assert terminal_safe("\x00\x1b\x7f\x85\u2066\udc80") == "\\x00\\x1b\\x7f\\x85\\u2066\\udc80"


def test_dev_null_output_gets_no_sidecar_errors_file(tmp_path: Path) -> None:
    """Failed on the old code: build-samples -o /dev/null created a regular file /dev/null.errors.jsonl."""
    from kimi_recon._batch.training_rows import default_errors_path

    assert default_errors_path(os.devnull) is None and default_errors_path("-") is None
    assert default_errors_path(str(tmp_path / "s.jsonl")) == str(tmp_path / "s.errors.jsonl")


def test_failures_listed_on_stderr_are_escaped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: with -o -, export listed a logged server error message on stderr raw."""
    path = write_jsonl(tmp_path / "log.jsonl", [{"id": "p", "status": "error", "line": 1, "error": {"message": HOSTILE}}])
    assert main(["export", str(path), "-o", "-"]) == 1
    err = capsys.readouterr().err
    assert "\\x1b]0;pwned" in err and "\x1b" not in err
