"""Audit a dataset of API responses against the ids the model really generated.

A *record* is a mapping (one JSON object per line of a JSONL file)::

    {"id": "optional record id",
     "response": <the API's answer>,            # also accepted under "turn" or "message"
     "reference_ids": [163607, ...],            # also accepted as "output_ids" or "reference"
     "profile": "kimi-k2.5",                    # optional, overrides the audit's profile
     "thinking": true,                          # optional, overrides the audit's thinking
     "call_index_offset": 0}                    # optional, tool calls earlier in the conversation

The response is an OpenAI chat completion (``choices[0].message``, ``choices[0].finish_reason`` and
``choices[0].logprobs.content`` are read), one choice (``{"message", "finish_reason", "logprobs"}``),
or an assistant message dict (``content``, ``reasoning_content``/``reasoning``, ``tool_calls``, and
optionally ``finish_reason`` and ``logprobs``; a record-level ``finish_reason``/``logprobs`` is used
when the message has none). The golden files' ``{"turn", "output_ids", "thinking"}`` rows are records.

:func:`audit_record` handles one record and never raises (a malformed record becomes a result with an
error); it is picklable and loads the tokenizer once per process, so it can be mapped with
``datasets.Dataset.map(num_proc=N)`` (see :func:`audit_row`, :func:`audit_batch`) or Ray.
:func:`audit_dataset` streams a JSONL file or an iterable in constant memory, optionally over a process
pool, and returns a :class:`DatasetAudit`.
"""

from __future__ import annotations

import dataclasses
import functools
import heapq
import json
import os
import sys
import time
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence, Sized
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, Union

from . import responses
from ._audit_breakdown import DEFAULT_WORST, AuditBreakdown, BreakdownTally
from ._io import open_input
from .compare import BENIGN_KINDS, EXACT, KINDS, Comparison, check_ids, compare_checked_ids
from .errors import InvalidInputError, InvalidRecordError, preview
from .models import AssistantTurn
from .profiles import get_profile
from .reconstruct import Reconstruction, reconstruct_output_ids
from .record_options import OPTION_KEYS, parse_options
from .tokenizer import BUNDLED, KimiTokenizer, load_tokenizer, tokenizer_for_profile
from .usage_check import PROMPT, TokenCounts, check_with_profile, reported_counts
from .usage_stats import TokenCountTally, report_lines

__all__ = [
    "ERROR",
    "REFERENCE_KEYS",
    "RESPONSE_KEYS",
    "DatasetAudit",
    "InvalidRecordError",
    "RecordError",
    "RecordReconstruction",
    "RecordResult",
    "audit_batch",
    "audit_dataset",
    "audit_record",
    "audit_row",
    "get_tokenizer",
    "iter_jsonl",
    "reconstruct_record",
    "reconstruct_records",
    "record_id",
    "record_token_counts",
    "response_of",
    "turn_of_record",
]

#: Keys a record may hold its response under, in the order they are looked for.
RESPONSE_KEYS: tuple[str, ...] = ("response", "turn", "message")
#: Keys a record may hold its reference ids under, in the order they are looked for.
REFERENCE_KEYS: tuple[str, ...] = ("reference_ids", "output_ids", "reference")
#: The kind of a record that could not be compared.
ERROR = "error"

TokenizerArg = Union[KimiTokenizer, str, "os.PathLike[str]", None]
RecordsArg = Union[Iterable[Any], str, "os.PathLike[str]"]
_T = TypeVar("_T")


