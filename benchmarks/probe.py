"""Measurements that need a fresh process: tokenizer load time and peak memory.

``run_all.py`` runs this file in a new interpreter for each measurement, so nothing the parent
holds (the corpus, earlier results) counts. It imports only the standard library, ``kimi_recon``
and, when installed, ``psutil``; it prints one JSON object on its last line of stdout.

    python benchmarks/probe.py load
    python benchmarks/probe.py core  RECORDS.jsonl
    python benchmarks/probe.py audit RECORDS.jsonl --workers 2

``core`` streams the JSONL file and calls ``reconstruct_output_ids`` on each record's response, one at
a time (the memory of the core, not of a corpus held in memory). ``audit`` calls
``kimi_recon.dataset.audit_dataset(path, tokenizer, workers=N)``.

Peak RSS of this process is ``VmHWM`` from ``/proc/self/status``, not ``ru_maxrss``: on Linux,
``ru_maxrss`` survives ``execve``, so a child started by a big parent reports the parent's peak (a
child of a 500 MB parent reports ~510 MB while its own peak is ~11 MB). For the same reason
``RUSAGE_CHILDREN`` is only an upper bound. With psutil, a sampler thread records every 50 ms the
summed RSS and (every 200 ms) PSS (shared pages split between the processes that share them) of this
process and its live children (pool workers), and the largest single child. The sampler costs a little
CPU, so the records/s a probe reports are a little low; run_all.py times throughput without it.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _status_mb(key: str) -> float | None:
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return None


def _rss_mb() -> float:
    """Current RSS of this process (MB)."""
    now = _status_mb("VmRSS")
    return now if now is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _peak_mb() -> float:
    """Peak RSS of this process since exec (MB)."""
    peak = _status_mb("VmHWM")
    return peak if peak is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _children_maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0


class TreeSampler:
    """Peak of (this process + live children) RSS, sampled every ``interval`` seconds (needs psutil)."""

    def __init__(self, interval: float = 0.05, pss_every: int = 4) -> None:
        self.interval = interval
        self.pss_every = pss_every
        self.peak_mb: float | None = None
        self.child_peak_mb: float | None = None
        self.pss_peak_mb: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> TreeSampler:
        try:
            import psutil  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            return self
        proc = psutil.Process()
        self.peak_mb = 0.0

        def run() -> None:
            tick = 0
            while not self._stop.is_set():
                with_pss = tick % self.pss_every == 0  # smaps_rollup costs ~1 ms a process; RSS is cheap
                tick += 1
                total = pss = biggest = 0
                try:
                    for p in [proc, *proc.children(recursive=True)]:
                        try:
                            info = p.memory_full_info() if with_pss else p.memory_info()
                        except psutil.Error:
                            continue
                        total += info.rss
                        pss += getattr(info, "pss", info.rss)
                        if p is not proc:
                            biggest = max(biggest, info.rss)
                except psutil.Error:
                    pass
                self.peak_mb = max(self.peak_mb or 0.0, total / 2**20)
                if with_pss:
                    self.pss_peak_mb = max(self.pss_peak_mb or 0.0, pss / 2**20)
                self.child_peak_mb = max(self.child_peak_mb or 0.0, biggest / 2**20)
                self._stop.wait(self.interval)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def _records(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def probe_load() -> dict[str, Any]:
    rss_start = _rss_mb()
    t0 = time.perf_counter()
    import kimi_recon

    load_tokenizer = kimi_recon.load_tokenizer  # the package is lazy: this imports the tokenizer module (tiktoken)
    t1 = time.perf_counter()
    rss_import = _rss_mb()
    tok = load_tokenizer()
    t2 = time.perf_counter()
    assert tok.encode("<|im_end|>") == [163586]
    return {
        "import_s": t1 - t0,
        "load_s": t2 - t1,
        "rss_start_mb": rss_start,
        "rss_after_import_mb": rss_import,
        "rss_after_load_mb": _rss_mb(),
        "peak_rss_mb": _peak_mb(),
    }


def probe_core(path: Path) -> dict[str, Any]:
    from kimi_recon import load_tokenizer
    from kimi_recon.reconstruct import reconstruct_output_ids

    rss_import = _rss_mb()
    tok = load_tokenizer()
    rss_load = _rss_mb()
    n = tokens = exact = 0
    with TreeSampler() as sampler:
        t0 = time.perf_counter()
        for record in _records(path):
            ids = reconstruct_output_ids(record["response"], tok).ids
            n += 1
            tokens += len(ids)
            exact += ids == record.get("reference_ids")
        elapsed = time.perf_counter() - t0
    return {
        "records": n,
        "tokens": tokens,
        "exact": exact,
        "elapsed_s": elapsed,
        "rss_after_import_mb": rss_import,
        "rss_after_load_mb": rss_load,
        "peak_rss_mb": _peak_mb(),
        "tree_peak_mb": sampler.peak_mb,
        "tree_pss_peak_mb": sampler.pss_peak_mb,
    }


def _audit_summary(audit: object) -> dict[str, Any]:
    """The DatasetAudit's counts (``to_dict()`` without the examples), or its scalar fields."""
    to_dict = getattr(audit, "to_dict", None)
    if callable(to_dict):
        full = to_dict()
        if isinstance(full, dict):
            return {k: v for k, v in full.items() if k not in ("examples", "errors")}
    out: dict[str, Any] = {}
    fields = getattr(audit, "__dataclass_fields__", None)
    names = list(fields) if isinstance(fields, dict) else [n for n in dir(audit) if not n.startswith("_")]
    for name in names:
        try:
            value = getattr(audit, name)
        except Exception:  # noqa: BLE001 - a property may raise; the summary is best-effort
            continue
        if isinstance(value, (int, float, str, bool)) or value is None:
            out[name] = value
        elif isinstance(value, (list, tuple, dict)):
            out[f"len({name})"] = len(value)
    return out


def probe_audit(path: Path, workers: int) -> dict[str, Any]:
    from kimi_recon import load_tokenizer
    from kimi_recon.dataset import audit_dataset

    rss_import = _rss_mb()
    tok = load_tokenizer()
    rss_load = _rss_mb()
    with TreeSampler() as sampler:
        t0 = time.perf_counter()
        audit = audit_dataset(path, tok, workers=workers, progress=False)
        elapsed = time.perf_counter() - t0
    return {
        "workers": workers,
        "elapsed_s": elapsed,
        "rss_after_import_mb": rss_import,
        "rss_after_load_mb": rss_load,
        "peak_rss_mb": _peak_mb(),
        "children_maxrss_upper_bound_mb": _children_maxrss_mb(),
        "child_peak_mb": sampler.child_peak_mb,
        "tree_peak_mb": sampler.peak_mb,
        "tree_pss_peak_mb": sampler.pss_peak_mb,
        "audit": _audit_summary(audit),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    sub.add_parser("load", help="import and tokenizer load time, RSS after each")
    core = sub.add_parser("core", help="peak RSS of reconstruct_output_ids over a JSONL file, streamed")
    core.add_argument("jsonl", type=Path)
    audit = sub.add_parser("audit", help="time and peak RSS of audit_dataset over a JSONL file")
    audit.add_argument("jsonl", type=Path)
    audit.add_argument("--workers", type=int, default=1)
    ns = parser.parse_args(argv)
    if ns.mode == "load":
        result = probe_load()
    elif ns.mode == "core":
        result = probe_core(ns.jsonl)
    else:
        result = probe_audit(ns.jsonl, ns.workers)
    sys.stdout.write("\n" + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
