"""Render an assistant turn as exactly the text the model generated after its generation prompt.

The K2.x formats are rendered here (:func:`render_k2_turn`); a profile of another format (``kimi-k3``) is
rendered by its own module. :func:`render_turn_with_flags` reaches the right one through the profile
(``ChatProfile.render_turn``, by its ``format``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
from typing import Any

from ._arguments import instance_argument
from .errors import InvalidInputError, InvalidInputTypeError, preview
from .errors import ReasoningDroppedWarning as ReasoningDroppedWarning  # defined with the others; importable here as before
from .flags import Flag, FlagCode
from .models import AssistantTurn
from .profiles import ChatProfile, profile_or_model
from .record_options import turn_options
from .segments import RenderedTurn as RenderedTurn
from .segments import Segment as Segment
from .segments import marker
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


def check_stop(profile: ChatProfile, stop: str | None) -> str:
    """``stop``, or the profile's stop token when None; refuses an end the profile does not know."""
    if stop is None:
        return profile.stop_token
    if stop != profile.stop_token and stop not in profile.stop_alternatives:
        known = ", ".join(repr(s) for s in (profile.stop_token, *profile.stop_alternatives))
        raise InvalidInputError(f"{preview(stop)} is not an end of a {profile.name} turn; known: {known}", field="stop")
    return stop


def model_tool_call_id(name: str, index: int) -> str:
    """The id the model writes for its ``index``-th tool call of the conversation."""
    if not isinstance(name, str) or isinstance(index, bool) or not isinstance(index, int):
        raise InvalidInputTypeError(f"needs a string name and an int index, got {type(name).__name__} and {type(index).__name__}", field="tool_calls[].id")
    return f"functions.{name}:{index}"


def render_turn_with_flags(
    turn: AssistantTurn | Mapping[str, Any] | Any,
    profile: str | ChatProfile | None = None,
    thinking: bool = True,
    *,
    call_index_offset: int = 0,
    stop: str | None = None,
) -> RenderedTurn:
    """Render ``turn`` for ``profile`` and say what was noticed (see :func:`render_assistant_turn`).

    ``stop`` is the end of a finished turn: the profile's ``stop_token`` by default, or one of its
    ``stop_alternatives`` (what some deployments are reported to stop on)."""
    if not isinstance(turn, AssistantTurn):
        from .responses import as_turn  # responses builds on this module's tool-call id format

        turn = as_turn(turn)
    if profile is None:  # the turn's model id decides (kimi-k2.5 when it names none)
        profile = profile_or_model(None, turn.metadata.get("model"))
    prof, thinking, call_index_offset = turn_options(profile, thinking, call_index_offset)
    stop = check_stop(prof, stop)
    return prof.render_turn(turn, thinking, call_index_offset=call_index_offset, stop=stop)


