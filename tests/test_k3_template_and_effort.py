"""Kimi-K3 prompts against the newest official renderer kimi-recon can find, and the thinking effort as requests
carry it (issue 33; docs/formats.md, "Which K3 renderer").

The official dev set was rendered by Moonshot's ``encoding_k3.py`` as vendored in vLLM @2ec5134c: its prompts are
the golden cases here. What changed after it, and what requests carry, is checked against text written out by hand
from the official renderer (the facts in docs/formats.md), never against this package's own rendering.
"""

from __future__ import annotations

from typing import Any

import pytest
from testdata import GOLDEN, read_jsonl

from kimi_recon import load_tokenizer
from kimi_recon.errors import InvalidInputError
from kimi_recon.training import build_training_sample, render_prompt, sample_from_record

K3 = read_jsonl(GOLDEN / "official-k3-dev" / "turns.jsonl")
TOK = load_tokenizer(profile="kimi-k3")


def _effort_cases(effort: str) -> list[dict[str, Any]]:
    return [c for c in K3 if c["thinking"] and c["thinking_effort"] == effort]


def test_the_dev_set_shows_the_default_effort_is_max() -> None:
    """The renderer the dev set was made with writes ``thinking_effort=max`` when none is given (40 such turns):
    an older one (HF c5d1dd4, vLLM a7d1a44) wrote no effort message then, so this pins which one is followed."""
    cases = [c for c in K3 if c["thinking"] and c["thinking_effort"] is None]
    assert len(cases) >= 20
    for case in cases:
        assert "`thinking_effort=max`" in case["prompt"]
        sample = build_training_sample(case["messages"], case["turn"], case["tools"], "kimi-k3", True, tool_choice=case["tool_choice"])
        assert sample.prompt_ids == case["prompt_ids"]


@pytest.mark.parametrize(
    "said",
    [
        lambda e: {"reasoning_effort": e},  # Moonshot: top level
        lambda e: {"request": {"reasoning_effort": e}},
        lambda e: {"request": {"thinking": {"type": "enabled", "keep": "all", "effort": e}}},  # the Kimi Vendor Verifier's
        lambda e: {"request": {"chat_template_kwargs": {"thinking": True, "preserve_thinking": True, "thinking_effort": e}}},
        lambda e: {"request": {"reasoning": {"effort": e}}},  # OpenRouter
    ],
)
@pytest.mark.parametrize("effort", ["low", "high"])
def test_a_k3_record_takes_the_effort_its_request_carries_and_gets_the_official_prompt(said: Any, effort: str) -> None:
    """A K3 prompt came out one token off when the record had no ``thinking_effort`` (OpenRouter rows never carry
    one): the request's effort is read wherever Moonshot, OpenRouter or a self-hosted server puts it."""
    case = _effort_cases(effort)[0]
    record = {"messages": case["messages"], "tools": case["tools"], "tool_choice": case["tool_choice"], "thinking": True,
              "response": case["turn"], "profile": "kimi-k3", **said(effort)}
    assert sample_from_record(record, TOK).prompt_ids == case["prompt_ids"]


def test_an_openrouter_effort_k3_has_not_is_refused_naming_the_field_not_rendered_as_max() -> None:
    case = _effort_cases("max")[0]
    record = {"id": "r", "messages": case["messages"], "response": case["turn"], "profile": "kimi-k3", "thinking": True,
              "request": {"reasoning": {"effort": "medium"}}}
    with pytest.raises(InvalidInputError, match="thinking_effort") as err:
        sample_from_record(record, TOK)
    assert err.value.field == "thinking_effort" and "'medium'" in str(err.value)


@pytest.mark.parametrize("request_", [{"reasoning_effort": "none"}, {"chat_template_kwargs": {"enable_thinking": False}}])
def test_an_effort_of_none_is_thinking_off(request_: dict[str, Any]) -> None:
    case = next(c for c in K3 if not c["thinking"])
    record = {"messages": case["messages"], "tools": case["tools"], "tool_choice": case["tool_choice"], "response": case["turn"],
              "profile": "kimi-k3", "request": request_}
    sample = sample_from_record(record, TOK)
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]


