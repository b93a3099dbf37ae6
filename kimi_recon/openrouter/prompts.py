"""The prompt file: one JSON object per line with ``messages``, optional ``tools`` and optional ``id``.

Every line becomes either a :class:`Prompt` or a :class:`BadPrompt` (which the run records as an error
row), so a malformed line is reported, never silently dropped. Ids must be stable across runs because
resuming skips the ids already in the output: a line without an ``id`` gets one from a hash of its
messages and tools (a repeated identical prompt gets ``#2``, ``#3``... in file order), so inserting or
reordering other lines does not change it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._base.arguments import instance_argument, path_argument
from .._base.files import read_lines
from ..errors import InvalidInputError
from ..record_options import parse_options
from .errors import holds_secret, redact_text

_ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})


@dataclass(frozen=True)
class Prompt:
    """One conversation to send. ``line`` is its 1-based line number in the prompt file."""

    id: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] | None
    line: int


@dataclass(frozen=True)
class BadPrompt:
    """A line that cannot be sent; ``message`` says why and is written to the output as the error."""

    id: str
    line: int
    message: str


def derived_id(messages: object, tools: object) -> str:
    """The id of a prompt that has none: a hash of what is sent, so it survives edits elsewhere."""
    canonical = json.dumps({"messages": messages, "tools": tools}, sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:20]


def parse_prompt_line(text: str | bytes, line: int) -> Prompt | BadPrompt:
    """One prompt line, checked. The returned id may still need de-duplicating (see :func:`parse_prompts`)."""
    return _parse_record(text, line)[0]


#: A ``\\uD800``-``\\uDFFF`` JSON escape: the only way a lone surrogate gets into a parsed line.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(text: str, value: object) -> bool:
    if _SURROGATE_ESCAPE.search(text) is None:
        return False
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parse_record(text: str | bytes, line: int, secret: str | None = None) -> tuple[Prompt | BadPrompt, bool]:
    """The parsed line and whether its id was derived from its content. Never raises: a line that cannot
    be sent (not UTF-8, not JSON, too deeply nested, lone surrogates, wrong shape) is a :class:`BadPrompt`."""
    bad_line = f"line-{line}"
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            return BadPrompt(bad_line, line, f"line {line} is not UTF-8 ({err.reason} at byte {err.start})"), False
    if holds_secret(text, secret):
        # Sending it would put the key into the prompt ids and, if the model repeats it, into the output.
        return BadPrompt(bad_line, line, f"line {line} holds the API key (or a piece of it); it was not sent"), False
    try:
        record = json.loads(text)
    except RecursionError:
        return BadPrompt(bad_line, line, f"line {line} is nested too deeply to read"), False
    except ValueError as err:
        return BadPrompt(bad_line, line, f"line {line} is not JSON: {redact_text(str(err), secret)}"), False
    if secret and _decoded_holds_secret(record, secret):
        # Written with \u escapes (or split over several texts) the key is not in the line, but it is in
        # what would be sent and rendered into the prompt ids.
        return BadPrompt(bad_line, line, f"line {line} holds the API key (or a piece of it) once read as JSON; it was not sent"), False
    if not isinstance(record, Mapping):
        return BadPrompt(bad_line, line, f"line {line} must be a JSON object, got {type(record).__name__}"), False
    raw_id = record.get("id")
    if raw_id is not None and (not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or raw_id == ""):
        return BadPrompt(bad_line, line, f"line {line}: 'id' must be a non-empty string or an integer, got {raw_id!r:.80}"), False
    if isinstance(raw_id, str) and _has_lone_surrogate(text, raw_id):
        return BadPrompt(bad_line, line, f"line {line}: 'id' holds a lone UTF-16 surrogate: {raw_id!r:.80}"), False
    explicit = None if raw_id is None else str(raw_id)
    fallback_id = explicit if explicit is not None else bad_line

    messages = record.get("messages")
    problem = _check_messages(messages)
    if problem is not None:
        return BadPrompt(fallback_id, line, f"prompt {fallback_id!r} (line {line}): {problem}"), False
    tools = record.get("tools")
    try:
        # The one reader of record options: JSON text parsed, Arrow's filler nulls removed (or refused).
        sent_tools = parse_options(record, read=("tools",)).tools
    except InvalidInputError as err:
        return BadPrompt(fallback_id, line, f"prompt {fallback_id!r} (line {line}): {err}"), False
    if _has_lone_surrogate(text, [messages, tools]):
        return BadPrompt(
            fallback_id, line, f"prompt {fallback_id!r} (line {line}): holds a lone UTF-16 surrogate, which has no UTF-8 form to send"
        ), False
    assert isinstance(messages, list)
    try:
        prompt_id = explicit if explicit is not None else derived_id(messages, tools)
    except (ValueError, RecursionError) as err:  # e.g. a structure too deep to serialise again
        return BadPrompt(fallback_id, line, f"prompt {fallback_id!r} (line {line}): cannot be serialised: {type(err).__name__}"), False
    return Prompt(prompt_id, tuple(messages), sent_tools, line), explicit is None


def _strings(value: object) -> Iterator[str]:
    """Every string in a parsed JSON value, object keys included, in document order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _decoded_holds_secret(record: object, secret: str) -> bool:
    """True when a string of ``record``, or all of them run together (a key split over content parts that
    the template joins), holds the key or a piece of its secret part."""
    try:
        joined = "".join(_strings(record))
    except RecursionError:  # json.loads read it, so this is only a guard
        return True
    return holds_secret(joined, secret)


