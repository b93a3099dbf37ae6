"""Reconstruction speed against its limits, in one run.

    python benchmarks/run_all.py --quick     # CI: ~35-47 s on a quiet 2-core machine, small corpus, prints the ratios
    python benchmarks/run_all.py             # full: >= 20 MB of generated text

Everything is measured on the fixed synthetic corpus of :mod:`benchmarks.corpus` and reported as
ratios against baselines measured in the same run (interleaved rounds, best of N, so a noisy machine
hurts both sides alike):

1. throughput of ``reconstruct_output_ids`` against raw ``tiktoken.Encoding.encode(text,
   allowed_special="all")`` of the same rendered strings (the floor; target >= 0.9x);
2. the piecewise methods of :mod:`benchmarks.baselines`: speed and exactness side by side, on the
   corpus and on the official golden turns when ``tests/data`` is there;
3. where the time goes (full mode, ``--profile``, or when (1) misses its target): a cProfile of the hot
   path, each stage of ``reconstruct_output_ids`` timed alone as a share of the raw encode, and a
   cProfile of ``audit_dataset``;
4. dataset mode on all cores against one core (target >= 1.7x on 2 cores), next to the machine's own
   ceiling (raw encode on N processes against one) and the core's (``reconstruct_output_ids``);
5. tokenizer load time (target < 0.5 s), in fresh processes;
5b. ``compare_ids`` on long unrelated texts against one encode of the same texts
   (:mod:`benchmarks.compare_speed`; target: 1M ids against 1M ids in < 2 s, full mode);
5c. ``generate`` rows/s against a zero-latency loopback server with and without the usage check
   (target: ratio >= 0.9; :mod:`benchmarks.generate_bench`);
5d. writing a ``generate`` row with the key search (``encode_row``) against serialising alone and against the
   old per-value redaction walk (target: <= 1.25x the floor; :mod:`benchmarks.row_write`);
5e. the exported fast tokenizer's ``encode_batch`` against tiktoken on one thread and on two, as
   ratios, with its exactness against the official encode (:mod:`benchmarks.fast_tokenizer_speed`,
   in its own process; no target: it says when to use which);
5f. ``kimi-recon --help`` and ``import kimi_recon`` in fresh processes against ``python -c pass``
   (target: --help <= 3x; :mod:`benchmarks.startup`);
6. peak RSS of the core (target < 200 MB) and of ``audit_dataset`` at 1x and 4x the dataset
   (must stay flat), each in a fresh process (:mod:`benchmarks.probe`).
7. Kimi-K3 and the per-profile encoders against raw tiktoken (:mod:`benchmarks.k3`; K3 target >= 1.0x);
8. the matrix (:mod:`benchmarks.matrix`): per profile, input shape (dict, parsed) and length class (ordinary,
   long), the ratio against raw encode and the per-turn overhead in µs; and ``reconstruct_records`` over many
   ordinary records one at a time, on threads and on processes against one raw encode (threads target >= 1.6x),
   with the GIL-held share that bounds the threads;

Results go to ``benchmarks/results/`` (git-ignored): ``<mode>.json`` and ``<mode>.md``. JSONL inputs
go to a temp dir unless ``--keep-jsonl``. Targets are reported, never asserted; the exit status is
non-zero only when a correctness check fails (or, with ``--strict``, when a target is missed).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import io
import json
import multiprocessing
import os
import platform
import pstats
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tiktoken

from benchmarks import baselines, compare_speed, corpus, scale
from benchmarks.timing import best_of
from benchmarks import k3 as k3_bench
from benchmarks import matrix
from kimi_recon import KimiTokenizer, load_tokenizer
from kimi_recon.reconstruct import reconstruct_output_ids
from kimi_recon.render import render_assistant_turn, render_turn_with_flags
from kimi_recon.responses import as_turn
from kimi_recon.special_tokens import special_texts_in
from kimi_recon.tokenizer import MAX_ENCODE_CHARS, MAX_RUN_CHARS, official_chunks

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROBE = HERE / "probe.py"
GOLDEN = ROOT / "tests" / "data" / "golden" / "official-k2.5-dev"

TARGET_RAW_RATIO = 0.9
TARGET_PARALLEL = 1.7
TARGET_LOAD_S = 0.5
TARGET_CORE_RSS_MB = 200.0
TARGET_FLAT = 1.10  # peak RSS at 4x over peak at 1x
PERTURB_EVERY = 50  # every 50th record's reference ids get a non-canonical BPE split

Record = dict[str, Any]


@dataclass
class Config:
    quick: bool
    size_bytes: int
    rounds: int
    scaling_rounds: int
    audit_rounds: int
    load_runs: int
    workers: int
    seed: int
    out: Path | None
    keep_jsonl: bool
    profile: bool
    skip: frozenset[str]
    strict: bool
    command: str


@dataclass
class Report:
    """Everything measured, printed as it comes and saved as JSON and markdown."""

    data: dict[str, Any] = field(default_factory=dict)
    md: list[str] = field(default_factory=list)
    targets: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def section(self, title: str) -> None:
        print(f"\n== {title} ==", flush=True)
        self.md.append(f"\n### {title}\n")

    def line(self, text: str) -> None:
        print(text, flush=True)
        self.md.append(text + "\n")

    def table(self, headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        cells = [[_cell(v) for v in row] for row in rows]
        widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        print(fmt.format(*headers))
        for r in cells:
            print(fmt.format(*r))
        self.md.append("\n| " + " | ".join(headers) + " |\n|" + "|".join("---" for _ in headers) + "|\n")
        self.md.extend("| " + " | ".join(r) + " |\n" for r in cells)
        self.md.append("\n")
        sys.stdout.flush()

    def target(self, name: str, value: float | None, goal: str, ok: bool | None, unit: str = "") -> None:
        self.targets.append({"target": name, "value": value, "goal": goal, "met": ok, "unit": unit})


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return str(v)


# ---------------------------------------------------------------------------------------------
# Machine and timing helpers


def machine_info() -> dict[str, Any]:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass

    def run(cmd: list[str]) -> str:
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {
        "cpu_model": cpu or platform.processor(),
        "nproc": run(["nproc"]) or str(os.cpu_count()),
        "free_h": run(["free", "-h"]),
        "python": sys.version.split()[0],
        "tiktoken": getattr(tiktoken, "__version__", "?"),
        "platform": platform.platform(),
        "loadavg_start": os.getloadavg(),
        "commit": run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"]),
    }


class CpuMonitor:
    """How much of the machine's CPU went elsewhere during a block: hypervisor steal and other processes.

    Reads the ``cpu`` line of ``/proc/stat`` (Linux) and this process's ``os.times()`` (its own and its
    reaped children's CPU). Shares are of the machine's capacity, wall time x cores.
    """

    def __init__(self) -> None:
        self.steal_share: float | None = None
        self.foreign_share: float | None = None

    @staticmethod
    def _stat() -> tuple[float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                parts = fh.readline().split()
        except OSError:
            return None
        hz = os.sysconf("SC_CLK_TCK")
        user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) / hz for v in parts[1:9])
        return user + nice + system + irq + softirq, steal

    @staticmethod
    def _ours() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def __enter__(self) -> CpuMonitor:
        self._t0, self._s0, self._o0 = time.perf_counter(), self._stat(), self._ours()
        return self

    def __exit__(self, *exc: object) -> None:
        s1 = self._stat()
        if self._s0 is None or s1 is None:
            return
        capacity = (time.perf_counter() - self._t0) * (os.cpu_count() or 1)
        busy, steal = s1[0] - self._s0[0], s1[1] - self._s0[1]
        self.steal_share = steal / capacity
        self.foreign_share = max(0.0, busy - (self._ours() - self._o0)) / capacity

    def describe(self) -> str:
        if self.steal_share is None or self.foreign_share is None:
            return "CPU contention: unknown (no /proc/stat)"
        return (f"CPU contention during this section: hypervisor steal {self.steal_share:.1%}, "
                f"other processes {self.foreign_share:.1%} of the machine's capacity")


def _consume(f: Callable[[Any], object], items: Sequence[Any]) -> Callable[[], None]:
    def run() -> None:
        for x in items:
            f(x)

    return run


# ---------------------------------------------------------------------------------------------
# 1-2. Throughput and exactness


def bench_throughput(cfg: Config, rep: Report, tok: KimiTokenizer, records: Sequence[Record], texts: Sequence[str], n_tokens: int) -> None:
    rep.section("Throughput: reconstruct_output_ids against raw tiktoken and the piecewise methods")
    enc = tok.encoding
    msgs = [r["response"] for r in records]
    meth = baselines.methods(tok)
    funcs: dict[str, Callable[[], object]] = {
        "raw tiktoken encode (floor)": _consume(lambda t: enc.encode(t, allowed_special="all"), texts),
        "KimiTokenizer.encode (rendered text)": _consume(tok.encode, texts),
        "reconstruct_output_ids": _consume(lambda m: reconstruct_output_ids(m, tok), msgs),
        "piecewise naive": _consume(meth["naive"], msgs),
        "piecewise careful": _consume(meth["careful"], msgs),
        "piecewise careful_chunked": _consume(meth["careful_chunked"], msgs),
    }
    times = best_of(funcs, cfg.rounds, cfg.seed)
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    raw = min(times["raw tiktoken encode (floor)"])
    rows = []
    out = {}
    for name, ts in times.items():
        best = min(ts)
        out[name] = {"best_s": best, "median_s": statistics.median(ts), "all_s": ts, "ratio_vs_raw": raw / best}
        rows.append([name, best, statistics.median(ts), mb / best, n_tokens / best / 1e6, f"{raw / best:.3f}x"])
    rep.table(["method", "best s", "median s", "MB/s", "Mtok/s", "throughput vs raw"], rows)
    ratio = raw / min(times["reconstruct_output_ids"])
    rep.line(f"reconstruct_output_ids = {ratio:.3f}x raw (target >= {TARGET_RAW_RATIO}x): {'met' if ratio >= TARGET_RAW_RATIO else 'MISSED'}")
    rep.target("reconstruct_output_ids throughput vs raw tiktoken", ratio, f">= {TARGET_RAW_RATIO}x", ratio >= TARGET_RAW_RATIO, "x")

    # By rendered length: the official chunking only runs on texts longer than MAX_RUN_CHARS.
    buckets = {
        f"<= {MAX_RUN_CHARS:,} chars": [i for i, t in enumerate(texts) if len(t) <= MAX_RUN_CHARS],
        f"> {MAX_RUN_CHARS:,} chars": [i for i, t in enumerate(texts) if len(t) > MAX_RUN_CHARS],
    }
    brows = []
    by_bucket = {}
    for label, idx in buckets.items():
        if not idx:
            continue
        bt = [texts[i] for i in idx]
        bm = [msgs[i] for i in idx]
        t2 = best_of(
            {
                "raw": _consume(lambda t: enc.encode(t, allowed_special="all"), bt),
                "reconstruct": _consume(lambda m: reconstruct_output_ids(m, tok), bm),
            },
            cfg.rounds,
            cfg.seed + 1,
        )
        share = sum(len(t) for t in bt) / sum(len(t) for t in texts)
        r = min(t2["raw"]) / min(t2["reconstruct"])
        by_bucket[label] = {"turns": len(idx), "char_share": share, "raw_s": min(t2["raw"]), "reconstruct_s": min(t2["reconstruct"]), "ratio": r}
        brows.append([label, len(idx), f"{share:.1%}", min(t2["raw"]), min(t2["reconstruct"]), f"{r:.3f}x"])
    rep.line("\nBy rendered length:")
    rep.table(["turns", "n", "share of text", "raw s", "reconstruct s", "ratio"], brows)
    rep.data["throughput"] = {"methods": out, "text_mb": mb, "tokens": n_tokens, "ratio_vs_raw": ratio, "by_length": by_bucket}


def bench_exactness(rep: Report, tok: KimiTokenizer, records: Sequence[Record], refs: Sequence[list[int]]) -> None:
    rep.section("Exactness: piecewise methods against the one-encode ids (synthetic corpus)")
    meth = baselines.methods(tok)
    kinds = sorted({r["kind"] for r in records}, key=lambda k: -sum(1 for r in records if r["kind"] == k))
    counts = {name: dict.fromkeys(kinds, 0) for name in ["reconstruct_output_ids", *meth]}
    total = dict.fromkeys(kinds, 0)
    for r, ref in zip(records, refs):
        total[r["kind"]] += 1
        counts["reconstruct_output_ids"][r["kind"]] += 1  # ref is its own output
        for name, f in meth.items():
            counts[name][r["kind"]] += f(r["response"]) == ref
    rows = []
    for name, per in counts.items():
        n_ok = sum(per.values())
        rows.append([name, f"{n_ok}/{len(records)}", *(f"{per[k]}/{total[k]}" for k in kinds)])
    rep.table(["method", "exact", *kinds], rows)
    rep.line(
        "Reference: one encode of the rendered turn with the official chunking (what reconstruct_output_ids returns; "
        "the golden official turns below check that this equals Moonshot's tokenizer)."
    )
    rep.data["exactness_synthetic"] = {"per_kind_total": total, "exact": counts}


def bench_golden(rep: Report, tok: KimiTokenizer) -> None:
    files = [GOLDEN / "turns.jsonl", GOLDEN / "turns_adversarial.jsonl"]
    if not all(f.is_file() for f in files):
        rep.line("golden official turns not found; skipped")
        return
    rep.section("Exactness on the official golden turns (ids from Moonshot's own tokenizer code)")
    meth = baselines.methods(tok)
    rows = []
    result: dict[str, Any] = {}
    for path in files:
        cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        ok = {"reconstruct_output_ids": 0, **dict.fromkeys(meth, 0)}
        tool_ok = {"reconstruct_output_ids": 0, **dict.fromkeys(meth, 0)}
        n_tool = sum(1 for c in cases if c["turn"].get("tool_calls"))
        for c in cases:
            thinking = bool(c["thinking"])
            got = {"reconstruct_output_ids": reconstruct_output_ids(c["turn"], tok, thinking=thinking).ids}
            got.update({name: f(c["turn"], thinking) for name, f in meth.items()})
            for name, ids in got.items():
                hit = ids == c["output_ids"]
                ok[name] += hit
                if c["turn"].get("tool_calls"):
                    tool_ok[name] += hit
        if ok["reconstruct_output_ids"] != len(cases):
            rep.failures.append(f"reconstruct_output_ids misses {len(cases) - ok['reconstruct_output_ids']} golden turns in {path.name}")
        for name in ok:
            rows.append([path.name, name, f"{ok[name]}/{len(cases)}", f"{tool_ok[name]}/{n_tool}"])
        result[path.name] = {"cases": len(cases), "tool_call_cases": n_tool, "exact": ok, "exact_tool_calls": tool_ok}
    rep.table(["file", "method", "exact", "of which tool-call turns"], rows)
    rep.data["exactness_golden"] = result


# ---------------------------------------------------------------------------------------------
# 3. Profile: where the time goes


def bench_profile(cfg: Config, rep: Report, tok: KimiTokenizer, records: Sequence[Record], texts: Sequence[str]) -> None:
    # Private helpers of the chunking, imported here so that a rename breaks only this section.
    from kimi_recon.tokenizer import _long_run, _may_have_long_run

    rep.section("Where the time goes (reconstruct_output_ids over the corpus)")
    msgs = [r["response"] for r in records]
    enc = tok.encoding
    prof = cProfile.Profile()
    prof.enable()
    for m in msgs:
        reconstruct_output_ids(m, tok)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(14)
    top = "\n".join(line for line in buf.getvalue().splitlines() if line.strip())
    top = top[top.find("ncalls") :] if "ncalls" in top else top
    print(top)
    rep.md.append("\n```text\n" + top + "\n```\n")

    # The stages of reconstruct_output_ids, each timed alone on the same turns.
    turns = [as_turn(m) for m in msgs]
    rendered = [render_turn_with_flags(t) for t in turns]
    pairs = [(r.text, r.special_texts) for r in rendered]
    fields = [s.text for r in rendered for s in r.segments if s.field is not None]
    long_texts = [t for t in texts if len(t) > MAX_RUN_CHARS]
    long_run = _long_run(MAX_RUN_CHARS)
    scanned = sum(1 for t in long_texts for i in range(0, len(t), MAX_ENCODE_CHARS) if _may_have_long_run(t[i : i + MAX_ENCODE_CHARS], MAX_RUN_CHARS))
    pieces = sum(-(-len(t) // MAX_ENCODE_CHARS) for t in long_texts)
    all_specials = enc.special_tokens_set
    parts: dict[str, Callable[[], object]] = {
        "raw encode, allowed_special='all' (the floor)": _consume(lambda t: enc.encode(t, allowed_special="all"), texts),
        "reconstruct_output_ids (end to end)": _consume(lambda m: reconstruct_output_ids(m, tok), msgs),
        "1. responses.as_turn (the one turn parser)": _consume(as_turn, msgs),
        "2. render_turn_with_flags (incl. special_texts_in)": _consume(render_turn_with_flags, turns),
        "3. KimiTokenizer.encode_with_specials(text, special_texts)": _consume(lambda tp: tok.encode_with_specials(*tp), pairs),
        "   1 -> 2 -> 3 in one loop (with the text join)": _consume(_stages, [(m, tok) for m in msgs]),
        "   of 2: special_texts_in over every field": _consume(special_texts_in, fields),
        "   of 3: official_chunks (texts > 25k chars)": _consume(lambda t: list(official_chunks(t)), long_texts),
        "   for comparison: the long-run regex scan alone over every text > 25k chars": _consume(lambda t: list(long_run.finditer(t)), long_texts),
        "   for comparison: set conversion, one encode('', allowed_special='all') per turn": _consume(
            lambda _: enc.encode("", allowed_special=all_specials), texts
        ),
    }
    times = best_of(parts, cfg.rounds, cfg.seed + 2)
    raw = min(times["raw encode, allowed_special='all' (the floor)"])
    total = min(times["reconstruct_output_ids (end to end)"])
    stages = min(times["   1 -> 2 -> 3 in one loop (with the text join)"])
    rows = [[name, min(ts) * 1e3, f"{min(ts) / raw:.1%}"] for name, ts in times.items()]
    rep.table(["component", "best ms", "% of raw encode"], rows)
    rep.line(
        f"End to end - (1 -> 2 -> 3) = {(total - stages) * 1e3:.1f} ms ({(total - stages) / raw:.1%} of the raw encode): get_profile, "
        "the flags list, building the Reconstruction (a difference of two best times: +-1-2% is noise)."
    )
    rep.line(
        f"Texts over {MAX_RUN_CHARS:,} chars: {len(long_texts)} ({pieces} pieces of <= {MAX_ENCODE_CHARS:,}); "
        f"the aligned-block pre-check sent {scanned} of the {pieces} pieces to the long-run scan."
    )
    rep.data["profile"] = {
        "components_ms": {k: min(v) * 1e3 for k, v in times.items()},
        "rest_ms": (total - stages) * 1e3,
        "long_texts": len(long_texts),
        "long_pieces": pieces,
        "long_pieces_scanned": scanned,
        "cprofile_top": top,
    }


def bench_k3(cfg: Config, rep: Report, records: Sequence[Record]) -> None:
    rep.section("Kimi-K3 and the per-profile encoders against raw tiktoken (process CPU time)")
    result = k3_bench.measure(records, k3_bench.rounds_for(cfg.quick, cfg.rounds), cfg.seed + 7)
    for text in k3_bench.lines(result):
        rep.line(text)
    rep.target("K3 reconstruct_output_ids vs raw tiktoken", result["k3_ratio"], f">= {k3_bench.TARGET_K3_RAW_RATIO}x", result["k3_ratio"] >= k3_bench.TARGET_K3_RAW_RATIO, "x")
    rep.target(
        "K2.5 reconstruct_output_ids vs raw tiktoken (CPU time)",
        result["k25_ratio"],
        f">= {k3_bench.TARGET_K25_RAW_RATIO}x",
        result["k25_ratio"] >= k3_bench.TARGET_K25_RAW_RATIO,
        "x",
    )
    if not all(result["checks"].values()):
        rep.failures.append(f"K3 benchmark checks failed: {result['checks']}")
    for name, g in (result["golden"] or {}).items():
        if g["reconstruct_exact"] != g["turns"]:
            rep.failures.append(f"K3 reconstruct is not exact on the official dev set {name}: {g}")
    rep.data["k3"] = result


def bench_matrix(cfg: Config, rep: Report) -> None:
    rep.section("The matrix: per profile, input shape and length class; many turns on threads and processes")
    result = matrix.measure(cfg.quick, 3 if cfg.quick else cfg.rounds, cfg.seed + 8)
    for text in matrix.lines(result):
        rep.line(text)
    for row in result["many"]:
        ratio = row["ratio_vs_raw"][f"{matrix.WORKERS} threads"]
        rep.target(
            f"{row['profile']} reconstruct_records on {matrix.WORKERS} threads vs raw encode on 1, {row['records']:,} ordinary records",
            ratio, f">= {matrix.TARGET_THREADS_RAW}x", ratio >= matrix.TARGET_THREADS_RAW, "x",
        )
    rep.failures.extend(matrix.failures(result))
    rep.data["matrix"] = result


def _stages(args: tuple[Record, KimiTokenizer]) -> list[int]:
    """What reconstruct_output_ids does for a plain turn, stage by stage (no logprobs, no Reconstruction)."""
    msg, tok = args
    rendered = render_turn_with_flags(as_turn(msg))
    return tok.encode_with_specials(rendered.text, rendered.special_texts)


def bench_audit_profile(rep: Report, tok: KimiTokenizer, jsonl: Path, reconstruct_s: float | None) -> None:
    audit = _audit_dataset()
    if audit is None:
        return
    rep.section("Where audit_dataset's time goes (workers=1, 1x JSONL)")
    t0 = time.perf_counter()
    audit(jsonl, tok, workers=1, progress=False)
    plain = time.perf_counter() - t0
    prof = cProfile.Profile()
    prof.enable()
    result = audit(jsonl, tok, workers=1, progress=False)
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
    top = buf.getvalue()
    top = "\n".join(line for line in top[top.find("ncalls") :].splitlines() if line.strip())
    print(top)
    rep.md.append("\n```text\n" + top + "\n```\n")
    n_check = sum(v[1] for k, v in pstats.Stats(prof).stats.items() if k[2] == "check_ids")  # type: ignore[attr-defined]
    summary = getattr(result, "summary", None)
    rep.line(
        f"audit_dataset (unprofiled) {plain:.3f} s"
        + (f" = {plain / reconstruct_s:.2f}x the time of reconstruct_output_ids over the same turns in memory" if reconstruct_s else "")
        + f"; check_ids ran {n_check} times for {getattr(result, 'total', '?')} records"
    )
    if callable(summary):
        text = summary()
        print(text)
        rep.md.append("\n```text\n" + text + "\n```\n")
    rep.data["audit_profile"] = {"plain_s": plain, "check_ids_calls": n_check, "cprofile_top": top}


# ---------------------------------------------------------------------------------------------
# 4. Dataset mode: all cores against one

_SHARED: dict[str, Any] = {}


def _pool_task(args: tuple[str, int, int]) -> int:
    """Run ``method`` over shard ``index`` of ``n`` (data inherited from the parent by fork)."""
    method, index, n = args
    tok: KimiTokenizer = _SHARED["tok"]
    shard: list[int] = _SHARED["shards"][n][index]
    done = 0
    if method == "raw":
        enc = tok.encoding
        texts = _SHARED["texts"]
        for i in shard:
            done += len(enc.encode(texts[i], allowed_special="all"))
    else:
        msgs = _SHARED["msgs"]
        for i in shard:
            done += len(reconstruct_output_ids(msgs[i], tok).ids)
    return done


def _balanced_shards(sizes: Sequence[int], n: int) -> list[list[int]]:
    shards: list[list[int]] = [[] for _ in range(n)]
    load = [0] * n
    for i in sorted(range(len(sizes)), key=lambda i: -sizes[i]):
        k = load.index(min(load))
        shards[k].append(i)
        load[k] += sizes[i]
    return shards


def _audit_dataset() -> Callable[..., Any] | None:
    try:
        from kimi_recon.dataset import audit_dataset
    except ImportError:
        return None
    return audit_dataset


def bench_parallel(cfg: Config, rep: Report, tok: KimiTokenizer, records: Sequence[Record], texts: Sequence[str], jsonl: Path) -> None:
    n = cfg.workers
    rep.section(f"Dataset mode: {n} workers against 1 (machine has {os.cpu_count()} cores)")
    if n < 2:
        rep.line("only one core; skipped")
        return
    if "fork" not in multiprocessing.get_all_start_methods():
        rep.line("no fork start method; machine/core ceilings skipped")
        ceiling_rows: list[list[object]] = []
    else:
        _SHARED.update(tok=tok, texts=texts, msgs=[r["response"] for r in records])
        sizes = [len(t) for t in texts]
        _SHARED["shards"] = {1: [list(range(len(texts)))], n: _balanced_shards(sizes, n)}
        ctx = multiprocessing.get_context("fork")
        ceiling_rows = []
        with ctx.Pool(1) as one, ctx.Pool(n) as many:
            one.map(len, [[]])  # workers are up before timing starts
            many.map(len, [[]] * n, chunksize=1)
            funcs: dict[str, Callable[[], object]] = {}
            for method in ("raw", "reconstruct"):
                funcs[f"{method} 1"] = functools.partial(one.map, _pool_task, [(method, 0, 1)])
                funcs[f"{method} {n}"] = functools.partial(many.map, _pool_task, [(method, i, n) for i in range(n)], 1)
            times = best_of(funcs, cfg.scaling_rounds, cfg.seed + 4)
        _SHARED.clear()
        scaling = {}
        for method, label in (("raw", "raw tiktoken encode (machine ceiling)"), ("reconstruct", "reconstruct_output_ids (core)")):
            t1, tn = min(times[f"{method} 1"]), min(times[f"{method} {n}"])
            scaling[method] = {"one_s": t1, "n_s": tn, "speedup": t1 / tn}
            ceiling_rows.append([label, t1, tn, f"{t1 / tn:.2f}x"])
        rep.data["parallel_pool"] = scaling

    audit = _audit_dataset()
    rows = list(ceiling_rows)
    if audit is None:
        rep.line("kimi_recon.dataset.audit_dataset is not importable; audit_dataset scaling skipped")
    else:
        n_records = len(records)
        # CPU of this process and of its reaped children (the pool's workers) in each round.
        cpu: dict[str, list[tuple[float, float]]] = {"1": [], str(n): []}

        def audit_run(workers: int) -> Callable[[], None]:
            def run() -> None:
                t0 = os.times()
                audit(jsonl, tok, workers=workers, progress=False, executor="processes")  # the children's CPU is read below
                t1 = os.times()
                cpu[str(workers)].append((t1.user + t1.system - t0.user - t0.system,
                                          t1.children_user + t1.children_system - t0.children_user - t0.children_system))

            return run

        def audit_threads() -> None:
            audit(jsonl, tok, workers=n, progress=False, executor="threads")

        atimes = best_of({"1": audit_run(1), str(n): audit_run(n), "threads": audit_threads}, cfg.audit_rounds, cfg.seed + 5)
        t1, tn = min(atimes["1"]), min(atimes[str(n)])
        rows.append(["audit_dataset (dataset mode, worker processes)", t1, tn, f"{t1 / tn:.2f}x"])
        rows.append(["audit_dataset on threads (executor='threads', what 'auto' picks)", t1, min(atimes["threads"]), f"{t1 / min(atimes['threads']):.2f}x"])
        speedup = t1 / tn
        best = atimes[str(n)].index(tn)
        parent_cpu, workers_cpu = cpu[str(n)][best]
        one_cpu = cpu["1"][atimes["1"].index(t1)][0]
        cpu_bound = t1 / ((parent_cpu + workers_cpu) / n)
        rep.data["audit_scaling"] = {"one_s": t1, "n_s": tn, "speedup": speedup, "records": n_records,
                                     "records_per_s_1": n_records / t1, "records_per_s_n": n_records / tn,
                                     "all_s": atimes, "cpu_s": cpu, "cpu_1_s": one_cpu, "cpu_n_parent_s": parent_cpu,
                                     "cpu_n_workers_s": workers_cpu, "cpu_bound_speedup": cpu_bound}
        rep.target(f"audit_dataset {n} workers vs 1", speedup, f">= {TARGET_PARALLEL}x on 2 cores", speedup >= TARGET_PARALLEL, "x")
    rep.table(["work", "1 worker s", f"{n} workers s", "speedup"], rows)
    if audit is not None:
        a = rep.data["audit_scaling"]
        rep.line(f"audit_dataset throughput: {a['records_per_s_1']:.0f} records/s on 1 worker, {a['records_per_s_n']:.0f} records/s on {n} "
                 f"({a['records']} records, {rep.data['corpus']['text_bytes'] / 1e6:.1f} MB of text)")
        rep.line(f"CPU in the best rounds: {a['cpu_1_s']:.3f} s on 1 worker; with {n}, {a['cpu_n_parent_s']:.3f} s in the parent (reading lines, "
                 f"feeding the pool, tallying) + {a['cpu_n_workers_s']:.3f} s in the workers = "
                 f"{a['cpu_n_parent_s'] + a['cpu_n_workers_s']:.3f} s, which on {n} cores bounds the speedup at {a['cpu_bound_speedup']:.2f}x "
                 "(the rest of the gap: waiting for the last chunk, pool start-up, other tenants).")


# ---------------------------------------------------------------------------------------------
# 5-6. Fresh-process probes


def bench_generate(cfg: Config, rep: Report) -> None:
    """What the usage check costs ``generate`` (see :mod:`benchmarks.generate_bench`)."""
    rep.section("generate: the usage check's cost")
    try:
        import openai  # noqa: F401
    except ImportError:
        rep.line("the openrouter extra (openai) is not installed; skipped")
        return
    from benchmarks import generate_bench

    result = generate_bench.measure(generate_bench.prompts_for(cfg.quick), generate_bench.rounds_for(cfg.quick, cfg.rounds), cfg.seed)
    rows_s, cpu = result["rows_per_s"], result["cpu_ms_per_row"]
    rep.table(
        ["setting", "rows/s", "CPU ms per row (this process)"],
        [[name, f"{rows_s[name]:.1f}", f"{cpu[name]:.2f}"] for name in ("without check", "with check")],
    )
    rep.line(f"{result['prompts']} prompts, concurrency {result['concurrency']}, zero-latency loopback server in its own process, best of {result['rounds']} rounds; "
             f"{result['rows_agreeing']['with check']} rows agree with the server's usage (one prompt in ten reports 3 more prompt tokens)")
    ratio = result["ratio"]
    rep.target("generate rows/s with the usage check / without", ratio, f">= {generate_bench.TARGET_RATIO}", ratio >= generate_bench.TARGET_RATIO, "x")
    if result["rows_checked"]["with check"] != result["prompts"]:
        rep.failures.append(f"the usage check ran on {result['rows_checked']['with check']} of {result['prompts']} generate rows")
    rep.data["generate"] = result


def bench_row_write(cfg: Config, rep: Report) -> None:
    """What keeping the key off disk costs each generate row (see :mod:`benchmarks.row_write`)."""
    rep.section("generate: writing a row without the key")
    from benchmarks import row_write

    result = row_write.measure(50 if cfg.quick else 400, 3 if cfg.quick else cfg.rounds, cfg.seed)
    rep.table(["way", "us per row"], [[name, f"{us:.1f}"] for name, us in result["us_per_row"].items()])
    rep.line(f"{result['rows']} rows shaped like --prompt-ids --training-sample rows; old walk / encode_row: {result['speedup_over_walk']:.2f}x")
    ratio = result["ratio_to_floor"]
    rep.target("generate row write with the key search / serialise only", ratio, f"<= {row_write.TARGET_RATIO}", ratio <= row_write.TARGET_RATIO, "x")
    rep.data["row_write"] = result


def bench_fast_tokenizer(cfg: Config, rep: Report) -> None:
    """The export's encode_batch against tiktoken (see :mod:`benchmarks.fast_tokenizer_speed`)."""
    rep.section("Fast tokenizer export: encode_batch against tiktoken, one thread and two")
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        rep.line("the fast extra (tokenizers) is not installed; skipped")
        return
    size_mb = 0.5 if cfg.quick else 4.0
    args = [sys.executable, str(HERE / "fast_tokenizer_speed.py"), "--size-mb", str(size_mb), "--rounds", str(cfg.rounds), "--seed", str(cfg.seed), "--json"]
    # Its own process: the rayon pool is sized once per process, and must not be alive across our forks.
    proc = subprocess.run(args, capture_output=True, text=True, cwd=str(ROOT), env={**os.environ, "RAYON_NUM_THREADS": "2"})
    if proc.returncode not in (0, 2) or not proc.stdout.strip():
        rep.failures.append(f"fast_tokenizer_speed.py failed ({proc.returncode}): {proc.stderr[-2000:]}")
        return
    from benchmarks import fast_tokenizer_speed

    result = json.loads(proc.stdout.strip().splitlines()[-1])
    rep.table(fast_tokenizer_speed.HEADERS, fast_tokenizer_speed.table_rows(result))
    rep.line(f"{result['texts']} turns, {result['text_mb']:.2f} MB; export/tiktoken throughput {result['ratio_1_thread']:.3f}x on one thread, "
             f"{result['ratio_2_threads']:.3f}x on two; thread scaling export {result['export_thread_scaling']:.2f}x, tiktoken {result['tiktoken_thread_scaling']:.2f}x")
    rep.line(f"ids differ from the official encode on {result['differing_texts']} texts; not explained by the official cuts: {result['differing_not_cut']}")
    if result["differing_not_cut"] or not result["cut_texts_repaired"]:
        rep.failures.append(f"fast tokenizer: {result['differing_not_cut']} texts differ from the official encode without an official cut")
    rep.data["fast_tokenizer"] = result


