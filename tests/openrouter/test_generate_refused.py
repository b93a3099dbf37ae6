"""``generate`` when the setup is wrong: a key or account the server refuses (401, 402, 403) stops the run
without recording its prompts as done, and a bad ``--tokenizer`` or attribution header is refused before
anything is sent or the output is touched (either would otherwise make every prompt an error row, done)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_openrouter import QUICK_RETRIES, Act, FakeOpenRouter, generate_config
from openrouter_wire import read_rows, user_prompt, write_prompts

from kimi_recon.openrouter.cli import main
from kimi_recon.openrouter.generate import RunSummary, run_generate
from kimi_recon.openrouter.output import OutputFile, OutputLockedError

TEXTS = [f"p{i}" for i in range(6)]
IDS = [f"id{i}" for i in range(6)]


def prompts_file(tmp_path: Path) -> Path:
    return write_prompts(tmp_path / "prompts.jsonl", [user_prompt(t, i) for t, i in zip(TEXTS, IDS, strict=True)])


def run(fake: FakeOpenRouter, tmp_path: Path, key: str, **changes: Any) -> tuple[RunSummary, list[dict[str, Any]]]:
    settings = QUICK_RETRIES | {"prompts": prompts_file(tmp_path), "concurrency": 1}
    summary = run_generate(generate_config(tmp_path, fake, **(settings | changes)), key)
    return summary, read_rows(tmp_path / "out.jsonl")


def sent(fake: FakeOpenRouter) -> list[str]:
    return [seen.prompt for seen in fake.seen()]


def assert_every_prompt_exactly_once_and_ok(rows: list[dict[str, Any]]) -> None:
    assert sorted(r["id"] for r in rows) == IDS
    assert all(r["status"] == "ok" for r in rows)


def refusal(status: int) -> Act:
    return Act(status=status, body={"error": {"code": status, "message": f"account refused ({status})"}})


# -- a refused key or account stops the run, and its prompts stay to be sent --------------------------


@pytest.mark.parametrize("status", [401, 402, 403])
def test_a_refusal_mid_run_stops_sending_and_a_rerun_sends_exactly_the_prompts_without_a_row(
    status: int, fake: FakeOpenRouter, tmp_path: Path, api_key: str
) -> None:
    fake.script("p2", refusal(status))
    first, rows = run(fake, tmp_path, api_key)
    assert sent(fake) == ["p0", "p1", "p2"]  # nothing after the refusal
    assert [r["id"] for r in rows] == ["id0", "id1"]  # the refused prompt has no row: it is not done
    assert first.refused and first.exit_code == 4
    assert (first.ok, first.errors, first.remaining) == (2, 0, 4)
    assert first.stopped is not None and f"HTTP {status}" in first.stopped and "'id2'" in first.stopped

    second, rows = run(fake, tmp_path, api_key)
    assert sent(fake)[3:] == ["p2", "p3", "p4", "p5"]  # exactly the prompts without a row, once each
    assert (second.already_done, second.ok, second.remaining, second.exit_code) == (2, 4, 0, 0)
    assert_every_prompt_exactly_once_and_ok(rows)


def test_a_wrong_key_at_the_start_sends_no_more_than_the_requests_in_flight(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    first, rows = run(fake, tmp_path, "sk-or-v1-WRONG-KEY-0000000000", concurrency=3)
    assert 1 <= len(fake.seen()) <= 3
    assert rows == [] and (tmp_path / "out.jsonl").read_bytes() == b""
    assert first.refused and first.exit_code == 4 and first.remaining == 6

    n_refused = len(fake.seen())
    second, rows = run(fake, tmp_path, api_key, concurrency=3)
    assert sorted(sent(fake)[n_refused:]) == TEXTS  # every prompt sent again, once
    assert second.exit_code == 0
    assert_every_prompt_exactly_once_and_ok(rows)


def test_requests_in_flight_when_the_account_is_refused_still_get_their_rows(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.default_delay = 0.8  # p0 and p2 are still generating when p1 is refused at once
    fake.script("p1", refusal(402))
    summary, rows = run(fake, tmp_path, api_key, concurrency=3)
    assert sorted(sent(fake)) == ["p0", "p1", "p2"]
    assert sorted(r["id"] for r in rows) == ["id0", "id2"] and all(r["status"] == "ok" for r in rows)
    assert summary.refused and summary.remaining == 4


def test_the_cli_exits_4_naming_the_refusal_without_any_piece_of_the_key(
    fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    fake.script("p0", Act(status=401, echo_auth=True))  # a server quoting the key it was sent
    out = tmp_path / "out.jsonl"
    code = main(["generate", str(prompts_file(tmp_path)), "-o", str(out), "--base-url", fake.base_url, "--concurrency", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 4
    assert "refused the API key or the account (HTTP 401 on prompt 'id0'" in err
    assert "rejected request with Bearer [REDACTED]" in err  # the echo really happened, and was scrubbed
    assert sent(fake) == ["p0"] and read_rows(out) == []
    for text in (err, out.read_text(encoding="utf-8")):
        assert not any(api_key[i : i + 8] in text for i in range(len(api_key) - 7))


# -- a bad tokenizer is refused before the output is touched ------------------------------------------


def bad_tokenizer(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / "tok"
    if kind == "empty dir":
        path.mkdir()
    elif kind == "file":
        path.write_text("not a tokenizer")
    return path


def generate_args(tmp_path: Path, fake: FakeOpenRouter, out: Path, tokenizer: Path) -> list[str]:
    return ["generate", str(prompts_file(tmp_path)), "-o", str(out), "--base-url", fake.base_url, "--tokenizer", str(tokenizer), "--no-progress"]


@pytest.mark.parametrize("kind", ["missing", "empty dir", "file"])
def test_a_bad_tokenizer_is_a_usage_error_that_creates_no_output(
    kind: str, fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    out = tmp_path / "out.jsonl"
    assert main(generate_args(tmp_path, fake, out, bad_tokenizer(kind, tmp_path))) == 2
    assert "tok" in capsys.readouterr().err
    assert not out.exists() and not fake.seen()


def test_a_bad_tokenizer_leaves_an_existing_output_byte_for_byte(
    fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id": "id0", "status": "ok"}\n{"id": "id1", "sta')  # a torn tail a resume would cut
    before = out.read_bytes()
    assert main(generate_args(tmp_path, fake, out, bad_tokenizer("empty dir", tmp_path))) == 2
    assert out.read_bytes() == before and not fake.seen()


def test_a_locked_output_is_refused_before_the_tokenizer_is_loaded(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    out = tmp_path / "out.jsonl"
    with OutputFile(out):  # a rival run holds the file
        with pytest.raises(OutputLockedError):  # not the tokenizer's error: the lock was checked first
            run(fake, tmp_path, api_key, tokenizer=str(bad_tokenizer("missing", tmp_path)))
    assert not fake.seen()


def test_lock_existing_changes_nothing_and_open_goes_on_from_it(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"id": "a", "status": "ok"}\n{"id": "b", "sta')
    out = OutputFile(path)
    out.lock_existing()
    try:
        assert path.read_bytes() == b'{"id": "a", "status": "ok"}\n{"id": "b", "sta'
        with pytest.raises(OutputLockedError):
            OutputFile(path).lock_existing()
        with out:
            assert out.state is not None and out.state.done == {"a"} and out.state.repaired_tail == "truncated"
    finally:
        out.close()
    again = OutputFile(path)
    again.lock_existing()  # released by close
    again.close()
    missing = OutputFile(tmp_path / "none.jsonl")
    missing.lock_existing()
    assert not (tmp_path / "none.jsonl").exists()


@pytest.mark.parametrize("option, value", [("--app-title", "a\nb"), ("--app-title", "日本語"), ("--app-url", "https://x.org/\x00")])
def test_an_attribution_header_that_http_cannot_carry_is_a_usage_error_before_anything_is_sent(
    option: str, value: str, fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    out = tmp_path / "out.jsonl"
    args = ["generate", str(prompts_file(tmp_path)), "-o", str(out), "--base-url", fake.base_url, "--no-progress", option, value]
    assert main(args) == 2  # before: every prompt became a connection (or internal) error row
    assert option[2:].replace("-", "_") in capsys.readouterr().err
    assert not out.exists() and not fake.seen()


# -- the server's ids and a stream: refused, not dropped ------------------------------------------------


@pytest.mark.parametrize("entry", ["generate", "kimi-recon"])
def test_return_token_ids_with_stream_is_a_usage_error_before_anything_is_sent(
    entry: str, fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``generate --return-token-ids --stream`` sent every prompt and wrote rows rebuilt from the text, the ids the
    server was asked for dropped without a word (issue 35): the streamed answer is assembled from its text."""
    from kimi_recon.cli import main as kimi_recon_main

    monkeypatch.setenv("OPENROUTER_API_KEY", api_key)
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"id": "id0", "status": "ok"}\n')
    args = ["generate", str(prompts_file(tmp_path)), "-o", str(out), "--base-url", fake.base_url, "--no-progress", "--return-token-ids", "--stream"]
    assert (main(args) if entry == "generate" else kimi_recon_main(args)) == 2
    err = capsys.readouterr().err
    assert "--return-token-ids" in err and "--stream" in err
    assert out.read_bytes() == b'{"id": "id0", "status": "ok"}\n' and not fake.seen()


@pytest.mark.parametrize("asked", [{"return_token_ids": True}, {"extra_body": {"return_token_ids": True}}, {"extra_body": {"return_tokens": True}}])
def test_request_options_refuse_the_server_ids_with_a_stream(asked: dict[str, Any]) -> None:
    from kimi_recon.errors import InvalidInputError
    from kimi_recon.openrouter.options import RequestOptions

    with pytest.raises(InvalidInputError) as err:
        RequestOptions(model="moonshotai/kimi-k2.5", stream=True, **asked)
    assert err.value.field is not None and "stream" in err.value.field
    RequestOptions(model="moonshotai/kimi-k2.5", **asked)  # without the stream: taken
    RequestOptions(model="moonshotai/kimi-k2.5", stream=True)