@pytest.mark.parametrize("role", ["developer", "function", "ipython", "observation"])
def test_a_role_the_renderer_does_not_know_is_refused_as_the_newest_official_renderer_does(role: str) -> None:
    """The renderer the dev set was made with skipped such a message without a word, so the prompt silently lost
    it; Moonshot's Hugging Face commit a590ce09 (2026-08-20, vLLM PR #53148) raises instead."""
    messages = [{"role": role, "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    with pytest.raises(InvalidInputError) as err:
        render_prompt(messages, profile="kimi-k3")
    assert err.value.field == "messages[0].role"
    assert ("#53148" in str(err.value)) == (role == "developer")
    # the roles it knows render as before
    assert render_prompt([{"role": "system", "content": "Be brief."}, messages[1]], profile="kimi-k3").count("<|end_of_msg|>") == 3


_GEN = '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>'
_EFFORT = (
    '<|open|>message role="system" type="thinking-effort"<|sep|>`thinking_effort` guides on how much to think in your '
    "thinking channel (not including the response channel), supported values include `low`, `medium`, `high`, and "
    "`max`.\nNow the system is invoked with `thinking_effort=max`.<|close|>message<|sep|><|end_of_msg|>"
)
_USER = '<|open|>message role="user"<|sep|>Give me JSON.<|close|>message<|sep|><|end_of_msg|>'
_RF_HEAD = (
    '<|open|>message role="system" type="response-format"<|sep|>The system is invoked with `response_format={kind}`.\n'
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional formatting."
)
_RF_TAIL = "<|close|>message<|sep|><|end_of_msg|>"


@pytest.mark.parametrize(
    ("response_format", "expected"),
    [
        ({"type": "json_object"}, _RF_HEAD.format(kind="json_object") + _RF_TAIL),
        ("json_object", _RF_HEAD.format(kind="json_object") + _RF_TAIL),
        (
            {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}}},
            _RF_HEAD.format(kind="json_schema") + '\nThe JSON data must match the following schema:\n```json\n'
            '{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}\n```' + _RF_TAIL,
        ),
        ({"type": "text"}, ""),
    ],
)
def test_a_k3_prompt_writes_the_requests_response_format_as_the_official_renderer(response_format: Any, expected: str) -> None:
    """The official renderer adds a ``response-format`` system message after the conversation (and after the
    ``tool_choice`` one); kimi-recon wrote none, so every K3 prompt of a JSON-mode request was silently other ids."""
    messages = [{"role": "user", "content": "Give me JSON."}]
    assert render_prompt(messages, profile="kimi-k3", response_format=response_format) == _EFFORT + _USER + expected + _GEN
    record = {"messages": messages, "response": {"role": "assistant", "content": "{}", "reasoning_content": "Hm."},
              "profile": "kimi-k3", "request": {"response_format": response_format}}
    sample = sample_from_record(record, TOK)
    assert TOK.decode(sample.prompt_ids) == _EFFORT + _USER + expected + _GEN
    # each text piece is its own encode (the per-segment rule, tokenizer README): the prompt ends with these ids
    if expected:
        body = expected[len('<|open|>message role="system" type="response-format"<|sep|>') : -len(_RF_TAIL)]
        tail = _pieces(body, "<|close|>", "message", "<|sep|>", "<|end_of_msg|>")
        gen = _pieces("<|open|>", "message", " role", '="', "assistant", '"', "<|sep|>", "<|open|>", "think", "<|sep|>")
        assert sample.prompt_ids[-len(tail) - len(gen) :] == tail + gen


_MARKERS = ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>")


def _pieces(*parts: str) -> list[int]:
    """Each part encoded on its own: a marker as its special id, any other text as ordinary text."""
    return [i for part in parts for i in TOK.encode(part, allowed_special="all" if part in _MARKERS else set())]
