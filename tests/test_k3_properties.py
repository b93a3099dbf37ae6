"""Property tests: K3 ids equal an independent segment-by-segment encode, and decode back to the text.

The reference here is written from the format facts (tests/data/SHARED_README.md, "Kimi-K3"), not from
the library: a tag is ``<|open|>`` + name + (`` key`` ``="`` value ``"``)* + ``<|sep|>``, every text piece is
encoded on its own as ordinary text with raw tiktoken, and the four control markers are their ids.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import tiktoken
from hypothesis import given
from hypothesis import strategies as st
from testdata import DATA

from kimi_recon import AssistantTurn, KimiTokenizer, ToolCall, build_training_sample, load_tokenizer, reconstruct_output_ids
from kimi_recon.profiles import get_profile
from kimi_recon.render import render_turn_with_flags
from kimi_recon.segments import encode_segments
from kimi_recon.special_tokens import SPECIAL_TOKENS

K3_IDS = {t["content"]: t["id"] for t in json.loads((DATA / "k3_special_tokens.json").read_text(encoding="utf-8"))["tokens"]}
K3_TOK = load_tokenizer(profile="kimi-k3")
RAW: tiktoken.Encoding = K3_TOK.encoding

# Hostile text: the characters that make BPE merges cross a boundary, attribute syntax, and every
# special-token text of K3 and K2.5 (ordinary text inside K3 fields).
SPECIAL_TEXTS = sorted(set(K3_IDS) | {t.text for t in SPECIAL_TOKENS.named()})
HOSTILE_CHARS = st.sampled_from(list('"&=_ .,:;!?-<>|/\\\n\t{}[]()\'#@$%*+`~') + ["é", "中", "🙂", "\u200d", "\u3000", "x", "A", "1"])
HOSTILE = st.lists(
    st.one_of(HOSTILE_CHARS, st.sampled_from(SPECIAL_TEXTS), st.text(max_size=6), st.sampled_from(["&amp;", "&quot;", '="', "index", "call"])),
    max_size=8,
).map("".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**12), 10**12) | st.floats(allow_nan=False, allow_infinity=False) | HOSTILE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(HOSTILE, inner, max_size=3),
    max_leaves=6,
)
ARGUMENTS = st.dictionaries(HOSTILE, JSON_VALUES, max_size=4)
NAMES = HOSTILE.filter(bool)


# --- the independent reference ------------------------------------------------------------------

Seg = tuple[str, bool]  # (text, is a control marker)


def ref_open(tag: str, attrs: list[tuple[str, Any]] = []) -> list[Seg]:  # noqa: B006 (never mutated)
    segs: list[Seg] = [("<|open|>", True), (tag, False)]
    for key, value in attrs:
        escaped = str(value).replace("&", "&amp;").replace('"', "&quot;")
        segs += [(" " + key, False), ('="', False), (escaped, False), ('"', False)]
    return segs + [("<|sep|>", True)]


def ref_close(tag: str) -> list[Seg]:
    return [("<|close|>", True), (tag, False), ("<|sep|>", True)]


def ref_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def ref_calls(calls: list[tuple[str, dict[str, Any]]]) -> list[Seg]:
    segs = ref_open("tools")
    for n, (name, args) in enumerate(calls, start=1):
        segs += ref_open("call", [("tool", name), ("index", n)])
        for key, value in args.items():
            written = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            segs += ref_open("argument", [("key", key), ("type", ref_type(value))]) + [(written, False)] + ref_close("argument")
        segs += ref_close("call")
    return segs + ref_close("tools")


def ref_body(reasoning: str | None, content: str | None, calls: list[tuple[str, dict[str, Any]]], thinking: bool) -> list[Seg]:
    """The assistant message body after the ``think``/``response`` open (what the model writes)."""
    segs: list[Seg] = []
    if thinking:
        if reasoning and reasoning.strip():
            segs.append((reasoning, False))
        segs += ref_close("think") + ref_open("response")
    segs.append((content or "", False))
    segs += ref_close("response")
    if calls:
        segs += ref_calls(calls)
    return segs + ref_close("message") + [("<|end_of_msg|>", True)]


def ref_ids(segs: list[Seg]) -> list[int]:
    ids: list[int] = []
    for text, control in segs:
        ids += [K3_IDS[text]] if control else RAW.encode_ordinary(text)
    return ids


# --- properties ---------------------------------------------------------------------------------


@st.composite
def turns(draw: st.DrawFn) -> tuple[AssistantTurn, list[tuple[str, dict[str, Any]]]]:
    calls = draw(st.lists(st.tuples(NAMES, ARGUMENTS, st.booleans()), max_size=3))
    tool_calls = tuple(
        ToolCall(draw(st.one_of(st.none(), HOSTILE.filter(bool))), name, json.dumps(args) if as_text else args) for name, args, as_text in calls
    )
    turn = AssistantTurn(reasoning=draw(st.none() | HOSTILE), content=draw(st.none() | HOSTILE), tool_calls=tool_calls)
    return turn, [(name, args) for name, args, _ in calls]


@given(turns(), st.booleans())
def test_k3_output_ids_equal_an_independent_segment_encode(drawn: tuple[AssistantTurn, list[Any]], thinking: bool) -> None:
    turn, calls = drawn
    segs = ref_body(turn.reasoning, turn.content, calls, thinking)
    result = reconstruct_output_ids(turn, profile="kimi-k3", thinking=thinking)
    assert result.text == "".join(text for text, _ in segs)
    assert result.ids == ref_ids(segs)
    assert K3_TOK.decode(result.ids) == result.text


@given(turns())
def test_k3_special_text_in_any_field_is_flagged_as_ordinary(drawn: tuple[AssistantTurn, list[Any]]) -> None:
    turn, _ = drawn
    flagged = {f.field for f in render_turn_with_flags(turn, "kimi-k3").flags if f.code == "special_text_in_field"}
    holds = {"reasoning": turn.reasoning if (turn.reasoning or "").strip() else "", "content": turn.content}
    for field, value in holds.items():
        assert (field in flagged) == any(t in (value or "") for t in SPECIAL_TEXTS)


@st.composite
def conversations(draw: st.DrawFn) -> dict[str, Any]:
    """A conversation whose tool results follow their calls in call order, with its reference segments."""
    thinking = draw(st.booleans())
    effort = draw(st.sampled_from([None, "low", "high", "max"]))
    tools = draw(st.none() | st.lists(st.dictionaries(HOSTILE, JSON_VALUES, max_size=3), min_size=1, max_size=2))
    messages: list[dict[str, Any]] = []
    segs: list[Seg] = []
    if tools:
        body = "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n"
        body += json.dumps(_sorted(tools), ensure_ascii=False, separators=(",", ":")) + "\n```"
        segs += ref_open("message", [("role", "system"), ("type", "tool-declare")]) + [(body, False)] + ref_close("message") + [("<|end_of_msg|>", True)]
    if thinking:
        body = (
            "`thinking_effort` guides on how much to think in your thinking channel (not including the response channel), "
            f"supported values include `low`, `medium`, `high`, and `max`.\nNow the system is invoked with `thinking_effort={effort or 'max'}`."
        )
        segs += ref_open("message", [("role", "system"), ("type", "thinking-effort")]) + [(body, False)] + ref_close("message") + [("<|end_of_msg|>", True)]
    for turn_no in range(draw(st.integers(0, 3))):
        role = draw(st.sampled_from(["user", "system"]))
        content, name = draw(HOSTILE), draw(st.none() | HOSTILE)
        messages.append({"role": role, "content": content, **({"name": name} if name is not None else {})})
        segs += ref_open("message", [("role", role)] + ([("name", name)] if name else [])) + [(content, False)] + ref_close("message")
        segs.append(("<|end_of_msg|>", True))
        reasoning, answer = draw(st.none() | HOSTILE), draw(HOSTILE)
        calls = draw(st.lists(st.tuples(NAMES, ARGUMENTS), max_size=2))
        message: dict[str, Any] = {"role": "assistant", "content": answer, "reasoning_content": reasoning}
        if calls:
            message["tool_calls"] = [
                {"id": f"c{turn_no}-{j}", "type": "function", "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False)}}
                for j, (n, a) in enumerate(calls)
            ]
        messages.append(message)
        segs += ref_open("message", [("role", "assistant")]) + ref_open("think" if thinking else "response")
        segs += ref_body(reasoning, answer, calls, thinking)
        order = draw(st.permutations(range(len(calls))))
        for j in order:
            messages.append({"role": "tool", "tool_call_id": f"c{turn_no}-{j}", "content": f"r{j}"})
        for j, (n, _) in enumerate(calls):
            segs += ref_open("message", [("role", "tool"), ("tool", n), ("index", j + 1)]) + [(f"r{j}", False)] + ref_close("message")
            segs.append(("<|end_of_msg|>", True))
    messages.append({"role": "user", "content": draw(HOSTILE)})
    segs += ref_open("message", [("role", "user")]) + [(messages[-1]["content"], False)] + ref_close("message") + [("<|end_of_msg|>", True)]
    segs += ref_open("message", [("role", "assistant")]) + ref_open("think" if thinking else "response")
    return {"messages": messages, "tools": tools, "thinking": thinking, "effort": effort, "segments": segs}


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


@given(conversations(), turns())
def test_k3_training_sample_equals_an_independent_segment_encode(conv: dict[str, Any], drawn: tuple[AssistantTurn, list[Any]]) -> None:
    turn, calls = drawn
    sample = build_training_sample(conv["messages"], turn, conv["tools"], "kimi-k3", conv["thinking"], thinking_effort=conv["effort"])
    assert sample.prompt_ids == ref_ids(conv["segments"])
    assert sample.output_ids == ref_ids(ref_body(turn.reasoning, turn.content, calls, conv["thinking"]))
    assert K3_TOK.decode(sample.prompt_ids) == "".join(text for text, _ in conv["segments"])


# --- K2.x: the per-profile encoder is one encode ---------------------------------------------

K25_HOSTILE = st.lists(st.one_of(HOSTILE_CHARS, st.sampled_from(SPECIAL_TEXTS), st.text(max_size=8)), max_size=12).map("".join)


@given(
    st.none() | K25_HOSTILE,
    st.none() | K25_HOSTILE,
    st.lists(st.tuples(st.none() | K25_HOSTILE.filter(bool), K25_HOSTILE.filter(bool), K25_HOSTILE), max_size=3),
    st.booleans(),
    st.sampled_from(["kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct"]),
)
def test_k2_per_profile_encoder_equals_one_encode(
    reasoning: str | None, content: str | None, calls: list[tuple[str | None, str, str]], thinking: bool, profile: str
) -> None:
    tok: KimiTokenizer = load_tokenizer()
    turn = AssistantTurn(reasoning=reasoning, content=content, tool_calls=tuple(ToolCall(i, n, a) for i, n, a in calls))
    rendered = render_turn_with_flags(turn, profile, thinking)
    assert encode_segments(rendered.segments, tok, get_profile(profile)) == tok.encode(rendered.text)


def test_k2_per_profile_encoder_on_long_text_equals_one_encode() -> None:
    # Long enough for the official chunking (runs over 25,000 characters, cut where one encode cuts them).
    tok = load_tokenizer()
    for content in ("a" * 30_000 + "<|im_end|>" + "b" * 30_000, " " * 26_000 + "x", "y" * 24_990 + "</think>" + "z" * 20):
        rendered = render_turn_with_flags(AssistantTurn(reasoning="r" * 100, content=content), "kimi-k2.5")
        assert encode_segments(rendered.segments, tok, get_profile("kimi-k2.5")) == tok.encode(rendered.text)
