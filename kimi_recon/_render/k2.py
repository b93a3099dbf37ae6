"""The K2.x turn renderer (``ChatProfile.format == "k2"``): what a K2.x model wrote after its generation
prompt, as segments. The dispatch by format (:mod:`kimi_recon._render.formats`) reaches it; :mod:`kimi_recon.render`
re-exports it and the marker texts."""

from __future__ import annotations

from .._base.arguments import instance_argument
from .._tool_call_ids import MODEL_NUMBERING_SEEN_TEXT, MODEL_TOOL_CALL_ID, model_tool_call_id
from ..flags import Flag, FlagCode
from ..models import AssistantTurn
from ..profiles import ChatProfile
from ..segments import RenderedTurn, Segment, marker, rendered_turn
from ..special_tokens import SPECIAL_TOKENS, SpecialTokenRegistry, special_texts_in

THINK_BEGIN = "<think>"
THINK_END = "</think>"
IM_END = "<|im_end|>"
SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"

_KNOWN_SPECIAL_TEXTS = frozenset(SPECIAL_TOKENS.texts())
#: K3's tag texts that K2.5's table does not know (``<|open|>``, ``<|close|>``, ``<|sep|>``, ``<|end_of_msg|>``):
#: in a K2.x field they are ordinary text, and the likelier story is a K3 turn read as K2.x.
_K3_ONLY_TEXTS = frozenset(t.text for t in SpecialTokenRegistry.kimi_k3().named()) - _KNOWN_SPECIAL_TEXTS


def render_k2_turn(turn: AssistantTurn, prof: ChatProfile, thinking: bool, *, call_index_offset: int, stop: str) -> RenderedTurn:
    """The segments of what a K2.x model wrote after its generation prompt, and what was noticed (options
    already checked by :func:`kimi_recon.render.render_turn_with_flags`)."""
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn (see as_turn)")
    instance_argument(prof, "prof", ChatProfile, "a ChatProfile (see get_profile)")
    return _render_k2_turn(turn, prof, thinking, call_index_offset=call_index_offset, stop=stop)


