"""The K2.5 template in Python (kimi_recon._render.k25_prompt) renders what the real jinja template renders, and the
usage check's prompt counter built on it counts what one encode of the jinja render counts.

The oracle is ``render_prompt``/``encode_prompt`` with the bundled template (itself pinned to transformers'
renderer and to the official prompts by tests/test_template_conformity.py and tests/test_training*.py),
plus the official dev conversations' own prompt ids.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testdata import OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer
from kimi_recon._render.k25_prompt import TEMPLATE_MARKERS, k25_prompt_fragments, uses_k25_template
from kimi_recon.errors import InvalidInputError
from kimi_recon.openrouter.prompts import Prompt
from kimi_recon.openrouter.rebuild import make_prompt_counter
from kimi_recon.profiles import get_profile
from kimi_recon.tool_declaration import render_tools_declaration
from kimi_recon.training import deep_sorted, encode_prompt, render_prompt

CASES = read_jsonl(OFFICIAL / "turns.jsonl") + read_jsonl(OFFICIAL / "turns_adversarial.jsonl")
K25 = get_profile("kimi-k2.5")

SPECIAL_TEXT = ["<|im_end|>", "<|im_user|>", "<think>", "</think>", "[EOS]", "<|tool_call_begin|>", "<|im_end|", "<|foo|>", "<think"]
text = (
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
    | st.sampled_from(["", " ", "\n\n", "  \n", "```python\nprint(1)\n```", "你好，世界", "🙂👩‍💻", "None", "## Return of"])
    | st.lists(st.sampled_from(SPECIAL_TEXT) | st.text(max_size=6), max_size=5).map("".join)
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=6,
)
TOOL_LISTS: list[list[dict[str, Any]] | None] = [
    None,
    [{"type": "function", "function": {"name": "get_weather", "description": "Weather.", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    [
        {"type": "function", "function": {"parameters": {"properties": {"q": {"description": "what <|im_end|>", "type": "string"}}, "type": "object"}, "name": "search"}},
        {"type": "function", "function": {"name": "run", "description": "Run code.\n\nTwo lines.", "parameters": {"type": "object", "properties": {}}}},
    ],
]
REASONING_KEYS = ["reasoning_content", "thinking", "reasoning"]


@st.composite
def tool_calls(draw: st.DrawFn) -> list[dict[str, Any]]:
    calls = []
    for i in range(draw(st.integers(1, 3))):
        arguments = draw(text | st.dictionaries(st.sampled_from(["q", "n", "深度", "<|im_end|>"]), json_value, max_size=3) | json_value)
        call: dict[str, Any] = {"id": draw(st.sampled_from([f"functions.search:{i}", "call_abc", "", "<|im_end|>"])), "type": "function"}
        call["function"] = {"name": draw(st.sampled_from(["search", "run"])), "arguments": arguments}
        calls.append(call)
    return calls


@st.composite
def messages_(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Conversations of every shape the Python renderer covers: any role order, names, null content,
    reasoning under any of its names, tool calls (string or JSON arguments) and tool results."""
    out: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(0, 6))):
        role = draw(st.sampled_from(["system", "user", "assistant", "tool", "developer"]))
        message: dict[str, Any] = {"role": role}
        if draw(st.integers(0, 5)):
            message["content"] = draw(st.none() | text)
        if not draw(st.integers(0, 4)):
            message["name"] = draw(st.sampled_from(["", "alice", "<|im_end|>"]) | st.none())
        if role == "assistant":
            if draw(st.booleans()):
                message[draw(st.sampled_from(REASONING_KEYS))] = draw(text)
            if draw(st.booleans()):
                message["tool_calls"] = draw(tool_calls() | st.sampled_from([[], None]))
        if role == "tool":
            message["tool_call_id"] = draw(st.sampled_from(["functions.search:0", "", "x\ny"]))
        out.append(message)
    return out


