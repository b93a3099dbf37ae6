"""Errors that say what to do (issue 21, done-item 3, the Python API's part): did-you-mean for profiles and
record fields, a missing ``messages`` said to be missing, a missing file a KimiReconError that is still a
FileNotFoundError, and record places that agree between the text, the HTML and ``datasets`` batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testdata import OFFICIAL, read_jsonl

import kimi_recon
from kimi_recon import sample_batch
from kimi_recon.dataset import audit_dataset, audit_record
from kimi_recon.errors import InputFileError, InvalidInputError
from kimi_recon.training import sample_from_record

CASE = read_jsonl(OFFICIAL / "turns.jsonl")[0]


@pytest.mark.parametrize(("typo", "meant"), [("kimi-k25", "kimi-k2.5"), ("kimi-k3.0", "kimi-k3"), ("kimi-k2-thinkin", "kimi-k2-thinking")])
def test_a_misspelt_profile_names_the_profile_meant(typo: str, meant: str) -> None:
    with pytest.raises(InvalidInputError, match=f"did you mean '{meant}'") as err:
        kimi_recon.reconstruct_output_ids(kimi_recon.AssistantTurn(content="hi"), profile=typo)
    assert err.value.field == "profile"


def test_moonshotai_kimi_k2_is_kimi_k2_instruct() -> None:
    assert kimi_recon.get_profile("moonshotai/kimi-k2").name == "kimi-k2-instruct"


@pytest.mark.parametrize(("key", "field", "meant"), [("resp", "response", "response"), ("respones", "response", "response"), ("output_id", "reference_ids", "output_ids")])
def test_a_misspelt_record_field_names_the_field_meant(key: str, field: str, meant: str) -> None:
    record = {"id": "r", "response": CASE["turn"], "output_ids": CASE["output_ids"]}
    record[key] = record.pop(meant if meant != "response" else "response")
    error = audit_record(record).error
    assert error is not None and error.field == field
    assert f"did you mean {meant!r} (the record has {key!r})" in error.message


def test_a_missing_messages_is_said_to_be_missing() -> None:
    with pytest.raises(InvalidInputError, match="is missing") as err:
        sample_from_record({"id": "r", "response": CASE["turn"]})
    assert err.value.field == "messages" and "NoneType" not in str(err.value)


def test_a_missing_file_is_a_kimi_recon_error_and_still_a_file_not_found_error(tmp_path: Path) -> None:
    missing = tmp_path / "missing.jsonl"
    for call in (lambda: audit_dataset(missing), lambda: list(kimi_recon.build_samples(str(missing)))):
        with pytest.raises(FileNotFoundError) as err:
            call()
        assert isinstance(err.value, kimi_recon.KimiReconError) and isinstance(err.value, InputFileError)
        assert str(missing) in str(err.value)


def test_an_iterable_record_is_named_by_its_index_and_a_file_record_by_its_line_in_text_and_html(tmp_path: Path) -> None:
    good = {"id": "ok", "response": CASE["turn"], "output_ids": CASE["output_ids"], "thinking": CASE["thinking"]}
    bad = {"id": "bad", "resp": CASE["turn"], "output_ids": CASE["output_ids"]}
    from_list = audit_dataset([good, good, bad])
    assert str(from_list.errors[0]).startswith("record 2 (id 'bad')")
    path = tmp_path / "r.jsonl"
    path.write_text("\n" + json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    from_file = audit_dataset(path)
    assert str(from_file.errors[0]).startswith("line 3 (id 'bad')")
    page = from_file.to_html()
    assert 'id="err-line-3"' in page and "line 3" in page


def _batch(rows: list[dict[str, object]]) -> dict[str, list[object]]:
    return {k: [json.dumps(r[k]) if k in ("messages", "response") else r[k] for r in rows] for k in rows[0]}


def test_a_batch_error_names_the_dataset_index_when_given_and_never_claims_the_batch_row_is_one() -> None:
    good = {"id": "a", "messages": CASE["messages"], "response": CASE["turn"], "thinking": CASE["thinking"]}
    bad = {**good, "id": "b", "thinking": "no"}
    batch = _batch([good, bad])
    assert sample_batch(batch, indices=[40, 41])["error"][1].startswith("record 41 (id 'b')")
    # datasets' with_indices=True passes the indices as the second argument
    assert sample_batch(batch, [40, 41])["error"][1].startswith("record 41 (id 'b')")
    assert sample_batch(batch)["error"][1].startswith("batch row 1 (id 'b')")


def test_datasets_map_with_indices_names_the_dataset_index() -> None:
    datasets = pytest.importorskip("datasets")
    good = {"id": "a", "messages": CASE["messages"], "response": CASE["turn"], "thinking": CASE["thinking"]}
    bad = {**good, "id": "b", "response": {"role": "user", "content": "not a turn"}}
    rows = [good, bad, good, good, bad]  # (a first batch without an error string gives a null-typed column)
    ds = datasets.Dataset.from_dict(_batch(rows))
    out = ds.map(sample_batch, batched=True, batch_size=3, with_indices=True, remove_columns=ds.column_names)
    assert [i for i, e in enumerate(out["error"]) if e] == [1, 4]
    assert out["error"][4].startswith("record 4 (id 'b')")  # the dataset's index, not the batch's (1)