@dataclass(frozen=True)
class RecordError:
    """Why one record could not be compared: where it is, which field, and what was wrong."""

    index: int
    line: int | None
    record_id: str | None
    field: str | None
    message: str
    error_type: str

    def where(self) -> str:
        place = f"line {self.line}" if self.line is not None else f"record {self.index}"
        return place + (f" (id {self.record_id!r})" if self.record_id is not None else "")

    def __str__(self) -> str:
        field_part = f"field {self.field!r}: " if self.field else ""
        return f"{self.where()}: {field_part}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RecordResult:
    """The audit of one record: its comparison, or the error that prevented one.

    ``index`` is the record's 0-based position in the input, ``line`` its 1-based line in a JSONL file.
    ``source`` and ``flags`` come from the reconstruction (see :class:`~kimi_recon.reconstruct.Reconstruction`),
    plus the usage check's mismatch flags; ``token_counts`` is the usage check (None when the record has
    no ``usage``), ``provider`` who served the response (when the record says).
    """

    index: int
    line: int | None
    record_id: str | None
    comparison: Comparison | None = None
    source: str | None = None
    flags: tuple[str, ...] = ()
    error: RecordError | None = None
    token_counts: TokenCounts | None = None
    provider: str | None = None

    @property
    def kind(self) -> str:
        """The comparison's kind, or ``"error"``."""
        return self.comparison.kind if self.comparison is not None else ERROR

    @property
    def ok(self) -> bool:
        return self.error is None

    def where(self) -> str:
        place = f"line {self.line}" if self.line is not None else f"record {self.index}"
        return place + (f" (id {self.record_id!r})" if self.record_id is not None else "")

    def __str__(self) -> str:
        if self.error is not None:
            return f"{ERROR}: {self.error}"
        assert self.comparison is not None
        flags = f" [flags: {', '.join(self.flags)}]" if self.flags else ""
        return f"{self.where()}, source {self.source}{flags}: {self.comparison.explain()}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (nested)."""
        return {
            "index": self.index,
            "line": self.line,
            "id": self.record_id,
            "kind": self.kind,
            "source": self.source,
            "flags": list(self.flags),
            "comparison": self.comparison.to_dict() if self.comparison is not None else None,
            "error": self.error.to_dict() if self.error is not None else None,
            "provider": self.provider,
            "token_counts": self.token_counts.to_dict() if self.token_counts is not None else None,
        }

    def to_row(self, prefix: str = "audit_") -> dict[str, Any]:
        """Flat columns with the same types for every record (for ``datasets`` / Arrow / pandas).

        ``kind``, ``exact``, ``benign``, ``first_diff`` (-1 when none), ``region``, ``detail``,
        ``source``, ``flags`` (comma-separated), ``error_field`` and ``error`` ("" when none).
        """
        c, e = self.comparison, self.error
        row: dict[str, Any] = {
            "kind": self.kind,
            "exact": bool(c is not None and c.exact),
            "benign": bool(c is not None and c.benign),
            "first_diff": -1 if c is None or c.first_diff is None else c.first_diff,
            "region": (c.region or "") if c is not None else "",
            "detail": c.detail if c is not None else "",
            "source": self.source or "",
            "flags": ",".join(self.flags),
            "error_field": (e.field or "") if e is not None else "",
            "error": e.message if e is not None else "",
        }
        return {prefix + k: v for k, v in row.items()}


