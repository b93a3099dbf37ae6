"""A self-hosted server (``generate --base-url http://127.0.0.1:PORT/v1``) needs no OpenRouter key and takes the
placeholder vLLM documents (``EMPTY``); OpenRouter itself still needs a real key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_openrouter import Act, FakeOpenRouter, generate_config
from openrouter_wire import completion, read_rows, write_prompts

from kimi_recon.openrouter.client import LOCAL_PLACEHOLDER_KEY, api_key_from_env, is_openrouter
from kimi_recon.openrouter.errors import OpenRouterError
from kimi_recon.openrouter.generate import run_generate

LOCAL = "http://127.0.0.1:8000/v1"


def test_the_key_is_optional_for_a_server_other_than_openrouter() -> None:
    assert api_key_from_env({}, base_url=LOCAL) == LOCAL_PLACEHOLDER_KEY == "EMPTY"
    assert api_key_from_env({"OPENROUTER_API_KEY": "EMPTY"}, base_url=LOCAL) == "EMPTY"
    assert api_key_from_env({"OPENROUTER_API_KEY": "x"}, base_url="http://localhost:30000/v1") == "x"
    for url in ("https://openrouter.ai/api/v1", "https://OpenRouter.ai/api/v1/"):
        assert is_openrouter(url)
        with pytest.raises(OpenRouterError) as no_key:
            api_key_from_env({}, base_url=url)
        assert no_key.value.code == "no_api_key"
        with pytest.raises(OpenRouterError) as short:
            api_key_from_env({"OPENROUTER_API_KEY": "EMPTY"}, base_url=url)
        assert short.value.code == "bad_api_key"
    assert not is_openrouter("http://openrouter.ai.example.com/v1") and not is_openrouter(LOCAL)


@pytest.fixture
def local() -> Iterator[FakeOpenRouter]:
    server = FakeOpenRouter(LOCAL_PLACEHOLDER_KEY).start()
    try:
        yield server
    finally:
        server.stop()


def test_generate_runs_against_a_local_server_with_the_placeholder_key(local: FakeOpenRouter, tmp_path: Path) -> None:
    write_prompts(tmp_path / "prompts.jsonl", [{"id": "a", "messages": [{"role": "user", "content": "hi"}]}])
    local.script("hi", Act(body=completion({"role": "assistant", "content": "Hello", "reasoning_content": "Hm."})))
    summary = run_generate(generate_config(tmp_path, local), LOCAL_PLACEHOLDER_KEY)
    assert (summary.ok, summary.errors) == (1, 0)
    (row,) = read_rows(tmp_path / "out.jsonl")
    assert row["status"] == "ok" and row["output_ids"]
