"""Read OpenRouter chat completions, whole or streamed, into :class:`~kimi_recon.models.AssistantTurn`.

Everything here is pure: no I/O, no ``openai`` import (SDK objects are read through their ``to_dict`` /
``model_dump``, which also carry the fields the SDK does not model, such as ``reasoning``, from
``model_extra``). The rule throughout is *exact or loud*: text is kept byte for byte, and anything that
makes an exact rebuild impossible (hidden reasoning, a server-issued tool-call id, a truncated turn) is
recorded on the turn rather than smoothed over.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import InvalidTurnError
from ..models import FINISH_REASONS, AssistantTurn, ToolCall, content_text
from .errors import InvalidResponseError, OpenRouterError

__all__ = [
    "assemble_stream",
    "count_tool_calls",
    "error_from_object",
    "is_model_call_id",
    "is_retryable_code",
    "iter_sse_lines",
    "iter_stream_chunks",
    "model_call_id",
    "replace_foreign_call_ids",
    "to_plain",
    "turn_from_response",
    "turn_from_stream",
]

#: The id format Kimi writes itself after ``<|tool_call_begin|>``: ``functions.NAME:IDX``.
_MODEL_CALL_ID = re.compile(r"functions\.(?P<name>.+):(?P<index>\d+)")

#: native finish reasons that mean "stopped at the token limit" (providers spell it differently).
_NATIVE_LENGTH = frozenset({"length", "max_tokens", "max_output_tokens", "model_length"})

#: reasoning_details types that stand in for reasoning the provider did not hand back.
_HIDDEN_REASONING = frozenset({"reasoning.summary", "reasoning.encrypted"})

#: OpenRouter ``error.code`` strings (besides numeric HTTP-like codes) worth another attempt.
_RETRYABLE_CODE_NAMES = frozenset({"server_error", "timeout", "rate_limit_exceeded", "overloaded", "incomplete_stream"})


# ---------------------------------------------------------------------------------------------------
# Tool-call ids


def model_call_id(name: str, index: int) -> str:
    """The id the model itself writes for the ``index``-th tool call of a conversation."""
    return f"functions.{name}:{index}"


def is_model_call_id(call_id: str | None) -> bool:
    """True when ``call_id`` has the model's own ``functions.NAME:IDX`` shape (None counts: the
    renderer then writes that shape itself)."""
    return call_id is None or _MODEL_CALL_ID.fullmatch(call_id) is not None


def count_tool_calls(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many tool calls the assistant made in ``messages``: the index the next call gets.

    The model numbers its calls across the whole conversation, so a new turn's first call is not 0.
    """
    total = 0
    for message in messages:
        if isinstance(message, Mapping) and message.get("role") == "assistant":
            calls = message.get("tool_calls")
            if isinstance(calls, Sequence) and not isinstance(calls, (str, bytes)):
                total += len(calls)
    return total


def _foreign_calls(calls: Sequence[ToolCall], offset: int) -> list[dict[str, Any]]:
    return [
        {"index": i, "id": call.id, "suggested_id": model_call_id(call.name, offset + i)}
        for i, call in enumerate(calls)
        if not is_model_call_id(call.id)
    ]


def replace_foreign_call_ids(turn: AssistantTurn, call_index_offset: int | None = None) -> AssistantTurn:
    """``turn`` with every id the model did not write (``call_…``, ``chatcmpl-tool-…``) replaced by
    ``functions.NAME:IDX`` from the conversation-wide call index.

    The model did write *some* id there; the conversation-wide index is what it writes when it follows
    its template, so this is the best guess, not a certainty: ``metadata['replaced_tool_call_ids']``
    keeps the originals. ``call_index_offset`` defaults to the one the turn was parsed with.
    """
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


def is_retryable_code(code: object) -> bool:
    """True for codes that describe a passing condition: 408, 429, 5xx, or a known transient name."""
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool):
        return code in (408, 429) or code >= 500
    return isinstance(code, str) and code in _RETRYABLE_CODE_NAMES


