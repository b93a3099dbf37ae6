"""Errors of the OpenRouter adapter.

:class:`OpenRouterError` is what OpenRouter (or the transport to it) reported: an HTTP error status, an
``error`` object in a 200 body or in a stream chunk, a timeout. :class:`InvalidResponseError` is a
response that arrived but cannot be read as one assistant turn (no choices, nothing generated, arguments
that are not text). Both derive from :class:`~kimi_recon.errors.KimiReconError`.

Neither ever holds the API key: the code that owns the key scrubs every message with :func:`redact`
before it builds an error, and :meth:`OpenRouterError.redacted` re-scrubs one that came from elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import InvalidTurnError, KimiReconError

REDACTED = "[REDACTED]"

#: Shorter "secrets" are not scrubbed: a real OpenRouter key is ~70 characters, while scrubbing a
#: one-letter string would rewrite every word of every row that contains that letter.
MIN_SECRET_LENGTH = 8


def redact(value: Any, secret: str | None) -> Any:
    """``value`` with every occurrence of ``secret`` replaced, recursing into JSON-like containers."""
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return value
    if isinstance(value, str):
        return value.replace(secret, REDACTED)
    if isinstance(value, Mapping):
        return {redact(k, secret): redact(v, secret) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v, secret) for v in value]
    return value


class OpenRouterError(KimiReconError):
    """An error OpenRouter reported, or a failed exchange with it.

    ``code`` is the HTTP status or OpenRouter's ``error.code`` (an int such as 429 or 502, or a string
    such as ``"server_error"`` or ``"timeout"``); ``message`` is the human text; ``kind`` says where it
    came from (``http``, ``body``, ``stream``, ``timeout``, ``connection``); ``retryable`` whether trying
    again may help; ``response`` what had arrived before the error (a partial stream), when anything had;
    ``retries`` how many times the SDK had already retried the request, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | str | None = None,
        kind: str = "body",
        prompt_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        response: Mapping[str, Any] | None = None,
        retryable: bool = False,
        retries: int | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.kind = kind
        self.prompt_id = prompt_id
        self.metadata: Mapping[str, Any] = dict(metadata or {})
        self.response = response
        self.retryable = retryable
        self.retries = retries
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"prompt {self.prompt_id!r}: " if self.prompt_id is not None else ""
        code = f" {self.code}" if self.code is not None else ""
        return f"{where}OpenRouter {self.kind} error{code}: {self.message}"

    def _copy(self, **changes: Any) -> OpenRouterError:
        fields: dict[str, Any] = {
            "message": self.message,
            "code": self.code,
            "kind": self.kind,
            "prompt_id": self.prompt_id,
            "metadata": self.metadata,
            "response": self.response,
            "retryable": self.retryable,
            "retries": self.retries,
        }
        fields.update(changes)
        message = fields.pop("message")
        return type(self)(message, **fields)

    def with_prompt_id(self, prompt_id: str) -> OpenRouterError:
        """The same error, naming the prompt it happened on."""
        return self._copy(prompt_id=prompt_id)

    def redacted(self, secret: str | None) -> OpenRouterError:
        """The same error with ``secret`` scrubbed from every text it carries."""
        return self._copy(
            message=redact(self.message, secret),
            metadata=redact(self.metadata, secret),
            response=redact(self.response, secret) if self.response is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written into an output row."""
        out: dict[str, Any] = {"type": self.kind, "code": self.code, "message": self.message}
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


class InvalidResponseError(InvalidTurnError):
    """A response arrived but is not one readable assistant turn. ``sample`` names the prompt."""
