"""``kimi-recon export``: the training rows held in a ``generate`` log, in the trainers' plain row format.

The log stays what it is (one resumable row per prompt, with the raw response and its bookkeeping);
export reads it and gives one :class:`~kimi_recon._batch.training_rows.SampleResult` per prompt: a training
row for an ``ok`` row that carries its sample (``generate --training-sample``, or ``--prompt-ids``
together with ``output_ids``), an error with the reason for everything else. Nothing is dropped; an
error row that a later retry of the same prompt (``--retry-errors``) superseded is history, not a result.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from .._base.arguments import bool_argument, instance_argument, int_argument, path_argument
from .._base.files import is_stdio, read_lines
from .._batch.training_rows import SampleResult, _failure, _learned_for_rows, row_of_sample, with_max_length
from .._compare.ids import check_ids
from .._records.record import _parse_line
from ..dataset import iter_jsonl, record_id
from ..errors import InvalidInputError, preview
from ..flags import flag_codes_text, flags_from_json, max_severity
from ..tokenizer import KimiTokenizer, checked_tokenizer, load_tokenizer
from ..training import TrainingSample


def _ids(value: object, field: str, tokenizer: KimiTokenizer | None = None) -> list[int]:
    if tokenizer is not None:
        return check_ids(value, tokenizer, field)
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise InvalidInputError("must be a list of token ids", field=field)
    return value


def _sample(row: Mapping[str, Any], tokenizer: KimiTokenizer | None = None) -> TrainingSample:
    """The row's sample, checked as :func:`~kimi_recon._batch.training_rows.row_of_sample` needs it: a trainer
    reads these columns as they are, so a wrong id, mask value or prompt length would be trained on."""
    sample = row.get("sample")
    if isinstance(sample, Mapping):
        input_ids = _ids(sample.get("input_ids"), "sample.input_ids", tokenizer)
        loss_mask = _ids(sample.get("loss_mask"), "sample.loss_mask")
        prompt_len = sample.get("prompt_len")
        if len(loss_mask) != len(input_ids):
            raise InvalidInputError(
                f"is not a training sample: input_ids ({len(input_ids)}) and loss_mask ({len(loss_mask)}) differ in length", field="sample"
            )
        if not set(loss_mask) <= {0, 1}:
            raise InvalidInputError(f"must hold only 0 and 1, found {sorted(set(loss_mask) - {0, 1})[:5]}", field="sample.loss_mask")
        if isinstance(prompt_len, bool) or not isinstance(prompt_len, int) or not 0 <= prompt_len <= len(input_ids):
            raise InvalidInputError(f"must be an integer from 0 to {len(input_ids)} (the ids' length), got {preview(prompt_len)}", field="sample.prompt_len")
        if any(loss_mask[:prompt_len]):
            raise InvalidInputError("trains on the prompt: loss_mask is 1 before prompt_len", field="sample.loss_mask")
        return TrainingSample(input_ids, loss_mask, prompt_len)
    if row.get("prompt_ids") is not None and row.get("output_ids") is not None:
        prompt, output = _ids(row["prompt_ids"], "prompt_ids", tokenizer), _ids(row["output_ids"], "output_ids", tokenizer)
        return TrainingSample(prompt + output, [0] * len(prompt) + [1] * len(output), len(prompt))
    raise InvalidInputError(
        "holds no training sample: run generate with --training-sample (or --prompt-ids), or rebuild it with "
        "build-samples from the prompts and the logged responses",
        field="sample",
    )


def log_row_to_training_row(
    row: Mapping[str, Any], *, skip_flagged: bool = False, skip_truncated: bool = False, tokenizer: KimiTokenizer | None = None
) -> dict[str, Any]:
    """The training row of one ``generate`` log row; raises :class:`InvalidInputError` saying why there is none.

    With ``tokenizer``, every id must be in its vocabulary (:func:`~kimi_recon.compare.check_ids`)."""
    instance_argument(row, "row", Mapping, "a mapping (one log row)")
    bool_argument(skip_flagged, "skip_flagged")
    bool_argument(skip_truncated, "skip_truncated")
    checked_tokenizer(tokenizer)
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
    training = row_of_sample(_sample(row, tokenizer), record_id(row))
    training["flags"] = flag_codes_text(flags)  # the log's flags: the adapter's and the rebuild's
    training["max_severity"] = max_severity(flags)
    counts = row.get("token_counts")
    training["token_counts"] = json.dumps(counts) if isinstance(counts, Mapping) else ""
    return training


#: The head of a row as ``generate`` writes it (``id`` first, then ``status``): read without parsing the row.
_ROW_HEAD = re.compile(rb'\{"id": ("(?:[^"\\]|\\.)*"), "status": "(\w+)"')


def _head(raw: bytes) -> tuple[str, bool] | None:
    """The id of a log line and whether its status is ``ok``, or None for a line that is not a row."""
    match = _ROW_HEAD.match(raw)
    if match is not None:
        return str(json.loads(match.group(1))), match.group(2) == b"ok"
    record = _parse_line(raw, None)  # a row written otherwise (by hand, by an older version)
    if isinstance(record, InvalidInputError) or record_id(record) is None:
        return None
    return str(record_id(record)), record.get("status") == "ok"


def superseded_lines(log: str | os.PathLike[str]) -> frozenset[int]:
    """The line numbers of the error rows of a ``generate`` log that a later row of the same prompt
    superseded (``generate --retry-errors``): a prompt's outcome is its last row."""
    last: dict[str, tuple[int, bool]] = {}  # id -> (line of its latest row, whether that row is ok)
    superseded: set[int] = set()
    for line_no, raw in enumerate(read_lines(log), 1):  # the bounded reader, so line numbers match iter_jsonl's
        head = _head(raw) if raw.strip() else None
        if head is None:
            continue
        rid, ok = head
        previous = last.get(rid)
        if previous is not None and not previous[1]:
            superseded.add(previous[0])
        last[rid] = (line_no, ok)
    return frozenset(superseded)


