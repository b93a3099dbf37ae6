"""The generate writer tallies the usage check it built for each row (issue 24 item 2): it no longer reads each
row's ``token_counts`` back into a TokenCounts, and the rows it writes are byte for byte the ones it wrote
before (digests recorded from the writer that read the counts back, on the usage-check scenario of
test_usage_check_generate.py: every counting convention, a mismatch of each figure, a bad prompt line, a
server error)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fake_openrouter import Act, FakeOpenRouter, generate_config
from openrouter_wire import read_rows, write_prompts
from test_usage_check_generate import VARIANTS, golden_turns, response_for

from kimi_recon.openrouter.generate import RunSummary, run_generate
from kimi_recon.usage_check import TokenCounts
from kimi_recon.usage_stats import TokenCountTally

#: sha256 of out.jsonl (each row's elapsed_s, a wall-clock figure, written as 0), per prompt_from, as the
#: writer that re-read token_counts wrote it, re-recorded when server_rare_loss (with "seen") replaced some
#: server_may_have_lost flags, and again when a call id the server may have written got its own flag
#: (server_rebuilt_tool_call_id), and when the training sample got the usage check every door gives
#: (its flags and token_counts, issue 35), and when a count one short ruled out a loss that drops ids (and an
#: agreeing one made it unlikely), and when an unknown server's reasoning ending in punctuation got
#: reasoning_end_stripped (server_rare_loss), and when an unknown server's count one more than the rebuild
#: got server_may_have_lost (a special token emptied). A change of the row format changes them: re-record with
#: KIMI_PRINT_DIGESTS=1 python -m pytest tests/openrouter/test_writer_counts.py -s, after checking the rows.
DIGESTS_BEFORE = {
    "counter": "15f6525759f86a06b6b8e90315b202015c8a7d16de21b34456d9f57e8784d9ed",
    "training_sample": "7c6db8f8b1d3a9bcf358453039efaf4ae385e19f61860a25e097e88c4c059435",
}


def _run(fake: FakeOpenRouter, tmp_path: Path, api_key: str, prompt_from: str) -> RunSummary:
    goldens = golden_turns(2 * len(VARIANTS))
    prompts: list[dict[str, Any]] = []
    for i, golden in enumerate(goldens):
        name = list(VARIANTS)[i % len(VARIANTS)]
        provider, c_shift, r_shift, p_shift, _ = VARIANTS[name]
        prompts.append({"id": f"{name}-{i}", "messages": golden["messages"], "tools": golden["tools"]})
        fake.script(golden["messages"][-1]["content"], Act(body=response_for(golden, provider, (c_shift, r_shift, p_shift))))
    prompts.append({"id": "server-error", "messages": [{"role": "user", "content": "fail me"}]})
    fake.script("fail me", Act(status=400, body={"error": {"code": 400, "message": "bad request"}}))
    path = write_prompts(tmp_path / "prompts.jsonl", prompts)
    path.write_text(path.read_text(encoding="utf-8") + "not json\n", encoding="utf-8")
    config = generate_config(
        tmp_path, fake, max_retries=0, fsync=False, concurrency=1, training_sample=prompt_from == "training_sample"
    )
    return run_generate(config, api_key)


def _digest(path: Path) -> str:
    data = re.sub(rb'"elapsed_s": ?[0-9.e+-]+', b'"elapsed_s": 0', path.read_bytes())
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("prompt_from", ["counter", "training_sample"])
def test_the_rows_written_are_byte_identical_to_before(fake: FakeOpenRouter, tmp_path: Path, api_key: str, prompt_from: str) -> None:
    summary = _run(fake, tmp_path, api_key, prompt_from)
    assert (summary.ok, summary.errors) == (2 * len(VARIANTS), 2)
    digest = _digest(tmp_path / "out.jsonl")
    if os.environ.get("KIMI_PRINT_DIGESTS"):
        print(f"{prompt_from}: {digest}")
    assert digest == DIGESTS_BEFORE[prompt_from]


@pytest.mark.parametrize("prompt_from", ["counter", "training_sample"])
def test_the_summary_tallies_the_counts_built_for_each_row_without_reading_rows_back(
    fake: FakeOpenRouter, tmp_path: Path, api_key: str, prompt_from: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def read_back(data: object) -> TokenCounts | None:
        raise AssertionError("the writer read a row's token_counts back")

    with monkeypatch.context() as patch:
        patch.setattr(TokenCounts, "from_dict", read_back)
        summary = _run(fake, tmp_path, api_key, prompt_from)
    # The tally of the rows on disk, read back here as the old writer read them.
    expected = TokenCountTally()
    for row in read_rows(tmp_path / "out.jsonl"):
        if row["status"] == "ok":
            expected.add(row.get("provider"), TokenCounts.from_dict(row.get("token_counts")))
    assert summary.token_counts == expected.to_dict()
    assert summary.token_counts["rows_checked"] == 2 * len(VARIANTS)
    assert json.dumps(summary.token_counts)  # the report stays JSON
