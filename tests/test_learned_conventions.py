"""Names are read, not refused, and one provider counts one way (issue 37 item 4).

A server name the project does not know is an unknown server that keeps its name: in the record's result, the
report and the per-provider usage table. And the counting convention a run's rows teach for one provider is
applied to each row: a row whose count fits only another convention (a one-token shortfall read as "without the
stop token", a thinking-off answer rebuilt with ``thinking=True``) is ``completion_tokens_mismatch``, not agreement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kimi_recon import KimiTokenizer, audit_dataset, reconstruct_output_ids
from kimi_recon._batch.report_html import render_html
from kimi_recon._batch.training_rows import build_samples
from kimi_recon.cli import main
from kimi_recon.dataset import reconstruct_records
from kimi_recon.flags import FlagCode, Severity
from kimi_recon.usage_check import Convention, CountCheck, TokenCounts
from kimi_recon.usage_stats import ConventionLearner

NAMES = ["Together", "Moonshot AI", "DeepInfra", "my-own-box"]


def _record(tok: KimiTokenizer, i: int, server: str | None, *, shift: int = 0, **extra: Any) -> dict[str, Any]:
    """A thinking-on answer whose usage counts every generated id (plus ``shift``). Its reasoning ends in a letter:
    whitespace a parser stripped after it would show in the count (after punctuation it would not, and the row
    would carry ``server_rare_loss`` for ``reasoning_end_stripped`` of its own)."""
    message = {"reasoning_content": f"Think {i} first", "content": f"Answer {i}."}
    ids = reconstruct_output_ids(message, tok, thinking=True).ids
    response = {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {"completion_tokens": len(ids) + shift}}
    record: dict[str, Any] = {"id": f"r{i}", "response": response, "reference_ids": ids, "thinking": True, **extra}
    if server is not None:
        record["server"] = server
    return record


def _thinking_off_read_as_on(tok: KimiTokenizer, server: str) -> dict[str, Any]:
    """A thinking-off answer (no </think> generated) whose record says thinking is on: the rebuild writes one
    </think> too many, and the server's exact count reads as "without the stop token"."""
    message = {"content": "A plain answer."}
    truth = reconstruct_output_ids(message, tok, thinking=False).ids
    response = {"choices": [{"message": message, "finish_reason": "stop"}], "usage": {"completion_tokens": len(truth)}}
    return {"id": "odd", "response": response, "reference_ids": truth, "server": server, "thinking": True}


@pytest.mark.parametrize("name", NAMES)
def test_a_name_the_project_does_not_know_is_kept_in_the_result_the_report_and_the_usage_table(tok: KimiTokenizer, name: str) -> None:
    records = [_record(tok, i, name) for i in range(3)]
    report = audit_dataset(records, tok, progress=False)
    assert list(report.token_counts["providers"]) == [name]
    assert name in report.summary() and name in render_html(json.loads(json.dumps(report.to_dict())))
    (rebuilt, *_) = reconstruct_records(records, tok)
    assert rebuilt.server == name and rebuilt.flags == ()


