"""Chat-format profiles: where generation starts for each Kimi model family."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from .errors import InvalidInputError

#: How a profile handles thinking: the generation prompt opens ``<think>`` (K2.5, K2.6), the model
#: writes ``<think>`` itself (K2-Thinking), or there is no thinking at all (K2-Instruct).
ThinkingStyle = Literal["prompt_opens", "model_opens", "none"]


@dataclass(frozen=True)
class ChatProfile:
    """One Kimi chat format.

    ``template`` names the chat template the profile renders prompts with: ``None`` means the
    tokenizer directory's own template (the bundled K2.5 one by default), anything else a template
    bundled under ``kimi_recon/data/templates``.

    ``stop_token_id`` ends a finished turn (``<|im_end|>`` in K2.x); ``eos_token_id`` is the ``[EOS]``
    some servers count after it; ``think_end_token_id`` closes the reasoning (``</think>``), None when
    the format has no such token. The usage check (:mod:`kimi_recon.usage_check`) reads them.
    """

    name: str
    thinking_style: ThinkingStyle
    template: str | None
    description: str
    stop_token_id: int = 163586  # <|im_end|>
    eos_token_id: int | None = 163585  # [EOS]
    think_end_token_id: int | None = 163607  # </think>

    def generation_prompt(self, thinking: bool = True) -> str:
        """The text the chat template appends with ``add_generation_prompt=True``."""
        head = "<|im_assistant|>assistant<|im_middle|>"
        if self.thinking_style == "prompt_opens":
            return head + ("<think>" if thinking else "<think></think>")
        return head

    def template_source(self) -> str | None:
        """The bundled template text, or None when the tokenizer's own template is meant."""
        return None if self.template is None else _bundled_template(self.template)


@functools.lru_cache(maxsize=None)
def _bundled_template(name: str) -> str:
    return (resources.files("kimi_recon") / "data" / "templates" / name).read_text(encoding="utf-8")


PROFILES: dict[str, ChatProfile] = {
    p.name: p
    for p in (
        ChatProfile("kimi-k2.5", "prompt_opens", None, "Kimi-K2.5 and K2.6: the prompt ends with <think> (or <think></think>)"),
        ChatProfile("kimi-k2-thinking", "model_opens", "kimi-k2-thinking.jinja", "Kimi-K2-Thinking: the model writes <think>"),
        ChatProfile("kimi-k2-instruct", "none", "kimi-k2-instruct.jinja", "Kimi-K2-Instruct: no thinking"),
    )
}
_ALIASES = {"kimi-k2.6": "kimi-k2.5", "k2.5": "kimi-k2.5", "k2.6": "kimi-k2.5", "k2-thinking": "kimi-k2-thinking", "k2-instruct": "kimi-k2-instruct"}


def get_profile(profile: str | ChatProfile) -> ChatProfile:
    """A profile by name (``kimi-k2.5``, ``kimi-k2.6``, ``kimi-k2-thinking``, ``kimi-k2-instruct``) or itself."""
    if isinstance(profile, ChatProfile):
        return profile
    if not isinstance(profile, str):
        raise InvalidInputError(f"must be a profile name, got {type(profile).__name__}", field="profile")
    name = _ALIASES.get(profile.lower(), profile.lower())
    try:
        return PROFILES[name]
    except KeyError:
        known = sorted(PROFILES) + sorted(_ALIASES)
        raise InvalidInputError(f"unknown profile {profile!r}; known: {', '.join(known)}", field="profile") from None
