"""Chunks of work on a few threads of this process, results in input order, in bounded memory.

Why threads help at all: tiktoken's Rust core releases the GIL while it encodes, so one thread's encode runs
beside another thread's Python (parsing, rendering, the record's bookkeeping). Only the encode overlaps: the
speedup over one thread is at most (all the work) / (the part that holds the GIL), which is what
:func:`kimi_recon._batch.pool.choose_executor` weighs against a process pool (docs/benchmarks.md, "Many turns").
No process starts, nothing is pickled, and any tokenizer object can be shared (a process pool needs one a
worker can load again).

This module knows nothing of records: it runs ``work(chunk)`` for each chunk and gives back what it returned.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

_I = TypeVar("_I")
_T = TypeVar("_T")

#: Chunks in flight per worker (thread or process): enough that a worker never waits for the main one to read
#: the next chunk, few enough that memory stays bounded.
IN_FLIGHT_PER_WORKER = 4


def chunked(items: Iterable[_I], size: int) -> Iterator[list[_I]]:
    """``items`` in lists of ``size`` (the last one shorter). When reading ``items`` fails, the items read
    since the last chunk come out as one more chunk first, then the error: no item read is left behind."""
    chunk: list[_I] = []
    try:
        for item in items:
            chunk.append(item)
            if len(chunk) >= size:
                yield chunk
                chunk = []
    except Exception:
        if chunk:
            yield chunk
        raise
    if chunk:
        yield chunk


def threaded_results(chunks: Iterable[list[_I]], work: Callable[[list[_I]], list[_T]], threads: int) -> Iterator[_T]:
    """``work(chunk)`` of every chunk on ``threads`` threads, each chunk's results in turn, in input order
    (:func:`ordered_results`, at most ``IN_FLIGHT_PER_WORKER * threads`` chunks read ahead). On Ctrl-C (or when
    the caller stops iterating) no new chunk starts; the threads finish the chunk each is on, then the interrupt
    goes on.
    """
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kimi-recon")
    try:
        yield from ordered_results(chunks, lambda chunk: pool.submit(work, chunk), IN_FLIGHT_PER_WORKER * threads)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def ordered_results(chunks: Iterable[list[_I]], submit: Callable[[list[_I]], Future[list[_T]]], in_flight: int) -> Iterator[_T]:
    """Each chunk's results in input order, the chunks handed to ``submit`` (a thread or process pool's) at most
    ``in_flight`` ahead of the one read.

    Each chunk must give one result per item (the record functions do, errors included): a short or long list is
    a ``RuntimeError``, never a silently dropped sample. When reading the input fails, the results of everything
    read before it come out first, then the error, as they would one record at a time (a Ctrl-C is no Exception:
    it goes on at once).
    """
    pending: deque[tuple[int, Future[list[_T]]]] = deque()
    source = iter(chunks)
    while True:
        try:
            chunk = next(source)
        except StopIteration:
            break
        except Exception:
            while pending:  # what was read before the failure, then the failure
                yield from _checked(*pending.popleft())
            raise
        pending.append((len(chunk), submit(chunk)))
        while len(pending) >= in_flight:
            yield from _checked(*pending.popleft())
    while pending:
        yield from _checked(*pending.popleft())


def _checked(size: int, future: Future[list[_T]]) -> list[_T]:
    results = future.result()
    if len(results) != size:
        raise RuntimeError(f"a chunk of {size} items gave {len(results)} results")
    return results
