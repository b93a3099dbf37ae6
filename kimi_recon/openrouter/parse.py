"""Read OpenRouter chat completions, whole or streamed, into :class:`~kimi_recon.models.AssistantTurn`.

Whole responses are read by the core parser, :func:`kimi_recon.responses.turn_from_response` (pure, no
``openai`` import); this module adds stream assembly (chunk dicts, ``openai`` chunk objects or raw SSE)
and turns the errors a response carries into :class:`OpenRouterError`. The rule throughout is *exact or
loud*: text is kept byte for byte, and anything that makes an exact rebuild impossible (hidden
reasoning, a server-issued tool-call id, a truncated turn) is recorded on the turn rather than smoothed
over.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .. import responses
from .._base.files import SURROGATE
from ..errors import InvalidInputTypeError, ServerReportedError
from ..models import AssistantTurn
from ..render import model_tool_call_id as model_call_id
from ..responses import is_model_call_id, replace_foreign_call_ids, to_plain
from ..training import count_tool_calls
from .errors import InvalidResponseError, OpenRouterError, is_retryable_code

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
    "turn_from_openrouter",
    "turn_from_stream",
]


def _fail(message: str, field: str, sample: object) -> InvalidResponseError:
    return InvalidResponseError(message, field=field, sample=sample)


# ---------------------------------------------------------------------------------------------------
# Errors carried inside responses


def error_from_object(
    error: object, *, kind: str, response: Mapping[str, Any] | None = None, sample: object = None
) -> OpenRouterError:
    """An :class:`OpenRouterError` from OpenRouter's ``{"code", "message", "metadata"}`` error object."""
    core = responses.error_from_object(error, kind=kind, response=response, sample=sample)
    return OpenRouterError.from_response_error(core)


# ---------------------------------------------------------------------------------------------------
# Whole responses


def turn_from_openrouter(
    response: Any, *, call_index_offset: int = 0, sample: object = None, choice: int = 0
) -> AssistantTurn:
    """The assistant turn in one OpenRouter chat completion: :func:`kimi_recon.responses.turn_from_response`
    (strict), with the errors a response carries raised as :class:`OpenRouterError`.

    ``response`` is the parsed JSON (a dict), its text, or an ``openai`` ``ChatCompletion`` (a bare
    choice or assistant message is read too). ``call_index_offset`` is how many tool calls the conversation had before this turn (see
    :func:`count_tool_calls`); it only feeds the suggested replacement for a foreign tool-call id.
    ``sample`` (the prompt id) is named in every error.

    Raises :class:`OpenRouterError` when the response carries an ``error`` (top level or in the choice,
    or ``finish_reason: "error"``) and :class:`InvalidResponseError` when it is not one readable turn.
    """
    try:
        return responses.turn_from_response(response, call_index_offset=call_index_offset, sample=sample, choice=choice)
    except ServerReportedError as err:
        raise OpenRouterError.from_response_error(err) from None


# ---------------------------------------------------------------------------------------------------
# Streams


#: SSE ends a line at CR, LF or CRLF and nowhere else. ``str.splitlines`` (and so httpx's
#: ``iter_lines``) also splits at U+0085, U+2028, U+2029, which JSON leaves unescaped inside strings:
#: a model that writes one of them would have its chunk cut in two.
_SSE_EOL = re.compile(r"\r\n|\r|\n")


def iter_sse_lines(data: Iterable[bytes]) -> Iterator[str]:
    """SSE lines from raw body bytes as they arrive (chunk boundaries anywhere, even inside a UTF-8
    character or between CR and LF), split only where SSE splits."""
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise InvalidInputTypeError(f"must be an iterable of byte blocks, got {type(data).__name__}", field="stream")
    buffer = b""
    for block in data:
        if not isinstance(block, (bytes, bytearray)):
            raise InvalidInputTypeError(f"must hold bytes blocks, got {type(block).__name__}", field="stream")
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
            yield _utf8(line)
    if buffer:
        yield _utf8(buffer.rstrip(b"\r"))


