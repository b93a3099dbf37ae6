"""Render an assistant turn as exactly the text the model generated after its generation prompt.

:func:`render_turn_with_flags` reaches the renderer of the profile's ``format`` through the dispatch by
format (:mod:`kimi_recon._render.formats`): the K2.x one (:func:`render_k2_turn`, in :mod:`kimi_recon._render.k2`, and its
marker texts are importable here as before) or K3's (:mod:`kimi_recon._render.k3`).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from ._render import formats as _formats
from ._render.k2 import ARGUMENT_BEGIN as ARGUMENT_BEGIN  # the K2.x renderer and its marker texts, importable here as before
from ._render.k2 import CALL_BEGIN as CALL_BEGIN
from ._render.k2 import CALL_END as CALL_END
from ._render.k2 import IM_END as IM_END
from ._render.k2 import SECTION_BEGIN as SECTION_BEGIN
from ._render.k2 import SECTION_END as SECTION_END
from ._render.k2 import THINK_BEGIN as THINK_BEGIN
from ._render.k2 import THINK_END as THINK_END
from ._render.k2 import render_k2_turn as render_k2_turn
from ._tool_call_ids import MODEL_TOOL_CALL_ID as MODEL_TOOL_CALL_ID  # the tool-call id format, importable here as before
from ._tool_call_ids import model_tool_call_id as model_tool_call_id
from .errors import InvalidInputError, preview
from .errors import ReasoningDroppedWarning as ReasoningDroppedWarning  # defined with the others; importable here as before
from .flags import FlagCode
from .models import AssistantTurn
from .profiles import ChatProfile, profile_or_model
from .record_options import turn_options
from .responses import as_turn
from .segments import RenderedTurn as RenderedTurn
from .segments import Segment as Segment


def check_stop(profile: ChatProfile, stop: str | None) -> str:
    """``stop``, or the profile's stop token when None; refuses an end the profile does not know."""
    if stop is None:
        return profile.stop_token
    if stop != profile.stop_token and stop not in profile.stop_alternatives:
        known = ", ".join(repr(s) for s in (profile.stop_token, *profile.stop_alternatives))
        raise InvalidInputError(f"{preview(stop)} is not an end of a {profile.name} turn; known: {known}", field="stop")
    return stop


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
        turn = as_turn(turn)
    if profile is None:  # the turn's model id decides (kimi-k2.5 when it names none)
        profile = profile_or_model(None, turn.metadata.get("model"))
    prof, thinking, call_index_offset = turn_options(profile, thinking, call_index_offset)
    stop = prof.stop_token if stop is None else check_stop(prof, stop)
    # (the format's renderer itself, not _formats.render_turn: the turn and the options are checked here)
    return _formats.FORMATS[prof.format].render_turn(turn, prof, thinking, call_index_offset=call_index_offset, stop=stop)


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
