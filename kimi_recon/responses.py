"""Read chat-completion responses into :class:`~kimi_recon.models.AssistantTurn`.

One parser for every shape a response comes in: a whole chat completion (a dict, its JSON text, or an
``openai`` SDK object), one choice (``{"message", "finish_reason", "logprobs"}``), or a bare assistant
message; record-level ``finish_reason``/``logprobs`` can be passed in for shapes that lack them.

Everything here is pure: no I/O, no ``openai`` import (SDK objects are read through their ``to_dict`` /
``model_dump``, which also carry the fields the SDK does not model, such as ``reasoning``, from
``model_extra``). The rule throughout is *exact or loud*: text is kept byte for byte, and anything that
makes an exact rebuild impossible (hidden reasoning, a server-issued tool-call id, a truncated turn) is
recorded on the turn rather than smoothed over. ``lenient=True`` reads a response the way stored
datasets hold it instead (see :func:`turn_from_response`).

Streams are assembled into one chat completion by the OpenRouter adapter
(:func:`kimi_recon.openrouter.assemble_stream`) before they reach this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeGuard

from ._base.arguments import instance_argument, int_argument
from ._tool_call_ids import MODEL_TOOL_CALL_ID, model_tool_call_id
from .errors import GenerationFailedError, InvalidInputTypeError, InvalidResponseError, KimiReconError, ServerReportedError, as_text, preview
from .models import FINISH_REASONS, AssistantTurn, ToolCall, _call_of_proven_fields, _turn_of_proven_fields
from .servers import detect_server

__all__ = [
    "MESSAGE_FIELDS",
    "sounds_like_reasoning",
    "as_turn",
    "content_text",
    "error_from_object",
    "finish_reason_error",
    "is_model_call_id",
    "replace_foreign_call_ids",
    "to_plain",
    "turn_from_response",
]

#: native finish reasons that mean "stopped at the token limit" (providers spell it differently).
_NATIVE_LENGTH = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})

#: reasoning_details types that stand in for reasoning the provider did not hand back.
_HIDDEN_REASONING = frozenset({"reasoning.summary", "reasoning.encrypted"})

#: The fields of an assistant message that hold what the model generated. A mapping with none of them
#: (and no ``choices``/``message``) is not a turn: reading it as an empty one would be a silent wrong answer.
MESSAGE_FIELDS: tuple[str, ...] = ("content", "reasoning", "reasoning_content", "reasoning_details", "tool_calls")


# ---------------------------------------------------------------------------------------------------
# Tool-call ids


def is_model_call_id(call_id: str | None) -> bool:
    """True when ``call_id`` has the model's own ``functions.NAME:IDX`` shape (None counts: the
    renderer then writes that shape itself)."""
    instance_argument(call_id, "call_id", str, "a string or None", none=True)
    return call_id is None or MODEL_TOOL_CALL_ID.fullmatch(call_id) is not None


def _foreign_calls(calls: Sequence[ToolCall], offset: int) -> list[dict[str, Any]]:
    # (is_model_call_id less its argument check: a ToolCall's id is a str or None)
    fullmatch = MODEL_TOOL_CALL_ID.fullmatch
    return [
        {"index": i, "id": call.id, "suggested_id": model_tool_call_id(call.name, offset + i)}
        for i, call in enumerate(calls)
        if call.id is not None and fullmatch(call.id) is None
    ]


def replace_foreign_call_ids(turn: AssistantTurn, call_index_offset: int | None = None) -> AssistantTurn:
    """``turn`` with every id the model did not write (``call_…``, ``chatcmpl-tool-…``) replaced by
    ``functions.NAME:IDX`` from the conversation-wide call index.

    The model did write *some* id there; the conversation-wide index is what it writes when it follows
    its template, so this is the best guess, not a certainty: ``metadata['replaced_tool_call_ids']``
    keeps the originals. ``call_index_offset`` defaults to the one the turn was parsed with.
    """
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn (see as_turn)")
    int_argument(call_index_offset, "call_index_offset", minimum=0, none=True)
    if call_index_offset is None:
        call_index_offset = int(turn.metadata.get("call_index_offset", 0))
    foreign = _foreign_calls(turn.tool_calls, call_index_offset)
    if not foreign:
        return turn
    calls = list(turn.tool_calls)
    for entry in foreign:
        calls[entry["index"]] = replace(calls[entry["index"]], id=entry["suggested_id"])
    metadata = {k: v for k, v in turn.metadata.items() if k != "foreign_tool_call_ids"}
    metadata["replaced_tool_call_ids"] = foreign
    return replace(turn, tool_calls=tuple(calls), metadata=metadata)


# ---------------------------------------------------------------------------------------------------
# Errors carried inside responses


def _json_text(value: object) -> str:
    try:
        return json.dumps(value, default=str)
    except (RecursionError, ValueError):
        return preview(value, 1000)


def error_from_object(
    error: object, *, kind: str = "body", response: Mapping[str, Any] | None = None, sample: object = None
) -> ServerReportedError:
    """A :class:`ServerReportedError` from an ``{"code", "message", "metadata"}`` error object (OpenRouter's
    and OpenAI's shape; anything else becomes the message)."""
    code: int | str | None = None
    message: str
    metadata: Mapping[str, Any] | None = None
    if isinstance(error, Mapping):
        raw_code = error.get("code")
        if isinstance(raw_code, (int, str)) and not isinstance(raw_code, bool):
            code = raw_code
        raw_message = error.get("message")
        message = raw_message if isinstance(raw_message, str) and raw_message else _json_text(error)
        raw_metadata = error.get("metadata")
        metadata = raw_metadata if isinstance(raw_metadata, Mapping) else None
    else:
        message = as_text(error)
    return ServerReportedError(
        message,
        code=code,
        kind=kind,
        prompt_id=None if sample is None else as_text(sample),
        metadata=metadata,
        response=response,
    )


def finish_reason_error(
    native: object, *, kind: str = "body", response: Mapping[str, Any] | None = None, sample: object = None
) -> GenerationFailedError:
    """The :class:`GenerationFailedError` a ``finish_reason: "error"`` stands for: OpenRouter ends a failed
    generation that way, with the provider's code (when any) in ``native_finish_reason``."""
    instance_argument(kind, "kind", str, "a str")
    instance_argument(response, "response", Mapping, "a mapping", none=True)
    return GenerationFailedError(
        f"{'stream' if kind == 'stream' else 'generation'} ended with finish_reason 'error'",
        code=native if isinstance(native, (int, str)) else None,
        kind=kind,
        prompt_id=None if sample is None else as_text(sample),
        response=response,
    )


# ---------------------------------------------------------------------------------------------------
# Whole responses


def to_plain(value: Any) -> Any:
    """A JSON-like view of ``value``: a dict stays a dict; an ``openai`` SDK object becomes the dict the
    server sent (``to_dict`` keeps ``model_extra`` fields such as ``reasoning`` and drops unset ones)."""
    if isinstance(value, (Mapping, str, bytes, list, tuple)) or value is None:
        return value
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    model_dump = getattr(value, "model_dump", None)
    if callable(model_dump):
        return model_dump(mode="json", exclude_unset=True)
    return value


def content_text(content: Any, field: str = "content", sample: object = None) -> str | None:
    """The text of an OpenAI ``content`` value: a string, a list of text parts, or None.

    Non-text parts (images, audio) cannot appear in generated text, so they are an error, not skipped.
    """
    if content is None or isinstance(content, str):
        return content
    instance_argument(field, "field", str, "a string")
    if not _is_list(content):
        raise _fail(f"must be a string, a list of parts or null, got {type(content).__name__}", field, sample)
    pieces = []
    for i, part in enumerate(content):
        where = f"{field}[{i}]"
        if isinstance(part, str):
            pieces.append(part)
            continue
        if not isinstance(part, Mapping):
            raise _fail(f"must be a content part object, got {type(part).__name__}", where, sample)
        kind = part.get("type", "text")
        if kind not in ("text", "output_text"):
            raise _fail(f"has type {preview(kind)}; an assistant turn can only hold text parts", where, sample)
        text = part.get("text")
        if not isinstance(text, str):
            raise _fail(f"text part has no string 'text', got {type(text).__name__}", where, sample)
        pieces.append(text)
    return "".join(pieces)


def as_turn(turn: Any, *, sample: object = None) -> AssistantTurn:
    """``turn`` itself when it is an :class:`AssistantTurn`; anything else read by
    :func:`turn_from_response` as a stored response (``lenient=True``, ``finish_reason`` "stop" unless
    the response says otherwise). The door of every function that takes "a turn or a message"."""
    if isinstance(turn, AssistantTurn):
        return turn
    if type(turn) is dict:  # what turn_from_response does first with these arguments, without its argument checks
        fast = _plain_message_turn(turn, 0, "stop")
        if fast is not None:
            return fast
    return turn_from_response(turn, sample=sample, finish_reason="stop", lenient=True)


def _fail(message: str, field: str, sample: object) -> InvalidResponseError:
    return InvalidResponseError(message, field=field, sample=sample)


def _at(base: str | None, name: str) -> str:
    """The path of ``name`` inside ``base`` (``base`` None: the top of the response)."""
    return f"{base}.{name}" if base else name


def _is_list(value: object) -> TypeGuard[Sequence[Any]]:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def turn_from_response(
    response: Any,
    *,
    call_index_offset: int = 0,
    sample: object = None,
    choice: int = 0,
    field: str | None = None,
    finish_reason: str | None = None,
    logprobs: Any = None,
    lenient: bool = False,
) -> AssistantTurn:
    """The assistant turn in one chat-completion response.

    This is the one parser of assistant turns: every function that accepts a message, a response or a
    record reads it here. ``response`` is a chat completion (a dict, its JSON text, or an ``openai``
    ``ChatCompletion``), one choice (a dict or an SDK ``Choice`` with a ``message`` object), or a bare
    assistant message (a dict or an SDK ``ChatCompletionMessage``: ``content``,
    ``reasoning``/``reasoning_content``/``reasoning_details``, ``tool_calls``, and optionally its own
    ``finish_reason`` and ``logprobs``). A mapping that is none of these (no ``choices``, no ``message``,
    none of :data:`MESSAGE_FIELDS`) is refused, never read as an empty turn. ``choice`` is the ``index``
    of the choice to read.

    ``reasoning`` and ``reasoning_content`` are two names for one text: when both are non-empty and
    differ, the message is refused naming both fields (in both modes); an empty one defers to the other.
    ``call_index_offset`` is how many tool calls the conversation had before this turn (see
    :func:`kimi_recon.training.count_tool_calls`); it only feeds the suggested replacement for a foreign
    tool-call id. ``sample`` (the prompt or record id) is named in every error; ``field`` is where the
    response sits in a larger record: with ``field="response"`` errors name
    ``response.choices[0].message.tool_calls[0].function.name``.

    ``finish_reason`` and ``logprobs`` are used when the response carries none (record-level fields;
    their errors name ``finish_reason``/``logprobs``).

    ``lenient=False`` (the default) reads a response as it came off the wire, exact or loud: an
    ``error`` object (top level or in the choice) or ``finish_reason: "error"`` raises
    :class:`~kimi_recon.errors.ServerReportedError`; a turn with neither content nor tool calls nor reasoning,
    tool-call arguments that are not the text the model wrote, and non-function tool calls are refused;
    ``reasoning_details`` are read (text entries, or a
    summary/encrypted blob that marks the reasoning incomplete); ``native_finish_reason`` can turn the
    finish reason into ``length``, and an unknown finish reason becomes None (the original kept in
    ``metadata["finish_reason_raw"]``).

    ``lenient=True`` reads a response as datasets store it (what :mod:`kimi_recon.dataset` reads): it is
    looser about shapes, never about content. An empty turn is accepted; tool-call arguments may be a
    parsed object (rendered the way the chat template's ``tojson`` does) or missing; a tool call's
    ``type`` is not checked and falsy ``tool_calls`` mean none; the role must be ``"assistant"`` when
    given; ``choice`` is a position in ``choices``, whatever their ``index`` fields say; a message's own
    ``finish_reason`` key wins over the choice's, and an unknown finish reason is an error; logprob
    entries are not checked. Error objects, reasoning (``reasoning_details`` included) and
    ``native_finish_reason`` are read as in the strict mode: a stored summary is still not the reasoning.

    Raises :class:`~kimi_recon.errors.InvalidResponseError` (an :class:`~kimi_recon.errors.InvalidTurnError`)
    when ``response`` is not one readable turn.
    """
    if isinstance(choice, bool) or not isinstance(choice, int) or choice < 0:
        raise _fail(f"must be a non-negative integer, got {preview(choice)}", "choice", sample)
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise _fail(f"must be a string or None, got {type(finish_reason).__name__}", "finish_reason", sample)
    if type(lenient) is not bool:  # (an array has no truth to read; 1 or "yes" is no answer either)
        raise InvalidInputTypeError(f"must be True or False, got {type(lenient).__name__}", field="lenient")
    if field is not None and type(field) is not str:  # (it is written into every error's field name)
        raise InvalidInputTypeError(f"must be a string or None, got {type(field).__name__}", field="field")
    if lenient and logprobs is None and type(response) is dict:
        fast = _plain_message_turn(response, call_index_offset, finish_reason)
        if fast is not None:
            return fast
    resp = to_plain(response)
    if isinstance(resp, (str, bytes)):
        try:
            resp = json.loads(resp)
        except ValueError as err:
            raise _fail(f"is not JSON ({err})", field or "response", sample) from None
        except RecursionError:
            raise _fail("is JSON nested too deeply to read", field or "response", sample) from None
    if not isinstance(resp, Mapping):
        # an openai SDK user who streamed (stream=True) holds chunks, a list or the Stream itself
        chunks = "" if isinstance(resp, (int, float, bool)) or resp is None else (
            "; stream chunks (stream=True) are assembled by kimi_recon.openrouter.turn_from_stream(chunks), or "
            "kimi_recon.openrouter.assemble_stream(chunks) for the whole completion"
        )
        raise _fail(
            f"must be a chat completion, a choice or an assistant message object, got {type(resp).__name__}{chunks}",
            field or "response",
            sample,
        )
    if resp.get("error") is not None:
        raise error_from_object(resp["error"], response=resp, sample=sample)

    if "choices" in resp or resp.get("object") == "chat.completion":
        choices = resp.get("choices")
        if not _is_list(choices) or not choices:
            raise _fail("response has no choices", _at(field, "choices"), sample)
        position, ch = _pick_choice(choices, choice, field, sample, lenient)
        where: str | None = _at(field, f"choices[{position}]")
        if ch.get("error") is not None:
            raise error_from_object(ch["error"], response=resp, sample=sample)
    elif isinstance(resp.get("message"), Mapping):
        ch, where = resp, field
    else:  # a bare message: it is its own choice
        if not any(name in resp for name in MESSAGE_FIELDS):
            # the Responses API (client.responses.create, /v1/responses) gives a list of output items instead
            responses_api = (
                "; it is a Responses API object ('output' items), which is not read: ask the chat completions endpoint "
                "(client.chat.completions.create, /v1/chat/completions), whose message keeps the reasoning and tool calls"
                if isinstance(resp.get("output"), list) or resp.get("object") == "response"
                else ""
            )
            raise _fail(
                "is neither a chat completion (no 'choices'), nor a choice (no 'message'), nor an assistant message "
                f"(none of {', '.join(MESSAGE_FIELDS)}); keys found: {sorted(map(str, resp))[:10]}{responses_api}",
                field or "response",
                sample,
            )
        return _turn_from_parts(resp, resp, resp, field, field, call_index_offset, sample, finish_reason, logprobs, lenient)
    message = ch.get("message")
    if not isinstance(message, Mapping):
        raise _fail(f"must be a message object, got {type(message).__name__}", _at(where, "message"), sample)
    mwhere = _at(where, "message")
    return _turn_from_parts(resp, ch, message, where, mwhere, call_index_offset, sample, finish_reason, logprobs, lenient)


#: The keys of the stored message the fast reading takes (what datasets hold); any other key, which the general
#: reading may turn into metadata or an error, sends the message there.
_PLAIN_MESSAGE_KEYS = frozenset({"role", "content", "reasoning", "reasoning_content", "tool_calls", "finish_reason"})
#: a bare message needs one of them (MESSAGE_FIELDS less reasoning_details, which the fast reading does not take)
_GENERATED_KEYS = frozenset({"content", "reasoning", "reasoning_content", "tool_calls"})
_PLAIN_ARGUMENTS = frozenset({str, dict})
#: the finish reasons the fast reading takes: the known ones but "error" (the general reading raises on it)
_FAST_FINISH_REASONS = FINISH_REASONS - {"error"}


def _plain_message_turn(message: dict[str, Any], call_index_offset: int, finish_reason: str | None) -> AssistantTurn | None:
    """The turn :func:`turn_from_response` reads (``lenient=True``, no record-level logprobs) from a bare
    assistant message of the common shape, or None when ``message`` is anything else.

    The common shape: only :data:`_PLAIN_MESSAGE_KEYS`, one of them generated text or calls; the role "assistant" or absent; content, reasoning and
    reasoning_content strings or None, the two reasoning names not two different non-empty texts; tool calls
    None, empty or a list of dicts whose function is a dict with a non-empty string name and string or null
    arguments, or an object JSON can write, and a string or null id; a finish reason (the message's own when it
    has the key, else the record-level one) that is None or a known one other than "error". On it every check of the general reading passes and it reads no other key, so the turn is the
    same (``tests/test_fast_paths.py`` compares the two on generated messages, and rebuilds every turn it builds with
    the public constructors, whose checks it skips). Everything else
    (which may raise, or carry metadata) is left to the general reading: this one never raises."""
    keys = message.keys()
    if not keys <= _PLAIN_MESSAGE_KEYS or keys.isdisjoint(_GENERATED_KEYS):
        return None  # (a message with no generated field is refused by the general reading)
    if "finish_reason" in keys:  # some dumps put it in the message, where the general reading lets it win
        finish_reason = message["finish_reason"]
    if finish_reason is not None and (type(finish_reason) is not str or finish_reason not in _FAST_FINISH_REASONS):
        return None
    get = message.get
    if get("role", "assistant") != "assistant":
        return None
    content = get("content")
    reasoning = get("reasoning")
    other = get("reasoning_content")
    if (content is not None and type(content) is not str) or (reasoning is not None and type(reasoning) is not str) or (other is not None and type(other) is not str):
        return None
    metadata: dict[str, Any] = {"call_index_offset": call_index_offset}
    # _reasoning: the first name that is not None, unless it is empty and the other has text
    if reasoning is None or (not reasoning and other):
        reasoning, source = other, "reasoning_content"
    elif other and other != reasoning:
        return None  # two different texts: the general reading refuses them
    else:
        source = "reasoning"
    if reasoning is not None:
        metadata["reasoning_source"] = source
    raw_calls = get("tool_calls")
    calls: tuple[ToolCall, ...] = ()
    if raw_calls:
        if type(raw_calls) is not list:
            return None
        built = []
        for raw in raw_calls:
            function = raw.get("function") if type(raw) is dict else None
            if type(function) is not dict:
                return None
            name, arguments, call_id = function.get("name"), function.get("arguments"), raw.get("id")
            if type(name) is not str or not name or (arguments is not None and type(arguments) not in _PLAIN_ARGUMENTS) or (call_id is not None and type(call_id) is not str):
                return None
            if type(arguments) is dict:
                try:
                    built.append(ToolCall(id=call_id or None, name=name, arguments=arguments))
                except KimiReconError:  # arguments JSON cannot write: the general reading raises it, naming the call
                    return None
            else:  # every check of ToolCall's constructor passed above
                built.append(_call_of_proven_fields(call_id or None, name, "" if arguments is None else arguments))
        calls = tuple(built)
    if calls or finish_reason == "length":  # else nothing to note: a known finish reason is its own normalised one
        _note_ending(metadata, finish_reason, _finish_reason(finish_reason, None), calls, content, call_index_offset)
    # every check of AssistantTurn's constructor passed above
    return _turn_of_proven_fields(reasoning, content, calls, finish_reason, metadata)


def _note_ending(
    metadata: dict[str, Any], finish_reason: object, normalised: str | None, calls: tuple[ToolCall, ...], content: str | None, call_index_offset: int
) -> None:
    """What both readings note after the fields: the raw finish reason when it was normalised, where a cut fell,
    and the tool-call ids the model did not write itself."""
    if normalised != finish_reason:
        metadata["finish_reason_raw"] = finish_reason
    if normalised == "length":
        # Where the cut fell decides what the rebuilt ids end with (no </think>, no <|im_end|>).
        metadata["truncated_in"] = "tool_calls" if calls else "content" if content else "reasoning"
    foreign = _foreign_calls(calls, call_index_offset)
    if foreign:
        metadata["foreign_tool_call_ids"] = foreign


def _pick_choice(
    choices: Sequence[Any], wanted: int, field: str | None, sample: object, by_position: bool
) -> tuple[int, Mapping[str, Any]]:
    if by_position:
        positions: Sequence[int] = [wanted] if 0 <= wanted < len(choices) else []
    else:
        positions = range(len(choices))
    for position in positions:
        ch = choices[position]
        if not isinstance(ch, Mapping):
            raise _fail(f"must be an object, got {type(ch).__name__}", _at(field, f"choices[{position}]"), sample)
        if by_position or ch.get("index", position) == wanted:
            return position, ch
    how = "at position" if by_position else "with index"
    raise _fail(f"has no choice {how} {wanted}", _at(field, "choices"), sample)


def _turn_from_parts(
    resp: Mapping[str, Any],
    ch: Mapping[str, Any],
    message: Mapping[str, Any],
    where: str | None,
    mwhere: str | None,
    call_index_offset: int,
    sample: object,
    fallback_finish_reason: object,
    fallback_logprobs: object,
    lenient: bool,
) -> AssistantTurn:
    """The turn of choice ``ch`` (at ``where``) whose message is ``message`` (at ``mwhere``); for a bare
    message ``ch`` and ``message`` are the same object."""
    role = message.get("role", "assistant")
    if role not in (("assistant",) if lenient else ("assistant", None)):
        raise _fail(f"must be 'assistant', got {preview(role)}", _at(mwhere, "role"), sample)

    finish_reason, finish_where = ch.get("finish_reason"), _at(where, "finish_reason")
    if finish_reason is None:
        finish_reason, finish_where = fallback_finish_reason, "finish_reason"
    if lenient and "finish_reason" in message:  # some dumps put it in the message; it wins there
        finish_reason, finish_where = message["finish_reason"], _at(mwhere, "finish_reason")
    native = ch.get("native_finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise _fail(f"must be a string or null, got {type(finish_reason).__name__}", finish_where, sample)
    if finish_reason == "error":
        # OpenRouter ends a failed generation this way; what arrived is not a finished turn.
        raise finish_reason_error(native, response=resp, sample=sample)

    content = content_text(message.get("content"), _at(mwhere, "content"), sample)
    reasoning, reasoning_complete, reasoning_meta = _reasoning(message, mwhere, sample)
    calls = _tool_calls(message.get("tool_calls"), mwhere, sample, lenient)

    if lenient and finish_reason is not None and finish_reason not in FINISH_REASONS:
        raise _fail(
            f"unknown finish_reason {preview(finish_reason)}; expected one of {sorted(FINISH_REASONS)} or None",
            finish_where,
            sample,
        )
    normalised = _finish_reason(finish_reason, native)
    # A model that generated only its stop token gives an empty message that finished with "stop", and one
    # stopped before its first token by the length limit an empty "length" one: both are turns (the usage
    # check and the server flags say when more was generated).
    if not lenient and not content and not calls and not reasoning and reasoning_complete and normalised not in ("stop", "length"):
        raise _fail("has neither content nor tool calls nor reasoning", mwhere or "message", sample)

    metadata: dict[str, Any] = {"call_index_offset": call_index_offset}
    for key, name in (
        ("response_id", "id"),
        ("model", "model"),
        ("provider", "provider"),
        ("created", "created"),
        ("system_fingerprint", "system_fingerprint"),
        ("usage", "usage"),
    ):
        if resp.get(name) is not None:
            metadata[key] = resp[name]
    if native is not None:
        metadata["native_finish_reason"] = native
    metadata.update(reasoning_meta)
    _note_ending(metadata, finish_reason, normalised, calls, content, call_index_offset)
    metadata.update(_server_ids(resp, ch, where))
    # vLLM's stop_reason / SGLang's matched_stop: the id or the stop string the generation ended on
    matched = ch.get("stop_reason") if ch.get("stop_reason") is not None else ch.get("matched_stop")
    if matched is not None and ch is not message and normalised != "length":
        metadata["matched_stop"] = matched
    if ch is not message:
        detected = detect_server({"choices": [ch]} if "choices" not in resp else resp)
        if detected is not None:
            metadata["server_detected"] = detected

    raw_logprobs, logprobs_where = ch.get("logprobs"), _at(where, "logprobs")
    if raw_logprobs is None and fallback_logprobs is not None:
        raw_logprobs, logprobs_where = fallback_logprobs, "logprobs"
    return AssistantTurn(
        reasoning=reasoning,
        content=content,
        tool_calls=calls,
        finish_reason=normalised,
        reasoning_complete=reasoning_complete,
        logprobs=_logprobs(raw_logprobs, logprobs_where, sample, check_entries=not lenient),
        metadata=metadata,
    )


#: Where servers return the ids they generated, per choice (vLLM ``return_token_ids``: ``token_ids``; SGLang
#: ``return_token_ids``: ``response_token_ids``).
_CHOICE_OUTPUT_IDS = ("token_ids", "response_token_ids")


def _server_ids(resp: Mapping[str, Any], ch: Mapping[str, Any], where: str | None) -> dict[str, Any]:
    """The generated (and prompt) ids a server returned with the choice, and where they were found:
    ``metadata["server_token_ids"]``/``["server_token_ids_field"]``, ``["server_prompt_token_ids"]``/``["…_field"]``.

    vLLM writes ``choices[i].token_ids`` and ``prompt_token_ids`` (on the response); SGLang
    ``choices[i].response_token_ids`` and ``choices[i].prompt_token_ids``, or, asked through ``sglext``,
    ``sglext.output_ids[i]`` and ``sglext.input_ids`` (on the choice or the response); llama.cpp
    ``__verbose.tokens`` (on the response). A value of another
    shape is kept as found so the rebuild can say it was unusable."""
    out: dict[str, Any] = {}
    for name in _CHOICE_OUTPUT_IDS:
        if ch.get(name) is not None:
            out["server_token_ids"], out["server_token_ids_field"] = ch[name], _at(where, name) or name
            break
    else:
        for holder, at in ((ch, where), (resp, None)):
            ext = holder.get("sglext")
            ids = ext.get("output_ids") if isinstance(ext, Mapping) else None
            if isinstance(ids, list) and ids:
                index = ch.get("index", 0) if holder is resp else 0
                pick = ids[index] if isinstance(index, int) and 0 <= index < len(ids) and isinstance(ids[0], list) else ids
                out["server_token_ids"], out["server_token_ids_field"] = pick, _at(at, "sglext.output_ids") or "sglext.output_ids"
                break
        else:
            # llama.cpp's llama-server, asked "return_tokens" + "verbose": every generated id, the stop token
            # included (a streamed answer's list is empty: no ids there).
            verbose = resp.get("__verbose")
            tokens = verbose.get("tokens") if isinstance(verbose, Mapping) else None
            if tokens:
                out["server_token_ids"], out["server_token_ids_field"] = tokens, "__verbose.tokens"
    for holder, at in ((ch, where), (resp, None)):
        prompt, name = holder.get("prompt_token_ids"), "prompt_token_ids"
        ext = holder.get("sglext")
        if prompt is None and isinstance(ext, Mapping):
            prompt, name = ext.get("input_ids"), "sglext.input_ids"
        if isinstance(prompt, list) and prompt and not isinstance(prompt[0], list):
            # (kept as found: the rebuild refuses ids that are not token ids, naming this field)
            out["server_prompt_token_ids"], out["server_prompt_token_ids_field"] = prompt, _at(at, name) or name
            break
    return out


def _finish_reason(finish_reason: str | None, native: object) -> str | None:
    if finish_reason == "length" or (isinstance(native, str) and native.lower() in _NATIVE_LENGTH):
        return "length"
    if finish_reason is None or finish_reason in FINISH_REASONS:
        return finish_reason
    # An unknown reason is kept in metadata; guessing one would be worse than saying "unknown".
    return None


def _reasoning(message: Mapping[str, Any], where: str | None, sample: object) -> tuple[str | None, bool, dict[str, Any]]:
    """(reasoning text, whether it is the full raw reasoning, metadata about where it came from)."""
    meta: dict[str, Any] = {}
    plain: str | None = None
    plain_source: str | None = None
    for name in ("reasoning", "reasoning_content"):
        value = message.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _fail(f"must be a string or null, got {type(value).__name__}", _at(where, name), sample)
        if plain and value and value != plain:
            # Servers send one or both names for the same text; two different texts mean the record
            # was edited or merged, and which one the model generated is unknown.
            raise _fail(
                f"reasoning {_preview(plain)} and reasoning_content {_preview(value)} differ; a message may carry "
                "both only when they are equal (which one the model generated is unknown)",
                f"{_at(where, 'reasoning')}, {_at(where, 'reasoning_content')}",
                sample,
            )
        if plain is None or (not plain and value):
            plain, plain_source = value, name

    details = message.get("reasoning_details")
    texts: list[str] = []
    summaries: list[str] = []
    kinds: list[str] = []
    if details is not None:
        details_where = _at(where, "reasoning_details")
        if not _is_list(details):
            raise _fail(f"must be a list, got {type(details).__name__}", details_where, sample)
        for i, detail in enumerate(details):
            dwhere = f"{details_where}[{i}]"
            if not isinstance(detail, Mapping):
                raise _fail(f"must be an object, got {type(detail).__name__}", dwhere, sample)
            kind = detail.get("type")
            kinds.append(str(kind))
            if kind == "reasoning.text":
                text = detail.get("text")
                if text is None:  # an entry may carry only a signature
                    continue
                if not isinstance(text, str):
                    raise _fail(f"must be a string, got {type(text).__name__}", f"{dwhere}.text", sample)
                texts.append(text)
            elif kind == "reasoning.summary":
                summary = detail.get("summary")
                if isinstance(summary, str):
                    summaries.append(summary)
    if kinds:
        meta["reasoning_detail_types"] = sorted(set(kinds))
    unread = _unread_reasoning(message)
    if unread:
        meta["unread_reasoning_keys"] = unread

    has_text = any(kind == "reasoning.text" for kind in kinds) and bool(texts)
    if kinds and not has_text and any(kind in _HIDDEN_REASONING for kind in kinds):
        # Only a summary or an encrypted blob came back: the tokens the model generated are unknown.
        # Any plain ``reasoning`` string is then that summary, not the reasoning, so it is not used.
        summary = "".join(summaries) if summaries else plain
        if summary:
            meta["reasoning_summary"] = summary
        meta["reasoning_source"] = None
        return None, False, meta

    detail_text = "".join(texts) if has_text else None
    if plain and detail_text is not None and detail_text != plain:
        meta["reasoning_sources_disagree"] = True
    if plain or (plain is not None and detail_text is None):
        meta["reasoning_source"] = plain_source
        return plain, True, meta
    if detail_text is not None:
        meta["reasoning_source"] = "reasoning_details"
        return detail_text, True, meta
    return None, True, meta


#: The message keys the reader reads reasoning from; any other key that sounds like reasoning is not read.
_REASONING_KEYS = frozenset({"reasoning", "reasoning_content", "reasoning_details"})
#: What a key holding reasoning is called by the servers and libraries kimi-recon does not read (``thinking``,
#: ``reasoning_text``, LiteLLM's ``thinking_blocks``, ``thoughts``, ``cot``): such a key is noted, never guessed at.
_REASONING_LIKE = re.compile(r"(?:^|[_-])(?:reasoning|thinking|thought|cot(?:$|[_-]))")


def sounds_like_reasoning(key: object) -> bool:
    """Whether a message key sounds like one holding reasoning (``thinking``, ``reasoning_text``, ``thoughts``)."""
    return isinstance(key, str) and _REASONING_LIKE.search(key.lower()) is not None and "signature" not in key.lower()


def _unread_reasoning(message: Mapping[str, Any]) -> dict[str, str]:
    """The message keys that sound like reasoning, hold text (a non-empty string, or a list or object holding
    one) and are not read, each with that text (its strings joined): the reasoning a rebuild would leave out."""
    out: dict[str, str] = {}
    for key, value in message.items():
        if key in _REASONING_KEYS or not sounds_like_reasoning(key):
            continue
        text = "".join(_strings_in(value))
        if text.strip():
            out[key] = text
    return out


def _strings_in(value: object, depth: int = 0) -> list[str]:
    """The strings inside ``value`` (a string, or lists and objects of them; a signature's key is skipped)."""
    if isinstance(value, str):
        return [value]
    if depth > 8:
        return []
    if isinstance(value, Mapping):
        return [t for k, v in value.items() if k not in ("signature", "type", "id", "format", "index") for t in _strings_in(v, depth + 1)]
    if _is_list(value):
        return [t for v in value for t in _strings_in(v, depth + 1)]
    return []


def _preview(text: str, limit: int = 40) -> str:
    """``text`` quoted, cut to ``limit`` characters (an error message names it, it does not dump it)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}… ({len(text)} characters)"


def _tool_calls(raw_calls: object, where: str | None, sample: object, lenient: bool) -> tuple[ToolCall, ...]:
    if raw_calls is None or (lenient and not raw_calls):
        return ()
    calls_where = _at(where, "tool_calls")
    if not _is_list(raw_calls):
        raise _fail(f"must be a list, got {type(raw_calls).__name__}", calls_where, sample)
    calls = []
    for i, raw in enumerate(raw_calls):
        cwhere = f"{calls_where}[{i}]"
        if not isinstance(raw, Mapping):
            raise _fail(f"must be an object, got {type(raw).__name__}", cwhere, sample)
        kind = raw.get("type", "function")
        if not lenient and kind not in ("function", None):
            raise _fail(f"has type {preview(kind)}; only function calls can be rebuilt", f"{cwhere}.type", sample)
        function = raw.get("function")
        if not isinstance(function, Mapping):
            raise _fail("has no 'function' object", f"{cwhere}.function", sample)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"must be a non-empty string, got {preview(name)}", f"{cwhere}.function.name", sample)
        arguments = function.get("arguments")
        if lenient:
            arguments = "" if arguments is None else arguments
            if not isinstance(arguments, (str, Mapping)):
                raise _fail(
                    f"must be a JSON string or an object, got {type(arguments).__name__}",
                    f"{cwhere}.function.arguments",
                    sample,
                )
        elif not isinstance(arguments, str):
            # A parsed object (or null) means the server re-serialised or dropped the text the model
            # wrote; its exact spacing and key order are gone, so refuse rather than guess.
            raise _fail(
                f"must be the argument text the model generated (a string), got {type(arguments).__name__}",
                f"{cwhere}.function.arguments",
                sample,
            )
        call_id = raw.get("id")
        if call_id is not None and not isinstance(call_id, str):
            raise _fail(f"must be a string, got {type(call_id).__name__}", f"{cwhere}.id", sample)
        calls.append(ToolCall(id=call_id or None, name=name, arguments=arguments))
    return tuple(calls)


def _logprobs(raw: object, where: str, sample: object, *, check_entries: bool) -> tuple[Mapping[str, Any], ...] | None:
    if raw is None:
        return None
    entries, where = (raw.get("content"), f"{where}.content") if isinstance(raw, Mapping) else (raw, where)
    if entries is None:
        return None
    if not _is_list(entries):
        raise _fail(f"must be a list of token entries, got {type(entries).__name__}", where, sample)
    if check_entries:
        for i, entry in enumerate(entries):
            if not isinstance(entry, Mapping):
                raise _fail(f"must be an object, got {type(entry).__name__}", f"{where}[{i}]", sample)
    return tuple(entries)