def _utf8(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise InvalidResponseError(f"SSE text is not UTF-8 ({err.reason} at byte {err.start})", field="stream") from None


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
        except RecursionError:
            raise InvalidResponseError("SSE data is JSON nested too deeply to read", field="stream") from None
        except ValueError as err:
            raise InvalidResponseError(f"SSE data is not JSON ({err}): {payload[:200]!r}", field="stream") from None
        if not isinstance(value, Mapping):
            raise InvalidResponseError(f"SSE data must be a JSON object, got {type(value).__name__}", field="stream")
        yield value

    if isinstance(chunks, (str, bytes)) or not isinstance(chunks, Iterable):
        raise InvalidInputTypeError(f"must be an iterable of chunks or SSE lines, got {type(chunks).__name__}", field="stream")
    for chunk in chunks:
        item = chunk
        if isinstance(chunk, bytes):
            try:
                item = chunk.decode("utf-8")
            except UnicodeDecodeError as err:
                raise InvalidResponseError(f"SSE text is not UTF-8 ({err.reason} at byte {err.start})", field="stream") from None
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
    except RecursionError:
        return True  # complete enough to be read, and refused there
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
            "content": None if self.content is None else _joined(self.content),
        }
        if self.reasoning is not None:
            message["reasoning"] = _joined(self.reasoning)
        if self.reasoning_content is not None:
            message["reasoning_content"] = _joined(self.reasoning_content)
        if self.details:
            message["reasoning_details"] = [_details_joined(d) for d in self.details]
        if self.calls:
            message["tool_calls"] = [
                {
                    "id": call["id"],
                    "type": "function",
                    "index": index,
                    "function": {"name": call["name"], "arguments": _joined(call["arguments"])},
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
    if not isinstance(chunks, (str, bytes, Iterable)):
        raise InvalidInputTypeError(f"must be an iterable of chunks or SSE text, got {type(chunks).__name__}", field="stream")
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
        for field in ("id", "model", "provider", "created", "system_fingerprint", "timings"):
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
        error = responses.finish_reason_error(acc.native_finish_reason, kind="stream", response=acc.response(), sample=sample)
        raise OpenRouterError.from_response_error(error)
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
    for detail in _delta_list(delta, "reasoning_details", sample):
        _merge_detail(acc.details, detail, sample)
    for call in _delta_list(delta, "tool_calls", sample):
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


def join_surrogate_pairs(text: str) -> str:
    """``text`` with each high+low surrogate pair made the one character it encodes.

    A server that cuts its stream by UTF-16 code units sends an emoji as ``"\\ud83d"`` in one chunk and
    ``"\\ude00"`` in the next; each chunk's JSON then gives a lone surrogate, and concatenating the
    pieces gives two of them, not the emoji. Lone surrogates with no partner are left as they are.
    """
    if SURROGATE.search(text) is None:
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def _joined(parts: list[str]) -> str:
    return join_surrogate_pairs("".join(parts))


def _details_joined(detail: dict[str, Any]) -> dict[str, Any]:
    field = _DETAIL_TEXT_FIELD.get(str(detail.get("type")))
    if field is not None and isinstance(detail.get(field), str):
        return {**detail, field: join_surrogate_pairs(detail[field])}
    return detail


_DETAIL_TEXT_FIELD = {"reasoning.text": "text", "reasoning.summary": "summary", "reasoning.encrypted": "data"}


def _delta_list(delta: Mapping[str, Any], name: str, sample: object) -> Sequence[object]:
    """``delta[name]``, a list (empty when the delta has none); anything else is refused, naming the field."""
    items = delta.get(name)
    if items is None:
        return ()
    if not isinstance(items, Sequence) or isinstance(items, (str, bytes)):
        raise _fail(f"must be a list, got {type(items).__name__}", f"stream.delta.{name}", sample)
    return items


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
    """The assistant turn a stream carried: :func:`assemble_stream`, then :func:`turn_from_openrouter`."""
    return turn_from_openrouter(assemble_stream(chunks, sample=sample), call_index_offset=call_index_offset, sample=sample)


#: The name before issue 12 (it collided with kimi_recon.turn_from_response); kept for old code.
turn_from_response = turn_from_openrouter
