"""Property: the real chat template, rendered with and without the final turn, differs exactly by
``render_assistant_turn(final)``, for every profile; and one encode of the whole conversation equals the
prompt's ids followed by ``reconstruct_output_ids(final).ids``.

The oracle is transformers' own chat-template renderer; kimi-recon's jinja2 renderer must agree with it.
"""

from __future__ import annotations

from typing import Any

from extras import require
from hypothesis import given, settings
from hypothesis import strategies as st
from testdata import DATA

from kimi_recon import AssistantTurn, KimiTokenizer, ToolCall
from kimi_recon.chat_template import render_chat_template
from kimi_recon.reconstruct import reconstruct_output_ids
from kimi_recon.render import model_tool_call_id, render_turn_with_flags
from kimi_recon.tokenizer import load_tokenizer

TEMPLATES = DATA / "templates"
K25_STOCK = (TEMPLATES / "hf" / "Kimi-K2.5.chat_template.jinja").read_text(encoding="utf-8")
K25_PRESERVE = (TEMPLATES / "kimi-k2.5.miles-fixed.chat_template.jinja").read_text(encoding="utf-8")
K2_THINKING = (TEMPLATES / "hf" / "Kimi-K2-Thinking@612681931a8c.chat_template.jinja").read_text(encoding="utf-8")
K2_INSTRUCT = (TEMPLATES / "hf" / "Kimi-K2-Instruct@0102674b179d.chat_template.jinja").read_text(encoding="utf-8")


def with_preserve_thinking(template: str) -> str:
    """The miles ``preserve_thinking`` patch: skip the search for the last plain assistant message."""
    start = "{%- set ns = namespace(last_non_tool_call_assistant_msg=-1) -%}"
    end = "{%- endfor -%}\n\n{# split all messages"
    assert start in template and end in template
    template = template.replace(start, start + "\n{%- if not preserve_thinking -%}", 1)
    return template.replace(end, "{%- endfor -%}\n{%- endif -%}\n\n{# split all messages", 1)


K2_THINKING_PRESERVE = with_preserve_thinking(K2_THINKING)


def hf_render(template: str, messages: list[dict[str, Any]], tools: Any, add_generation_prompt: bool, **kwargs: Any) -> str:
    render_jinja_template = require("transformers.utils.chat_template_utils").render_jinja_template

    rendered, _ = render_jinja_template(
        [messages], tools=tools, chat_template=template, add_generation_prompt=add_generation_prompt, **kwargs
    )
    ours = render_chat_template(template, messages, tools=tools, add_generation_prompt=add_generation_prompt, **kwargs)
    assert ours == rendered[0]  # kimi-recon's renderer has transformers' semantics
    return str(rendered[0])


text = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=25) | st.sampled_from(
    ["", " ", "\n\n", "```python\nprint(1)\n```", "你好，世界", "🙂👩‍💻", "a  b\t", "{\"k\": 1}"]
)
json_value = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 10**6) | text, lambda inner: st.lists(inner, max_size=3), max_leaves=5
)
arguments = st.one_of(text, st.dictionaries(st.sampled_from(["q", "n", "city", "深度"]), json_value, max_size=3))
names = st.sampled_from(["get_weather", "search_web", "run-python"])


@st.composite
def conversations(draw: st.DrawFn, profile: str) -> tuple[list[dict[str, Any]], AssistantTurn, bool]:
    messages: list[dict[str, Any]] = []
    if draw(st.booleans()):
        messages.append({"role": "system", "content": draw(text)})
    calls_so_far = 0
    for _ in range(draw(st.integers(0, 2))):
        messages.append({"role": "user", "content": draw(text)})
        history: dict[str, Any] = {"role": "assistant", "content": draw(text)}
        if draw(st.booleans()):
            history["reasoning_content"] = draw(text)
        calls = []
        for _ in range(draw(st.integers(0, 2))):
            name = draw(names)
            calls.append({"id": model_tool_call_id(name, calls_so_far), "type": "function", "function": {"name": name, "arguments": draw(arguments)}})
            calls_so_far += 1
        if calls:
            history["tool_calls"] = calls
        messages.append(history)
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": draw(text)})
    if not messages or messages[-1]["role"] != "tool" or draw(st.booleans()):
        messages.append({"role": "user", "content": draw(text)})
    tool_calls = tuple(
        ToolCall(draw(st.sampled_from([None, "given"])), draw(names), draw(arguments)) for _ in range(draw(st.integers(0, 3)))
    )
    # A given id is the model's own, numbered across the conversation.
    tool_calls = tuple(
        ToolCall(model_tool_call_id(c.name, calls_so_far + i) if c.id else None, c.name, c.arguments) for i, c in enumerate(tool_calls)
    )
    reasoning = draw(st.none() | text) if profile != "kimi-k2-instruct" else None
    final = AssistantTurn(reasoning=reasoning, content=draw(st.none() | text), tool_calls=tool_calls, finish_reason="tool_calls" if tool_calls else "stop")
    thinking = draw(st.booleans()) if profile == "kimi-k2.5" else True
    return messages, final, thinking


