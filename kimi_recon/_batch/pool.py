"""The process pool of :mod:`kimi_recon.dataset`: records in chunks to worker processes (each loads the
tokenizer once), results back in input order, in bounded memory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

from .. import responses
from .._base.arguments import int_argument
from .._base.files import count_records
from .._records.record import (
    REFERENCE_KEYS,
    RESPONSE_KEYS,
    RecordError,
    RecordResult,
    RecordsArg,
    TokenizerArg,
    _iter_lines,
    audit_records,
    checked_together,
    get_tokenizer,
    record_error,
)
from ..errors import InvalidInputError, InvalidInputTypeError
from ..flags import Flag, flags_to_json
from ..record_options import OPTION_KEYS
from ..tokenizer import BUNDLED, KimiTokenizer, load_tokenizer
from ..usage_check import TokenCounts
from .threads import IN_FLIGHT_PER_WORKER, chunked, ordered_results, threaded_results

_T = TypeVar("_T")

_Item = tuple[int, int | None, Any]


@dataclass(frozen=True)
class _Job:
    tokenizer: str | None
    profile: str | None  # None: each record's model id decides
    thinking: bool | None  # None: on unless a record says (a message without reasoning is flagged)
    use_logprobs: bool
    server: str | None = None


def _audit_chunk(items: list[_Item], job: _Job, tokenizer: KimiTokenizer | None = None) -> list[RecordResult]:
    tok = tokenizer if tokenizer is not None else get_tokenizer(job.tokenizer)
    return audit_records(items, tok, job.profile, job.thinking, job.use_logprobs, job.server)


@dataclass(frozen=True)
class RecordReconstruction:
    """One record's rebuilt ids (``ids`` None and ``error`` set when the record is malformed)."""

    index: int
    line: int | None
    record_id: str | None
    ids: tuple[int, ...] | None
    source: str | None = None
    flags: tuple[Flag, ...] = ()
    error: RecordError | None = None
    token_counts: TokenCounts | None = None
    server: str | None = None
    #: the chat format the ids were rebuilt in (the record's model id or profile decides, else the default)
    profile: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "line": self.line,
            "id": self.record_id,
            "output_ids": list(self.ids) if self.ids is not None else None,
            "source": self.source,
            "flags": flags_to_json(self.flags),
            "token_counts": self.token_counts.to_dict() if self.token_counts is not None else None,
            "error": self.error.to_dict() if self.error is not None else None,
            "server": self.server,
            "profile": self.profile,
        }


def _reconstruct_chunk(items: list[_Item], job: _Job, tokenizer: KimiTokenizer | None = None) -> list[RecordReconstruction]:
    tok = tokenizer if tokenizer is not None else get_tokenizer(job.tokenizer)
    out = []
    checked = checked_together(items, tok, job.profile, job.thinking, job.use_logprobs, job.server, _nothing)
    for (index, line, _), (rid, _, result) in zip(items, checked, strict=True):
        if isinstance(result, Exception):
            error = record_error(index, line, rid, result)
            out.append(RecordReconstruction(index, error.line, rid, None, error=error))
            continue
        recon, counts, flags, _ = result
        out.append(_rebuilt_row(index, line, rid, tuple(recon.ids), recon.source, flags, counts, recon.server, recon.profile))
    return out


def _rebuilt_row(
    index: int,
    line: int | None,
    rid: str | None,
    ids: tuple[int, ...],
    source: str,
    flags: tuple[Flag, ...],
    counts: TokenCounts | None,
    server: str,
    profile: str | None,
) -> RecordReconstruction:
    """``RecordReconstruction(index, line, rid, ids, source, flags, token_counts=counts, server=server, profile=profile)`` without
    the frozen dataclass's nine ``object.__setattr__`` calls: 11k of the 71k instructions the records path added
    to a turn's rebuild (callgrind), and on threads every one of them holds the GIL (its fields are a
    reconstruction's own; tests/test_threaded_records.py compares the two)."""
    row = object.__new__(RecordReconstruction)
    row.__dict__.update(
        index=index, line=line, record_id=rid, ids=ids, source=source, flags=flags, error=None, token_counts=counts, server=server, profile=profile
    )
    return row


def _nothing(record: Mapping[str, Any]) -> None:
    """What a reconstruction checks before rendering a record: nothing more than rendering does."""


def _init_worker(tokenizer: str | None) -> None:
    get_tokenizer(tokenizer)  # load once per worker process


def _items(records: RecordsArg) -> Iterator[_Item]:
    if isinstance(records, (bytes, bytearray, Mapping)) or not isinstance(records, (str, os.PathLike, Iterable)):
        raise InvalidInputTypeError(f"must be a JSONL path or an iterable of records, got {type(records).__name__}", field="records")
    if isinstance(records, (str, os.PathLike)):
        for index, (line, raw) in enumerate(_iter_lines(records)):
            yield index, line, raw  # parsed in the worker
    else:
        for index, rec in enumerate(records):
            yield index, None, rec


#: Every key a record is read for; other keys (prompts, messages) are not sent to worker processes.
_READ_KEYS = frozenset(
    {*RESPONSE_KEYS, *REFERENCE_KEYS, "id", "profile", "model", "thinking", "call_index_offset", "finish_reason", "logprobs",
     "choices", "role", "native_finish_reason", "error", *responses.MESSAGE_FIELDS,
     "usage", "provider", "messages", "prompt_ids", *OPTION_KEYS,  # the usage check's
     "server", "sglext", "prompt_token_ids",  # the server's (and "model", above): named, or what a response (as the record) reveals
     "request", "reasoning_effort", "chat_template_kwargs", "reasoning"}  # what the request said about thinking and its effort
)


