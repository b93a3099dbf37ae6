"""The acceptance rules of the trainers' own loaders for pre-tokenized rows, restated as checks.

SpecForge, online mode (``data.prompts_path``, falling back to ``data.train_data_path``), read in
``specforge/data/prompt_builder.py`` (``prepare_prompt_tasks``, ``_prompt_from_record``,
``_normalize_integer_sequence``; sgl-project/SpecForge):

1. the FIRST record decides: it is pre-tokenized when it has ``input_ids``, and then it must also have
   ``loss_mask`` (one without the other is an error); otherwise the whole file is parsed as conversations;
2. every row must hold both fields; ``input_ids`` a one-dimensional sequence of integers (booleans
   refused), ``loss_mask`` one of 0/1 integers, of the same length, not empty;
3. a row with fewer than ``min_loss_tokens`` (1 for EAGLE-3) ones in ``loss_mask`` is skipped without
   a word — for us a lost record, so it is a failure here.

vLLM speculators (``scripts/prepare_data.py --data FILE.jsonl``), read in
``src/speculators/data_generation/preprocessing.py`` (``load_raw_dataset``, ``build_eagle3_dataset``,
``_passthrough_pretokenized``, ``_append_row``; vllm-project/speculators):

1. a ``.jsonl`` file is loaded with ``datasets.load_dataset("json", data_files=..., split="train")``;
2. the rows pass through pre-tokenized when ``{"input_ids", "loss_mask"}`` are columns;
3. each row's two lists must have equal lengths (``len()`` of a null is a TypeError); rows whose mask
   has no 1 are dropped as unsupervised (a lost record: a failure here); other columns are removed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

from extras import require


class Rejected(AssertionError):
    """The trainer's loader would refuse the file, or silently lose a row of it."""


def _int_sequence(value: Any, field: str, where: str, *, binary: bool) -> list[int]:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise Rejected(f"{where}: {field} must be a sequence, got {type(value).__name__}")
    out = []
    for i, item in enumerate(value):
        if isinstance(item, Sequence) and not isinstance(item, (str, bytes)):
            raise Rejected(f"{where}: {field} must be one-dimensional")
        if not isinstance(item, Integral) or (field == "input_ids" and isinstance(item, bool)):
            raise Rejected(f"{where}: {field}[{i}] must be an integer, got {type(item).__name__}")
        if binary and int(item) not in (0, 1):
            raise Rejected(f"{where}: {field}[{i}] must be 0 or 1, got {item}")
        out.append(int(item))
    return out


def specforge_prompts(path: Path, min_loss_tokens: int = 1) -> list[dict[str, list[int]]]:
    """The prompts SpecForge online mode would take from ``path``; raises :class:`Rejected` otherwise."""
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not records:
        return []
    first = records[0]
    if ("input_ids" in first) != ("loss_mask" in first):
        raise Rejected("the first record has only one of input_ids and loss_mask")
    if "input_ids" not in first:
        raise Rejected("the first record has no input_ids: SpecForge would read the whole file as conversations")
    prompts = []
    for n, record in enumerate(records, 1):
        where = f"{path.name}:{n}"
        if "input_ids" not in record or "loss_mask" not in record:
            raise Rejected(f"{where} must contain both input_ids and loss_mask")
        ids = _int_sequence(record["input_ids"], "input_ids", where, binary=False)
        mask = _int_sequence(record["loss_mask"], "loss_mask", where, binary=True)
        if len(ids) != len(mask):
            raise Rejected(f"{where} has mismatched input_ids/loss_mask lengths")
        if not ids:
            raise Rejected(f"{where} contains an empty token sequence")
        if sum(mask) < min_loss_tokens:
            raise Rejected(f"{where} has fewer than {min_loss_tokens} trained tokens: it would be skipped silently")
        prompts.append({"input_ids": ids, "loss_mask": mask})
    return prompts


def speculators_rows(path: Path) -> list[dict[str, list[int]]]:
    """The rows ``prepare_data.py --data path`` would pass through; raises :class:`Rejected` otherwise."""
    datasets = require("datasets")

    try:
        ds = datasets.load_dataset("json", data_files=str(path), split="train")
    except Exception as err:  # the loader itself failing is a rejection, whatever its type
        raise Rejected(f"datasets' JSON loader failed: {type(err).__name__}: {err}") from err
    if not {"input_ids", "loss_mask"} <= set(ds.column_names):
        raise Rejected(f"columns {ds.column_names} are not pre-tokenized rows: they would be rendered again")
    rows = []
    for n, (ids, mask) in enumerate(zip(ds["input_ids"], ds["loss_mask"], strict=True)):
        if ids is None or mask is None:
            raise Rejected(f"row {n}: a null column (TypeError: object of type 'NoneType' has no len())")
        if len(ids) != len(mask):
            raise Rejected(f"row {n}: Pre-tokenized row shape mismatch")
        if sum(mask) == 0:
            raise Rejected(f"row {n} has no supervised token: it would be dropped")
        rows.append({"input_ids": list(ids), "loss_mask": list(mask)})
    return rows
