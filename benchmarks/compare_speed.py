"""``compare_ids`` on long texts, as a ratio against one encode of the same texts.

    python benchmarks/compare_speed.py            # 1M ids against 1M ids (the target: under 2 s)
    python benchmarks/compare_speed.py --quick    # 100k ids against 100k ids

Each case compares two id lists of ``n`` ids each and times it against ``KimiTokenizer.encode`` of the
two texts they came from (the baseline: producing the ids once), interleaved, best of the rounds:

- ``unrelated turns``: rendered turns of the corpus (prose, code, CJK, emoji, tool calls; a special id
  every few hundred ids) against other turns of it: nothing in common, the case that was quadratic;
- ``unrelated, dense special ids``: the same texts with a special token (``<|im_end|>``, ``</think>``,
  ``[EOS]``) after every line, a special id every ~15 ids (what made difflib's pairing quadratic);
- ``one word changed``: the first side against itself with one word changed in the middle (the common
  audit case: a long trace that differs in one place).

Also run (at ``--quick`` size) by ``benchmarks/run_all.py``.
"""

from __future__ import annotations

import argparse
import functools
import random
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.timing import best_of
from kimi_recon import KimiTokenizer, compare_ids, load_tokenizer
from kimi_recon.render import render_assistant_turn

TARGET_S = 2.0  # 1M ids against 1M ids of unrelated text, one core
TARGET_IDS = 1_000_000
SPECIALS = ("<|im_end|>", "</think>", "[EOS]")


def text_of_ids(tok: KimiTokenizer, n_ids: int, seed: int, dense: bool = False) -> str:
    """Rendered corpus turns (seed ``seed``) joined until they encode to at least ``n_ids`` ids."""
    rng = random.Random(seed)
    parts: list[str] = []
    ids = 0
    index = 0
    while ids < n_ids:
        turn = render_assistant_turn(corpus.make_record(index, seed)["response"])
        index += 1
        if dense:
            turn = "".join(line + rng.choice(SPECIALS) for line in turn.splitlines())
        parts.append(turn)
        ids += len(tok.encode(turn))
    return "".join(parts)


def cases(tok: KimiTokenizer, n_ids: int, seed: int) -> list[tuple[str, str, str]]:
    """(name, reference text, reconstructed text)."""
    a, b = text_of_ids(tok, n_ids, seed), text_of_ids(tok, n_ids, seed + 1)
    da, db = text_of_ids(tok, n_ids, seed, dense=True), text_of_ids(tok, n_ids, seed + 1, dense=True)
    middle = len(a) // 2
    space = a.index(" ", middle)
    edited = a[:space] + " changed" + a[space:]
    return [("unrelated turns", a, b), ("unrelated, dense special ids", da, db), ("one word changed", a, edited)]


def measure(tok: KimiTokenizer, n_ids: int, rounds: int, seed: int = 0) -> list[dict[str, Any]]:
    """For each case: ids per side, special ids per side, best compare and encode times, their ratio, the kind."""
    compare_ids([1], [2], tok)  # per-tokenizer tables, built once per process
    results = []
    for name, text_a, text_b in cases(tok, n_ids, seed):
        ids_a, ids_b = tok.encode(text_a)[:n_ids], tok.encode(text_b)[:n_ids]
        runs: dict[str, Callable[[], object]] = {
            "compare": functools.partial(compare_ids, ids_a, ids_b, tok),
            "encode": functools.partial(_encode_both, tok, text_a, text_b),
        }
        timings = best_of(runs, rounds, seed)
        compare_s, encode_s = min(timings["compare"]), min(timings["encode"])
        results.append({
            "case": name,
            "ids": [len(ids_a), len(ids_b)],
            "special_ids": [sum(map(tok.is_special, ids_a)), sum(map(tok.is_special, ids_b))],
            "compare_s": compare_s,
            "encode_s": encode_s,
            "ratio_vs_encode": compare_s / encode_s,
            "kind": compare_ids(ids_a, ids_b, tok).kind,
        })
    return results


def _encode_both(tok: KimiTokenizer, a: str, b: str) -> None:
    tok.encode(a)
    tok.encode(b)


def table_rows(results: Sequence[dict[str, Any]]) -> list[list[object]]:
    return [
        [r["case"], f"{r['ids'][0]:,} / {r['ids'][1]:,}", f"{r['special_ids'][0]:,} / {r['special_ids'][1]:,}", r["kind"],
         r["compare_s"], r["encode_s"], r["ratio_vs_encode"]]
        for r in results
    ]


HEADERS = ["case", "ids (ref / rec)", "special ids", "kind", "compare_ids (s)", "encode both texts (s)", "compare / encode"]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="100k ids per side instead of 1M")
    p.add_argument("--ids", type=int, help="ids per side (default 1,000,000; 100,000 with --quick)")
    p.add_argument("--rounds", type=int, default=3)
    ns = p.parse_args(argv)
    n_ids = ns.ids or (100_000 if ns.quick else TARGET_IDS)
    results = measure(load_tokenizer(), n_ids, ns.rounds)
    widths = [max(len(h), *(len(_cell(row[i])) for row in table_rows(results))) for i, h in enumerate(HEADERS)]
    print("  ".join(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)))
    for row in table_rows(results):
        print("  ".join(_cell(v).ljust(w) for v, w in zip(row, widths, strict=True)))
    unrelated = results[0]["compare_s"]
    if n_ids >= TARGET_IDS:
        print(f"unrelated turns: {unrelated:.2f} s (target < {TARGET_S} s at {TARGET_IDS:,} ids): {'met' if unrelated < TARGET_S else 'MISSED'}")
    return 0


def _cell(v: object) -> str:
    return f"{v:.3f}" if isinstance(v, float) else str(v)


if __name__ == "__main__":
    raise SystemExit(main())
