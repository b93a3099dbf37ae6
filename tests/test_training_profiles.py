"""Every profile's training samples equal the official tokenizer's: tools deep-sorted by key as each
official ``apply_chat_template`` does, and template keyword options (``preserve_thinking``) reaching the
template.

Oracles: the official K2.5 dev set (tests/data/golden/official-k2.5-dev, prompts rendered by Moonshot's
code) and, for K2-Thinking/K2-Instruct, transformers' own chat-template renderer on the real templates
after the step the official ``tokenization_kimi.py`` of those models takes first:
``tools = deep_sort_dict(tools)`` (see tests/data/SOURCES.md, "Tool key order").
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from extras import require
from hypothesis import given
from hypothesis import strategies as st
from testdata import DATA, OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, build_training_sample, render_prompt
from kimi_recon.cli import main
from kimi_recon.training import sample_from_record

CASES = read_jsonl(OFFICIAL / "turns.jsonl") + read_jsonl(OFFICIAL / "turns_adversarial.jsonl")
WITH_TOOL_CALLS = [c for c in CASES if c["turn"].get("tool_calls")]
# The official set rendered these with the preserve_thinking template (SOURCES.md §9).
WITHOUT_TOOL_CALLS = [c for c in CASES if not c["turn"].get("tool_calls")]
MILES_PATH = DATA / "templates" / "kimi-k2.5.miles-fixed.chat_template.jinja"
MILES = MILES_PATH.read_text(encoding="utf-8")
TEMPLATES = {
    "kimi-k2-thinking": (DATA / "templates" / "hf" / "Kimi-K2-Thinking@612681931a8c.chat_template.jinja").read_text(encoding="utf-8"),
    "kimi-k2-instruct": (DATA / "templates" / "hf" / "Kimi-K2-Instruct@0102674b179d.chat_template.jinja").read_text(encoding="utf-8"),
}


def official_deep_sort(obj: Any) -> Any:
    """What the official apply_chat_template of K2-Thinking/K2-Instruct/K2.5 does to tools first."""
    if isinstance(obj, dict):
        return {k: official_deep_sort(v) for k, v in sorted(obj.items())}
    if isinstance(obj, list):
        return [official_deep_sort(v) for v in obj]
    return obj


def hf_prompt(template: str, messages: list[dict[str, Any]], tools: Any, **kwargs: Any) -> str:
    render_jinja_template = require("transformers.utils.chat_template_utils").render_jinja_template

    rendered, _ = render_jinja_template([messages], tools=tools, chat_template=template, add_generation_prompt=True, **kwargs)
    return str(rendered[0])


def shuffled(obj: Any, rng: random.Random) -> Any:
    """``obj`` with every mapping's keys in a random order (list order kept)."""
    if isinstance(obj, dict):
        keys = list(obj)
        rng.shuffle(keys)
        return {k: shuffled(obj[k], rng) for k in keys}
    if isinstance(obj, list):
        return [shuffled(v, rng) for v in obj]
    return obj


