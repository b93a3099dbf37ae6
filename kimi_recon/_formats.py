"""The code of each chat format (``ChatProfile.format``): how a turn is rendered, and whether a prompt is
rendered in Python or by the profile's chat template. A profile reaches its format's code through
:meth:`~kimi_recon.profiles.ChatProfile.render_turn` and :meth:`~kimi_recon.profiles.ChatProfile.prompt_segments`,
so no module branches on a profile's name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ._k3 import render_k3_turn
from ._k3_prompt import k3_prompt_segments
from .models import AssistantTurn
from .profiles import ChatFormat, ChatProfile
from .render import render_k2_turn
from .segments import RenderedTurn, Segment


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
    ) -> list[Segment]: ...


@dataclass(frozen=True)
class FormatCode:
    """The renderers of one chat format; ``render_prompt`` None: the profile's chat template renders prompts."""

    render_turn: TurnRenderer
    render_prompt: PromptRenderer | None


FORMATS: Mapping[ChatFormat, FormatCode] = {
    "k2": FormatCode(render_k2_turn, None),
    "k3": FormatCode(render_k3_turn, k3_prompt_segments),
}
