"""The generation run against a loopback OpenRouter: rows, retries, errors, streaming, resume, secrecy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fake_openrouter import Act, FakeOpenRouter, generate_config
from openrouter_wire import call, completion, error_chunk, read_rows, sse, stream_chunks, user_prompt, write_prompts

from kimi_recon.openrouter.generate import RunSummary, run_generate
from kimi_recon.openrouter.options import RequestOptions, provider_preferences, reasoning_settings

TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look up", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}]


def run(
    fake: FakeOpenRouter,
    tmp_path: Path,
    prompts: list[dict[str, Any]] | None,
    api_key: str,
    *,
    options: RequestOptions | None = None,
    **config: Any,
) -> tuple[RunSummary, list[dict[str, Any]]]:
    prompts_path = tmp_path / "prompts.jsonl"
    if prompts is not None:
        write_prompts(prompts_path, prompts)
    settings: dict[str, Any] = {"timeout": 5.0, "max_retries": 2, "retry_base_delay": 0.01}
    if options is not None:
        settings["options"] = options
    summary = run_generate(generate_config(tmp_path, fake, **(settings | config)), api_key)
    return summary, read_rows(tmp_path / "out.jsonl")


def by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"a prompt was written twice: {ids}"
    return {r["id"]: r for r in rows}


def decode(ids: list[int]) -> str:
    from kimi_recon.tokenizer import load_tokenizer

    return load_tokenizer().decode(ids)


# -- the happy path -----------------------------------------------------------------------------------


def test_every_prompt_ends_as_exactly_one_row_with_ids_usage_and_cost(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    earlier_call = {"role": "assistant", "content": None, "tool_calls": [call("functions.lookup:0", "lookup", '{"q": "a"}')]}
    tool_prompt = {
        "id": "tools",
        "messages": [
            {"role": "user", "content": "first"},
            earlier_call,
            {"role": "tool", "tool_call_id": "functions.lookup:0", "content": "result"},
            {"role": "user", "content": "use the tool"},
        ],
        "tools": TOOLS,
    }
    prompts = [user_prompt("p1", "a"), user_prompt("p2", "b"), tool_prompt]
    path = write_prompts(tmp_path / "prompts.jsonl", prompts)
    with open(path, "a", encoding="utf-8") as f:
        f.write("{not json\n")
        f.write(json.dumps({"id": "prefill", "messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]}) + "\n")

    summary, rows = run(fake, tmp_path, None, api_key, prompt_ids=True, training_sample=True)
    rows_by_id = by_id(rows)
    assert set(rows_by_id) == {"a", "b", "tools", "line-4", "prefill"}
    assert (summary.ok, summary.errors, summary.remaining) == (3, 2, 0)

    a = rows_by_id["a"]
    assert a["status"] == "ok"
    assert decode(a["output_ids"]) == "Thinking about p1.</think>Answer to p1.<|im_end|>"
    assert a["usage"]["completion_tokens"] == 20 and a["cost"] == 0.001
    assert a["provider"] == "Moonshot AI"
    assert a["response"]["id"] == "gen-123"
    assert a["sample"]["input_ids"] == a["prompt_ids"] + a["output_ids"]
    assert a["sample"]["loss_mask"] == [0] * len(a["prompt_ids"]) + [1] * len(a["output_ids"])
    assert decode(a["prompt_ids"]).endswith("<|im_assistant|>assistant<|im_middle|><think>")

    # the server issued "call_srv1"; the model writes its own id, numbered across the conversation
    t = rows_by_id["tools"]
    assert "<|tool_call_begin|>functions.lookup:1<|tool_call_argument_begin|>" in decode(t["output_ids"])
    # (the fake's usage figures are made up, so the usage check flags them; see test_usage_check_generate.py)
    # and an OpenRouter provider is a server kimi-recon cannot name: what any server parser loses is flagged
    codes = [f["code"] for f in t["flags"] if not f["code"].endswith("_tokens_mismatch")]
    assert codes[0] == "replaced_tool_call_id" and set(codes[1:]) == {"server_may_have_lost", "server_rare_loss"}
    # the request holds the calls before the turn: the index is counted, not assumed
    assert t["flags"][0]["severity"] == "unlikely" and t["flags"][0]["seen"].startswith("0 of 122 ")
    assert all("server unknown" in f["message"] for f in t["flags"] if f["code"] in ("server_may_have_lost", "server_rare_loss"))
    assert t["response"]["choices"][0]["message"]["tool_calls"][0]["id"] == "call_srv1"  # raw stays raw

    assert rows_by_id["line-4"]["error"]["type"] == "invalid_prompt"
    assert "line 4 is not JSON" in rows_by_id["line-4"]["error"]["message"]
    assert "assistant prefill" in rows_by_id["prefill"]["error"]["message"]
    assert len(fake.seen()) == 3  # bad prompts are never sent


def test_openrouter_fields_travel_in_the_request_body(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    options = RequestOptions(
        model="moonshotai/kimi-k2.5",
        max_tokens=512,
        temperature=0.6,
        reasoning=reasoning_settings(effort="high"),
        logprobs=True,
        top_logprobs=2,
        provider=provider_preferences(order=["moonshotai"], only=["moonshotai"], require_parameters=True, allow_fallbacks=False),
        extra_body={"transforms": []},
    )
    run(fake, tmp_path, [user_prompt("p1", "a", tools=TOOLS)], api_key, options=options)
    (seen,) = fake.seen()
    body = seen.body
    assert body["model"] == "moonshotai/kimi-k2.5"
    assert body["provider"] == {"order": ["moonshotai"], "only": ["moonshotai"], "require_parameters": True, "allow_fallbacks": False}
    assert body["reasoning"] == {"enabled": True, "exclude": False, "effort": "high"}
    assert body["usage"] == {"include": True}
    assert (body["logprobs"], body["top_logprobs"], body["max_tokens"], body["temperature"]) == (True, 2, 512, 0.6)
    assert body["tools"] == TOOLS and body["transforms"] == []
    assert seen.headers["authorization"] == f"Bearer {api_key}"


def test_no_thinking_turns_reasoning_off_and_rebuilds_without_it(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(body=completion({"content": "Plain answer."})))
    options = RequestOptions(model="moonshotai/kimi-k2.5", reasoning=reasoning_settings(enabled=False))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=options)
    assert fake.seen()[0].body["reasoning"] == {"enabled": False, "exclude": False}
    assert decode(rows[0]["output_ids"]) == "Plain answer.<|im_end|>"


def test_logprobs_carry_the_models_own_token_split_into_the_ids(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    from kimi_recon.tokenizer import load_tokenizer

    tok = load_tokenizer()
    hel, lo = tok.id_of_bytes(b"Hel"), tok.id_of_bytes(b"lo")
    assert hel is not None and lo is not None and tok.encode("Hello") != [hel, lo]  # a non-canonical split
    logprobs = {"content": [{"token": "Hel", "logprob": -0.1, "bytes": list(b"Hel"), "top_logprobs": []},
                            {"token": "lo", "logprob": -0.2, "bytes": list(b"lo"), "top_logprobs": []}]}  # fmt: skip
    fake.script("p1", Act(body=completion({"content": "Hello", "reasoning": "r"}, logprobs=logprobs)))
    options = RequestOptions(model="moonshotai/kimi-k2.5", logprobs=True, top_logprobs=1)
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=options)
    assert rows[0]["output_source"] == "logprobs"
    assert rows[0]["output_ids"] == tok.encode("r</think>") + [hel, lo] + tok.encode("<|im_end|>")


# -- retries: what the SDK does -----------------------------------------------------------------------


def test_429_is_retried_after_the_retry_after_delay(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(status=429, body={"error": {"code": 429, "message": "Rate limited"}}, headers={"Retry-After": "1"}))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key)
    first, second = fake.seen("p1")
    # The SDK's own backoff would wait at most 0.5 s here; waiting a whole second means Retry-After won.
    assert second.at - first.at >= 0.95
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1


def test_500_is_retried_with_backoff(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(status=500, body={"error": {"code": 500, "message": "Internal"}}))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key)
    assert len(fake.seen("p1")) == 2
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1


def test_a_5xx_before_a_stream_starts_is_retried_by_the_sdk(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(status=503, body={"error": {"code": 503, "message": "No provider"}}, headers={"Retry-After": "0.01"}))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=RequestOptions(model="m", stream=True))
    assert len(fake.seen("p1")) == 2
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1 and rows[0]["stream"] is True


def test_a_timeout_is_retried(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(delay=1.0, body=completion({"content": "late"})))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, timeout=0.3)
    assert len(fake.seen("p1")) == 2
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1
    assert decode(rows[0]["output_ids"]).endswith("Answer to p1.<|im_end|>")


MODERATION = {"reasons": ["violence"], "flagged_input": "a", "provider_name": "Moonshot AI", "model_slug": "moonshotai/kimi-k2.5"}


@pytest.mark.parametrize("status, metadata", [(400, None), (403, MODERATION)], ids=["400", "moderation 403"])
def test_client_errors_are_not_retried_and_are_recorded(fake: FakeOpenRouter, tmp_path: Path, api_key: str, status: int, metadata: Any) -> None:
    error: dict[str, Any] = {"code": status, "message": f"refused with {status}"}
    if metadata is not None:
        error["metadata"] = metadata
    fake.script("p1", Act(status=status, body={"error": error}))
    summary, rows = run(fake, tmp_path, [user_prompt("p1", "a"), user_prompt("p2", "b")], api_key)
    assert len(fake.seen("p1")) == 1
    rows_by_id = by_id(rows)
    expected: dict[str, Any] = {"type": "http", "code": status, "message": f"refused with {status}"}
    if metadata is not None:
        expected["metadata"] = metadata
    assert rows_by_id["a"]["error"] == expected
    assert not summary.refused
    assert rows_by_id["b"]["status"] == "ok"
    assert summary.exit_code == 1


def test_retries_exhausted_leave_an_error_row(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    limited = Act(status=429, body={"error": {"code": 429, "message": "Rate limited"}}, headers={"Retry-After": "0.01"})
    fake.script("p1", limited, limited, limited, limited)
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, max_retries=2)
    assert len(fake.seen("p1")) == 3
    assert rows[0]["status"] == "error" and rows[0]["error"]["code"] == 429
    assert rows[0]["retries"] == 2  # read back from the SDK's own attempt counter


# -- retries: what the SDK cannot see (errors inside an HTTP 200) -------------------------------------


def test_an_error_inside_a_200_body_is_retried_by_the_adapter(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(body={"error": {"code": 502, "message": "Provider returned error"}}))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key)
    assert len(fake.seen("p1")) == 2
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1


def test_without_the_adapter_retry_a_200_error_body_would_be_final(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    """Why the adapter retries at all: the SDK sees HTTP 200 and hands the error body over as a success."""
    fake.script("p1", Act(body={"error": {"code": 502, "message": "Provider returned error"}}))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, max_retries=0)
    assert len(fake.seen("p1")) == 1
    assert rows[0]["error"] == {"type": "body", "code": 502, "message": "Provider returned error"}


def test_streamed_rows_equal_non_streamed_rows(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    prompts = [user_prompt("p1", "a"), user_prompt("p2", "b", tools=TOOLS)]
    (tmp_path / "plain").mkdir()
    (tmp_path / "stream").mkdir()
    _, plain = run(fake, tmp_path / "plain", prompts, api_key)
    _, streamed = run(fake, tmp_path / "stream", prompts, api_key, options=RequestOptions(model="moonshotai/kimi-k2.5", stream=True))
    assert all(s.body.get("stream") is True for s in fake.seen()[2:])
    for p, s in zip(sorted(plain, key=lambda r: r["id"]), sorted(streamed, key=lambda r: r["id"]), strict=True):
        assert s["stream"] is True and s["status"] == "ok"
        assert s["output_ids"] == p["output_ids"]
        assert s["usage"] == p["usage"]


def test_streamed_text_with_unicode_line_separators_arrives_intact(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    content = "a\u2028b\u2029c\x85d"  # sent raw (unescaped) inside the chunk JSON
    fake.script("p1", Act(stream=sse(stream_chunks(completion({"content": content, "reasoning": "r"}), pieces=2))))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=RequestOptions(model="m", stream=True))
    assert rows[0]["status"] == "ok"
    assert rows[0]["response"]["choices"][0]["message"]["content"] == content
    assert decode(rows[0]["output_ids"]) == f"r</think>{content}<|im_end|>"


def test_mid_stream_error_chunk_is_retried_then_recorded(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    partial = stream_chunks(completion({"content": "Half an answer", "reasoning": "r"}), pieces=2)[:-2]
    failing = Act(stream=sse(partial + [error_chunk("server_error", "Provider disconnected unexpectedly")]))
    fake.script("p1", failing)  # fails once, then succeeds
    fake.script("p2", failing, failing)  # fails on every attempt
    options = RequestOptions(model="moonshotai/kimi-k2.5", stream=True)
    summary, rows = run(fake, tmp_path, [user_prompt("p1", "a"), user_prompt("p2", "b")], api_key, options=options, max_retries=1)
    rows_by_id = by_id(rows)
    assert rows_by_id["a"]["status"] == "ok" and rows_by_id["a"]["retries"] == 1
    b = rows_by_id["b"]
    assert b["error"] == {"type": "stream", "code": "server_error", "message": "Provider disconnected unexpectedly"}
    assert b["response"]["choices"][0]["message"]["content"] == "Half an answer"  # what had arrived is kept
    assert b["retries"] == 1
    assert (summary.ok, summary.errors) == (1, 1)


def test_a_plain_json_error_answering_a_stream_request_is_read_as_an_error(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    refused = Act(body={"error": {"code": 503, "message": "No instances available"}})
    fake.script("p1", refused, refused)
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=RequestOptions(model="m", stream=True), max_retries=1)
    assert len(fake.seen("p1")) == 2  # transient: retried once, then recorded
    assert rows[0]["error"] == {"type": "body", "code": 503, "message": "No instances available"}


def test_a_stream_dropped_before_done_is_retried(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    lines = sse(stream_chunks(completion({"content": "Cut short", "reasoning": "r"}), pieces=2))
    fake.script("p1", Act(stream=lines, drop_after=6))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=RequestOptions(model="m", stream=True))
    assert len(fake.seen("p1")) == 2
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1


def test_a_stalled_stream_times_out_and_is_retried(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    lines = sse(stream_chunks(completion({"content": "Slow", "reasoning": "r"}), pieces=2), comments=False)
    fake.script("p1", Act(stream=lines, line_delay=0.6))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key, options=RequestOptions(model="m", stream=True), timeout=0.3)
    assert len(fake.seen("p1")) == 2
    assert rows[0]["status"] == "ok" and rows[0]["retries"] == 1


# -- bad responses ------------------------------------------------------------------------------------


def test_bad_responses_become_error_rows_naming_the_prompt(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    no_choices = completion({"content": "x"})
    no_choices["choices"] = []
    dict_args = completion({"content": None, "tool_calls": [call("functions.f:0", "f", {"a": 1})]}, "tool_calls")
    fake.script("p1", Act(body=no_choices))
    fake.script("p2", Act(body=completion({"content": None}, None)))  # empty and not finished: no turn
    fake.script("p3", Act(body=dict_args))
    fake.script("p4", Act(body="<html>Bad gateway</html>"))
    prompts = [user_prompt(f"p{i}", f"id{i}") for i in range(1, 5)]
    summary, rows = run(fake, tmp_path, prompts, api_key)
    rows_by_id = by_id(rows)
    assert summary.errors == 4 and summary.remaining == 0
    expected = {"id1": "no choices", "id2": "neither content nor tool calls", "id3": "arguments", "id4": "not JSON"}
    for pid, text in expected.items():
        row = rows_by_id[pid]
        assert row["error"]["type"] == "invalid_response"
        assert repr(pid) in row["error"]["message"]
        assert text in row["error"]["message"]
    assert rows_by_id["id3"]["response"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == {"a": 1}
    assert all(len(fake.seen(f"p{i}")) == 1 for i in range(1, 5))  # malformed answers are not retried


def test_api_key_never_reaches_the_output_or_the_error(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.script("p1", Act(status=400, echo_auth=True))
    _, rows = run(fake, tmp_path, [user_prompt("p1", "a")], api_key)
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert api_key not in text
    assert rows[0]["error"]["message"] == "rejected request with Bearer [REDACTED]"  # the echo really happened


def test_wrong_key_stops_the_run_without_a_row_or_the_key(fake: FakeOpenRouter, tmp_path: Path) -> None:
    summary, rows = run(fake, tmp_path, [user_prompt("p1", "a")], "sk-or-v1-WRONG-KEY")
    assert rows == [] and summary.refused and summary.exit_code == 4
    assert summary.stopped is not None and "HTTP 401" in summary.stopped and "WRONG-KEY" not in summary.stopped


# -- scheduling, budget, resume -----------------------------------------------------------------------


def test_concurrency_is_bounded(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    fake.default_delay = 0.15
    summary, _ = run(fake, tmp_path, [user_prompt(f"p{i}", f"id{i}") for i in range(9)], api_key, concurrency=3)
    assert summary.ok == 9
    assert fake.max_in_flight == 3


def test_spend_limit_stops_sending_new_prompts(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    summary, _ = run(fake, tmp_path, [user_prompt(f"p{i}", f"id{i}") for i in range(6)], api_key, concurrency=1, max_cost=0.0025)
    assert summary.ok == 3 and summary.remaining == 3
    assert summary.stopped is not None and "spend limit" in summary.stopped
    assert summary.exit_code == 3
    assert len(fake.seen()) == 3


def test_resume_skips_done_prompts_and_never_writes_one_twice(fake: FakeOpenRouter, tmp_path: Path, api_key: str) -> None:
    prompts = [user_prompt(f"p{i}", f"id{i}") for i in range(5)]
    first, _ = run(fake, tmp_path, prompts, api_key, limit=2)
    assert (first.ok, first.remaining) == (2, 3)
    second, rows = run(fake, tmp_path, prompts, api_key)
    assert (second.already_done, second.ok, second.remaining) == (2, 3, 0)
    assert sorted(by_id(rows)) == [f"id{i}" for i in range(5)]
    assert all(len(fake.seen(f"p{i}")) == 1 for i in range(5))
    third, rows = run(fake, tmp_path, prompts, api_key)
    assert (third.written, len(rows)) == (0, 5)
