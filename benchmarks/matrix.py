"""The hot path's figures in one run: per profile, per input shape, per length class, and many turns at once.

    python benchmarks/matrix.py --quick     # a few seconds
    python benchmarks/matrix.py             # 2,000 ordinary and 200 long turns per cell; 1,000 and 10,000 records

1. **One turn** (process CPU time, paired blocks: :func:`benchmarks.timing.paired_blocks`): ``reconstruct_output_ids``
   against one raw tiktoken ``encode(text, allowed_special="all")`` of the profile's rendered output text (the
   floor; for K3 the wrong ids), for K2.5 and K3, from the stored message dict and from an ``AssistantTurn`` parsed
   beforehand, on ordinary turns (about 500 characters of output) and long ones (10,000+), each block of turns
   timed by all three back to back; the ratio is the median over the blocks (with its quartiles), the per-turn
   overhead in µs over the encode likewise.
2. **Many turns** (wall time: the point is the second core): ``reconstruct_records`` over N ordinary records
   one at a time and on 2 threads against the same single-thread raw encode, as medians over paired blocks of
   records (goal: threads >= 1.6x raw on 2 cores for 10k ordinary turns), beside two controls: the same raw
   encodes split over 2 threads, and ``encode_ordinary`` of the texts in two shares of one call each, on 2
   threads against 1 (what the machine's second core gives tiktoken alone; a shared VM may give far less than
   2x); 2 worker processes, whose pool starts once a run, as the best of whole runs; and, measured on one
   thread, how much of a record's time holds the GIL (everything but tiktoken's Rust encode, replayed alone on
   the same arguments), which bounds what threads can reach: ``all / max(GIL-held, all / 2)``.

Also wired into ``benchmarks/run_all.py`` as the ``matrix`` section. Records come from
:func:`benchmarks.corpus.sized_corpus`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.timing import best_of, paired_blocks
from kimi_recon import load_tokenizer
from kimi_recon.dataset import reconstruct_records
from kimi_recon.profiles import get_profile
from kimi_recon.reconstruct import reconstruct_many, reconstruct_output_ids
from kimi_recon.render import render_turn_with_flags
from kimi_recon.responses import as_turn
from kimi_recon.tokenizer import KimiTokenizer

PROFILES = ("kimi-k2.5", "kimi-k3")
SHAPES = ("dict", "parsed")
#: ``one``: ``reconstruct_output_ids`` turn by turn; ``many``: ``reconstruct_many`` over each block of turns.
ENTRIES = ("one", "many")
TARGET_THREADS_RAW = 1.6
WORKERS = 2  # the goal is stated for 2 cores


def _records(n: int, length_class: str, profile: str) -> list[dict[str, Any]]:
    records = corpus.sized_corpus(n, length_class)
    return records if profile == "kimi-k2.5" else [{**r, "profile": profile} for r in records]


def _raw_encodes(enc: Any, texts: Sequence[str]) -> Callable[[], object]:
    return lambda: [enc.encode(t, allowed_special="all") for t in texts]


def _block_raw_encodes(enc: Any, texts: Sequence[str]) -> Callable[[int, int], object]:
    return lambda lo, hi: [enc.encode(t, allowed_special="all") for t in texts[lo:hi]]


def _block_reconstructs(items: Sequence[Any], tok: KimiTokenizer, prof: Any) -> Callable[[int, int], object]:
    return lambda lo, hi: [reconstruct_output_ids(item, tok, prof) for item in items[lo:hi]]


def _block_reconstruct_many(items: Sequence[Any], tok: KimiTokenizer, prof: Any) -> Callable[[int, int], object]:
    return lambda lo, hi: reconstruct_many(items[lo:hi], tok, prof)


#: Blocks a one-turn cell is cut into for :func:`~benchmarks.timing.paired_blocks` (100 ordinary or 10 long turns
#: in the full run: a few milliseconds a side, short against the machine's drift, long against the clock's tick).
BLOCKS_PER_CELL = 20


def per_turn(sizes: Mapping[str, int], rounds: int, seed: int) -> list[dict[str, Any]]:
    """One row per (profile, length class, shape): raw and reconstruct µs a turn, ratio (with its quartiles) and
    overhead, as medians over paired blocks (:func:`~benchmarks.timing.paired_blocks`, process CPU time)."""
    rows = []
    for profile in PROFILES:
        tok, prof = load_tokenizer(profile=profile), get_profile(profile)
        enc = tok.encoding
        for length_class, n in sizes.items():
            msgs = [r["response"] for r in corpus.sized_corpus(n, length_class)]
            turns = [as_turn(m) for m in msgs]
            texts = [render_turn_with_flags(t, prof).text for t in turns]
            inputs = {"dict": msgs, "parsed": turns}
            same = [r.to_dict() for r in reconstruct_many(msgs, tok, prof)] == [reconstruct_output_ids(m, tok, prof).to_dict() for m in msgs]
            sides: dict[str, Callable[[int, int], object]] = {"raw": _block_raw_encodes(enc, texts)}
            for shape in SHAPES:
                sides[f"{shape} one"] = _block_reconstructs(inputs[shape], tok, prof)
                sides[f"{shape} many"] = _block_reconstruct_many(inputs[shape], tok, prof)
            figures = paired_blocks(sides, "raw", n, max(1, n // BLOCKS_PER_CELL), rounds, seed)
            chars = sum(corpus.message_chars(m) for m in msgs) / n
            for entry in ENTRIES:
                for shape in SHAPES:
                    f = figures[f"{shape} {entry}"]
                    rows.append({
                        "profile": profile, "length": length_class, "shape": shape, "entry": entry, "turns": n, "chars_per_turn": chars,
                        "raw_us": figures["raw"].us_per_item, "reconstruct_us": f.us_per_item,
                        "ratio": f.ratio, "ratio_quartiles": [f.ratio_q1, f.ratio_q3], "overhead_us": f.overhead_us, "pairs": f.pairs,
                        "many_equal_one": same,
                    })
    return rows


class _Recorder:
    """Stands in for a tiktoken ``CoreBPE`` and notes every call, to replay the Rust part alone."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.core, name)

        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            return method(*args)

        return call


