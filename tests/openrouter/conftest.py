"""Fixtures for the OpenRouter adapter tests: the API key, a loopback fake server, a loopback-only guard.

Nothing here reaches the internet: the server binds 127.0.0.1,
every client is pointed at it, and :func:`loopback_only` refuses any other connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_openrouter import API_KEY, FakeOpenRouter


@pytest.fixture
def api_key() -> str:
    return API_KEY


@pytest.fixture
def fake() -> Iterator[FakeOpenRouter]:
    server = FakeOpenRouter(API_KEY).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Safety net for "no test touches the internet": refuse any connection not to 127.0.0.1."""
    import socket

    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            raise OSError(f"test tried to reach {address!r}; only loopback is allowed")
        real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    # A proxy from the environment would route loopback requests elsewhere.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
