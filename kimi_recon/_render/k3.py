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
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import InvalidTurnError
from ..flags import Flag, FlagCode
from ..models import AssistantTurn, ToolCall
from ..profiles import ChatProfile
from ..segments import RenderedTurn, Segment, marker, rendered_turn
from ..special_tokens import SPECIAL_TOKENS, registry_named

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


#: :func:`json.dumps` with ``ensure_ascii=False``, built once: ``json.dumps`` builds a new encoder on every
#: call with a non-default option, which costs more than writing a small value.
_DUMPS = json.JSONEncoder(ensure_ascii=False).encode


def xtml_value(value: Any) -> str:
    """An argument value as written between its tags: a string itself, anything else ``json.dumps``'d."""
    if isinstance(value, str):
        return value
    scalar = _JSON_SCALARS.get(type(value))  # what json.dumps writes for these, without building an encoder
    if scalar is not None and (type(value) is not float or math.isfinite(value)):
        return scalar(value)
    return _DUMPS(dict(value) if isinstance(value, Mapping) and type(value) is not dict else value)


#: How ``json.dumps`` writes a value of exactly these types (a finite float: its repr, as json's encoder does).
_JSON_SCALARS: dict[type, Callable[[Any], str]] = {
    int: int.__repr__,
    float: float.__repr__,
    bool: lambda v: "true" if v else "false",
    type(None): lambda v: "null",
}


def parse_arguments(arguments: str | Mapping[str, Any]) -> tuple[Mapping[str, Any] | None, str | None]:
    """(the arguments object, None) or (None, the text for a ``json`` block), as the official renderer reads
    them: a mapping is used as is, blank text is an empty call, JSON text is parsed (key order kept), text
    that is not JSON becomes the block. JSON that is not an object is returned as a block too (the
    official renderer refuses it; see :func:`arguments_problem`)."""
    if type(arguments) is not str and isinstance(arguments, Mapping):
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


# The renderer's own pieces of the tags an assistant turn writes, built once (they are the same every time).
_CLOSE_THINK_OPEN_RESPONSE = (*close_tag("think"), *open_tag("response"))
_CLOSE_RESPONSE = tuple(close_tag("response"))
_OPEN_TOOLS = tuple(open_tag("tools"))
_CLOSE_TOOLS = tuple(close_tag("tools"))
_CLOSE_MESSAGE = tuple(close_tag("message"))
_CLOSE_ARGUMENT = tuple(close_tag("argument"))
_CLOSE_CALL = tuple(close_tag("call"))
_OPEN_CALL_TOOL = (_OPEN, Segment("call"), Segment(" tool"), _EQ_QUOTE)  # then the name, then _INDEX_ATTR
_INDEX_ATTR = (_QUOTE, Segment(" index"), _EQ_QUOTE)  # then the index, then _QUOTE_SEP
_QUOTE_SEP = (_QUOTE, _SEP)
_OPEN_ARGUMENT_KEY = (_OPEN, Segment("argument"), Segment(" key"), _EQ_QUOTE)  # then the key, then _TYPE_ATTR[type]
_TYPE_ATTR = {t: (_QUOTE, Segment(" type"), _EQ_QUOTE, Segment(t), _QUOTE, _SEP) for t in ("boolean", "null", "number", "string", "object", "array")}
_OPEN_JSON_BLOCK = tuple(open_tag("json", [("type", "object", None)]))
_CLOSE_JSON = tuple(close_tag("json"))
#: ``xtml_type`` of the types ``json.loads`` returns, looked up by exact type.
_JSON_TYPE = {str: "string", dict: "object", list: "array", int: "number", float: "number", bool: "boolean", type(None): "null"}


def _add_field(segments: list[Segment], piece: str, field: str, noted: list[Flag] | None) -> None:
    """Append a field's text (nothing for empty text: no boundary), and a flag to ``noted`` when it holds
    special-token text (no scan when ``noted`` is None: a prompt carries no flags)."""
    if piece:
        segments.append(tuple.__new__(Segment, (piece, field, False)))  # (Segment(piece, field) less its __new__'s frame: half the time)
        if noted is not None and ("<" in piece or "[" in piece) and (found := _field_special_texts(piece)):
            noted.append(_special_text_flag(found, field))


