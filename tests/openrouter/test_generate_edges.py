"""``generate`` at its edges: options checked before anything is sent, outputs that cannot be a resumable
log refused, unreadable prompt lines and odd response text written as rows, and the API key never on disk,
not even a piece of it."""

from __future__ import annotations

import json
import os
import string
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from extras import require
from fake_openrouter import QUICK_RETRIES, Act, FakeOpenRouter, generate_config
from hypothesis import given
from hypothesis import strategies as st
from openrouter_wire import completion, pieces, read_rows, stream_chunks, user_prompt, write_prompts
from stub_client import StubClient

from kimi_recon.errors import InvalidInputError, OutputFileError
from kimi_recon.openrouter.cli import main
from kimi_recon.openrouter.errors import redact_text
from kimi_recon.openrouter.generate import GenerateConfig, run_generate
from kimi_recon.openrouter.options import RequestOptions
from kimi_recon.openrouter.output import OutputFile, encode_row

REPO = Path(__file__).resolve().parents[2]


def args_for(prompts: Path, out: str, fake: FakeOpenRouter, *extra: str) -> list[str]:
    return ["generate", str(prompts), "-o", out, "--base-url", fake.base_url, "--timeout", "5", "--no-progress", *extra]


def config(tmp_path: Path, fake: FakeOpenRouter, **changes: Any) -> GenerateConfig:
    return generate_config(tmp_path, fake, **(QUICK_RETRIES | changes))