def render_k2_turn(turn: AssistantTurn, prof: ChatProfile, thinking: bool, *, call_index_offset: int, stop: str) -> RenderedTurn:
    """The segments of what a K2.x model wrote after its generation prompt, and what was noticed (options
    already checked by :func:`render_turn_with_flags`)."""
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn (see as_turn)")
    instance_argument(prof, "prof", ChatProfile, "a ChatProfile (see get_profile)")
    flags: list[Flag] = []
    noted: list[Flag] = []  # special-token text in fields: flagged after the others, in segment order
    segments: list[Segment] = []
    shaped = False  # whether a field holds special-token-shaped text
    reasoning = turn.reasoning or ""
    renders_reasoning = thinking and prof.thinking_style != "none"
    # A cut-off turn with no content and no tool calls stopped inside its reasoning.
    in_reasoning = renders_reasoning and turn.truncated and not turn.content and not turn.tool_calls and bool(reasoning)
    if prof.thinking_style == "model_opens":
        segments.append(_THINK_BEGIN)
    if renders_reasoning:
        shaped = _add_field(segments, reasoning, "reasoning", noted)
    if (renders_reasoning or prof.thinking_style == "model_opens") and not in_reasoning:
        segments.append(_THINK_END)
    if reasoning and not renders_reasoning:
        why = "thinking=False" if prof.thinking_style != "none" else f"profile {prof.name} has no thinking"
        flags.append(Flag(FlagCode.REASONING_DROPPED, f"the turn has {len(reasoning)} characters of reasoning, not rendered ({why})", "reasoning"))
    if not turn.reasoning_complete:
        flags.append(Flag(FlagCode.REASONING_INCOMPLETE, "the server returned only a summary or encrypted reasoning; the raw reasoning tokens cannot be rebuilt", "reasoning"))

    if turn.content:
        shaped = _add_field(segments, turn.content, "content", noted) or shaped
    if turn.tool_calls:
        segments.append(_SECTION_BEGIN)
        for i, call in enumerate(turn.tool_calls):
            where = f"tool_calls[{i}]"
            call_id = call.id
            if call_id is None:
                call_id = model_tool_call_id(call.name, call_index_offset + i)
                flags.append(Flag(FlagCode.GENERATED_TOOL_CALL_ID, f"no id given; wrote the model's own {call_id!r}", f"{where}.id"))
            elif not MODEL_TOOL_CALL_ID.fullmatch(call_id) and turn.metadata.get("keep_server_call_ids"):
                flags.append(Flag(FlagCode.FOREIGN_TOOL_CALL_ID, f"id {call_id!r} is not in the model's functions.NAME:IDX format; a server issued it, and it was kept as asked", f"{where}.id"))
            elif not MODEL_TOOL_CALL_ID.fullmatch(call_id):
                # A server issued it (call_…, chatcmpl-tool-…): the K2.x model always writes functions.NAME:IDX,
                # so that is written, at the conversation-wide index it writes when it follows its template.
                written = model_tool_call_id(call.name, call_index_offset + i)
                flags.append(
                    Flag(
                        FlagCode.REPLACED_TOOL_CALL_ID,
                        f"id {call_id!r} was issued by a server, not written by the model; wrote the model's own "
                        f"{written!r} (the index {call_index_offset + i} is assumed: calls before this turn + position)",
                        f"{where}.id",
                    )
                )
                call_id = written
            if not call.arguments_are_json:
                flags.append(Flag(FlagCode.ARGUMENTS_NOT_JSON, "arguments are not valid JSON; rendered verbatim", f"{where}.function.arguments"))
            segments.append(_CALL_BEGIN)
            shaped = _add_field(segments, call_id, f"{where}.id", noted) or shaped
            segments.append(_ARGUMENT_BEGIN)
            shaped = _add_field(segments, call.arguments_text, f"{where}.function.arguments", noted) or shaped
            segments.append(_CALL_END)
        segments.append(_SECTION_END)
    if turn.truncated:
        where = "reasoning" if in_reasoning else "output"
        flags.append(Flag(FlagCode.TRUNCATED, f"finish_reason is 'length': cut off inside the {where}; no <|im_end|> rendered", "finish_reason"))
        if turn.tool_calls:
            flags.append(Flag(FlagCode.TRUNCATED_TOOL_CALLS, "a turn cut off with tool calls: where the cut fell inside the tool-call section is unknown", "tool_calls"))
    else:
        segments.append(marker(stop))
    return RenderedTurn(tuple(segments), tuple(flags + noted), fields_plain=not shaped)


_THINK_BEGIN, _THINK_END = marker(THINK_BEGIN), marker(THINK_END)
_SECTION_BEGIN, _SECTION_END = marker(SECTION_BEGIN), marker(SECTION_END)
_CALL_BEGIN, _ARGUMENT_BEGIN, _CALL_END = marker(CALL_BEGIN), marker(ARGUMENT_BEGIN), marker(CALL_END)


def _add_field(segments: list[Segment], text: str, field: str, noted: list[Flag]) -> bool:
    """Append a field's text (nothing for empty text), and a flag to ``noted`` when it holds special-token
    text; True when it holds special-token-shaped text (a known token or not)."""
    if not text:
        return False
    segments.append(Segment(text, field))
    if "<" in text or "[" in text:
        shaped = special_texts_in(text)
        found = sorted({t for t in shaped if t in _KNOWN_SPECIAL_TEXTS})
        if found:
            noted.append(Flag(FlagCode.SPECIAL_TEXT_IN_FIELD, f"contains special-token text {found}; one encode makes it special ids", field))
        return bool(shaped)
    return False


def render_assistant_turn(
    turn: AssistantTurn | Mapping[str, Any] | Any,
    profile: str | ChatProfile | None = None,
    thinking: bool = True,
    *,
    call_index_offset: int = 0,
    stop: str | None = None,
) -> str:
    """The text the model generated after its generation prompt, special-token text included.

    For ``kimi-k2.5``: ``reasoning</think>content<|tool_calls_section_begin|>...<|tool_calls_section_end|><|im_end|>``.
    A turn cut off by the length limit has no ``<|im_end|>``; one cut off inside its reasoning (no content,
    no tool calls) has no ``</think>`` either. Tool calls without an id get the model's own
    ``functions.NAME:IDX``, counting from ``call_index_offset`` (the number of tool calls earlier in the
    conversation). Reasoning that is not rendered raises a :class:`ReasoningDroppedWarning`.
    """
    rendered = render_turn_with_flags(turn, profile, thinking, call_index_offset=call_index_offset, stop=stop)
    for flag in rendered.flags:
        if flag.code == FlagCode.REASONING_DROPPED:
            warnings.warn(flag.message, ReasoningDroppedWarning, stacklevel=2)
    return rendered.text


#: The name before issue 12 (it did not say how it differs from render_assistant_turn); kept for old code.
render_turn = render_turn_with_flags
