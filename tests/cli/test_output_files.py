"""Output files: the errors file never shares a file with the rows, devices get no sidecar, export writes only
rows a trainer can use, and temporary files of a killed run do not pile up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon import build_training_sample, load_tokenizer
from kimi_recon._base.files import atomic_output, remove_stale_partials
from kimi_recon.cli import main

REPO = Path(__file__).resolve().parents[2]
CASES = read_jsonl(OFFICIAL / "turns.jsonl")[:4]


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def sample_rows() -> list[Any]:
    rows: list[Any] = [{"id": i, "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]} for i, c in enumerate(CASES)]
    return rows + ["{not json"]


def ok_log_row(rid: str) -> dict[str, Any]:
    c = CASES[0]
    sample = build_training_sample(c["messages"], c["turn"], c["tools"], thinking=c["thinking"], tokenizer=load_tokenizer())
    return {"id": rid, "status": "ok", "line": 1, "flags": [], "truncated": False, "sample": sample.to_dict(), "response": {}}


def log_rows() -> list[Any]:
    return [ok_log_row("a"), {"id": "b", "status": "error", "line": 2, "error": {"message": "bad gateway"}}, "{torn"]


@pytest.mark.parametrize("link", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("command", ["build-samples", "export"])
def test_errors_file_equal_to_the_output_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, link: str) -> None:
    """Failed on the old code: the error rows and the training rows overwrote each other in one file
    (build-samples kept 13 of 28 records)."""
    src = write_jsonl(tmp_path / "in.jsonl", sample_rows() if command == "build-samples" else log_rows())
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    errors = out
    if link == "symlink":
        errors = tmp_path / "errors.jsonl"
        errors.symlink_to(out)
    elif link == "hardlink":
        errors = tmp_path / "errors.jsonl"
        os.link(out, errors)
    assert main([command, str(src), "-o", str(out), "--errors", str(errors)]) == 2
    assert "--errors" in capsys.readouterr().err
    assert out.read_text() == "old\n"


@pytest.mark.parametrize("command", ["build-samples", "export"])
def test_dev_null_output_gets_no_sidecar_file(tmp_path: Path, command: str) -> None:
    """Failed on the old code: `-o /dev/null` created a regular file /dev/null.errors.jsonl."""
    src = write_jsonl(tmp_path / "in.jsonl", sample_rows() if command == "build-samples" else log_rows())
    sidecar = Path(os.devnull + ".errors.jsonl")
    existed = sidecar.exists()
    try:
        result = subprocess.run(
            [sys.executable, "-m", "kimi_recon.cli", command, str(src), "-o", os.devnull],
            check=False, capture_output=True, text=True, timeout=120, cwd=REPO,
        )
        assert result.returncode == 1  # one record failed: it is listed on stderr instead
        assert "error: line" in result.stderr
        assert existed or not sidecar.exists()
    finally:
        if not existed and sidecar.exists():
            sidecar.unlink()


@pytest.mark.parametrize(
    ("sample", "field"),
    [
        ({"input_ids": [-1, 2**70], "loss_mask": [0, 1], "prompt_len": 1}, "sample.input_ids"),
        ({"input_ids": [1, 2], "loss_mask": [7, 9], "prompt_len": 1}, "sample.loss_mask"),
        ({"input_ids": [1, 2], "loss_mask": [0, 1], "prompt_len": -3}, "sample.prompt_len"),
        ({"input_ids": [1, 2], "loss_mask": [0, 1], "prompt_len": 5}, "sample.prompt_len"),
        ({"input_ids": [1, 2], "loss_mask": [0, 1], "prompt_len": True}, "sample.prompt_len"),
        ({"input_ids": [1, 2, 3], "loss_mask": [1, 0, 1], "prompt_len": 1}, "sample.loss_mask"),
    ],
)
def test_export_refuses_rows_a_trainer_would_train_wrong(tmp_path: Path, sample: dict[str, Any], field: str) -> None:
    """Failed on the old code: input_ids [-1, 2**70], loss_mask [7, 9] and prompt_len -3 were written as training rows."""
    bad = dict(ok_log_row("bad"), sample=sample)
    log = write_jsonl(tmp_path / "log.jsonl", [ok_log_row("good"), bad])
    out = tmp_path / "t.jsonl"
    assert main(["export", str(log), "-o", str(out), "-q"]) == 1
    assert [r["id"] for r in read_jsonl(out)] == ["good"]
    [error] = read_jsonl(tmp_path / "t.errors.jsonl")
    assert (error["id"], error["field"], error["line"]) == ("bad", field, 2)


def test_export_checks_prompt_and_output_ids_against_the_vocabulary(tmp_path: Path) -> None:
    row = dict(ok_log_row("x"), sample=None, prompt_ids=[1, 2], output_ids=[3, 10**9])
    log = write_jsonl(tmp_path / "log.jsonl", [row])
    assert main(["export", str(log), "-o", str(tmp_path / "t.jsonl"), "-q"]) == 1
    [error] = read_jsonl(tmp_path / "t.errors.jsonl")
    assert error["field"] == "output_ids" and "outside the vocabulary" in error["error"]


def test_a_dead_writers_partial_file_is_removed_by_the_next_write(tmp_path: Path) -> None:
    """Failed on the old code: every kill -9 left a .partial file that no later run removed."""
    target = tmp_path / "out.jsonl"
    child = subprocess.run(
        [sys.executable, "-c", "import os, tempfile, sys\n"
         "from kimi_recon._base.files import _partial_prefix\n"
         "fd, p = tempfile.mkstemp(dir=sys.argv[1], prefix=_partial_prefix(sys.argv[2]), suffix='.partial')\n"
         "print(p)", str(tmp_path), str(target)],
        capture_output=True, text=True, timeout=60, cwd=REPO, check=True,
    )  # fmt: skip
    stale = Path(child.stdout.strip())
    assert stale.exists()  # the child is gone: its pid no longer runs
    foreign = tmp_path / ".out.jsonl.otherhost-1.abcd.partial"
    foreign.write_text("")
    with atomic_output(target) as f:
        f.write("new\n")
    assert not stale.exists() and foreign.exists() and target.read_text() == "new\n"


def test_a_live_writers_partial_file_is_kept(tmp_path: Path) -> None:
    target = tmp_path / "out.jsonl"
    with atomic_output(target) as f:
        f.write("x")
        mine = [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
        assert remove_stale_partials(str(target)) == [] and all(p.exists() for p in mine)