@dataclass(frozen=True)
class DatasetAudit:
    """Counts of every kind over a dataset, the errors, and the worst examples of each non-exact kind.

    Rates are over ``compared`` (records that were compared, errors excluded); ``error_rate`` is over
    ``total``. ``errors`` lists the first ``max_errors`` malformed records; ``error_count`` counts all.
    ``examples`` maps each non-exact kind found to its worst records (largest ``diff_size`` first).
    ``breakdown`` (from :func:`audit_dataset`) holds where first differences fall and the worst records overall,
    for :meth:`to_html`; :meth:`to_dict` includes it.
    """

    total: int
    counts: Mapping[str, int]
    error_count: int
    errors: tuple[RecordError, ...]
    examples: Mapping[str, tuple[RecordResult, ...]]
    flag_counts: Mapping[str, int]
    source_counts: Mapping[str, int]
    profile: str
    thinking: bool
    elapsed: float = field(default=0.0, compare=False)
    #: The usage check per provider (:meth:`kimi_recon.usage_stats.TokenCountTally.to_dict`).
    token_counts: Mapping[str, Any] = field(default_factory=dict)
    breakdown: AuditBreakdown | None = None  # first-difference histogram and worst records, for reports

    @property
    def compared(self) -> int:
        return self.total - self.error_count

    def rate(self, kind: str) -> float:
        """Share of compared records of ``kind`` (0.0 when nothing was compared)."""
        return self.counts.get(kind, 0) / self.compared if self.compared else 0.0

    @property
    def exact_count(self) -> int:
        return self.counts.get(EXACT, 0)

    @property
    def exact_rate(self) -> float:
        return self.rate(EXACT)

    @property
    def benign_count(self) -> int:
        """Records that are exact or differ only in BPE split (same bytes, same special ids)."""
        return sum(self.counts.get(k, 0) for k in BENIGN_KINDS)

    @property
    def benign_rate(self) -> float:
        return self.benign_count / self.compared if self.compared else 0.0

    @property
    def exact_rate_of_all(self) -> float:
        """Exact records out of all records, unreadable ones included (0.0 when there are none)."""
        return self.exact_count / self.total if self.total else 0.0

    @property
    def error_rate(self) -> float:
        return self.error_count / self.total if self.total else 0.0

    @property
    def records_per_second(self) -> float:
        return self.total / self.elapsed if self.elapsed > 0 else 0.0

    def summary(self) -> str:
        """A readable report: counts and rates of every kind, benign total, flags, errors and examples."""
        think = "on" if self.thinking else "off"
        lines = [
            f"kimi-recon audit: {self.total} records (profile {self.profile}, thinking {think} unless a record says otherwise)",
            f"  compared {self.compared}, errors {self.error_count} ({_pct(self.error_rate)} of records)",
            f"  exact {self.exact_count}/{self.compared} = {_pct(self.exact_rate)}; "
            f"benign (exact + non_canonical_bpe) {self.benign_count}/{self.compared} = {_pct(self.benign_rate)}; "
            f"not benign {self.compared - self.benign_count}",
        ]
        if self.error_count:
            lines.append(f"  exact of all records (errors count as not exact): {self.exact_count}/{self.total} = {_pct(self.exact_rate_of_all)}")
        width = max(len(k) for k in KINDS)
        for kind in KINDS:
            lines.append(f"    {kind:<{width}} {self.counts.get(kind, 0):>9}  {_pct(self.rate(kind)):>7}")
        if self.source_counts:
            lines.append("  ids from: " + ", ".join(f"{k} {v}" for k, v in sorted(self.source_counts.items())))
        if self.flag_counts:
            lines.append("  flags: " + ", ".join(f"{k} {v}" for k, v in sorted(self.flag_counts.items(), key=lambda kv: (-kv[1], kv[0]))))
        if self.error_count:
            lines.append(f"  errors ({self.error_count}):")
            lines += [f"    {e}" for e in self.errors]
            if self.error_count > len(self.errors):
                lines.append(f"    … and {self.error_count - len(self.errors)} more")
        for kind in KINDS:
            shown = self.examples.get(kind, ())
            if shown:
                lines.append(f"  worst {kind} examples:")
                for ex in shown:
                    lines.append("    " + str(ex).replace("\n", "\n    "))
        lines += ["  " + line for line in report_lines(self.token_counts)]
        if self.elapsed > 0:
            lines.append(f"  {self.elapsed:.2f} s, {self.records_per_second:.1f} records/s")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def to_html(self) -> str:
        """The report as one self-contained HTML page, rendered from :meth:`to_dict` (no network, no script)."""
        from ._report_io import report_html

        return report_html(self)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "total": self.total,
            "compared": self.compared,
            "error_count": self.error_count,
            "error_rate": self.error_rate,
            "counts": dict(self.counts),
            "rates": {k: self.rate(k) for k in KINDS},
            "exact_rate": self.exact_rate,
            "benign_count": self.benign_count,
            "benign_rate": self.benign_rate,
            "errors": [e.to_dict() for e in self.errors],
            "examples": {k: [r.to_dict() for r in v] for k, v in self.examples.items()},
            "flag_counts": dict(self.flag_counts),
            "source_counts": dict(self.source_counts),
            "profile": self.profile,
            "thinking": self.thinking,
            "elapsed_seconds": self.elapsed,
            "token_counts": dict(self.token_counts),
            "exact_rate_of_all": self.exact_rate_of_all,
            **(self.breakdown.to_dict() if self.breakdown is not None else {}),
        }


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


# -- reading records ----------------------------------------------------------------------------------


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any] | InvalidRecordError]]:
    """``(line number, record)`` for each non-blank line of a JSONL file, 1-based, read lazily.

    A line that is not UTF-8, not JSON, or not a JSON object gives an :class:`InvalidRecordError`
    in place of the record, so the caller can report it and go on.
    """
    for line_no, raw in _iter_lines(path):
        yield line_no, _parse_line(raw, line_no)


def _iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    with open_input(path) as f:  # "-" is stdin
        for line_no, raw in enumerate(f, 1):
            if raw.strip():
                yield line_no, raw