def call_segments(
    segments: list[Segment],
    name: object,
    index: int,
    where: str,
    parsed: tuple[Mapping[str, Any] | None, str | None],
    written: dict[str, str],
    noted: list[Flag] | None,
) -> None:
    """Append ``<|open|>call tool="NAME" index="N"<|sep|>`` + arguments + ``<|close|>call<|sep|>`` (N counts
    from 1; ``parsed`` is :func:`parse_arguments` of the call's arguments); fill ``written`` with each argument
    value as written, and ``noted`` (when not None) with the special-token text flags of its fields. One
    writer for the turn's calls and the prompt's earlier ones (``kimi_recon._render.k3_prompt``)."""
    segments += _OPEN_CALL_TOOL
    _add_field(segments, escape_attr(name), f"{where}.function.name", noted)
    segments += _INDEX_ATTR
    segments.append(Segment(str(index)))
    segments += _QUOTE_SEP
    args, block = parsed
    field = f"{where}.function.arguments"
    if block is not None:
        segments += _OPEN_JSON_BLOCK
        _add_field(segments, block, field, noted)
        segments += _CLOSE_JSON
    else:
        assert args is not None
        for key, value in args.items():
            try:
                rendered = xtml_value(value)
            except (TypeError, ValueError) as err:
                raise InvalidTurnError(f"argument {key!r} cannot be written as JSON: {err}", field=field) from None
            written[key] = rendered
            segments += _OPEN_ARGUMENT_KEY
            _add_field(segments, escape_attr(key), field, noted)
            segments += _TYPE_ATTR[_JSON_TYPE.get(type(value)) or xtml_type(value)]
            _add_field(segments, rendered, field, noted)
            segments += _CLOSE_ARGUMENT
    segments += _CLOSE_CALL


def render_k3_turn(turn: AssistantTurn, profile: ChatProfile, thinking: bool, *, call_index_offset: int, stop: str) -> RenderedTurn:
    """The segments of what the model wrote after the K3 generation prompt, and what was noticed.

    ``call_index_offset`` plays no part (it is here for the format's renderer signature,
    :class:`~kimi_recon._render.formats.TurnRenderer`): K3 numbers a turn's tool calls from 1 and writes no tool-call id."""
    flags: list[Flag] = []
    noted: list[Flag] = []  # special-token text in fields: flagged after the others, in segment order
    segments: list[Segment] = []
    reasoning = turn.reasoning or ""
    content, calls, truncated = turn.content, turn.tool_calls, turn.truncated
    # (not reasoning.strip(): the same test, str.strip and str.isspace take the same characters as
    # whitespace, without copying the reasoning)
    writes_reasoning = thinking and bool(reasoning) and not reasoning.isspace()
    # A cut-off turn with no content and no tool calls stopped inside its reasoning.
    in_reasoning = thinking and truncated and not content and not calls and bool(reasoning)
    if reasoning and not thinking:
        flags.append(Flag(FlagCode.REASONING_DROPPED, f"the turn has {len(reasoning)} characters of reasoning, not rendered (thinking=False)", "reasoning"))
    elif reasoning and not writes_reasoning:
        flags.append(Flag(FlagCode.REASONING_DROPPED, "the reasoning is only whitespace, which the K3 renderer does not write", "reasoning"))
    if not turn.reasoning_complete:
        flags.append(Flag(FlagCode.REASONING_INCOMPLETE, "the server returned only a summary or encrypted reasoning; the raw reasoning tokens cannot be rebuilt", "reasoning"))
    if writes_reasoning:
        _add_field(segments, reasoning, "reasoning", noted)
    if thinking and not in_reasoning:
        segments += _CLOSE_THINK_OPEN_RESPONSE
    if not in_reasoning and content:
        _add_field(segments, content, "content", noted)
    finished = not truncated
    if finished or calls:
        segments += _CLOSE_RESPONSE
    if calls:
        segments += _OPEN_TOOLS
        for i, call in enumerate(calls):
            where = f"tool_calls[{i}]"
            parsed = parse_arguments(call.arguments)
            written: dict[str, str] = {}
            call_segments(segments, call.name, i + 1, where, parsed, written, noted)
            flags += argument_flags(call, where, parsed, written)
        if finished:
            segments += _CLOSE_TOOLS
    if finished and not (stop == AFTER_TOOLS and calls):
        end = END_OF_MSG if stop == AFTER_TOOLS else stop
        segments += _CLOSE_MESSAGE
        segments.append(_ENDS.get(end) or marker(end))
    if truncated:
        where = "reasoning" if in_reasoning else "output"
        flags.append(Flag(FlagCode.TRUNCATED, f"finish_reason is 'length': cut off inside the {where}; no closing tags rendered", "finish_reason"))
        if calls:
            flags.append(Flag(FlagCode.TRUNCATED_TOOL_CALLS, "a turn cut off with tool calls: the calls are rendered whole and the tools block left open; where the cut fell is unknown", "tool_calls"))
    if noted:
        flags += noted
    return rendered_turn(tuple(segments), tuple(flags), fields_ordinary=True)


