"""What to ask OpenRouter for, and how one prompt becomes the arguments of one SDK call.

Standard OpenAI parameters go to ``chat.completions.create`` as keywords; OpenRouter's own body fields
(``provider``, ``reasoning``, ``usage``) go through the SDK's ``extra_body``, which it merges into the
JSON body unchanged. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._base.arguments import bool_argument, instance_argument, int_argument, number_argument
from ..errors import InvalidInputError
from .prompts import Prompt

#: Keys callers may not set through ``extra_body``, because the adapter owns them.
_RESERVED = frozenset({"model", "messages", "tools", "stream"})

#: Body objects the adapter sets itself, which ``extra_body`` would replace whole (the SDK merges only the
#: top level): ``usage.include`` brings the cost ``--max-cost`` counts and the token counts the usage check
#: compares; ``reasoning`` decides whether the ids are rebuilt with thinking, and ``exclude`` must stay off.
#: The body fields that ask a server for the generated ids (vLLM/SGLang ``return_token_ids``, llama.cpp ``return_tokens``).
_IDS_FIELDS = ("return_token_ids", "return_tokens")

_OWNED = {
    "usage": "the adapter always asks for usage.include=true (costs for --max-cost, token counts for the usage check)",
    "reasoning": "set it with RequestOptions.reasoning (--no-thinking, --reasoning-effort, --reasoning-max-tokens): "
    "the ids are rebuilt with or without thinking from it, and reasoning.exclude would drop the text they need",
}


def provider_preferences(
    *,
    order: Sequence[str] = (),
    only: Sequence[str] = (),
    require_parameters: bool = False,
    allow_fallbacks: bool | None = None,
    quantizations: Sequence[str] = (),
) -> dict[str, Any] | None:
    """OpenRouter's ``provider`` routing object, or None when nothing is pinned.

    Pinning matters for exactness: providers serve the same model with different tokenizer versions,
    templates and quantizations, and only some return raw reasoning or logprobs.
    """
    prefs: dict[str, Any] = {}
    if order:
        prefs["order"] = list(order)
    if only:
        prefs["only"] = list(only)
    if require_parameters:
        prefs["require_parameters"] = True
    if allow_fallbacks is not None:
        prefs["allow_fallbacks"] = allow_fallbacks
    if quantizations:
        prefs["quantizations"] = list(quantizations)
    return prefs or None


def reasoning_settings(*, enabled: bool = True, effort: str | None = None, max_tokens: int | None = None) -> dict[str, Any]:
    """OpenRouter's ``reasoning`` object. ``exclude`` is always False: excluded reasoning cannot be rebuilt."""
    if effort is not None and max_tokens is not None:
        raise InvalidInputError("give a reasoning effort or a reasoning token budget, not both", field="reasoning")
    settings: dict[str, Any] = {"enabled": enabled, "exclude": False}
    if enabled and effort is not None:
        settings["effort"] = effort
    if enabled and max_tokens is not None:
        settings["max_tokens"] = max_tokens
    return settings


