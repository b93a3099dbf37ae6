"""The Kimi-K2.5 chat template (``data/k2.5/chat_template.jinja``) in plain Python, for the messages it covers.

Counting a prompt's tokens for the usage check (:func:`kimi_recon.openrouter.rebuild.make_prompt_counter`)
rendered every prompt with jinja, about half of the count's Python time. This renders the same text as a
list of fragments (each special-token text of the template its own fragment), so the counter can count
the text between them without joining and re-scanning the prompt. It covers what the template does with
JSON-shaped conversations: system/user/assistant/tool (and any other role, rendered as the template
renders it), string or null ``content``, ``name``, reasoning, tool calls with string or JSON arguments,
and the tool declaration text. Anything else (content parts, a non-string id or name, a template other
than the bundled one) returns None, and the caller renders with the real template.
tests/test_k25_prompt.py checks the fragments join to the jinja render of the real template (hypothesis
and the official golden conversations).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..chat_template import REASONING_FIELDS, bundled_k25_template
from .k2 import (
    ARGUMENT_BEGIN,
    CALL_BEGIN,
    CALL_END,
    IM_END,
    SECTION_BEGIN,
    SECTION_END,
    THINK_BEGIN,
    THINK_END,
)

if TYPE_CHECKING:
    from ..profiles import ChatProfile
    from ..tokenizer import KimiTokenizer

__all__ = ["TEMPLATE_MARKERS", "bundled_k25_template", "k25_prompt_fragments", "uses_k25_template"]

IM_SYSTEM, IM_USER, IM_ASSISTANT, IM_MIDDLE = "<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>"

#: The special-token texts the template writes; each is a fragment of its own in :func:`k25_prompt_fragments`.
TEMPLATE_MARKERS = frozenset(
    {IM_SYSTEM, IM_USER, IM_ASSISTANT, IM_MIDDLE, IM_END, THINK_BEGIN, THINK_END, SECTION_BEGIN, SECTION_END, CALL_BEGIN, ARGUMENT_BEGIN, CALL_END}
)
_OPENERS = {"user": IM_USER, "assistant": IM_ASSISTANT}
#: The generation prompt the template appends, by ``thinking``.
_GENERATION_PROMPT = {True: (IM_ASSISTANT, "assistant", IM_MIDDLE, THINK_BEGIN), False: (IM_ASSISTANT, "assistant", IM_MIDDLE, THINK_BEGIN, THINK_END)}
#: The variables the template reads besides messages and tools (``ChatProfile.template_reads``), which
#: :func:`k25_prompt_fragments` takes: ``tools_ts_str`` (its ``tools_declaration``) and ``thinking``.
_TEMPLATE_READS = frozenset({"tools_ts_str", "thinking"})


def uses_k25_template(profile: ChatProfile, tokenizer: KimiTokenizer) -> bool:
    """Whether :func:`~kimi_recon.training.render_prompt` renders ``profile``'s prompts with the bundled
    K2.5 template as :func:`k25_prompt_fragments` does: the profile takes the tokenizer's template, and that is
    the bundled one; it passes the template the variables that template reads; its generation prompt is the
    one the template writes."""
    return (
        profile.template is None
        and profile.template_reads == _TEMPLATE_READS
        and all(profile.generation_prompt(thinking) == "".join(_GENERATION_PROMPT[thinking]) for thinking in (True, False))
        and tokenizer.chat_template == bundled_k25_template()
    )


class _Uncovered(Exception):
    """The messages hold something this renderer does not cover."""


def _text(value: object) -> str:
    if type(value) is not str:  # a str subclass may print otherwise under jinja
        raise _Uncovered
    return value


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return "" if content is None else _text(content)


def _reasoning(message: Mapping[str, Any]) -> str:
    """``reasoning_content`` as the template sees it (after :func:`~kimi_recon.chat_template.alias_reasoning_fields`)."""
    for key in REASONING_FIELDS:
        value = message.get(key)
        if value is not None:
            return _text(value)
    if "reasoning_content" in message:  # null: the template would print "None"
        raise _Uncovered
    return ""


def _tool_calls(calls: object, out: list[str]) -> None:
    if not isinstance(calls, list):
        raise _Uncovered
    out.append(SECTION_BEGIN)
    for call in calls:
        if not isinstance(call, Mapping):
            raise _Uncovered
        function = call.get("function")
        if not isinstance(function, Mapping) or "arguments" not in function:
            raise _Uncovered
        arguments = function["arguments"]
        if type(arguments) is not str:
            if isinstance(arguments, str):
                raise _Uncovered
            try:  # the template's ``tojson`` (transformers' filter: non-ASCII kept, default separators)
                arguments = json.dumps(arguments, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError):
                raise _Uncovered from None
        out += [CALL_BEGIN, _text(call.get("id")), ARGUMENT_BEGIN, arguments, CALL_END]
    out.append(SECTION_END)


def _message(message: Mapping[str, Any], in_suffix: bool, thinking: bool, out: list[str]) -> None:
    role = _text(message.get("role"))
    name = message.get("name")
    out += [_OPENERS.get(role, IM_SYSTEM), _text(name) if name else role, IM_MIDDLE]
    if role == "assistant":
        if in_suffix and thinking:
            out += [THINK_BEGIN, _reasoning(message), THINK_END, _content(message)]
        else:
            out += [THINK_BEGIN, THINK_END, _content(message)]
        calls = message.get("tool_calls")
        if calls:
            _tool_calls(calls, out)
    elif role == "tool":
        out.append(f"## Return of {_text(message.get('tool_call_id'))}\n{_content(message)}")
    else:
        out.append(_content(message))
    out.append(IM_END)


def k25_prompt_fragments(messages: Sequence[object], tools_declaration: str | None, thinking: bool) -> list[str] | None:
    """The K2.5 prompt (generation prompt included) as fragments whose concatenation is the template's
    render with ``add_generation_prompt=True``; every special-token text the template itself writes is
    one fragment (text inside a message stays in that message's fragment). ``tools_declaration`` is the
    TypeScript-style declaration the template receives as ``tools_ts_str`` (None: no tools). None when
    the messages hold something not covered here."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        return None
    try:
        for message in messages:
            if not isinstance(message, Mapping):
                raise _Uncovered
        # the last assistant message without tool calls: its reasoning and what comes before it are history
        last = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant" and not messages[i].get("tool_calls")),  # type: ignore[attr-defined]
            -1,
        )
        out: list[str] = []
        if tools_declaration is not None:
            if not tools_declaration:
                return None  # the template falls back to the tools' JSON
            out += [IM_SYSTEM, "tool_declare", IM_MIDDLE, tools_declaration, IM_END]
        for i, message in enumerate(messages):
            _message(message, i > last, thinking, out)  # type: ignore[arg-type]
    except _Uncovered:
        return None
    out += _GENERATION_PROMPT[bool(thinking)]
    return out
