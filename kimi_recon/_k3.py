"""Kimi-K3's XTML chat format: tags, typed tool-call arguments, and the assistant turn the model writes.

K3 writes a tag as ``<|open|>`` + name + attributes + ``<|sep|>`` and closes it with ``<|close|>`` + name +
``<|sep|>``; an attribute is `` key="value"`` with ``&`` and ``"`` escaped. Moonshot's reference renderer
(``encoding_k3.py``) yields segments, and K3's tokenizer encodes each on its own: the four control markers
as special ids, every text piece (tag name, `` key``, ``="``, value, ``"``, reasoning, content, argument
values) as ordinary text. So segment boundaries are BPE boundaries, and special-token text inside a field
is ordinary text (see ``kimi_recon.segments``; the profile's ``encoding`` is ``per_segment``).

What the model writes after ``<|open|>message role="assistant"<|sep|><|open|>think<|sep|>`` (thinking on)::

    REASONING<|close|>think<|sep|><|open|>response<|sep|>CONTENT<|close|>response<|sep|>[TOOLS]<|close|>message<|sep|><|end_of_msg|>

With thinking off the prompt ends with ``<|open|>response<|sep|>`` and the turn starts at CONTENT.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import InvalidTurnError
from .flags import Flag, FlagCode
from .models import AssistantTurn, ToolCall
from .profiles import ChatProfile
from .segments import RenderedTurn, Segment, marker
from .special_tokens import SPECIAL_TOKENS, registry_named

OPEN = "<|open|>"
CLOSE = "<|close|>"
SEP = "<|sep|>"
END_OF_MSG = "<|end_of_msg|>"
#: The stop alternative of a server that ends a tool-call turn right after its tools block.
AFTER_TOOLS = CLOSE + "tools" + SEP


def escape_attr(value: object) -> str:
    """An attribute value as K3 writes it: ``&`` -> ``&amp;``, ``"`` -> ``&quot;``."""
    return str(value).replace("&", "&amp;").replace('"', "&quot;")


def text(value: str, field: str | None = None) -> list[Segment]:
    """A text segment (none for empty text: the renderer writes nothing, so there is no boundary)."""
    return [Segment(value, field)] if value else []


_OPEN, _CLOSE, _SEP, _EQ_QUOTE, _QUOTE = marker(OPEN), marker(CLOSE), marker(SEP), Segment('="'), Segment('"')


def open_tag(tag: str, attrs: Iterable[tuple[str, object, str | None]] = ()) -> list[Segment]:
    """``<|open|>tag key="value"…<|sep|>``; each attribute is four text pieces, the value from ``field``."""
    segments = [_OPEN, Segment(tag)]
    for key, value, field in attrs:
        segments += [Segment(" " + key), _EQ_QUOTE, *text(escape_attr(value), field), _QUOTE]
    segments.append(_SEP)
    return segments


def close_tag(tag: str) -> list[Segment]:
    return [_CLOSE, Segment(tag), _SEP]


def xtml_type(value: Any) -> str:
    """The ``type`` attribute of an argument value."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array"


def xtml_value(value: Any) -> str:
    """An argument value as written between its tags: a string itself, anything else ``json.dumps``'d."""
    if isinstance(value, str):
        return value
    return json.dumps(dict(value) if isinstance(value, Mapping) else value, ensure_ascii=False)