def _render_k2_turn(turn: AssistantTurn, prof: ChatProfile, thinking: bool, *, call_index_offset: int, stop: str) -> RenderedTurn:
    """:func:`render_k2_turn` of a turn and profile known to be ones (the dispatch by format's renderer: its
    caller checked them)."""
    flags: list[Flag] = []
    noted: list[Flag] = []  # special-token text in fields: flagged after the others, in segment order
    segments: list[Segment] = []
    shaped = False  # whether a field holds special-token-shaped text
    reasoning = turn.reasoning or ""
    content, calls, truncated = turn.content, turn.tool_calls, turn.truncated
    style = prof.thinking_style
    renders_reasoning = thinking and style != "none"
    # A cut-off turn with no content and no tool calls stopped inside its reasoning.
    in_reasoning = renders_reasoning and truncated and not content and not calls and bool(reasoning)
    if style == "model_opens":
        segments.append(_THINK_BEGIN)
    if renders_reasoning:
        shaped = _add_field(segments, reasoning, "reasoning", noted)
    if (renders_reasoning or style == "model_opens") and not in_reasoning:
        segments.append(_THINK_END)
    if reasoning and not renders_reasoning:
        why = "thinking=False" if style != "none" else f"profile {prof.name} has no thinking"
        flags.append(Flag(FlagCode.REASONING_DROPPED, f"the turn has {len(reasoning)} characters of reasoning, not rendered ({why})", "reasoning"))
    if not turn.reasoning_complete:
        flags.append(Flag(FlagCode.REASONING_INCOMPLETE, "the server returned only a summary or encrypted reasoning; the raw reasoning tokens cannot be rebuilt", "reasoning"))

    if content:
        shaped = _add_field(segments, content, "content", noted) or shaped
    if calls:
        segments.append(_SECTION_BEGIN)
        for i, call in enumerate(calls):
            where = f"tool_calls[{i}]"
            call_id = call.id
            if call_id is None:
                call_id = model_tool_call_id(call.name, call_index_offset + i)
                flags.append(Flag(FlagCode.GENERATED_TOOL_CALL_ID, f"no id given; wrote the model's own {call_id!r}", f"{where}.id"))
            elif MODEL_TOOL_CALL_ID.fullmatch(call_id) is None:  # (matched once: the model's own ids, most, pass at once)
                if turn.metadata.get("keep_server_call_ids"):
                    flags.append(Flag(FlagCode.FOREIGN_TOOL_CALL_ID, f"id {call_id!r} is not in the model's functions.NAME:IDX format; a server issued it, and it was kept as asked", f"{where}.id"))
                else:
                    # A server issued it (call_…, chatcmpl-tool-…): the K2.x model always writes functions.NAME:IDX,
                    # so that is written, at the conversation-wide index it writes when it follows its template.
                    written = model_tool_call_id(call.name, call_index_offset + i)
                    flags.append(
                        Flag(
                            FlagCode.REPLACED_TOOL_CALL_ID,
                            f"id {call_id!r} was issued by a server, not written by the model; wrote the model's own "
                            f"{written!r} at the index its template gives ({call_index_offset} calls before this turn + "
                            f"position {i}); the model numbers otherwise rarely",
                            f"{where}.id",
                            seen=MODEL_NUMBERING_SEEN_TEXT,
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
    if truncated:
        where = "reasoning" if in_reasoning else "output"
        flags.append(Flag(FlagCode.TRUNCATED, f"finish_reason is 'length': cut off inside the {where}; no <|im_end|> rendered", "finish_reason"))
        if calls:
            flags.append(Flag(FlagCode.TRUNCATED_TOOL_CALLS, "a turn cut off with tool calls: where the cut fell inside the tool-call section is unknown", "tool_calls"))
    else:
        segments.append(_STOPS.get(stop) or marker(stop))
    if noted:
        flags += noted
    return rendered_turn(tuple(segments), tuple(flags), fields_plain=not shaped)


_THINK_BEGIN, _THINK_END = marker(THINK_BEGIN), marker(THINK_END)
_SECTION_BEGIN, _SECTION_END = marker(SECTION_BEGIN), marker(SECTION_END)
_CALL_BEGIN, _ARGUMENT_BEGIN, _CALL_END = marker(CALL_BEGIN), marker(ARGUMENT_BEGIN), marker(CALL_END)
#: The ends of a finished turn the K2.x profiles know, built once (a Segment is immutable, so turns share them).
_STOPS = {text: marker(text) for text in (IM_END, "[EOS]")}


def _add_field(segments: list[Segment], text: str, field: str, noted: list[Flag]) -> bool:
    """Append a field's text (nothing for empty text), and a flag to ``noted`` when it holds special-token
    text; True when it holds special-token-shaped text (a known token or not)."""
    if not text:
        return False
    segments.append(tuple.__new__(Segment, (text, field, False)))  # (Segment(text, field) less its __new__'s frame: half the time)
    if "<" in text or "[" in text:
        shaped = special_texts_in(text)
        found = sorted({t for t in shaped if t in _KNOWN_SPECIAL_TEXTS})
        if found:
            noted.append(Flag(FlagCode.SPECIAL_TEXT_IN_FIELD, f"contains special-token text {found}; one encode makes it special ids", field))
        k3_tags = sorted({t for t in shaped if t in _K3_ONLY_TEXTS})
        if k3_tags:
            noted.append(
                Flag(
                    FlagCode.PROFILE_MISMATCH,
                    f"{field} holds K3 tag text {k3_tags}, ordinary text in the K2.x format: the model likely wrote the "
                    "kimi-k3 format; use --profile kimi-k3",
                    field,
                )
            )
        return bool(shaped)
    return False
