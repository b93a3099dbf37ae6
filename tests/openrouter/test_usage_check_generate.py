"""``generate`` against a loopback server whose usage figures are right, off by the stop token, and off
by a few tokens: every row records both figures, flags exactly the figures no convention explains, and
the run's summary counts them per provider.

The true counts come from Moonshot's official code (the golden turns' ``prompt_ids``/``output_ids``), not
from kimi-recon.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_openrouter import Act, FakeOpenRouter, generate_config
from hypothesis import given
from hypothesis import strategies as st
from openrouter_wire import completion, read_rows, write_prompts

from kimi_recon.openrouter.generate import run_generate

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "official-k2.5-dev" / "turns.jsonl"
THINK_END = 163607

#: name -> (provider, completion shift, reasoning shift, prompt shift, the flags expected)
VARIANTS: dict[str, tuple[str, int, int, int, list[str]]] = {
    "right": ("Exact Inc", 0, 0, 0, []),
    "no_stop": ("NoStop AI", -1, -1, 0, []),  # neither <|im_end|> nor </think> counted
    "with_eos": ("Eos Cloud", 1, 0, 0, []),  # [EOS] counted after <|im_end|>
    "off_by_3": ("Loose Ltd", 3, 0, 0, ["completion_tokens_mismatch"]),
    "prompt_off": ("Injector", 0, 0, 7, ["prompt_tokens_mismatch"]),  # an injected system prompt
    "reasoning_off": ("Loose Ltd", 0, -4, 0, ["reasoning_tokens_mismatch"]),
}


def golden_turns(n: int) -> list[dict[str, Any]]:
    """Thinking-on golden turns with some reasoning, whose tool-call arguments are text (as a server sends them)."""
    out = []
    with GOLDEN.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            calls = row["turn"].get("tool_calls") or []
            if row["thinking"] and row["output_ids"].index(THINK_END) >= 5 and all(isinstance(c["function"]["arguments"], str) for c in calls):
                out.append(row)
            if len(out) == n:
                break
    return out


def response_for(golden: dict[str, Any], provider: str, shifts: tuple[int, int, int]) -> dict[str, Any]:
    turn = golden["turn"]
    calls = turn.get("tool_calls") or []
    message = {"content": turn.get("content"), "reasoning": turn.get("reasoning_content")}
    if calls:
        message["tool_calls"] = [{**c, "type": "function"} for c in calls]
    resp = completion(message, "tool_calls" if calls else "stop", provider=provider)
    completion_shift, reasoning_shift, prompt_shift = shifts
    reasoning = golden["output_ids"].index(THINK_END) + 1
    resp["usage"] = {
        "prompt_tokens": len(golden["prompt_ids"]) + prompt_shift,
        "completion_tokens": len(golden["output_ids"]) + completion_shift,
        "completion_tokens_details": {"reasoning_tokens": reasoning + reasoning_shift},
        "cost": 0.0001,
    }
    return resp


@pytest.mark.parametrize("prompt_from", ["counter", "training_sample"])
def test_generate_rows_record_both_figures_and_flag_only_unexplained_differences(
    fake: FakeOpenRouter, tmp_path: Path, api_key: str, prompt_from: str
) -> None:
    goldens = golden_turns(2 * len(VARIANTS))
    prompts, expected = [], {}
    for i, golden in enumerate(goldens):
        name = list(VARIANTS)[i % len(VARIANTS)]
        provider, c_shift, r_shift, p_shift, flags = VARIANTS[name]
        pid = f"{name}-{i}"
        prompts.append({"id": pid, "messages": golden["messages"], "tools": golden["tools"]})
        fake.script(golden["messages"][-1]["content"], Act(body=response_for(golden, provider, (c_shift, r_shift, p_shift))))
        expected[pid] = (golden, provider, (c_shift, r_shift, p_shift), flags)
    write_prompts(tmp_path / "prompts.jsonl", prompts)
    config = generate_config(
        tmp_path,
        fake,
        max_retries=0,
        fsync=False,
        training_sample=prompt_from == "training_sample",  # the prompt is then encoded by the rebuild itself
    )
    summary = run_generate(config, api_key)
    rows = {r["id"]: r for r in read_rows(tmp_path / "out.jsonl")}
    assert summary.ok == len(prompts) and set(rows) == set(expected)

    for pid, (golden, _provider, (c_shift, r_shift, p_shift), flags) in expected.items():
        row = rows[pid]
        assert row["output_ids"] == golden["output_ids"], pid  # the rebuild itself is exact
        if prompt_from == "training_sample":
            assert row["sample"]["input_ids"] == golden["prompt_ids"] + golden["output_ids"]
        n_out, n_prompt = len(golden["output_ids"]), len(golden["prompt_ids"])
        n_reasoning = golden["output_ids"].index(THINK_END) + 1
        counts = row["token_counts"]
        assert counts["completion_tokens"]["reported"] == n_out + c_shift and counts["completion_tokens"]["rebuilt"] == n_out
        assert counts["prompt_tokens"]["reported"] == n_prompt + p_shift and counts["prompt_tokens"]["rebuilt"] == n_prompt
        assert counts["reasoning_tokens"]["rebuilt"] == n_reasoning
        usage_flags = [f for f in row["flags"] if f["code"].endswith("_tokens_mismatch")]
        assert [f["code"] for f in usage_flags] == flags, pid
        for f in usage_flags:
            shift = {"completion_tokens_mismatch": c_shift, "prompt_tokens_mismatch": p_shift, "reasoning_tokens_mismatch": r_shift}[f["code"]]
            assert f["delta"] == shift
        name = pid.rsplit("-", 1)[0]
        want = {"right": "exact", "no_stop": "without_stop", "with_eos": "with_eos", "off_by_3": None}.get(name, "exact")
        assert counts["completion_tokens"]["convention"] == want, pid

    report = summary.token_counts["providers"]
    assert report["Exact Inc"]["agree_rate"] == 1.0
    assert report["NoStop AI"]["fields"]["completion_tokens"]["conventions"] == {"without_stop": 2}
    assert report["NoStop AI"]["fields"]["reasoning_tokens"]["conventions"] == {"without_stop": 2}
    assert report["Eos Cloud"]["fields"]["completion_tokens"]["conventions"] == {"with_eos": 2}
    assert report["Injector"]["agree"] == 0
    assert report["Injector"]["fields"]["prompt_tokens"]["top_deltas"] == [{"delta": 7, "rows": 2}]
    loose = report["Loose Ltd"]
    assert (loose["rows"], loose["agree"]) == (4, 0)
    assert {"delta": 3, "rows": 2} in loose["fields"]["completion_tokens"]["top_deltas"]
    text = "\n".join(summary.lines())
    assert "Exact Inc: 2/2 rows agree (100.0%)" in text and "Loose Ltd: 0/4 rows agree" in text


def test_no_usage_check_leaves_rows_without_token_counts(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    write_prompts(tmp_path / "prompts.jsonl", [{"id": "a", "messages": [{"role": "user", "content": "hi"}]}])
    config = generate_config(tmp_path, fake, check_usage=False)
    summary = run_generate(config, api_key)
    (row,) = read_rows(tmp_path / "out.jsonl")
    assert "token_counts" not in row and not any(f["code"].endswith("_mismatch") for f in row["flags"])
    assert summary.token_counts["providers"] == {} and summary.lines() == [summary.line()]


def test_a_prompt_that_cannot_be_counted_leaves_only_that_figure_unchecked(
    fake: FakeOpenRouter, tmp_path: Path, api_key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kimi_recon.openrouter import rebuild

    def failing_counter(**_: object) -> object:
        def count(prompt: object) -> int:
            raise ValueError(f"cannot render (server said {api_key})")

        return count

    monkeypatch.setattr(rebuild, "make_prompt_counter", failing_counter)
    write_prompts(tmp_path / "prompts.jsonl", [{"id": "a", "messages": [{"role": "user", "content": "hi"}]}])
    config = generate_config(tmp_path, fake)
    summary = run_generate(config, api_key)
    (row,) = read_rows(tmp_path / "out.jsonl")
    assert summary.ok == 1 and row["status"] == "ok"
    (unchecked,) = [f for f in row["flags"] if f["code"] == "prompt_tokens_unchecked"]
    assert "ValueError: cannot render" in unchecked["message"] and api_key not in unchecked["message"]
    assert "prompt_tokens" not in row["token_counts"] and "completion_tokens" in row["token_counts"]
    assert api_key not in (tmp_path / "out.jsonl").read_text()


@pytest.mark.parametrize("flag", [None, "--no-usage-check"])
def test_cli_prints_the_usage_check_per_provider_unless_turned_off(fake: FakeOpenRouter, tmp_path: Path, api_key: str, flag: str | None) -> None:
    import os
    import subprocess
    import sys

    (golden,) = golden_turns(1)
    fake.script(golden["messages"][-1]["content"], Act(body=response_for(golden, "Exact Inc", (-1, 0, 0))))
    write_prompts(tmp_path / "p.jsonl", [{"id": "g", "messages": golden["messages"], "tools": golden["tools"]}])
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy") and not k.startswith(("OPENAI_", "OPENROUTER_"))}
    env |= {"OPENROUTER_API_KEY": api_key, "NO_PROXY": "127.0.0.1,localhost", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    cmd = [sys.executable, "-m", "kimi_recon.cli", "generate", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "o.jsonl"),
           "--base-url", fake.base_url, "--no-progress", *([flag] if flag else [])]
    result = subprocess.run(cmd, env=env, check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (row,) = read_rows(tmp_path / "o.jsonl")
    if flag is None:
        assert "Exact Inc: 1/1 rows agree (100.0%)" in result.stderr
        assert "completion_tokens: 1/1 agree (conventions: without_stop 1)" in result.stderr
        assert row["token_counts"]["completion_tokens"]["convention"] == "without_stop"
    else:
        assert "usage check" not in result.stderr and "token_counts" not in row


SPECIAL_PIECES = ["<|im_end|>", "<|im_user|>", "<|im_middle|>", "<think>", "</think>", "[EOS]", "[BOS]",
                  "<|reserved_token_163700|>", "<|tool_call_begin|>", "<|im_end|", "<|foo|>", "[ABC]", "<think", "<||>", "<|<|im_end|>"]


@given(st.lists(st.one_of(st.text(max_size=30), st.sampled_from(SPECIAL_PIECES)), max_size=12))
def test_counting_between_special_tokens_equals_one_encode(parts: list[str]) -> None:
    from kimi_recon.openrouter.rebuild import count_between_specials
    from kimi_recon.special_tokens import special_texts_in
    from kimi_recon.tokenizer import load_tokenizer

    tok = load_tokenizer()
    text = "".join(parts)
    found = special_texts_in(text, tok.special_tokens)
    assert count_between_specials(text, found, lambda piece: len(tok.encode(piece, allowed_special=set()))) == len(tok.encode(text))


def test_prompt_counter_equals_the_official_prompt_length_and_reuses_repeated_pieces() -> None:
    from kimi_recon.openrouter.prompts import Prompt
    from kimi_recon.openrouter.rebuild import make_prompt_counter

    count = make_prompt_counter()
    goldens = golden_turns(6)
    for golden in goldens + goldens:  # the second pass is served from the piece cache
        prompt = Prompt("x", tuple(golden["messages"]), tuple(golden["tools"]) if golden["tools"] else None, 1)
        assert count(prompt) == len(golden["prompt_ids"])