def parse_arguments(arguments: str | Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    """(the arguments object, None) or (None, the text for a ``json`` block), as the official renderer reads
    them: a mapping is used as is, blank text is an empty call, JSON text is parsed (key order kept), text
    that is not JSON becomes the block. JSON that is not an object is returned as a block too (the
    official renderer refuses it; see :func:`arguments_problem`)."""
    if isinstance(arguments, Mapping):
        return arguments, None
    if not arguments.strip():
        return {}, None
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return None, arguments
    if not isinstance(parsed, dict):
        return None, arguments
    return parsed, None


def arguments_problem(arguments: str | Mapping[str, Any]) -> str | None:
    """Why the official renderer refuses these arguments (JSON that is not an object), or None."""
    if isinstance(arguments, Mapping) or not arguments.strip():
        return None
    try:
        parsed = json.loads(arguments)
    except (ValueError, RecursionError):
        return None
    return None if isinstance(parsed, dict) else f"is JSON but not an object ({type(parsed).__name__}); Kimi K3 tool call arguments must be a JSON object"


def call_segments(call: ToolCall, index: int, where: str, parsed: tuple[Mapping[str, Any] | None, str | None]) -> list[Segment]:
    """``<|open|>call tool="NAME" index="N"<|sep|>`` + arguments + ``<|close|>call<|sep|>`` (N counts from 1);
    ``parsed`` is :func:`parse_arguments` of the call's arguments."""
    segments = open_tag("call", [("tool", call.name, f"{where}.function.name"), ("index", index, None)])
    args, block = parsed
    field = f"{where}.function.arguments"
    if block is not None:
        segments += open_tag("json", [("type", "object", None)]) + text(block, field) + close_tag("json")
    else:
        assert args is not None
        for key, value in args.items():
            try:
                rendered = xtml_value(value)
            except (TypeError, ValueError) as err:
                raise InvalidTurnError(f"argument {key!r} cannot be written as JSON: {err}", field=field) from None
            segments += open_tag("argument", [("key", key, field), ("type", xtml_type(value), None)])
            segments += text(rendered, field) + close_tag("argument")
    return segments + close_tag("call")


def render_k3_turn(turn: AssistantTurn, profile: ChatProfile, thinking: bool, stop: str) -> RenderedTurn:
    """The segments of what the model wrote after the K3 generation prompt, and what was noticed."""
    flags: list[Flag] = []
    segments: list[Segment] = []
    reasoning = turn.reasoning or ""
    writes_reasoning = thinking and bool(reasoning.strip())
    # A cut-off turn with no content and no tool calls stopped inside its reasoning.
    in_reasoning = thinking and turn.truncated and not turn.content and not turn.tool_calls and bool(reasoning)
    if reasoning and not thinking:
        flags.append(Flag(FlagCode.REASONING_DROPPED, f"the turn has {len(reasoning)} characters of reasoning, not rendered (thinking=False)", "reasoning"))
    elif reasoning and not writes_reasoning:
        flags.append(Flag(FlagCode.REASONING_DROPPED, "the reasoning is only whitespace, which the K3 renderer does not write", "reasoning"))
    if not turn.reasoning_complete:
        flags.append(Flag(FlagCode.REASONING_INCOMPLETE, "the server returned only a summary or encrypted reasoning; the raw reasoning tokens cannot be rebuilt", "reasoning"))
    if writes_reasoning:
        segments += text(reasoning, "reasoning")
    if thinking and not in_reasoning:
        segments += close_tag("think") + open_tag("response")
    if not in_reasoning:
        segments += text(turn.content or "", "content")
    finished = not turn.truncated
    if finished or turn.tool_calls:
        segments += close_tag("response")
    if turn.tool_calls:
        segments += open_tag("tools")
        for i, call in enumerate(turn.tool_calls):
            where = f"tool_calls[{i}]"
            parsed = parse_arguments(call.arguments)
            segments += call_segments(call, i + 1, where, parsed)
            flags += argument_flags(call, where, parsed)
        if finished:
            segments += close_tag("tools")
    if finished and not (stop == AFTER_TOOLS and turn.tool_calls):
        segments += close_tag("message") + [marker(END_OF_MSG if stop == AFTER_TOOLS else stop)]
    if turn.truncated:
        where = "reasoning" if in_reasoning else "output"
        flags.append(Flag(FlagCode.TRUNCATED, f"finish_reason is 'length': cut off inside the {where}; no closing tags rendered", "finish_reason"))
        if turn.tool_calls:
            flags.append(Flag(FlagCode.TRUNCATED_TOOL_CALLS, "a turn cut off with tool calls: the calls are rendered whole and the tools block left open; where the cut fell is unknown", "tool_calls"))
    flags += special_text_flags(segments)
    return RenderedTurn(tuple(segments), tuple(flags), frozenset(s.text for s in segments if s.special))


#: Every named special-token text of K3 and K2.5 (K2.5's are reserved slots in K3, so users quote them).
_FIELD_SPECIALS = frozenset({t.text for t in registry_named("kimi-k3").named()} | {t.text for t in SPECIAL_TOKENS.named()})
#: A superset of their shapes: one scan finds the candidates, the set keeps the real ones.
_FIELD_SPECIAL_SHAPE = re.compile(r"<\|[A-Za-z0-9_]+\|>|\[[A-Za-z_]+\]|</?think>|<osagent_mode>")
assert all(_FIELD_SPECIAL_SHAPE.fullmatch(t) for t in _FIELD_SPECIALS)


def special_text_flags(segments: Iterable[Segment]) -> list[Flag]:
    """A flag for every field holding special-token text (K3's or K2.5's): in K3 it is ordinary text."""
    flags = []
    for seg in segments:
        if seg.field is None or ("<" not in seg.text and "[" not in seg.text):
            continue
        found = sorted({t for t in _FIELD_SPECIAL_SHAPE.findall(seg.text) if t in _FIELD_SPECIALS})
        if found:
            flags.append(
                Flag(
                    FlagCode.SPECIAL_TEXT_IN_FIELD,
                    f"contains special-token text {found}; in kimi-k3 field text is encoded as ordinary text, not as special ids",
                    seg.field,
                )
            )
    return flags


# --- what a provider's JSON round trip may have changed in the arguments ------------------------------

_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|\s+|[^\s"]')
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")


def raw_argument_values(arguments: str) -> list[tuple[str, str]] | None:
    """(key, the value's own JSON text) for each member of a JSON object text, or None if it is not one."""
    try:
        pos = _WS.match(arguments, 0).end()  # type: ignore[union-attr]
        if arguments[pos : pos + 1] != "{":
            return None
        pos = _WS.match(arguments, pos + 1).end()  # type: ignore[union-attr]
        members: list[tuple[str, str]] = []
        if arguments[pos : pos + 1] == "}":
            return members
        while arguments[pos : pos + 1] == '"':
            key, pos = json.decoder.scanstring(arguments, pos + 1)  # type: ignore[attr-defined]
            pos = _WS.match(arguments, pos).end()  # type: ignore[union-attr]
            if arguments[pos : pos + 1] != ":":
                return None
            pos = _WS.match(arguments, pos + 1).end()  # type: ignore[union-attr]
            _, end = _DECODER.raw_decode(arguments, pos)
            members.append((key, arguments[pos:end]))
            pos = _WS.match(arguments, end).end()  # type: ignore[union-attr]
            if arguments[pos : pos + 1] == "}":
                return members
            if arguments[pos : pos + 1] != ",":
                return None
            pos = _WS.match(arguments, pos + 1).end()  # type: ignore[union-attr]
        return None
    except ValueError:
        return None


def _numbers(raw: str) -> list[str]:
    return [t for t in _JSON_TOKEN.findall(raw) if _NUMBER.fullmatch(t)]


def _spacing(raw: str) -> list[str]:
    return [t for t in _JSON_TOKEN.findall(raw) if t.isspace()]


def argument_flags(call: ToolCall, where: str, parsed: tuple[Mapping[str, Any] | None, str | None]) -> list[Flag]:
    """Flags for argument values the official renderer writes differently from the API's JSON text.

    The renderer parses the arguments and writes each value with ``json.dumps``, so ``1e2`` becomes
    ``100.0`` and ``1.50`` becomes ``1.5``, and an object value gets ``, ``/``: `` spacing. A provider
    that re-serialised the model's arguments leaves no trace of what the model wrote, so where the two
    spellings differ the ids of that value are uncertain.
    """
    field = f"{where}.function.arguments"
    flags: list[Flag] = []
    if isinstance(call.arguments, Mapping):
        return flags
    args, block = parsed
    if block is not None:
        problem = arguments_problem(block)
        if problem is not None:
            flags.append(Flag(FlagCode.ARGUMENTS_NOT_OBJECT, f"arguments {problem}; rendered verbatim as a json block (the official renderer refuses them)", field))
        else:
            flags.append(Flag(FlagCode.ARGUMENTS_NOT_JSON, 'arguments are not valid JSON; rendered verbatim as a <|open|>json type="object"<|sep|> block', field))
        return flags
    if args is None or all(isinstance(v, str) for v in args.values()):
        return flags  # a string value is written as the string itself: nothing to re-spell
    members = raw_argument_values(call.arguments)
    if members is None:
        return flags
    for key, raw in members:
        if key not in args or isinstance(args[key], str):
            continue
        rendered = xtml_value(args[key])
        if raw == rendered:
            continue
        respelled = [n for n in _numbers(raw) if n not in _numbers(rendered)]
        if respelled:
            flags.append(
                Flag(
                    FlagCode.ARGUMENT_NUMBER_RESPELLED,
                    f"argument {key!r}: number(s) {respelled} are written {rendered!r} by the official renderer (json.loads + json.dumps); "
                    "a provider's JSON round trip may have changed what the model wrote",
                    field,
                )
            )
        if isinstance(args[key], (Mapping, list)) and _spacing(raw) != _spacing(rendered):
            flags.append(
                Flag(
                    FlagCode.ARGUMENT_SPACING,
                    f"argument {key!r}: the API's JSON spaces this {xtml_type(args[key])} differently from json.dumps, which the "
                    "official renderer writes; the model's own spacing is unknown",
                    field,
                )
            )
    return flags
