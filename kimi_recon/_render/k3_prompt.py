"""Kimi-K3 prompts: a conversation rendered as the segments of Moonshot's reference renderer.

What the renderer does, in order: tools are declared first (compact JSON, keys deep-sorted, in a
``tool-declare`` system message); with thinking on, a ``thinking-effort`` system message follows (effort
``max`` by default; ``low``/``high``/``max``); then every message as an XTML ``message`` tag (``name``
attributes on user, system and assistant messages; history assistant turns keep their reasoning; tool
results are re-ordered by ``tool_call_id`` into call order and named from the matching call); then the
``tool_choice`` system message (``required``/``none``); then the ``response_format`` system message
(``json_object``/``json_schema``, the schema as compact JSON with keys deep-sorted); then the generation prompt.
What it refuses is refused here with an :class:`~kimi_recon.errors.InvalidInputError` naming the field: since
Moonshot's change of 2026-08-20 (Hugging Face commit a590ce09, vLLM PR #53148) that includes a message role other
than user, system, assistant and tool, which the renderer the official dev set was made with (vLLM's vendored copy
@2ec5134c) skipped without a word. docs/formats.md says which renderer this follows.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidInputError, preview
from ..responses import content_text
from ..segments import Segment, marker
from .k3 import (
    END_OF_MSG,
    arguments_problem,
    call_segments,
    close_tag,
    open_tag,
    parse_arguments,
    text,
)

#: The thinking efforts the official renderer accepts (its message text also names ``medium``, which it refuses).
THINKING_EFFORTS = ("low", "high", "max")
DEFAULT_THINKING_EFFORT = "max"

_EFFORT_TEXT = (
    "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), "
    "supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort={effort}`."
)
_TOOL_CHOICE_TEXT = {
    "required": "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.",
    "none": "The system is invoked with `tool_choice=none`.\nYou MUST NOT call any tools in the next message.",
}
_DECLARE_HEAD = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
_DYNAMIC_DECLARE_HEAD = (
    "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\nHere are the specs for the extended tools.\n\n```json\n"
)


def deep_sorted(value: Any) -> Any:
    """Every mapping in ``value`` with its keys sorted, recursively."""
    if isinstance(value, Mapping):
        return {k: deep_sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [deep_sorted(v) for v in value]
    return value


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def check_thinking_effort(effort: str | None) -> str:
    """``effort``, ``max`` when None; anything but low/high/max is refused, as the official renderer does."""
    if effort is None:
        return DEFAULT_THINKING_EFFORT
    if effort not in THINKING_EFFORTS:
        raise InvalidInputError(
            f"Kimi K3 supports thinking_effort values {', '.join(THINKING_EFFORTS)}; got {preview(effort)} (an OpenRouter "
            "reasoning.effort such as 'medium' has no K3 effort kimi-recon can vouch for: set the record's "
            "thinking_effort to the one the model ran with)",
            field="thinking_effort",
        )
    return effort


#: The roles the official renderer writes; since Moonshot's change of 2026-08-20 it raises on any other.
K3_ROLES = ("user", "system", "assistant", "tool")


def _response_format_message(response_format: Any) -> list[Segment]:
    """The ``response-format`` system message of an OpenAI ``response_format`` (a ``{"type": …}`` object or its
    type as text); none for ``text``, absent or another type, as the official renderer does."""
    kind = response_format.get("type") if isinstance(response_format, Mapping) else response_format
    if kind not in ("json_object", "json_schema"):
        return []
    body = (
        f"The system is invoked with `response_format={kind}`.\n"
        "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting."
    )
    if kind == "json_schema":
        schema = response_format.get("json_schema") if isinstance(response_format, Mapping) else None
        if isinstance(schema, Mapping):  # the schema under json_schema.schema, json_schema.json_schema, or json_schema itself
            schema = schema.get("schema", schema.get("json_schema", schema))
        body += f"\nThe JSON data must match the following schema:\n```json\n{compact_json(deep_sorted(schema))}\n```"
    return _system_message("response-format", body)


def _system_message(kind: str, body: str) -> list[Segment]:
    return open_tag("message", [("role", "system", None), ("type", kind, None)]) + text(body.strip()) + close_tag("message") + [marker(END_OF_MSG)]


def _tool_declare(tools: Any, dynamic: bool = False) -> list[Segment]:
    body = (_DYNAMIC_DECLARE_HEAD if dynamic else _DECLARE_HEAD) + compact_json(deep_sorted(tools)) + "\n```"
    return open_tag("message", [("role", "system", None), ("type", "tool-declare", None)]) + text(body) + close_tag("message") + [marker(END_OF_MSG)]


def _content(message: Mapping[str, Any], where: str) -> list[Segment]:
    content = message.get("content")
    if content is None:
        return []
    if not isinstance(content, str):
        try:
            content = content_text(content, f"{where}.content")
        except InvalidInputError as err:
            raise InvalidInputError(f"{err.message} (kimi-k3 prompts take text only)", field=err.field) from None
    return text(content or "", f"{where}.content")


def _function(call: Mapping[str, Any]) -> Mapping[str, Any]:
    fn = call.get("function", call)
    return fn if isinstance(fn, Mapping) else call


def _calls(message: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    calls = message.get("tool_calls")
    if not calls:
        return []
    if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes)):
        raise InvalidInputError(f"must be a list, got {type(calls).__name__}", field=f"{where}.tool_calls")
    for j, call in enumerate(calls):
        if not isinstance(call, Mapping):
            raise InvalidInputError(f"must be an object, got {type(call).__name__}", field=f"{where}.tool_calls[{j}]")
        if _function(call).get("name") is None:
            raise InvalidInputError("a tool call needs a function name", field=f"{where}.tool_calls[{j}].function.name")
    return list(calls)


def _assistant(message: Mapping[str, Any], where: str, thinking: bool) -> list[Segment]:
    segments: list[Segment] = []
    if thinking:
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        segments += open_tag("think")
        if reasoning is not None and str(reasoning).strip():
            segments += text(str(reasoning), f"{where}.reasoning_content")
        segments += close_tag("think")
    segments += open_tag("response") + _content(message, where) + close_tag("response")
    calls = _calls(message, where)
    if calls:
        segments += open_tag("tools")
        for j, call in enumerate(calls):
            segments += _history_call(call, j, f"{where}.tool_calls[{j}]")
        segments += close_tag("tools")
    return segments


def _history_call(call: Mapping[str, Any], j: int, where: str) -> list[Segment]:
    fn = _function(call)
    field = f"{where}.function.arguments"
    arguments = fn.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, (str, Mapping)):
        raise InvalidInputError(f"Kimi K3 tool call arguments must be an object or a JSON object string, got {type(arguments).__name__}", field=field)
    args, block = parse_arguments(arguments)
    if block is not None and arguments_problem(block) is not None:  # JSON, but not an object
        raise InvalidInputError("Kimi K3 tool call arguments must be a JSON object", field=field)
    segments: list[Segment] = []
    call_segments(segments, fn["name"], j + 1, where, (args, block), {}, None)
    return segments


def _call_positions(calls: list[Mapping[str, Any]]) -> dict[str, tuple[int, Any]]:
    """``tool_calls[].id`` -> (1-based position, function name); the first of duplicate ids wins."""
    positions: dict[str, tuple[int, Any]] = {}
    for position, call in enumerate(calls, start=1):
        call_id = call.get("id")
        if call_id is not None and str(call_id) not in positions:
            positions[str(call_id)] = (position, _function(call).get("name"))
    return positions


def order_tool_results(messages: Sequence[Mapping[str, Any]]) -> list[tuple[int, Mapping[str, Any]]]:
    """(original index, message) in render order: each run of tool messages whose every ``tool_call_id``
    matches a call of the latest assistant message is sorted into call order and named after its call;
    a run that cannot be fully matched is left as it is."""
    out: list[tuple[int, Mapping[str, Any]]] = []
    positions: dict[str, tuple[int, Any]] = {}
    i = 0
    while i < len(messages):
        message = messages[i]
        if message.get("role") != "tool":
            if message.get("role") == "assistant":
                positions = _call_positions(_calls(message, f"messages[{i}]"))
            out.append((i, message))
            i += 1
            continue
        run = []
        while i < len(messages) and messages[i].get("role") == "tool":
            call_id = messages[i].get("tool_call_id", messages[i].get("id"))
            run.append((positions.get(str(call_id)) if call_id is not None else None, i, messages[i]))
            i += 1
        if any(match is None for match, _, _ in run):
            out += [(j, m) for _, j, m in run]
            continue
        for match, j, m in sorted(run, key=lambda item: (item[0][0] if item[0] else 0, item[1])):
            assert match is not None
            named = {**m, "tool": match[1]}
            if "name" in m:
                named["name"] = match[1]
            out.append((j, named))
    return out


def _check_messages(messages: Sequence[Mapping[str, Any]]) -> None:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInputError(f"must be a list of message objects, got {type(messages).__name__}", field="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidInputError("must be an object with a string 'role'", field=f"messages[{i}]")


def k3_prompt_segments(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    thinking: bool = True,
    thinking_effort: str | None = None,
    tool_choice: Any = None,
    add_generation_prompt: bool = True,
    response_format: Any = None,
) -> list[Segment]:
    """The segments of a K3 prompt, as Moonshot's reference renderer yields them."""
    _check_messages(messages)
    effort = check_thinking_effort(thinking_effort)
    segments: list[Segment] = []
    if tools:
        segments += _tool_declare(list(tools))
    if thinking:
        segments += _system_message("thinking-effort", _EFFORT_TEXT.format(effort=effort))
    calls: list[Mapping[str, Any]] = []
    tool_index = 0
    for i, message in order_tool_results(messages):
        where = f"messages[{i}]"
        role = message["role"]
        name_attr = [("name", message["name"], f"{where}.name")] if message.get("name") else []
        if role == "user" or (role == "system" and not message.get("tools")):
            segments += open_tag("message", [("role", role, None), *name_attr]) + _content(message, where)
            segments += close_tag("message") + [marker(END_OF_MSG)]
        elif role == "system":
            segments += _tool_declare(message["tools"], dynamic=True)
        elif role == "assistant":
            calls = _calls(message, where)
            tool_index = 0
            segments += open_tag("message", [("role", "assistant", None), *name_attr]) + _assistant(message, where, thinking)
            segments += close_tag("message") + [marker(END_OF_MSG)]
        elif role == "tool":
            tool_index += 1
            tool_name = message.get("tool", message.get("name"))
            if tool_name is None and tool_index <= len(calls):
                tool_name = _function(calls[tool_index - 1]).get("name")
            if tool_name is None:
                raise InvalidInputError(
                    "a Kimi K3 tool message needs a resolvable tool name: carry `tool`/`name`, a `tool_call_id` of the "
                    "preceding assistant's tool calls, or match one of its calls by order",
                    field=where,
                )
            attrs = [("role", "tool", None), ("tool", tool_name, f"{where}.tool"), ("index", tool_index, None)]
            segments += open_tag("message", attrs) + _content(message, where) + close_tag("message") + [marker(END_OF_MSG)]
        else:
            hint = " (vLLM's PR #53148 turns developer into system: rename it so if the server did)" if role == "developer" else ""
            raise InvalidInputError(
                f"is {preview(role)}: Kimi K3's renderer takes the roles {', '.join(K3_ROLES)} and refuses any other{hint}",
                field=f"{where}.role",
            )
    if tool_choice in _TOOL_CHOICE_TEXT:
        segments += _system_message("tool-choice", _TOOL_CHOICE_TEXT[tool_choice])
    segments += _response_format_message(response_format)
    if add_generation_prompt:
        segments += open_tag("message", [("role", "assistant", None)]) + open_tag("think" if thinking else "response")
    return segments
