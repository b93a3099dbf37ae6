"""What the usage check costs ``generate``: rows/s against a zero-latency loopback server, with and without it.

    python benchmarks/generate_bench.py --quick      # also run by benchmarks/run_all.py

The server runs in its own process and answers every request at once with a precomputed chat completion
(corpus turns from :mod:`benchmarks.corpus`, ``usage`` with prompt, completion and reasoning counts), so
a run's time is the adapter's own: the SDK's HTTP exchange, parsing, reconstruction, row writing, and
(with the check) counting each prompt's tokens to compare with ``prompt_tokens``. Prompts are distinct
multi-turn conversations of a few KB (a shared one-line system prompt, then user/assistant/user), with
tool declarations for tool-calling turns. The ``usage`` figures are those a provider that returns the
model's text reports (prompt exact, completion without the stop token, reasoning through ``</think>``),
except that one prompt in ten reports 3 more prompt tokens (a provider adding to the prompt), so both the
agreeing and the flagging path run; ``--constant-usage`` gives every row the same figures instead (every
row then carries three mismatch flags, as before 2026-12-01). Rounds alternate the two settings (order
shuffled each round) and the best of each is kept (9 rounds in ``--quick``, 15 otherwise). Target: the
check costs at most 10% (ratio >= 0.9).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import socket
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``benchmarks`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus

TARGET_RATIO = 0.9
_TOOL_SCHEMA = {"type": "object", "properties": {"query": {"type": "string", "description": "what to look for"}, "limit": {"type": "integer"}}}


def _tools(names: set[str]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": n, "description": f"The {n} tool.", "parameters": _TOOL_SCHEMA}} for n in sorted(names)]


CONSTANT_USAGE = {"prompt_tokens": 900, "completion_tokens": 1200, "total_tokens": 2100, "completion_tokens_details": {"reasoning_tokens": 800}}


def provider_usage(prompt: dict[str, Any], message: dict[str, Any], i: int) -> dict[str, Any]:
    """The ``usage`` a provider returning the model's own text reports for ``message`` (see the module doc),
    counted with kimi-recon's own reconstruction (set up before any timing)."""
    from kimi_recon.openrouter.parse import count_tool_calls, turn_from_openrouter
    from kimi_recon.reconstruct import reconstruct_output_ids
    from kimi_recon.responses import replace_foreign_call_ids
    from kimi_recon.tokenizer import load_tokenizer
    from kimi_recon.training import encode_prompt

    tok = load_tokenizer()
    offset = count_tool_calls(prompt["messages"])
    response = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}]}
    turn = replace_foreign_call_ids(turn_from_openrouter(response, call_index_offset=offset))
    ids = reconstruct_output_ids(turn, tok, "kimi-k2.5", True, call_index_offset=offset).ids
    prompt_len = len(encode_prompt(prompt["messages"], prompt.get("tools"), "kimi-k2.5", True, tok))
    prompt_tokens = prompt_len + (3 if i % 10 == 9 else 0)
    completion = len(ids) - 1  # the stop token not counted
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion, "total_tokens": prompt_tokens + completion,
            "completion_tokens_details": {"reasoning_tokens": ids.index(163607) + 1 if 163607 in ids else 0}}


def build_workload(n: int, seed: int, constant_usage: bool = False) -> tuple[list[dict[str, Any]], list[bytes]]:
    """``n`` prompts and, for each, the server's answer (a chat completion as JSON bytes)."""
    prompts: list[dict[str, Any]] = []
    answers: list[bytes] = []
    rng = random.Random(f"generate-bench:{seed}")
    index = 0
    while len(prompts) < n:
        record = corpus.make_record(index, seed)
        index += 1
        if record["kind"] in ("huge", "truncated", "special_text"):
            continue  # the check's cost is what is measured, on ordinary turns
        reply = record["response"]
        earlier = corpus.make_record(100_000 + index, seed)["response"]
        i = len(prompts)
        messages = [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"#{i} " + (earlier.get("reasoning_content") or "")[: rng.randint(300, 2500)]},
            {"role": "assistant", "content": (earlier.get("content") or "")[:2000]},
            {"role": "user", "content": f"#{i} go on"},
        ]
        calls = reply.get("tool_calls") or []
        prompt: dict[str, Any] = {"id": f"p{i}", "messages": messages}
        if calls:
            prompt["tools"] = _tools({c["function"]["name"] for c in calls})
        message = {"role": "assistant", "content": reply.get("content") or None, "reasoning": reply.get("reasoning_content")}
        if calls:
            message["tool_calls"] = calls
        answer = {
            "id": f"gen-{i}",
            "object": "chat.completion",
            "model": "moonshotai/kimi-k2.5",
            "provider": "Bench",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "native_finish_reason": "stop"}],
            "usage": {**(CONSTANT_USAGE if constant_usage else provider_usage(prompt, message, i)), "cost": 0.0},
        }
        prompts.append(prompt)
        answers.append(json.dumps(answer, ensure_ascii=False).encode("utf-8"))
    return prompts, answers


