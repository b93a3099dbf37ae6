"""A loopback HTTP server that speaks OpenRouter's chat-completions wire format, for tests.

Stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port chosen by the OS), serving
``POST /api/v1/chat/completions``: JSON bodies, or SSE when the request has ``"stream": true``.
Each request's behaviour is scripted per prompt (keyed by the text of the last user message): a list
of :class:`Act` is consumed one per attempt; when it runs out, the prompt gets :meth:`default_reply`.
Every request is recorded (body, headers, time, attempt), so tests can count retries and check timing.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from openrouter_wire import call, completion, sse, stream_chunks

from kimi_recon.openrouter.generate import GenerateConfig
from kimi_recon.openrouter.options import RequestOptions


@dataclass
class Act:
    """One scripted answer. ``delay`` sleeps before answering (a client timeout shorter than it makes
    a timeout); ``stream`` lines are SSE lines sent with ``line_delay`` between them; ``drop_after``
    closes the connection after that many stream lines; ``echo_auth`` puts the request's
    Authorization header into the error message (a server that leaks what it was sent)."""

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    stream: list[str] | None = None
    line_delay: float = 0.0
    drop_after: int | None = None
    echo_auth: bool = False


@dataclass
class Seen:
    prompt: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float


#: A key that would be easy to spot anywhere it leaked.
API_KEY = "sk-or-v1-TESTKEY-0123456789abcdef-DO-NOT-LEAK"


class FakeOpenRouter:
    def __init__(self, api_key: str) -> None:
        self.api_key = api_key
        self.scripts: dict[str, list[Act]] = defaultdict(list)
        self.requests: list[Seen] = []
        self.default_delay = 0.0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/api/v1"

    def start(self) -> FakeOpenRouter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def script(self, prompt: str, *acts: Act) -> None:
        self.scripts[prompt].extend(acts)

    def seen(self, prompt: str | None = None) -> list[Seen]:
        with self._lock:
            return [r for r in self.requests if prompt is None or r.prompt == prompt]

    def default_reply(self, prompt: str, body: dict[str, Any]) -> Act:
        """A Kimi-like answer: reasoning, then content, or a tool call when tools were offered
        (with a server-issued ``call_`` id, as some providers do)."""
        tools = body.get("tools") or []
        if tools:
            name = tools[0]["function"]["name"]
            message = {"content": None, "reasoning": f"Use {name} for {prompt}.", "tool_calls": [call("call_srv1", name, '{"q": "x"}')]}
            resp = completion(message, "tool_calls")
        else:
            resp = completion({"content": f"Answer to {prompt}.", "reasoning": f"Thinking about {prompt}."})
        resp["usage"]["cost"] = 0.001
        if body.get("stream"):
            return Act(stream=sse(stream_chunks(resp, pieces=3)), delay=self.default_delay)
        return Act(body=resp, delay=self.default_delay)

    def _next(self, prompt: str, body: dict[str, Any]) -> Act:
        with self._lock:
            script = self.scripts.get(prompt)
            if script:
                return script.pop(0)
        return self.default_reply(prompt, body)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                prompt = _prompt_key(body)
                with fake._lock:
                    fake.requests.append(Seen(prompt, body, {k.lower(): v for k, v in self.headers.items()}, time.monotonic()))
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    if self.path != "/api/v1/chat/completions":
                        self._json(404, {"error": {"code": 404, "message": f"no route {self.path}"}})
                    elif self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                        self._json(401, {"error": {"code": 401, "message": "No auth credentials found"}})
                    else:
                        self._act(fake._next(prompt, body))
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout under test)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1

            def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _act(self, act: Act) -> None:
                if act.delay:
                    time.sleep(act.delay)
                if act.stream is None:
                    body = act.body
                    if act.echo_auth:
                        body = {"error": {"code": act.status, "message": f"rejected request with {self.headers.get('Authorization')}"}}
                    if isinstance(body, str):
                        body = body.encode()
                    self._json(act.status, body, act.headers)
                    return
                self.send_response(act.status)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                for k, v in act.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                for i, line in enumerate(act.stream):
                    if act.drop_after is not None and i >= act.drop_after:
                        break
                    self.wfile.write((line + "\n").encode())
                    self.wfile.flush()
                    if act.line_delay:
                        time.sleep(act.line_delay)
                self.close_connection = True

        return Handler


def _prompt_key(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"])
    return ""


#: For runs whose failures should come quickly: a short timeout and one fast retry.
QUICK_RETRIES: dict[str, Any] = {"timeout": 5.0, "max_retries": 1, "retry_base_delay": 0.01}


def generate_config(tmp_path: Path, fake: FakeOpenRouter, **changes: Any) -> GenerateConfig:
    """A run against ``fake``: ``tmp_path``'s prompts.jsonl into its out.jsonl, K2.5, no progress bar;
    ``changes`` set or override any other setting."""
    settings: dict[str, Any] = {
        "prompts": tmp_path / "prompts.jsonl",
        "output": tmp_path / "out.jsonl",
        "options": RequestOptions(model="moonshotai/kimi-k2.5"),
        "base_url": fake.base_url,
        "progress": False,
    }
    return GenerateConfig(**(settings | changes))
