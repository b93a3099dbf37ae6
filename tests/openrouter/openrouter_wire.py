"""Builders for OpenRouter wire data (completions, stream chunks, SSE lines), shared by the tests and
the loopback server. Shapes follow OpenRouter's documented responses: ``provider``,
``native_finish_reason``, ``reasoning`` + ``reasoning_details``, ``usage.cost``, error chunks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def completion(message: dict[str, Any], finish_reason: str | None = "stop", **extra: Any) -> dict[str, Any]:
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", **message},
        "finish_reason": finish_reason,
        "native_finish_reason": extra.pop("native_finish_reason", finish_reason),
        "logprobs": extra.pop("logprobs", None),
    }
    body = {
        "id": "gen-123",
        "object": "chat.completion",
        "created": 1700000000,
        "model": "moonshotai/kimi-k2.5",
        "provider": "Moonshot AI",
        "choices": [choice],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30, "cost": 0.00042},
    }
    body.update(extra)
    return body


def call(call_id: str | None, name: str, arguments: Any, index: int = 0) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "index": index, "function": {"name": name, "arguments": arguments}}


def _split(text: str, pieces: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // pieces))
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_chunks(resp: dict[str, Any], pieces: int = 2) -> list[dict[str, Any]]:
    """The chunks an OpenRouter stream of ``resp`` carries (each text split into ``pieces``): a role
    chunk, reasoning deltas (``reasoning`` + ``reasoning_details``), content deltas, tool calls with id
    and name only in their first delta, a finish chunk, and a usage chunk with empty choices."""
    choice = resp["choices"][0]
    message = choice["message"]
    base = {k: resp[k] for k in ("id", "created", "model", "provider")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], **fields: Any) -> dict[str, Any]:
        return base | {"choices": [{"index": 0, "delta": delta, "finish_reason": None, **fields}]}

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in _split(message.get("reasoning") or "", pieces):
        details = [{"type": "reasoning.text", "text": piece, "index": 0, "format": "unknown"}]
        out.append(chunk({"content": "", "reasoning": piece, "reasoning_details": details}))
    for piece in _split(message.get("content") or "", pieces):
        out.append(chunk({"content": piece}))
    for i, tc in enumerate(message.get("tool_calls") or []):
        args = _split(tc["function"]["arguments"], pieces) or [""]
        first = {"index": i, "id": tc["id"], "type": "function", "function": {"name": tc["function"]["name"], "arguments": args[0]}}
        out.append(chunk({"tool_calls": [first]}))
        for piece in args[1:]:
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    out.append(chunk({"content": ""}, finish_reason=choice["finish_reason"], native_finish_reason=choice["native_finish_reason"]))
    out.append(base | {"choices": [], "usage": resp["usage"]})
    return out


def error_chunk(code: int | str, message: str) -> dict[str, Any]:
    """OpenRouter's mid-stream error: a top-level ``error`` and ``finish_reason: "error"``."""
    return {
        "id": "gen-123",
        "object": "chat.completion.chunk",
        "created": 1700000000,
        "model": "moonshotai/kimi-k2.5",
        "provider": "Moonshot AI",
        "error": {"code": code, "message": message},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error", "native_finish_reason": "error"}],
    }


def sse(chunks: list[dict[str, Any]], comments: bool = True, done: bool = True) -> list[str]:
    """SSE lines for ``chunks``, with OpenRouter's keep-alive comments between events."""
    lines = [": OPENROUTER PROCESSING", ""] if comments else []
    for c in chunks:
        lines += [f"data: {json.dumps(c, ensure_ascii=False)}", ""]
        if comments:
            lines += [": OPENROUTER PROCESSING", ""]
    return lines + (["data: [DONE]", ""] if done else [])


def write_prompts(path: Path, prompts: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts), encoding="utf-8")
    return path


def user_prompt(text: str, prompt_id: str | None = None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"messages": [{"role": "user", "content": text}], **extra}
    if prompt_id is not None:
        record["id"] = prompt_id
    return record


def read_rows(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    rows = [json.loads(line) for line in text.split("\n") if line.strip()]
    assert len(rows) == len(text.splitlines()), "a row spans several lines for some line readers"
    return rows


PUBLIC_PREFIXES = ("sk-or-v1-", "sk-or-", "sk-proj-", "sk-")


def secret_part(key: str) -> str:
    return next((key[len(p) :] for p in PUBLIC_PREFIXES if key.startswith(p)), key)


def pieces(key: str, n: int = 8) -> set[str]:
    """Every ``n`` consecutive characters of the key's secret part: none may be written anywhere."""
    part = secret_part(key)
    return {part[i : i + n] for i in range(len(part) - n + 1)}
