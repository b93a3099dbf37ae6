"""The API key reaches no file in any spelling a response can carry (issue 35): as token ids
(``choices[].token_ids``, ``prompt_token_ids``), as logprob ``bytes``, or spelled otherwise in the text
(base64, hex, reversed, spaced, ``\\u``-escaped). Covered spellings: kimi_recon.openrouter.errors.secret_spellings."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from fake_openrouter import API_KEY, Act, FakeOpenRouter, generate_config
from openrouter_wire import completion, write_prompts

from kimi_recon import load_tokenizer
from kimi_recon.openrouter.errors import key_prefix
from kimi_recon.openrouter.generate import run_generate

PART = API_KEY[len(key_prefix(API_KEY)) :]


def _spelled_in_file(path: Path) -> list[str]:
    """Which spellings of the key the file holds, its ids decoded too."""
    import json

    tok = load_tokenizer()
    data = path.read_text(encoding="utf-8")
    found = [name for name, spelled in _spellings().items() if spelled in data]

    def walk(value: object, key: object) -> None:
        if isinstance(value, str):  # the text as read back (a spelling with a backslash is escaped in the file)
            found.extend(f"{name} in a string" for name, spelled in _spellings().items() if spelled in value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k, None)
                walk(v, k)
        elif isinstance(value, list):
            if value and all(type(v) is int for v in value):
                text = bytes(value).decode("utf-8", "replace") if key == "bytes" else tok.decode([v for v in value if 0 <= v < tok.vocab_size])
                if PART in text:
                    found.append(f"ids under {key}")
            else:
                for v in value:
                    walk(v, key)

    for line in data.splitlines():
        walk(json.loads(line), None)
    return found


def _spellings() -> dict[str, str]:
    return {
        "plain": PART,
        "base64": base64.b64encode(PART.encode()).decode()[4:-4],
        "hex": PART.encode().hex(),
        "reversed": PART[::-1],
        "spaced": " ".join(PART),
        # issue 35's adversarial run: written verbatim before (the first one-JSON-decode away, in the log)
        "u-escaped": "".join(f"\\u{ord(c):04x}" for c in PART),
        "percent-encoded": "".join(f"%{b:02X}" for b in PART.encode()),
        "percent-encoded lower": "".join(f"%{b:02x}" for b in PART.encode()),
    }


def _responses() -> dict[str, dict[str, Any]]:
    tok = load_tokenizer()
    key_ids = tok.encode("your key is " + API_KEY)
    as_bytes = [{"token": "x", "logprob": -0.1, "bytes": list(piece.encode())} for piece in ("key: ", API_KEY)]
    out = {
        "token_ids": completion({"content": "Hello"}, token_ids=key_ids),
        "prompt_token_ids": completion({"content": "Hello"}, prompt_token_ids=key_ids),
        "logprob bytes": completion({"content": "Hello"}, logprobs={"content": as_bytes}),
    }
    for name, spelled in _spellings().items():
        if name != "plain":
            out[f"text {name}"] = completion({"content": "Here: " + spelled.replace("\\\\", "\\\\")})
    return out


@pytest.mark.parametrize("case", sorted(_responses()))
def test_no_spelling_of_the_key_is_written(fake: FakeOpenRouter, tmp_path: Path, api_key: str, case: str) -> None:
    write_prompts(tmp_path / "prompts.jsonl", [{"id": "a", "messages": [{"role": "user", "content": "hi"}]}])
    body = _responses()[case]
    if "token_ids" in body or "prompt_token_ids" in body:  # (vLLM puts them on the choice and the body)
        body["choices"][0].update({k: body.pop(k) for k in ("token_ids", "prompt_token_ids") if k in body})
    fake.script("hi", Act(body=body))
    run_generate(generate_config(tmp_path, fake), api_key)
    assert _spelled_in_file(tmp_path / "out.jsonl") == []