def gil_share(records: Sequence[Mapping[str, Any]], tok: KimiTokenizer, profile: str, rounds: int, seed: int) -> dict[str, float]:
    """CPU per record of ``reconstruct_records`` on one thread, and of its tiktoken Rust calls replayed alone (the
    part that releases the GIL; the replay still converts the arguments and builds the lists, so the GIL-held
    share it gives is a lower bound)."""
    enc = tok.encoding

    def run() -> None:
        for _ in reconstruct_records(records):  # the bundled tokenizer; K3 records switch to K3's, ``tok``
            pass

    recorder = _Recorder(enc._core_bpe)
    enc._core_bpe = recorder
    try:
        run()
    finally:
        enc._core_bpe = recorder.core
    core, calls = recorder.core, recorder.calls
    best = {k: min(v) for k, v in best_of(
        {"all": run, "rust": lambda: [getattr(core, m)(*a) for m, a in calls]}, rounds, seed, clock=time.process_time
    ).items()}
    n = len(records)
    held = best["all"] - best["rust"]
    return {
        "all_us": best["all"] / n * 1e6, "rust_us": best["rust"] / n * 1e6, "held_us": held / n * 1e6,
        "held_share": held / best["all"], "rust_calls_per_record": len(calls) / n,
        "thread_bound": best["all"] / max(held, best["all"] / 2),
    }


def _on_threads(work: Callable[[Sequence[str]], object], parts: Sequence[Sequence[str]]) -> None:
    """``work`` of each part, each on its own thread, until all are done."""
    workers = [threading.Thread(target=work, args=(part,)) for part in parts]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


def _block_encodes(encode: Callable[[str], object], texts: Sequence[str], threads: int) -> Callable[[int, int], None]:
    """``encode`` of each text of a block, split over ``threads`` threads."""

    def go(lo: int, hi: int) -> None:
        part = texts[lo:hi]
        _on_threads(lambda p: [encode(t) for t in p], [part[i::threads] for i in range(threads)])

    return go