def _parse_line(raw: str | bytes, line: int | None) -> dict[str, Any] | InvalidRecordError:
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text)
    except UnicodeDecodeError as err:
        return InvalidRecordError(f"is not UTF-8 ({err.reason} at byte {err.start})", field="line", line=line)
    except ValueError as err:
        return InvalidRecordError(f"is not JSON: {err}", field="line", line=line)
    except RecursionError:
        return InvalidRecordError("is nested too deeply to read", field="line", line=line)
    if not isinstance(value, dict):
        return InvalidRecordError(f"must be a JSON object, got {type(value).__name__}", field="line", line=line)
    return value


def _pick(record: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    for key in keys:
        if key in record and record[key] is not None:
            return key, record[key]
    return None


def record_id(record: object) -> str | None:
    """The record's ``id`` as a string, or None."""
    if isinstance(record, Mapping):
        value = record.get("id")
        return None if value is None else str(value)
    return None


def turn_of_record(rec: Mapping[str, Any]) -> AssistantTurn:
    """The assistant turn of a record's response: a chat completion, a choice, or an assistant message.

    :func:`kimi_recon.responses.turn_from_response` read leniently (as datasets store responses), with
    the record's ``finish_reason`` (default ``"stop"``) and ``logprobs`` used where the response has none.
    Errors name the field inside the record, e.g. ``response.choices[0].message.tool_calls[0].function.name``.
    """
    field, response = response_of(rec)
    offset = parse_options(rec, read=("call_index_offset",)).call_index_offset or 0
    return responses.turn_from_response(
        response,
        call_index_offset=offset,
        field=field,
        finish_reason=rec.get("finish_reason", "stop"),
        logprobs=rec.get("logprobs"),
        lenient=True,
    )


@functools.lru_cache(maxsize=8)
def _tokenizer_from_source(source: str | None) -> KimiTokenizer:
    return load_tokenizer(None if source in (None, BUNDLED) else source)


def get_tokenizer(tokenizer: TokenizerArg = None) -> KimiTokenizer:
    """A tokenizer object as is; a source (None for the bundled one, a directory, a Hub id) loaded once per process."""
    if isinstance(tokenizer, KimiTokenizer):
        return tokenizer
    return _tokenizer_from_source(None if tokenizer is None else os.fspath(tokenizer))


#: The options a record may set for reconstruction (it has no prompt: tools and template options are not read).
_RECONSTRUCT_OPTIONS = ("profile", "thinking", "call_index_offset")


def _options(record: Mapping[str, Any], profile: str, thinking: bool) -> tuple[str, bool, int]:
    """The record's profile, thinking and call_index_offset, read by :func:`kimi_recon.record_options.parse_options`."""
    options = parse_options(record, profile=profile, thinking=thinking, read=_RECONSTRUCT_OPTIONS)
    return options.profile.name, options.thinking, options.call_index_offset or 0


def _as_record(record: object, line: int | None) -> Mapping[str, Any]:
    if isinstance(record, InvalidInputError):
        raise record
    if isinstance(record, (str, bytes)):
        parsed = _parse_line(record, line)
        if isinstance(parsed, InvalidInputError):
            raise parsed
        return parsed
    if not isinstance(record, Mapping):
        raise InvalidInputError(f"must be an object (a mapping), got {type(record).__name__}", field="record")
    return record


def reconstruct_record(
    record: Mapping[str, Any] | str | bytes,
    tokenizer: TokenizerArg = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    use_logprobs: bool = True,
) -> Reconstruction:
    """The output ids of one record's response (a JSON line is parsed first).

    The response is looked for under :data:`RESPONSE_KEYS`; a record with none of them is taken to be
    the response itself (a chat completion, a choice or an assistant message). The record's own
    ``profile``, ``thinking`` and ``call_index_offset`` win over the arguments. Raises
    :class:`InvalidInputError` naming the field and the record's ``id``.
    """
    rec = _as_record(record, None)
    try:
        return _reconstruct(rec, get_tokenizer(tokenizer), profile, thinking, use_logprobs)
    except InvalidInputError as err:
        raise err.with_sample(record_id(rec)) from None


def response_of(rec: Mapping[str, Any]) -> tuple[str, Any]:
    """(key, response) of a record; a record with no response key but message-like keys is the response."""
    found = _pick(rec, RESPONSE_KEYS)
    if found is not None:
        return found
    if "choices" in rec or any(k in rec for k in responses.MESSAGE_FIELDS):
        return "response", rec
    raise InvalidInputError(f"is missing: a record needs one of {', '.join(RESPONSE_KEYS)}", field=RESPONSE_KEYS[0])


def _reconstruct(rec: Mapping[str, Any], tok: KimiTokenizer, profile: str, thinking: bool, use_logprobs: bool) -> Reconstruction:
    return _reconstruct_checked(rec, tok, profile, thinking, use_logprobs)[0]


def _reconstruct_checked(
    rec: Mapping[str, Any], tok: KimiTokenizer, profile: str, thinking: bool, use_logprobs: bool
) -> tuple[Reconstruction, TokenCounts | None, tuple[str, ...], str | None]:
    """The reconstruction, the usage check, every flag code (the check's included) and the provider."""
    turn = turn_of_record(rec)
    prof, think, offset = _options(rec, profile, thinking)
    recon = reconstruct_output_ids(turn, tok, prof, think, call_index_offset=offset, use_logprobs=use_logprobs)
    counts, unchecked = record_token_counts(rec, turn, recon.ids, tok, prof, think)
    flags = recon.flag_codes + unchecked + (tuple(f.code for f in counts.flags()) if counts is not None else ())
    provider = rec.get("provider", turn.metadata.get("provider"))
    return recon, counts, flags, provider if isinstance(provider, str) else None


def record_token_counts(
    rec: Mapping[str, Any],
    turn: AssistantTurn,
    output_ids: Sequence[int],
    tokenizer: KimiTokenizer,
    profile: str,
    thinking: bool,
    prompt_len: int | None = None,
) -> tuple[TokenCounts | None, tuple[str, ...]]:
    """The usage check of one record (None when it carries no ``usage``) and the codes of figures that
    could not be checked.

    ``usage`` is the record's own or its response's. The prompt length is ``prompt_len`` when given,
    else the record's ``messages`` (and ``tools``) rendered and encoded, else its ``prompt_ids``' length.
    A prompt that cannot be rendered leaves ``prompt_tokens`` unchecked (code ``prompt_tokens_unchecked``)
    rather than failing the record.
    """
    usage = rec.get("usage")
    if not isinstance(usage, Mapping):
        usage = turn.metadata.get("usage")
    if not isinstance(usage, Mapping):
        return None, ()
    unchecked: tuple[str, ...] = ()
    if prompt_len is None and reported_counts(usage)[0] is not None:
        messages, prompt_ids = rec.get("messages"), rec.get("prompt_ids")
        if isinstance(messages, list):
            from .training import encode_prompt

            try:
                opts = parse_options(rec, profile=profile, thinking=thinking)
                prompt_len = len(
                    encode_prompt(
                        messages, opts.tools, opts.profile, opts.thinking, tokenizer, template_kwargs=opts.template_kwargs,
                        thinking_effort=opts.thinking_effort, tool_choice=opts.tool_choice,
                    )
                )
            except (InvalidInputError, TypeError, ValueError):
                unchecked = (f"{PROMPT}_unchecked",)
        elif isinstance(prompt_ids, Sequence) and not isinstance(prompt_ids, (str, bytes)):
            prompt_len = len(prompt_ids)
    counts = check_with_profile(usage, output_ids, prompt_len, profile, truncated_in=turn.metadata.get("truncated_in"))
    return counts, unchecked


def audit_record(
    record: Mapping[str, Any] | str | bytes,
    tokenizer: TokenizerArg = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    use_logprobs: bool = True,
    index: int = 0,
    line: int | None = None,
) -> RecordResult:
    """Reconstruct one record's output ids and compare them with its reference ids. Never raises on bad data.

    ``tokenizer`` is a :class:`KimiTokenizer` or a source (None = bundled, a directory, a Hub id) that
    is loaded once per process. A malformed record (not JSON, no response, bad turn, reference ids
    missing or out of the vocabulary) gives a result whose ``error`` names the field; any other
    exception is reported the same way with its type, so one bad record never stops a batch.
    """
    rid: str | None = None
    try:
        rec = _as_record(record, line)
        rid = record_id(rec)
        tok = get_tokenizer(tokenizer)
        response_of(rec)
        ref_found = _pick(rec, REFERENCE_KEYS)
        if ref_found is None:
            raise InvalidInputError(f"is missing: a record needs one of {', '.join(REFERENCE_KEYS)}", field=REFERENCE_KEYS[0])
        reference = check_ids(ref_found[1], tok, ref_found[0])
        recon, counts, flags, provider = _reconstruct_checked(rec, tok, profile, thinking, use_logprobs)
        # the profile's names (K3 spells 163586 `<|end_of_msg|>`); reconstructed ids come from the tokenizer
        comparison = compare_checked_ids(reference, recon.ids, tokenizer_for_profile(tok, recon.profile))
    except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
        if isinstance(err, InvalidRecordError) and err.line is not None:
            line = err.line
        fld = err.field if isinstance(err, InvalidInputError) else None
        message = err.message if isinstance(err, InvalidInputError) else f"{type(err).__name__}: {err}"
        return RecordResult(index, line, rid, error=RecordError(index, line, rid, fld, message, type(err).__name__))
    return RecordResult(index, line, rid, comparison, recon.source, flags, token_counts=counts, provider=provider)


def audit_row(
    record: Mapping[str, Any],
    tokenizer: TokenizerArg = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    use_logprobs: bool = True,
    prefix: str = "audit_",
) -> dict[str, Any]:
    """:func:`audit_record` as flat columns (:meth:`RecordResult.to_row`): ``dataset.map(audit_row, num_proc=N)``."""
    return audit_record(record, tokenizer, profile=profile, thinking=thinking, use_logprobs=use_logprobs).to_row(prefix)


def audit_batch(
    batch: Mapping[str, Sequence[Any]],
    tokenizer: TokenizerArg = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    use_logprobs: bool = True,
    prefix: str = "audit_",
) -> dict[str, list[Any]]:
    """Column-wise :func:`audit_row` over a batch (``dataset.map(audit_batch, batched=True)``, Ray ``map_batches``).

    Returns only the audit columns; ``datasets`` adds them to the batch, with Ray merge them yourself.
    """
    columns = list(batch)
    n = len(batch[columns[0]]) if columns else 0
    out: dict[str, list[Any]] = {}
    for i in range(n):
        row = audit_row({c: batch[c][i] for c in columns}, tokenizer, profile=profile, thinking=thinking, use_logprobs=use_logprobs, prefix=prefix)
        for k, v in row.items():
            out.setdefault(k, []).append(v)
    if not out:
        out = {prefix + k: [] for k in ("kind", "exact", "benign", "first_diff", "region", "detail", "source", "flags", "error_field", "error")}
    return out


# -- streaming over many records ---------------------------------------------------------------------

#: (0-based index, 1-based line or None, the record: a mapping, a raw JSON line, or a parse error)
_Item = tuple[int, Union[int, None], Any]


@dataclass(frozen=True)
class _Job:
    tokenizer: str | None
    profile: str
    thinking: bool
    use_logprobs: bool


def _audit_chunk(items: list[_Item], job: _Job, tokenizer: KimiTokenizer | None = None) -> list[RecordResult]:
    tok = tokenizer if tokenizer is not None else get_tokenizer(job.tokenizer)
    return [
        audit_record(rec, tok, profile=job.profile, thinking=job.thinking, use_logprobs=job.use_logprobs, index=i, line=line)
        for i, line, rec in items
    ]


@dataclass(frozen=True)
class RecordReconstruction:
    """One record's rebuilt ids (``ids`` None and ``error`` set when the record is malformed)."""

    index: int
    line: int | None
    record_id: str | None
    ids: tuple[int, ...] | None
    source: str | None = None
    flags: tuple[str, ...] = ()
    error: RecordError | None = None
    token_counts: TokenCounts | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "line": self.line,
            "id": self.record_id,
            "output_ids": list(self.ids) if self.ids is not None else None,
            "source": self.source,
            "flags": list(self.flags),
            "token_counts": self.token_counts.to_dict() if self.token_counts is not None else None,
            "error": self.error.to_dict() if self.error is not None else None,
        }