UNSORTED_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "required": ["city"], "properties": {"unit": {"type": "string", "enum": ["c", "f"]}, "city": {"type": "string"}}},
            "description": "Weather now.",
        },
    }
]
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
TURN = {"role": "assistant", "content": "", "tool_calls": [{"id": "functions.get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}


# -- K2-Thinking and K2-Instruct sort tool keys ---------------------------------------------------------


@pytest.mark.parametrize("profile", sorted(TEMPLATES))
def test_k2_thinking_and_instruct_declare_tools_with_keys_deep_sorted(tok: KimiTokenizer, profile: str) -> None:
    official = hf_prompt(TEMPLATES[profile], MESSAGES, official_deep_sort(UNSORTED_TOOLS))
    assert official != hf_prompt(TEMPLATES[profile], MESSAGES, UNSORTED_TOOLS)  # the order matters here
    assert render_prompt(MESSAGES, UNSORTED_TOOLS, profile) == official
    sample = build_training_sample(MESSAGES, TURN, UNSORTED_TOOLS, profile, tokenizer=tok)
    assert sample.prompt_ids == tok.encode(official)
    assert '"description":"Weather now.","name":"get_weather","parameters":{"properties":{"city"' in official


# Null values in objects are left out: where a tool may not hold one, kimi-recon removes it as an Arrow
# filler (see test_record_options.py); nulls inside lists are kept.
json_leaf = st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
schemas = st.recursive(
    json_leaf,
    lambda inner: st.dictionaries(st.text(min_size=1, max_size=4), inner, max_size=4) | st.lists(inner | st.none(), max_size=3),
    max_leaves=10,
)
tool_lists = st.lists(
    st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries({"name": st.sampled_from(["f", "g"]), "parameters": schemas})}).map(
        lambda t: shuffled(t, random.Random(repr(t)))
    ),
    min_size=1,
    max_size=3,
)


@given(tools=tool_lists, profile=st.sampled_from(sorted(TEMPLATES)))
def test_any_tools_render_as_the_official_tokenizer_renders_them(tools: list[dict[str, Any]], profile: str) -> None:
    assert render_prompt(MESSAGES, tools, profile) == hf_prompt(TEMPLATES[profile], MESSAGES, official_deep_sort(tools))


@pytest.mark.parametrize("case", WITH_TOOL_CALLS[:20], ids=[f"tools-{i}" for i in range(20)])
def test_k25_tools_in_any_key_order_give_the_official_sample(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    tools = shuffled(case["tools"], random.Random(7))
    sample = build_training_sample(case["messages"], case["turn"], tools, thinking=case["thinking"], tokenizer=tok)
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]


# -- template options ------------------------------------------------------------------------------


def test_preserve_thinking_changes_some_official_prompts() -> None:
    # Otherwise the tests below could not tell a dropped option from a passed one.
    changed = [c for c in WITHOUT_TOOL_CALLS if render_prompt(c["messages"], c["tools"], thinking=c["thinking"], template=MILES) != c["prompt"]]
    assert len(changed) >= 5


@pytest.mark.parametrize("case", WITHOUT_TOOL_CALLS, ids=[f"plain-{i}" for i in range(len(WITHOUT_TOOL_CALLS))])
def test_training_sample_with_preserve_thinking_equals_official(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    kwargs = {"template": MILES, "template_kwargs": {"preserve_thinking": True}}
    sample = build_training_sample(case["messages"], case["turn"], case["tools"], thinking=case["thinking"], tokenizer=tok, **kwargs)  # type: ignore[arg-type]
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]
    assert sample.prompt_len == len(case["prompt_ids"])


@pytest.mark.parametrize("case", WITHOUT_TOOL_CALLS[:8], ids=[f"plain-{i}" for i in range(8)])
def test_preserve_thinking_prompt_equals_the_template_rendered_by_transformers(case: dict[str, Any]) -> None:
    from kimi_recon.tool_declaration import render_tools_declaration

    tools = official_deep_sort(case["tools"]) if case["tools"] else None
    extra = {"tools_ts_str": render_tools_declaration(tools)} if tools else {}
    expected = hf_prompt(MILES, case["messages"], tools, thinking=case["thinking"], preserve_thinking=True, **extra)
    prompt = render_prompt(case["messages"], case["tools"], thinking=case["thinking"], template=MILES, template_kwargs={"preserve_thinking": True})
    assert prompt == expected == case["prompt"]


def test_build_samples_passes_a_records_template_kwargs_to_its_chat_template(tmp_path: Path) -> None:
    cases = WITHOUT_TOOL_CALLS[:4]
    rows = [{"id": str(i), "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"], "template_kwargs": {"preserve_thinking": True}} for i, c in enumerate(cases)]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["build-samples", str(src), "-o", str(out), "--chat-template", str(MILES_PATH)]) == 0
    got = read_jsonl(out)
    assert [g["input_ids"] for g in got] == [c["prompt_ids"] + c["output_ids"] for c in cases]


def test_sample_from_record_reads_template_kwargs(tok: KimiTokenizer) -> None:
    case = WITHOUT_TOOL_CALLS[0]
    record = {"id": "x", "messages": case["messages"], "tools": case["tools"], "turn": case["turn"], "thinking": case["thinking"], "template_kwargs": '{"preserve_thinking": true}'}
    assert sample_from_record(record, tok, template=MILES).input_ids == case["prompt_ids"] + case["output_ids"]
