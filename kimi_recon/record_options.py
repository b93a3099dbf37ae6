"""The options a record (or a call) sets for rendering: ``profile``, ``thinking``, ``tools``,
``call_index_offset``, ``template_kwargs`` and the ``kimi-k3`` prompt options ``thinking_effort`` and
``tool_choice``, read by one function, :func:`parse_options`, into one frozen :class:`RecordOptions` (with
the call's ``template``, which no record sets) that the prompt and sample builders take as it is.

Every command and every API function that takes these goes through it, so a value means the same
everywhere: ``thinking`` is a bool (``"false"`` is refused, not read as true); ``tools`` may be a list
or its JSON text (SpecForge and vLLM speculators store it as text); ``call_index_offset`` is a
non-negative int; ``template_kwargs`` is an object whose keys reach the chat template.

Tools that went through Arrow (Hugging Face ``datasets`` 3.x, Ray) come back with every key any
other tool of the column had, set to null. Where JSON Schema and the OpenAI tool format never allow a
null, the null can only be such a filler, so it is removed, which gives back the original exactly
(flag ``tools_null_fields_removed``). Where a null is legal (``default``, ``const``, ``example``,
``examples``, unknown keys) and the tools show such fillers, a real null and a filled one cannot be
told apart, so the record is refused with a message saying so. Fillers in one record are not the only
sign: Arrow fills a key that any row of the column had, so a record's lone ``"default": null`` may be a
filler too. Tools the batch functions read (:func:`~kimi_recon.sample_batch`,
:func:`~kimi_recon.dataset.audit_row`, :func:`~kimi_recon.dataset.audit_batch`) are known to come from
Arrow (:func:`arrow_tools` marks them), so there any null where a real null is allowed is refused.
Elsewhere (JSON files, a caller's own objects) nothing says the tools went through Arrow, and without
fillers such a null is kept (pydantic writes ``"default": null`` for optional fields).
"""

from __future__ import annotations

import json
import numbers
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._profile_check import assumed_profile
from .errors import InvalidInputError, InvalidInputTypeError, preview
from .flags import Flag, FlagCode
from .profiles import ChatProfile, get_profile, profile_or_model

__all__ = [
    "MAX_TOOLS_DEPTH",
    "OPTION_KEYS",
    "RESERVED_TEMPLATE_KWARGS",
    "RecordOptions",
    "arrow_tools",
    "calls_before_the_turn",
    "count_tool_calls",
    "parse_options",
    "turn_options",
]

#: The record keys :func:`parse_options` reads.
OPTION_KEYS: tuple[str, ...] = (
    "profile",
    "thinking",
    "tools",
    "call_index_offset",
    "template_kwargs",
    "thinking_effort",
    "tool_choice",
    "response_format",
)

#: Template variables kimi-recon sets itself; ``template_kwargs`` may not set them.
RESERVED_TEMPLATE_KWARGS = frozenset({"messages", "tools", "tools_ts_str", "add_generation_prompt", "thinking", "tool_choice"})

#: Keys of a tool definition or a JSON Schema whose value is never null (a null there is an Arrow filler).
_NEVER_NULL = frozenset(
    {
        # OpenAI tool format
        "type", "function", "name", "description", "parameters", "strict",
        # JSON Schema keywords
        "$schema", "$id", "$ref", "$defs", "$comment", "$anchor", "title", "properties", "patternProperties",
        "additionalProperties", "unevaluatedProperties", "propertyNames", "required", "dependentRequired",
        "dependentSchemas", "definitions", "items", "prefixItems", "additionalItems", "contains", "unevaluatedItems",
        "enum", "format", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
        "minLength", "maxLength", "minItems", "maxItems", "uniqueItems", "minContains", "maxContains",
        "minProperties", "maxProperties", "anyOf", "oneOf", "allOf", "not", "if", "then", "else", "nullable",
        "deprecated", "readOnly", "writeOnly", "contentEncoding", "contentMediaType", "discriminator",
    }
)
#: How deeply tools may nest (objects and lists). Real schemas stay far below; deeper ones would exhaust
#: the stack somewhere in rendering, so they are refused here, with the field named.
MAX_TOOLS_DEPTH = 200

