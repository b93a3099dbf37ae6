"""Flag codes are one str Enum, flags one type written one way; the docs' list is the enum; old files still read."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from extras import require
from hypothesis import given
from hypothesis import strategies as st
from testdata import read_jsonl

from kimi_recon import (
    AssistantTurn,
    Flag,
    KimiTokenizer,
    audit_record,
    reconstruct_output_ids,
)
from kimi_recon._batch.training_rows import training_row
from kimi_recon._records.record import audit_row
from kimi_recon.cli import main
from kimi_recon.dataset import reconstruct_records
from kimi_recon.errors import InvalidInputError
from kimi_recon.flags import (
    RENAMED_CODES,
    SEVERITIES,
    FlagCode,
    Severity,
    flag_codes_text,
    flags_at_least,
    flags_from_json,
    flags_to_json,
    max_severity,
    severity_of,
)
from kimi_recon.openrouter.rows import adapter_flags
from kimi_recon.training import sample_from_record
from kimi_recon.usage_check import COMPLETION, PROMPT, REASONING

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "kimi_recon"


# -- the one list of codes -------------------------------------------------------------------------


def _flag_table_rows() -> list[tuple[str, str]]:
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    section = text[text.index("### Flags") : text.index("## Training samples and prompts")]
    return re.findall(r"^\| ([^|]+) \| ([^|]+) \| [^|]+ \|$", section, flags=re.M)


def test_the_flag_table_in_docs_api_lists_every_code_of_the_enum_once() -> None:
    first_cells = [codes for codes, _ in _flag_table_rows()]
    listed = [code for cell in first_cells for code in re.findall(r"`(\w+)`", cell)]
    assert sorted(listed) == sorted(c.value for c in FlagCode)
    assert len(listed) == len(set(listed))


def test_every_code_has_exactly_one_severity_and_the_docs_table_shows_it() -> None:
    assert set(SEVERITIES) == set(FlagCode)
    assert all(isinstance(s, Severity) for s in SEVERITIES.values())
    shown = {
        code: severity.strip().strip("`")
        for cell, severity in _flag_table_rows()
        if severity.strip() != "severity"
        for code in re.findall(r"`(\w+)`", cell)
    }
    assert shown == {c.value: SEVERITIES[c].value for c in FlagCode}


def test_the_severities_are_ordered_info_risk_loss() -> None:
    assert Severity.INFO < Severity.RISK < Severity.LOSS
    assert max([Severity.RISK, Severity.LOSS, Severity.INFO]) is Severity.LOSS
    assert Severity("risk") is Severity.RISK and f"{Severity.LOSS}" == "loss"


def test_a_flag_carries_its_codes_severity_in_its_json_and_reads_back() -> None:
    flag = Flag(FlagCode.LOGPROBS_USED, "m", "logprobs")
    assert flag.severity is Severity.INFO
    assert flag.to_dict()["severity"] == "info"
    assert flags_from_json(json.loads(json.dumps(flags_to_json([flag])))) == (flag,)
    # a file written with another severity table reads as this version's table says
    assert flags_from_json([{**flag.to_dict(), "severity": "loss"}])[0].severity is Severity.INFO


def test_flags_at_least_and_max_severity_pick_by_severity() -> None:
    info = Flag(FlagCode.LOGPROBS_USED, "m")
    risk = Flag(FlagCode.TRUNCATED, "m")
    loss = Flag(FlagCode.COMPLETION_TOKENS_MISMATCH, "m")
    assert flags_at_least([info, risk, loss], Severity.RISK) == (risk, loss)
    assert flags_at_least([info, risk, loss], "loss") == (loss,)
    assert max_severity([]) == "" and max_severity([info]) == "info" and max_severity([risk, info]) == "risk"
    assert severity_of("reasoning_missing") is Severity.LOSS  # an older name reads as its new code


def test_every_code_of_the_enum_is_emitted_somewhere_in_the_package() -> None:
    """No dead member: each is written as ``FlagCode.NAME`` outside flags.py, or built from a usage field."""
    source = "".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py") if p.name != "flags.py")
    built = {FlagCode(f"{field}_mismatch") for field in (COMPLETION, PROMPT, REASONING)}
    assert {c for c in FlagCode if f"FlagCode.{c.name}" in source} | built == set(FlagCode)


def test_no_module_builds_a_flag_from_a_bare_code_string() -> None:
    """The codes live in the enum: ``Flag("...")`` or a ``{"code": "..."}`` flag literal outside flags.py is a second list."""
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if path.name == "flags.py":
            continue
        assert not re.search(r"\bFlag\(\s*[\"']", text), path
        assert not re.search(r"[\"']code[\"']: [\"'][a-z_]+[\"'], [\"']message[\"']", text), path


def test_a_code_is_its_string_in_comparisons_json_and_messages() -> None:
    code = FlagCode.COMPLETION_TOKENS_MISMATCH
    assert code == "completion_tokens_mismatch" and "completion_tokens_mismatch" in (code,)
    assert json.dumps(code) == '"completion_tokens_mismatch"'
    assert f"{code}" == str(code) == "completion_tokens_mismatch" and f"[{code:>28}]" == "[  completion_tokens_mismatch]"
    assert Flag("truncated", "m").code is FlagCode.TRUNCATED  # type: ignore[arg-type]  # a code string is converted to the member


def test_an_unknown_code_is_an_error_naming_the_field() -> None:
    with pytest.raises(InvalidInputError, match="unknown flag code 'nope'") as err:
        Flag("nope", "m")  # type: ignore[arg-type]  # a string that is no code: refused by name
    assert err.value.field == "code"
    with pytest.raises(InvalidInputError) as err:
        flags_from_json([{"code": "truncated"}, {"code": "nope"}])
    assert err.value.field == "flags[].code"
    with pytest.raises(InvalidInputError) as err:
        flags_from_json({"code": "truncated"})
    assert err.value.field == "flags"


# -- one serialisation, and the flat form ----------------------------------------------------------

flag_objects = st.builds(
    Flag,
    st.sampled_from(list(FlagCode)),
    st.text(max_size=30),
    st.none() | st.text(min_size=1, max_size=20),
    st.none() | st.integers(-(10**6), 10**6),
)


@given(st.lists(flag_objects, max_size=6))
def test_flags_written_as_json_read_back_as_the_same_flags(flags: list[Flag]) -> None:
    written = json.loads(json.dumps(flags_to_json(flags)))
    assert all(set(d) == {"code", "severity", "message", "field"} | ({"delta"} if f.delta is not None else set()) for d, f in zip(written, flags, strict=True))
    assert flags_from_json(written) == tuple(flags)


@given(st.lists(flag_objects, max_size=6))
def test_the_flat_form_reads_back_as_the_same_codes_in_order(flags: list[Flag]) -> None:
    text = flag_codes_text(flags)
    assert text == ",".join(f.code.value for f in flags)
    assert [f.code for f in flags_from_json(text)] == [f.code for f in flags]


def test_every_shape_an_older_file_holds_reads_with_renamed_codes_under_their_new_name() -> None:
    assert RENAMED_CODES == {"reasoning_missing": FlagCode.REASONING_NOT_RETURNED}
    objects = [{"code": "reasoning_missing", "message": "m", "field": "reasoning"}, {"code": "truncated", "message": "t", "field": None}]
    assert flags_from_json(objects) == (Flag(FlagCode.REASONING_NOT_RETURNED, "m", "reasoning"), Flag(FlagCode.TRUNCATED, "t"))
    for shape in (["reasoning_missing", "truncated"], "reasoning_missing,truncated"):
        assert [f.code for f in flags_from_json(shape)] == [FlagCode.REASONING_NOT_RETURNED, FlagCode.TRUNCATED]
    assert flags_from_json(None) == flags_from_json("") == flags_from_json([]) == ()
    usage = {"code": "prompt_tokens_mismatch", "message": "m", "field": "usage.prompt_tokens", "delta": 7}
    assert flags_from_json([usage])[0].delta == 7 and flags_to_json(flags_from_json([usage])) == [{**usage, "severity": "loss"}]


TURN = {
    "role": "assistant",
    "reasoning_content": "Think.",
    "content": "Calling.",
    "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
}


def test_every_output_writes_the_same_flag_objects_and_training_columns_their_codes(tok: KimiTokenizer) -> None:
    turn = AssistantTurn(reasoning="Think first", content="Calling.", tool_calls=(), finish_reason="stop")
    assert reconstruct_output_ids(turn, tok).flags == ()
    ids = reconstruct_output_ids(TURN, tok).ids
    record = {
        "id": "r",
        "messages": [{"role": "user", "content": "Hi"}],
        "response": {"choices": [{"message": TURN, "finish_reason": "tool_calls"}], "usage": {"completion_tokens": len(ids) + 5}},
        "reference_ids": ids,
        "server": "none",  # no server parser's losses: the flags here are the renderer's and the usage check's
    }
    result = audit_record(record, tok)
    codes = [FlagCode.REPLACED_TOOL_CALL_ID, FlagCode.COMPLETION_TOKENS_MISMATCH]
    assert [f.code for f in result.flags] == codes and result.flags[-1].delta == 5
    objects = flags_to_json(result.flags)
    # the record's messages say no call came before the turn: the id is written at the index the model gives it
    seen = result.flags[0].seen
    assert objects[0] == {"code": "replaced_tool_call_id", "severity": "unlikely", "message": result.flags[0].message, "field": "tool_calls[0].id", "seen": seen}
    assert objects[1]["delta"] == 5 and objects[1]["field"] == "usage.completion_tokens"
    assert result.to_dict()["flags"] == objects
    (rebuilt,) = reconstruct_records([record], tok, progress=False)
    assert rebuilt.to_dict()["flags"] == objects
    sample = sample_from_record(record, tok)
    assert sample.to_dict()["flags"] == objects
    assert training_row(record, tok)["flags"] == audit_row(record, tok)["audit_flags"] == "replaced_tool_call_id,completion_tokens_mismatch"


# -- why training rows keep the flat form ---------------------------------------------------------


def _load(path: Path, rows: list[dict[str, Any]]) -> Any:
    datasets = require("datasets")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # a small chunk size puts the first rows in a block of their own, as 10 MB of unflagged rows would
    return datasets.load_dataset("json", data_files=str(path), split="train", chunksize=1 << 12, cache_dir=str(path.parent / "cache"))


def test_arrow_cannot_load_flag_objects_the_first_block_lacks_but_loads_the_flat_form(tmp_path: Path) -> None:
    base = {"id": "a", "input_ids": [1, 2], "loss_mask": [0, 1], "prompt_len": 1}
    early = [{**base, "flags": []}] * 100 + [{**base, "flags": [{"code": "truncated", "message": "m", "field": None}]}] * 100
    late = Flag(FlagCode.REASONING_INCOMPLETE, "m", "reasoning")
    with pytest.raises(Exception, match="generating the dataset"):  # an empty list, or a null field, types the column first
        _load(tmp_path / "objects_empty.jsonl", [*early[:100], {**base, "flags": flags_to_json([late])}])
    with pytest.raises(Exception, match="generating the dataset"):
        _load(tmp_path / "objects_null_field.jsonl", [*early[100:], {**base, "flags": flags_to_json([late])}])
    flat = [{**r, "flags": flag_codes_text(flags_from_json(r["flags"]))} for r in early] + [{**base, "flags": flag_codes_text([late])}]
    loaded = _load(tmp_path / "flat.jsonl", flat)
    assert loaded["flags"][0] == "" and loaded["flags"][100] == "truncated" and loaded["flags"][-1] == "reasoning_incomplete"


# -- the renamed OpenRouter flag -------------------------------------------------------------------


def test_thinking_on_and_no_reasoning_returned_is_reasoning_not_returned_not_the_compare_kind() -> None:
    turn = AssistantTurn(content="Hi.", metadata={"usage": {"completion_tokens_details": {"reasoning_tokens": 12}}})
    (flag,) = adapter_flags(turn, thinking=True)
    assert flag.code is FlagCode.REASONING_NOT_RETURNED and flag.code.value != "reasoning_missing"
    assert "12 reasoning tokens" in flag.message and flag.field == "reasoning"
    assert adapter_flags(turn, thinking=False) == []
    assert adapter_flags(AssistantTurn(reasoning="", content="Hi."), thinking=True) == []


def test_export_of_a_log_written_before_the_rename_gives_the_new_name(tmp_path: Path, tok: KimiTokenizer) -> None:
    ids = reconstruct_output_ids({"role": "assistant", "content": "Hi."}, tok).ids
    row = {"id": "p", "status": "ok", "line": 1, "output_ids": ids, "prompt_ids": [1, 2], "truncated": False, "response": {}}
    log = tmp_path / "log.jsonl"
    old = [
        {**row, "id": "objects", "flags": [{"code": "reasoning_missing", "message": "m", "field": "reasoning"}]},
        {**row, "id": "codes", "flags": ["reasoning_missing", "truncated"]},
        {**row, "id": "unknown", "flags": [{"code": "no_such_flag", "message": "m", "field": None}]},
    ]
    log.write_text("".join(json.dumps(r) + "\n" for r in old), encoding="utf-8")
    assert main(["export", str(log), "-o", str(tmp_path / "t.jsonl")]) == 1
    rows = {r["id"]: r["flags"] for r in read_jsonl(tmp_path / "t.jsonl")}
    assert rows == {"objects": "reasoning_not_returned", "codes": "reasoning_not_returned,truncated"}
    (error,) = read_jsonl(tmp_path / "t.errors.jsonl")
    assert error["id"] == "unknown" and error["field"] == "flags[].code" and "no_such_flag" in error["error"]


def test_the_html_report_shows_the_codes_of_flag_objects_and_of_an_older_reports_bare_codes(tok: KimiTokenizer) -> None:
    from kimi_recon import audit_dataset
    from kimi_recon._batch.report_html import render_html

    ids = reconstruct_output_ids(TURN, tok).ids
    record = {"id": "r", "response": {"choices": [{"message": TURN, "finish_reason": "tool_calls"}]}, "reference_ids": ids[1:], "server": "none"}
    report = json.loads(json.dumps(audit_dataset([record], tok, progress=False).to_dict()))
    (worst,) = report["worst"]
    # a record without its messages: how many calls came before the turn is not said
    assert [f["code"] for f in worst["flags"]] == ["tool_call_index_assumed"]
    chip = '<span class="flag sev-risk">tool_call_index_assumed</span>'
    assert chip in render_html(report)
    worst["flags"] = ["tool_call_index_assumed"]  # how reports were written before flags became objects
    assert chip in render_html(report)
