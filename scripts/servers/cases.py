"""The raw outputs pushed through the servers: what the model wrote, with the ids it generated.

Three sources: ``upstream`` (outputs shaped like the servers' own parser tests: newlines or spaces
between markers, several calls, text after the section; the strings are ours), ``official`` (the hidden
official dev turns in tests/data/golden: output text and the official ids) and ``variant`` (one raw
output per loss the servers are known for, for every profile, thinking on and off where it applies).

True ids: official ids where golden. Else, K2.x: one encode of the raw text with special tokens allowed,
the official tokenizer's rule (kimi-recon's tokenizer, checked against Moonshot's encode vectors in
tests/data/golden/kimi_encode_vectors.json), plus ``<|im_end|>`` when the turn finished. K3: the raw output
is built as segments and every segment is encoded on its own, control markers as special ids and text as
ordinary text, the official per-segment rule (tests/data/SHARED_README.md); the builder is checked against
the official K3 dev ids by tests/test_servers_conformance.py. kimi-recon's renderer is never the truth here.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kimi_recon.profiles import get_profile
from kimi_recon.tokenizer import KimiTokenizer, load_tokenizer

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "data" / "golden"
STOP_ID = 163586
STOP_TEXT = {"kimi-k2.5": "<|im_end|>", "kimi-k3": "<|end_of_msg|>"}

SB, SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CB, CA, CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"
OPEN, CLOSE, SEP = "<|open|>", "<|close|>", "<|sep|>"

#: profiles and the thinking settings each is served with (K2-Thinking always thinks; K2-Instruct never)
PROFILE_THINKING: dict[str, tuple[bool, ...]] = {
    "kimi-k2.5": (True, False),
    "kimi-k2-thinking": (True,),
    "kimi-k2-instruct": (False,),
    "kimi-k3": (True, False),
}
#: kimi-k2.6 is an alias of kimi-k2.5 in kimi_recon.profiles (same format, same ids): its rows would repeat these.


@dataclass(frozen=True)
class Call:
    """One tool call as the model wrote it: K2's header (the id text) and arguments text, or K3's fields."""

    name: str
    args: str = '{"city": "Tokyo"}'
    header: str | None = None  # K2: the text between <|tool_call_begin|> and <|tool_call_argument_begin|>
    # K3: (key, type, raw value) per argument, or json_block for a <|open|>json...<|close|>json block
    k3_args: tuple[tuple[str, str, str], ...] | None = None
    json_block: str | None = None
    index: str | None = None  # K3 index attribute as written (default: position from 1)


@dataclass(frozen=True)
class Raw:
    """One raw output before the stop token: the parts a profile writes them in."""

    shape: str  # the turn shape (see turn_shape)
    loss: str  # what the output exercises ("plain" = nothing a server is known to lose)
    reasoning: str | None = None
    content: str = ""
    calls: tuple[Call, ...] = ()
    # K2 layout knobs (text the model wrote between markers)
    pre_section: str = ""  # between content and <|tool_calls_section_begin|>
    in_section: str = ""  # after section begin / between calls / before section end
    after_section: str = ""
    think_close: bool = True  # K2.5/K2-Thinking: whether </think> is written before the tool section
    singular_markers: bool = False
    finished: bool = True
    cut_chars: int | None = None  # truncation: keep this many characters of the raw text (then no stop)
    empty: bool = False  # the generation is only the stop token
    k3_between_tags: str = ""  # K3: whitespace written between tags (tools block, calls)
    k3_after_tools: str = ""
    before_think: str = ""  # K2-Thinking: text the model wrote before its <think>
    cut_after_marker: int | None = None  # truncation right after the N-th marker (mod their number), then no stop


# --- K2.x ----------------------------------------------------------------------------------------


def _k2_call(call: Call, i: int, ws: str) -> str:
    header = call.header if call.header is not None else f"functions.{call.name}:{i}"
    return f"{CB}{header}{CA}{call.args}{CE}"


def k2_text(raw: Raw, profile: str, thinking: bool) -> str:
    style = get_profile(profile).thinking_style
    out = ""
    if raw.empty:
        return ""
    if style == "model_opens" or (style == "prompt_opens" and thinking):
        if style == "model_opens":
            out += raw.before_think + "<think>"
        out += raw.reasoning or ""
        if raw.think_close or not raw.calls:
            out += "</think>"
    out += raw.content
    if raw.calls:
        sb, se = (SB, SE) if not raw.singular_markers else ("<|tool_call_section_begin|>", "<|tool_call_section_end|>")
        out += raw.pre_section + sb + raw.in_section
        out += raw.in_section.join(_k2_call(c, i, raw.in_section) for i, c in enumerate(raw.calls))
        out += raw.in_section + se
    out += raw.after_section
    return out


# --- K3 ------------------------------------------------------------------------------------------


def _esc(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;")


def _tag(name: str, attrs: Sequence[tuple[str, str]] = ()) -> list[tuple[bool, str]]:
    segs: list[tuple[bool, str]] = [(True, OPEN), (False, name)]
    for key, value in attrs:
        segs += [(False, f" {key}"), (False, '="'), (False, _esc(value)), (False, '"')]
    return segs + [(True, SEP)]


def _close(name: str) -> list[tuple[bool, str]]:
    return [(True, CLOSE), (False, name), (True, SEP)]


def k3_segments(raw: Raw, thinking: bool) -> list[tuple[bool, str]]:
    """``(is_marker, text)`` segments of what K3 writes after its generation prompt."""
    if raw.empty:
        return []
    segs: list[tuple[bool, str]] = []
    if thinking:
        if raw.reasoning:
            segs.append((False, raw.reasoning))
        segs += _close("think") + _tag("response")
    if raw.content:
        segs.append((False, raw.content))
    segs += _close("response")
    if raw.calls:
        ws = raw.k3_between_tags
        segs += _tag("tools")
        for i, call in enumerate(raw.calls, start=1):
            if ws:
                segs.append((False, ws))
            segs += _tag("call", [("tool", call.name), ("index", call.index or str(i))])
            if call.json_block is not None:
                segs += _tag("json", [("type", "object")]) + [(False, call.json_block)] + _close("json")
            else:
                for key, typ, value in call.k3_args or (("city", "string", "Tokyo"),):
                    if ws:
                        segs.append((False, ws))
                    segs += _tag("argument", [("key", key), ("type", typ)])
                    if value:
                        segs.append((False, value))
                    segs += _close("argument")
            if ws:
                segs.append((False, ws))
            segs += _close("call")
        if ws:
            segs.append((False, ws))
        segs += _close("tools")
        if raw.k3_after_tools:
            segs.append((False, raw.k3_after_tools))
    segs += _close("message")
    return segs


def k3_ids(tok: KimiTokenizer, segs: Sequence[tuple[bool, str]]) -> list[int]:
    ids: list[int] = []
    for is_marker, text in segs:
        ids += tok.encode(text) if is_marker else tok.encode(text, allowed_special=set())
    return ids


# --- cases ---------------------------------------------------------------------------------------


def request_body(case: dict[str, Any]) -> dict[str, Any]:
    """The chat-completion request a case was answered for, as both servers' request models take it."""
    body: dict[str, Any] = {
        "model": "moonshotai/kimi",
        "messages": case.get("messages") or [{"role": "user", "content": "hi"}],
        "chat_template_kwargs": {"thinking": case["thinking"]},
    }
    if case.get("tools"):
        body["tools"] = case["tools"]
        body["tool_choice"] = "auto"
    return body


