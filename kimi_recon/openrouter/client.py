"""The HTTP edge: an ``openai`` SDK client pointed at OpenRouter, and one chat completion per call.

Retries are the SDK's (``max_retries``): it retries 408, 409, 429, 5xx, timeouts and dropped
connections with exponential backoff, honours ``Retry-After``/``retry-after-ms`` up to 120 s, and does
not retry 400, 401, 402, 403. What it cannot see is a failure *after* the HTTP 200: OpenRouter reports
errors that happen during generation inside the body (``{"error": ...}``, ``finish_reason: "error"``) or
as a stream chunk, and a stream can stall or drop mid-way. :func:`retry_after_200` retries those, and
only those, with the same backoff shape, so SDK-level failures are never retried twice over.

The API key is only ever handed to the SDK; every error leaving this module has been scrubbed of it.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from .._base.arguments import instance_argument
from .errors import MIN_SECRET_LENGTH, InvalidResponseError, OpenRouterError, redact, redact_text
from .parse import assemble_stream, error_from_object, is_retryable_code, iter_sse_lines

if TYPE_CHECKING:
    from openai import OpenAI

DEFAULT_BASE_URL = "https://openrouter.ai/api/v1"
API_KEY_ENV = "OPENROUTER_API_KEY"
BASE_URL_ENV = "OPENROUTER_BASE_URL"

T = TypeVar("T")


#: What a self-hosted server is sent when no key is set: vLLM's and SGLang's documented placeholder (a server
#: started without ``--api-key`` accepts any).
LOCAL_PLACEHOLDER_KEY = "EMPTY"


def is_openrouter(base_url: str) -> bool:
    """True when ``base_url`` is OpenRouter's API (a key is required and is a secret); any other URL is a
    self-hosted or other OpenAI-compatible server, which may need no key."""
    host = base_url.split("://", 1)[-1].split("/", 1)[0].split("@")[-1].split(":")[0].lower()
    return host == "openrouter.ai" or host.endswith(".openrouter.ai")


def api_key_from_env(environ: Mapping[str, str] | None = None, *, base_url: str = DEFAULT_BASE_URL) -> str:
    """The key from ``OPENROUTER_API_KEY``; a clear error (without any key material) when unset and
    ``base_url`` is OpenRouter's. For another server (``--base-url http://127.0.0.1:8000/v1``) an unset key
    is :data:`LOCAL_PLACEHOLDER_KEY`: a local server needs none."""
    instance_argument(environ, "environ", Mapping, "a mapping of names to values", none=True)
    instance_argument(base_url, "base_url", str, "a URL")
    raw = (os.environ if environ is None else environ).get(API_KEY_ENV, "")
    key = instance_argument(raw, API_KEY_ENV, str, "a str").strip()
    if not key:
        if not is_openrouter(base_url):
            return LOCAL_PLACEHOLDER_KEY
        raise OpenRouterError(f"set {API_KEY_ENV} to your OpenRouter API key", code="no_api_key", kind="config")
    return checked_api_key(key, placeholder_ok=not is_openrouter(base_url))


def secret_of(key: str) -> str | None:
    """The part of ``key`` to keep out of every output: the key itself, or None for a placeholder too short to
    be a secret (``EMPTY``; a self-hosted server's), which is written nowhere as a key and scrubbed nowhere."""
    return key if len(key) >= MIN_SECRET_LENGTH else None


def checked_api_key(key: str, *, placeholder_ok: bool = False) -> str:
    """``key``, if an HTTP header can carry it and it is long enough to be scrubbed from the output.

    A key with a newline or a non-ASCII character cannot be sent at all: every request would fail in the
    transport, one error row per prompt, each counted as done. The error names the position and the kind
    of the character, never the character or any other part of the key. ``placeholder_ok`` (a server other
    than OpenRouter) lets a short placeholder such as vLLM's ``EMPTY`` through: it is no secret to keep out.
    """
    if not isinstance(key, str) or not key:
        raise OpenRouterError(f"the API key is empty; set {API_KEY_ENV}", code="bad_api_key", kind="config")
    for position, char in enumerate(key, 1):
        if not "!" <= char <= "~":
            kind = "a line break" if char in "\r\n" else "a space or control character" if char.isspace() or ord(char) < 32 or ord(char) == 127 else "a non-ASCII character"
            raise OpenRouterError(
                f"the API key holds {kind} at character {position} of {len(key)}; an HTTP header can only carry "
                f"printable ASCII (copied with a stray character? check {API_KEY_ENV})",
                code="bad_api_key",
                kind="config",
            )
    if len(key) < MIN_SECRET_LENGTH and not placeholder_ok:
        raise OpenRouterError(
            f"the API key has {len(key)} characters; one shorter than {MIN_SECRET_LENGTH} cannot be kept out of the output",
            code="bad_api_key",
            kind="config",
        )
    return key


def make_client(
    api_key: str,
    *,
    base_url: str = DEFAULT_BASE_URL,
    timeout: float = 600.0,
    max_retries: int = 4,
    app_url: str | None = None,
    app_title: str | None = None,
) -> OpenAI:
    """An ``openai.OpenAI`` client for OpenRouter. ``timeout`` bounds each connect/read/write, not the
    whole generation, so a long streamed answer is fine while a silent server is not."""
    from openai import OpenAI

    headers: dict[str, str] = {}
    if app_url:
        headers["HTTP-Referer"] = app_url
    if app_title:
        headers["X-Title"] = app_title
    return OpenAI(
        api_key=api_key,
        base_url=base_url,
        timeout=timeout,
        max_retries=max_retries,
        default_headers=headers or None,
        # An org/project id from OPENAI_* variables means nothing to OpenRouter; do not send it.
        organization=None,
        project=None,
    )


@dataclass(frozen=True)
class Fetched:
    """One response: the completion dict (assembled, for a stream) and how it was obtained."""

    response: dict[str, Any]
    retries: int
    stream: bool


def _sdk_error_types(base: list[type[BaseException]], transport_attr: str) -> tuple[type[BaseException], ...]:
    """``base`` plus the matching exception of whichever transport (httpx2 or httpx) is installed."""
    for module in ("httpx2", "httpx"):  # the transport the installed SDK uses, read mid-stream
        try:
            mod = __import__(module)
        except ImportError:
            continue
        base.append(getattr(mod, transport_attr))
    return tuple(base)


def _timeout_types() -> tuple[type[BaseException], ...]:
    import openai

    return _sdk_error_types([openai.APITimeoutError, TimeoutError], "TimeoutException")


def _transport_types() -> tuple[type[BaseException], ...]:
    import openai

    return _sdk_error_types([openai.APIConnectionError, ConnectionError], "TransportError")


def fetch(client: OpenAI, kwargs: Mapping[str, Any], *, secret: str | None = None) -> Fetched:
    """Send one chat completion request and return the raw response as a dict.

    Raises :class:`OpenRouterError` for an HTTP error status (after the SDK's retries), a timeout, a
    lost connection, an ``error`` in the 200 body, or an error chunk in a stream; and
    :class:`InvalidResponseError` for a body that is not JSON.
    """
    import openai

    stream = bool(kwargs.get("stream"))
    try:
        if stream:
            with client.chat.completions.with_streaming_response.create(**kwargs) as resp:
                retries = resp.retries_taken
                lines = _read_lines(iter_sse_lines(resp.iter_bytes()))
            _raise_if_plain_json_error(lines)
            return Fetched(assemble_stream(lines), retries, True)
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        try:
            response = json.loads(raw.content)
        except ValueError as err:
            # Redact before cutting: a cut through the key would leave a piece a later search misses.
            text = redact_text(raw.content[:2000].decode("utf-8", "replace"), secret)[:500]
            raise InvalidResponseError(f"body is not JSON ({err}): {text!r}", field="response") from None
        if not isinstance(response, dict):
            raise InvalidResponseError(f"body must be a JSON object, got {type(response).__name__}", field="response")
        if response.get("error") is not None:
            raise error_from_object(response["error"], kind="body", response=response)
        return Fetched(response, raw.retries_taken, False)
    except OpenRouterError as err:
        raise err.redacted(secret) from None
    except openai.APIStatusError as err:
        raise _status_error(err, secret) from None
    except openai.APITimeoutError as err:
        retries = _sdk_retries(err.request)
        raise OpenRouterError(
            f"request timed out ({retries} retries)", code="timeout", kind="timeout", retries=retries
        ) from None
    except openai.APIConnectionError as err:
        retries = _sdk_retries(err.request)
        cause = redact_text(str(err.__cause__ or err), secret)
        raise OpenRouterError(
            f"connection failed ({retries} retries): {cause}", code="connection", kind="connection", retries=retries
        ) from None


def _sdk_retries(request: Any) -> int | None:
    """How many retries the SDK had made when it gave up: it numbers each attempt in a request header."""
    try:
        return int(request.headers.get("x-stainless-retry-count"))
    except (AttributeError, TypeError, ValueError):
        return None


def _raise_if_plain_json_error(lines: list[str]) -> None:
    """A stream request can still be answered with a plain JSON error body (no ``data:`` lines)."""
    if any(line.startswith("data:") for line in lines):
        return
    try:
        body = json.loads("\n".join(lines))
    except ValueError:
        return  # assemble_stream reports the empty stream
    if isinstance(body, Mapping) and body.get("error") is not None:
        raise error_from_object(body["error"], kind="body", response=body)


def _read_lines(lines: Iterator[str]) -> list[str]:
    """Every SSE line; a stall or a drop mid-stream becomes a retryable stream error.

    The lines come from :func:`iter_sse_lines` over raw bytes, not from the SDK's ``iter_lines``:
    that one splits at U+2028 and friends, which can sit unescaped inside a chunk's JSON.
    """
    got: list[str] = []
    try:
        for line in lines:
            got.append(line)
    except UnicodeDecodeError as err:
        raise InvalidResponseError(f"stream is not UTF-8 ({err})", field="stream") from None
    except _timeout_types():
        raise OpenRouterError(
            f"stream stalled after {len(got)} lines (read timeout)", code="timeout", kind="stream", retryable=True
        ) from None
    except _transport_types() as err:
        raise OpenRouterError(
            f"stream broke after {len(got)} lines: {type(err).__name__}", code="connection", kind="stream", retryable=True
        ) from None
    return got


def _status_error(err: Any, secret: str | None) -> OpenRouterError:
    body = err.body
    message = err.message
    metadata: dict[str, Any] = {}
    if isinstance(body, Mapping):
        if isinstance(body.get("message"), str) and body["message"]:
            message = body["message"]
        if isinstance(body.get("metadata"), Mapping):
            metadata = dict(body["metadata"])
    elif isinstance(body, str) and body:
        metadata["body"] = redact_text(body[:2000], secret)[:500]  # redacted before the cut
    retry_after = err.response.headers.get("retry-after") if err.response is not None else None
    if retry_after is not None:
        metadata["retry_after"] = retry_after
    status = int(err.status_code)
    return OpenRouterError(
        redact_text(message, secret),
        code=status,
        kind="http",
        metadata=redact(metadata, secret, fragments=True),
        retryable=is_retryable_code(status),
        retries=_sdk_retries(err.response.request if err.response is not None else None),
    )


def backoff_delay(attempt: int, base: float = 0.5, cap: float = 8.0) -> float:
    """The SDK's schedule: ``base * 2**attempt`` capped at ``cap``, minus up to 25 % jitter."""
    return min(base * 2.0**attempt, cap) * (1 - 0.25 * random.random())


def retry_after_200(
    attempt: Callable[[], T],
    *,
    max_retries: int,
    base_delay: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[OpenRouterError], None] | None = None,
) -> tuple[T, int]:
    """``attempt()`` and the number of retries it took, retrying errors the SDK never saw.

    Only :class:`OpenRouterError` of kind ``body`` or ``stream`` marked retryable qualifies (an error
    object in a 200 body, an error chunk, a stalled or broken stream). HTTP statuses, timeouts and
    connection failures were already retried by the SDK and are raised at once.
    """
    retries = 0
    while True:
        try:
            return attempt(), retries
        except OpenRouterError as err:
            if err.kind not in ("body", "stream") or not err.retryable or retries >= max_retries:
                raise
            if on_retry is not None:
                on_retry(err)
            sleep(backoff_delay(retries, base_delay))
            retries += 1
