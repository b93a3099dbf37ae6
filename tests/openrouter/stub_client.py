"""An ``openai``-client stand-in answering fixed bytes (no HTTP), for tests that need a server's exact bytes
faster than the loopback server gives them: a JSON body, or SSE lines when the request streams."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass
class _Raw:
    content: bytes
    retries_taken: int = 0


@dataclass
class _Stream:
    lines: list[bytes]
    retries_taken: int = 0

    def iter_bytes(self) -> Any:
        return iter(self.lines)


class StubCompletions:
    """``chat.completions`` with its raw and streaming variants (all this object): a request with
    ``stream`` gets ``lines`` (by default ``body`` as one SSE event then ``[DONE]``), any other ``body``.
    Setting ``create`` on it replaces every variant (e.g. with one that raises an SDK error)."""

    def __init__(self, body: bytes, lines: list[bytes] | None = None) -> None:
        self.body = body
        self.lines = lines if lines is not None else [b"data: " + body + b"\n\n", b"data: [DONE]\n\n"]
        self.with_raw_response = self
        self.with_streaming_response = self

    def create(self, **kwargs: Any) -> Any:
        if kwargs.get("stream"):
            return self._stream()
        return _Raw(self.body)

    @contextmanager
    def _stream(self) -> Any:
        yield _Stream(self.lines)


class StubClient:
    def __init__(self, body: bytes, lines: list[bytes] | None = None) -> None:
        completions = StubCompletions(body, lines)
        self.chat = type("Chat", (), {"completions": completions})()