def _check_messages(messages: object) -> str | None:
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty list"
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages[{i}] must be an object, got {type(message).__name__}"
        role = message.get("role")
        if not isinstance(role, str) or role not in _ROLES:  # a list or an object is not hashable: test the type first
            return f"messages[{i}].role must be one of {sorted(_ROLES)}, got {_short(role)}"
    if messages[-1].get("role") == "assistant":
        # OpenRouter would continue that message; the returned text would then not be the whole turn
        # the ids are rebuilt for.
        return "the last message is an assistant turn; assistant prefill is not supported"
    return None


def _short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def parse_prompts(lines: Iterable[str | bytes], *, secret: str | None = None) -> list[Prompt | BadPrompt]:
    """Every non-blank line, in order, with unique ids. ``secret`` (the API key): lines holding it are refused.

    Two lines with the same explicit id are an error for the whole file (raised, before anything is
    sent): which one a resumed run should treat as done would be ambiguous. Identical id-less prompts
    are numbered instead, because sampling one prompt several times is a normal thing to do.
    """
    instance_argument(lines, "lines", Iterable, "an iterable of lines")
    instance_argument(secret, "secret", str, "a str", none=True)
    out: list[Prompt | BadPrompt] = []
    seen: dict[str, int] = {}
    derived_count: dict[str, int] = {}
    for line_no, text in enumerate(lines, 1):
        instance_argument(text, f"lines[{line_no - 1}]", (str, bytes), "a str or bytes line")
        if not text.strip():
            continue
        item, derived = _parse_record(text, line_no, secret)
        if derived and isinstance(item, Prompt):
            n = derived_count.get(item.id, 0) + 1
            derived_count[item.id] = n
            if n > 1:
                item = Prompt(f"{item.id}#{n}", item.messages, item.tools, item.line)
        if item.id in seen:
            raise InvalidInputError(
                f"prompt id {item.id!r} appears on lines {seen[item.id]} and {line_no}; ids must be unique",
                field="id",
                sample=item.id,
            )
        seen[item.id] = line_no
        out.append(item)
    return out


def read_prompts(path: str | Path, *, secret: str | None = None) -> list[Prompt | BadPrompt]:
    """:func:`parse_prompts` over a file (``-`` for stdin), read as bytes: a line that is not UTF-8 is a bad prompt."""
    path_argument(path, "path")
    return parse_prompts(read_lines(path, "prompts"), secret=secret)