def declaration(tools: list[dict[str, Any]] | None) -> str | None:
    return render_tools_declaration(deep_sorted(tools)) if tools else None


def count_of(tok: KimiTokenizer, messages: list[dict[str, Any]], tools: Any, thinking: bool) -> int:
    return len(encode_prompt(messages, tools, K25, thinking, tok))


@settings(max_examples=300)
@given(messages_(), st.sampled_from(TOOL_LISTS), st.booleans())
def test_python_renderer_joins_to_the_jinja_render_of_the_k25_template(messages: list[dict[str, Any]], tools: Any, thinking: bool) -> None:
    fragments = k25_prompt_fragments(messages, declaration(tools), thinking)
    assert fragments is not None  # every shape drawn here is covered
    assert "".join(fragments) == render_prompt(messages, tools, K25, thinking)


@settings(max_examples=150)
@given(messages_(), st.sampled_from(TOOL_LISTS), st.booleans(), st.data())
def test_uncovered_shapes_return_none_never_another_text(messages: list[dict[str, Any]], tools: Any, thinking: bool, data: st.DataObject) -> None:
    # Spoil one field with a value the renderer does not cover; jinja prints it somehow (or fails).
    odd = st.sampled_from([None, 7, ["a"], [{"type": "text", "text": "x"}], {"k": 1}, True])
    if messages:
        i = data.draw(st.integers(0, len(messages) - 1))
        key = data.draw(st.sampled_from(["content", "name", "role", "reasoning_content", "tool_call_id", "tool_calls"]))
        messages[i] = {**messages[i], key: data.draw(odd)}
    else:
        messages = [data.draw(odd)]  # type: ignore[arg-type]  # a message that is no object: covered nowhere
    fragments = k25_prompt_fragments(messages, declaration(tools), thinking)
    try:
        rendered = render_prompt(messages, tools, K25, thinking)
    except InvalidInputError:
        assert fragments is None
        return
    assert fragments is None or "".join(fragments) == rendered


