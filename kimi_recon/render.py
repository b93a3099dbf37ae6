"""Render an assistant turn as exactly the text the model generated after its generation prompt."""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .models import AssistantTurn, Flag
from .profiles import ChatProfile
from .record_options import parse_options
from .special_tokens import SPECIAL_TOKENS, special_texts_in

THINK_BEGIN = "<think>"
THINK_END = "</think>"
IM_END = "<|im_end|>"
SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"

#: The id format the model writes for its own tool calls.
MODEL_TOOL_CALL_ID = re.compile(r"functions\.(?P<name>.+):(?P<index>\d+)")

_KNOWN_SPECIAL_TEXTS = frozenset(SPECIAL_TOKENS.texts())


class ReasoningDroppedWarning(UserWarning):
    """The turn had reasoning that this profile or ``thinking=False`` does not render."""


@dataclass(frozen=True)
class Segment:
    """A piece of the rendered turn: template ``marker`` text, or the text of a turn ``field``."""

    text: str
    field: str | None = None

    @property
    def is_marker(self) -> bool:
        return self.field is None


@dataclass(frozen=True)
class RenderedTurn:
    """The rendered text, the pieces it was built from, and what rendering noticed.

    ``special_texts`` holds every special-token-shaped text in the turn: the markers rendering wrote
    and whatever the fields contain, so the encode can allow exactly those.
    """

    segments: tuple[Segment, ...]
    flags: tuple[Flag, ...]
    special_texts: frozenset[str] = frozenset()

    @functools.cached_property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    def has_flag(self, code: str) -> bool:
        return any(f.code == code for f in self.flags)


def model_tool_call_id(name: str, index: int) -> str:
    """The id the model writes for its ``index``-th tool call of the conversation."""
    return f"functions.{name}:{index}"


def render_turn(
    turn: AssistantTurn | Mapping[str, Any] | Any,
    profile: str | ChatProfile = "kimi-k2.5",
    thinking: bool = True,
    *,
    call_index_offset: int = 0,
) -> RenderedTurn:
    """Render ``turn`` for ``profile`` and say what was noticed (see :func:`render_assistant_turn`)."""
    if not isinstance(turn, AssistantTurn):
        from .responses import as_turn  # responses builds on this module's tool-call id format

        turn = as_turn(turn)
    options = parse_options(profile=profile, thinking=thinking, call_index_offset=call_index_offset)
    prof, thinking, call_index_offset = options.profile, options.thinking, options.call_index_offset or 0
    flags: list[Flag] = []
    segments: list[Segment] = []
    reasoning = turn.reasoning or ""
    renders_reasoning = thinking and prof.thinking_style != "none"
    # A cut-off turn with no content and no tool calls stopped inside its reasoning.
    in_reasoning = renders_reasoning and turn.truncated and not turn.content and not turn.tool_calls and bool(reasoning)
    if prof.thinking_style == "model_opens":
        segments.append(Segment(THINK_BEGIN))
    if renders_reasoning:
        segments.append(Segment(reasoning, "reasoning"))
    if (renders_reasoning or prof.thinking_style == "model_opens") and not in_reasoning:
        segments.append(Segment(THINK_END))
    if reasoning and not renders_reasoning:
        why = "thinking=False" if prof.thinking_style != "none" else f"profile {prof.name} has no thinking"
        flags.append(Flag("reasoning_dropped", f"the turn has {len(reasoning)} characters of reasoning, not rendered ({why})", "reasoning"))
    if not turn.reasoning_complete:
        flags.append(Flag("reasoning_incomplete", "the server returned only a summary or encrypted reasoning; the raw reasoning tokens cannot be rebuilt", "reasoning"))

    if turn.content:
        segments.append(Segment(turn.content, "content"))
    if turn.tool_calls:
        segments.append(Segment(SECTION_BEGIN))
        for i, call in enumerate(turn.tool_calls):
            where = f"tool_calls[{i}]"
            call_id = call.id
            if call_id is None:
                call_id = model_tool_call_id(call.name, call_index_offset + i)
                flags.append(Flag("generated_tool_call_id", f"no id given; wrote the model's own {call_id!r}", f"{where}.id"))
            elif not MODEL_TOOL_CALL_ID.fullmatch(call_id):
                flags.append(Flag("foreign_tool_call_id", f"id {call_id!r} is not in the model's functions.NAME:IDX format; a server probably issued it", f"{where}.id"))
            if not call.arguments_are_json:
                flags.append(Flag("arguments_not_json", "arguments are not valid JSON; rendered verbatim", f"{where}.function.arguments"))
            segments += [
                Segment(CALL_BEGIN),
                Segment(call_id, f"{where}.id"),
                Segment(ARGUMENT_BEGIN),
                Segment(call.arguments_text, f"{where}.function.arguments"),
                Segment(CALL_END),
            ]
        segments.append(Segment(SECTION_END))
    if turn.truncated:
        where = "reasoning" if in_reasoning else "output"
        flags.append(Flag("truncated", f"finish_reason is 'length': cut off inside the {where}; no <|im_end|> rendered", "finish_reason"))
        if turn.tool_calls:
            flags.append(Flag("truncated_tool_calls", "a turn cut off with tool calls: where the cut fell inside the tool-call section is unknown", "tool_calls"))
    else:
        segments.append(Segment(IM_END))

    specials = {seg.text for seg in segments if seg.is_marker}
    for seg in segments:
        if seg.field is not None:
            shaped = special_texts_in(seg.text)
            specials.update(shaped)
            found = sorted({t for t in shaped if t in _KNOWN_SPECIAL_TEXTS})
            if found:
                flags.append(Flag("special_text_in_field", f"contains special-token text {found}; one encode makes it special ids", seg.field))
    return RenderedTurn(tuple(s for s in segments if s.text), tuple(flags), frozenset(specials))


def render_assistant_turn(
    turn: AssistantTurn | Mapping[str, Any] | Any,
    profile: str | ChatProfile = "kimi-k2.5",
    thinking: bool = True,
    *,
    call_index_offset: int = 0,
) -> str:
    """The text the model generated after its generation prompt, special-token text included.

    For ``kimi-k2.5``: ``reasoning</think>content<|tool_calls_section_begin|>...<|tool_calls_section_end|><|im_end|>``.
    A turn cut off by the length limit has no ``<|im_end|>``; one cut off inside its reasoning (no content,
    no tool calls) has no ``</think>`` either. Tool calls without an id get the model's own
    ``functions.NAME:IDX``, counting from ``call_index_offset`` (the number of tool calls earlier in the
    conversation). Reasoning that is not rendered raises a :class:`ReasoningDroppedWarning`.
    """
    rendered = render_turn(turn, profile, thinking, call_index_offset=call_index_offset)
    for flag in rendered.flags:
        if flag.code == "reasoning_dropped":
            warnings.warn(flag.message, ReasoningDroppedWarning, stacklevel=2)
    return rendered.text