def _reconstruct_chunk(items: list[_Item], job: _Job, tokenizer: KimiTokenizer | None = None) -> list[RecordReconstruction]:
    tok = tokenizer if tokenizer is not None else get_tokenizer(job.tokenizer)
    out = []
    for index, line, record in items:
        rid: str | None = None
        try:
            rec = _as_record(record, line)
            rid = record_id(rec)
            recon, counts, flags, _ = _reconstruct_checked(rec, tok, job.profile, job.thinking, job.use_logprobs)
        except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
            fld = err.field if isinstance(err, InvalidInputError) else None
            message = err.message if isinstance(err, InvalidInputError) else f"{type(err).__name__}: {err}"
            out.append(RecordReconstruction(index, line, rid, None, error=RecordError(index, line, rid, fld, message, type(err).__name__)))
            continue
        out.append(RecordReconstruction(index, line, rid, tuple(recon.ids), recon.source, flags, token_counts=counts))
    return out


def _init_worker(tokenizer: str | None) -> None:
    get_tokenizer(tokenizer)  # load once per worker process


def _items(records: RecordsArg) -> Iterator[_Item]:
    if isinstance(records, (str, os.PathLike)):
        for index, (line, raw) in enumerate(_iter_lines(records)):
            yield index, line, raw  # parsed in the worker
    else:
        for index, rec in enumerate(records):
            yield index, None, rec