def test_the_server_option_names_the_usage_table_and_a_provider_field_wins(tok: KimiTokenizer, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    rows = [_record(tok, i, None) for i in range(2)] + [_record(tok, 9, None, provider="Fireworks")]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert main(["audit", str(data), "--server", "Moonshot AI", "--json", str(tmp_path / "r.json"), "-q"]) == 0
    providers = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["token_counts"]["providers"]
    assert {name: p["rows"] for name, p in providers.items()} == {"Moonshot AI": 2, "Fireworks": 1}


@pytest.mark.parametrize("at", [0, 3, 30])
def test_a_thinking_off_answer_read_as_thinking_on_is_flagged_by_the_providers_own_convention(tok: KimiTokenizer, at: int) -> None:
    records = [_record(tok, i, "Together") for i in range(40)]
    records.insert(at, _thinking_off_read_as_on(tok, "Together"))
    report = audit_dataset(records, tok, progress=False)
    assert report.flag_counts == {"completion_tokens_mismatch": 1}
    # the usage table says what the flags say: 40 of 41 rows agree, all of them as every id counts
    table = report.token_counts["providers"]["Together"]
    assert (table["rows"], table["agree"]) == (41, 40) and table["fields"]["completion_tokens"]["conventions"] == {"exact": 40}
    flagged = [r for r in reconstruct_records(records, tok) if r.flags]
    assert [r.record_id for r in flagged] == ["odd"]
    (flag,) = flagged[0].flags
    assert flag.code is FlagCode.COMPLETION_TOKENS_MISMATCH and flag.severity is Severity.LOSS and flag.delta == -1
    assert "without_stop" in flag.message and "Together" in flag.message and "exact" in flag.message
    counts = flagged[0].token_counts
    assert counts is not None and counts.completion is not None and not counts.completion.agrees


def test_a_provider_that_counts_without_the_stop_token_flags_the_row_that_counts_it(tok: KimiTokenizer) -> None:
    records = [_record(tok, i, None, shift=-1, provider="Lean") for i in range(10)] + [_record(tok, 99, None, provider="Lean")]
    flagged = [r for r in reconstruct_records(records, tok) if r.flags]
    assert [(r.record_id, [f.code for f in r.flags]) for r in flagged] == [("r99", [FlagCode.COMPLETION_TOKENS_MISMATCH])]
    assert flagged[0].flags[0].delta == 1


def test_nothing_is_learned_from_a_provider_that_counts_two_ways_or_from_too_few_rows(tok: KimiTokenizer) -> None:
    mixed = [_record(tok, i, "Mixed", shift=-(i % 2)) for i in range(20)]
    assert all(r.flags == () for r in reconstruct_records(mixed, tok))
    few = [_record(tok, i, "Few") for i in range(3)] + [_thinking_off_read_as_on(tok, "Few")]
    assert all(r.flags == () for r in reconstruct_records(few, tok))
    # one provider's convention says nothing about another's rows
    other = [_record(tok, i, "A") for i in range(10)] + [_record(tok, 50, "B", shift=-1)]
    assert all(r.flags == () for r in reconstruct_records(other, tok))


def _counts(reported: int, rebuilt: int, convention: Convention | None) -> TokenCounts:
    return TokenCounts(completion=CountCheck("completion_tokens", reported, rebuilt, convention))


def test_the_learner_needs_a_settled_majority_and_spares_a_turn_cut_before_its_stop_token() -> None:
    learner = ConventionLearner()
    for _ in range(4):
        learner.learn("p", _counts(10, 10, Convention.EXACT))
    odd = _counts(9, 10, Convention.WITHOUT_STOP)
    assert learner.learned("p") is None and learner.flag("p", odd) is None  # 4 rows: not yet settled
    learner.learn("p", _counts(10, 10, Convention.EXACT))
    assert learner.learned("p") == (Convention.EXACT, 5, 5)
    flag = learner.flag("p", odd)
    assert flag is not None and flag.delta == -1 and flag.field == "usage.completion_tokens"
    assert learner.flag("p", odd, closed=False) is None
    assert learner.flag("p", _counts(10, 10, Convention.EXACT)) is None
    assert learner.flag("p", _counts(12, 10, None)) is None  # a mismatch is flagged by the check itself
    assert learner.flag("q", odd) is None and learner.flag(None, odd) is None
    for _ in range(2):
        learner.learn("p", _counts(9, 10, Convention.WITHOUT_STOP))
    assert learner.learned("p") is None  # 5 of 7: no longer one way


def test_build_samples_flags_the_row_its_providers_convention_contradicts_and_drops_it_when_asked(tok: KimiTokenizer) -> None:
    records = [{**_record(tok, i, "Together"), "messages": [{"role": "user", "content": "Hi"}]} for i in range(10)]
    records.insert(2, {**_thinking_off_read_as_on(tok, "Together"), "messages": [{"role": "user", "content": "Hi"}]})
    flagged = [r for r in build_samples(records, tok) if r.row is None or r.row["flags"]]
    assert [(r.record_id, r.row["flags"], r.row["max_severity"]) for r in flagged if r.row is not None] == [("odd", "completion_tokens_mismatch", "loss")]
    assert flagged[0].row is not None and json.loads(flagged[0].row["token_counts"])["completion_tokens"]["convention"] is None
    results = list(build_samples(records, tok, drop_severity="loss"))
    assert len(results) == len(records)  # never dropped silently
    (dropped,) = [r for r in results if r.error is not None]
    assert dropped.record_id == "odd" and dropped.error is not None and dropped.error.field == "flags"
    assert "completion_tokens_mismatch (loss)" in dropped.error.message
    assert all(r.row is not None and r.row["flags"] == "" for r in results if r.record_id != "odd")


def _log_row(i: int, ids: list[int], reported: int, convention: str, provider: str) -> dict[str, Any]:
    counts = {"completion_tokens": {"reported": reported, "rebuilt": len(ids), "delta": reported - len(ids), "convention": convention}}
    return {"id": f"p{i}", "status": "ok", "output_ids": ids, "prompt_ids": [1, 2], "truncated": False, "response": {}, "flags": [], "token_counts": counts, "provider": provider}


def test_export_of_a_generate_log_flags_the_row_its_providers_convention_contradicts(tmp_path: Path, tok: KimiTokenizer) -> None:
    from kimi_recon.openrouter.export import export_rows

    ids = reconstruct_output_ids({"reasoning_content": "Hm.", "content": "Hi."}, tok, thinking=True).ids
    rows = [_log_row(i, ids, len(ids), "exact", "Moonshot AI") for i in range(8)]
    rows.insert(1, _log_row(99, ids, len(ids) - 1, "without_stop", "Moonshot AI"))  # one id short, read as no stop token
    rows.append(_log_row(50, ids, len(ids) - 1, "without_stop", "SomeHost"))  # another provider: nothing learned there
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    results = list(export_rows(log, tokenizer=tok))
    flagged = {r.record_id: r.row["flags"] for r in results if r.row is not None and r.row["flags"]}
    assert flagged == {"p99": "completion_tokens_mismatch"}
    skipped = [r for r in export_rows(log, tokenizer=tok, skip_flagged=True) if r.error is not None]
    assert [(r.record_id, r.error.field) for r in skipped if r.error is not None] == [("p99", "flags")]