def _serve(answers: list[bytes], ports: Any) -> None:
    """The loopback server (in its own process): the answer of prompt ``#i`` at once."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def setup(self) -> None:
            super().setup()
            # headers and body go out in two writes; without this, delayed ACKs add ~40 ms a request
            self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            last = body["messages"][-1]["content"]
            data = answers[int(last[1 : last.index(" ")])]
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    ports.put(server.server_address[1])
    server.serve_forever()


def measure(n: int, rounds: int, seed: int = 0, concurrency: int = 4, constant_usage: bool = False) -> dict[str, Any]:
    """Best-of-``rounds`` rows/s of ``generate`` on ``n`` prompts with and without the usage check."""
    from kimi_recon.openrouter.generate import GenerateConfig, run_generate
    from kimi_recon.openrouter.options import RequestOptions
    from kimi_recon.tokenizer import load_tokenizer

    load_tokenizer()  # loaded once, outside the timings (a real run loads it once too)
    prompts, answers = build_workload(n, seed, constant_usage)
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork") if "fork" in methods else multiprocessing.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=_serve, args=(answers, ports), daemon=True)
    server.start()
    try:
        base_url = f"http://127.0.0.1:{ports.get(timeout=30)}/api/v1"
        times: dict[str, list[float]] = {"with check": [], "without check": []}
        cpu: dict[str, list[float]] = {name: [] for name in times}
        flagged: dict[str, int] = {}
        agreeing: dict[str, int] = {}
        with tempfile.TemporaryDirectory(prefix="kimi-recon-genbench-") as tmp:
            prompt_file = Path(tmp) / "prompts.jsonl"
            prompt_file.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts), encoding="utf-8")
            order = list(times)
            shuffle = random.Random(seed)
            for r in range(rounds + 1):  # round 0 warms up the SDK and the template cache, untimed
                shuffle.shuffle(order)
                for name in order:
                    out = Path(tmp) / f"out-{r}-{name.replace(' ', '-')}.jsonl"
                    config = GenerateConfig(
                        prompts=prompt_file, output=out, options=RequestOptions(model="moonshotai/kimi-k2.5"), base_url=base_url,
                        concurrency=concurrency, max_retries=0, progress=False, fsync=False, check_usage=name == "with check",
                    )
                    start, start_cpu = time.perf_counter(), time.process_time()
                    summary = run_generate(config, "sk-bench-not-a-key")
                    elapsed, used = time.perf_counter() - start, time.process_time() - start_cpu
                    if summary.ok != n:
                        raise RuntimeError(f"generate wrote {summary.ok} ok rows of {n} ({summary.line()})")
                    flagged[name] = summary.token_counts.get("rows_checked", 0)
                    agreeing[name] = sum(p.get("agree", 0) for p in summary.token_counts.get("providers", {}).values())
                    out.unlink()
                    if r:
                        times[name].append(elapsed)
                        cpu[name].append(used)
    finally:
        server.terminate()
        server.join(5)
    if not constant_usage and agreeing["with check"] != n - n // 10:  # the check itself is what is measured: it must be right
        raise RuntimeError(f"{agreeing['with check']} rows agree with their usage; expected {n - n // 10} (one prompt in ten is off by 3)")
    best = {name: min(ts) for name, ts in times.items()}
    rows_s = {name: n / t for name, t in best.items()}
    return {
        "prompts": n,
        "rounds": rounds,
        "concurrency": concurrency,
        "rows_per_s": rows_s,
        # CPU time of this process (the server's is not counted): steadier than wall time on a busy machine
        "cpu_ms_per_row": {name: 1000 * min(ts) / n for name, ts in cpu.items()},
        "rows_checked": flagged,
        "rows_agreeing": agreeing,
        "usage": "constant" if constant_usage else "provider",
        "ratio": rows_s["with check"] / rows_s["without check"],
        "target": TARGET_RATIO,
    }


def prompts_for(quick: bool) -> int:
    """Prompts a run sends: 300, or 100 in ``--quick``. Each run starts new worker threads, and a thread's
    first encodes cost several times a warm one's (tiktoken keeps a regex per thread); over 40 prompts that
    weighed on the check's side (+0.5 – 1.0 ms of CPU a row against +0.2 – 0.5 ms over 300)."""
    return 100 if quick else 300


def rounds_for(quick: bool, at_least: int = 0) -> int:
    """Rounds of each setting: a run is short (100 prompts take ~0.4 s), and on a shared 2-core machine 3 or 5
    rounds left the ratio swinging by +-0.1 between runs of the same code; 9 (quick) or 15 (full) steady it."""
    return max(at_least, 9 if quick else 15)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="100 prompts, 9 rounds (CI)")
    p.add_argument("--prompts", type=int, default=None)
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--constant-usage", action="store_true", help="every row reports the same usage (all mismatch)")
    ns = p.parse_args(argv)
    result = measure(ns.prompts or prompts_for(ns.quick), ns.rounds or rounds_for(ns.quick), constant_usage=ns.constant_usage)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