#: Every key a record is read for; other keys (prompts, messages) are not sent to worker processes.
_READ_KEYS = frozenset(
    {*RESPONSE_KEYS, *REFERENCE_KEYS, "id", "profile", "thinking", "call_index_offset", "finish_reason", "logprobs",
     "choices", "role", "native_finish_reason", "error", *responses.MESSAGE_FIELDS,
     "usage", "provider", "messages", "prompt_ids", *OPTION_KEYS}  # the usage check's
)


def _slim(item: _Item) -> _Item:
    index, line, rec = item
    if isinstance(rec, Mapping) and not rec.keys() <= _READ_KEYS:
        rec = {k: v for k, v in rec.items() if k in _READ_KEYS}
    return index, line, rec


def _chunks(items: Iterator[_Item], size: int) -> Iterator[list[_Item]]:
    chunk: list[_Item] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _worker_count(workers: int | None) -> int:
    if workers is None or workers <= 0:
        return os.cpu_count() or 1
    return workers


def _tokenizer_source(tokenizer: TokenizerArg, workers: int) -> tuple[KimiTokenizer, str | None]:
    tok = get_tokenizer(tokenizer)
    if tok is load_tokenizer() or tok.source == BUNDLED:
        return tok, None
    if workers > 1 and not (tok.source and Path(tok.source).is_dir()):
        raise InvalidInputError(
            f"workers={workers} needs a tokenizer a worker process can load again; {tok.source!r} is not a directory "
            "(pass the tokenizer directory, or use workers=1)",
            field="tokenizer",
        )
    return tok, tok.source


