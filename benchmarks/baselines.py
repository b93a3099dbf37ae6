"""The piecewise methods naive pipelines use to get output ids, implemented faithfully.

They encode the pieces of a turn separately with the raw tiktoken encoding and splice the special
ids in by hand, instead of encoding the rendered turn once. All take the OpenAI-format assistant
message dict (what an API returned), like ``reconstruct_output_ids``:

``naive``
    Render the turn by string concatenation, strip a trailing ``<|im_end|>``, split at the first
    ``</think>``, ``encode_ordinary`` both pieces, and splice 163607 and 163586 back in. Whatever other
    marker text is in the pieces (the tool-call section markers) is encoded as ordinary text.
``careful``
    The plausible bug-free version: encode the reasoning, append 163607, encode the content, splice
    each tool-call marker id in by hand around the encoded call id and arguments, append 163586 (not
    for a turn cut off by the length limit; no 163607 when the cut fell inside the reasoning).
    Correct except where the official encode differs from piecewise ``encode_ordinary``: special-token
    text inside a field, and the official 400k / 25k-run chunking.
``careful_chunked``
    ``careful`` with each piece encoded by ``KimiTokenizer.encode(piece, allowed_special=set())`` (the
    official chunking, restarted at every piece).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import tiktoken

from kimi_recon.tokenizer import KimiTokenizer

THINK_END_ID = 163607
IM_END_ID = 163586
SECTION_BEGIN_ID = 163595
SECTION_END_ID = 163596
CALL_BEGIN_ID = 163597
ARGUMENT_BEGIN_ID = 163598
CALL_END_ID = 163599

Message = Mapping[str, Any]


class Method(Protocol):
    def __call__(self, msg: Message, thinking: bool = True) -> list[int]: ...


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _calls(msg: Message) -> list[tuple[str, str]]:
    out = []
    for i, call in enumerate(msg.get("tool_calls") or ()):
        fn = call["function"]
        args = fn.get("arguments") or ""
        out.append((call.get("id") or f"functions.{fn['name']}:{i}", args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)))
    return out


def naive_render(msg: Message, thinking: bool = True) -> str:
    """How a pipeline renders the turn by hand (the same text as ``render_assistant_turn`` for K2.5)."""
    reasoning, content = _text(msg.get("reasoning_content")), _text(msg.get("content"))
    if not thinking:
        return _render_body("", content, msg, thinking_block=False)
    return _render_body(reasoning, content, msg, thinking_block=True)


def _render_body(reasoning: str, content: str, msg: Message, *, thinking_block: bool) -> str:
    truncated = msg.get("finish_reason") == "length"
    calls = _calls(msg)
    parts = [reasoning]
    if thinking_block and not (truncated and not content and not calls and reasoning):
        parts.append("</think>")
    parts.append(content)
    if calls:
        parts.append("<|tool_calls_section_begin|>")
        for call_id, args in calls:
            parts += ["<|tool_call_begin|>", call_id, "<|tool_call_argument_begin|>", args, "<|tool_call_end|>"]
        parts.append("<|tool_calls_section_end|>")
    if not truncated:
        parts.append("<|im_end|>")
    return "".join(parts)


def make_naive(enc: tiktoken.Encoding) -> Method:
    encode = enc.encode_ordinary

    def naive(msg: Message, thinking: bool = True) -> list[int]:
        text = naive_render(msg, thinking)
        ended = text.endswith("<|im_end|>")
        body = text[: -len("<|im_end|>")] if ended else text
        reasoning, sep, rest = body.partition("</think>")
        ids = encode(reasoning)
        if sep:
            ids.append(THINK_END_ID)
            ids += encode(rest)
        if ended:
            ids.append(IM_END_ID)
        return ids

    return naive


def _make_careful(encode: Callable[[str], list[int]]) -> Method:
    def careful(msg: Message, thinking: bool = True) -> list[int]:
        reasoning, content = _text(msg.get("reasoning_content")), _text(msg.get("content"))
        truncated = msg.get("finish_reason") == "length"
        calls = _calls(msg)
        ids = encode(reasoning) if reasoning and thinking else []
        if thinking and not (truncated and not content and not calls and reasoning):
            ids.append(THINK_END_ID)
        if content:
            ids += encode(content)
        if calls:
            ids.append(SECTION_BEGIN_ID)
            for call_id, args in calls:
                ids.append(CALL_BEGIN_ID)
                ids += encode(call_id)
                ids.append(ARGUMENT_BEGIN_ID)
                ids += encode(args)
                ids.append(CALL_END_ID)
            ids.append(SECTION_END_ID)
        if not truncated:
            ids.append(IM_END_ID)
        return ids

    return careful


def make_careful(enc: tiktoken.Encoding) -> Method:
    return _make_careful(enc.encode_ordinary)


def make_careful_chunked(tok: KimiTokenizer) -> Method:
    def encode(text: str) -> list[int]:
        return tok.encode(text, allowed_special=set())

    return _make_careful(encode)


def methods(tok: KimiTokenizer) -> dict[str, Method]:
    """The piecewise methods by name."""
    return {
        "naive": make_naive(tok.encoding),
        "careful": make_careful(tok.encoding),
        "careful_chunked": make_careful_chunked(tok),
    }
