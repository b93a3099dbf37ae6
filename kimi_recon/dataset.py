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

This module holds the many-record operations and their tally; one record (its format, options, result
types and per-record functions) is in :mod:`kimi_recon._records.record`, the process pool in :mod:`kimi_recon._batch.pool`.
Every name above is importable from here.
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ._base.arguments import instance_argument, int_argument
from ._batch.audit_breakdown import DEFAULT_WORST, AuditBreakdown, BreakdownTally, WorstHeaps, keep_worst, worst_first
from ._batch.pool import (
    Executor,
    RecordReconstruction,
    _audit_chunk,
    _Job,
    _progress_bar,
    _reconstruct_chunk,
    _reloadable,
    _stream,
    _tokenizer_source,
    _worker_count,
    choose_executor,
)
from ._profile_check import suggested_profile
from ._records.record import (
    ERROR,
    REFERENCE_KEYS,
    RESPONSE_KEYS,
    RecordError,
    RecordResult,
    RecordsArg,
    TokenizerArg,
    audit_batch,
    audit_record,
    audit_row,
    get_tokenizer,
    iter_jsonl,
    reconstruct_record,
    record_id,
    record_token_counts,
    response_of,
    turn_of_record,
)
from .compare import BENIGN_KINDS, EXACT, KINDS
from .errors import InvalidInputError, InvalidInputTypeError, InvalidRecordError, preview
from .flags import Flag, FlagCode, max_severity, severity_of
from .profiles import DEFAULT_PROFILE, get_profile
from .servers import get_server
from .usage_check import TokenCounts
from .usage_stats import TokenCountTally, learned_conventions_applied, off_convention, report_lines

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
    #: Compared records by the highest severity among their flags (``"none"``: no flag).
    severity_counts: Mapping[str, int] = field(default_factory=dict)
    #: how many compared records were rebuilt with each profile (with ``profile=None`` each record's model id decides)
    profile_counts: Mapping[str, int] = field(default_factory=dict)
    #: profile -> how many records were flagged ``profile_mismatch`` saying to use it
    profile_hints: Mapping[str, int] = field(default_factory=dict)

    @property
    def compared(self) -> int:
        return self.total - self.error_count

    def rate(self, kind: str) -> float:
        """Share of compared records of ``kind`` (0.0 when nothing was compared)."""
        instance_argument(kind, "kind", str, "a mismatch kind (a str)")
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

    def summary(self, examples: int | None = None) -> str:
        """A readable report: counts and rates of every kind, benign total, flags, errors and examples.

        ``examples`` caps the errors and the worst records of each kind listed (None: all that were kept),
        and each of those lines is then cut to :data:`SUMMARY_LINE_CHARS`."""
        examples = int_argument(examples, "examples", minimum=0, none=True)

        def clip(text: str) -> str:
            return text if examples is None else _clip_line(text)

        think = "on" if self.thinking else "off"
        lines = [
            f"kimi-recon audit: {self.total} records ({self._profiles_text()}, thinking {think} unless a record says otherwise)",
            *self._profile_lines(),
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
            lines.append("  flags: " + ", ".join(f"{k} ({_severity_text(k)}) {v}" for k, v in sorted(self.flag_counts.items(), key=lambda kv: (-kv[1], kv[0]))))
        if self.severity_counts:
            lines.append(
                "  records by worst flag: "
                + ", ".join(f"{s} {self.severity_counts.get(s, 0)}" for s in SEVERITY_ORDER)
                + " (drop loss before training; see docs/pitfalls.md)"
            )
        if self.error_count:
            lines.append(f"  errors ({self.error_count}):")
            listed = self.errors[:examples]
            lines += [clip(f"    {e}") for e in listed]
            if self.error_count > len(listed):
                lines.append(f"    … and {self.error_count - len(listed)} more")
        for kind in KINDS:
            shown = self.examples.get(kind, ())[:examples]
            if shown:
                lines.append(f"  worst {kind} examples:")
                for ex in shown:
                    lines.append(clip("    " + str(ex).replace("\n", "\n    ")))
        lines += ["  " + line for line in report_lines(self.token_counts)]
        if self.elapsed > 0:
            lines.append(f"  {self.elapsed:.2f} s, {self.records_per_second:.1f} records/s")
        return "\n".join(lines)

    def _profiles_text(self) -> str:
        """The profile the records were rebuilt with; the ones, with their counts, when not all used the same
        (a file of K2.5 and K3 records is not "profile kimi-k2.5")."""
        if len(self.profile_counts) > 1 or (self.profile_counts and self.profile not in self.profile_counts):
            return "profiles " + ", ".join(f"{k} {v}" for k, v in sorted(self.profile_counts.items(), key=lambda kv: (-kv[1], kv[0])))
        return f"profile {self.profile}"

    def _profile_lines(self) -> list[str]:
        lines = []
        for name, n in sorted(self.profile_hints.items(), key=lambda kv: (-kv[1], kv[0])):
            lines.append(f"  PROFILE: {n} record(s) were written in the {name} format (model id or ids say so): rerun with --profile {name}")
        return lines

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"DatasetAudit(total={self.total}, compared={self.compared}, exact={self.exact_count}, "
            f"benign={self.benign_count}, errors={self.error_count}, profile={self.profile!r})"
        )

    def _repr_html_(self) -> str:
        """The report page, for Jupyter (:meth:`to_html`)."""
        return self.to_html()

    def to_html(self) -> str:
        """The report as one self-contained HTML page, rendered from :meth:`to_dict` (no network, no script)."""
        from ._batch.report_io import report_html

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
            "flag_severities": {k: _severity_text(k) for k in self.flag_counts},
            "severity_counts": dict(self.severity_counts),
            "source_counts": dict(self.source_counts),
            "profile": self.profile,
            "thinking": self.thinking,
            "elapsed_seconds": self.elapsed,
            "token_counts": dict(self.token_counts),
            "exact_rate_of_all": self.exact_rate_of_all,
            "profile_counts": dict(self.profile_counts),
            "profile_hints": dict(self.profile_hints),
            **(self.breakdown.to_dict() if self.breakdown is not None else {}),
        }