def _stream(
    records: RecordsArg,
    work: Callable[[list[_Item], _Job, KimiTokenizer | None], list[_T]],
    job: _Job,
    tok: KimiTokenizer,
    workers: int,
    chunk_size: int,
    *,
    slim: bool = True,
) -> Iterator[_T]:
    """Results in input order; with ``workers > 1`` at most ``4 * workers`` chunks are in flight.

    ``slim`` sends workers only the keys an audit or a reconstruction reads (not the prompt).
    """
    items = _items(records)
    if workers <= 1:
        for item in items:
            yield from work([item], job, tok)
        return
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(job.tokenizer,))
    pending: deque[Future[list[_T]]] = deque()
    try:
        for chunk in _chunks((_slim(item) for item in items) if slim else items, chunk_size):
            pending.append(pool.submit(work, chunk, job, None))
            while len(pending) >= 4 * workers:
                yield from pending.popleft().result()
        while pending:
            yield from pending.popleft().result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _progress_bar(records: RecordsArg, progress: bool | None, desc: str) -> Any:
    """A tqdm bar on stderr; a disabled one (whose methods do nothing) when not shown."""
    from tqdm import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    total = len(records) if isinstance(records, Sized) and not isinstance(records, (str, bytes)) else None
    return tqdm(total=total, unit="rec", desc=desc, file=sys.stderr, dynamic_ncols=True, disable=not show)


def reconstruct_records(
    records: RecordsArg,
    tokenizer: TokenizerArg = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    use_logprobs: bool = True,
    workers: int | None = 1,
    chunk_size: int = 64,
    progress: bool | None = False,
) -> Generator[RecordReconstruction, None, None]:
    """Rebuild the output ids of every record of a JSONL path or an iterable, lazily and in input order.

    Malformed records come back with ``error`` set instead of stopping the stream. ``workers`` > 1
    (None or 0: all cores) uses a process pool with bounded work in flight.
    """
    n = _worker_count(workers)
    tok, source = _tokenizer_source(tokenizer, n)
    job = _Job(source, profile, thinking, use_logprobs)
    with _progress_bar(records, progress, "reconstruct") as bar:
        for result in _stream(records, _reconstruct_chunk, job, tok, n, chunk_size):
            bar.update(1)
            yield result