# -- options -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        ["--timeout", "0"], ["--timeout", "-1"], ["--timeout", "nan"], ["--timeout", "inf"], ["--limit", "-1"],
        ["--concurrency", "0"], ["--max-retries", "-1"], ["--max-cost", "-0.5"], ["--max-tokens", "0"],
        ["--top-p", "0"], ["--top-p", "1.5"], ["--temperature", "-1"], ["--top-logprobs", "21"],
        ["--reasoning-effort", "extreme"], ["--base-url", "ftp://example.org"], ["--model", ""], ["--limit", "two"],
    ],
    ids=lambda a: " ".join(a),
)  # fmt: skip
def test_a_bad_option_is_a_usage_error_before_anything_is_sent(
    bad: list[str], fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    prompts = write_prompts(tmp_path / "p.jsonl", [user_prompt("x", "a")])
    out = tmp_path / "o.jsonl"
    with pytest.raises(SystemExit) as exit_:
        main(args_for(prompts, str(out), fake, *bad))
    assert exit_.value.code == 2
    assert bad[0] in capsys.readouterr().err
    assert not fake.seen() and not out.exists()


@pytest.mark.parametrize(
    "change", [{"timeout": 0}, {"timeout": -1.0}, {"limit": -1}, {"max_cost": float("nan")}, {"concurrency": 0}, {"profile": "kimi-k9"}, {"base_url": "example.org"}]
)
def test_the_config_refuses_bad_settings_naming_the_field(change: dict[str, Any], fake: FakeOpenRouter, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError):
        config(tmp_path, fake, **change)


# -- outputs -----------------------------------------------------------------------------------------


def test_dash_as_output_is_refused_and_no_file_named_dash_appears(
    fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    monkeypatch.chdir(tmp_path)
    prompts = write_prompts(tmp_path / "p.jsonl", [user_prompt("x", "a")])
    with pytest.raises(SystemExit) as exit_:
        main(args_for(prompts, "-", fake))
    assert exit_.value.code == 2
    assert "append-only log" in capsys.readouterr().err
    assert not (tmp_path / "-").exists() and not fake.seen()
    with pytest.raises(OutputFileError):  # the API refuses it too
        OutputFile("-").open()


def test_a_device_as_output_is_refused_without_reading_it(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", [user_prompt("x", "a")])
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(PYTHONPATH=str(REPO), OPENROUTER_API_KEY=api_key, NO_PROXY="127.0.0.1,localhost")
    cmd = [sys.executable, "-m", "kimi_recon.openrouter", *args_for(prompts, "/dev/full", fake)]
    result = subprocess.run(cmd, env=env, check=False, capture_output=True, timeout=60)  # before: read /dev/full until memory ran out
    assert result.returncode == 2
    assert b"not a regular file" in result.stderr
    assert not fake.seen()


@pytest.mark.parametrize("link", ["same path", "symlink"])
def test_the_prompt_file_as_output_is_refused_and_kept(link: str, fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps(user_prompt("x", "a")))  # no final newline: a resume "repair" would cut it
    before = prompts.read_bytes()
    out = prompts
    if link == "symlink":
        out = tmp_path / "out.jsonl"
        out.symlink_to(prompts)
    with pytest.raises(OutputFileError, match="also the input"):
        run_generate(config(tmp_path, fake, output=out), api_key)
    assert prompts.read_bytes() == before and not fake.seen()


def test_prompts_from_stdin(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(PYTHONPATH=str(REPO), OPENROUTER_API_KEY=api_key, NO_PROXY="127.0.0.1,localhost")
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "kimi_recon.openrouter", *args_for(Path("-"), str(out), fake)]
    data = (json.dumps(user_prompt("x", "a")) + "\n").encode()
    result = subprocess.run(cmd, env=env, input=data, check=False, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert [r["id"] for r in read_rows(out)] == ["a"]


# -- unreadable prompt lines -------------------------------------------------------------------------


def test_every_unreadable_prompt_line_becomes_an_error_row_and_the_rest_are_sent(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    path = tmp_path / "prompts.jsonl"
    lines = [
        json.dumps(user_prompt("good1", "g1")).encode(),
        b'{"id": "bytes", "messages": [{"role": "user", "content": "caf\xe9"}]}',  # Latin-1, not UTF-8
        json.dumps(user_prompt("lone \ud800 surrogate", "surrogate")).encode(),  # json.dumps escapes it: \ud800
        b'{"id": "\\udc00", "messages": [{"role": "user", "content": "x"}]}',  # a surrogate in the id itself
        b'{"id": "deep", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        json.dumps(user_prompt(f"my key is {api_key}", "leak")).encode(),
        json.dumps(user_prompt("good2", "g2")).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    summary, rows = run_generate(config(tmp_path, fake), api_key), read_rows(tmp_path / "out.jsonl")
    by_line = {r["line"]: r for r in rows}
    assert len(rows) == len(lines) and summary.ok == 2 and summary.errors == 5
    assert {by_line[1]["status"], by_line[7]["status"]} == {"ok"}
    assert "not UTF-8" in by_line[2]["error"]["message"]
    assert by_line[3]["id"] == "surrogate" and "surrogate" in by_line[3]["error"]["message"]
    assert by_line[4]["id"] == "line-4" and "surrogate" in by_line[4]["error"]["message"]
    assert "nested too deeply" in by_line[5]["error"]["message"]
    assert "holds the API key" in by_line[6]["error"]["message"]
    assert api_key not in (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert sorted(s.prompt for s in fake.seen()) == ["good1", "good2"]
    again = run_generate(config(tmp_path, fake), api_key)
    assert (again.written, len(fake.seen())) == (0, 2)  # error rows are done: a rerun sends nothing


# -- odd response text -------------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_response_is_written_escaped_and_flagged_and_not_paid_twice(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(body=completion({"content": "bad \ud800 char", "reasoning": "r"})))  # sent as the escape \ud800
    write_prompts(tmp_path / "prompts.jsonl", [user_prompt("p1", "a"), user_prompt("p2", "b")])
    summary = run_generate(config(tmp_path, fake), api_key)
    rows = {r["id"]: r for r in read_rows(tmp_path / "out.jsonl")}
    assert summary.written == 2
    assert rows["a"]["response"]["choices"][0]["message"]["content"] == "bad \ud800 char"  # read back exactly
    assert "lone_surrogate" in [f["code"] for f in rows["a"]["flags"]]
    assert "lone_surrogate" not in [f["code"] for f in rows["b"]["flags"]]
    run_generate(config(tmp_path, fake), api_key)
    assert len(fake.seen("p1")) == 1


def test_an_emoji_split_across_two_stream_chunks_arrives_whole(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    whole = completion({"content": "smile 😀 done", "reasoning": "r"})
    chunks = stream_chunks(whole, pieces=1)
    content_chunk = next(i for i, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("content"))
    first, second = json.loads(json.dumps(chunks[content_chunk])), json.loads(json.dumps(chunks[content_chunk]))
    first["choices"][0]["delta"]["content"] = "smile \ud83d"  # cut between the two UTF-16 halves of the emoji
    second["choices"][0]["delta"]["content"] = "\ude00 done"
    chunks[content_chunk : content_chunk + 1] = [first, second]
    lines = [line for c in chunks for line in (f"data: {json.dumps(c)}", "")] + ["data: [DONE]", ""]  # ASCII JSON: \ud83d escapes
    fake.script("p1", Act(stream=lines))
    write_prompts(tmp_path / "prompts.jsonl", [user_prompt("p1", "a")])
    summary = run_generate(config(tmp_path, fake, options=RequestOptions(model="m", stream=True)), api_key)
    row = read_rows(tmp_path / "out.jsonl")[0]
    assert summary.ok == 1
    assert row["response"]["choices"][0]["message"]["content"] == "smile 😀 done"
    assert "lone_surrogate" not in [f["code"] for f in row["flags"]]


def test_a_key_echoed_into_the_content_is_redacted_and_its_ids_are_not_written(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(body=completion({"content": f"your key is {api_key}!", "reasoning": "r"})))
    write_prompts(tmp_path / "prompts.jsonl", [user_prompt("p1", "a"), user_prompt("p2", "b")])
    summary = run_generate(config(tmp_path, fake, training_sample=True, prompt_ids=True), api_key)
    rows = {r["id"]: r for r in read_rows(tmp_path / "out.jsonl")}
    assert (summary.ok, summary.errors) == (1, 1)
    leaked = rows["a"]
    assert leaked["status"] == "error" and leaked["error"]["type"] == "api_key_in_response"
    assert "api_key_in_text" in [f["code"] for f in leaked["flags"]]
    assert not {"output_ids", "prompt_ids", "sample"} & leaked.keys()  # ids would decode to the key
    assert leaked["response"]["choices"][0]["message"]["content"] == "your key is [REDACTED]!"
    assert "output_ids" in rows["b"] and "sample" in rows["b"]
    assert api_key not in (tmp_path / "out.jsonl").read_text(encoding="utf-8")


def test_a_row_that_cannot_be_serialised_still_becomes_a_row() -> None:
    data = encode_row({"id": "a", "status": "ok", "response": {"x": object()}})
    row = json.loads(data)
    assert (row["id"], row["status"], row["error"]["type"]) == ("a", "error", "unwritable_row")


# -- no piece of the key, wherever a message is cut ------------------------------------------------------

KEY_CHARS = string.ascii_letters + string.digits + "-_"


#: The public prefixes of keys (docs/openrouter.md): the rest of a key is its secret part.


@given(
    key=st.text(KEY_CHARS, min_size=16, max_size=80),
    before=st.text(KEY_CHARS + " .:", max_size=40),
    shift=st.integers(-80, 80),
    n=st.sampled_from([40, 200, 500]),
)
def test_redact_text_leaves_no_piece_of_the_key_after_any_cut(key: str, before: str, shift: int, n: int) -> None:
    text = (before + " ") * 20 + key + " tail"
    cut_at = max(0, text.index(key) + len(key) // 2 + shift)
    for cut in (text[:cut_at], text[cut_at:], text[: max(0, cut_at - n)] + text[cut_at:]):
        assert not any(p in redact_text(cut, key) for p in pieces(key))


# Keys shaped like OpenRouter's (``sk-or-v1-`` + 64 hex digits): a key made of ordinary words (Hypothesis once
# found ``00000000_respons``) shares 8-character pieces with the error text itself, which no redaction can tell apart.
OPENROUTER_KEYS = st.binary(min_size=32, max_size=32).map(lambda raw: "sk-or-v1-" + raw.hex()).filter(
    lambda key: len(set(key[9:])) >= 8
)


@given(
    key=OPENROUTER_KEYS,
    inside=st.integers(-4, 84),
    stream=st.booleans(),
    status_body=st.booleans(),
)
def test_no_piece_of_the_key_reaches_the_output_wherever_the_server_quotes_it(key: str, inside: int, stream: bool, status_body: bool) -> None:
    """A server quoting the key in a body that is cut for the error message (``[:200]`` for a stream's
    SSE data, ``[:500]`` for a body or an HTTP error body), the cut falling ``inside`` characters into it."""
    cut = 200 if stream and not status_body else 500
    offset = cut - inside
    openai = require("openai")

    try:  # the transport of the installed SDK
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef,import-not-found,unused-ignore]  # (httpx2 is the transport here; httpx elsewhere)

    body = ("x" * offset + key + " and more text " * 50).encode()
    client: Any = StubClient(body)
    if status_body:  # an HTTP error whose body is text
        response = httpx.Response(502, request=httpx.Request("POST", "http://127.0.0.1/api/v1/chat/completions"))
        error = openai.APIStatusError("bad gateway", response=response, body=body.decode())

        def fail(**kwargs: Any) -> Any:
            raise error

        client.chat.completions.create = fail
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_prompts(folder / "prompts.jsonl", [user_prompt("p", "a")])
        cfg = GenerateConfig(
            prompts=folder / "prompts.jsonl", output=folder / "out.jsonl", options=RequestOptions(model="m", stream=stream),
            progress=False, max_retries=0, reconstruct=False,
        )  # fmt: skip
        summary = run_generate(cfg, key, client=client)
        written = (folder / "out.jsonl").read_text(encoding="utf-8")
    assert summary.errors == 1
    assert not any(p in written for p in pieces(key)), written


_TEXT = st.lists(st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.sampled_from(["\n", "\u2028", "\x85", '"', "\\"])), max_size=12).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(response=_JSON, ids=st.lists(st.integers(0, 163_839), max_size=20), echo=st.booleans(), key=st.text(KEY_CHARS, min_size=16, max_size=40))
def test_encode_row_always_gives_one_utf8_line_that_reads_back_and_never_holds_the_key(response: Any, ids: list[int], echo: bool, key: str) -> None:
    row = {"id": "a", "status": "ok", "output_ids": ids, "flags": [], "response": [response, key] if echo else response}
    data = encode_row(row, key)
    text = data.decode("utf-8")  # always valid UTF-8
    assert text.endswith("\n") and len(text.splitlines()) == 1
    assert key not in text
    back = json.loads(text)
    if key in json.dumps(row, ensure_ascii=False):  # the row held the key: no ids, recorded and flagged
        assert back["status"] == "error" and "output_ids" not in back
        assert "api_key_in_text" in [f["code"] for f in back["flags"]]
    else:  # everything else reads back as JSON means it, lone surrogates included
        # The oracle: JSON's own reading of escaped code units (a high+low pair is one character).
        expected = json.loads(json.dumps(response))
        assert back["response"] == expected and back["output_ids"] == ids and back["status"] == "ok"
        has_lone = any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(expected, ensure_ascii=False))
        assert ("lone_surrogate" in [f["code"] for f in back["flags"]]) == has_lone


@pytest.mark.parametrize("model", ["openai/gpt-4o", "my-vllm-name"])
def test_a_model_id_that_names_no_kimi_format_needs_a_profile_before_anything_is_sent(
    model: str, fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``generate --model openai/gpt-4o`` (or a local server's own name) rebuilt every answer as K2.5 without a word
    (issue 33): with no ``--profile`` it is a usage error naming ``--model``; with one, the caller said the format."""
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    prompts = write_prompts(tmp_path / "p.jsonl", [user_prompt("x", "a")])
    out = tmp_path / "o.jsonl"
    assert main(args_for(prompts, str(out), fake, "--model", model)) == 2
    err = capsys.readouterr().err
    assert "--model" in err and "--profile" in err and model in err
    assert not fake.seen() and not out.exists()
    # named, the format is the caller's word: the run goes on (and a dated slug needs no name)
    for extra in (["--model", model, "--profile", "kimi-k2.5"], ["--model", "moonshotai/kimi-k2.5-0127"]):
        main(args_for(prompts, str(out), fake, *extra))
        assert "error: field '--model'" not in capsys.readouterr().err
