"""Frozen data classes for what an API gives back: an assistant turn and its tool calls."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidTurnError

#: finish reasons an OpenAI-compatible server reports. ``length`` means the turn was cut off.
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call", "eos", "error"})


def tojson(value: Any) -> str:
    """Serialise ``value`` exactly as Hugging Face's chat-template ``tojson`` filter does by default."""
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True)
class ToolCall:
    """One tool call. ``arguments`` is the JSON text as the model produced it, or a mapping.

    A mapping is serialised the way the chat template's ``tojson`` does (``json.dumps`` with
    ``ensure_ascii=False`` and default separators), which is what the official template renders.
    ``id`` None means the server gave no id; rendering then writes the model's own ``functions.NAME:IDX``.
    """

    id: str | None
    name: str
    arguments: str | Mapping[str, Any]

    def __post_init__(self) -> None:
        if self.id is not None and not isinstance(self.id, str):
            raise InvalidTurnError(f"must be a string or None, got {type(self.id).__name__}", field="tool_calls[].id")
        if not isinstance(self.name, str) or not self.name:
            raise InvalidTurnError(f"must be a non-empty string, got {self.name!r}", field="tool_calls[].function.name")
        if not isinstance(self.arguments, (str, Mapping)):
            raise InvalidTurnError(
                f"must be a JSON string or a mapping, got {type(self.arguments).__name__}",
                field="tool_calls[].function.arguments",
            )

    @property
    def arguments_text(self) -> str:
        """The arguments as they appear in the rendered turn."""
        if isinstance(self.arguments, str):
            return self.arguments
        return tojson(dict(self.arguments))

    @property
    def arguments_are_json(self) -> bool:
        """False when string arguments do not parse as JSON (they are still rendered verbatim)."""
        if not isinstance(self.arguments, str):
            return True
        try:
            json.loads(self.arguments)
        except ValueError:
            return False
        return True