def error_from_object(
    error: object, *, kind: str, response: Mapping[str, Any] | None = None, sample: object = None
) -> OpenRouterError:
    """An :class:`OpenRouterError` from OpenRouter's ``{"code", "message", "metadata"}`` error object."""
    code: int | str | None = None
    message: str
    metadata: Mapping[str, Any] | None = None
    if isinstance(error, Mapping):
        raw_code = error.get("code")
        if isinstance(raw_code, (int, str)) and not isinstance(raw_code, bool):
            code = raw_code
        raw_message = error.get("message")
        message = raw_message if isinstance(raw_message, str) and raw_message else json.dumps(error, default=str)
        raw_metadata = error.get("metadata")
        metadata = raw_metadata if isinstance(raw_metadata, Mapping) else None
    else:
        message = str(error)
    return OpenRouterError(
        message,
        code=code,
        kind=kind,
        prompt_id=None if sample is None else str(sample),
        metadata=metadata,
        response=response,
        retryable=is_retryable_code(code),
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


def _fail(message: str, field: str, sample: object) -> InvalidResponseError:
    return InvalidResponseError(message, field=field, sample=sample)


def turn_from_response(
    response: Any, *, call_index_offset: int = 0, sample: object = None, choice: int = 0
) -> AssistantTurn:
    """The assistant turn in one OpenRouter chat completion.

    ``response`` is the parsed JSON (a dict), its text, or an ``openai`` ``ChatCompletion``.
    ``call_index_offset`` is how many tool calls the conversation had before this turn (see
    :func:`count_tool_calls`); it only feeds the suggested replacement for a foreign tool-call id.
    ``sample`` (the prompt id) is named in every error.

    Raises :class:`OpenRouterError` when the response carries an ``error`` (top level or in the choice,
    or ``finish_reason: "error"``) and :class:`InvalidResponseError` when it is not one readable turn.
    """
    resp = to_plain(response)
    if isinstance(resp, (str, bytes)):
        try:
            resp = json.loads(resp)
        except ValueError as err:
            raise _fail(f"is not JSON ({err})", "response", sample) from None
    if not isinstance(resp, Mapping):
        raise _fail(f"must be a chat completion object, got {type(resp).__name__}", "response", sample)
    if resp.get("error") is not None:
        raise error_from_object(resp["error"], kind="body", response=resp, sample=sample)

    choices = resp.get("choices")
    if not isinstance(choices, Sequence) or isinstance(choices, (str, bytes)) or not choices:
        raise _fail("response has no choices", "choices", sample)
    position, ch = _pick_choice(choices, choice, sample)
    where = f"choices[{position}]"
    if ch.get("error") is not None:
        raise error_from_object(ch["error"], kind="body", response=resp, sample=sample)
    message = ch.get("message")
    if not isinstance(message, Mapping):
        raise _fail(f"must be a message object, got {type(message).__name__}", f"{where}.message", sample)
    return _turn_from_parts(resp, ch, message, where, call_index_offset, sample)


def _pick_choice(choices: Sequence[Any], wanted: int, sample: object) -> tuple[int, Mapping[str, Any]]:
    for position, ch in enumerate(choices):
        if not isinstance(ch, Mapping):
            raise _fail(f"must be an object, got {type(ch).__name__}", f"choices[{position}]", sample)
        if ch.get("index", position) == wanted:
            return position, ch
    raise _fail(f"has no choice with index {wanted}", "choices", sample)


def _turn_from_parts(
    resp: Mapping[str, Any],
    ch: Mapping[str, Any],
    message: Mapping[str, Any],
    where: str,
    call_index_offset: int,
    sample: object,
) -> AssistantTurn:
    mwhere = f"{where}.message"
    role = message.get("role", "assistant")
    if role not in ("assistant", None):
        raise _fail(f"must be 'assistant', got {role!r}", f"{mwhere}.role", sample)

    finish_reason = ch.get("finish_reason")
    native = ch.get("native_finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise _fail(f"must be a string or null, got {type(finish_reason).__name__}", f"{where}.finish_reason", sample)
    if finish_reason == "error":
        # OpenRouter ends a failed generation this way; what arrived is not a finished turn.
        raise OpenRouterError(
            "generation ended with finish_reason 'error'",
            code=native if isinstance(native, (int, str)) else None,
            kind="body",
            prompt_id=None if sample is None else str(sample),
            response=resp,
            retryable=True,
        )

    try:
        content = content_text(message.get("content"), f"{mwhere}.content")
    except InvalidTurnError as err:
        raise _fail(err.message, err.field or f"{mwhere}.content", sample) from None
    reasoning, reasoning_complete, reasoning_meta = _reasoning(message, mwhere, sample)
    calls = _tool_calls(message.get("tool_calls"), mwhere, sample)

    if not content and not calls and not reasoning and reasoning_complete:
        raise _fail("has neither content nor tool calls nor reasoning", mwhere, sample)

    metadata: dict[str, Any] = {"call_index_offset": call_index_offset}
    for key, field in (
        ("response_id", "id"),
        ("model", "model"),
        ("provider", "provider"),
        ("created", "created"),
        ("system_fingerprint", "system_fingerprint"),
        ("usage", "usage"),
    ):
        if resp.get(field) is not None:
            metadata[key] = resp[field]
    if native is not None:
        metadata["native_finish_reason"] = native
    metadata.update(reasoning_meta)

    normalised = _finish_reason(finish_reason, native)
    if normalised != finish_reason:
        metadata["finish_reason_raw"] = finish_reason
    if normalised == "length":
        # Where the cut fell decides what the rebuilt ids end with (no </think>, no <|im_end|>).
        metadata["truncated_in"] = "tool_calls" if calls else "content" if content else "reasoning"
    foreign = _foreign_calls(calls, call_index_offset)
    if foreign:
        metadata["foreign_tool_call_ids"] = foreign

    return AssistantTurn(
        reasoning=reasoning,
        content=content,
        tool_calls=calls,
        finish_reason=normalised,
        reasoning_complete=reasoning_complete,
        logprobs=_logprobs(ch.get("logprobs"), f"{where}.logprobs", sample),
        metadata=metadata,
    )


def _finish_reason(finish_reason: str | None, native: object) -> str | None:
    if finish_reason == "length" or (isinstance(native, str) and native.lower() in _NATIVE_LENGTH):
        return "length"
    if finish_reason is None or finish_reason in FINISH_REASONS:
        return finish_reason
    # An unknown reason is kept in metadata; guessing one would be worse than saying "unknown".
    return None


def _reasoning(message: Mapping[str, Any], where: str, sample: object) -> tuple[str | None, bool, dict[str, Any]]:
    """(reasoning text, whether it is the full raw reasoning, metadata about where it came from)."""
    meta: dict[str, Any] = {}
    plain: str | None = None
    plain_source: str | None = None
    for name in ("reasoning", "reasoning_content"):
        value = message.get(name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _fail(f"must be a string or null, got {type(value).__name__}", f"{where}.{name}", sample)
        if plain is None or (not plain and value):
            plain, plain_source = value, name

    details = message.get("reasoning_details")
    texts: list[str] = []
    summaries: list[str] = []
    kinds: list[str] = []
    if details is not None:
        if not isinstance(details, Sequence) or isinstance(details, (str, bytes)):
            raise _fail(f"must be a list, got {type(details).__name__}", f"{where}.reasoning_details", sample)
        for i, detail in enumerate(details):
            dwhere = f"{where}.reasoning_details[{i}]"
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


def _tool_calls(raw_calls: object, where: str, sample: object) -> tuple[ToolCall, ...]:
    if raw_calls is None:
        return ()
    if not isinstance(raw_calls, Sequence) or isinstance(raw_calls, (str, bytes)):
        raise _fail(f"must be a list, got {type(raw_calls).__name__}", f"{where}.tool_calls", sample)
    calls = []
    for i, raw in enumerate(raw_calls):
        cwhere = f"{where}.tool_calls[{i}]"
        if not isinstance(raw, Mapping):
            raise _fail(f"must be an object, got {type(raw).__name__}", cwhere, sample)
        kind = raw.get("type", "function")
        if kind not in ("function", None):
            raise _fail(f"has type {kind!r}; only function calls can be rebuilt", f"{cwhere}.type", sample)
        function = raw.get("function")
        if not isinstance(function, Mapping):
            raise _fail("has no 'function' object", f"{cwhere}.function", sample)
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"must be a non-empty string, got {name!r}", f"{cwhere}.function.name", sample)
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
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


def _logprobs(raw: object, where: str, sample: object) -> tuple[Mapping[str, Any], ...] | None:
    if raw is None:
        return None
    entries = raw.get("content") if isinstance(raw, Mapping) else raw
    if entries is None:
        return None
    if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
        raise _fail(f"must be a list of token entries, got {type(entries).__name__}", f"{where}.content", sample)
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            raise _fail(f"must be an object, got {type(entry).__name__}", f"{where}.content[{i}]", sample)
    return tuple(entries)


# ---------------------------------------------------------------------------------------------------
# Streams


#: SSE ends a line at CR, LF or CRLF and nowhere else. ``str.splitlines`` (and so httpx's
#: ``iter_lines``) also splits at U+0085, U+2028, U+2029, which JSON leaves unescaped inside strings:
#: a model that writes one of them would have its chunk cut in two.
_SSE_EOL = re.compile(r"\r\n|\r|\n")


def iter_sse_lines(data: Iterable[bytes]) -> Iterator[str]:
    """SSE lines from raw body bytes as they arrive (chunk boundaries anywhere, even inside a UTF-8
    character or between CR and LF), split only where SSE splits."""
    buffer = b""
    for block in data:
        buffer += block
        while True:
            cr, lf = buffer.find(b"\r"), buffer.find(b"\n")
            if cr < 0 and lf < 0:
                break
            if lf >= 0 and (cr < 0 or lf < cr):
                line, buffer = buffer[:lf], buffer[lf + 1 :]
            elif cr == len(buffer) - 1:
                break  # a CR at the end may be the first half of CRLF: wait for the next block
            else:
                line = buffer[:cr]
                buffer = buffer[cr + 2 :] if buffer[cr + 1 : cr + 2] == b"\n" else buffer[cr + 1 :]
            yield line.decode("utf-8")
    if buffer:
        yield buffer.rstrip(b"\r").decode("utf-8")


def iter_stream_chunks(chunks: Iterable[Any]) -> Iterator[Mapping[str, Any] | None]:
    """The chunk objects in ``chunks``, then ``None`` if a ``data: [DONE]`` line was seen.

    Items may be chunk dicts, ``openai`` ``ChatCompletionChunk`` objects, or raw SSE text (one line, or
    a block of lines, as str or bytes). Comment lines (``: OPENROUTER PROCESSING``) and ``event:``/``id:``
    fields are skipped; ``data:`` lines are joined until a blank line, as SSE specifies. A caller that
    already dropped the blank lines is tolerated: a new ``data:`` line closes a complete JSON payload.
    """
    pending: list[str] = []

    def flush() -> Iterator[Mapping[str, Any] | None]:
        if not pending:
            return
        payload = "\n".join(pending)
        pending.clear()
        if payload.strip() == "[DONE]":
            yield None
            return
        try:
            value = json.loads(payload)
        except ValueError as err:
            raise InvalidResponseError(f"SSE data is not JSON ({err}): {payload[:200]!r}", field="stream") from None
        if not isinstance(value, Mapping):
            raise InvalidResponseError(f"SSE data must be a JSON object, got {type(value).__name__}", field="stream")
        yield value

    for item in chunks:
        if isinstance(item, bytes):
            item = item.decode("utf-8")
        if isinstance(item, str):
            for line in _SSE_EOL.split(item):
                if line == "":
                    yield from flush()
                elif line.startswith(":"):
                    continue
                elif line.startswith("data:"):
                    data = line[5:]
                    data = data[1:] if data.startswith(" ") else data
                    if pending and _is_json("\n".join(pending)):
                        yield from flush()
                    pending.append(data)
                # other SSE fields (event:, id:, retry:) carry nothing a chat completion uses
            continue
        yield from flush()
        plain = to_plain(item)
        if not isinstance(plain, Mapping):
            raise InvalidResponseError(f"must be a chunk object or SSE text, got {type(item).__name__}", field="stream")
        yield plain
    yield from flush()


def _is_json(text: str) -> bool:
    if text.strip() == "[DONE]":
        return True
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


class _Assembly:
    """Mutable accumulator for one streamed choice; only :func:`assemble_stream` sees it."""

    def __init__(self) -> None:
        self.top: dict[str, Any] = {}
        self.usage: Any = None
        self.role = "assistant"
        self.content: list[str] | None = None
        self.reasoning: list[str] | None = None
        self.reasoning_content: list[str] | None = None
        self.details: list[dict[str, Any]] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: Any = None
        self.native_finish_reason: Any = None
        self.logprobs: list[Any] | None = None
        self.chunks = 0
        self.done = False

    def response(self) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": self.role,
            "content": None if self.content is None else "".join(self.content),
        }
        if self.reasoning is not None:
            message["reasoning"] = "".join(self.reasoning)
        if self.reasoning_content is not None:
            message["reasoning_content"] = "".join(self.reasoning_content)
        if self.details:
            message["reasoning_details"] = self.details
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "index": index,
                    "function": {"name": call["name"], "arguments": "".join(call["arguments"])},
                }
                for index, call in sorted(self.calls.items())
            ]
        choice: dict[str, Any] = {
            "index": 0,
            "message": message,
            "finish_reason": self.finish_reason,
            "native_finish_reason": self.native_finish_reason,
            "logprobs": None if self.logprobs is None else {"content": self.logprobs},
        }
        out = dict(self.top)
        out["object"] = "chat.completion"
        out["choices"] = [choice]
        if self.usage is not None:
            out["usage"] = self.usage
        return out


