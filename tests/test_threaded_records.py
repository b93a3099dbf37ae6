"""Many records on threads: the same results as one at a time, in input order, every record a result or an error."""

from __future__ import annotations

import json
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kimi_recon import load_tokenizer
from kimi_recon._batch.pool import choose_executor
from kimi_recon._batch.threads import IN_FLIGHT_PER_WORKER, chunked, threaded_results
from kimi_recon.dataset import audit_dataset, reconstruct_records
from kimi_recon.errors import InvalidInputError

DATA = Path(__file__).parent / "data" / "golden"


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


K25 = _rows(DATA / "official-k2.5-dev" / "turns.jsonl") + _rows(DATA / "official-k2.5-dev" / "turns_adversarial.jsonl")
K3 = _rows(DATA / "official-k3-dev" / "turns.jsonl") + _rows(DATA / "official-k3-dev" / "turns_adversarial.jsonl")


def _record(row: dict[str, Any], i: int, profile: str | None = None) -> dict[str, Any]:
    rec = {"id": f"g{i}", "response": row["turn"], "reference_ids": row["output_ids"], "thinking": row["thinking"]}
    return rec if profile is None else {**rec, "profile": profile}


#: Records of every outcome: exact K2.5 and K3 turns, a wrong reference, and malformed records of several kinds.
POOL: list[Any] = [
    *(_record(r, i) for i, r in enumerate(K25[:12])),
    *(_record(r, i, "kimi-k3") for i, r in enumerate(K3[:8])),
    {**_record(K25[0], 99), "reference_ids": [1, 2, 3]},
    {"id": "no-response", "reference_ids": [1]},
    {"id": "bad-ids", "response": K25[1]["turn"], "reference_ids": [10**9]},
    {"id": "bad-profile", "response": K25[2]["turn"], "reference_ids": [1], "profile": "kimi-k9"},
    '{"not json',
    "[1, 2]",
    json.dumps(_record(K25[3], 3)),
    42,
]


def _plain(results: Any) -> list[dict[str, Any]]:
    return [r.to_dict() for r in results]


@settings(max_examples=30, deadline=None)
@given(records=st.lists(st.sampled_from(POOL), max_size=40), chunk_size=st.integers(1, 9), threads=st.integers(2, 4))
def test_threaded_reconstruct_records_equal_one_at_a_time_errors_at_the_same_indices(records: list[Any], chunk_size: int, threads: int) -> None:
    one = _plain(reconstruct_records(records))
    many = _plain(reconstruct_records(records, workers=threads, chunk_size=chunk_size, executor="threads"))
    assert many == one
    assert [r["index"] for r in many] == list(range(len(records)))  # every record, in order, none dropped


@settings(max_examples=15, deadline=None)
@given(records=st.lists(st.sampled_from(POOL), max_size=40), chunk_size=st.integers(1, 9))
def test_threaded_audit_equals_one_at_a_time(records: list[Any], chunk_size: int) -> None:
    one = audit_dataset(records, progress=False)
    many = audit_dataset(records, progress=False, workers=2, chunk_size=chunk_size, executor="threads")
    assert many.to_dict() | {"elapsed_seconds": 0} == one.to_dict() | {"elapsed_seconds": 0}
    assert [e.index for e in many.errors] == [e.index for e in one.errors]


def test_golden_turns_on_threads_are_the_official_ids_in_input_order() -> None:
    records = [_record(r, i) for i, r in enumerate(K25)] + [_record(r, i, "kimi-k3") for i, r in enumerate(K3)]
    results = list(reconstruct_records(records, workers=2, chunk_size=5, executor="threads"))
    assert [r.index for r in results] == list(range(len(records)))
    assert [list(r.ids or ()) for r in results] == [rec["reference_ids"] for rec in records]
    audit = audit_dataset(records, workers=2, chunk_size=3, progress=False)
    assert audit.counts["exact"] == audit.total == len(records)


def test_auto_picks_threads_for_two_workers_the_pool_for_more_threads_for_a_tokenizer_the_pool_cannot_load_and_one_worker_runs_alone() -> None:
    assert choose_executor(1, "auto") == "one"
    assert choose_executor(1, "processes") == "one"
    assert choose_executor(2, "auto") == "threads"  # a chunk encoded in one call: threads ran ahead of the pool on 2 cores (docs/benchmarks.md §10)
    assert choose_executor(2, "processes") == "processes"
    assert choose_executor(3, "auto") == "processes"  # threads cannot pass ~1/(GIL-held share) of one thread
    assert choose_executor(8, "auto", reloadable=False) == "threads"
    assert choose_executor(8, "threads") == "threads"
    with pytest.raises(InvalidInputError) as err:
        choose_executor(2, "fibers")
    assert err.value.field == "executor"
    with pytest.raises(InvalidInputError):
        list(reconstruct_records([], workers=2, executor="fibers"))  # type: ignore[arg-type]