#: The order severities are listed in, worst first (``none``: records without a flag).
SEVERITY_ORDER: tuple[str, ...] = ("loss", "risk", "unlikely", "info", "none")


def _severity_text(code: str) -> str:
    try:
        return severity_of(code).value
    except InvalidInputError:  # a code of another version, read from an older report
        return "unknown"


def _server_name(server: str | None) -> str | None:
    """``server`` checked once up front (a typo fails the call, not every record)."""
    if server is None:
        return None
    get_server(server)
    return server


#: The longest line :meth:`DatasetAudit.summary` prints for an error or an example when ``examples`` is given.
SUMMARY_LINE_CHARS = 300


def _clip_line(text: str) -> str:
    return text if len(text) <= SUMMARY_LINE_CHARS else text[: SUMMARY_LINE_CHARS - 1] + "…"


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


# -- reading records ----------------------------------------------------------------------------------


def reconstruct_records(
    records: RecordsArg,
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    use_logprobs: bool = True,
    workers: int | None = 1,
    chunk_size: int = 64,
    progress: bool | None = False,
    server: str | None = None,
    executor: Executor = "auto",
) -> Generator[RecordReconstruction, None, None]:
    """Rebuild the output ids of every record of a JSONL path or an iterable, lazily and in input order.

    Malformed records come back with ``error`` set instead of stopping the stream. ``workers`` > 1
    (None or 0: all cores) runs chunks of ``chunk_size`` records on that many threads or worker processes
    (``executor``: see :func:`audit_dataset`), with bounded work in flight; the results are the same. ``server`` names the server that produced the responses (:mod:`kimi_recon.servers`; a
    record's ``server`` field wins).
    """
    n = _worker_count(workers)
    runner = choose_executor(n, executor, _reloadable(get_tokenizer(tokenizer)))
    tok, source = _tokenizer_source(tokenizer, n if runner == "processes" else 1)
    job = _Job(source, profile, thinking, use_logprobs, _server_name(server))
    with _progress_bar(records, progress, "reconstruct") as bar:
        for result in _conventions_applied(_stream(records, _reconstruct_chunk, job, tok, n, chunk_size, runner=runner)):
            bar.update(1)
            yield result


_R = TypeVar("_R", RecordResult, RecordReconstruction)
_CUT = frozenset({FlagCode.TRUNCATED, FlagCode.TRUNCATED_TOOL_CALLS})


def _conventions_applied(results: Iterator[_R]) -> Iterator[_R]:
    """``results`` in order, a row whose count fits only another convention than its provider's rows follow
    flagged (:func:`~kimi_recon.usage_stats.learned_conventions_applied`)."""
    return learned_conventions_applied(results, _usage_of_result, _with_flag)


def _usage_of_result(result: RecordResult | RecordReconstruction) -> tuple[str | None, TokenCounts | None, bool]:
    return _usage_provider(result), result.token_counts, not any(f.code in _CUT for f in result.flags)


def _with_flag(result: _R, flag: Flag) -> _R:
    counts = None if result.token_counts is None else off_convention(result.token_counts, flag)
    return dataclasses.replace(result, flags=(*result.flags, flag), token_counts=counts)


def _usage_provider(result: RecordResult | RecordReconstruction) -> str | None:
    """Who served a result's response, as the usage check groups it: the record's ``provider``, else the server it
    was rebuilt for when one was named or detected (``"Together"``, ``"vllm==0.33.0"``), else None (unknown)."""
    provider = getattr(result, "provider", None)
    if provider:
        return str(provider)
    return result.server if result.server not in (None, "unknown") else None