@dataclass(frozen=True)
class AssistantTurn:
    """What an API returned for one assistant turn.

    ``reasoning`` None means the server returned no reasoning; ``reasoning_complete`` False means it
    returned only a summary or an encrypted blob, so the raw reasoning tokens cannot be rebuilt.
    ``logprobs`` is the OpenAI ``logprobs.content`` list when the server returned one.
    """

    reasoning: str | None = None
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = "stop"
    reasoning_complete: bool = True
    logprobs: tuple[Mapping[str, Any], ...] | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in ("reasoning", "content"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidTurnError(f"must be a string or None, got {type(value).__name__}", field=name)
        if isinstance(self.tool_calls, list):
            object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if not isinstance(self.tool_calls, tuple) or not all(isinstance(c, ToolCall) for c in self.tool_calls):
            raise InvalidTurnError("must be a sequence of ToolCall", field="tool_calls")
        if self.finish_reason is not None and self.finish_reason not in FINISH_REASONS:
            raise InvalidTurnError(
                f"unknown finish_reason {self.finish_reason!r}; expected one of {sorted(FINISH_REASONS)} or None",
                field="finish_reason",
            )
        if self.logprobs is not None and not isinstance(self.logprobs, tuple):
            if isinstance(self.logprobs, Sequence) and not isinstance(self.logprobs, (str, bytes)):
                object.__setattr__(self, "logprobs", tuple(self.logprobs))
            else:
                raise InvalidTurnError("must be a list of logprob entries or None", field="logprobs")

    @property
    def truncated(self) -> bool:
        """True when the server stopped the turn at its length limit (no ``<|im_end|>`` was generated)."""
        return self.finish_reason == "length"

    @classmethod
    def from_message(
        cls, message: Mapping[str, Any], *, finish_reason: str | None = "stop", sample: object = None
    ) -> AssistantTurn:
        """Build a turn from an OpenAI-format assistant message dict.

        Reads ``content`` (string, list of text parts, or null), ``reasoning_content`` or ``reasoning``,
        and ``tool_calls`` (``id``, ``function.name``, ``function.arguments``). A message may carry its own
        ``finish_reason`` (as some dumps do); it wins over the argument.
        """
        try:
            return _turn_from_message(cls, message, finish_reason)
        except InvalidTurnError as err:
            raise err.with_sample(sample) from None


def content_text(content: Any, field_name: str = "content") -> str | None:
    """The text of an OpenAI ``content`` value: a string, a list of text parts, or None.

    Non-text parts (images, audio) cannot appear in generated text, so they are an error, not skipped.
    """
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        raise InvalidTurnError(f"must be a string, a list of parts or null, got {type(content).__name__}", field=field_name)
    pieces = []
    for i, part in enumerate(content):
        where = f"{field_name}[{i}]"
        if isinstance(part, str):
            pieces.append(part)
            continue
        if not isinstance(part, Mapping):
            raise InvalidTurnError(f"must be a content part object, got {type(part).__name__}", field=where)
        kind = part.get("type", "text")
        if kind not in ("text", "output_text"):
            raise InvalidTurnError(f"has type {kind!r}; an assistant turn can only hold text parts", field=where)
        text = part.get("text")
        if not isinstance(text, str):
            raise InvalidTurnError(f"text part has no string 'text', got {type(text).__name__}", field=where)
        pieces.append(text)
    return "".join(pieces)


def _turn_from_message(cls: type[AssistantTurn], message: Mapping[str, Any], finish_reason: str | None) -> AssistantTurn:
    if not isinstance(message, Mapping):
        raise InvalidTurnError(f"must be a message object, got {type(message).__name__}", field="message")
    role = message.get("role", "assistant")
    if role != "assistant":
        raise InvalidTurnError(f"must be 'assistant', got {role!r}", field="role")
    content = content_text(message.get("content"))
    reasoning = message.get("reasoning_content")
    reasoning_field = "reasoning_content"
    if reasoning is None:
        reasoning, reasoning_field = message.get("reasoning"), "reasoning"
    if reasoning is not None and not isinstance(reasoning, str):
        raise InvalidTurnError(f"must be a string or null, got {type(reasoning).__name__}", field=reasoning_field)
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, Sequence) or isinstance(raw_calls, (str, bytes)):
        raise InvalidTurnError(f"must be a list, got {type(raw_calls).__name__}", field="tool_calls")
    calls = tuple(tool_call_from_dict(raw, i) for i, raw in enumerate(raw_calls))
    return cls(
        reasoning=reasoning,
        content=content,
        tool_calls=calls,
        finish_reason=message.get("finish_reason", finish_reason),
    )


def tool_call_from_dict(raw: Any, index: int) -> ToolCall:
    """A :class:`ToolCall` from an OpenAI ``tool_calls[index]`` entry, naming the field on error."""
    where = f"tool_calls[{index}]"
    if not isinstance(raw, Mapping):
        raise InvalidTurnError(f"must be an object, got {type(raw).__name__}", field=where)
    function = raw.get("function")
    if not isinstance(function, Mapping):
        raise InvalidTurnError("has no 'function' object", field=f"{where}.function")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidTurnError(f"must be a non-empty string, got {name!r}", field=f"{where}.function.name")
    arguments = function.get("arguments", "")
    if arguments is None:
        arguments = ""
    if not isinstance(arguments, (str, Mapping)):
        raise InvalidTurnError(
            f"must be a JSON string or an object, got {type(arguments).__name__}", field=f"{where}.function.arguments"
        )
    call_id = raw.get("id")
    if call_id is not None and not isinstance(call_id, str):
        raise InvalidTurnError(f"must be a string, got {type(call_id).__name__}", field=f"{where}.id")
    return ToolCall(id=call_id or None, name=name, arguments=arguments)


@dataclass(frozen=True)
class Flag:
    """Something reconstruction noticed that a user should see: why the IDs may not be what the model emitted.

    ``code`` is stable and machine-readable (e.g. ``reasoning_dropped``, ``special_text_in_field``);
    ``field`` names the turn field concerned, when there is one.
    """

    code: str
    message: str
    field: str | None = None
