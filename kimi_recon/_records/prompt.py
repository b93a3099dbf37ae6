"""Rendering and encoding a prompt from options already read (:class:`~kimi_recon.record_options.RecordOptions`):
the layer between a record's options and the work on one record. :mod:`kimi_recon.training` offers it as
``render_prompt``/``encode_prompt``; :mod:`kimi_recon._records.record` checks a record's ``usage.prompt_tokens`` with it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._render.formats import prompt_segments
from ..chat_template import render_chat_template
from ..errors import InvalidInputError
from ..record_options import RecordOptions
from ..segments import Segment, encode_segments
from ..special_tokens import special_texts_in
from ..tokenizer import KimiTokenizer, checked_tokenizer, load_tokenizer
from ..tool_declaration import render_tools_declaration
from .arrow import ArrowMessages


def deep_sorted(value: Any) -> Any:
    """Every mapping in ``value`` with its keys sorted, recursively; list order is kept.

    The official ``apply_chat_template`` of every K2 profile (K2.5/K2.6, K2-Thinking, K2-Instruct) does
    this to the tools before the template sees them (``tools = deep_sort_dict(tools)``), so the JSON
    declaration of K2-Thinking/K2-Instruct lists keys in sorted order, whatever order the caller used.
    """
    try:
        return _deep_sorted(value)
    except RecursionError:
        raise InvalidInputError("is nested too deeply to sort", field="tools") from None


def _deep_sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        try:
            keys = sorted(value)
        except TypeError as err:
            raise InvalidInputError(f"has keys that cannot be sorted: {err}", field="tools") from None
        return {k: _deep_sorted(value[k]) for k in keys}
    if isinstance(value, (list, tuple)):
        return [_deep_sorted(v) for v in value]
    return value


def _render_prompt(messages: Sequence[Mapping[str, Any]], options: RecordOptions, tokenizer: KimiTokenizer | None) -> str:
    prof, thinking = options.profile, options.thinking
    segments = _prompt_segments(messages, options)
    if segments is not None:
        return "".join(s.text for s in segments)
    source = options.template if options.template is not None else prof.template_source()
    if source is None:
        tok = checked_tokenizer(tokenizer) or load_tokenizer()
        source = tok.chat_template
        if source is None:
            raise InvalidInputError(f"tokenizer {tok.source!r} has no chat template", field="tokenizer")
    kwargs: dict[str, Any] = {**dict(prof.template_defaults), **options.template_kwargs}
    tools = deep_sorted(list(options.tools)) if options.tools else None
    if tools and "tools_ts_str" in prof.template_reads:
        kwargs["tools_ts_str"] = render_tools_declaration(tools)
    if "thinking" in prof.template_reads:
        kwargs["thinking"] = thinking
    if options.tool_choice is not None:
        kwargs["tool_choice"] = options.tool_choice
    prompt = render_chat_template(source, messages, tools=tools, add_generation_prompt=True, **kwargs)
    expected_end = prof.generation_prompt(thinking)
    if not prompt.endswith(expected_end):
        raise InvalidInputError(
            f"the chat template's prompt does not end with the {prof.name} generation prompt {expected_end!r}; "
            "is the profile right for this template?",
            field="profile",
        )
    return prompt


def _prompt_segments(messages: Sequence[Mapping[str, Any]], options: RecordOptions) -> list[Segment] | None:
    tools = list(options.tools) if options.tools else None
    return prompt_segments(
        options.profile, messages, tools, options.thinking, thinking_effort=options.thinking_effort, tool_choice=options.tool_choice,
        response_format=options.response_format,
    )


def _encode_prompt(messages: Sequence[Mapping[str, Any]], options: RecordOptions, tok: KimiTokenizer) -> tuple[list[int], str]:
    """The prompt's ids and its text."""
    if isinstance(messages, ArrowMessages):
        return _encode_arrow_prompt(messages, options, tok)
    segments = _prompt_segments(messages, options)
    if segments is not None:
        return encode_segments(segments, tok, options.profile), "".join(s.text for s in segments)
    text = _render_prompt(messages, options, tok)
    # encode()'s ids, faster: the encode is given the special-token texts the prompt holds
    return tok.encode_with_specials(text, frozenset(special_texts_in(text))), text


def _encode_arrow_prompt(messages: ArrowMessages, options: RecordOptions, tok: KimiTokenizer) -> tuple[list[int], str]:
    """The prompt of messages read from Arrow: without Arrow's nulls, refused when the nulls change its text
    (a null the renderer refuses cannot be the original's: that form is not compared)."""
    if messages.refusal is not None:
        raise messages.refusal
    ids, text = _encode_prompt(list(messages), options, tok)
    if messages.nulls:
        try:
            with_nulls = _render_prompt(messages.with_nulls, options, tok)
        except InvalidInputError:
            return ids, text
        if with_nulls != text:
            raise messages.ambiguity()
    return ids, text
