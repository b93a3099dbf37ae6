"""Interleaved timing shared by the benchmark scripts: every side of a ratio measured in the same rounds."""

from __future__ import annotations

import dataclasses
import gc
import random
import statistics
import time
from collections.abc import Callable, Mapping


def best_of(
    funcs: Mapping[str, Callable[[], object]], rounds: int, seed: int, clock: Callable[[], float] = time.perf_counter
) -> dict[str, list[float]]:
    """Times of each function over ``rounds`` interleaved rounds (order shuffled every round), read from ``clock``
    (wall time by default; ``time.process_time`` where other processes load the machine)."""
    times: dict[str, list[float]] = {name: [] for name in funcs}
    order = list(funcs)
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        for name in order:
            gc.collect()
            t0 = clock()
            funcs[name]()
            times[name].append(clock() - t0)
    return times


@dataclasses.dataclass(frozen=True)
class Paired:
    """One side of :func:`paired_blocks` against the baseline: medians over every (round, block) pair."""

    ratio: float  #: baseline time / this side's time, median over the pairs (the baseline's own: 1.0)
    ratio_q1: float  #: the lower and upper quartiles of that ratio: how much the pairs agree
    ratio_q3: float
    us_per_item: float  #: this side's time of a block / its items, in µs, median
    overhead_us: float  #: (this side's time - the baseline's) / items of a block, in µs, median
    pairs: int


def paired_blocks(
    sides: Mapping[str, Callable[[int, int], object]],
    baseline: str,
    n: int,
    block: int,
    rounds: int,
    seed: int,
    clock: Callable[[], float] = time.process_time,
) -> dict[str, Paired]:
    """Each side (``side(lo, hi)`` works on items ``lo:hi``) against ``baseline`` over blocks of ``block`` items:
    in every round, every block is run by every side back to back (order shuffled), and each side's time is paired
    with the baseline's on the same block a few milliseconds apart.

    Why not the best of whole runs (:func:`best_of`): this VM's speed drifts by ±25% over seconds, so two sides
    timed whole, even interleaved, each meet a different machine, and a ratio of their bests moved by 0.8 - 1.4x
    between runs of the same code. A pair meets the same machine; the median of the pairs' ratios held within a
    few percent run to run. The garbage collector is frozen and off inside a pair (collected between pairs), so
    neither side pays for the other's garbage."""
    if baseline not in sides:
        raise ValueError(f"the baseline {baseline!r} is not one of the sides {sorted(sides)}")
    times: dict[str, list[float]] = {name: [] for name in sides}
    sizes: list[int] = []
    order = list(sides)
    rng = random.Random(seed)
    gc.collect()
    gc.freeze()  # the corpus and the tokenizer: not walked by every collection between pairs
    try:
        for _ in range(rounds):
            for lo in range(0, n, block):
                hi = min(lo + block, n)
                rng.shuffle(order)
                gc.disable()
                for name in order:
                    t0 = clock()
                    sides[name](lo, hi)
                    times[name].append(clock() - t0)
                gc.enable()
                gc.collect()
                sizes.append(hi - lo)
    finally:
        gc.enable()
        gc.unfreeze()
    base = times[baseline]
    out = {}
    for name, own in times.items():
        ratios = [b / t for b, t in zip(base, own, strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
        out[name] = Paired(
            statistics.median(ratios),
            q1,
            q3,
            statistics.median(t / k * 1e6 for t, k in zip(own, sizes, strict=True)),
            statistics.median((t - b) / k * 1e6 for t, b, k in zip(own, base, sizes, strict=True)),
            len(own),
        )
    return out
