"""``generate --model moonshotai/kimi-k3``: the profile follows the model, and the rows hold K3's official ids."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fake_openrouter import FakeOpenRouter
from openrouter_wire import read_rows, user_prompt, write_prompts
from test_cli import child_env

from kimi_recon import build_training_sample, load_tokenizer, reconstruct_output_ids
from kimi_recon.profiles import profile_for_model

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def test_model_ids_name_their_profiles() -> None:
    assert profile_for_model("moonshotai/kimi-k3") == "kimi-k3"
    assert profile_for_model("moonshotai/Kimi-K3:nitro") == "kimi-k3"
    assert profile_for_model("moonshotai/kimi-k2.6") == "kimi-k2.5"
    assert profile_for_model("someone/other-model") == "kimi-k2.5"


def test_generate_with_the_k3_model_writes_k3_ids(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    prompts = write_prompts(tmp_path / "p.jsonl", [user_prompt("hello", "plain"), user_prompt("find", "tools", tools=TOOLS)])
    out = tmp_path / "out.jsonl"
    cmd = [
        sys.executable, "-m", "kimi_recon.openrouter", "generate", str(prompts), "-o", str(out), "--model", "moonshotai/kimi-k3",
        "--base-url", fake.base_url, "--timeout", "5", "--max-retries", "1", "--training-sample", "--no-progress",
    ]  # fmt: skip
    done = subprocess.run(cmd, env=child_env(api_key), check=False, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()  # every prompt answered: a run that also failed would exit 1
    rows = {r["id"]: r for r in read_rows(out)}
    assert set(rows) == {"plain", "tools"}, done.stderr.decode()
    k3 = load_tokenizer(profile="kimi-k3")
    for prompt_id, row in rows.items():
        assert row["status"] == "ok", row
        message = row["response"]["choices"][0]["message"]
        assert row["output_ids"] == reconstruct_output_ids(message, profile="kimi-k3").ids
        messages = [{"role": "user", "content": "hello" if prompt_id == "plain" else "find"}]
        expected = build_training_sample(messages, message, TOOLS if prompt_id == "tools" else None, "kimi-k3")
        assert row["sample"]["input_ids"] == expected.input_ids
        assert k3.decode(row["output_ids"]).endswith("<|close|>message<|sep|><|end_of_msg|>")
    # the server issued "call_srv1": K3 writes no call id, so nothing is replaced or flagged
    codes = {f["code"] for f in rows["tools"]["flags"]}
    assert not codes & {"replaced_tool_call_id", "foreign_tool_call_id", "generated_tool_call_id"}
    assert '<|open|>call tool="lookup" index="1"<|sep|>' in k3.decode(rows["tools"]["output_ids"])
