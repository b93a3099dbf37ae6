"""EAGLE-3 training samples: the prompt from the real chat template plus the rebuilt output ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .chat_template import render_chat_template
from .errors import InvalidInputError
from .models import AssistantTurn, Flag
from .profiles import ChatProfile, get_profile
from .reconstruct import reconstruct_output_ids
from .tokenizer import KimiTokenizer, load_tokenizer
from .tool_declaration import render_tools_declaration


@dataclass(frozen=True)
class TrainingSample:
    """``input_ids`` = prompt ids + output ids; ``loss_mask`` is 0 on the prompt and 1 on the output."""

    input_ids: list[int]
    loss_mask: list[int]
    prompt_len: int
    flags: tuple[Flag, ...] = ()

    @property
    def prompt_ids(self) -> list[int]:
        return self.input_ids[: self.prompt_len]

    @property
    def output_ids(self) -> list[int]:
        return self.input_ids[self.prompt_len :]

    def to_dict(self) -> dict[str, Any]:
        """The sample as JSON: ``input_ids``, ``loss_mask``, ``prompt_len``, flag codes (``kimi-recon export`` makes trainer rows of it)."""
        return {
            "input_ids": self.input_ids,
            "loss_mask": self.loss_mask,
            "prompt_len": self.prompt_len,
            "flags": [f.code for f in self.flags],
        }


def deep_sorted(value: Any) -> Any:
    """Every mapping in ``value`` with its keys sorted, recursively (the official K2.5 code does this to tools)."""
    if isinstance(value, Mapping):
        return {k: deep_sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [deep_sorted(v) for v in value]
    return value


def count_tool_calls(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tool calls made by assistant messages so far: the next call's ``functions.NAME:IDX`` index.

    The model numbers its calls across the whole conversation, so a new turn's first call is not 0.
    A ``tool_calls`` that is not a list (null, a string, an object) counts as none.
    """
    total = 0
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, Sequence) and not isinstance(calls, (str, bytes)):
                total += len(calls)
    return total


def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    profile: str | ChatProfile = "kimi-k2.5",
    thinking: bool = True,
    tokenizer: KimiTokenizer | None = None,
    *,
    template: str | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """The prompt text up to and including the generation prompt, as the official ``apply_chat_template``.

    ``kimi-k2.5`` uses the tokenizer directory's own template, with tools deep-sorted and declared in
    the TypeScript style; the other profiles use their bundled templates. ``template`` replaces the
    template text; ``template_kwargs`` reach the template as variables (e.g. ``preserve_thinking``).
    """
    prof = get_profile(profile)
    source = template if template is not None else prof.template_source()
    if source is None:
        tok = tokenizer if tokenizer is not None else load_tokenizer()
        source = tok.chat_template
        if source is None:
            raise InvalidInputError(f"tokenizer {tok.source!r} has no chat template", field="tokenizer")
    kwargs: dict[str, Any] = dict(template_kwargs or {})
    if tools:
        if prof.thinking_style == "prompt_opens":
            tools = deep_sorted(list(tools))
            kwargs["tools_ts_str"] = render_tools_declaration(tools)
    if prof.thinking_style == "prompt_opens":
        kwargs["thinking"] = thinking
    prompt = render_chat_template(source, messages, tools=tools or None, add_generation_prompt=True, **kwargs)
    expected_end = prof.generation_prompt(thinking)
    if not prompt.endswith(expected_end):
        raise InvalidInputError(
            f"the chat template's prompt does not end with the {prof.name} generation prompt {expected_end!r}; "
            "is the profile right for this template?",
            field="profile",
        )
    return prompt


def build_training_sample(
    messages: Sequence[Mapping[str, Any]],
    turn: AssistantTurn | Mapping[str, Any],
    tools: Sequence[Mapping[str, Any]] | None = None,
    profile: str | ChatProfile = "kimi-k2.5",
    thinking: bool = True,
    tokenizer: KimiTokenizer | None = None,
) -> TrainingSample:
    """One training row: prompt ids (loss 0) followed by the turn's output ids (loss 1).

    Tool calls of ``turn`` without an id are numbered after the tool calls already in ``messages``.
    """
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    prompt_ids = tok.encode(render_prompt(messages, tools, profile, thinking, tok))
    output = reconstruct_output_ids(turn, tok, profile, thinking, call_index_offset=count_tool_calls(messages))
    return TrainingSample(
        input_ids=prompt_ids + output.ids,
        loss_mask=[0] * len(prompt_ids) + [1] * len(output.ids),
        prompt_len=len(prompt_ids),
        flags=output.flags,
    )


def sample_from_record(
    record: Mapping[str, Any],
    tokenizer: KimiTokenizer | None = None,
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
) -> TrainingSample:
    """A training sample from one record: ``messages``, optional ``tools``, and the response (under
    ``response``, ``turn`` or ``message``, as :mod:`kimi_recon.dataset` reads it); the record's own
    ``profile`` and ``thinking`` win over the arguments. Errors name the field and the record id."""
    from .dataset import record_id, turn_of_record

    try:
        messages = record.get("messages")
        if not isinstance(messages, list):
            raise InvalidInputError(f"must be a list of messages, got {type(messages).__name__}", field="messages")
        turn = turn_of_record(record)
        return build_training_sample(
            messages,
            turn,
            record.get("tools"),
            record.get("profile") or profile,
            bool(record.get("thinking", thinking)),
            tokenizer,
        )
    except InvalidInputError as err:
        raise err.with_sample(record_id(record)) from None
