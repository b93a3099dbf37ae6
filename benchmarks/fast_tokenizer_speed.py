"""The exported fast tokenizer's ``encode_batch`` against tiktoken, one thread and two, in one run.

    python benchmarks/fast_tokenizer_speed.py --quick     # 0.5 MiB corpus (also run by run_all.py)
    python benchmarks/fast_tokenizer_speed.py             # 8 MiB corpus
    python benchmarks/fast_tokenizer_speed.py --json      # one JSON line at the end, for run_all.py

On the rendered turns of the benchmark corpus (:mod:`benchmarks.corpus`), interleaved rounds, best of N:

- tiktoken ``Encoding.encode_batch(texts, allowed_special="all")`` with ``num_threads=1`` and ``2``
  (the Kimi split regex and specials: the baseline);
- the export (``kimi_recon.fast_tokenizer.build_fast_tokenizer()``) ``Tokenizer.encode_batch`` on one
  thread (``TOKENIZERS_PARALLELISM=false``) and on two (rayon, ``RAYON_NUM_THREADS=2``, set before the
  pool starts; run_all.py runs this script in its own process for that reason), ids with offsets;
- ``encode_batch_fast`` (no offsets; tokenizers >= 0.21), when there is one, on two threads.

Ratios are throughput against tiktoken at the same thread count. Exactness is checked on every text:
the export's ids equal ``KimiTokenizer.encode`` (the official encode) except on texts the official
encode cuts (``official_encode_cuts``), and ``encode_like_official`` gives the official ids on those.
"""

from __future__ import annotations

import os

os.environ.setdefault("RAYON_NUM_THREADS", "2")  # before tokenizers starts its thread pool

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus
from benchmarks.timing import best_of
from kimi_recon import load_tokenizer
from kimi_recon.fast_tokenizer import build_fast_tokenizer, encode_like_official, official_encode_cuts
from kimi_recon.render import render_assistant_turn

HEADERS = ["method", "threads", "best s", "MB/s", "throughput vs tiktoken (same threads)"]


def _threads(n: int, run: Callable[[], object]) -> Callable[[], object]:
    # tokenizers reads TOKENIZERS_PARALLELISM on every batch call; "false" runs the batch on this thread.
    def call() -> object:
        os.environ["TOKENIZERS_PARALLELISM"] = "false" if n == 1 else "true"
        return run()

    return call


def measure(size_bytes: int, rounds: int, seed: int = corpus.DEFAULT_SEED) -> dict[str, Any]:
    tok = load_tokenizer()
    t0 = time.perf_counter()
    fast = build_fast_tokenizer(tokenizer=tok)
    build_s = time.perf_counter() - t0
    texts = [render_assistant_turn(r["response"]) for r in corpus.build_corpus(size_bytes, seed)]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    enc = tok.encoding

    # Exactness first (also warms both sides up).
    official = [tok.encode(t) for t in texts]
    os.environ["TOKENIZERS_PARALLELISM"] = "true"
    exported = [e.ids for e in fast.encode_batch(texts, add_special_tokens=False)]
    differing = [i for i, (a, b) in enumerate(zip(exported, official, strict=True)) if a != b]
    unexplained = [i for i in differing if not official_encode_cuts(texts[i])]
    repaired = all(encode_like_official(fast, texts[i]) == official[i] for i in differing)

    funcs: dict[str, Callable[[], object]] = {
        "tiktoken encode_batch|1": lambda: enc.encode_batch(texts, num_threads=1, allowed_special="all"),
        "tiktoken encode_batch|2": lambda: enc.encode_batch(texts, num_threads=2, allowed_special="all"),
        "export encode_batch|1": _threads(1, lambda: fast.encode_batch(texts, add_special_tokens=False)),
        "export encode_batch|2": _threads(2, lambda: fast.encode_batch(texts, add_special_tokens=False)),
    }
    if hasattr(fast, "encode_batch_fast"):
        funcs["export encode_batch_fast (no offsets)|2"] = _threads(2, lambda: fast.encode_batch_fast(texts, add_special_tokens=False))
    best = {name: min(t) for name, t in best_of(funcs, rounds, seed).items()}
    rows = []
    for key, seconds in best.items():
        name, threads = key.split("|")
        baseline = best[f"tiktoken encode_batch|{threads}"]
        rows.append({"method": name, "threads": int(threads), "best_s": seconds, "mb_per_s": mb / seconds, "ratio": baseline / seconds})
    return {
        "texts": len(texts),
        "text_mb": mb,
        "tokens": sum(map(len, official)),
        "rounds": rounds,
        "build_s": build_s,
        "rows": rows,
        "ratio_1_thread": best["tiktoken encode_batch|1"] / best["export encode_batch|1"],
        "ratio_2_threads": best["tiktoken encode_batch|2"] / best["export encode_batch|2"],
        "export_thread_scaling": best["export encode_batch|1"] / best["export encode_batch|2"],
        "tiktoken_thread_scaling": best["tiktoken encode_batch|1"] / best["tiktoken encode_batch|2"],
        "differing_texts": len(differing),
        "differing_not_cut": len(unexplained),
        "cut_texts_repaired": repaired,
        "rayon_threads": os.environ.get("RAYON_NUM_THREADS"),
    }


def table_rows(result: Mapping[str, Any]) -> list[list[object]]:
    return [[r["method"], r["threads"], f"{r['best_s']:.3f}", f"{r['mb_per_s']:.2f}", f"{r['ratio']:.3f}x"] for r in result["rows"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="0.5 MiB corpus, 3 rounds")
    parser.add_argument("--size-mb", type=float, help="MiB of generated text (default 8, quick 0.5)")
    parser.add_argument("--rounds", type=int, help="timing rounds, best kept (default 5, quick 3)")
    parser.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line at the end")
    ns = parser.parse_args(argv)
    size = int((ns.size_mb if ns.size_mb is not None else 0.5 if ns.quick else 8) * 2**20)
    result = measure(size, ns.rounds or (3 if ns.quick else 5), ns.seed)
    print(f"{result['texts']} turns, {result['text_mb']:.2f} MB, {result['tokens']:,} tokens; tokenizer built in {result['build_s']:.2f} s")
    for row in table_rows(result):
        print("  ".join(str(c) for c in row))
    print(f"export vs tiktoken: {result['ratio_1_thread']:.3f}x on one thread, {result['ratio_2_threads']:.3f}x on two")
    print(f"ids differ from the official encode on {result['differing_texts']} texts, all cut by the official encode: {result['differing_not_cut'] == 0}")
    if ns.json:
        print(json.dumps(result))
    return 0 if result["differing_not_cut"] == 0 and result["cut_texts_repaired"] else 2


if __name__ == "__main__":
    raise SystemExit(main())
