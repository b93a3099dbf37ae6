"""The thinking mode of an answer, and its reasoning, read the same at every door (issue 33).

A thinking-off answer read with thinking on by default gained a ``</think>`` the model never wrote, and the usage
check took the one-token difference for "the count without the stop token" and agreed. Now the mode is read from
the record or its request where they say it; where nothing says it and the message carries no reasoning, the
rebuild says so (``thinking_assumed``) and a count one short is not agreement. Reasoning the usage counted but the
response left out is ``reasoning_not_returned`` outside ``generate`` too; reasoning under a key no reader knows is
``reasoning_key_unread``; ``reasoning`` and ``reasoning_details`` that disagree are flagged at every door.

Expected ids are the tokenizer's encode of the text the model writes (the K2.5 format: the prompt opens ``<think>``),
never the rebuild's own output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kimi_recon
from kimi_recon.cli import main
from kimi_recon.dataset import audit_record, reconstruct_record, reconstruct_records
from kimi_recon.flags import FlagCode
from kimi_recon.training import build_training_sample, sample_from_record

TOK = kimi_recon.load_tokenizer()
MESSAGES: list[dict[str, Any]] = [{"role": "user", "content": "Say hi."}]


def _response(message: dict[str, Any], usage: dict[str, Any] | None = None, model: str = "moonshotai/kimi-k2.5") -> dict[str, Any]:
    out: dict[str, Any] = {"object": "chat.completion", "model": model,
                           "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}]}
    if usage is not None:
        out["usage"] = usage
    return out


def _codes(flags: Any) -> list[str]:
    return [f.code.value for f in flags]


OFF_IDS = TOK.encode("Hi!<|im_end|>", allowed_special="all")  # what the model wrote with thinking off
ON_IDS = TOK.encode("</think>Hi!<|im_end|>", allowed_special="all")  # ... with thinking on and no reasoning


@pytest.mark.parametrize(
    "said",
    [
        {"request": {"reasoning": {"enabled": False}}},  # OpenRouter
        {"request": {"reasoning": {"effort": "none"}}},
        {"request": {"thinking": {"type": "disabled"}}},  # Moonshot
        {"thinking": {"type": "disabled"}},
        {"request": {"chat_template_kwargs": {"thinking": False}}},  # vLLM / SGLang
        {"thinking": False},
    ],
)
def test_a_thinking_off_answer_whose_record_says_so_gains_no_think_end_at_any_door(said: dict[str, Any]) -> None:
    record = {"id": "r", "messages": MESSAGES, "response": _response({"content": "Hi!", "reasoning": None}), **said}
    assert reconstruct_record(record, TOK).ids == OFF_IDS
    assert [list(r.ids or ()) for r in reconstruct_records([record])] == [OFF_IDS]
    assert sample_from_record(record, TOK).output_ids == OFF_IDS
    audited = audit_record({**record, "reference_ids": OFF_IDS}, TOK)
    assert audited.kind == "exact" and FlagCode.THINKING_ASSUMED not in audited.flag_codes


def test_a_message_without_reasoning_and_no_mode_said_is_flagged_at_every_door(tmp_path: Path) -> None:
    response = _response({"content": "Hi!"})
    rebuilt = kimi_recon.reconstruct_output_ids(response)
    assert rebuilt.ids == ON_IDS and _codes(rebuilt.flags) == ["thinking_assumed"]
    flag = rebuilt.flags[0]
    assert flag.severity.value == "loss" and "--no-thinking" in flag.message and flag.field == "reasoning"
    assert _codes(kimi_recon.reconstruct_many([response])[0].flags) == ["thinking_assumed"]
    record = {"id": "r", "messages": MESSAGES, "response": response}
    assert FlagCode.THINKING_ASSUMED in reconstruct_record(record, TOK).flag_codes
    assert FlagCode.THINKING_ASSUMED in audit_record({**record, "reference_ids": ON_IDS}, TOK).flag_codes
    assert FlagCode.THINKING_ASSUMED in _codes(sample_from_record(record, TOK).flags)
    assert FlagCode.THINKING_ASSUMED in _codes(build_training_sample(MESSAGES, response).flags)
    # said, by the call or the record: no flag, and off gives the ids without </think>
    assert kimi_recon.reconstruct_output_ids(response, thinking=True).flags == ()
    assert kimi_recon.reconstruct_output_ids(response, thinking=False).ids == OFF_IDS
    assert FlagCode.THINKING_ASSUMED not in reconstruct_record({**record, "thinking": True}, TOK).flag_codes
    assert FlagCode.THINKING_ASSUMED not in _codes(build_training_sample(MESSAGES, response, thinking=True).flags)
    # a message with reasoning shows thinking was on: nothing to say
    assert kimi_recon.reconstruct_output_ids(_response({"content": "Hi!", "reasoning": "Hm, a greeting"})).flags == ()
    # the command line: flagged by default, not with --no-thinking
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    main(["reconstruct", str(path), "-o", str(out), "--quiet"])
    row = json.loads(out.read_text(encoding="utf-8"))
    assert [f["code"] for f in row["flags"]] == ["thinking_assumed"] and row["output_ids"] == ON_IDS
    assert main(["reconstruct", str(path), "-o", str(out), "--quiet", "--no-thinking"]) == 0
    row = json.loads(out.read_text(encoding="utf-8"))
    assert row["flags"] == [] and row["output_ids"] == OFF_IDS


def test_k3_and_the_profiles_without_a_choice_of_mode() -> None:
    k3 = kimi_recon.reconstruct_output_ids(_response({"content": "Hi!"}, model="moonshotai/kimi-k3"))
    assert _codes(k3.flags) == ["thinking_assumed"] and "think channel" in k3.flags[0].message
    # K2-Instruct has no thinking, K2-Thinking opens its own, K2.7-Code always thinks: no mode to assume
    for profile in ("kimi-k2-instruct", "kimi-k2-thinking", "kimi-k2.7-code"):
        assert kimi_recon.reconstruct_output_ids({"content": "Hi!"}, profile=profile).flags == ()


def test_a_count_one_short_of_a_turn_without_reasoning_is_not_agreement_when_the_mode_is_unknown() -> None:
    """A thinking-off answer of 3 ids (``Hi!<|im_end|>``: 2 + 1) counted exactly reads, against the 4 rebuilt with
    ``</think>``, as "without stop": the usage check agreed and hid the extra token."""
    usage = {"completion_tokens": len(OFF_IDS)}
    record = {"id": "r", "messages": MESSAGES, "response": _response({"content": "Hi!"}, usage)}
    audited = audit_record({**record, "reference_ids": ON_IDS}, TOK)
    counts = audited.token_counts
    assert counts is not None and counts.completion is not None and counts.completion.convention is None
    flag = next(f for f in audited.flags if f.code == FlagCode.COMPLETION_TOKENS_MISMATCH)
    assert "thinking off" in flag.message and flag.delta == -1
    assert FlagCode.COMPLETION_TOKENS_MISMATCH in _codes(sample_from_record(record, TOK).flags)
    # the mode said: the same count is the turn without its stop token, as before
    said = audit_record({**record, "thinking": True, "reference_ids": ON_IDS}, TOK)
    assert said.token_counts is not None and said.token_counts.completion is not None
    assert said.token_counts.completion.convention is not None and said.token_counts.completion.convention.value == "without_stop"
    assert not [f for f in said.flags if f.code.value.endswith("_mismatch")]
    # a count that fits only the rebuilt turn is agreement even unsaid (exact here)
    exact = audit_record({**record, "response": _response({"content": "Hi!"}, {"completion_tokens": len(ON_IDS)}), "reference_ids": ON_IDS}, TOK)
    assert exact.token_counts is not None and exact.token_counts.completion is not None and exact.token_counts.completion.agrees


def test_reasoning_the_usage_counted_but_the_response_left_out_is_flagged_outside_generate() -> None:
    usage = {"completion_tokens": 60, "completion_tokens_details": {"reasoning_tokens": 57}}
    response = _response({"content": "Hi!"}, usage)
    for thinking in (None, True):
        rebuilt = kimi_recon.reconstruct_output_ids(response, thinking=thinking)
        assert FlagCode.REASONING_NOT_RETURNED in rebuilt.flag_codes and FlagCode.THINKING_ASSUMED not in rebuilt.flag_codes
        assert "57 reasoning tokens" in next(f.message for f in rebuilt.flags if f.code == FlagCode.REASONING_NOT_RETURNED)
    record = {"id": "r", "messages": MESSAGES, "response": response, "thinking": True}
    assert FlagCode.REASONING_NOT_RETURNED in reconstruct_record(record, TOK).flag_codes
    assert FlagCode.REASONING_NOT_RETURNED in _codes(sample_from_record(record, TOK).flags)
    # one reasoning token is the </think> of an empty reasoning some servers count: thinking was on, nothing lost
    one = kimi_recon.reconstruct_output_ids(_response({"content": "Hi!"}, {"completion_tokens_details": {"reasoning_tokens": 1}}))
    assert one.flags == ()


@pytest.mark.parametrize(
    "extra",
    [
        {"reasoning_text": "User wants hi"},
        {"thinking": "User wants hi"},
        {"thoughts": [{"text": "User wants hi"}]},
        {"thinking_blocks": [{"type": "thinking", "thinking": "User wants hi", "signature": "c2ln"}]},
    ],
)
def test_reasoning_under_a_key_no_reader_knows_is_flagged_not_dropped(extra: dict[str, Any]) -> None:
    response = _response({"content": "Hi!", **extra})
    rebuilt = kimi_recon.reconstruct_output_ids(response)
    assert _codes(rebuilt.flags) == ["reasoning_key_unread"] and rebuilt.flags[0].severity.value == "loss"
    assert next(iter(extra)) in rebuilt.flags[0].message
    record = {"id": "r", "messages": MESSAGES, "response": response}
    assert FlagCode.REASONING_KEY_UNREAD in reconstruct_record(record, TOK).flag_codes
    assert FlagCode.REASONING_KEY_UNREAD in _codes(sample_from_record(record, TOK).flags)
    # beside the same reasoning under a key that is read (LiteLLM writes both): nothing lost, nothing to say
    both = kimi_recon.reconstruct_output_ids(_response({"content": "Hi!", "reasoning_content": "User wants hi", **extra}))
    assert both.flags == ()
    other = kimi_recon.reconstruct_output_ids(_response({"content": "Hi!", "reasoning_content": "Something else", **extra}))
    assert _codes(other.flags) == ["reasoning_sources_disagree"]


def test_keys_that_only_sound_like_reasoning_are_not_taken_for_it() -> None:
    for message in ({"content": "Hi!", "finish_reason": "stop"}, {"content": "Hi!", "thought_signature": "c2ln"}, {"content": "Hi!", "thinking": ""}):
        assert kimi_recon.reconstruct_output_ids(message, thinking=True).flags == ()


def test_reasoning_and_reasoning_details_that_disagree_are_flagged_at_every_door() -> None:
    response = _response({"content": "Hi!", "reasoning": "User wants hi", "reasoning_details": [{"type": "reasoning.text", "text": "Another text."}]})
    rebuilt = kimi_recon.reconstruct_output_ids(response)
    assert _codes(rebuilt.flags) == ["reasoning_sources_disagree"]
    assert rebuilt.ids == TOK.encode("User wants hi</think>Hi!<|im_end|>", allowed_special="all")
    record = {"id": "r", "messages": MESSAGES, "response": response}
    assert FlagCode.REASONING_SOURCES_DISAGREE in reconstruct_record(record, TOK).flag_codes
    assert FlagCode.REASONING_SOURCES_DISAGREE in audit_record({**record, "reference_ids": rebuilt.ids}, TOK).flag_codes
    assert FlagCode.REASONING_SOURCES_DISAGREE in _codes(sample_from_record(record, TOK).flags)
    agree = _response({"content": "Hi!", "reasoning": "Same here", "reasoning_details": [{"type": "reasoning.text", "text": "Same here"}]})
    assert kimi_recon.reconstruct_output_ids(agree).flags == ()


def test_a_generate_row_says_each_reasoning_flag_once() -> None:
    from kimi_recon.openrouter.options import RequestOptions
    from kimi_recon.openrouter.prompts import Prompt
    from kimi_recon.openrouter.rebuild import make_reconstructor
    from kimi_recon.openrouter.rows import CallInfo, ok_row

    response = _response({"content": "Hi!", "reasoning": "A.", "reasoning_details": [{"type": "reasoning.text", "text": "B."}]})
    turn = kimi_recon.turn_from_response(response)
    prompt = Prompt(id="p", messages=tuple(MESSAGES), tools=None, line=1)
    rebuilt = make_reconstructor()(prompt, turn)
    row = ok_row(prompt, RequestOptions(model="moonshotai/kimi-k2.5"), response, turn, rebuilt, CallInfo())
    assert [f["code"] for f in row["flags"]].count("reasoning_sources_disagree") == 1


def test_worker_processes_read_the_request_and_unread_reasoning_keys_as_one_worker_does() -> None:
    """Records sent to worker processes kept only the keys a record was read for, ``request`` not among them: with
    ``--workers N`` a thinking-off request was rebuilt with ``</think>``, and a bare message's unknown reasoning key
    vanished."""
    records: list[dict[str, Any]] = [
        {"id": "off", "request": {"reasoning": {"enabled": False}}, "response": _response({"content": "Hi!"})},
        {"id": "key", "role": "assistant", "content": "Hi!", "reasoning_text": "Hm, a greeting", "thinking": True},
        *({"id": f"n{i}", "thinking": True, "response": _response({"content": "Hi!", "reasoning": "Hm, a greeting"})} for i in range(4)),
    ]
    one = [(list(r.ids or ()), _codes(r.flags)) for r in reconstruct_records(records)]
    many = [(list(r.ids or ()), _codes(r.flags)) for r in reconstruct_records(records, workers=2, executor="processes")]
    assert many == one
    assert one[0] == (OFF_IDS, []) and "reasoning_key_unread" in one[1][1]


@pytest.mark.parametrize(
    "said",
    [
        {"request": {"thinking": {"type": "enabled", "keep": "all"}}},  # Moonshot, K2.6's preserved thinking
        {"request": {"chat_template_kwargs": {"thinking": True, "preserve_thinking": True}}},  # a server's
        {"template_kwargs": {"preserve_thinking": True}},  # the record's own, which the stock K2.5 template ignored
    ],
)
def test_a_request_that_keeps_earlier_reasoning_gets_the_prompt_that_keeps_it(said: dict[str, Any]) -> None:
    """The official dev set rendered these conversations with every earlier turn's reasoning kept (SOURCES.md §9);
    a K2.5/K2.6 record whose request asked for that (``thinking.keep: "all"``) was rendered with the stock template,
    which drops it, without a word."""
    from testdata import OFFICIAL, read_jsonl

    cases = [c for c in read_jsonl(OFFICIAL / "turns.jsonl") if not c["turn"].get("tool_calls") and c["thinking"]]
    differs = 0
    for case in cases:
        record = {"messages": case["messages"], "tools": case["tools"], "response": case["turn"], "profile": "kimi-k2.5", "thinking": True}
        assert sample_from_record({**record, **said}, TOK).prompt_ids == case["prompt_ids"]
        differs += sample_from_record(record, TOK).prompt_ids != case["prompt_ids"]
    assert differs  # without it the stock template drops the earlier reasoning: the request's word matters