#: The end markers of a finished turn K3 knows, built once (a Segment is immutable, so turns share them).
_ENDS = {text: marker(text) for text in (END_OF_MSG, "[EOS]")}


#: Every named special-token text of K3 and K2.5 (K2.5's are reserved slots in K3, so users quote them).
_FIELD_SPECIALS = frozenset({t.text for t in registry_named("kimi-k3").named()} | {t.text for t in SPECIAL_TOKENS.named()})
#: A superset of their shapes, in two halves that each start with one literal character (``re`` jumps
#: between occurrences of it; one alternation tries every position). Their matches never overlap.
_FIELD_ANGLE_SHAPE = re.compile(r"<(?:\|[A-Za-z0-9_]+\||/?think|osagent_mode)>")
_FIELD_BRACKET_SHAPE = re.compile(r"\[[A-Za-z_]+\]")
assert all(_FIELD_ANGLE_SHAPE.fullmatch(t) or _FIELD_BRACKET_SHAPE.fullmatch(t) for t in _FIELD_SPECIALS)


def _field_special_texts(piece: str) -> list[str]:
    """The K3 and K2.5 special-token texts in ``piece``, sorted, each once."""
    found = set(_FIELD_ANGLE_SHAPE.findall(piece)) if "<" in piece else set()
    if "[" in piece:
        found.update(_FIELD_BRACKET_SHAPE.findall(piece))
    return sorted(found & _FIELD_SPECIALS)


def _special_text_flag(found: list[str], field: str) -> Flag:
    return Flag(
        FlagCode.SPECIAL_TEXT_IN_FIELD,
        f"contains special-token text {found}; in kimi-k3 field text is encoded as ordinary text, not as special ids",
        field,
    )


def special_text_flags(segments: Iterable[Segment]) -> list[Flag]:
    """A flag for every field holding special-token text (K3's or K2.5's): in K3 it is ordinary text."""
    flags = []
    for piece, field, special in segments:
        if not special and field is not None and ("<" in piece or "[" in piece) and (found := _field_special_texts(piece)):
            flags.append(_special_text_flag(found, field))
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


def _numbers(tokens: list[str]) -> list[str]:
    """The numbers among ``_JSON_TOKEN`` tokens."""
    return [t for t in tokens if t[0] in _NUMBER_START and _NUMBER.fullmatch(t)]


_NUMBER_START = frozenset("-0123456789")


def _spacing(tokens: list[str]) -> list[str]:
    """The whitespace among ``_JSON_TOKEN`` tokens."""
    return [t for t in tokens if t.isspace()]


def argument_flags(
    call: ToolCall, where: str, parsed: tuple[Mapping[str, Any] | None, str | None], written: Mapping[str, str] | None = None
) -> list[Flag]:
    """Flags for argument values the official renderer writes differently from the API's JSON text.

    The renderer parses the arguments and writes each value with ``json.dumps``, so ``1e2`` becomes
    ``100.0`` and ``1.50`` becomes ``1.5``, and an object value gets ``, ``/``: `` spacing. A provider
    that re-serialised the model's arguments leaves no trace of what the model wrote, so where the two
    spellings differ the ids of that value are uncertain. ``written``: each value as the renderer wrote it,
    when the caller has them.
    """
    field = f"{where}.function.arguments"
    flags: list[Flag] = []
    if type(call.arguments) is not str and isinstance(call.arguments, Mapping):  # (a str, most, skips the ABC check)
        return flags
    args, block = parsed
    if block is not None:
        problem = arguments_problem(block)
        if problem is not None:
            flags.append(Flag(FlagCode.ARGUMENTS_NOT_OBJECT, f"arguments {problem}; rendered verbatim as a json block (the official renderer refuses them)", field))
        else:
            flags.append(Flag(FlagCode.ARGUMENTS_NOT_JSON, 'arguments are not valid JSON; rendered verbatim as a <|open|>json type="object"<|sep|> block', field))
        return flags
    if args is None or all(map(_has_one_spelling, args.values())):
        return flags  # nothing to re-spell
    spelled = _flags_of_a_dumps_spelling(call.arguments, args, written, field)
    if spelled is not None:
        return spelled
    return _flags_member_by_member(call.arguments, args, written, field)