def assemble_stream(chunks: Iterable[Any], *, sample: object = None) -> dict[str, Any]:
    """One chat-completion dict (``object: "chat.completion"``) from a stream's chunks.

    Deltas are concatenated in arrival order: ``content``, ``reasoning``, ``reasoning_content``,
    ``reasoning_details`` (pieces of the same entry merged), ``logprobs.content``; tool calls are merged
    by ``index``, their id and name taken from the first delta that has them. Raises
    :class:`OpenRouterError` on an error chunk (carrying its code, message and what had arrived) and on
    a raw SSE stream that stopped before ``[DONE]`` without a finish reason (a dropped connection).
    """
    acc = _Assembly()
    # A whole SSE body may come as one string; a generator must be read once, to know if it is SSE.
    items: Sequence[Any] = [chunks] if isinstance(chunks, (str, bytes)) else list(chunks)
    saw_text = any(isinstance(item, (str, bytes)) for item in items)
    for chunk in iter_stream_chunks(items):
        if chunk is None:
            acc.done = True
            break
        acc.chunks += 1
        if chunk.get("error") is not None:
            raise error_from_object(chunk["error"], kind="stream", response=acc.response(), sample=sample)
        for field in ("id", "model", "provider", "created", "system_fingerprint"):
            if chunk.get(field) is not None:
                acc.top[field] = chunk[field]
        if chunk.get("usage") is not None:
            acc.usage = chunk["usage"]
        choices = chunk.get("choices") or []
        if not isinstance(choices, Sequence) or isinstance(choices, (str, bytes)):
            raise _fail(f"must be a list, got {type(choices).__name__}", "stream.choices", sample)
        for ch in choices:
            _merge_choice(acc, ch, sample)
    if acc.chunks == 0:
        raise _fail("stream carried no chunks", "stream", sample)
    if acc.finish_reason == "error":
        raise OpenRouterError(
            "stream ended with finish_reason 'error'",
            code=acc.native_finish_reason if isinstance(acc.native_finish_reason, (int, str)) else None,
            kind="stream",
            prompt_id=None if sample is None else str(sample),
            response=acc.response(),
            retryable=True,
        )
    if saw_text and not acc.done and acc.finish_reason is None:
        raise OpenRouterError(
            "stream ended before [DONE] and without a finish reason (connection dropped?)",
            code="incomplete_stream",
            kind="stream",
            prompt_id=None if sample is None else str(sample),
            response=acc.response(),
            retryable=True,
        )
    return acc.response()


