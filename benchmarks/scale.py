"""The same training-row build four ways: the CLI on 1 and N workers, HF datasets, local Ray Data.

    python benchmarks/scale.py --quick          # CI: 600 records, keeps the script working
    python benchmarks/scale.py                  # full: 100,000 records

Every way turns the same records into the same rows and writes them to disk:

* ``cli-1``: ``kimi-recon build-samples IN -o OUT`` (the baseline of every ratio);
* ``cli-N``: the same with ``--workers N``;
* ``datasets``: ``load_dataset("json")`` then ``map(sample_batch, batched=True, num_proc=N)``, rows
  without an error written with ``to_json``;
* ``ray``: ``ray.init(num_cpus=N)``, ``read_json``, ``map_batches(sample_batch)`` in Ray's default batch
  format, rows without an error written with ``write_json``.

Each runs in a fresh interpreter (``--run WAY``), so it pays its own imports and start-up, and its
peak memory is its own: the peak of the summed RSS of the process and all its descendants (pool
workers, Ray's raylet, GCS and workers), sampled every 50 ms from ``/proc``; pages shared between
processes are counted once per process, so this is an upper bound. The rows of every way must be the
rows of ``cli-1`` (a digest of ``id``, ``input_ids``, ``loss_mask`` sorted by id): exit 2 otherwise.

The records are the official golden conversations (``tests/data/golden/official-k2.5-dev/turns.jsonl``:
messages, tools, the final turn) repeated with distinct ids. datasets and Ray read a copy whose nested
columns are JSON text, the layout Arrow keeps exact (see docs/scale.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOLDEN = ROOT / "tests" / "data" / "golden" / "official-k2.5-dev" / "turns.jsonl"
WAYS = ("cli-1", "cli-N", "datasets", "ray")


# -- measuring ---------------------------------------------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_mb(root: int) -> float:
    """Summed RSS of ``root`` and every descendant, in MB."""
    tree = _children()
    todo, total = [root], 0
    while todo:
        pid = todo.pop()
        total += _rss_kb(pid)
        todo.extend(tree.get(pid, ()))
    return total / 1024.0


class PeakSampler:
    """The peak of :func:`tree_rss_mb` of this process, sampled every 50 ms on a thread."""

    def __init__(self) -> None:
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss_mb(os.getpid()))
            self._stop.wait(0.05)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, tree_rss_mb(os.getpid()))


def digest_rows(rows: Iterator[dict[str, Any]]) -> tuple[str, int]:
    """An order-independent digest of (id, input_ids, loss_mask) and the number of rows."""
    per_id = {}
    for row in rows:
        key = json.dumps([list(map(int, row["input_ids"])), list(map(int, row["loss_mask"]))])
        per_id[str(row["id"])] = hashlib.sha256(key.encode()).hexdigest()
    total = hashlib.sha256("".join(f"{k}:{v};" for k, v in sorted(per_id.items())).encode()).hexdigest()
    return total, len(per_id)


def read_rows(paths: list[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


# -- the four ways -----------------------------------------------------------------------------------


def run_way(way: str, objects: Path, text: Path, out: Path, workers: int) -> dict[str, Any]:
    """Build the rows one way; returns timings, counts, peak memory and the rows' digest."""
    result: dict[str, Any] = {"way": way}
    start = time.perf_counter()
    with PeakSampler() as peak:
        if way in ("cli-1", "cli-N"):
            from kimi_recon.cli import main

            n = 1 if way == "cli-1" else workers
            main(["build-samples", str(objects), "-o", str(out), "--workers", str(n)])
            files = [out]
        elif way == "datasets":
            import datasets

            from kimi_recon import sample_batch

            datasets.disable_progress_bars()
            ds = datasets.load_dataset("json", data_files=str(text), split="train", cache_dir=str(out.parent / "hf-cache"))
            rows = ds.map(sample_batch, batched=True, batch_size=64, num_proc=workers, remove_columns=ds.column_names)
            rows = rows.filter(lambda e: [x is None for x in e], input_columns="error", batched=True).remove_columns("error")
            rows.to_json(str(out), lines=True, force_ascii=False)
            files = [out]
        elif way == "ray":
            import ray

            from kimi_recon import sample_batch

            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False, configure_logging=False)
            result["init_s"] = time.perf_counter() - start
            try:
                ctx = ray.data.DataContext.get_current()
                ctx.enable_progress_bars = False
                ds = ray.data.read_json(str(text)).map_batches(sample_batch, batch_size=64)
                ds = ds.filter(lambda row: row["error"] is None).drop_columns(["error"])
                ds.write_json(str(out))
            finally:
                ray.shutdown()
            files = sorted(out.glob("*.json*"))
        else:
            raise SystemExit(f"unknown way {way!r}")
    result["elapsed_s"] = time.perf_counter() - start
    result["peak_tree_rss_mb"] = peak.peak
    result["digest"], result["rows"] = digest_rows(read_rows(files))
    return result


