"""audit_dataset streams records, counts every kind, reports malformed records by line, and scales over processes."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from extras import require

import kimi_recon
from kimi_recon import load_tokenizer
from kimi_recon.compare import KINDS, NON_CANONICAL_BPE, SPECIAL_TOKEN_MISMATCH, TEXT_MISMATCH
from kimi_recon.dataset import (
    ERROR,
    DatasetAudit,
    InvalidRecordError,
    RecordResult,
    audit_batch,
    audit_dataset,
    audit_record,
    audit_row,
    iter_jsonl,
    reconstruct_record,
    reconstruct_records,
)
from kimi_recon.errors import InvalidInputError

GOLDEN = Path(__file__).parent / "data" / "golden" / "official-k2.5-dev"
TURNS_PATH = GOLDEN / "turns.jsonl"


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


TURNS = _read_jsonl(TURNS_PATH)
TOK = load_tokenizer()


def record(i: int, **extra: Any) -> dict[str, Any]:
    """Golden turn ``i`` as an audit record: response = the turn, reference = the official output ids."""
    t = TURNS[i]
    return {"id": f"r{i}", "response": t["turn"], "reference_ids": t["output_ids"], "thinking": t["thinking"], **extra}


def split_first_multibyte(ids: list[int]) -> list[int]:
    """The same bytes with the first multi-byte ordinary token split in two (a non-canonical sample)."""
    for i, t in enumerate(ids):
        data = TOK.token_bytes(t)
        if TOK.is_special(t) or len(data) < 2:
            continue
        for k in range(1, len(data)):
            left, right = TOK.id_of_bytes(data[:k]), TOK.id_of_bytes(data[k:])
            if left is not None and right is not None:
                return ids[:i] + [left, right] + ids[i + 1 :]
    raise AssertionError("no splittable token")


def mixed_records() -> list[dict[str, Any]]:
    """Exact, non-canonical, wrong-<|im_end|>, text-mismatch and malformed records."""
    out: list[dict[str, Any]] = []
    for i in range(len(TURNS)):
        rec = record(i)
        if i % 7 == 1:
            rec["reference_ids"] = split_first_multibyte(rec["reference_ids"])
        elif i % 7 == 2:
            rec["reference_ids"] = rec["reference_ids"][:-1] + [163533]
        elif i % 7 == 3:
            rec["response"] = {**rec["response"], "content": (rec["response"].get("content") or "") + " extra"}
        elif i % 7 == 4:
            rec["reference_ids"] = [1, 2, 10**7]
        out.append(rec)
    return out


def test_golden_turns_as_a_jsonl_file_are_all_exact() -> None:
    audit = audit_dataset(TURNS_PATH, progress=False)
    assert (audit.total, audit.compared, audit.error_count) == (120, 120, 0)
    assert audit.counts["exact"] == 120 and audit.exact_rate == 1.0 and audit.benign_rate == 1.0
    assert audit.examples == {}


def test_golden_turns_as_response_and_reference_records_are_all_exact() -> None:
    audit = audit_dataset((record(i) for i in range(len(TURNS))), progress=False)
    assert audit.counts["exact"] == audit.total == 120


def test_chat_completion_responses_with_logprobs_use_the_logprob_ids() -> None:
    t = TURNS[5]
    sampled = split_first_multibyte(t["output_ids"])
    logprobs = {"content": [{"token": "x", "logprob": 0.0, "bytes": list(TOK.token_bytes(i))} for i in sampled]}
    completion = {"choices": [{"index": 0, "message": t["turn"], "finish_reason": "tool_calls" if t["turn"].get("tool_calls") else "stop", "logprobs": logprobs}]}
    rec = {"id": 7, "response": completion, "reference": sampled, "thinking": t["thinking"]}
    result = audit_record(rec)
    assert result.ok and result.comparison is not None and result.comparison.exact and result.source == "logprobs"
    without = audit_record(rec, use_logprobs=False)
    assert without.kind == NON_CANONICAL_BPE and without.record_id == "7"
    assert reconstruct_record(rec).ids == sampled


def test_response_under_turn_or_message_and_reference_under_output_ids_are_read() -> None:
    t = TURNS[3]
    for key in ("response", "turn", "message"):
        for ref_key in ("reference_ids", "output_ids", "reference"):
            result = audit_record({key: t["turn"], ref_key: t["output_ids"], "thinking": t["thinking"]})
            assert result.kind == "exact", (key, ref_key, result)


def test_a_record_without_a_response_key_is_itself_the_response_for_reconstruct_record() -> None:
    t = TURNS[2]
    assert reconstruct_record(t["turn"], thinking=t["thinking"]).ids == t["output_ids"]
    assert reconstruct_record(json.dumps({"turn": t["turn"], "thinking": t["thinking"]})).ids == t["output_ids"]


def test_reconstruct_record_errors_name_the_field_and_the_record_id() -> None:
    bad = {"id": "abc", "response": {"choices": [{"message": {"role": "assistant", "tool_calls": [{"function": {"name": ""}}]}}]}}
    with pytest.raises(InvalidInputError) as err:
        reconstruct_record(bad)
    assert err.value.field == "response.choices[0].message.tool_calls[0].function.name"
    assert "'abc'" in str(err.value)


def _write_malformed(tmp_path: Path) -> tuple[Path, dict[int, str | None]]:
    lines = [
        json.dumps(record(0)),
        "{not json",  # line 2
        json.dumps(record(1)),
        json.dumps({"id": "no-response", "reference_ids": TURNS[2]["output_ids"]}),  # line 4
        json.dumps(record(3)),
        json.dumps({**record(4), "reference_ids": [5, 163840]}),  # line 6: out of range
        "",
        json.dumps(record(5)),
        json.dumps({**record(6), "response": {**TURNS[6]["turn"], "tool_calls": "oops"}}),  # line 9: bad turn
        json.dumps([1, 2, 3]),  # line 10: not an object
        json.dumps(record(7)),
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    fields: dict[int, str | None] = {2: None, 4: "response", 6: "reference_ids", 9: "response.tool_calls", 10: None}
    return path, fields


def test_malformed_lines_are_reported_by_line_and_every_other_record_is_processed(tmp_path: Path) -> None:
    path, expected = _write_malformed(tmp_path)
    audit = audit_dataset(path, progress=False)
    assert (audit.total, audit.error_count, audit.counts["exact"]) == (10, 5, 5)
    assert {e.line: e.field for e in audit.errors} == expected
    by_line = {e.line: e for e in audit.errors}
    assert "163840" in by_line[6].message and by_line[4].record_id == "no-response"
    summary = audit.summary()
    assert "errors 5" in summary and "line 6 (id 'r4'): field 'reference_ids'" in summary


def test_iter_jsonl_yields_line_numbers_and_errors_in_place(tmp_path: Path) -> None:
    path, _ = _write_malformed(tmp_path)
    (tmp_path / "bin.jsonl").write_bytes(b'{"a": 1}\n\xff\xfe\n')
    items = list(iter_jsonl(path))
    assert [line for line, _ in items] == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert [line for line, r in items if isinstance(r, InvalidRecordError)] == [2, 10]
    assert [type(r).__name__ for _, r in iter_jsonl(tmp_path / "bin.jsonl")] == ["dict", "InvalidRecordError"]


def test_two_workers_give_the_same_audit_as_one(tmp_path: Path) -> None:
    records = mixed_records()
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    one = audit_dataset(path, workers=1, progress=False)
    two = audit_dataset(path, workers=2, progress=False, chunk_size=7, executor="processes")
    assert one == two  # counts, errors, examples (elapsed is not compared)
    assert one.to_dict() | {"elapsed_seconds": 0} == two.to_dict() | {"elapsed_seconds": 0}
    assert one.error_count == 17 and one.counts[NON_CANONICAL_BPE] > 0 and one.counts[SPECIAL_TOKEN_MISMATCH] > 0
    assert one.counts[TEXT_MISMATCH] > 0
    from_iterable = audit_dataset(iter(records), workers=2, progress=False)
    assert from_iterable.counts == one.counts and [e.index for e in from_iterable.errors] == [e.index for e in one.errors]


def test_counts_and_rates_add_up_and_benign_is_exact_plus_non_canonical() -> None:
    audit = audit_dataset(mixed_records(), progress=False)
    assert sum(audit.counts.values()) == audit.compared == audit.total - audit.error_count
    assert audit.benign_count == audit.counts["exact"] + audit.counts[NON_CANONICAL_BPE]
    assert abs(sum(audit.rate(k) for k in KINDS) - 1.0) < 1e-9
    text = str(audit)
    for kind in KINDS:
        assert kind in text
    assert f"benign (exact + non_canonical_bpe) {audit.benign_count}/{audit.compared}" in text


def test_examples_are_bounded_worst_first_and_errors_are_capped_but_counted() -> None:
    records = [r for r in mixed_records() for _ in range(3)]
    audit = audit_dataset(records, progress=False, examples=2, max_errors=4)
    assert audit.error_count == 51 and len(audit.errors) == 4 and "… and 47 more" in audit.summary()
    assert set(audit.examples) == {k for k in KINDS if k != "exact" and audit.counts[k]}
    for shown in audit.examples.values():
        sizes = [r.comparison.diff_size for r in shown if r.comparison is not None]
        assert len(shown) == 2 and sizes == sorted(sizes, reverse=True)


def test_audit_dict_is_json_serialisable() -> None:
    audit = audit_dataset(mixed_records(), progress=False)
    data = json.loads(json.dumps(audit.to_dict()))
    assert data["counts"] == dict(audit.counts) and data["error_count"] == audit.error_count
    assert isinstance(audit, DatasetAudit)
    with pytest.raises(dataclasses.FrozenInstanceError):
        audit.total = 0  # type: ignore[misc]


def test_input_is_consumed_lazily_with_bounded_work_in_flight() -> None:
    consumed = 0

    def records() -> Iterator[dict[str, Any]]:
        nonlocal consumed
        for i in range(10_000):
            consumed += 1
            yield record(i % len(TURNS))

    stream = reconstruct_records(records(), workers=2, chunk_size=4)
    first = next(stream)
    assert first.ids is not None and first.index == 0
    assert consumed <= 4 * 2 * 4 + 4  # at most 4 * workers chunks in flight, not the whole input
    stream.close()
    consumed = 0
    serial = reconstruct_records(records())
    next(serial)
    assert consumed == 64  # one chunk (chunk_size, whose turns are encoded together), not the whole input
    serial.close()
    consumed = 0
    serial = reconstruct_records(records(), chunk_size=1)
    next(serial)
    assert consumed == 1
    serial.close()


def test_progress_bar_is_shown_when_asked_and_hidden_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    audit_dataset([record(0), record(1)], progress=True)
    assert "2/2" in capsys.readouterr().err
    audit_dataset([record(0), record(1)])  # progress=None: captured stderr is not a terminal
    assert capsys.readouterr().err == ""


def test_record_rows_have_the_same_columns_and_types_for_errors_and_comparisons() -> None:
    good = audit_row(record(0))
    bad = audit_row({"id": "x"})
    assert good.keys() == bad.keys()
    assert [type(v) for v in good.values()] == [type(v) for v in bad.values()]
    assert (good["audit_kind"], bad["audit_kind"], bad["audit_error_field"]) == ("exact", ERROR, "response")


def test_audit_batch_returns_one_value_per_row_in_each_column() -> None:
    rows = [record(0), record(1), {"id": "broken"}]
    batch = {k: [r.get(k) for r in rows] for k in ("id", "response", "reference_ids", "thinking")}
    out = audit_batch(batch)
    assert out["audit_kind"] == ["exact", "exact", ERROR]
    assert all(len(v) == 3 for v in out.values())


def test_audit_record_never_raises_and_pickles(tmp_path: Path) -> None:
    for bad in ["{", b"\xff", 42, None, {"response": "text", "reference_ids": [1]}, {"response": TURNS[0]["turn"], "reference_ids": "1 2"}]:
        result = audit_record(bad)  # type: ignore[arg-type]
        assert isinstance(result, RecordResult) and result.kind == ERROR and result.error is not None
    assert pickle.loads(pickle.dumps(audit_record)) is audit_record
    result = audit_record(record(0))
    assert pickle.loads(pickle.dumps(result)) == result


def test_record_overrides_and_bad_options_are_reported_per_record() -> None:
    assert audit_record({**record(0), "profile": "nope"}).error.field == "profile"  # type: ignore[union-attr]
    assert audit_record({**record(0), "thinking": "yes"}).error.field == "thinking"  # type: ignore[union-attr]
    assert audit_record({**record(0), "call_index_offset": -1}).error.field == "call_index_offset"  # type: ignore[union-attr]
    flipped = {**record(0), "thinking": not TURNS[0]["thinking"]}
    assert audit_record(flipped).kind != "exact"


def test_per_record_function_runs_under_datasets_map_with_two_processes() -> None:
    datasets = require("datasets")
    # Arrow needs one type per column: keep turns whose tool-call arguments are strings.
    rows = [
        {"id": str(i), "turn": copy.deepcopy(t["turn"]), "output_ids": t["output_ids"], "thinking": t["thinking"]}
        for i, t in enumerate(TURNS)
        if all(isinstance(c["function"]["arguments"], str) for c in t["turn"].get("tool_calls") or [])
    ][:16]
    rows[3]["output_ids"] = rows[3]["output_ids"][:-1] + [163533]
    ds = datasets.Dataset.from_list(rows)
    out = ds.map(audit_row, num_proc=2)
    kinds = out["audit_kind"]
    assert len(kinds) == 16 and kinds[3] == SPECIAL_TOKEN_MISMATCH
    assert kinds[:3] + kinds[4:] == ["exact"] * 15


def test_audit_batch_accepts_numpy_columns_as_ray_gives_them() -> None:
    np = require("numpy")
    rows = [record(i) for i in range(3)]
    batch = {
        "response": np.array([r["response"] for r in rows], dtype=object),
        "reference_ids": np.array([np.array(r["reference_ids"]) for r in rows], dtype=object),
        "thinking": np.array([r["thinking"] for r in rows]),
    }
    assert audit_batch(batch)["audit_kind"] == ["exact"] * 3


def test_a_tokenizer_directory_is_reloaded_in_workers_and_an_unloadable_one_is_refused(tokenizer_dir: Path) -> None:
    tok = load_tokenizer(tokenizer_dir)
    records = [record(i) for i in range(6)]
    assert audit_dataset(records, str(tokenizer_dir), workers=2, progress=False, executor="processes").counts["exact"] == 6
    assert audit_dataset(records, tok, workers=2, progress=False, executor="processes").counts["exact"] == 6
    anonymous = copy.copy(tok)
    anonymous.source = ""
    with pytest.raises(InvalidInputError) as err:
        audit_dataset(records, anonymous, workers=2, progress=False, executor="processes")
    assert err.value.field == "tokenizer"
    assert audit_dataset(records, anonymous, workers=1, progress=False).counts["exact"] == 6
    assert audit_dataset(records, anonymous, workers=2, progress=False).counts["exact"] == 6  # threads share the object


def test_a_result_line_names_each_flag_code_once_with_its_count() -> None:
    from kimi_recon._records.record import audit_record

    sample = Path(kimi_recon.__file__).parent / "data" / "sample"
    line = next(
        text for path in sorted(sample.glob("*.jsonl")) for text in path.read_text(encoding="utf-8").splitlines() if '"turns-024"' in text
    )
    record = json.loads(line)
    del record["server"]  # (the sample's turns never went through a server: read as an unknown server's)
    result = audit_record(record)
    codes = [f.code.value for f in result.flags]
    # four rare losses of the record's server (text between calls too: its count agrees as every id counts): one
    # code, four fields
    assert codes.count("server_rare_loss") == 4
    shown = str(result)
    assert shown.count("server_rare_loss") == 1 and "server_rare_loss (unlikely) x4" in shown