def _merge_choice(acc: _Assembly, ch: object, sample: object) -> None:
    if not isinstance(ch, Mapping):
        raise _fail(f"must be an object, got {type(ch).__name__}", "stream.choices[]", sample)
    if ch.get("index", 0) != 0:
        raise _fail(f"has index {ch.get('index')!r}; only single-choice (n=1) streams are supported", "stream.choices[]", sample)
    if ch.get("error") is not None:
        raise error_from_object(ch["error"], kind="stream", response=acc.response(), sample=sample)
    delta = ch.get("delta") or {}
    if not isinstance(delta, Mapping):
        raise _fail(f"must be an object, got {type(delta).__name__}", "stream.choices[].delta", sample)
    if isinstance(delta.get("role"), str):
        acc.role = delta["role"]
    for name in ("content", "reasoning", "reasoning_content"):
        piece = delta.get(name)
        if piece is None:
            continue
        if not isinstance(piece, str):
            raise _fail(f"must be a string, got {type(piece).__name__}", f"stream.delta.{name}", sample)
        parts = getattr(acc, name)
        if parts is None:
            parts = []
            setattr(acc, name, parts)
        parts.append(piece)
    details = delta.get("reasoning_details")
    if details is not None:
        if not isinstance(details, Sequence) or isinstance(details, (str, bytes)):
            raise _fail(f"must be a list, got {type(details).__name__}", "stream.delta.reasoning_details", sample)
        for detail in details:
            _merge_detail(acc.details, detail, sample)
    calls = delta.get("tool_calls")
    if calls is not None:
        if not isinstance(calls, Sequence) or isinstance(calls, (str, bytes)):
            raise _fail(f"must be a list, got {type(calls).__name__}", "stream.delta.tool_calls", sample)
        for call in calls:
            _merge_call(acc.calls, call, sample)
    if ch.get("finish_reason") is not None:
        acc.finish_reason = ch["finish_reason"]
    if ch.get("native_finish_reason") is not None:
        acc.native_finish_reason = ch["native_finish_reason"]
    logprobs = ch.get("logprobs")
    if isinstance(logprobs, Mapping) and isinstance(logprobs.get("content"), Sequence):
        if acc.logprobs is None:
            acc.logprobs = []
        acc.logprobs.extend(logprobs["content"])