# -- the driver --------------------------------------------------------------------------------------


def write_inputs(n_records: int, objects: Path, text: Path) -> int:
    cases = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line.strip()]
    with objects.open("w", encoding="utf-8") as fo, text.open("w", encoding="utf-8") as ft:
        for i in range(n_records):
            c = cases[i % len(cases)]
            record = {"id": f"r{i}", "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]}
            fo.write(json.dumps(record, ensure_ascii=False) + "\n")
            as_text = {k: json.dumps(v, ensure_ascii=False) if k in ("messages", "tools", "turn") else v for k, v in record.items()}
            ft.write(json.dumps(as_text, ensure_ascii=False) + "\n")
    return objects.stat().st_size


def run_child(way: str, objects: Path, text: Path, out: Path, workers: int) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--run", way, "--objects", str(objects), "--text", str(text),
           "--out", str(out), "--workers", str(workers)]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=str(ROOT), env=env)
    if proc.returncode != 0 and not proc.stdout.strip():
        raise RuntimeError(f"{way} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def bench_scale(n_records: int, workers: int, quick: bool) -> tuple[dict[str, Any], list[str], list[str]]:
    """Run every way in a fresh process; (data, report lines, failures)."""
    lines, failures = [], []
    with tempfile.TemporaryDirectory(prefix="kimi-recon-scale-") as tmp:
        objects, text = Path(tmp) / "records.jsonl", Path(tmp) / "records-text.jsonl"
        size = write_inputs(n_records, objects, text)
        results = {way: run_child(way, objects, text, Path(tmp) / f"out-{way}", workers) for way in WAYS}
    base = results["cli-1"]
    lines.append(f"{n_records:,} records ({size / 1e6:.1f} MB of JSONL), {workers} workers, each way in a fresh process:")
    lines.append("")
    lines.append("| way | s | records/s | speed vs cli-1 | start-up s | peak RSS MB, all processes |")
    lines.append("|---|---|---|---|---|---|")
    for way in WAYS:
        r = results[way]
        ratio = base["elapsed_s"] / r["elapsed_s"]
        init = f"{r['init_s']:.1f}" if "init_s" in r else "-"
        label = way.replace("-N", f"-{workers}")
        lines.append(f"| {label} | {r['elapsed_s']:.2f} | {n_records / r['elapsed_s']:,.0f} | {ratio:.2f}x | {init} | {r['peak_tree_rss_mb']:,.0f} |")
        r["speed_vs_cli1"] = ratio
        if r["digest"] != base["digest"] or r["rows"] != base["rows"]:
            failures.append(f"{way}: {r['rows']} rows differ from cli-1's {base['rows']} rows")
    if quick:
        lines.append("")
        lines.append("--quick: so few records that start-up dominates (Ray's especially); the ratios apply to the full run.")
    return {"records": n_records, "input_bytes": size, "workers": workers, "results": results}, lines, failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="600 records (CI)")
    p.add_argument("--records", type=int, default=None, help="records to build (default 100,000; 600 with --quick)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="workers / processes / Ray CPUs (default: all cores)")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--run", choices=WAYS, help=argparse.SUPPRESS)
    p.add_argument("--objects", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--text", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ns = p.parse_args(argv)
    if ns.run:
        print(json.dumps(run_way(ns.run, ns.objects, ns.text, ns.out, ns.workers)))
        return 0
    n = ns.records or (600 if ns.quick else 100_000)
    data, lines, failures = bench_scale(n, ns.workers, ns.quick)
    print("\n".join(lines))
    if ns.json:
        ns.json.write_text(json.dumps(data, indent=2), encoding="utf-8")
    for f in failures:
        print(f"CHECK FAILED: {f}", file=sys.stderr)
    return 2 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
