"""Training rows for the EAGLE-3 trainers: one record, a batch (HF ``datasets`` / Ray Data), or a whole file.

A training row holds exactly what SpecForge (online ``prompts_path``) and vLLM speculators
(``prepare_data.py --data``) read as pre-tokenized input, plus columns both ignore::

    {"id": "conv-1", "input_ids": [...], "loss_mask": [0, ..., 1, ...], "prompt_len": 812, "flags": "",
     "max_severity": "", "token_counts": ""}

Every column has one type in every row, because the Hugging Face JSON loader fixes a column's type from
the first block it reads (10 MB) and fails on a later row that disagrees: ``id`` is always a string
(``line-N`` for a record without one), ``flags`` a comma-separated string of flag codes (``""`` for
none: :func:`~kimi_recon.flags.flag_codes_text`, the flat form of the flag objects other outputs write)
rather than a list that would be empty, hence untyped, in most rows, ``max_severity`` the highest severity
among them (``""``, ``"info"``, ``"risk"``, ``"loss"``: :func:`~kimi_recon.flags.max_severity`), and ``token_counts`` the usage
check as JSON text (``""`` when the record carried no usage) rather than an object most rows lack. A record that cannot become
a row — malformed, or with no output token to train on — is an error, never a row: the trainers either
stop at it or skip it silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import os
import sys
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, Literal, TextIO

from .._base.arguments import choice_argument, int_argument
from .._base.files import SURROGATE, to_json_line
from .._base.terminal import terminal_safe
from .._records.arrow import arrow_value, check_batch, plain
from .._records.record import (
    RESPONSE_KEYS,
    RecordError,
    RecordsArg,
    TokenizerArg,
    _as_record,
    batch_indices,
    get_tokenizer,
    record_error,
    record_id,
    record_server,
)
from ..errors import InvalidInputError, OutputFileError
from ..flags import Flag, FlagCode, Severity, flag_codes_text, flags_at_least, max_severity, severity_argument, severity_of
from ..profiles import get_profile
from ..record_options import arrow_tools
from ..tokenizer import KimiTokenizer
from ..training import TrainingSample, sample_from_record
from ..usage_check import COMPLETION, Convention, CountCheck, TokenCounts
from ..usage_stats import learned_conventions_applied
from .pool import _Item, _Job, _progress_bar, _stream, _tokenizer_source, _worker_count

__all__ = [
    "BATCH_COLUMNS",
    "ROW_COLUMNS",
    "SampleResult",
    "WriteSummary",
    "build_samples",
    "default_errors_path",
    "errors_path_for",
    "sample_batch",
    "training_row",
    "write_training_rows",
]

#: The columns of a training row, in the order they are written.
ROW_COLUMNS: tuple[str, ...] = ("id", "input_ids", "loss_mask", "prompt_len", "flags", "max_severity", "token_counts")
#: The columns :func:`sample_batch` returns: a row's, plus ``error`` (None, or why the record failed).
BATCH_COLUMNS: tuple[str, ...] = (*ROW_COLUMNS, "error")
#: Record keys that may hold JSON text instead of objects (Arrow columns are often stored that way).
#: ``tools`` and the other options are read by :func:`kimi_recon.record_options.parse_options`, which takes
#: JSON text and undoes Arrow's null filling of tool schemas where that can be done exactly.
_JSON_KEYS: tuple[str, ...] = ("messages", *RESPONSE_KEYS)


def row_of_sample(
    sample: TrainingSample, row_id: str | None, drop_severity: Severity | str | None = None, max_length: int | None = None
) -> dict[str, Any]:
    """The training row of a sample; raises when it has nothing to train on (the trainers would drop it), or
    when ``drop_severity`` is given and a flag is at or above it (the row is refused, never left out silently).
    A row longer than ``max_length`` ids is flagged ``over_max_length`` (:func:`over_length_flag`)."""
    if not sample.output_ids:
        raise InvalidInputError(
            "gives no output token, so the row would have nothing to train on (loss_mask all 0)", field="response"
        )
    over = over_length_flag(len(sample.input_ids), sample.prompt_len, max_length)
    flags = sample.flags if over is None else (*sample.flags, over)
    if drop_severity is not None:
        floor = severity_argument(drop_severity, "drop_severity")
        dropping = flags_at_least(flags, floor)
        if dropping:
            codes = ", ".join(sorted({f"{f.code.value} ({f.severity.value})" for f in dropping}))
            raise InvalidInputError(f"is flagged {codes}, at or above the dropped severity {floor.value!r}", field="flags")
    return {
        "id": row_id,
        "input_ids": sample.input_ids,
        "loss_mask": sample.loss_mask,
        "prompt_len": sample.prompt_len,
        "flags": flag_codes_text(flags),
        "max_severity": max_severity(flags),
        "token_counts": json.dumps(sample.token_counts.to_dict()) if sample.token_counts is not None else "",
    }


def over_length_flag(length: int, prompt_len: int, max_length: int | None) -> Flag | None:
    """The ``over_max_length`` flag of a row of ``length`` ids (the first ``prompt_len`` the prompt) when it is
    longer than ``max_length``, else None. The ids are right; what the flag warns of is the trainer's cut:
    SpecForge keeps ``input_ids[:max_length]`` of a pre-tokenized row and vLLM speculators clips to
    ``--seq-length``, neither with an error, and both skip a row with no trained-on id left."""
    if max_length is None or length <= max_length:
        return None
    output = length - prompt_len
    kept = max(0, max_length - prompt_len)
    what = (
        f"{kept:,} of its {output:,} output ids are trained on"
        if kept
        else f"the prompt alone ({prompt_len:,} ids) fills it, so no output id is left and the trainer skips the row without a word"
    )
    return Flag(
        FlagCode.OVER_MAX_LENGTH,
        f"{length:,} ids, over the max length {max_length:,}: SpecForge (data.max_length) and vLLM speculators "
        f"(--seq-length) keep the first {max_length:,} without an error; {what}",
        "input_ids",
    )


def with_max_length(result: SampleResult, max_length: int | None, drop_over_length: bool = False) -> SampleResult:
    """``result`` with its row flagged ``over_max_length`` when it has more than ``max_length`` ids (its
    ``over_length`` set), or, with ``drop_over_length``, turned into a failure (field ``input_ids``): what
    :func:`build_samples` does, for rows made elsewhere (``export``)."""
    row = result.row
    if max_length is None or row is None or len(row["input_ids"]) <= max_length:
        return result
    n, prompt_len = len(row["input_ids"]), row["prompt_len"]
    if drop_over_length:
        return dataclasses.replace(_failure(result.index, result.line, result.record_id, _too_long(n, prompt_len, max_length)), over_length=n)
    flag = over_length_flag(n, prompt_len, max_length)
    assert flag is not None
    codes = [c for c in str(row["flags"]).split(",") if c]
    flagged = {**row, "flags": ",".join([*codes, flag.code.value]), "max_severity": row["max_severity"] or flag.severity.value}
    return dataclasses.replace(result, row=flagged, over_length=n)


def _too_long(n: int, prompt_len: int, max_length: int) -> InvalidInputError:
    return InvalidInputError(
        f"has {n:,} ids (prompt {prompt_len:,} + output {n - prompt_len:,}), over the max length {max_length:,}: left out as asked (drop over length)",
        field="input_ids",
    )


def _max_length(max_length: int | None) -> int | None:
    return None if max_length is None else int_argument(max_length, "max_length", minimum=1)


def training_row(
    record: Mapping[str, Any],
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    template: str | None = None,
    drop_severity: Severity | str | None = None,
    server: str | None = None,
    max_length: int | None = None,
) -> dict[str, Any]:
    """One record's training row (see the module doc); raises :class:`InvalidInputError` naming the field and id.

    ``template`` replaces the profile's chat template for the prompt (see :func:`~kimi_recon.training.sample_from_record`).
    ``drop_severity`` (e.g. ``"loss"``) refuses a record with a flag at or above it (field ``flags``).
    ``max_length`` flags a row of more ids ``over_max_length`` (the trainers' silent cut; docs/pitfalls.md)."""
    limit = _max_length(max_length)
    tok = get_tokenizer(tokenizer)
    sample = sample_from_record(record, tok, profile=profile, thinking=thinking, template=template, server=server)
    rid = record_id(record)
    try:
        return row_of_sample(sample, rid, drop_severity, limit)
    except InvalidInputError as err:
        raise err.with_sample(rid) from None


@dataclass(frozen=True)
class SampleResult:
    """One input record's outcome: its training ``row``, or the ``error`` that prevented one."""

    index: int
    line: int | None
    record_id: str | None
    row: dict[str, Any] | None = None
    error: RecordError | None = None
    #: the row's number of ids when it is over the ``max_length`` asked for (flagged, or left out), else 0
    over_length: int = 0
    #: who served the response, as the usage table groups it (the record's ``provider``, else its server's name),
    #: for a row whose usage was checked; None otherwise
    provider: str | None = None

    def error_row(self) -> dict[str, Any]:
        """The line written to the errors file: where the record is, its id, the field and the reason."""
        assert self.error is not None
        return {
            "id": self.record_id,
            "line": self.line,
            "index": self.index,
            "field": self.error.field,
            "error": str(self.error),
            "error_type": self.error.error_type,
        }


def _failure(index: int, line: int | None, rid: str | None, err: Exception) -> SampleResult:
    error = record_error(index, line, rid, err)
    return SampleResult(index, error.line, rid, error=error)


def sample_result(
    record: object,
    tok: KimiTokenizer,
    *,
    profile: str | None,
    thinking: bool | None,
    template: str | None = None,
    index: int = 0,
    line: int | None = None,
    drop_severity: Severity | str | None = None,
    server: str | None = None,
    max_length: int | None = None,
    drop_over_length: bool = False,
) -> SampleResult:
    """:func:`training_row` that never raises: a record's failure (of any kind) is a result with an error.
    ``drop_over_length`` makes a row over ``max_length`` such a failure (field ``input_ids``)."""
    rid: str | None = None
    try:
        rec = _as_record(record, line)
        rid = record_id(rec)
        row = training_row(
            rec, tok, profile=profile, thinking=thinking, template=template, drop_severity=drop_severity, server=server, max_length=max_length
        )
    except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
        return _failure(index, line, rid, err)
    over = len(row["input_ids"]) if max_length is not None and len(row["input_ids"]) > max_length else 0
    if over and drop_over_length:
        assert max_length is not None
        return dataclasses.replace(_failure(index, line, rid, _too_long(over, row["prompt_len"], max_length)), over_length=over)
    if row["id"] is None:
        row["id"] = f"line-{line}" if line is not None else f"record-{index}"
    return SampleResult(index, line, rid, row, over_length=over, provider=_provider_of(rec, server) if row["token_counts"] else None)


def _provider_of(record: Mapping[str, Any], server: str | None) -> str | None:
    """Who served ``record``'s response, as the usage table says it: its ``provider``, else the server named or
    detected (``"Together"``, ``"vllm==0.33.0"``), else None (unknown)."""
    provider = record.get("provider")
    if isinstance(provider, str) and provider:
        return provider
    name = record_server(record, server).name
    return None if name == "unknown" else name


def _row_usage(result: SampleResult) -> tuple[str | None, TokenCounts | None, bool]:
    """``(provider, completion check, closed)`` of a result's row, read back from its columns."""
    row = result.row
    if row is None or not row["token_counts"]:
        return None, None, True
    figure = json.loads(row["token_counts"]).get(COMPLETION)
    if not isinstance(figure, Mapping):
        return result.provider, None, True
    convention = None if figure.get("convention") is None else Convention(figure["convention"])
    check = CountCheck(COMPLETION, figure["reported"], figure["rebuilt"], convention)
    cut = {"truncated", "truncated_tool_calls"} & set(row["flags"].split(","))
    return result.provider, TokenCounts(completion=check), not cut


def _learned_for_rows(results: Iterable[SampleResult], *, floor: str | None = None, skip_flagged: bool = False) -> Iterator[SampleResult]:
    """``results`` in order, a row whose count fits only another convention than its provider's rows follow flagged
    (:func:`~kimi_recon.usage_stats.learned_conventions_applied`), or a failure when ``floor`` drops rows of its
    severity or ``skip_flagged`` every flagged row (``export --skip-flagged``)."""
    return learned_conventions_applied(results, _row_usage, functools.partial(_row_flagged, floor=floor, skip_flagged=skip_flagged))


def _row_flagged(result: SampleResult, flag: Flag, floor: str | None, skip_flagged: bool = False) -> SampleResult:
    """``result`` with ``flag`` added to its row, or a failure when ``floor`` drops rows of its severity (or
    ``skip_flagged`` every flagged row)."""
    assert result.row is not None
    if skip_flagged:
        err = InvalidInputError(f"is flagged ({flag.code.value}) and --skip-flagged is set", field="flags")
        return _failure(result.index, result.line, result.record_id, err)
    if floor is not None and flag.severity >= Severity(floor):
        err = InvalidInputError(f"is flagged {flag.code.value} ({flag.severity.value}), at or above the dropped severity {floor!r}", field="flags")
        return _failure(result.index, result.line, result.record_id, err)
    codes = flag_codes_text((flag,))
    row = {**result.row, "flags": f"{result.row['flags']},{codes}" if result.row["flags"] else codes}
    worst = result.row["max_severity"]
    row["max_severity"] = flag.severity.value if not worst or flag.severity >= Severity(worst) else worst
    counts = json.loads(row["token_counts"])
    counts[COMPLETION] = {**counts[COMPLETION], "convention": None}  # the figure no longer agrees, as the flag says
    row["token_counts"] = json.dumps(counts)
    return dataclasses.replace(result, row=row)


def _sample_chunk(
    items: list[_Item],
    job: _Job,
    tokenizer: KimiTokenizer | None = None,
    *,
    template: str | None = None,
    drop_severity: str | None = None,
    max_length: int | None = None,
    drop_over_length: bool = False,
) -> list[SampleResult]:
    tok = tokenizer if tokenizer is not None else get_tokenizer(job.tokenizer)
    return [
        sample_result(
            rec,
            tok,
            profile=job.profile,
            thinking=job.thinking,
            template=template,
            index=i,
            line=line,
            drop_severity=drop_severity,
            server=job.server,
            max_length=max_length,
            drop_over_length=drop_over_length,
        )
        for i, line, rec in items
    ]


def build_samples(
    records: RecordsArg,
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    template: str | None = None,
    workers: int | None = 1,
    chunk_size: int = 16,
    progress: bool | None = False,
    drop_severity: Severity | str | None = None,
    server: str | None = None,
    max_length: int | None = None,
    drop_over_length: bool = False,
) -> Generator[SampleResult, None, None]:
    """A :class:`SampleResult` for every record of a JSONL path or an iterable, lazily and in input order.

    ``workers`` > 1 (None or 0: all cores) spreads chunks of ``chunk_size`` records over a process pool
    with the tokenizer loaded once per worker; the results are the same as with one worker.
    ``drop_severity`` makes a record flagged at or above it a failure (see :func:`training_row`).
    ``max_length`` flags every row of more ids ``over_max_length`` (its result's ``over_length`` says how many);
    with ``drop_over_length`` such a record is a failure instead (field ``input_ids``), never left out silently.
    """
    limit = _max_length(max_length)
    if drop_over_length and limit is None:
        raise InvalidInputError("needs a max_length to drop rows over", field="drop_over_length")
    if profile is not None:
        get_profile(profile)
    drop = None if drop_severity is None else severity_argument(drop_severity, "drop_severity").value
    n = _worker_count(workers)
    tok, source = _tokenizer_source(tokenizer, n)
    if server is not None:
        from ..servers import get_server

        get_server(server)  # a typo fails the call, not every record
    job = _Job(source, profile, thinking, True, server)
    with _progress_bar(records, progress, "build-samples") as bar:
        # picklable: a module function, strings and numbers
        work = functools.partial(_sample_chunk, template=template, drop_severity=drop, max_length=limit, drop_over_length=bool(drop_over_length))
        # a row whose count fits only another convention than its provider's rows follow is flagged (and dropped
        # at that severity) here, where the run's rows are seen together
        for result in _learned_for_rows(_stream(records, work, job, tok, n, chunk_size, slim=False), floor=drop):
            bar.update(1)
            yield result


# -- batches: datasets.Dataset.map(batched=True) and Ray Data map_batches -----------------------------


def batch_record(batch: Mapping[str, Any], columns: Sequence[str], i: int) -> dict[str, Any]:
    """Row ``i`` of a batch whose objects came through Arrow, read as :mod:`kimi_recon._records.arrow` says; JSON text
    columns (``messages``, ``tools``, the response) parsed. Raises :class:`InvalidInputError` naming the column."""
    record: dict[str, Any] = {}
    for column in columns:
        value = plain(batch[column][i])
        if isinstance(value, (str, bytes)):
            if column in _JSON_KEYS:
                try:
                    value = json.loads(value)
                except RecursionError:
                    raise InvalidInputError("is JSON text nested too deeply", field=column) from None
                except ValueError as err:
                    raise InvalidInputError(f"is text but not JSON: {err}", field=column) from None
        elif column == "tools":
            value = arrow_tools(value)
        else:
            value = arrow_value(column, value)
        record[column] = value
    return record


#: Where :func:`sample_batch` reports the records it leaves out with ``error_rows="omit"``.
_log = logging.getLogger("kimi_recon")


def sample_batch(
    batch: Mapping[str, Any],
    tokenizer: TokenizerArg | Sequence[int] = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    template: str | None = None,
    drop_severity: Severity | str | None = None,
    server: str | None = None,
    error_rows: Literal["keep", "omit"] = "keep",
    indices: Sequence[int] | None = None,
    max_length: int | None = None,
) -> dict[str, list[Any]]:
    """Training rows for a batch of records, column-wise: the columns of :data:`BATCH_COLUMNS`.

    ``batch`` maps column names to equal-length sequences (lists, or numpy arrays as Ray Data's default
    batch format gives): ``messages``, optional ``tools``, the response (``response``, ``turn`` or
    ``message``), optional ``id``, ``thinking``, ``profile``. ``messages``, ``tools`` and the response may
    be objects or JSON text. Never raises on a bad record: it becomes a row whose ``error`` says why, with
    empty ``input_ids``/``loss_mask`` (filter on ``error is None`` before training). Picklable, loads the
    tokenizer once per process::

        ds.map(sample_batch, batched=True, num_proc=8, remove_columns=ds.column_names)   # datasets
        ray_ds.map_batches(sample_batch)                                                 # Ray Data

    An error names the record by its place: ``indices`` are the dataset's indices of the batch's rows (with
    ``ds.map(sample_batch, batched=True, with_indices=True)`` datasets passes them as the second argument,
    which is taken for them), else the row's place in this batch is said as such (``batch row 3``), since
    a batch does not know where it starts.

    Each row equals :func:`training_row` of the record. Keep nested data as JSON text when it passes
    through Arrow: Arrow gives every object the union of all rows' keys (null where a row had none), in
    one key order, with one number type. Columns of objects (lists or numpy arrays, as ``datasets`` and Ray
    give them) are read as :mod:`kimi_recon._records.arrow` says: the filled nulls removed where that is exact, the
    record refused (a row error naming the field) where it is not. Raises :class:`InvalidInputError` only
    for a batch that is not one (not a mapping of equal-length columns) or a bad ``error_rows``.
    ``drop_severity`` (e.g. ``"loss"``) makes a record flagged at or above it such an error row, its
    ``error`` naming the flags.

    ``max_length`` flags a row of more ids ``over_max_length`` (see :func:`training_row`).

    ``error_rows="omit"`` leaves the failed records out of the result instead (the batch comes back
    shorter; in ``datasets`` this needs ``remove_columns=ds.column_names``) and logs each one, its id and
    why, as a warning on the ``kimi_recon`` logger: the written file then loads in SpecForge as it is,
    which refuses a whole file for one empty row.
    """
    choice_argument(error_rows, "error_rows", ("keep", "omit"))
    limit = _max_length(max_length)
    columns, n = check_batch(batch)
    tokenizer, indices = batch_indices(tokenizer, indices, n)
    tok = get_tokenizer(tokenizer)
    out: dict[str, list[Any]] = {column: [] for column in BATCH_COLUMNS}
    for i in range(n):
        rid = record_id({"id": plain(batch["id"][i])}) if "id" in batch else None
        try:
            record = batch_record(batch, columns, i)
            row = training_row(
                record, tok, profile=profile, thinking=thinking, template=template, drop_severity=drop_severity, server=server, max_length=limit
            )
            error = None
        except Exception as err:  # noqa: BLE001 - a record's failure is a row, never a stopped map
            row = {"id": rid, "input_ids": [], "loss_mask": [], "prompt_len": 0, "flags": "", "max_severity": "", "token_counts": ""}
            failure = _failure(i if indices is None else indices[i], None, rid, err).error
            assert failure is not None
            place = failure.where() if indices is not None else f"batch row {i}" + (f" (id {rid!r})" if rid is not None else "")
            error = place + str(failure)[len(failure.where()) :]
            if error_rows == "omit":
                _log.warning("sample_batch left a failed record out (error_rows='omit'): %s", error)
                continue
        for column in ROW_COLUMNS:
            out[column].append(row[column])
        out["error"].append(error)
    return out


# -- files ---------------------------------------------------------------------------------------------


def errors_path_for(output: str) -> str:
    """Where the failed records of ``output`` go: ``OUT.errors.jsonl`` next to it (``samples.jsonl`` ->
    ``samples.errors.jsonl``; ``rows.parquet`` and ``rows.jsonl.gz`` -> ``rows.errors.jsonl``, plain text)."""
    stem = output
    for suffixes in ((".gz", ".zst"), (".jsonl", ".json", PARQUET_SUFFIX)):
        for suffix in suffixes:
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
                break
    return stem + ".errors.jsonl"


def default_errors_path(output: str) -> str | None:
    """The errors file written when none is given: :func:`errors_path_for`, or None (failures go to stderr)
    when ``output`` is stdout or a device such as ``/dev/null``, next to which no file belongs."""
    from .._base.files import is_device, is_stdio

    return None if is_stdio(output) or is_device(output) else errors_path_for(output)


#: An output whose name ends so is written as Parquet (:func:`write_training_rows`).
PARQUET_SUFFIX = ".parquet"


def is_parquet(output: str | os.PathLike[str]) -> bool:
    """Whether ``output`` is written as Parquet: its name ends with ``.parquet`` (any case)."""
    return os.fspath(output).lower().endswith(PARQUET_SUFFIX)


def check_parquet_writer(output: str | os.PathLike[str], field: str = "--output") -> None:
    """Raise :class:`OutputFileError` naming the extra when ``output`` is a Parquet file and pyarrow is missing
    (called before any work: a bad output stops a command before any output)."""
    if is_parquet(output):
        _pyarrow(output, field)


def _pyarrow(output: str | os.PathLike[str], field: str) -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise OutputFileError(
            f"{os.fspath(output)} is a Parquet file, which needs pyarrow: pip install 'kimi-recon[parquet]' "
            "(in a clone: pip install -e '.[parquet]'), or write JSON Lines (-o rows.jsonl)",
            field=field,
        ) from None
    return pq


class _ParquetRows:
    """Training rows written as Parquet row groups of bounded size (memory does not grow with the file).
    The columns have the types the JSON loader gives the JSONL rows (``int64`` lists, strings), so
    ``datasets.load_dataset("parquet")`` gives the same features as ``load_dataset("json")``."""

    #: a row group is written once it holds this many rows or ids, whichever comes first
    ROWS, IDS = 1024, 1 << 20

    def __init__(self, f: BinaryIO, output: str | os.PathLike[str]) -> None:
        pq = _pyarrow(output, "--output")
        import pyarrow as pa

        self._pa = pa
        self._schema = pa.schema(
            [
                ("id", pa.string()),
                ("input_ids", pa.list_(pa.int64())),
                ("loss_mask", pa.list_(pa.int64())),
                ("prompt_len", pa.int64()),
                ("flags", pa.string()),
                ("max_severity", pa.string()),
                ("token_counts", pa.string()),
            ]
        )
        assert tuple(self._schema.names) == ROW_COLUMNS
        self._writer = pq.ParquetWriter(f, self._schema)
        self._rows: list[Mapping[str, Any]] = []
        self._ids = 0
        self._closed = False

    def write(self, row: Mapping[str, Any]) -> None:
        if SURROGATE.search(row["id"]):
            # JSONL writes it as the JSON escape it came as; a Parquet string is UTF-8, which has no form for it
            raise InvalidInputError("holds a lone surrogate (a \\ud800-style escape), which a Parquet string cannot hold: write JSON Lines, or fix the id", field="id")
        self._rows.append(row)
        self._ids += len(row["input_ids"])
        if len(self._rows) >= self.ROWS or self._ids >= self.IDS:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            self._writer.write_table(self._pa.Table.from_pylist(self._rows, schema=self._schema))
        self._rows, self._ids = [], 0

    def close(self) -> None:
        self._flush()
        self._closed = True
        self._writer.close()

    def discard(self) -> None:
        """Let go of the writer of a file that is being thrown away (its temporary file is removed), so that it
        does not try to finish a closed file when it is collected."""
        if not self._closed:
            self._closed = True
            with contextlib.suppress(Exception):
                self._writer.close()


@dataclass(frozen=True)
class WriteSummary:
    """What a write did: rows and errors written, and where."""

    rows: int
    errors: int
    output: str
    errors_output: str | None
    #: rows by their worst flag (``max_severity``; ``none``: no flag)
    by_severity: Mapping[str, int] = dataclasses.field(default_factory=dict)
    #: records over the ``max_length`` asked for: rows flagged ``over_max_length``, and records left out for it
    over_length: int = 0
    over_length_dropped: int = 0
    #: the most ids in one row written (0: none), and in one record over ``max_length`` (written or left out)
    longest: int = 0
    longest_over: int = 0
    #: loss flag code -> rows carrying it (what makes the loss rows lossy, to say on stderr)
    loss_codes: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def line(self, command: str) -> str:
        where = f" to {self.errors_output}" if self.errors_output else " (listed above)"
        worst = ", ".join(f"{s} {self.by_severity.get(s, 0)}" for s in SEVERITY_NAMES)
        longest = f"; the longest has {self.longest:,} ids" if self.longest else ""
        return f"{command}: {self.rows} training rows to {self.output} (by worst flag: {worst}{longest}); {self.errors} failed records{where}"

    @property
    def usable(self) -> int:
        """Rows whose ids are not known to differ (no ``loss`` flag)."""
        return self.rows - self.by_severity.get("loss", 0)


def _is_loss(code: str) -> bool:
    try:
        return severity_of(code) is Severity.LOSS
    except InvalidInputError:  # a code this version does not know (a row made elsewhere): not counted
        return False


def _json_line(row: Mapping[str, Any]) -> str:
    return to_json_line(row) + "\n"


#: Severity names, worst first, then rows with no flag (the audit summary's order).
SEVERITY_NAMES = ("loss", "risk", "unlikely", "info", "none")


def _write_results(
    results: Iterable[SampleResult],
    write_row: Callable[[Mapping[str, Any]], object],
    errors: TextIO | None,
    stderr: TextIO,
    by_severity: dict[str, int],
    lengths: dict[str, int],
    loss_codes: dict[str, int],
) -> tuple[int, int]:
    rows = failed = 0
    for given in results:
        result = given
        if result.over_length:
            lengths["over"] += 1
            lengths["dropped"] += result.row is None
            lengths["longest_over"] = max(lengths["longest_over"], result.over_length)
        if result.row is not None:
            try:
                write_row(result.row)
            except InvalidInputError as err:  # a row the output format cannot hold is a failed record, never lost
                result = _failure(result.index, result.line, result.record_id, err)
        if result.row is not None:
            rows += 1
            worst = result.row.get("max_severity") or "none"
            by_severity[worst] = by_severity.get(worst, 0) + 1
            if worst == "loss":
                for code in {c for c in str(result.row.get("flags") or "").split(",") if c}:
                    if _is_loss(code):
                        loss_codes[code] = loss_codes.get(code, 0) + 1
            lengths["longest"] = max(lengths["longest"], len(result.row["input_ids"]))
            continue
        failed += 1
        if errors is not None:
            errors.write(_json_line(result.error_row()))
        else:
            print(terminal_safe(f"error: {result.error}"), file=stderr)  # ids and messages come from the data
    return rows, failed


def write_training_rows(
    results: Iterable[SampleResult],
    output: str,
    errors_output: str | None = None,
    *,
    stderr: TextIO | None = None,
) -> WriteSummary:
    """Write the rows of ``results`` to ``output`` and the failures to ``errors_output``, both atomically.

    Both files are written to temp files in their folders and renamed into place only when every result
    is written, so an interrupted run leaves the previous files untouched. ``output`` ``"-"`` writes the
    rows to stdout; failures then go to ``errors_output`` when given, else to ``stderr`` one per line.
    Otherwise the errors file defaults to :func:`errors_path_for` and is always written (empty when nothing
    failed), so a stale one never survives. An ``output`` named ``*.parquet`` is written as Parquet (needs
    pyarrow: the ``parquet`` extra; :class:`~kimi_recon.errors.OutputFileError` before anything is written
    without it), in row groups of bounded size; the errors file stays JSON Lines.
    """
    from .._base.files import atomic_binary_output, atomic_output, is_stdio

    check_parquet_writer(output)
    err_stream = stderr if stderr is not None else sys.stderr
    if errors_output is None:
        errors_output = default_errors_path(output)
    by_severity: dict[str, int] = {}
    lengths = {"over": 0, "dropped": 0, "longest": 0, "longest_over": 0}
    loss_codes: dict[str, int] = {}
    with contextlib.ExitStack() as files:
        if is_parquet(output):
            parquet = _ParquetRows(files.enter_context(atomic_binary_output(output, "--output")), output)
            files.callback(parquet.discard)  # runs before the file is closed (and, after an error, removed)
            write_row: Callable[[Mapping[str, Any]], object] = parquet.write
        else:
            out = files.enter_context(atomic_output(output, "--output"))
            parquet = None
            write_row = lambda row: out.write(_json_line(row))  # noqa: E731 - one line, named by its annotation
        errors = None if errors_output is None else files.enter_context(atomic_output(errors_output, "--errors"))
        rows, failed = _write_results(results, write_row, errors, err_stream, by_severity, lengths, loss_codes)
        if parquet is not None:
            parquet.close()  # the footer, inside the with: an error here keeps the old file
    return WriteSummary(
        rows,
        failed,
        "stdout" if is_stdio(output) else output,
        errors_output,
        by_severity,
        over_length=lengths["over"],
        over_length_dropped=lengths["dropped"],
        longest=lengths["longest"],
        longest_over=lengths["longest_over"],
        loss_codes=loss_codes,
    )