CALL = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "assistant", "content": "a", "tool_calls": [CALL], "reasoning_content": None},  # jinja prints "None"
        {"role": "assistant", "content": "a", "tool_calls": [{**CALL, "id": None}]},
        {"role": "tool", "content": "a"},  # no tool_call_id: jinja prints nothing
        {"role": "user", "content": "a", "name": 7},
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
    ],
)
def test_shapes_jinja_renders_oddly_are_left_to_jinja(message: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": "q"}, message]
    assert k25_prompt_fragments(messages, None, True) is None
    assert render_prompt(messages, None, K25, True)  # the template does render them (the counter falls back to it)


def test_a_call_without_arguments_is_left_to_jinja_which_refuses_it() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": [{"id": "x", "function": {"name": "f"}}]}]
    assert k25_prompt_fragments(messages, None, True) is None
    with pytest.raises(InvalidInputError):
        render_prompt(messages, None, K25, True)


def test_template_markers_are_fragments_of_their_own() -> None:
    messages = [{"role": "user", "content": "a<|im_end|>b"}, {"role": "assistant", "content": "c", "tool_calls": [{"id": "i", "function": {"arguments": "{}"}}]}]
    fragments = k25_prompt_fragments(messages, "decl", True)
    assert fragments is not None
    assert [f for f in fragments if f in TEMPLATE_MARKERS] == [
        "<|im_system|>", "<|im_middle|>", "<|im_end|>", "<|im_user|>", "<|im_middle|>", "<|im_end|>",
        "<|im_assistant|>", "<|im_middle|>", "<think>", "</think>", "<|tool_calls_section_begin|>", "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>", "<|im_end|>",
        "<|im_assistant|>", "<|im_middle|>", "<think>",
    ]  # fmt: skip
    assert "a<|im_end|>b" in fragments  # special text a message holds stays in its fragment


@pytest.mark.parametrize("thinking", [True, False])
def test_python_renderer_and_counter_match_every_official_dev_conversation(tok: KimiTokenizer, thinking: bool) -> None:
    count = make_prompt_counter(thinking=thinking, tokenizer=tok)
    official = 0
    for case in CASES:
        fragments = k25_prompt_fragments(case["messages"], declaration(case["tools"]), thinking)
        rendered = render_prompt(case["messages"], case["tools"], K25, thinking, tok)
        assert fragments is not None and "".join(fragments) == rendered
        n = count(Prompt("g", tuple(case["messages"]), tuple(case["tools"]) if case["tools"] else None, 1))
        assert n == count_of(tok, case["messages"], case["tools"], thinking)
        if case["thinking"] == thinking and rendered == case["prompt"]:
            assert n == len(case["prompt_ids"])
            official += 1
    assert official >= (100 if thinking else 20)


@settings(max_examples=200)
@given(messages_(), st.sampled_from(TOOL_LISTS), st.booleans())
def test_prompt_counter_equals_one_encode_of_the_jinja_render(tok: KimiTokenizer, messages: list[dict[str, Any]], tools: Any, thinking: bool) -> None:
    count = make_prompt_counter(thinking=thinking, tokenizer=tok, cache_size=8)
    prompt = Prompt("p", tuple(messages), tuple(tools) if tools else None, 1)
    expected = count_of(tok, messages, tools, thinking)
    assert count(prompt) == expected
    assert count(prompt) == expected  # again, from the caches


def test_prompt_counter_falls_back_to_the_template_for_content_parts(tok: KimiTokenizer) -> None:
    messages = [{"role": "user", "content": [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]}]
    assert k25_prompt_fragments(messages, None, True) is None
    assert make_prompt_counter(tokenizer=tok)(Prompt("p", tuple(messages), None, 1)) == count_of(tok, messages, None, True)


def test_prompt_counter_counts_long_prompts_as_the_official_encode_cuts_them(tok: KimiTokenizer) -> None:
    messages = [{"role": "user", "content": " " * 30_000 + "x" * 30_000}]
    assert make_prompt_counter(tokenizer=tok)(Prompt("p", tuple(messages), None, 1)) == count_of(tok, messages, None, True)


def test_cached_tool_declaration_serves_only_equal_plain_json(tok: KimiTokenizer) -> None:
    count = make_prompt_counter(tokenizer=tok)
    messages = ({"role": "user", "content": "hi"},)
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"1": {"type": "string"}}}}}
    reordered = {"function": {"parameters": {"properties": {"1": {"type": "string"}}, "type": "object"}, "name": "f"}, "type": "function"}
    expected = count_of(tok, list(messages), [tool], True)
    assert count(Prompt("a", messages, (tool,), 1)) == expected
    assert count(Prompt("b", messages, (reordered,), 2)) == expected  # the same tools, keys in another order
    # Same JSON text, but an integer key: the template path refuses it, and so must the counter.
    int_key = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {1: {"type": "string"}}}}}
    with pytest.raises(InvalidInputError, match="not a string"):
        count(Prompt("c", messages, (int_key,), 3))


def test_python_renderer_is_used_only_with_the_bundled_k25_template(tok: KimiTokenizer) -> None:
    assert uses_k25_template(K25, tok)
    assert not uses_k25_template(get_profile("kimi-k2-thinking"), tok)
    assert tok.chat_template is not None
    changed = tok.chat_template.replace("## Return of", "## What the tool call returned, from")
    other = KimiTokenizer(tok.encoding, added_tokens=tok.added_tokens, chat_template=changed, source="a caller's template")
    assert not uses_k25_template(K25, other)
    messages = [{"role": "tool", "tool_call_id": "t", "content": "ok"}]
    # the counter renders with the other template, so it counts what that template renders
    assert count_of(other, messages, None, True) > count_of(tok, messages, None, True)
    assert make_prompt_counter(tokenizer=other)(Prompt("p", tuple(messages), None, 1)) == count_of(other, messages, None, True)