_ONE_SPELLING = frozenset({str, bool, type(None)})


def _has_one_spelling(value: Any) -> bool:
    """True for a parsed argument value the renderer writes as the API's JSON spelled it: a string (written as
    the string itself), ``true``/``false``/``null`` and a nonzero integer, which JSON spells one way each (zero
    may come as ``-0``, written ``0``). ``json.loads`` gives exactly these types."""
    return type(value) in _ONE_SPELLING or (type(value) is int and value != 0)


#: The spellings ``json.dumps`` gives an object, which servers send: default or compact separators, with
#: non-ASCII text as is or escaped. (encode, compact?) pairs, by whether the text is ASCII.
_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_DUMPS_SPELLINGS: dict[bool, tuple[tuple[Callable[[Any], str], bool], ...]] = {
    False: ((_DUMPS, False), (_COMPACT, True)),
    True: ((json.JSONEncoder().encode, False), (json.JSONEncoder(separators=(",", ":")).encode, True)),
}


def _flags_of_a_dumps_spelling(text: str, args: Mapping[str, Any], written: Mapping[str, str] | None, field: str) -> list[Flag] | None:
    """:func:`argument_flags` of ``text`` when it is ``json.dumps`` of ``args`` in one of the spellings servers
    use (None otherwise), without reading it member by member.

    Each member's text is then ``json.dumps`` of its value in that spelling, and the renderer writes the
    value as ``json.dumps`` with default separators: the same numbers, and the same spacing unless the
    spelling is compact and the value is an object or array with a separator in it (escaping non-ASCII
    text changes neither; ``tests/test_hot_path_shortcuts.py`` checks every spelling against the member
    by member reading)."""
    spellings = _DUMPS_SPELLINGS[text.isascii()]
    if ", " not in text and ": " not in text:
        spellings = spellings[::-1]  # compact first
    for encode, compact in spellings:
        if text == encode(args):
            if not compact:
                return []
            return [
                _spacing_flag(key, value, field)
                for key, value in args.items()
                if isinstance(value, (Mapping, list)) and _COMPACT(value) != (written[key] if written is not None else xtml_value(value))
            ]
    return None


def _spacing_flag(key: str, value: Any, field: str) -> Flag:
    return Flag(
        FlagCode.ARGUMENT_SPACING,
        f"argument {key!r}: the API's JSON spaces this {xtml_type(value)} differently from json.dumps, which the "
        "official renderer writes; the model's own spacing is unknown",
        field,
    )


def _flags_member_by_member(text: str, args: Mapping[str, Any], written: Mapping[str, str] | None, field: str) -> list[Flag]:
    """:func:`argument_flags` of JSON object ``text`` (``args`` parsed from it), each member's own text
    compared with what the renderer writes for its value."""
    flags: list[Flag] = []
    members = raw_argument_values(text)
    if members is None:
        return flags
    for key, raw in members:
        if key not in args or _has_one_spelling(args[key]):
            continue  # (a member whose key comes again later is read with the value the renderer keeps)
        rendered = written[key] if written is not None else xtml_value(args[key])
        if raw == rendered:
            continue
        raw_tokens, written_tokens = _JSON_TOKEN.findall(raw), _JSON_TOKEN.findall(rendered)
        written_numbers = set(_numbers(written_tokens))
        respelled = [n for n in _numbers(raw_tokens) if n not in written_numbers]
        if respelled:
            flags.append(
                Flag(
                    FlagCode.ARGUMENT_NUMBER_RESPELLED,
                    f"argument {key!r}: number(s) {respelled} are written {rendered!r} by the official renderer (json.loads + json.dumps); "
                    "a provider's JSON round trip may have changed what the model wrote",
                    field,
                )
            )
        if isinstance(args[key], (Mapping, list)) and _spacing(raw_tokens) != _spacing(written_tokens):
            flags.append(_spacing_flag(key, args[key], field))
    return flags