def export_rows(
    log: str | os.PathLike[str],
    *,
    skip_flagged: bool = False,
    skip_truncated: bool = False,
    tokenizer: KimiTokenizer | None = None,
    max_length: int | None = None,
    drop_over_length: bool = False,
) -> Iterator[SampleResult]:
    """A result per non-blank line of a ``generate`` log, in order (see the module doc), except the error
    rows that a later row of the same prompt superseded (:func:`superseded_lines`): they are history.
    ``tokenizer`` (default: the bundled one) is the vocabulary every id is checked against. ``max_length`` and
    ``drop_over_length`` are :func:`~kimi_recon._batch.training_rows.build_samples`'s (the trainers' silent cut).

    The log is read twice (once for the ids, then for the rows); from stdin, which can be read only once,
    the failures of error rows wait until the end of the log instead and then follow in log order.
    """
    path_argument(log, "log")
    bool_argument(skip_flagged, "skip_flagged")
    bool_argument(skip_truncated, "skip_truncated")
    bool_argument(drop_over_length, "drop_over_length")
    limit = None if max_length is None else int_argument(max_length, "max_length", minimum=1)
    if drop_over_length and limit is None:
        raise InvalidInputError("needs a max_length to drop rows over", field="drop_over_length")
    # a row whose count fits only another convention than the rest of its provider's rows follow is flagged
    learned = _learned_for_rows(_all_results(log, skip_flagged, skip_truncated, tokenizer), skip_flagged=skip_flagged)
    yield from (with_max_length(result, limit, drop_over_length) for result in learned)


def _all_results(log: str | os.PathLike[str], skip_flagged: bool, skip_truncated: bool, tokenizer: KimiTokenizer | None) -> Iterator[SampleResult]:
    tok = checked_tokenizer(tokenizer)
    tok = tok if tok is not None else load_tokenizer()
    if not is_stdio(log):
        skip = superseded_lines(log)
        for result in _results(log, skip_flagged, skip_truncated, tok, held=None):
            if result.line not in skip:
                yield result
        return
    held: dict[str, SampleResult] = {}
    yield from _results(log, skip_flagged, skip_truncated, tok, held=held)
    yield from sorted(held.values(), key=lambda result: result.index)


def _results(
    log: str | os.PathLike[str],
    skip_flagged: bool,
    skip_truncated: bool,
    tok: KimiTokenizer,
    *,
    held: dict[str, SampleResult] | None,
) -> Iterator[SampleResult]:
    """A result per line; with ``held``, an error row's failure is kept there (by id) until a later row of
    its prompt replaces it, instead of being yielded."""
    for index, (line, row) in enumerate(iter_jsonl(log)):
        if isinstance(row, InvalidInputError):  # a line that is not a JSON object
            yield _failure(index, line, None, row)
            continue
        rid = record_id(row)
        if held is not None and rid is not None:
            held.pop(rid, None)  # superseded by this row
        try:
            training = log_row_to_training_row(row, skip_flagged=skip_flagged, skip_truncated=skip_truncated, tokenizer=tok)
        except InvalidInputError as err:
            failure = _failure(index, line, rid, err)
            if held is not None and rid is not None and row.get("status") != "ok":
                held[rid] = failure
            else:
                yield failure
            continue
        yield SampleResult(index, line, rid, training, provider=_provider(row) if training["token_counts"] else None)


def _provider(row: Mapping[str, Any]) -> str | None:
    """Who served a log row's response: its ``provider`` (OpenRouter's), else the server ``generate`` was told."""
    for key in ("provider", "server"):
        value = row.get(key)
        if isinstance(value, str) and value and value != "unknown":
            return value
    return None