#: Keys whose value is a mapping from names the user chose to schemas (a schema is never null).
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})


@dataclass(frozen=True)
class RecordOptions:
    """Checked rendering options. ``tools`` None means no tools; ``call_index_offset`` None means
    "count the tool calls of the conversation"; ``template`` None means the profile's own chat template;
    ``flags`` says what reading them changed."""

    profile: ChatProfile
    thinking: bool
    tools: tuple[dict[str, Any], ...] | None = None
    call_index_offset: int | None = None
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    thinking_effort: str | None = None
    tool_choice: Any = None
    template: str | None = None
    flags: tuple[Flag, ...] = ()
    #: the request's OpenAI ``response_format`` (K3 prompts write a system message for json_object/json_schema)
    response_format: Any = None
    #: False when neither the record (nor its request) nor the call said the thinking mode: ``thinking`` is then
    #: the default, on, and a turn without reasoning is flagged ``thinking_assumed``
    thinking_stated: bool = True


def parse_options(
    record: Mapping[str, Any] | None = None,
    *,
    profile: str | ChatProfile | None = None,
    thinking: object = None,
    tools: object = None,
    call_index_offset: object = None,
    template_kwargs: object = None,
    thinking_effort: object = None,
    tool_choice: object = None,
    template: str | None = None,
    sample: object = None,
    read: Collection[str] = OPTION_KEYS,
    model: object = None,
    response_format: object = None,
) -> RecordOptions:
    """The options of ``record``, each falling back to the keyword of the same name when the record
    has no such key (or null). Raises :class:`~kimi_recon.errors.InvalidInputError` naming the field
    and ``sample`` for a value of the wrong type; see the module doc for what each accepts.

    ``read`` lists the record keys a caller uses (reconstruction has no prompt, so it does not read
    ``tools`` or ``template_kwargs``); the keywords are checked whatever ``read`` says.

    ``template`` (the chat template text replacing the profile's) is a call's option, never a record's; it is
    kept as given: the chat-template renderer checks it, and a profile rendered in Python (``kimi-k3``) has none.

    With no profile (neither the record's nor ``profile``), the model id decides: ``model`` (the response's),
    else the record's own ``model`` key, else ``kimi-k2.5`` (:func:`~kimi_recon.profiles.profile_or_model`).

    ``thinking``: the record's ``thinking``, else what its request says (:func:`_record_thinking`), else the keyword;
    None there too means on, with ``thinking_stated`` False."""
    if isinstance(read, (str, bytes, bytearray)) or not isinstance(read, Collection):
        raise InvalidInputTypeError(f"must be a collection of record keys, got {type(read).__name__}", field="read")
    if read is not OPTION_KEYS and type(read) is not frozenset:  # a key's `in` must not fail on what else it holds
        read = frozenset(key for key in read if isinstance(key, str))
    own = record if record is not None else {}
    if not isinstance(own, Mapping):
        raise InvalidInputError(f"must be an object, got {type(own).__name__}", field="record", sample=sample)

    def pick(key: str, default: object) -> object:
        if key not in read:
            return default
        if key == "thinking":
            value = _record_thinking(own)
        elif key == "thinking_effort":
            value = _record_thinking_effort(own)
        elif key == "response_format":
            value = _record_or_request(own, key)
        else:
            value = own.get(key)
        return default if value is None else value

    try:
        if model is None:
            model = own.get("model")
        named = pick("profile", profile)
        prof = profile_or_model(named, model)  # type: ignore[arg-type]  # checked there
        parsed_tools, flags = _tools(pick("tools", tools), wrap=prof.format == "k2")
        assumed = assumed_profile(model) if named is None else None
        if assumed is not None:
            flags = (*flags, assumed)
        said = pick("thinking", thinking)
        kwargs = _template_kwargs(pick("template_kwargs", template_kwargs))
        if "template_kwargs" in read and (kwargs.get("preserve_thinking") is True or _keeps_reasoning(own)):
            template, kwargs = _kept_reasoning(prof, template, kwargs)
        return RecordOptions(
            profile=prof,
            thinking=_profile_thinking(prof, True if said is None else _thinking(said)),
            thinking_stated=said is not None,
            tools=parsed_tools,
            call_index_offset=_call_index_offset(pick("call_index_offset", call_index_offset)),
            template_kwargs=kwargs,
            thinking_effort=_thinking_effort(pick("thinking_effort", thinking_effort)),
            tool_choice=pick("tool_choice", tool_choice),  # its values are the profile's to check (kimi_recon._render.k3_prompt)
            response_format=pick("response_format", response_format),
            template=template,
            flags=flags,
        )
    except InvalidInputError as err:
        raise err.with_sample(sample) from None