def final_message(turn: AssistantTurn, call_offset: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.content}
    if turn.reasoning is not None:
        message["reasoning_content"] = turn.reasoning
    if turn.tool_calls:
        message["tool_calls"] = [
            {"id": c.id or model_tool_call_id(c.name, call_offset + i), "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in enumerate(turn.tool_calls)
        ]
    return message


def call_offset(messages: list[dict[str, Any]]) -> int:
    return sum(len(m.get("tool_calls", [])) for m in messages if m["role"] == "assistant")


def check(profile: str, template: str, messages: list[dict[str, Any]], final: AssistantTurn, with_thinking: bool, **kwargs: Any) -> None:
    thinking = with_thinking
    tok: KimiTokenizer = load_tokenizer()
    offset = call_offset(messages)
    full = hf_render(template, messages + [final_message(final, offset)], None, False, **kwargs)
    prompt = hf_render(template, messages, None, True, **kwargs)
    output = render_turn_with_flags(final, profile, thinking, call_index_offset=offset).text
    assert full == prompt + output
    assert tok.encode(full) == tok.encode(prompt) + reconstruct_output_ids(final, tok, profile, thinking, call_index_offset=offset).ids


@settings(max_examples=150)
@given(conversations("kimi-k2.5"))
def test_k25_template_difference_is_the_rendered_turn(case: tuple[list[dict[str, Any]], AssistantTurn, bool]) -> None:
    messages, final, thinking = case
    # The stock template drops the reasoning of the last assistant message without tool calls, so such
    # final turns are checked with the preserve_thinking variant (as the official golden set was made).
    if final.tool_calls:
        check("kimi-k2.5", K25_STOCK, messages, final, thinking, thinking=thinking)
    else:
        check("kimi-k2.5", K25_PRESERVE, messages, final, thinking, thinking=thinking, preserve_thinking=True)


@settings(max_examples=100)
@given(conversations("kimi-k2-thinking"))
def test_k2_thinking_template_difference_is_the_rendered_turn(case: tuple[list[dict[str, Any]], AssistantTurn, bool]) -> None:
    messages, final, _ = case
    if final.tool_calls:
        check("kimi-k2-thinking", K2_THINKING, messages, final, True)
    else:
        check("kimi-k2-thinking", K2_THINKING_PRESERVE, messages, final, True, preserve_thinking=True)


@settings(max_examples=100)
@given(conversations("kimi-k2-instruct"))
def test_k2_instruct_template_difference_is_the_rendered_turn(case: tuple[list[dict[str, Any]], AssistantTurn, bool]) -> None:
    messages, final, _ = case
    check("kimi-k2-instruct", K2_INSTRUCT, messages, final, True)


def test_preserve_thinking_patch_reproduces_the_miles_template() -> None:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "reasoning_content": "r"}, {"role": "user", "content": "q2"}]
    for kwargs in ({"preserve_thinking": True}, {}):
        assert hf_render(with_preserve_thinking(K25_STOCK), messages, None, True, **kwargs) == hf_render(K25_PRESERVE, messages, None, True, **kwargs)


def test_bundled_templates_are_the_reference_templates() -> None:
    from kimi_recon.profiles import get_profile

    assert get_profile("kimi-k2-thinking").template_source() == K2_THINKING
    assert get_profile("kimi-k2-instruct").template_source() == K2_INSTRUCT
    assert load_tokenizer().chat_template == K25_STOCK
