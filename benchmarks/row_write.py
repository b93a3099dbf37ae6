"""What keeping the API key off disk costs each ``generate`` row: ``encode_row`` against its floor and the old walk.

    python benchmarks/row_write.py --quick      # also run by benchmarks/run_all.py

``encode_row`` serialises a row and searches the line for the key once. Two baselines measured in the same
run on the same rows: the floor, serialising alone (``to_json_line`` + UTF-8), and the old way, walking every
value of the row (each id of ``output_ids``, ``prompt_ids`` and ``sample``) to redact strings before
serialising. Rows are shaped like ``generate --prompt-ids --training-sample`` rows (a few thousand ids, a
few KB of text). Target: encode_row costs at most 1.25x the floor (the key search is one ``str.__contains__``).
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.timing import best_of
from kimi_recon.openrouter.output import encode_row, to_json_line

TARGET_RATIO = 1.25
KEY = "sk-or-v1-" + "4f2a9c0e7b1d3e5f" * 4
_WORDS = "the model wrote this reasoning about the weather in Paris and then called a tool with arguments".split()


def _walk_redact(value: Any, secret: str) -> Any:
    """The old per-row redaction: a recursive walk over every value (kept here as the baseline)."""
    if isinstance(value, str):
        return value.replace(secret, "[REDACTED]")
    if isinstance(value, Mapping):
        return {_walk_redact(k, secret): _walk_redact(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk_redact(v, secret) for v in value]
    return value


def _old_encode(row: Mapping[str, Any], secret: str) -> bytes:
    return (to_json_line(_walk_redact(row, secret)) + "\n").encode("utf-8")


def _floor(row: Mapping[str, Any], secret: str) -> bytes:
    return (to_json_line(row) + "\n").encode("utf-8")


def make_rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        prompt = [rng.randrange(163_000) for _ in range(rng.randrange(500, 3000))]
        output = [rng.randrange(163_000) for _ in range(rng.randrange(200, 2000))]
        text = " ".join(rng.choice(_WORDS) for _ in range(len(output) // 2))
        rows.append({
            "id": f"p{i}", "status": "ok", "line": i + 1, "model": "moonshotai/kimi-k2.5", "provider": "Moonshot AI",
            "output_ids": output, "output_source": "text", "prompt_ids": prompt,
            "sample": {"input_ids": prompt + output, "loss_mask": [0] * len(prompt) + [1] * len(output), "prompt_len": len(prompt), "flags": []},
            "flags": [], "finish_reason": "stop", "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(output), "cost": 0.001},
            "response": {"choices": [{"message": {"role": "assistant", "reasoning": text, "content": text[: len(text) // 3]}}]},
        })  # fmt: skip
    return rows


def _write_all(fn: Callable[[Mapping[str, Any], str], bytes], rows: list[dict[str, Any]]) -> None:
    for row in rows:
        fn(row, KEY)


def measure(n_rows: int, rounds: int, seed: int) -> dict[str, Any]:
    rows = make_rows(n_rows, seed)
    if any(encode_row(r, KEY) != _floor(r, KEY) for r in rows):
        raise AssertionError("encode_row changed a row that holds no key")
    ways = {"floor (serialise only)": _floor, "encode_row": encode_row, "old walk + serialise": _old_encode}
    # interleaved rounds, best of each: a noisy machine hurts all alike
    times = best_of({name: functools.partial(_write_all, fn, rows) for name, fn in ways.items()}, rounds, seed)
    best = {name: min(ts) for name, ts in times.items()}
    per_row_us = {name: 1e6 * t / n_rows for name, t in best.items()}
    return {
        "rows": n_rows,
        "rounds": rounds,
        "us_per_row": per_row_us,
        "ratio_to_floor": best["encode_row"] / best["floor (serialise only)"],
        "speedup_over_walk": best["old walk + serialise"] / best["encode_row"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    ns = p.parse_args()
    result = measure(50 if ns.quick else 400, 3 if ns.quick else 7, ns.seed)
    for name, us in result["us_per_row"].items():
        print(f"{name:<24} {us:9.1f} us/row")
    met = "met" if result["ratio_to_floor"] <= TARGET_RATIO else "MISSED"
    print(f"encode_row / floor: {result['ratio_to_floor']:.3f}x (target <= {TARGET_RATIO}x: {met})")
    print(f"old walk / encode_row: {result['speedup_over_walk']:.2f}x")


if __name__ == "__main__":
    main()
