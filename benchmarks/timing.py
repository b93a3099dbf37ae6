"""Interleaved timing shared by the benchmark scripts: every side of a ratio measured in the same rounds."""

from __future__ import annotations

import gc
import random
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