def count_tool_calls(messages: Sequence[Mapping[str, Any]]) -> int:
    """Tool calls made by assistant messages so far: the next call's ``functions.NAME:IDX`` index.

    The model numbers its calls across the whole conversation, so a new turn's first call is not 0.
    A ``tool_calls`` that is not a list (null, a string, an object) counts as none.
    """
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise InvalidInputTypeError(f"must be a list of messages, got {type(messages).__name__}", field="messages")
    total = 0
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, Sequence) and not isinstance(calls, (str, bytes)):
                total += len(calls)
    return total


def calls_before_the_turn(messages: object) -> int | None:
    """:func:`count_tool_calls` of a record's ``messages`` without a last assistant message (the turn itself, in a
    record that stores the whole conversation); None when ``messages`` is not a list of messages."""
    if not isinstance(messages, list):
        return None
    if messages and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "assistant":
        messages = messages[:-1]
    return count_tool_calls(messages)


def call_index_offset_of(record: Mapping[str, Any]) -> int:
    """The record's ``call_index_offset`` (absent or null: 0), checked as :func:`parse_options` checks it: what
    reading a record's turn needs before its profile is known, without resolving the rest of the options."""
    return _call_index_offset(record.get("call_index_offset")) or 0


def turn_options(profile: object, thinking: object, call_index_offset: object) -> tuple[ChatProfile, bool, int]:
    """The options rendering one turn takes (no record, no prompt), checked by the same rules as
    :func:`parse_options`; ``call_index_offset`` None is 0. The hot path of reconstruction calls this."""
    if type(profile) is ChatProfile and type(call_index_offset) is int and call_index_offset >= 0 and (thinking is True or (thinking is False and not profile.thinking_required)):
        return profile, thinking, call_index_offset  # the usual arguments, on which every rule below passes as is
    offset = _call_index_offset(call_index_offset)
    prof = get_profile(profile)  # type: ignore[arg-type]  # checked there
    return prof, _profile_thinking(prof, _thinking(thinking)), 0 if offset is None else offset


def _profile_thinking(profile: ChatProfile, thinking: bool) -> bool:
    if profile.thinking_required and not thinking:
        raise InvalidInputError(
            f"is false, but {profile.name} has no non-thinking mode (its model always thinks); "
            "rebuild with thinking on, or pick the profile of the model that generated the data",
            field="thinking",
        )
    return thinking


def _record_thinking(record: Mapping[str, Any]) -> object:
    """A record's ``thinking`` setting, else what the request it was made with says about thinking: Moonshot's
    ``thinking: {"type": "disabled"}``, OpenRouter's ``reasoning: {"enabled": false}`` or ``{"effort": "none"}``,
    a server's ``chat_template_kwargs: {"thinking": false}``, on the record or in its ``request`` object; None
    when nothing says (the caller's default then holds).

    >>> _record_thinking({"request": {"reasoning": {"enabled": False}}}), _record_thinking({"messages": []})
    (False, None)
    """
    own = record.get("thinking")
    if own is not None:
        return own
    for source in _request_sources(record):
        for key in ("thinking", "reasoning", "chat_template_kwargs"):
            said = _thinking_said(key, source.get(key))
            if said is not None:
                return said
        if source.get("reasoning_effort") == "none":  # (vLLM's reading of it, and OpenAI's spelling of off)
            return False
    return None