def bench_startup(cfg: Config, rep: Report) -> None:
    """``kimi-recon --help`` and ``import kimi_recon`` against a bare interpreter (see :mod:`benchmarks.startup`)."""
    rep.section("start-up: the command line and the package import")
    from benchmarks import startup

    result = startup.measure(3 if cfg.quick else cfg.rounds)
    rep.table(["command", "best ms"], [[name, f"{s * 1000:.1f}"] for name, s in result["best_s"].items()])
    rep.line(f"import kimi_recon / python -c pass: {result['import_ratio']:.2f}x, best of {result['rounds']} interleaved rounds")
    ratio = result["help_ratio"]
    rep.target("kimi-recon --help / python -c pass", ratio, f"<= {startup.TARGET_RATIO}", ratio <= startup.TARGET_RATIO, "x")
    rep.data["startup"] = result


def run_probe(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, cwd=str(ROOT))
    if proc.returncode != 0:
        raise RuntimeError(f"probe {args} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def bench_load(cfg: Config, rep: Report) -> None:
    rep.section(f"Tokenizer load time ({cfg.load_runs} fresh processes)")
    runs = [run_probe(["load"]) for _ in range(cfg.load_runs)]
    loads = [r["load_s"] for r in runs]
    imports = [r["import_s"] for r in runs]
    rep.table(
        ["", "best", "median", "worst"],
        [
            ["import kimi_recon (s)", min(imports), statistics.median(imports), max(imports)],
            ["load_tokenizer() (s)", min(loads), statistics.median(loads), max(loads)],
            ["RSS after load (MB)", min(r["rss_after_load_mb"] for r in runs), statistics.median(r["rss_after_load_mb"] for r in runs), max(r["rss_after_load_mb"] for r in runs)],
        ],
    )
    med = statistics.median(loads)
    rep.line(f"load_tokenizer() median {med:.3f} s (target < {TARGET_LOAD_S} s): {'met' if med < TARGET_LOAD_S else 'MISSED'}")
    rep.target("tokenizer load time (median)", med, f"< {TARGET_LOAD_S} s", med < TARGET_LOAD_S, "s")
    rep.data["load"] = {"runs": runs, "median_load_s": med, "best_load_s": min(loads)}


def bench_compare(cfg: Config, rep: Report, tok: KimiTokenizer) -> None:
    n_ids = 100_000 if cfg.quick else compare_speed.TARGET_IDS
    rep.section(f"compare_ids on long texts: {n_ids:,} ids against {n_ids:,}, against one encode of the same texts")
    results = compare_speed.measure(tok, n_ids, 2 if cfg.quick else 3, cfg.seed)
    rep.table(compare_speed.HEADERS, compare_speed.table_rows(results))
    unrelated = results[0]["compare_s"]
    if n_ids >= compare_speed.TARGET_IDS:
        goal = f"< {compare_speed.TARGET_S} s"
        rep.line(f"unrelated turns: {unrelated:.2f} s ({goal}): {'met' if unrelated < compare_speed.TARGET_S else 'MISSED'}")
        rep.target("compare_ids, 1M ids against 1M unrelated", unrelated, goal, unrelated < compare_speed.TARGET_S, "s")
    if any(r["kind"] != "text_mismatch" for r in results):
        rep.failures.append(f"compare_ids: every compare_speed case differs in text, got {[r['kind'] for r in results]}")
    rep.data["compare"] = results


def _mb(v: float | None) -> object:
    return "-" if v is None else v


def bench_memory(cfg: Config, rep: Report, jsonl: Path, jsonl4: Path, n_records: int) -> None:
    rep.section("Peak memory, each in a fresh process")
    core = run_probe(["core", str(jsonl)])
    expected = core["records"] - rep.data.get("perturbed", 0)
    if core["exact"] != expected:
        rep.failures.append(f"core probe: {core['exact']}/{core['records']} exact, expected {expected}")
    rows: list[list[object]] = [[
        "core: load_tokenizer + reconstruct_output_ids, streamed (1x)", core["records"], core["rss_after_import_mb"], core["rss_after_load_mb"],
        core["peak_rss_mb"], "-", _mb(core["tree_peak_mb"]), _mb(core["tree_pss_peak_mb"]), core["records"] / core["elapsed_s"],
    ]]
    peak = core["peak_rss_mb"]
    rep.target("peak RSS of the core", peak, f"< {TARGET_CORE_RSS_MB:.0f} MB", peak < TARGET_CORE_RSS_MB, "MB")
    result: dict[str, Any] = {"core": core}
    if _audit_dataset() is None:
        rep.line("kimi_recon.dataset.audit_dataset is not importable; audit memory skipped")
    else:
        audits: dict[str, dict[str, Any]] = {}
        for workers in sorted({1, cfg.workers}):
            for scale, path, count in (("1x", jsonl, n_records), ("4x", jsonl4, 4 * n_records)):
                r = run_probe(["audit", str(path), "--workers", str(workers)])
                r["records"] = count
                exact = r["audit"].get("counts", {}).get("exact")
                expected_exact = count - rep.data.get("perturbed", 0) * (count // n_records)
                if exact is not None and exact != expected_exact:
                    rep.failures.append(f"audit_dataset({scale}, workers={workers}) found {exact} exact records, expected {expected_exact}")
                audits[f"{scale} w{workers}"] = r
                rows.append([
                    f"audit_dataset(path, workers={workers}) ({scale})", count, r["rss_after_import_mb"], r["rss_after_load_mb"],
                    r["peak_rss_mb"], r["children_maxrss_upper_bound_mb"] if workers > 1 else "-", _mb(r["tree_peak_mb"]),
                    _mb(r["tree_pss_peak_mb"]), count / r["elapsed_s"],
                ])
            one, four = audits[f"1x w{workers}"], audits[f"4x w{workers}"]
            # The high-water mark of the one process; with workers, plus N x the largest worker's
            # ru_maxrss (an upper bound that does not depend on sampling; see probe.py).
            m1 = one["peak_rss_mb"] + (workers * one["children_maxrss_upper_bound_mb"] if workers > 1 else 0.0)
            m4 = four["peak_rss_mb"] + (workers * four["children_maxrss_upper_bound_mb"] if workers > 1 else 0.0)
            growth = m4 / m1
            label = f"audit_dataset peak memory 4x / 1x (workers={workers})"
            rep.target(label, growth, f"<= {TARGET_FLAT:.2f} (flat)", growth <= TARGET_FLAT, "x")
            audits[f"growth w{workers}"] = {"peak_1x_mb": m1, "peak_4x_mb": m4, "ratio": growth}
        result["audit"] = audits
    rep.table(
        ["process", "records", "RSS after import MB", "RSS after load MB", "peak RSS MB (process)", "peak RSS MB (largest worker, ru_maxrss)",
         "sampled peak RSS MB (process + workers)", "sampled peak PSS MB (process + workers)", "records/s"],
        rows,
    )
    rep.line(f"core peak RSS {peak:.0f} MB (target < {TARGET_CORE_RSS_MB:.0f} MB): {'met' if peak < TARGET_CORE_RSS_MB else 'MISSED'}")
    for key, g in result.get("audit", {}).items():
        if key.startswith("growth"):
            rep.line(f"audit_dataset {key.replace('growth w', 'workers=')}: peak {g['peak_1x_mb']:.0f} MB at 1x, {g['peak_4x_mb']:.0f} MB at 4x "
                     f"= {g['ratio']:.3f} (flat: <= {TARGET_FLAT:.2f}): {'met' if g['ratio'] <= TARGET_FLAT else 'MISSED'}")
    rep.line(
        "peak RSS (process) is VmHWM of a fresh process; the largest worker's is its ru_maxrss (RUSAGE_CHILDREN), an upper bound "
        "since a forked worker starts with its parent's pages; the flatness check for N workers uses process + N x largest worker. "
        "The sampled columns (psutil, every 50 ms, PSS every 200 ms) miss runs shorter than the interval. "
        "Forked workers share the parent's tokenizer pages, which RSS counts in every process and PSS splits between them."
    )
    rep.data["memory"] = result


# ---------------------------------------------------------------------------------------------
# Corpus files


def bench_training_rows(cfg: Config, rep: Report) -> None:
    """The training-row build on the CLI pool, HF datasets and local Ray Data (benchmarks/scale.py)."""
    n = 600 if cfg.quick else 100_000
    rep.section(f"Training rows at scale: CLI pool, datasets.map, Ray Data ({n:,} records)")
    data, lines, failures = scale.bench_scale(n, cfg.workers, cfg.quick)
    for line in lines:
        rep.line(line)
    rep.data["scale"] = data
    rep.failures.extend(failures)


def perturb_ids(ids: list[int], tok: KimiTokenizer, rng: random.Random) -> list[int] | None:
    """The same bytes with one token split in two (a non-canonical BPE split), or None."""
    n = len(ids)
    if not n:
        return None
    start = rng.randrange(n)
    for j in range(n):
        i = (start + j) % n
        tid = ids[i]
        if tok.is_special(tid):
            continue
        data = tok.token_bytes(tid)
        for k in range(1, len(data)):
            a, b = tok.id_of_bytes(data[:k]), tok.id_of_bytes(data[k:])
            if a is not None and b is not None and not tok.is_special(a) and not tok.is_special(b):
                return ids[:i] + [a, b] + ids[i + 1 :]
    return None


def write_dataset(records: Sequence[Record], refs: Sequence[list[int]], tok: KimiTokenizer, path: Path, seed: int) -> tuple[int, int]:
    """JSONL of the records with reference ids; every PERTURB_EVERY-th one non-canonical. Returns (bytes, perturbed)."""
    rng = random.Random(seed)
    perturbed = 0
    size = 0
    with path.open("w", encoding="utf-8") as fh:
        for i, (record, ref) in enumerate(zip(records, refs)):
            ids = ref
            if i % PERTURB_EVERY == PERTURB_EVERY - 1:
                changed = perturb_ids(ref, tok, rng)
                if changed is not None:
                    ids, perturbed = changed, perturbed + 1
            line = json.dumps({"id": record["id"], "kind": record["kind"], "response": record["response"], "reference_ids": ids}, ensure_ascii=False) + "\n"
            fh.write(line)
            size += len(line.encode("utf-8"))
    return size, perturbed


def repeat_jsonl(src: Path, dst: Path, times: int) -> int:
    """``times`` copies of ``src``; copies after the first get ids ``rK-...`` (lines start with the id)."""
    size = 0
    with dst.open("w", encoding="utf-8") as out:
        for k in range(times):
            with src.open(encoding="utf-8") as fh:
                for line in fh:
                    if k:
                        line = line.replace('{"id": "', f'{{"id": "r{k}-', 1)
                    out.write(line)
                    size += len(line.encode("utf-8"))
    return size


# ---------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> Config:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="small corpus and few rounds (CI)")
    p.add_argument("--size-mb", type=float, help="MiB of generated text (default: 20 full, 0.5 quick)")
    p.add_argument("--rounds", type=int, help="timing rounds per measurement, best taken (default: 7 full, 3 quick)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="workers for dataset mode (default: all cores)")
    p.add_argument("--seed", type=int, default=corpus.DEFAULT_SEED)
    p.add_argument("--out", type=Path, default=HERE / "results", help="where to write <mode>.json/.md (default benchmarks/results)")
    p.add_argument("--no-write", action="store_true", help="write no result files")
    p.add_argument("--keep-jsonl", action="store_true", help="keep the JSONL datasets in --out instead of a temp dir")
    p.add_argument("--profile", action="store_true", help="profile in --quick mode too (the full mode always profiles)")
    p.add_argument("--skip", default="", help="comma-separated sections to skip: throughput,exactness,golden,k3,matrix,profile,parallel,load,compare,generate,rowwrite,fast,startup,memory,scale")
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ns = p.parse_args(argv)
    quick = bool(ns.quick)
    size_mb = ns.size_mb if ns.size_mb is not None else (0.5 if quick else 20.0)
    rounds = ns.rounds or (3 if quick else 7)
    cmd = " ".join(shlex.quote(a) for a in ["python", os.path.relpath(__file__, Path.cwd()), *(argv if argv is not None else sys.argv[1:])])
    return Config(
        quick=quick,
        size_bytes=int(size_mb * 2**20),
        rounds=rounds,
        scaling_rounds=2 if quick else 5,
        audit_rounds=1 if quick else 5,
        load_runs=2 if quick else 7,
        workers=max(1, ns.workers),
        seed=ns.seed,
        out=None if ns.no_write else ns.out,
        keep_jsonl=bool(ns.keep_jsonl),
        profile=bool(ns.profile),
        skip=frozenset(s.strip() for s in ns.skip.split(",") if s.strip()),
        strict=bool(ns.strict),
        command=cmd,
    )


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_args(argv)
    t_start = time.perf_counter()
    rep = Report()
    mode = "quick" if cfg.quick else "full"
    info = machine_info()
    rep.data.update(mode=mode, command=cfg.command, machine=info)
    print(f"kimi_recon benchmarks ({mode}): {cfg.command}")
    print(f"machine: {info['cpu_model']}, nproc {info['nproc']}, Python {info['python']}, tiktoken {info['tiktoken']}, load avg {info['loadavg_start']}; "
          f"commit {info['commit'] or '?'}")

    t0 = time.perf_counter()
    tok = load_tokenizer()
    records = corpus.build_corpus(cfg.size_bytes, cfg.seed)
    texts = [render_assistant_turn(r["response"]) for r in records]
    refs = [reconstruct_output_ids(r["response"], tok).ids for r in records]
    n_tokens = sum(map(len, refs))
    summ = corpus.summary(records)
    summ["rendered_bytes"] = sum(len(t.encode("utf-8")) for t in texts)
    summ["tokens"] = n_tokens
    summ["max_rendered_chars"] = max(len(t) for t in texts)
    summ["setup_s"] = time.perf_counter() - t0
    rep.data["corpus"] = summ
    rep.section("Corpus")
    rep.line(
        f"{summ['records']} turns, {summ['text_bytes'] / 1e6:.2f} MB of generated text ({summ['rendered_bytes'] / 1e6:.2f} MB rendered), "
        f"{n_tokens:,} tokens, longest turn {summ['max_rendered_chars']:,} chars, seed {cfg.seed}; kinds: "
        + ", ".join(f"{k} {v}" for k, v in summ["kinds"].items())
    )
    bad = [i for i, (r, t) in enumerate(zip(records, texts)) if baselines.naive_render(r["response"]) != t]
    if bad:
        rep.failures.append(f"naive_render differs from render_assistant_turn on {len(bad)} records")
    # The reference ids come from reconstruct_output_ids (encode_with_specials); check them against
    # KimiTokenizer.encode of the rendered text, which allows every special text (the official encode).
    off = sum(1 for t, ref in zip(texts, refs) if tok.encode(t) != ref)
    if off:
        rep.failures.append(f"reconstruct_output_ids differs from KimiTokenizer.encode(rendered text) on {off} records")

    if "throughput" not in cfg.skip:
        with CpuMonitor() as cpu:
            bench_throughput(cfg, rep, tok, records, texts, n_tokens)
        rep.line(cpu.describe())
        rep.data["throughput"]["cpu"] = {"steal": cpu.steal_share, "other_processes": cpu.foreign_share}
    if "exactness" not in cfg.skip:
        bench_exactness(rep, tok, records, refs)
    if "golden" not in cfg.skip:
        bench_golden(rep, tok)
    if "k3" not in cfg.skip:
        bench_k3(cfg, rep, records)
    if "matrix" not in cfg.skip:
        bench_matrix(cfg, rep)
    ratio = rep.data.get("throughput", {}).get("ratio_vs_raw")
    profile = "profile" not in cfg.skip and (cfg.profile or not cfg.quick or (ratio is not None and ratio < TARGET_RAW_RATIO))
    if profile:
        bench_profile(cfg, rep, tok, records, texts)

    need_files = not {"parallel", "memory"} <= cfg.skip
    with tempfile.TemporaryDirectory(prefix="kimi-recon-bench-") as tmp:
        data_dir = (cfg.out or HERE / "results") if cfg.keep_jsonl else Path(tmp)
        data_dir.mkdir(parents=True, exist_ok=True)
        jsonl, jsonl4 = data_dir / f"dataset-{mode}-1x.jsonl", data_dir / f"dataset-{mode}-4x.jsonl"
        if need_files:
            size1, perturbed = write_dataset(records, refs, tok, jsonl, cfg.seed)
            size4 = repeat_jsonl(jsonl, jsonl4, 4)
            rep.data["perturbed"] = perturbed
            rep.data["dataset_files"] = {"1x_bytes": size1, "4x_bytes": size4, "perturbed_records": perturbed}
            rep.line(f"\ndataset JSONL: 1x {size1 / 1e6:.1f} MB, 4x {size4 / 1e6:.1f} MB; reference_ids of {perturbed} of the {len(records)} records at 1x hold a non-canonical BPE split (audit_dataset should find exactly these)")
        n_records = len(records)
        del refs
        if profile and (cfg.profile or not cfg.quick) and need_files:
            recon = rep.data.get("throughput", {}).get("methods", {}).get("reconstruct_output_ids", {}).get("best_s")
            bench_audit_profile(rep, tok, jsonl, recon)
        if "parallel" not in cfg.skip:
            with CpuMonitor() as cpu:
                bench_parallel(cfg, rep, tok, records, texts, jsonl)
            rep.line(cpu.describe())
            rep.data["parallel_cpu"] = {"steal": cpu.steal_share, "other_processes": cpu.foreign_share}
        del records, texts
        gc.collect()
        if "load" not in cfg.skip:
            bench_load(cfg, rep)
        if "compare" not in cfg.skip:
            bench_compare(cfg, rep, tok)
        if "generate" not in cfg.skip:
            bench_generate(cfg, rep)
        if "rowwrite" not in cfg.skip:
            bench_row_write(cfg, rep)
        if "fast" not in cfg.skip:
            bench_fast_tokenizer(cfg, rep)
        if "startup" not in cfg.skip:
            bench_startup(cfg, rep)
        if "memory" not in cfg.skip:
            bench_memory(cfg, rep, jsonl, jsonl4, n_records)
    if "scale" not in cfg.skip:
        bench_training_rows(cfg, rep)

    rep.section("Targets")
    if cfg.quick:
        rep.line("--quick: a 0.5 MB corpus and few rounds keep the scripts working; its figures are indicative only "
                 "(audit_dataset's 64-record chunks leave one worker idle on so few records). The targets apply to the full run.")
    rep.table(["target", "value", "goal", "met"], [[t["target"], f"{t['value']:.3f} {t['unit']}" if t["value"] is not None else "-", t["goal"], "yes" if t["met"] else "NO"] for t in rep.targets])
    rep.data["targets"] = rep.targets
    rep.data["failures"] = rep.failures
    info["loadavg_end"] = os.getloadavg()
    rep.data["elapsed_s"] = time.perf_counter() - t_start
    rep.line(f"\nload average at start {info['loadavg_start']}, at end {info['loadavg_end']}; total {rep.data['elapsed_s']:.1f} s")
    if cfg.out is not None:
        cfg.out.mkdir(parents=True, exist_ok=True)
        (cfg.out / f"{mode}.json").write_text(json.dumps(rep.data, indent=2, default=str), encoding="utf-8")
        (cfg.out / f"{mode}.md").write_text("".join(rep.md), encoding="utf-8")
        print(f"results: {cfg.out / (mode + '.json')}, {cfg.out / (mode + '.md')}")
    for f in rep.failures:
        print(f"CHECK FAILED: {f}", file=sys.stderr)
    if rep.failures:
        return 2
    if cfg.strict and any(t["met"] is False for t in rep.targets):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