def _slim(item: _Item) -> _Item:
    index, line, rec = item
    if isinstance(rec, Mapping) and not rec.keys() <= _READ_KEYS:
        # (a record that is the message itself keeps the keys that sound like reasoning: the reader says they were not read)
        rec = {k: v for k, v in rec.items() if k in _READ_KEYS or responses.sounds_like_reasoning(k)}
    return index, line, rec


#: More worker processes than this is a typo, not a machine (the pool cannot start that many).
_MAX_WORKERS = 4096


def _worker_count(workers: int | None) -> int:
    workers = int_argument(workers, "workers", none=True)
    if workers is not None and workers > _MAX_WORKERS:
        raise InvalidInputError(f"must be at most {_MAX_WORKERS} processes, got {workers}", field="workers")
    if workers is None or workers <= 0:
        return os.cpu_count() or 1
    return workers


#: How ``workers > 1`` run: ``"auto"`` (:func:`choose_executor` decides), ``"threads"`` or ``"processes"``.
Executor = Literal["auto", "threads", "processes"]
#: What runs the records: one at a time in this thread, chunks on threads, or chunks on worker processes.
Runner = Literal["one", "threads", "processes"]


def _reloadable(tok: KimiTokenizer) -> bool:
    """Whether a worker process can load ``tok`` again (the bundled one, or one from a directory)."""
    return tok is load_tokenizer() or tok.source == BUNDLED or bool(tok.source and Path(tok.source).is_dir())


#: Up to this many workers, ``"auto"`` runs threads; more go to the process pool (see :func:`choose_executor`).
THREADS_UP_TO = 2


def choose_executor(workers: int, executor: str, reloadable: bool = True) -> Runner:
    """What runs ``workers`` workers: ``"one"`` for one, else ``executor`` when it is not ``"auto"``; else threads
    for up to :data:`THREADS_UP_TO` workers, the process pool for more (threads too when the tokenizer is one a
    worker process could not load again).

    The rule, measured on 2 cores (docs/benchmarks.md, §10; ``benchmarks/matrix.py``): a chunk's turns are encoded
    in one call into tiktoken, which releases the GIL for all of it, so a thread's encode runs beside the other
    thread's Python with one hand-off a chunk. Two threads then ran ahead of two processes (no start-up, nothing
    pickled). But the Python holds the GIL (about 55 - 60% of an ordinary record on one thread), so threads cannot
    pass about ``1 / that share`` of one thread, however many there are: beyond two workers the pool, which spreads
    the Python too, is the one that keeps growing.
    """
    if not isinstance(executor, str):  # (an array's `in` below has no one answer)
        raise InvalidInputTypeError(f"must be one of {', '.join(get_args(Executor))}, got {type(executor).__name__}", field="executor")
    if executor not in get_args(Executor):
        raise InvalidInputError(f"must be one of {', '.join(get_args(Executor))}, got {executor!r}", field="executor")
    if workers <= 1:
        return "one"
    if executor != "auto":
        return "threads" if executor == "threads" else "processes"
    return "threads" if workers <= THREADS_UP_TO or not reloadable else "processes"


def _tokenizer_source(tokenizer: TokenizerArg, workers: int) -> tuple[KimiTokenizer, str | None]:
    """The tokenizer, and the source worker processes load it from (None: the bundled one); ``workers`` > 1
    means worker processes, which need a tokenizer they can load again."""
    tok = get_tokenizer(tokenizer)
    if tok is load_tokenizer() or tok.source == BUNDLED:
        return tok, None
    if workers > 1 and not _reloadable(tok):
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
    runner: Runner | None = None,
) -> Iterator[_T]:
    """Results in input order; with ``workers > 1`` at most ``4 * workers`` chunks are in flight, on threads or
    worker processes as ``runner`` says (None: processes, as before threads existed).

    ``slim`` sends worker processes only the keys an audit or a reconstruction reads (not the prompt).
    """
    chunk_size = int_argument(chunk_size, "chunk_size", minimum=1)
    items = _items(records)
    if workers <= 1:  # in chunks too: a chunk's turns are encoded in one call into tiktoken (see checked_together)
        for chunk in chunked(items, chunk_size):
            yield from work(chunk, job, tok)
        return
    if runner == "threads":
        yield from threaded_results(chunked(items, chunk_size), lambda chunk: work(chunk, job, tok), workers)
        return
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_init_worker, initargs=(job.tokenizer,))
    chunks = chunked((_slim(item) for item in items) if slim else items, chunk_size)
    try:
        yield from ordered_results(chunks, lambda chunk: pool.submit(work, chunk, job, None), IN_FLIGHT_PER_WORKER * workers)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def progress_disabled_by_env() -> bool:
    """``TQDM_DISABLE`` set to anything but ``""``, ``0`` or ``false`` turns every progress bar off (as tqdm's own
    environment settings would, had the bar not been given ``disable`` explicitly)."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("", "0", "false", "no")


def _progress_bar(records: RecordsArg, progress: bool | None, desc: str) -> Any:
    """A tqdm bar on stderr; a disabled one (whose methods do nothing) when not shown."""
    from tqdm import tqdm

    show = sys.stderr.isatty() if progress is None else progress
    if progress_disabled_by_env():
        show = False
    total = None
    if show and isinstance(records, (str, os.PathLike)):
        total = count_records(records)  # one cheap pass, so the bar has a total and an ETA
    elif isinstance(records, Sized) and not isinstance(records, (str, bytes)):
        total = len(records)
    return tqdm(total=total, unit="rec", desc=desc, file=sys.stderr, dynamic_ncols=True, disable=not show)