def test_threads_share_a_tokenizer_a_worker_process_could_not_load_again() -> None:
    k3 = load_tokenizer(profile="kimi-k3")  # bundled, but not the default: a process pool refuses it
    records = [_record(r, i, "kimi-k3") for i, r in enumerate(K3[:6])]
    for workers in (2, 4):  # 4: more than threads are picked for, but the pool could not load this tokenizer
        results = list(reconstruct_records(records, k3, workers=workers))
        assert [list(r.ids or ()) for r in results] == [rec["reference_ids"] for rec in records]
    with pytest.raises(InvalidInputError) as err:
        list(reconstruct_records(records, k3, workers=2, executor="processes"))
    assert err.value.field == "tokenizer"


def test_threaded_results_read_ahead_a_bounded_number_of_chunks() -> None:
    read = 0

    def items() -> Iterator[int]:
        nonlocal read
        for i in range(10_000):
            read += 1
            yield i

    stream = threaded_results(chunked(items(), 3), lambda chunk: [x * 2 for x in chunk], 2)
    assert isinstance(stream, Generator)  # closing it stops the read-ahead
    assert next(stream) == 0
    assert read <= 3 * (IN_FLIGHT_PER_WORKER * 2 + 1)
    stream.close()
    assert list(threaded_results(chunked(range(100), 7), lambda chunk: [x + 1 for x in chunk], 3)) == list(range(1, 101))


def test_a_failing_input_gives_every_result_read_before_it_then_the_error() -> None:
    def items() -> Iterator[int]:
        yield from range(10)
        raise ValueError("the input broke")

    got: list[int] = []
    with pytest.raises(ValueError, match="the input broke"):
        for x in threaded_results(chunked(items(), 4), lambda chunk: list(chunk), 2):
            got.append(x)
    assert got == list(range(10))  # the two whole chunks, then the partial third one: everything read, as one at a time
    records = [_record(r, i) for i, r in enumerate(K25[:9])]

    def broken() -> Iterator[dict[str, Any]]:
        yield from records
        raise ValueError("the input broke")

    for executor in ("threads", "processes"):
        seen: list[int] = []
        with pytest.raises(ValueError, match="the input broke"):
            for r in reconstruct_records(broken(), workers=2, chunk_size=3, executor=executor):
                seen.append(r.index)
        assert seen == list(range(9)), executor  # the pool lost the chunks in flight before


def test_a_chunk_with_a_missing_result_is_an_error_not_a_dropped_sample() -> None:
    with pytest.raises(RuntimeError, match="3 items gave 2 results"):
        list(threaded_results(chunked(range(6), 3), lambda chunk: chunk[:2], 2))


def test_an_interrupt_stops_new_chunks_and_leaves_no_thread_running() -> None:
    started: list[int] = []
    before = threading.active_count()

    def work(chunk: list[int]) -> list[int]:
        started.append(chunk[0])
        return chunk

    with pytest.raises(KeyboardInterrupt):
        for x in threaded_results(chunked(range(100_000), 10), work, 2):
            if x == 25:
                raise KeyboardInterrupt  # Ctrl-C arrives in the main thread, here while it reads a result
    assert threading.active_count() == before
    assert len(started) <= 3 + IN_FLIGHT_PER_WORKER * 2 + 1  # the chunks in flight, not the whole input


def test_the_cli_executor_choice_gives_the_same_rows_as_one_worker(tmp_path: Path) -> None:
    from kimi_recon.cli import main

    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in POOL if isinstance(r, dict)) + "{broken\n", encoding="utf-8")
    outputs: list[Any] = []
    codes: list[Any] = []
    for extra in ([], ["--workers", "2"], ["--workers", "2", "--executor", "threads"], ["--workers", "2", "--executor", "processes"]):
        out = tmp_path / f"out{len(outputs)}.jsonl"
        codes.append(main(["reconstruct", str(path), "-o", str(out), *extra]))
        outputs.append(out.read_text(encoding="utf-8"))
    assert codes == [1] * 4  # some records are malformed, on every executor
    assert outputs[1:] == [outputs[0]] * 3 and outputs[0].count("\n") == sum(isinstance(r, dict) for r in POOL) + 1
    with pytest.raises(SystemExit) as exit_:
        main(["reconstruct", str(path), "--workers", "2", "--executor", "fibers"])
    assert exit_.value.code == 2


def test_a_rebuilt_row_is_the_row_the_dataclass_constructor_makes() -> None:
    import dataclasses
    import pickle

    from kimi_recon._batch.pool import RecordReconstruction

    rows = [r for r in reconstruct_records(POOL) if r.error is None]
    assert rows
    for row in rows:
        built = RecordReconstruction(**{f.name: getattr(row, f.name) for f in dataclasses.fields(RecordReconstruction)})
        assert row == built and hash(row) == hash(built) and repr(row) == repr(built)
        assert vars(row) == vars(built)  # the same fields, nothing more
        assert pickle.loads(pickle.dumps(row)) == built  # (worker processes send rows back pickled)
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.ids = ()  # type: ignore[misc]