_DETAIL_TEXT_FIELD = {"reasoning.text": "text", "reasoning.summary": "summary", "reasoning.encrypted": "data"}


def _merge_detail(merged: list[dict[str, Any]], detail: object, sample: object) -> None:
    if not isinstance(detail, Mapping):
        raise _fail(f"must be an object, got {type(detail).__name__}", "stream.delta.reasoning_details[]", sample)
    kind = detail.get("type")
    text_field = _DETAIL_TEXT_FIELD.get(str(kind))
    last = merged[-1] if merged else None
    if last is not None and text_field is not None and last.get("type") == kind and last.get("index") == detail.get("index"):
        piece = detail.get(text_field)
        if piece is not None:
            if not isinstance(piece, str):
                raise _fail(f"must be a string, got {type(piece).__name__}", f"stream.delta.reasoning_details[].{text_field}", sample)
            last[text_field] = (last.get(text_field) or "") + piece
        for key, value in detail.items():  # signature, format, id: the latest non-null wins
            if key != text_field and value is not None:
                last[key] = value
        return
    merged.append(dict(detail))


def _merge_call(calls: dict[int, dict[str, Any]], delta: object, sample: object) -> None:
    where = "stream.delta.tool_calls[]"
    if not isinstance(delta, Mapping):
        raise _fail(f"must be an object, got {type(delta).__name__}", where, sample)
    index = delta.get("index")
    if index is None:
        # No index: a delta with a new id starts a call, anything else continues the last one.
        last = max(calls) if calls else None
        starts = last is None or (delta.get("id") is not None and delta.get("id") != calls[last]["id"])
        index = (0 if last is None else last + 1) if starts else last
    if not isinstance(index, int) or isinstance(index, bool):
        raise _fail(f"must be an integer, got {index!r}", f"{where}.index", sample)
    call = calls.setdefault(index, {"id": None, "name": None, "arguments": []})
    call_id = delta.get("id")
    if call_id is not None:
        if not isinstance(call_id, str):
            raise _fail(f"must be a string, got {type(call_id).__name__}", f"{where}.id", sample)
        if call["id"] is None:
            call["id"] = call_id
        elif call["id"] != call_id:
            raise _fail(f"call {index} changed id from {call['id']!r} to {call_id!r}", f"{where}.id", sample)
    function = delta.get("function") or {}
    if not isinstance(function, Mapping):
        raise _fail(f"must be an object, got {type(function).__name__}", f"{where}.function", sample)
    name = function.get("name")
    if name:
        if call["name"] is None:
            call["name"] = name
        elif call["name"] != name:
            raise _fail(f"call {index} changed name from {call['name']!r} to {name!r}", f"{where}.function.name", sample)
    arguments = function.get("arguments")
    if arguments is not None:
        if not isinstance(arguments, str):
            raise _fail(
                f"must be a string fragment, got {type(arguments).__name__}", f"{where}.function.arguments", sample
            )
        call["arguments"].append(arguments)


def turn_from_stream(chunks: Iterable[Any], *, call_index_offset: int = 0, sample: object = None) -> AssistantTurn:
    """The assistant turn a stream carried: :func:`assemble_stream`, then :func:`turn_from_response`."""
    return turn_from_response(assemble_stream(chunks, sample=sample), call_index_offset=call_index_offset, sample=sample)
