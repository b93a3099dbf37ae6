"""The same training rows at scale: HF datasets with num_proc=2 and a local Ray cluster give the CLI's rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from extras import require
from testdata import OFFICIAL, read_jsonl

from kimi_recon import sample_batch
from kimi_recon.cli import main

CASES = read_jsonl(OFFICIAL / "turns.jsonl")
RECORDS: list[dict[str, Any]] = [
    {"id": f"r{n}-{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]}
    for n in range(3)
    for i, c in enumerate(CASES)
]
RECORDS[7] = {"id": "bad-1", "turn": CASES[0]["turn"]}  # no messages
RECORDS[150] = {"id": "bad-2", "messages": CASES[0]["messages"], "turn": {"content": 5}}  # content not text


def as_text_columns(record: dict[str, Any]) -> dict[str, Any]:
    """The record as Arrow stores it safely: nested data as JSON text."""
    return {k: json.dumps(v) if k in ("messages", "tools", "turn") else v for k, v in record.items()} | {
        k: None for k in ("messages", "tools", "thinking") if k not in record
    }


@pytest.fixture(scope="module")
def cli_rows(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], list[str]]:
    tmp = tmp_path_factory.mktemp("cli")
    src = tmp / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    assert main(["build-samples", str(src), "-o", str(tmp / "rows.jsonl")]) == 1
    return read_jsonl(tmp / "rows.jsonl"), [e["id"] for e in read_jsonl(tmp / "rows.errors.jsonl")]


def split(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    good = [{k: v for k, v in r.items() if k != "error"} for r in rows if r["error"] is None]
    return good, [r["id"] for r in rows if r["error"] is not None]


def test_datasets_map_with_two_processes_gives_the_cli_rows(cli_rows: tuple[list[dict[str, Any]], list[str]]) -> None:
    datasets = require("datasets")

    ds = datasets.Dataset.from_list([as_text_columns(r) for r in RECORDS])
    out = ds.map(sample_batch, batched=True, batch_size=32, num_proc=2, remove_columns=ds.column_names)
    assert len(out) == len(RECORDS) > 300
    assert split(out.to_list()) == cli_rows


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    ray = require("ray")

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def test_ray_data_map_batches_in_the_default_format_gives_the_cli_rows(
    ray_local: Any, cli_rows: tuple[list[dict[str, Any]], list[str]]
) -> None:
    ctx = ray_local.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    ds = ray_local.data.from_items([as_text_columns(r) for r in RECORDS], override_num_blocks=4)
    out = ds.map_batches(sample_batch, batch_size=32).take_all()  # default batch_format: dicts of numpy arrays
    rows = [{k: (v.tolist() if hasattr(v, "tolist") else v) for k, v in row.items()} for row in out]
    assert len(rows) == len(RECORDS)
    assert split(rows) == cli_rows
