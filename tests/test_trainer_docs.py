"""What docs/training.md says about SpecForge and vLLM speculators, checked against the trainers' rules as
tests/trainer_rules.py restates them (read at the commits it names), and the rows we write against those rules."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from testdata import OFFICIAL, read_jsonl
from trainer_rules import (
    SPECFORGE_COMMIT,
    SPECULATORS_COMMIT,
    Rejected,
    specforge_config,
    specforge_prompts,
    speculators_rows,
)

from kimi_recon import KimiTokenizer, sample_batch
from kimi_recon._batch.training_rows import training_row
from kimi_recon.cli import main

ROOT = Path(__file__).parent.parent
TRAINING_MD = (ROOT / "docs" / "training.md").read_text(encoding="utf-8")
CASES = read_jsonl(OFFICIAL / "turns.jsonl")

#: The run config docs/training.md gave before SpecForge's server-only online cutover was checked.
OLD_YAML = """
model:
  target_model_path: moonshotai/Kimi-K2.5
  trust_remote_code: true
data:
  prompts_path: /data/samples.jsonl
  max_length: 65536
training:
  strategy: eagle3
"""


def doc_yaml_blocks() -> list[Any]:
    return [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", TRAINING_MD, re.S)]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def row(i: int) -> dict[str, Any]:
    c = CASES[i]
    return training_row({"id": f"c{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]})


# -- the run config ----------------------------------------------------------------------------------


def test_the_docs_run_config_is_one_specforge_load_config_accepts() -> None:
    blocks = doc_yaml_blocks()
    assert blocks, "docs/training.md has no SpecForge run config"
    for config in blocks:
        specforge_config(config)
        assert config["data"]["prompts_path"].endswith(".jsonl")


def test_the_old_docs_run_config_is_refused_for_want_of_a_disaggregated_deployment() -> None:
    with pytest.raises(Rejected, match=re.escape("online training requires deployment.mode=disaggregated")):
        specforge_config(yaml.safe_load(OLD_YAML))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["data"].update(train_data_path="x.jsonl"), "exactly one of"),
        (lambda c: c["model"].update(target_backend="hf"), "unknown keys|target_backend=sglang"),
        (lambda c: c["deployment"]["disaggregated"].update(backend="shared_dir"), "backend=mooncake"),
        (lambda c: c["deployment"]["disaggregated"].pop("control_dir"), "control_dir"),
        (lambda c: c["training"].update(role="all"), "does not fit"),
        (lambda c: c["data"].update(prompt_path="typo.jsonl"), "unknown keys"),
        (lambda c: c["deployment"]["trainer"].update(nnodes=2), "master_addr"),
    ],
)
def test_the_config_rules_refuse_what_load_config_refuses(change: Any, message: str) -> None:
    config = doc_yaml_blocks()[0]
    change(config)
    with pytest.raises(Rejected, match=message):
        specforge_config(config)


def test_the_docs_name_the_trainer_commits_the_rules_were_read_at() -> None:
    assert SPECFORGE_COMMIT in TRAINING_MD and SPECULATORS_COMMIT in TRAINING_MD


def test_the_docs_name_speculators_current_dataset_builder() -> None:
    """speculators renamed ``build_eagle3_dataset`` to ``build_speculator_training_dataset``."""
    assert "build_speculator_training_dataset" in TRAINING_MD and "build_eagle3_dataset" not in TRAINING_MD


# -- what prompts_path takes ---------------------------------------------------------------------------


def test_a_save_to_disk_folder_is_not_a_specforge_prompts_path(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "rows"
    datasets.Dataset.from_list([{"input_ids": [1, 2], "loss_mask": [0, 1]}]).save_to_disk(str(folder))
    with pytest.raises(Rejected, match="is a folder"):
        specforge_prompts(folder)


def test_a_json_array_file_is_a_specforge_prompts_path(tmp_path: Path) -> None:
    rows = [{"input_ids": r["input_ids"], "loss_mask": r["loss_mask"]} for r in (row(0), row(1))]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    assert specforge_prompts(path) == rows


# -- the DFlash family's rule --------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["dflash", "domino", "dspark"])
def test_the_dflash_family_skips_rows_without_two_adjacent_trained_tokens(tmp_path: Path, strategy: str) -> None:
    one = write_jsonl(tmp_path / "one.jsonl", [{"input_ids": [5, 6, 7], "loss_mask": [0, 0, 1]}])
    apart = write_jsonl(tmp_path / "apart.jsonl", [{"input_ids": [5, 6, 7], "loss_mask": [1, 0, 1]}])
    both = write_jsonl(tmp_path / "both.jsonl", [{"input_ids": [5, 6, 7], "loss_mask": [0, 1, 1]}])
    assert specforge_prompts(one) and specforge_prompts(apart)  # EAGLE-3 takes both
    with pytest.raises(Rejected, match="fewer than 2"):
        specforge_prompts(one, strategy)
    with pytest.raises(Rejected, match="no two adjacent"):
        specforge_prompts(apart, strategy)
    assert specforge_prompts(both, strategy)


def test_build_samples_rows_meet_the_dflash_rule(tmp_path: Path) -> None:
    records = [{"id": f"c{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]}
               for i, c in enumerate(CASES)]  # fmt: skip
    out = tmp_path / "samples.jsonl"
    assert main(["build-samples", str(write_jsonl(tmp_path / "in.jsonl", records)), "-o", str(out)]) == 0
    assert len(specforge_prompts(out, "dflash")) == len(CASES)


# -- an empty turn cut by the length limit ----------------------------------------------------------------

CUT = {"id": "cut", "messages": [{"role": "user", "content": "q"}], "turn": {"role": "assistant", "content": ""},
       "finish_reason": "length"}  # fmt: skip


def test_an_empty_cut_turn_fails_with_thinking_off() -> None:
    with pytest.raises(Exception, match="nothing to train on"):
        training_row({**CUT, "thinking": False})


def test_an_empty_cut_turn_with_thinking_on_trains_on_the_think_end_alone(tmp_path: Path, tok: KimiTokenizer) -> None:
    got = training_row({**CUT, "thinking": True})
    assert got["input_ids"][got["prompt_len"]:] == [tok.special_tokens["</think>"]]
    assert got["flags"] == "truncated"
    path = write_jsonl(tmp_path / "cut.jsonl", [got])
    assert specforge_prompts(path)  # EAGLE-3 trains on it
    with pytest.raises(Rejected, match="fewer than 2"):
        specforge_prompts(path, "dflash")  # the DFlash family skips it without a word


def test_an_empty_finished_turn_with_thinking_off_trains_on_im_end_alone_which_dflash_skips(
    tmp_path: Path, tok: KimiTokenizer
) -> None:
    # from raw model text (no server parser in between) nothing is flagged; from an unnamed server the empty
    # answer may be one its parser emptied (a risk: see docs/pitfalls.md, "Server parsers lose text")
    got = training_row({**CUT, "finish_reason": "stop", "thinking": False, "server": "none"})
    assert got["input_ids"][got["prompt_len"]:] == [tok.special_tokens["<|im_end|>"]] and got["flags"] == ""
    assert training_row({**CUT, "finish_reason": "stop", "thinking": False})["max_severity"] == "risk"
    path = write_jsonl(tmp_path / "empty.jsonl", [got])
    assert specforge_prompts(path)
    with pytest.raises(Rejected, match="fewer than 2"):
        specforge_prompts(path, "dflash")


# -- rows longer than max_length --------------------------------------------------------------------------


def test_both_trainers_would_cut_a_row_longer_than_their_length_limit(tmp_path: Path) -> None:
    r = row(0)
    path = write_jsonl(tmp_path / "r.jsonl", [r])
    n = len(r["input_ids"])
    assert specforge_prompts(path, max_length=n) and speculators_rows(path, seq_length=n)
    with pytest.raises(Rejected, match="cut silently"):
        specforge_prompts(path, max_length=n - 1)
    with pytest.raises(Rejected, match="clipped"):
        speculators_rows(path, seq_length=n - 1)


# -- sample_batch's failed records ------------------------------------------------------------------------


def batch_with_a_failure() -> dict[str, list[Any]]:
    c = CASES[0]
    return {"id": ["bad", "good"], "messages": ["[{\"role\"", json.dumps(c["messages"])],
            "tools": [None, json.dumps(c["tools"])], "turn": [json.dumps(c["turn"])] * 2, "thinking": [c["thinking"]] * 2}  # fmt: skip


def test_sample_batch_error_rows_kept_make_specforge_refuse_the_file(tmp_path: Path, tok: KimiTokenizer) -> None:
    out = sample_batch(batch_with_a_failure(), tok)
    rows = [dict(zip(out, values, strict=True)) for values in zip(*out.values(), strict=True)]
    with pytest.raises(Rejected, match="empty token sequence"):
        specforge_prompts(write_jsonl(tmp_path / "kept.jsonl", rows))


def test_sample_batch_can_omit_error_rows_logging_each_so_the_file_loads_in_specforge(
    tmp_path: Path, tok: KimiTokenizer, caplog: pytest.LogCaptureFixture
) -> None:
    """Fails on the old code: sample_batch had no ``error_rows`` option."""
    with caplog.at_level(logging.WARNING, logger="kimi_recon"):
        out = sample_batch(batch_with_a_failure(), tok, error_rows="omit")
    assert out["id"] == ["good"] and out["error"] == [None]
    assert len(caplog.records) == 1 and "'bad'" in caplog.records[0].getMessage()
    rows = [dict(zip(out, values, strict=True)) for values in zip(*out.values(), strict=True)]
    path = write_jsonl(tmp_path / "omitted.jsonl", rows)
    assert specforge_prompts(path) == [{"input_ids": row(0)["input_ids"], "loss_mask": row(0)["loss_mask"]}]
    assert speculators_rows(path)


def test_sample_batch_with_datasets_map_and_omitted_errors_writes_a_file_both_trainers_take(
    tmp_path: Path, tok: KimiTokenizer
) -> None:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(batch_with_a_failure())
    rows = ds.map(sample_batch, batched=True, remove_columns=ds.column_names, fn_kwargs={"error_rows": "omit"})
    path = tmp_path / "samples.jsonl"
    rows.to_json(str(path))
    assert len(specforge_prompts(path)) == 1 and len(speculators_rows(path)) == 1


def test_sample_batch_refuses_an_unknown_error_rows_choice(tok: KimiTokenizer) -> None:
    with pytest.raises(Exception, match="error_rows"):
        sample_batch(batch_with_a_failure(), tok, error_rows="drop")  # type: ignore[arg-type]