class _Tally:
    """Counters and bounded examples: memory does not grow with the number of records."""

    def __init__(self, examples: int, max_errors: int, worst: int = DEFAULT_WORST) -> None:
        self.total = 0
        self.counts: Counter[str] = Counter({k: 0 for k in KINDS})
        self.error_count = 0
        self.errors: list[RecordError] = []
        self.flags: Counter[str] = Counter()
        self.sources: Counter[str] = Counter()
        self.token_counts = TokenCountTally()
        self.heaps: dict[str, list[tuple[int, int, RecordResult]]] = {}
        self.examples = examples
        self.max_errors = max_errors
        self.breakdown = BreakdownTally(worst)

    def add(self, result: RecordResult) -> None:
        self.total += 1
        if result.error is not None:
            self.error_count += 1
            if len(self.errors) < self.max_errors:
                self.errors.append(result.error)
            return
        comparison = result.comparison
        assert comparison is not None
        self.counts[comparison.kind] += 1
        self.flags.update(set(result.flags))
        self.token_counts.add(result.provider, result.token_counts)
        if result.source:
            self.sources[result.source] += 1
        if comparison.kind != EXACT and self.examples > 0:
            heap = self.heaps.setdefault(comparison.kind, [])
            entry = (comparison.diff_size, -result.index, result)  # ties: the earlier record is worse
            if len(heap) < self.examples:
                heapq.heappush(heap, entry)
            elif entry[:2] > heap[0][:2]:
                heapq.heapreplace(heap, entry)
        self.breakdown.add(result)

    def freeze(self, profile: str, thinking: bool, elapsed: float) -> DatasetAudit:
        examples: dict[str, tuple[RecordResult, ...]] = {
            kind: tuple(r for _, _, r in sorted(self.heaps[kind], key=lambda e: (-e[0], -e[1])))
            for kind in KINDS
            if kind in self.heaps
        }
        return DatasetAudit(
            total=self.total,
            counts=dict(self.counts),
            error_count=self.error_count,
            errors=tuple(self.errors),
            examples=examples,
            flag_counts=dict(self.flags),
            source_counts=dict(self.sources),
            profile=profile,
            thinking=thinking,
            elapsed=elapsed,
            token_counts=self.token_counts.to_dict(),
            breakdown=self.breakdown.freeze(),
        )


def audit_dataset(
    records: RecordsArg,
    tokenizer: TokenizerArg = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    use_logprobs: bool = True,
    workers: int | None = 1,
    progress: bool | None = None,
    examples: int = 5,
    max_errors: int = 100,
    chunk_size: int = 64,
    worst: int = DEFAULT_WORST,
) -> DatasetAudit:
    """Audit every record of a JSONL file (a ``str`` or path) or an iterable of records (see the module doc).

    Streams in constant memory (only counters, the first ``max_errors`` errors and the ``examples`` worst
    records of each non-exact kind are kept, and for reports a fixed-size histogram of where first differences
    fall and the ``worst`` worst records: see :attr:`DatasetAudit.breakdown`). ``workers`` > 1 (None or 0: all cores) spreads chunks of
    ``chunk_size`` records over a process pool, at most ``4 * workers`` chunks in flight, the tokenizer
    loaded once per worker; the result is the same as with ``workers=1``. ``progress`` None shows a
    tqdm bar when stderr is a terminal. No record is dropped: a malformed one is counted as an error
    with its line number (JSONL) or index, and the others are processed.
    """
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise InvalidInputError(f"must be a non-negative integer, got {preview(examples)}", field="examples")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidInputError(f"must be a positive integer, got {preview(chunk_size)}", field="chunk_size")
    get_profile(profile)
    n = _worker_count(workers)
    tok, source = _tokenizer_source(tokenizer, n)
    job = _Job(source, profile, thinking, use_logprobs)
    tally = _Tally(examples, max_errors, worst)
    start = time.perf_counter()
    with _progress_bar(records, progress, "audit") as bar:
        for result in _stream(records, _audit_chunk, job, tok, n, chunk_size):
            tally.add(result)
            bar.update(1)
            if tally.total % 256 == 0 and not bar.disable:
                bar.set_postfix(exact=_pct(tally.counts[EXACT] / max(1, tally.total - tally.error_count)), errors=tally.error_count)
    return tally.freeze(get_profile(profile).name, thinking, time.perf_counter() - start)