class _Tally:
    """Counters and bounded examples: memory does not grow with the number of records."""

    def __init__(self, examples: int, max_errors: int, worst: int = DEFAULT_WORST) -> None:
        self.total = 0
        self.counts: Counter[str] = Counter({k: 0 for k in KINDS})
        self.error_count = 0
        self.errors: list[RecordError] = []
        self.flags: Counter[str] = Counter()
        self.severities: Counter[str] = Counter()
        self.sources: Counter[str] = Counter()
        self.token_counts = TokenCountTally()
        self.heaps: WorstHeaps = {}
        self.examples = examples
        self.max_errors = int_argument(max_errors, "max_errors", minimum=0)
        self.breakdown = BreakdownTally(worst)
        self.profiles: Counter[str] = Counter()
        self.hints: Counter[str] = Counter()

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
        self.flags.update({f.code.value for f in result.flags})
        self.severities[max_severity(result.flags) or "none"] += 1
        self.hints.update({hint for hint in map(suggested_profile, result.flags) if hint is not None})
        if result.profile is not None:
            self.profiles[result.profile] += 1
        self.token_counts.add(_usage_provider(result), result.token_counts)
        if result.source:
            self.sources[result.source] += 1
        if comparison.kind != EXACT and self.examples > 0:
            keep_worst(self.heaps, comparison.kind, comparison.diff_size, result, self.examples)
        self.breakdown.add(result)

    def freeze(self, profile: str | None, thinking: bool, elapsed: float) -> DatasetAudit:
        examples: dict[str, tuple[RecordResult, ...]] = {
            kind: tuple(r for _, _, r in worst_first(self.heaps[kind]))
            for kind in KINDS
            if kind in self.heaps
        }
        if profile is None:  # each record's model id decided: name the one most used
            profile = self.profiles.most_common(1)[0][0] if self.profiles else DEFAULT_PROFILE
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
            severity_counts=dict(self.severities),
            profile_counts=dict(self.profiles),
            profile_hints=dict(self.hints),
        )


def audit_dataset(
    records: RecordsArg,
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    use_logprobs: bool = True,
    workers: int | None = 1,
    progress: bool | None = None,
    examples: int = 5,
    max_errors: int = 100,
    chunk_size: int = 64,
    worst: int = DEFAULT_WORST,
    server: str | None = None,
    executor: Executor = "auto",
    on_record: Callable[[RecordResult], None] | None = None,
) -> DatasetAudit:
    """Audit every record of a JSONL file (a ``str`` or path) or an iterable of records (see the module doc).

    Streams in constant memory (only counters, the first ``max_errors`` errors and the ``examples`` worst
    records of each non-exact kind are kept, and for reports a fixed-size histogram of where first differences
    fall and the ``worst`` worst records: see :attr:`DatasetAudit.breakdown`). ``workers`` > 1 (None or 0: all cores) spreads chunks of
    ``chunk_size`` records over that many threads of this process (``executor="threads"``: no start-up, any
    tokenizer object shared; tiktoken encodes with the GIL released, so the encodes run side by side) or worker
    processes (``executor="processes"``: the tokenizer loaded once per worker, which also spreads the Python
    work); ``"auto"`` picks threads for 2 workers and processes for more (threads too for a tokenizer object a
    worker process cannot load again: ``kimi_recon._batch.pool.choose_executor``; measured: docs/benchmarks.md, §10). At most ``4 * workers`` chunks are in flight; the result is the same
    as with ``workers=1``. ``progress`` None shows a
    tqdm bar when stderr is a terminal. No record is dropped: a malformed one is counted as an error
    with its line number (JSONL) or index, and the others are processed. ``server`` names the server that
    produced the responses (:mod:`kimi_recon.servers`: what its parsers can lose, how it counts; a record's
    ``server`` field wins; None: what each response reveals, else unknown).

    ``on_record`` is called with each record's :class:`RecordResult`, in input order, as the audit goes: the
    per-record verdicts (``audit --records FILE`` writes them as JSON Lines) without holding them, so memory stays
    flat however many records there are. An exception it raises stops the audit.
    """
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 0:
        raise InvalidInputError(f"must be a non-negative integer, got {preview(examples)}", field="examples")
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise InvalidInputError(f"must be a positive integer, got {preview(chunk_size)}", field="chunk_size")
    if on_record is not None and not callable(on_record):
        raise InvalidInputTypeError(f"must be a function of one RecordResult, got {preview(on_record)}", field="on_record")
    if profile is not None:
        get_profile(profile)
    n = _worker_count(workers)
    runner = choose_executor(n, executor, _reloadable(get_tokenizer(tokenizer)))
    tok, source = _tokenizer_source(tokenizer, n if runner == "processes" else 1)
    job = _Job(source, profile, thinking, use_logprobs, _server_name(server))
    tally = _Tally(int_argument(examples, "examples", minimum=0), max_errors, int_argument(worst, "worst", minimum=0))
    start = time.perf_counter()
    with _progress_bar(records, progress, "audit") as bar:
        for result in _conventions_applied(_stream(records, _audit_chunk, job, tok, n, chunk_size, runner=runner)):
            tally.add(result)
            if on_record is not None:
                on_record(result)
            bar.update(1)
            if tally.total % 256 == 0 and not bar.disable:
                bar.set_postfix(exact=_pct(tally.counts[EXACT] / max(1, tally.total - tally.error_count)), errors=tally.error_count)
    return tally.freeze(None if profile is None else get_profile(profile).name, thinking is not False, time.perf_counter() - start)
