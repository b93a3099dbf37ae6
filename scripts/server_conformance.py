#!/usr/bin/env python3
"""Push raw Kimi outputs through real vLLM and SGLang builds and write what they return as golden files.

    python scripts/server_conformance.py            # regenerate tests/data/servers/
    python scripts/server_conformance.py --check    # regenerate into a temp dir and diff with the committed files

Fetches the server wheels from PyPI (``pip download --no-deps``: no torch, no engine) into a cache outside
the repository, unpacks their Python sources, makes a venv there with the pure-Python packages their
parsers import, and runs each build's own non-streaming chat-completion code with its engine imports
stubbed (scripts/servers/). Nothing of theirs is copied into this repository: the drivers import it.
Needs network access to PyPI on the first run (about 0.9 GB of wheels); later runs reuse the cache.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "scripts" / "servers"
OUT = REPO / "tests" / "data" / "servers"
DEFAULT_CACHE = Path(os.environ.get("KIMI_RECON_SERVERS_CACHE", Path.home() / ".cache" / "kimi-recon-servers"))

#: build -> (pip requirement, driver, unpacked top package)
BUILDS: dict[str, tuple[str, str, str]] = {
    "vllm==0.15.1": ("vllm==0.15.1", "drive_vllm.py", "vllm"),
    "vllm==0.33.0": ("vllm==0.33.0", "drive_vllm.py", "vllm"),
    "sglang==0.5.23": ("sglang==0.5.23", "drive_sglang.py", "sglang"),
}
#: builds whose streaming path is driven too (the parser's own per-delta entry point, ``parse_delta``),
#: written to tests/data/servers/stream/
STREAM_BUILDS = ("vllm==0.33.0",)
#: builds also run with vLLM's own slow incremental detokenizer at its default (spaces between added
#: tokens), written to tests/data/servers/spaced/; generated outputs only (the official turns would add
#: 2 MB and nothing new)
SPACED_BUILDS = ("vllm==0.15.1", "vllm==0.33.0")
#: what the parsers import that a server venv would have (pure Python here; torch never)
HARNESS_DEPS = ["pydantic", "regex", "partial-json-parser", "openai", "msgspec", "packaging", "numpy", "tiktoken", "jinja2", "tqdm"]
COMMAND = "python scripts/server_conformance.py"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=True, text=True, **kw)


def fetch_wheel(cache: Path, build: str) -> Path:
    requirement = BUILDS[build][0]
    name, version = requirement.split("==")
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q", requirement, "-d", str(wheels)])
        found = sorted(wheels.glob(f"{name}-{version}-*.whl"))
    if not found:
        raise SystemExit(f"pip download {requirement} left no wheel in {wheels}")
    return found[0]


def unpack(cache: Path, build: str, wheel: Path) -> Path:
    target = cache / "src" / build.replace("==", "-")
    marker = target / ".unpacked"
    if marker.exists() and marker.read_text() == wheel.name:
        return target
    with zipfile.ZipFile(wheel) as z:
        for member in z.namelist():
            if member.endswith((".py", ".json", ".jinja")):
                z.extract(member, target)
    marker.write_text(wheel.name)
    return target


def venv_python(cache: Path) -> Path:
    venv = cache / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        run([sys.executable, "-m", "venv", str(venv)])
        run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"])
        run([str(python), "-m", "pip", "install", "-q", *HARNESS_DEPS])
    # this checkout's kimi-recon (the tokenizer the parsers are given, the case builder); no deps pulled
    run([str(python), "-m", "pip", "install", "-q", "--no-deps", "-e", str(REPO)])
    return python


def freeze(python: Path) -> list[str]:
    out = run([str(python), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True).stdout
    return sorted(line for line in out.splitlines() if line and not line.startswith("-e"))


def golden_row(build: str, case: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {
        "case_id": case["case_id"],
        "server": build,
        "profile": case["profile"],
        "thinking": case["thinking"],
        "source": case["source"],
        "loss": case["loss"],
        "shape": case["shape"],
        "request": {"tools": case["tools"], "tool_choice": "auto" if case["tools"] else None, "chat_template_kwargs": {"thinking": case["thinking"]}},
        "prompt_tokens": len(case["prompt_ids"]),
        "history_tool_calls": sum(len(m.get("tool_calls") or []) for m in case["messages"] or [] if m.get("role") == "assistant"),
        "output_ids": case["output_ids"],
        "raw_text": case["raw_text"],
        "finished": case["finished"],
        "response": result.get("response"),
        "error": result.get("error"),
    }


def _write_rows(path: Path, build: str, cases: dict[str, dict[str, Any]], stdout: bytes) -> list[dict[str, Any]]:
    results = [json.loads(line) for line in stdout.decode("utf-8").splitlines() if line.startswith("{")]
    rows = [golden_row(build, cases[r["case_id"]], r) for r in results]
    text = "".join(json.dumps(row, ensure_ascii=False, sort_keys=True, separators=(",", ":")) + "\n" for row in rows)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return rows


def generate(cache: Path, out: Path, builds: list[str]) -> dict[str, Any]:
    python = venv_python(cache)
    cases_path = cache / "cases.jsonl"
    with cases_path.open("w", encoding="utf-8") as f:
        run([str(python), "-c", "import json,sys; sys.path.insert(0, sys.argv[1]); import cases\n"
             "for c in cases.all_cases(): print(json.dumps(c, ensure_ascii=False, sort_keys=True))", str(HERE)], stdout=f)  # fmt: skip
    cases = {c["case_id"]: c for c in map(json.loads, cases_path.read_text(encoding="utf-8").splitlines())}
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"command": COMMAND, "check": COMMAND + " --check", "builds": {}, "files": {}}
    if (out / "MANIFEST.json").exists():  # a run of some builds keeps the others' entries
        old = json.loads((out / "MANIFEST.json").read_text(encoding="utf-8"))
        for key in ("builds", "stream_builds", "spaced_builds"):
            manifest[key] = old.get(key, {})
    env = dict(os.environ, PYTHONHASHSEED="0", VLLM_LOGGING_LEVEL="ERROR", SGLANG_LOGGING_LEVEL="ERROR")
    for build in builds:
        wheel = fetch_wheel(cache, build)
        source = unpack(cache, build, wheel)
        driver = HERE / BUILDS[build][1]
        with cases_path.open("rb") as stdin:
            proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1]], stdin=stdin,
                                  capture_output=True, env=env, check=True)  # fmt: skip
        name = build.replace("==", "-") + ".jsonl"
        rows = _write_rows(out / name, build, cases, proc.stdout)
        manifest["builds"][build] = {"wheel": wheel.name, "wheel_sha256": sha256(wheel), "rows": len(rows), "file": name}
        if build in STREAM_BUILDS:
            with cases_path.open("rb") as stdin:
                proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1], "--stream"], stdin=stdin,
                                      capture_output=True, env=env, check=True)  # fmt: skip
            (out / "stream").mkdir(exist_ok=True)
            rows = _write_rows(out / "stream" / name, build, cases, proc.stdout)
            manifest.setdefault("stream_builds", {})[build] = {"rows": len(rows), "file": f"stream/{name}"}
        if build in SPACED_BUILDS:
            generated = "".join(json.dumps(c, ensure_ascii=False, sort_keys=True) + "\n" for c in cases.values() if c["source"] != "official")
            proc = subprocess.run([str(python), str(driver), str(source), build.split("==")[1], "--spaced"], input=generated.encode("utf-8"),
                                  capture_output=True, env=env, check=True)  # fmt: skip
            (out / "spaced").mkdir(exist_ok=True)
            rows = _write_rows(out / "spaced" / name, build, cases, proc.stdout)
            manifest.setdefault("spaced_builds", {})[build] = {"rows": len(rows), "file": f"spaced/{name}"}
    for path in sorted(out.rglob("*.jsonl")):
        manifest["files"][path.relative_to(out).as_posix()] = sha256(path)
    manifest["harness_venv"] = freeze(python)
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return manifest


def check(cache: Path, builds: list[str]) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        generate(cache, fresh, builds)
        status = 0
        names = {p.relative_to(fresh).as_posix() for p in fresh.rglob("*.jsonl")}
        if set(builds) == set(BUILDS):  # a full run also catches a committed file no build writes any more
            names |= {p.relative_to(OUT).as_posix() for p in OUT.rglob("*.jsonl")}
        for name in sorted(names):
            old = (OUT / name).read_text(encoding="utf-8").splitlines() if (OUT / name).exists() else []
            new = (fresh / name).read_text(encoding="utf-8").splitlines() if (fresh / name).exists() else []
            if old != new:
                status = 1
                diff = list(difflib.unified_diff(old, new, f"committed/{name}", f"regenerated/{name}", lineterm="", n=0))
                print(f"{name}: {len(diff)} diff lines", file=sys.stderr)
                print("\n".join(d[:400] for d in diff[:20]), file=sys.stderr)
        print("goldens match a fresh run" if status == 0 else f"goldens differ: run `{COMMAND}` and review", file=sys.stderr)
        return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="regenerate into a temp dir and diff with tests/data/servers/")
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="wheels, unpacked sources and the harness venv (default %(default)s)")
    ap.add_argument("--build", action="append", choices=sorted(BUILDS), help="only this build (repeatable)")
    args = ap.parse_args()
    builds = args.build or list(BUILDS)
    if args.check:
        return check(args.cache, builds)
    manifest = generate(args.cache, OUT, builds)
    for build, info in manifest["builds"].items():
        print(f"{build}: {info['rows']} rows -> tests/data/servers/{info['file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