def turn_shape(reasoning: bool, content: bool, calls: bool, finished: bool, empty: bool) -> str:
    if empty:
        return "empty"
    parts = [p for p, on in (("reasoning", reasoning), ("content", content), ("tool_calls", calls)) if on]
    shape = "+".join(parts) or "blank"
    return shape if finished else f"{shape} (cut)"


def _tools(names: Sequence[str]) -> list[dict[str, Any]] | None:
    if not names:
        return None
    seen = list(dict.fromkeys(names))
    return [
        {"type": "function", "function": {"name": n, "description": f"{n} tool",
         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
        for n in seen
    ]  # fmt: skip


_K2_MARKER = re.compile(r"<\|[a-z_]+\|>|</?think>")


def _history(profile: str) -> list[dict[str, Any]]:
    """A conversation with one earlier tool call and its result (what makes a call index or id count history)."""
    call_id = "functions.get_weather:0"
    return [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": call_id, "content": "sunny"},
        {"role": "user", "content": "And Tokyo?"},
    ]  # fmt: skip


class CaseBuilder:
    def __init__(self) -> None:
        self.k2 = load_tokenizer(profile="kimi-k2.5")
        self.k3 = load_tokenizer(profile="kimi-k3")

    def prompt_ids(self, profile: str, thinking: bool) -> list[int]:
        tok = self.k3 if profile == "kimi-k3" else self.k2
        prof = get_profile(profile)
        return tok.encode("<|im_user|>user<|im_middle|>hi<|im_end|>" if profile != "kimi-k3" else "") + tok.encode(prof.generation_prompt(thinking))

    def history_prompt_ids(self, profile: str, thinking: bool) -> list[int]:
        """The prompt of :func:`_history` (its length is all a server reads of it; kimi-recon renders it)."""
        from kimi_recon.training import render_prompt

        tok = self.k3 if profile == "kimi-k3" else self.k2
        return tok.encode(render_prompt(_history(profile), _tools(["get_weather"]), profile=profile, thinking=thinking))

    def case(self, source: str, n: int, raw: Raw, profile: str, thinking: bool, *, history: bool = False, tools_declared: bool = False) -> dict[str, Any]:
        if profile == "kimi-k3":
            segs = k3_segments(raw, thinking)
            text = "".join(t for _, t in segs)
            ids = k3_ids(self.k3, segs)
            if raw.cut_chars is not None:
                ids = ids[: max(1, len(ids) * raw.cut_chars // max(1, len(text)))]
            if raw.cut_after_marker is not None:
                ends = [len(k3_ids(self.k3, segs[: i + 1])) for i, (marker, _) in enumerate(segs) if marker]
                ids = ids[: ends[raw.cut_after_marker % len(ends)]] if ends else ids
        else:
            text = k2_text(raw, profile, thinking)
            if raw.cut_chars is not None:
                text = text[: raw.cut_chars]
            if raw.cut_after_marker is not None:
                ends = [m.end() for m in _K2_MARKER.finditer(text)]
                text = text[: ends[raw.cut_after_marker % len(ends)]] if ends else text
            ids = self.k2.encode(text)
        finished = raw.finished and raw.cut_chars is None and raw.cut_after_marker is None
        raw_text = (self.k3 if profile == "kimi-k3" else self.k2).decode(ids)
        if finished:
            ids = ids + [STOP_ID]
        has_reasoning = raw.reasoning is not None and (thinking or get_profile(profile).thinking_style == "model_opens")
        return {
            "case_id": f"{source}/{raw.loss}/{profile}/{'think' if thinking else 'nothink'}/{n}",
            "source": source,
            "loss": raw.loss,
            "shape": turn_shape(has_reasoning and bool(raw.reasoning), bool(raw.content.strip()), bool(raw.calls), finished, raw.empty),
            "profile": profile,
            "thinking": thinking,
            "tools": _tools([c.name for c in raw.calls]) or (_tools(["get_weather"]) if raw.loss.startswith("tools_") or tools_declared or history else None),
            "messages": _history(profile) if history else None,
            "prompt_ids": self.history_prompt_ids(profile, thinking) if history else self.prompt_ids(profile, thinking),
            "output_ids": ids,
            "raw_text": raw_text,
            "finished": finished,
        }


W = Call("get_weather")
W2 = Call("get_weather", '{"city": "Paris", "unit": "celsius"}')
S = Call("search", '{"query": "kimi k2 release", "top_k": 3}')
R = "The user asks for the weather in Tokyo. I should call get_weather with city Tokyo."
C = "Let me check the weather for you."


def variants() -> Iterator[Raw]:
    """One raw output per known loss (and the plain shapes around them)."""
    yield Raw("content", "plain", R, "It is sunny in Tokyo today, 24°C.")
    yield Raw("content", "plain_multiline", R, "Here is the code:\n\n```python\nprint('hi')\n```\n\nRun it with `python x.py`.")
    yield Raw("tool_calls", "plain", R, C, (W,))
    yield Raw("tool_calls", "plain_no_content", R, "", (W,))
    yield Raw("tool_calls", "plain_two_calls", R, C, (W, S))
    yield Raw("tool_calls", "plain_three_calls", R, "", (W, W2, S))
    # whitespace the model wrote around ids, arguments and markers
    yield Raw("tool_calls", "ws_around_id", R, C, (Call("get_weather", header=" functions.get_weather:0 "),))
    yield Raw("tool_calls", "ws_newline_id", R, C, (Call("get_weather", header="functions.get_weather:0\n"),))
    yield Raw("tool_calls", "ws_around_args", R, C, (Call("get_weather", ' {"city": "Tokyo"} '),))
    yield Raw("tool_calls", "ws_newline_args", R, C, (Call("get_weather", '\n{"city": "Tokyo"}\n'),))
    yield Raw("tool_calls", "ws_between_markers", R, C, (W, S), in_section="\n")
    yield Raw("tool_calls", "ws_spaces_between_markers", R, C, (W,), in_section=" ", pre_section=" ")
    yield Raw("tool_calls", "ws_before_section", R, C, (W,), pre_section="\n\n")
    yield Raw("tool_calls", "blank_args", R, C, (Call("get_weather", ""),))
    yield Raw("tool_calls", "blank_args_space", R, C, (Call("get_weather", " "),))
    yield Raw("tool_calls", "empty_object_args", R, C, (Call("get_weather", "{}"),))
    yield Raw("tool_calls", "text_after_section", R, C, (W,), after_section="I have called the tool.")
    yield Raw("tool_calls", "newline_after_section", R, C, (W,), after_section="\n")
    yield Raw("tool_calls", "text_between_calls", R, C, (W, S), in_section=" and then ")
    yield Raw("tool_calls", "ws_only_content", R, "\n\n", (W,))
    yield Raw("tool_calls", "space_only_content", R, " ", (W,))
    yield Raw("content", "ws_only_content_no_calls", R, "\n")
    yield Raw("tool_calls", "reasoning_into_section", R, "", (W,), think_close=False)
    yield Raw("tool_calls", "reasoning_into_section_two", R, "", (W, S), think_close=False)
    yield Raw("tool_calls", "id_not_name_n", R, C, (Call("get_weather", header="get_weather"),))
    yield Raw("tool_calls", "id_without_prefix", R, C, (Call("get_weather", header="get_weather:0"),))
    yield Raw("tool_calls", "id_call_style", R, C, (Call("get_weather", header="call_0"),))
    yield Raw("tool_calls", "id_dotted_name", R, C, (Call("weather.get", header="functions.weather.get:0"),))
    yield Raw("tool_calls", "renumbered_ids", R, C, (Call("get_weather", header="functions.get_weather:3"), Call("search", S.args, header="functions.search:7")))
    yield Raw("tool_calls", "repeated_index", R, C, (Call("get_weather", header="functions.get_weather:0"), Call("search", S.args, header="functions.search:0")))
    yield Raw("tool_calls", "args_array", R, C, (Call("get_weather", '["Tokyo"]'),))
    yield Raw("tool_calls", "args_string", R, C, (Call("get_weather", '"Tokyo"'),))
    yield Raw("tool_calls", "args_not_json", R, C, (Call("get_weather", "city=Tokyo"),))
    yield Raw("tool_calls", "args_number_spelling", R, C, (Call("get_weather", '{"city": "Tokyo", "days": 1.50, "limit": 1e2}'),))
    yield Raw("tool_calls", "args_compact", R, C, (Call("get_weather", '{"city":"Tokyo"}'),))
    yield Raw("tool_calls", "args_duplicate_keys", R, C, (Call("get_weather", '{"city": "Tokyo", "city": "Osaka"}'),))
    yield Raw("tool_calls", "args_unicode", R, C, (Call("get_weather", '{"city": "東京", "note": "\\u6771\\u4eac"}'),))
    yield Raw("tool_calls", "singular_markers", R, C, (W,), singular_markers=True)
    yield Raw("content", "empty_generation", empty=True)
    yield Raw("content", "blank_content", R, "")
    yield Raw("content", "truncated_content", R, "It is sunny in Tokyo today and the forecast says", finished=False)
    yield Raw("tool_calls", "truncated_in_args", R, C, (W2,), cut_chars=len(R) + len(C) + 70)
    yield Raw("reasoning", "truncated_in_reasoning", R + " Let me think more about the units", "", finished=False, think_close=False)
    yield Raw("content", "tools_declared_no_call", R, "Tokyo is sunny today.")
    # K3-only shapes (on K2 profiles they are plain calls)
    yield Raw("tool_calls", "k3_json_block", R, C, (Call("get_weather", json_block='{"city": "Tokyo"}'),))
    yield Raw("tool_calls", "k3_number_1.50", R, C, (Call("get_weather", k3_args=(("days", "number", "1.50"),)),))
    yield Raw("tool_calls", "k3_number_1e2", R, C, (Call("get_weather", k3_args=(("limit", "number", "1e2"),)),))
    yield Raw("tool_calls", "k3_integer_type", R, C, (Call("get_weather", k3_args=(("limit", "integer", "3"),)),))
    yield Raw("tool_calls", "k3_object_spacing", R, C, (Call("get_weather", k3_args=(("opts", "object", '{"a":1}'),)),))
    yield Raw("tool_calls", "k3_duplicate_keys", R, C, (Call("get_weather", k3_args=(("city", "string", "Tokyo"), ("city", "string", "Osaka"))),))
    yield Raw("tool_calls", "k3_renumbered", R, C, (Call("get_weather", index="2"), Call("search", index="5")))
    yield Raw("tool_calls", "k3_ws_between_tags", R, C, (W, S), k3_between_tags="\n")
    yield Raw("tool_calls", "k3_text_after_tools", R, C, (W,), k3_after_tools="done")
    yield Raw("tool_calls", "k3_empty_string_arg", R, C, (Call("get_weather", k3_args=(("city", "string", ""),)),))
    yield Raw("tool_calls", "k3_bool_null", R, C, (Call("get_weather", k3_args=(("exact", "boolean", "true"), ("unit", "null", "null"))),))
    # shrunk from the seeded random search (random/37/8, random/37/177): one call whose index the model restarted at 0
    # or wrote as 60 comes back as index 1 (vLLM 0.29-0.33, SGLang 0.5.17-0.5.23), silent before k3_calls_renumbered
    # applied to a single call
    yield Raw("tool_calls", "k3_index_restart_one_call", R, C, (Call("get_weather", index="0"),))
    yield Raw("tool_calls", "k3_index_big_one_call", R, "", (Call("get_weather", index="60"),))


def upstream_shapes() -> Iterator[Raw]:
    """Outputs shaped like the servers' own Kimi parser tests (our strings)."""
    yield Raw(
        "tool_calls", "upstream_newlines", None, "Let me help you with that.\n", (Call("get_weather", '{"location": "Tokyo", "units": "celsius"}'),),
        in_section="\n", after_section="\nThe weather in Tokyo is...",
    )  # fmt: skip
    yield Raw("tool_calls", "upstream_spaced", None, "I'll check the weather. ", (Call("get_weather", '{"city": "Beijing"}', header=" functions.get_weather:0 "),), in_section=" ")
    yield Raw("tool_calls", "upstream_parallel", None, "", (Call("get_weather", '{"city": "Beijing"}'), Call("get_weather", '{"city": "Shanghai"}', header="functions.get_weather:1")), in_section="\n")
    yield Raw("tool_calls", "upstream_no_prefix", None, "", (Call("get_time", '{"tz": "UTC"}', header="get_time:0"),))
    yield Raw("tool_calls", "upstream_nested_args", None, "Running the query.", (Call("run_sql", '{"query": "SELECT * FROM t WHERE x = \'<a>\'", "options": {"limit": 10, "tags": ["a", "b"]}}'),))
    yield Raw("content", "upstream_no_tools", None, "Hello! How can I help you today?")
    yield Raw("tool_calls", "upstream_reasoning_then_call", "I need the weather, so I will call the tool.", "", (Call("get_weather", '{"city": "Tokyo"}'),), think_close=False)


#: whitespace the model may write at a field's or a marker's edge
_WS = ("", " ", "\n", "\n\n", "  ", "\t", " \n", "\n ")
_TEXTS = ("Sure.", "The answer is 42.", "Let me check the weather.", "x", "東京は晴れです。", "a\n\nb", "Done")
_ARGS = ('{"city": "Tokyo"}', "{}", "", " ", ' {"city": "Tokyo"} ', '{"days": 1.50}', '["Tokyo"]', '{"a": {"b": [1, 2]}}', '{"city":"Tokyo"}')
_NAMES = ("get_weather", "search", "run_sql")
#: special tokens a profile's tokenizer flags special (a detokenizer skipping them drops their text) and markers
_SPECIAL_IN_FIELD = {
    "k2": ("[EOS]", "[BOS]", "[EOT]", "<|im_end|>", "<|im_middle|>", "<|im_user|>", "<think>", "</think>", "<|tool_call_begin|>"),
    "k3": ("[EOS]", "[BOS]", "[EOT]", "<|end_of_msg|>", "<|media_begin|>"),
}
#: how many seeded random outputs all_cases adds (each a profile, thinking, shape and knobs drawn at random)
RANDOM_CASES = 240
RANDOM_SEED = 37


def _field(rng: random.Random, fmt: str, knobs: list[str], name: str) -> str:
    text = rng.choice(_TEXTS)
    if rng.random() < 0.2:
        special = rng.choice(_SPECIAL_IN_FIELD[fmt])
        cut = rng.randint(0, len(text))
        text = text[:cut] + special + text[cut:]
        knobs.append(f"{name}_special")
    lead, trail = (rng.choice(_WS), rng.choice(_WS)) if rng.random() < 0.6 else ("", "")
    if lead or trail:
        knobs.append(f"{name}_ws")
    return lead + text + trail


def random_raw(rng: random.Random) -> tuple[Raw, str, bool, bool, bool]:
    """One raw output drawn at random: ``(raw, profile, thinking, history, tools declared)``. Every turn shape and
    profile, whitespace at every boundary, special tokens in every field, call ids and indexes of every style,
    truncation after every marker; ``raw.loss`` names the knobs drawn (``random:calls_restart,content_ws``)."""
    profile = rng.choice(sorted(PROFILE_THINKING))
    thinking = rng.choice(PROFILE_THINKING[profile])
    fmt = "k3" if profile == "kimi-k3" else "k2"
    knobs: list[str] = []
    reasons = thinking or get_profile(profile).thinking_style == "model_opens"
    reasoning = None
    if reasons and rng.random() < 0.85:
        reasoning = _field(rng, fmt, knobs, "reasoning") if rng.random() < 0.9 else rng.choice(_WS[1:])
    content = _field(rng, fmt, knobs, "content") if rng.random() < 0.6 else rng.choice(("", "", " ", "\n"))
    history = rng.random() < 0.25
    offset = 1 if history else 0
    calls: list[Call] = []
    n_calls = rng.choice((0, 0, 1, 1, 2, 3))
    id_style = rng.choice(("std", "std", "restart", "noprefix", "call", "ws", "big", "repeat"))
    for i in range(n_calls):
        name = rng.choice(_NAMES)
        args = rng.choice(_ARGS)
        header = {
            "std": f"functions.{name}:{i + offset}", "restart": f"functions.{name}:{i}", "noprefix": f"{name}:{i + offset}",
            "call": f"call_{i}", "ws": rng.choice(_WS[1:]) + f"functions.{name}:{i + offset}" + rng.choice(_WS),
            "big": f"functions.{name}:{rng.randint(5, 99)}", "repeat": f"functions.{name}:{offset}",
        }[id_style]  # fmt: skip
        k3_index = {"restart": str(i), "big": str(rng.randint(5, 99)), "repeat": "1"}.get(id_style)
        if args and args.strip().startswith("{") and rng.random() < 0.8:
            try:
                parsed = json.loads(args)
            except ValueError:
                parsed = None
            k3_args = tuple((k, *_k3_kind(v)) for k, v in parsed.items()) if isinstance(parsed, dict) and parsed else None
        else:
            k3_args = None
        calls.append(Call(name, args, header, k3_args=k3_args, json_block=None if k3_args or args.strip().startswith("{") else args, index=k3_index))
    if calls:
        knobs.append(f"calls_{id_style}" + ("_history" if history else ""))
    layout = {k: rng.choice(_WS) if rng.random() < 0.4 else "" for k in ("pre_section", "in_section", "after_section", "k3_between_tags", "k3_after_tools")}
    if fmt == "k3":
        layout.update(pre_section="", in_section="", after_section="")
    else:
        layout.update(k3_between_tags="", k3_after_tools="")
    knobs += [k for k, v in layout.items() if v]
    think_close = rng.random() > 0.15
    if not think_close:
        knobs.append("no_think_close")
    before_think = rng.choice(("\n", " ", "\n\n")) if profile == "kimi-k2-thinking" and rng.random() < 0.25 else ""
    if before_think:
        knobs.append("before_think")
    cut = rng.randint(0, 12) if rng.random() < 0.2 else None
    if cut is not None:
        knobs.append("cut_after_marker")
    empty = rng.random() < 0.02
    raw = Raw(
        "x", "random:" + (",".join(knobs) or "plain"), reasoning, content, tuple(calls), layout["pre_section"], layout["in_section"],
        layout["after_section"], think_close, finished=True, empty=empty, k3_between_tags=layout["k3_between_tags"],
        k3_after_tools=layout["k3_after_tools"], before_think=before_think, cut_after_marker=cut,
    )  # fmt: skip
    return raw, profile, thinking, history and bool(calls), not calls and rng.random() < 0.5


def _k3_kind(value: Any) -> tuple[str, str]:
    if isinstance(value, str):
        return "string", value
    kind = "boolean" if isinstance(value, bool) else "null" if value is None else "object" if isinstance(value, dict) else "array" if isinstance(value, list) else "number"
    return kind, json.dumps(value, ensure_ascii=False)


def random_cases(builder: CaseBuilder, seed: int = RANDOM_SEED, n: int = RANDOM_CASES) -> Iterator[dict[str, Any]]:
    """``n`` seeded random raw outputs (:func:`random_raw`), the same on every run for one seed."""
    rng = random.Random(seed)
    for i in range(n):
        raw, profile, thinking, history, tools_declared = random_raw(rng)
        case = builder.case("random", i, raw, profile, thinking, history=history, tools_declared=tools_declared)
        case["case_id"] = f"random/{seed}/{i}/{profile}/{'think' if thinking else 'nothink'}"
        yield case


def generated_cases(builder: CaseBuilder) -> Iterator[dict[str, Any]]:
    n = 0
    for source, raws in (("variant", list(variants())), ("upstream", list(upstream_shapes()))):
        for raw in raws:
            for profile, thinkings in PROFILE_THINKING.items():
                if raw.loss.startswith("k3_") and profile != "kimi-k3":
                    continue
                if profile == "kimi-k3" and raw.loss in K2_ONLY:
                    continue
                for thinking in thinkings:
                    yield builder.case(source, n, raw, profile, thinking)
                    n += 1


#: K2 wire-format losses with no K3 counterpart (K3 has no id text, no section markers)
K2_ONLY = frozenset({
    "ws_around_id", "ws_newline_id", "ws_around_args", "ws_newline_args", "ws_between_markers",
    "ws_spaces_between_markers", "ws_before_section", "blank_args", "blank_args_space", "text_between_calls",
    "reasoning_into_section", "reasoning_into_section_two", "id_not_name_n", "id_without_prefix", "id_call_style",
    "id_dotted_name", "renumbered_ids", "repeated_index", "args_array", "args_string", "args_not_json",
    "args_number_spelling", "args_compact", "args_duplicate_keys", "args_unicode", "singular_markers",
    "upstream_spaced", "upstream_no_prefix", "upstream_reasoning_then_call", "newline_after_section",
    "text_after_section", "upstream_newlines",
})  # fmt: skip


def _openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history as an OpenAI client sends it: tool-call arguments as JSON text (the chat templates
    also take an object; the servers' request models take only a string)."""
    out = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            sent = dict(message)
            sent["tool_calls"] = [
                {**c, "function": {**c["function"], "arguments": a if isinstance(a := c["function"].get("arguments"), str) else json.dumps(a, ensure_ascii=False)}}
                for c in calls
            ]
            out.append(sent)
        else:
            out.append(message)
    return out


def official_cases() -> Iterator[dict[str, Any]]:
    """The official dev turns: the official output ids, as the model generated them."""
    files = {
        "kimi-k2.5": ["official-k2.5-dev/turns.jsonl", "official-k2.5-dev/turns_adversarial.jsonl"],
        "kimi-k3": ["official-k3-dev/turns.jsonl", "official-k3-dev/turns_adversarial.jsonl"],
    }
    for profile, names in files.items():
        for name in names:
            for i, line in enumerate((GOLDEN / name).read_text(encoding="utf-8").splitlines()):
                row = json.loads(line)
                ids = list(row["output_ids"])
                turn = row["turn"]
                finished = bool(ids) and ids[-1] == STOP_ID
                yield {
                    "case_id": f"official/{name}/{i}",
                    "source": "official",
                    "loss": "official_adversarial" if "adversarial" in name else "official",
                    "shape": turn_shape(bool(turn.get("reasoning_content")), bool((turn.get("content") or "").strip()), bool(turn.get("tool_calls")), finished, False),
                    "profile": profile,
                    "thinking": bool(row["thinking"]),
                    "tools": row.get("tools"),
                    "messages": _openai_messages(row["messages"]),
                    "prompt_ids": list(row["prompt_ids"]),
                    "output_ids": ids,
                    "raw_text": row["output"].removesuffix(STOP_TEXT[profile]) if finished else row["output"],
                    "finished": finished,
                }


def all_cases() -> list[dict[str, Any]]:
    builder = CaseBuilder()
    return list(official_cases()) + list(generated_cases(builder)) + list(random_cases(builder))