def _keeps_reasoning(record: Mapping[str, Any]) -> bool:
    """Whether the record's request asked to keep every earlier turn's reasoning in the prompt: Moonshot's
    ``thinking: {"keep": "all"}`` (K2.6's preserved thinking) or a server's ``chat_template_kwargs.preserve_thinking``."""
    for source in _request_sources(record):
        thinking, kwargs = source.get("thinking"), source.get("chat_template_kwargs")
        if (isinstance(thinking, Mapping) and thinking.get("keep") == "all") or (isinstance(kwargs, Mapping) and kwargs.get("preserve_thinking") is True):
            return True
    return False


def _kept_reasoning(prof: ChatProfile, template: str | None, kwargs: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """The template and its variables that keep every earlier turn's reasoning for ``prof``: ``preserve_thinking``
    true, with the profile's template when it reads that variable, else its :attr:`~kimi_recon.profiles.ChatProfile.kept_reasoning_template`
    (the stock K2.5 template ignores the variable, so the prompt would drop the reasoning without a word). K3 keeps
    it always; a template the call gave is the call's word."""
    if prof.format != "k2":
        return template, kwargs
    kwargs = {**kwargs, "preserve_thinking": kwargs.get("preserve_thinking", True)}
    if template is None and "preserve_thinking" not in prof.template_reads:
        template = prof.kept_reasoning_template_source()
    return template, kwargs


def _record_or_request(record: Mapping[str, Any], key: str) -> object:
    """``record[key]``, else the same key of its ``request`` object (None when neither has it)."""
    for source in _request_sources(record):
        value = source.get(key)
        if value is not None:
            return value
    return None


def _request_sources(record: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    """Where a record's request settings are read, first found wins: the record, the ``extra_body`` of its
    ``request`` (the openai SDK merges ``extra_body`` into the request body, over its other keys: vLLM's
    ``chat_template_kwargs`` and OpenRouter's ``reasoning`` travel there), the ``request``, and the record's own
    ``extra_body`` (a record that is the SDK call's keyword arguments)."""
    request = record.get("request")
    sources: list[Mapping[str, Any]] = [record]
    if isinstance(request, Mapping):
        extra = request.get("extra_body")
        sources += [extra, request] if isinstance(extra, Mapping) else [request]
    own_extra = record.get("extra_body")
    if isinstance(own_extra, Mapping):
        sources.append(own_extra)
    return tuple(sources)


def _thinking_said(key: str, value: object) -> bool | None:
    """What one request setting says about thinking, if anything."""
    if not isinstance(value, Mapping):
        return value if key == "thinking" and isinstance(value, bool) else None
    if key == "thinking" and value.get("type") in ("enabled", "disabled"):
        return bool(value["type"] == "enabled")
    if key == "reasoning":
        if isinstance(value.get("enabled"), bool):
            return bool(value["enabled"])
        if value.get("effort") == "none":
            return False
    if key == "chat_template_kwargs":
        if isinstance(value.get("thinking"), bool):
            return bool(value["thinking"])
        if isinstance(value.get("enable_thinking"), bool):
            return bool(value["enable_thinking"])
    return None


def _record_thinking_effort(record: Mapping[str, Any]) -> object:
    """A record's ``thinking_effort``, else the request's, on the record or in its ``request``, in this order:
    its own ``thinking_effort``, Moonshot's top-level ``reasoning_effort`` (``low``/``high``/``max``), Moonshot's
    ``thinking: {"effort": …}`` (with ``keep``, as the Kimi Vendor Verifier sends it), a server's
    ``chat_template_kwargs.thinking_effort``, OpenRouter's ``reasoning: {"effort": …}``. None when nothing says
    (the K3 renderer then uses ``max``, Moonshot's default). An effort of OpenRouter's own scale (``medium``,
    ``minimal``, ``xhigh``) is passed on, so the K3 renderer refuses it naming ``thinking_effort`` rather than
    render ``max`` without a word; ``none`` is thinking off, not an effort."""
    own = record.get("thinking_effort")
    if own is not None:
        return own
    for source in _request_sources(record):
        candidates = [source.get("thinking_effort"), source.get("reasoning_effort")]
        for key, name in (("thinking", "effort"), ("chat_template_kwargs", "thinking_effort"), ("chat_template_kwargs", "reasoning_effort"), ("reasoning", "effort")):
            holder = source.get(key)
            candidates.append(holder.get(name) if isinstance(holder, Mapping) else None)
        for effort in candidates:
            if effort is not None and effort != "none":
                return effort
    return None


def _thinking(value: object) -> bool:
    if isinstance(value, bool):
        return value
    said = _thinking_said("thinking", value)  # Moonshot's {"type": "enabled" | "disabled"}
    if said is not None:
        return said
    if getattr(getattr(value, "dtype", None), "kind", None) == "b":  # numpy booleans from Arrow/Ray batches
        return bool(value)
    raise InvalidInputError(f"must be true or false (a JSON boolean), got {preview(value)}", field="thinking")


def _thinking_effort(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value  # which efforts exist is the profile's to say (kimi_recon._render.k3_prompt)
    raise InvalidInputError(f"must be a string such as \"max\", got {preview(value)}", field="thinking_effort")


def _call_index_offset(value: object) -> int | None:
    if value is None:
        return None
    if type(value) is int and value >= 0:  # the usual case, without the slower ABC check below
        return value
    # numbers.Integral takes numpy integers (Arrow/Ray batches) and refuses floats and strings.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise InvalidInputError(f"must be a non-negative integer, got {preview(value)}", field="call_index_offset")
    return int(value)


def _template_kwargs(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, (str, bytes)):
        value = _json(value, "template_kwargs")
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidInputError(f"must be an object with string keys, got {preview(value)}", field="template_kwargs")
    reserved = sorted(RESERVED_TEMPLATE_KWARGS & set(value))
    if reserved:
        raise InvalidInputError(
            f"sets {', '.join(reserved)}, which kimi-recon sets itself; use the record's own "
            "'thinking'/'tools' (or the matching argument) instead",
            field="template_kwargs",
        )
    return dict(value)


def _json(text: str | bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except RecursionError:
        raise InvalidInputError("is JSON text nested too deeply", field=where) from None
    except ValueError as err:
        raise InvalidInputError(f"is text but not JSON ({err})", field=where) from None


class _ArrowTools(list[Any]):
    """A ``tools`` value read from an Arrow column (see :func:`arrow_tools`)."""


def arrow_tools(value: object) -> object:
    """``value`` marked as a ``tools`` value read from an Arrow column (a ``datasets`` or Ray batch), where a
    missing key and a null cannot be told apart; text and null stay as they are."""
    if hasattr(value, "tolist") and not isinstance(value, Mapping):  # a numpy array from Arrow/Ray batches
        value = value.tolist()
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return _ArrowTools(value)
    return value


def _tools(value: object, *, wrap: bool = True) -> tuple[tuple[dict[str, Any], ...] | None, tuple[Flag, ...]]:
    """The checked tools and what reading them changed. ``wrap``: bare function definitions are wrapped and other
    unwrapped tools refused (K2.x, whose official code tells the two apart; K3's renderer writes tools as given)."""
    if value is None:
        return None, ()
    from_arrow = isinstance(value, _ArrowTools)
    if isinstance(value, (str, bytes)):
        value = _json(value, "tools")
        if value is None:
            return None, ()
    if hasattr(value, "tolist") and not isinstance(value, Mapping):  # a numpy array from Arrow/Ray batches
        value = value.tolist()
    if isinstance(value, Mapping) or not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise InvalidInputError(f"must be a list of tool objects (or its JSON text), got {type(value).__name__}", field="tools")
    filled: list[str] = []
    ambiguous: list[str] = []
    tools = []
    try:
        for i, tool in enumerate(value):
            if not isinstance(tool, Mapping):
                raise InvalidInputError(f"must be a tool object, got {type(tool).__name__}", field=f"tools[{i}]")
            tools.append(_plain(tool, f"tools[{i}]", False, filled, ambiguous))
    except RecursionError:
        raise InvalidInputError(f"is nested more than {MAX_TOOLS_DEPTH} levels deep", field="tools") from None
    if ambiguous and (filled or from_arrow):
        sign = (
            f"Hugging Face datasets or Ray filled missing keys with null: {', '.join(filled[:3])}{' …' if len(filled) > 3 else ''}"
            if filled
            else "read from a batch column of objects, where Arrow fills every key any other row had with null"
        )
        raise InvalidInputError(
            f"went through Arrow ({sign}), and {', '.join(ambiguous[:3])} {'is' if len(ambiguous) == 1 else 'are'} "
            "null where a real null is allowed, so whether the original had that key cannot be told; "
            "store tools as JSON text (a string column) so they survive the round trip",
            field="tools",
        )
    if not tools:
        return None, ()
    tools, wrapped = _wrapped_tools(tools) if wrap else (tools, [])
    flags: tuple[Flag, ...] = ()
    if wrapped:
        flags += (
            Flag(
                FlagCode.TOOLS_WRAPPED,
                f"{', '.join(wrapped[:3])}{' …' if len(wrapped) > 3 else ''} had no {{\"type\": \"function\", \"function\": …}} "
                "wrapper; read as wrapped, the only shape a chat-completions server accepts",
                "tools",
            ),
        )
    if filled:
        flags = (
            Flag(
                FlagCode.TOOLS_NULL_FIELDS_REMOVED,
                f"removed {len(filled)} null field(s) that Arrow filled in (e.g. {filled[0]}); null is not a valid value there",
                "tools",
            ),
        )
    return tuple(tools), flags


#: The keys of an OpenAI function definition: a tool with a ``name`` and only these (and ``type: function``) is
#: one without its ``{"type": "function", "function": …}`` wrapper.
_FUNCTION_KEYS = frozenset({"name", "description", "parameters", "strict"})


def _wrapped_tools(tools: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """``tools`` with every bare function definition (``{"name", "parameters", …}``, also the Responses API's
    flat ``{"type": "function", "name", …}``) wrapped, and the fields of those that were.

    The official K2.5 code declares a tool it does not recognise as JSON instead of TypeScript, so a bare
    definition rendered as it is would give a prompt no server produced: a chat-completions server refuses
    tools without the wrapper. A tool that is neither shape nor wrapped is refused, naming it."""
    out: list[dict[str, Any]] = []
    wrapped: list[str] = []
    for i, tool in enumerate(tools):
        if "function" in tool:
            out.append(tool)
            continue
        keys = set(tool) - {"type"}
        if isinstance(tool.get("name"), str) and keys <= _FUNCTION_KEYS and tool.get("type", "function") == "function":
            out.append({"type": "function", "function": {k: v for k, v in tool.items() if k != "type"}})
            wrapped.append(f"tools[{i}]")
            continue
        raise InvalidInputError(
            f"has no 'function' object (keys: {', '.join(sorted(map(str, tool))) or 'none'}); a tool is "
            '{"type": "function", "function": {"name": …, "description": …, "parameters": …}}',
            field=f"tools[{i}]",
        )
    return out, wrapped


def _plain(value: Any, path: str, names: bool, filled: list[str], ambiguous: list[str], depth: int = 1) -> Any:
    """A JSON-like copy of ``value`` (numpy arrays and scalars made plain) without Arrow's filler nulls.

    ``names`` says the keys of this mapping are names the user chose (its values are schemas).
    """
    if depth > MAX_TOOLS_DEPTH:
        raise RecursionError
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                # JSON has only string keys; a tool the server accepted cannot hold another one.
                raise InvalidInputError(f"{path} has a key that is not a string: {preview(key)}", field="tools")
            where = f"{path}.{key}"
            if item is None:
                if names or key in _NEVER_NULL:
                    filled.append(where)
                    continue
                ambiguous.append(where)
            out[key] = _plain(item, where, not names and key in _SCHEMA_MAPS, filled, ambiguous, depth + 1)
        return out
    if isinstance(value, (list, tuple)) or (hasattr(value, "tolist") and hasattr(value, "dtype")):
        items = value.tolist() if hasattr(value, "tolist") else value
        if not isinstance(items, list):  # a numpy scalar
            return items
        return [_plain(item, f"{path}[{i}]", False, filled, ambiguous, depth + 1) for i, item in enumerate(items)]
    return value