def _block_in_one_call(enc: Any, texts: Sequence[str], shares: int, threaded: bool) -> Callable[[int, int], None]:
    """``encode_ordinary`` of a block's texts in ``shares`` shares, each joined into one text and encoded in one
    call, one after another or each on its own thread: tiktoken's Rust with the GIL released for all of it and no
    hand-off between calls, which is what the machine's second core gives tiktoken."""

    def share(part: Sequence[str]) -> None:
        enc.encode_ordinary("\n".join(part))

    def go(lo: int, hi: int) -> None:
        part = texts[lo:hi]
        parts = [part[i::shares] for i in range(shares)]
        if threaded:
            _on_threads(share, parts)
        else:
            for one in parts:
                share(one)

    return go


def _block_records(records: Sequence[Mapping[str, Any]], **kw: Any) -> Callable[[int, int], None]:
    def go(lo: int, hi: int) -> None:
        for _ in reconstruct_records(records[lo:hi], **kw):
            pass

    return go


def _records_run(records: Sequence[Mapping[str, Any]], **kw: Any) -> Callable[[], None]:
    def go() -> None:
        for _ in reconstruct_records(records, **kw):
            pass

    return go


#: Records in a block of the many-turn pairs (at least; a tenth of the run when that is more): long enough that a
#: thread pool's start and the last chunk's tail, paid in every pair, stay a few percent of it.
MANY_BLOCK = 1000


