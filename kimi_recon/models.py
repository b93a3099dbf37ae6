"""Frozen data classes for what an API gives back: an assistant turn and its tool calls.

Data only: every shape a turn arrives in (a message, a chat completion, a choice, an SDK object, a
dataset record) is read by one parser, :func:`kimi_recon.responses.turn_from_response`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._base.reprs import text_repr
from .errors import InvalidInputError, InvalidInputTypeError, InvalidTurnError, preview
from .flags import Flag, FlagCode

__all__ = ["FINISH_REASONS", "AssistantTurn", "Flag", "FlagCode", "ToolCall", "tojson"]

#: finish reasons an OpenAI-compatible server reports. ``length`` means the turn was cut off.
FINISH_REASONS = frozenset({"stop", "length", "tool_calls", "content_filter", "function_call", "eos", "error"})


def tojson(value: Any) -> str:
    """Serialise ``value`` exactly as Hugging Face's chat-template ``tojson`` filter does by default; a value
    JSON cannot write (a set, an object, a cycle) is an :class:`~kimi_recon.errors.InvalidInputTypeError`."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError:
        raise InvalidTurnError("is nested too deeply to write as JSON", field="arguments") from None
    except (TypeError, ValueError) as err:
        raise InvalidInputTypeError(f"must hold only JSON values: {err}", field="arguments") from None


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
            raise InvalidTurnError(f"must be a non-empty string, got {preview(self.name)}", field="tool_calls[].function.name")
        if not isinstance(self.arguments, (str, Mapping)):
            raise InvalidTurnError(
                f"must be a JSON string or a mapping, got {type(self.arguments).__name__}",
                field="tool_calls[].function.arguments",
            )
        if not isinstance(self.arguments, str):
            try:  # what the template's tojson writes must exist: a set or an object has no JSON
                tojson(dict(self.arguments))
            except InvalidInputError as err:
                raise type(err)(err.message, field="tool_calls[].function.arguments") from None

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
        except (ValueError, RecursionError):  # too deep for Python to read counts as unreadable
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
        if self.finish_reason is not None and (not isinstance(self.finish_reason, str) or self.finish_reason not in FINISH_REASONS):
            raise InvalidTurnError(
                f"unknown finish_reason {preview(self.finish_reason)}; expected one of {sorted(FINISH_REASONS)} or None",
                field="finish_reason",
            )
        if self.logprobs is not None and not isinstance(self.logprobs, tuple):
            if isinstance(self.logprobs, Sequence) and not isinstance(self.logprobs, (str, bytes)):
                object.__setattr__(self, "logprobs", tuple(self.logprobs))
            else:
                raise InvalidTurnError("must be a list of logprob entries or None", field="logprobs")

    def __repr__(self) -> str:  # long reasoning and logprobs: their start and lengths only
        logprobs = None if self.logprobs is None else f"<{len(self.logprobs)} entries>"
        return (
            f"AssistantTurn(reasoning={text_repr(self.reasoning)}, content={text_repr(self.content)}, "
            f"tool_calls={self.tool_calls!r}, finish_reason={self.finish_reason!r}, "
            f"reasoning_complete={self.reasoning_complete}, logprobs={logprobs})"
        )

    @property
    def truncated(self) -> bool:
        """True when the server stopped the turn at its length limit (no ``<|im_end|>`` was generated)."""
        return self.finish_reason == "length"


def _call_of_proven_fields(call_id: str | None, name: str, arguments: str) -> ToolCall:
    """The :class:`ToolCall` of these fields without ``__post_init__``'s checks, for a reader that proved them:
    ``call_id`` a ``str`` or None, ``name`` a non-empty ``str``, ``arguments`` a ``str`` (a mapping must pass the
    public constructor, which checks JSON can write it)."""
    call = object.__new__(ToolCall)
    call.__dict__.update(id=call_id, name=name, arguments=arguments)
    return call


def _turn_of_proven_fields(
    reasoning: str | None, content: str | None, tool_calls: tuple[ToolCall, ...], finish_reason: str | None, metadata: dict[str, Any]
) -> AssistantTurn:
    """The :class:`AssistantTurn` of these fields, without ``__post_init__``'s checks (a fifth of a stored
    message's reading): only for a reader that proved them itself, each text a ``str`` or None, ``tool_calls`` a
    tuple of :class:`ToolCall`, ``finish_reason`` None or one of :data:`FINISH_REASONS`; the reasoning complete
    and no logprobs. ``tests/test_fast_paths.py`` rebuilds every turn the fast reader makes with the public
    constructor and compares the two."""
    turn = object.__new__(AssistantTurn)
    turn.__dict__.update(
        reasoning=reasoning, content=content, tool_calls=tool_calls, finish_reason=finish_reason, reasoning_complete=True, logprobs=None, metadata=metadata
    )
    return turn
