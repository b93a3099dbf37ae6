"""The dispatch by chat format (``ChatProfile.format``): how a turn is rendered, and whether a prompt is
rendered in Python or by the profile's chat template. Callers reach a profile's code through
:func:`render_turn` and :func:`prompt_segments`, so no module branches on a profile's name. This module sits
above the renderers (:mod:`kimi_recon._render.k2`, :mod:`kimi_recon._render.k3`, :mod:`kimi_recon._render.k3_prompt`); a profile is
data below them and imports none."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .._base.arguments import instance_argument
from ..models import AssistantTurn
from ..profiles import ChatFormat, ChatProfile
from ..segments import RenderedTurn, Segment
from .k2 import _render_k2_turn
from .k3 import render_k3_turn
from .k3_prompt import k3_prompt_segments


class TurnRenderer(Protocol):
    def __call__(self, turn: AssistantTurn, profile: ChatProfile, thinking: bool, /, *, call_index_offset: int, stop: str) -> RenderedTurn: ...


class PromptRenderer(Protocol):
    def __call__(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        *,
        thinking: bool,
        thinking_effort: str | None,
        tool_choice: Any,
        response_format: Any = None,
    ) -> list[Segment]: ...


@dataclass(frozen=True)
class FormatCode:
    """The renderers of one chat format; ``render_prompt`` None: the profile's chat template renders prompts."""

    render_turn: TurnRenderer
    render_prompt: PromptRenderer | None


FORMATS: Mapping[ChatFormat, FormatCode] = {
    "k2": FormatCode(_render_k2_turn, None),  # (render_k2_turn less its argument checks: render_turn's callers made them)
    "k3": FormatCode(render_k3_turn, k3_prompt_segments),
}


def render_turn(profile: ChatProfile, turn: AssistantTurn, thinking: bool, *, call_index_offset: int, stop: str) -> RenderedTurn:
    """``turn`` as ``profile``'s format renders it (options already checked; see
    :func:`kimi_recon.render.render_turn_with_flags`, which checks the turn too and calls :data:`FORMATS`' renderer
    itself)."""
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn (see as_turn)")
    return FORMATS[profile.format].render_turn(turn, profile, thinking, call_index_offset=call_index_offset, stop=stop)


def prompt_segments(
    profile: ChatProfile,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    thinking: bool,
    *,
    thinking_effort: str | None = None,
    tool_choice: Any = None,
    response_format: Any = None,
) -> list[Segment] | None:
    """The prompt's segments when ``profile``'s format renders prompts in Python (K3); None when its chat
    template does (K2.x, whose templates write no ``response_format``)."""
    render = FORMATS[profile.format].render_prompt
    if render is None:
        return None
    return render(messages, tools, thinking=thinking, thinking_effort=thinking_effort, tool_choice=tool_choice, response_format=response_format)