def many_turns(counts: Sequence[int], rounds: int, seed: int, workers: int = WORKERS) -> list[dict[str, Any]]:
    """One row per (profile, record count): ``reconstruct_records`` one at a time and on ``workers`` threads
    against raw encode on one thread, as medians over paired blocks of wall time (so the VM's drift cancels, as
    for one turn), beside two controls: the raw encodes split over ``workers`` threads (each call converts the
    allowed set and builds its list under the GIL, and hands the GIL over), and ``encode_ordinary`` of the texts in
    ``workers`` shares of one call each, on ``workers`` threads against one after another (:func:`_block_in_one_call`):
    what this machine's second core gives tiktoken; and ``workers`` processes, whose pool starts once a run, as
    the best of whole runs against raw encode timed the same way."""
    rows = []
    for profile in PROFILES:
        tok, prof = load_tokenizer(profile=profile), get_profile(profile)
        enc = tok.encoding
        for n in counts:
            records = _records(n, "ordinary", profile)
            texts = [render_turn_with_flags(as_turn(r["response"]), prof).text for r in records]
            # the bundled tokenizer (K3 records switch to K3's), which worker processes can load again
            expected = [r.to_dict() for r in reconstruct_records(records)]
            threaded = [r.to_dict() for r in reconstruct_records(records, workers=workers)]

            sides: dict[str, Callable[[int, int], object]] = {
                "raw encode, 1 thread": _block_raw_encodes(enc, texts),
                f"raw encode, {workers} threads": _block_encodes(functools.partial(enc.encode, allowed_special="all"), texts, workers),
                "encode_ordinary in one call, 1 thread": _block_in_one_call(enc, texts, workers, threaded=False),
                f"encode_ordinary in one call, {workers} threads": _block_in_one_call(enc, texts, workers, threaded=True),
                "one at a time": _block_records(records),
                f"{workers} threads": _block_records(records, workers=workers),
            }
            paired = paired_blocks(sides, "raw encode, 1 thread", n, max(MANY_BLOCK, n // 10), rounds, seed, clock=time.perf_counter)
            whole = {k: min(v) for k, v in best_of({
                "raw encode, 1 thread": _raw_encodes(enc, texts),
                f"{workers} processes": _records_run(records, workers=workers, executor="processes"),
            }, rounds, seed).items()}
            us = {k: v.us_per_item for k, v in paired.items()}
            split = gil_share(records[: min(n, 2000)], tok, profile, rounds, seed)
            rows.append({
                "profile": profile, "records": n, "pairs": paired["one at a time"].pairs, "us_per_record": us,
                "ratio_vs_raw": {
                    **{k: v.ratio for k, v in paired.items() if not k.startswith("encode_ordinary")},
                    f"{workers} processes": whole["raw encode, 1 thread"] / whole[f"{workers} processes"],
                },
                "ratio_quartiles": {k: [v.ratio_q1, v.ratio_q3] for k, v in paired.items()},
                "threads_vs_one": us["one at a time"] / us[f"{workers} threads"],
                "second_core": us["encode_ordinary in one call, 1 thread"] / us[f"encode_ordinary in one call, {workers} threads"],
                "whole_runs_s": whole,
                "gil": split, "threads_equal_one": threaded == expected,
            })
    return rows


def lines(result: Mapping[str, Any]) -> list[str]:
    out = [
        "one turn (process CPU, medians over paired blocks): reconstruct_output_ids turn by turn (one) and reconstruct_many "
        "over the block (many) against raw encode(text, allowed_special='all')"
    ]
    out.append(f"  {'profile':<10} {'length':<9} {'input':<7} {'entry':<5} {'chars':>6} {'raw µs':>8} {'recon µs':>9} {'ratio':>7} {'quartiles':>13} {'overhead µs':>12}")
    for r in result["per_turn"]:
        q1, q3 = r["ratio_quartiles"]
        out.append(
            f"  {r['profile']:<10} {r['length']:<9} {r['shape']:<7} {r['entry']:<5} {r['chars_per_turn']:>6.0f} {r['raw_us']:>8.1f} "
            f"{r['reconstruct_us']:>9.1f} {r['ratio']:>6.3f}x {q1:>6.3f}-{q3:<6.3f} {r['overhead_us']:>+12.1f}"
        )
    if result["per_turn"]:
        same = all(r["many_equal_one"] for r in result["per_turn"])
        out.append(f"  reconstruct_many gives what reconstruct_output_ids gives, in every cell: {'yes' if same else 'NO'}")
    out.append(f"many turns (wall; threads: medians over paired blocks of {MANY_BLOCK:,}+ records; processes: best of whole runs): "
               "reconstruct_records over ordinary records, ratio against raw encode on 1 thread")
    for r in result["many"]:
        q = r["ratio_quartiles"]
        ratios = ", ".join(
            f"{k} {v:.2f}x" + (f" ({q[k][0]:.2f}-{q[k][1]:.2f})" if k in q else "") for k, v in r["ratio_vs_raw"].items() if k != "raw encode, 1 thread"
        )
        g = r["gil"]
        out.append(f"  {r['profile']:<10} {r['records']:>6} records: {ratios}")
        out.append(f"  {'':<10} against one at a time: threads {r['threads_vs_one']:.2f}x; what the second core gives tiktoken "
                   f"(encode_ordinary, a call a share, on {WORKERS} threads against 1): {r['second_core']:.2f}x")
        out.append(f"  {'':<10} GIL held {g['held_us']:.1f} of {g['all_us']:.1f} µs a record ({g['held_share']:.0%}; "
                   f"{g['rust_calls_per_record']:.2f} Rust calls = {g['rust_us']:.1f} µs): 2 threads can reach at most "
                   f"{g['thread_bound']:.2f}x one at a time; threaded results equal one at a time: {'yes' if r['threads_equal_one'] else 'NO'}")
    return out


def measure(quick: bool, rounds: int, seed: int) -> dict[str, Any]:
    sizes = {"ordinary": 200, "long": 20} if quick else {"ordinary": 2000, "long": 200}
    counts = (500,) if quick else (1000, 10_000)
    return {
        "per_turn": per_turn(sizes, rounds, seed),
        "many": many_turns(counts, max(2, rounds // 2) if quick else rounds, seed),
        "cpus": os.cpu_count(),
    }


def failures(result: Mapping[str, Any]) -> list[str]:
    out = [f"{r['profile']} {r['records']} records: threaded results differ from one at a time" for r in result["many"] if not r["threads_equal_one"]]
    out += sorted({f"{r['profile']} {r['length']} turns: reconstruct_many differs from reconstruct_output_ids" for r in result["per_turn"] if not r["many_equal_one"]})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="200 ordinary and 20 long turns a cell; 500 records")
    p.add_argument("--rounds", type=int, help="rounds per measurement (default: 5 full, 3 quick)")
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--json", action="store_true", help="also print the figures as one JSON line")
    ns = p.parse_args(argv)
    result = measure(ns.quick, ns.rounds or (3 if ns.quick else 5), ns.seed)
    print("\n".join(lines(result)))
    if ns.json:
        print(json.dumps(result, default=str))
    return 2 if failures(result) else 0


if __name__ == "__main__":
    raise SystemExit(main())
