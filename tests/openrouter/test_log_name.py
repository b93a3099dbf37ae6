"""``generate -o log.jsonl.gz`` (issue 33, a new user's trial): every other command now writes a ``.gz`` name
compressed, but the log is appended to as answers arrive, and plain text under that name is a file zcat and
datasets refuse. Such a name is refused before any request is sent."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_openrouter import FakeOpenRouter, generate_config
from openrouter_wire import write_prompts

from kimi_recon.errors import OutputFileError
from kimi_recon.openrouter.client import LOCAL_PLACEHOLDER_KEY
from kimi_recon.openrouter.generate import run_generate


@pytest.mark.parametrize("name", ["log.jsonl.gz", "log.jsonl.ZST", "log.parquet"])
def test_a_compressed_or_parquet_log_name_is_refused_before_any_request(name: str, tmp_path: Path) -> None:
    server = FakeOpenRouter(LOCAL_PLACEHOLDER_KEY).start()
    try:
        write_prompts(tmp_path / "prompts.jsonl", [{"id": "a", "messages": [{"role": "user", "content": "hi"}]}])
        config = generate_config(tmp_path, server, output=tmp_path / name)
        with pytest.raises(OutputFileError, match=r"\.jsonl") as refused:
            run_generate(config, LOCAL_PLACEHOLDER_KEY)
        assert refused.value.field == "output"
        assert not (tmp_path / name).exists() and server.requests == []
    finally:
        server.stop()