@dataclass(frozen=True)
class RequestOptions:
    """Per-run request settings. ``extra_body`` holds any further OpenRouter body fields."""

    model: str
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    reasoning: Mapping[str, Any] | None = field(default_factory=reasoning_settings)
    logprobs: bool = False
    top_logprobs: int | None = None
    provider: Mapping[str, Any] | None = None
    stream: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    #: ask a self-hosted vLLM or SGLang server for the generated ids (``return_token_ids``): they are then the
    #: rebuilt ids, whatever its parsers lost from the message
    return_token_ids: bool = False

    def __post_init__(self) -> None:
        instance_argument(self.model, "model", str, "a str")
        for mapping in ("reasoning", "provider", "extra_body"):
            instance_argument(getattr(self, mapping), mapping, Mapping, "a mapping", none=mapping != "extra_body")
        for flag in ("logprobs", "stream", "return_token_ids"):
            bool_argument(getattr(self, flag), flag)
        for whole in ("max_tokens", "seed", "top_logprobs"):
            int_argument(getattr(self, whole), whole, none=True)
        for real in ("temperature", "top_p"):
            if getattr(self, real) is not None:
                number_argument(getattr(self, real), real)
        if not self.model:
            raise InvalidInputError("a model is required (e.g. moonshotai/kimi-k2.5)", field="model")
        clash = _RESERVED.intersection(self.extra_body)
        if clash:
            raise InvalidInputError(f"extra_body may not set {sorted(clash)}", field="extra_body")
        for name, why in _OWNED.items():
            if name in self.extra_body:
                raise InvalidInputError(f"extra_body may not set {name!r}: {why}", field=f"extra_body.{name}")
        if self.reasoning is not None and self.reasoning.get("exclude", False) is not False:
            raise InvalidInputError("reasoning.exclude must be false: excluded reasoning cannot be rebuilt", field="reasoning.exclude")
        if self.top_logprobs is not None and not self.logprobs:
            raise InvalidInputError("top_logprobs needs logprobs", field="top_logprobs")
        asked = [name for name in _IDS_FIELDS if self.extra_body.get(name)]
        if self.stream and (self.return_token_ids or asked):
            # the assembled stream keeps no ids: a server streams them per chunk, if at all, and drops those of the
            # steps its parsers swallow (the markers): the ids asked for would be lost without a word
            said = "return_token_ids" if self.return_token_ids else f"extra_body.{asked[0]}"
            raise InvalidInputError(
                f"{said} and stream cannot go together (--return-token-ids with --stream): a streamed answer is "
                "assembled from its text, and the server's ids would be dropped; leave out stream to get them",
                field=f"{said}+stream",
            )

    @property
    def thinking(self) -> bool:
        """Whether the model runs with thinking on, which decides how its output is rebuilt."""
        if self.reasoning is None:
            return True  # Kimi K2.5's default on OpenRouter
        return self.reasoning.get("enabled", True) is not False and self.reasoning.get("effort") != "none"

    def describe(self) -> dict[str, Any]:
        """The settings as recorded next to each row (no secrets live here)."""
        return {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "reasoning": dict(self.reasoning) if self.reasoning is not None else None,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "provider": dict(self.provider) if self.provider is not None else None,
            "stream": self.stream,
            "extra_body": dict(self.extra_body),
            "return_token_ids": self.return_token_ids,
        }


def request_kwargs(prompt: Prompt, options: RequestOptions) -> dict[str, Any]:
    """Keyword arguments for ``client.chat.completions.create`` (or its raw/streaming variants)."""
    instance_argument(prompt, "prompt", Prompt, "a Prompt")
    instance_argument(options, "options", RequestOptions, "a RequestOptions")
    kwargs: dict[str, Any] = {"model": options.model, "messages": [dict(m) for m in prompt.messages]}
    if prompt.tools:
        kwargs["tools"] = [dict(t) for t in prompt.tools]
    for name in ("max_tokens", "temperature", "top_p", "seed", "top_logprobs"):
        value = getattr(options, name)
        if value is not None:
            kwargs[name] = value
    if options.logprobs:
        kwargs["logprobs"] = True
    if options.stream:
        kwargs["stream"] = True
        kwargs["stream_options"] = {"include_usage": True}
    extra: dict[str, Any] = {"usage": {"include": True}}  # token counts and cost in every response
    if options.reasoning is not None:
        extra["reasoning"] = dict(options.reasoning)
    if options.provider is not None:
        extra["provider"] = dict(options.provider)
    if options.return_token_ids:
        extra["return_token_ids"] = True  # vLLM: choices[].token_ids; SGLang: choices[].response_token_ids
        # llama.cpp's llama-server: every generated id, the stop token included, in __verbose.tokens (others
        # ignore these two fields)
        extra["return_tokens"] = True
        extra["verbose"] = True
    extra.update(options.extra_body)
    kwargs["extra_body"] = extra
    return kwargs
