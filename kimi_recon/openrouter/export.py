"""``kimi-recon export``: the training rows held in a ``generate`` log, in the trainers' plain row format.

The log stays what it is (one resumable row per prompt, with the raw response and its bookkeeping);
export reads it and gives one :class:`~kimi_recon._training_rows.SampleResult` per log row: a training
row for an ``ok`` row that carries its sample (``generate --training-sample``, or ``--prompt-ids``
together with ``output_ids``), an error with the reason for everything else. Nothing is dropped.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from .._training_rows import SampleResult, _failure, row_of_sample
from ..dataset import iter_jsonl, record_id
from ..errors import InvalidInputError
from ..flags import flag_codes_text, flags_from_json, max_severity
from ..training import TrainingSample


def _ids(value: object, field: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InvalidInputError("must be a list of token ids", field=field)
    return value


def _sample(row: Mapping[str, Any]) -> TrainingSample:
    sample = row.get("sample")
    if isinstance(sample, Mapping):
        input_ids = _ids(sample.get("input_ids"), "sample.input_ids")
        loss_mask = _ids(sample.get("loss_mask"), "sample.loss_mask")
        prompt_len = sample.get("prompt_len")
        if len(loss_mask) != len(input_ids) or not isinstance(prompt_len, int):
            raise InvalidInputError("is not a training sample: input_ids and loss_mask differ in length", field="sample")
        return TrainingSample(input_ids, loss_mask, prompt_len)
    if row.get("prompt_ids") is not None and row.get("output_ids") is not None:
        prompt, output = _ids(row["prompt_ids"], "prompt_ids"), _ids(row["output_ids"], "output_ids")
        return TrainingSample(prompt + output, [0] * len(prompt) + [1] * len(output), len(prompt))
    raise InvalidInputError(
        "holds no training sample: run generate with --training-sample (or --prompt-ids), or rebuild it with "
        "build-samples from the prompts and the logged responses",
        field="sample",
    )


def log_row_to_training_row(row: Mapping[str, Any], *, skip_flagged: bool = False, skip_truncated: bool = False) -> dict[str, Any]:
    """The training row of one ``generate`` log row; raises :class:`InvalidInputError` saying why there is none."""
    if row.get("status") != "ok":
        error = row.get("error")
        message = error.get("message") if isinstance(error, Mapping) else error
        raise InvalidInputError(f"generate recorded an error for this prompt: {message}", field="status")
    # any shape an older log holds (flag objects, bare codes); renamed codes come out under their new name
    flags = flags_from_json(row.get("flags"))
    if skip_flagged and flags:
        raise InvalidInputError(f"is flagged ({flag_codes_text(flags).replace(',', ', ')}) and --skip-flagged is set", field="flags")
    if skip_truncated and row.get("truncated"):
        raise InvalidInputError("the turn was cut (truncated) and --skip-truncated is set", field="truncated")
    training = row_of_sample(_sample(row), record_id(row))
    training["flags"] = flag_codes_text(flags)  # the log's flags: the adapter's and the rebuild's
    training["max_severity"] = max_severity(flags)
    counts = row.get("token_counts")
    training["token_counts"] = json.dumps(counts) if isinstance(counts, Mapping) else ""
    return training


def export_rows(
    log: str | os.PathLike[str], *, skip_flagged: bool = False, skip_truncated: bool = False
) -> Iterator[SampleResult]:
    """A result per non-blank line of a ``generate`` log, in order (see the module doc)."""
    for index, (line, row) in enumerate(iter_jsonl(log)):
        if isinstance(row, InvalidInputError):  # a line that is not a JSON object
            yield _failure(index, line, None, row)
            continue
        rid = record_id(row)
        try:
            training = log_row_to_training_row(row, skip_flagged=skip_flagged, skip_truncated=skip_truncated)
        except InvalidInputError as err:
            yield _failure(index, line, rid, err)
            continue
        yield SampleResult(index, line, rid, training)
