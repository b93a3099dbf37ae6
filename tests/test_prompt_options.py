"""The prompt options are one frozen RecordOptions, built and checked once by parse_options and passed as it is
below the public functions (issue 24 item 2): render_prompt, encode_prompt and build_training_sample given the
options as keywords give the same prompt text, ids and samples as their internals given the RecordOptions, and
on the official golden conversations both equal the official prompt and ids. Their signatures stay as they were."""

from __future__ import annotations

import functools
import inspect
import json
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testdata import DATA, GOLDEN, OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, build_training_sample, load_tokenizer, render_prompt
from kimi_recon._records.prompt import _encode_prompt, _render_prompt
from kimi_recon.profiles import get_profile
from kimi_recon.record_options import RecordOptions, parse_options
from kimi_recon.responses import as_turn
from kimi_recon.training import _build, encode_prompt, sample_from_record

K25 = read_jsonl(OFFICIAL / "turns.jsonl")
K3 = read_jsonl(GOLDEN / "official-k3-dev" / "turns.jsonl")
# The official K2.5 set rendered the conversations whose turn has no tool call with the preserve_thinking template
# (tests/data/SOURCES.md §9, as tests/test_training.py reads it).
MILES = (DATA / "templates" / "kimi-k2.5.miles-fixed.chat_template.jinja").read_text(encoding="utf-8")
CASES = [("kimi-k2.5", c) for c in K25[::4]] + [("kimi-k3", c) for c in K3[::4]]


@functools.cache
def tokenizer(profile: str) -> KimiTokenizer:
    return load_tokenizer(profile=profile)


@st.composite
def calls(draw: st.DrawFn) -> dict[str, Any]:
    """A golden case and one way of spelling its options (``golden``: the spelling means the case's own options)."""
    profile, case = draw(st.sampled_from(CASES))
    golden = draw(st.booleans())
    thinking = case["thinking"] if golden else draw(st.booleans())
    tools = case["tools"] or None
    tools_arg = draw(st.sampled_from([tools, json.dumps(tools)] if tools else [None, [], "[]", "null"]))
    profile_arg = draw(st.sampled_from([profile, get_profile(profile)] + ([None] if profile == "kimi-k2.5" else [])))
    template: str | None = None
    template_kwargs: dict[str, Any] | str | None = None
    effort: str | None = None
    tool_choice: str | None = None
    if profile == "kimi-k2.5":
        if not case["turn"].get("tool_calls"):
            template, template_kwargs = MILES, {"preserve_thinking": True}
        if draw(st.booleans()):  # a variable the template does not read changes nothing
            template_kwargs = {**(template_kwargs if isinstance(template_kwargs, dict) else {}), "not_read_by_the_template": 1}
        if template_kwargs is not None and draw(st.booleans()):
            template_kwargs = json.dumps(template_kwargs)  # record_options reads its JSON text too
    else:
        effort = case["thinking_effort"] if case["thinking_effort"] is not None else draw(st.sampled_from([None, "max"]))
        tool_choice = case["tool_choice"] if case["tool_choice"] is not None else draw(st.sampled_from([None, "auto"]))
        if not golden:
            effort = draw(st.sampled_from(["low", "high", "max", None]))
            tool_choice = draw(st.sampled_from([None, "auto", "none", "required"]))
    return {
        "profile": profile,
        "case": case,
        "golden": golden and thinking == case["thinking"],
        "args": (tools_arg, profile_arg, thinking),
        "keywords": {"template": template, "template_kwargs": template_kwargs, "thinking_effort": effort, "tool_choice": tool_choice},
        "tokenizer_positional": draw(st.booleans()),
    }


def _options(call: dict[str, Any], **extra: Any) -> RecordOptions:
    tools, profile, thinking = call["args"]
    return parse_options(profile=profile, thinking=thinking, tools=tools, **call["keywords"], **extra)


@given(calls())
def test_render_and_encode_prompt_by_keywords_equal_the_record_options_form_and_the_official_prompt(call: dict[str, Any]) -> None:
    case, tok = call["case"], tokenizer(call["profile"])
    tools, profile, thinking = call["args"]
    keywords: dict[str, Any] = call["keywords"]
    if call["tokenizer_positional"]:
        text = render_prompt(case["messages"], tools, profile, thinking, tok, **keywords)
        ids = encode_prompt(case["messages"], tools, profile, thinking, tok, **keywords)
    else:
        text = render_prompt(case["messages"], tools, profile, thinking, tokenizer=tok, **keywords)
        ids = encode_prompt(case["messages"], tools, profile, thinking, tokenizer=tok, **keywords)
    options = _options(call)
    assert text == _render_prompt(case["messages"], options, tok)
    assert (ids, text) == _encode_prompt(case["messages"], options, tok)
    if call["golden"]:
        assert text == case["prompt"]
        assert ids == case["prompt_ids"]


@given(calls(), st.sampled_from([None, 0, 3]))
def test_build_training_sample_by_keywords_equals_the_record_options_form_and_the_official_ids(call: dict[str, Any], offset: int | None) -> None:
    case, tok = call["case"], tokenizer(call["profile"])
    turn = as_turn(case["turn"])
    tools, profile, thinking = call["args"]
    keywords: dict[str, Any] = call["keywords"]
    sample = build_training_sample(case["messages"], case["turn"], tools, profile, thinking, tok, **keywords, call_index_offset=offset)
    options = _options(call, model=turn.metadata.get("model"), call_index_offset=offset)
    assert sample == _build(case["messages"], turn, options, tok)
    if call["golden"]:
        assert sample.prompt_ids == case["prompt_ids"]
        if offset is None:  # the golden turns number their calls after those of the conversation
            assert sample.output_ids == case["output_ids"]


def test_the_template_is_a_call_option_of_the_record_options_that_no_record_sets() -> None:
    options = parse_options({"template": "{{ x }}"})
    assert options.template is None
    assert parse_options({"template": "{{ x }}"}, template=MILES).template == MILES
    with pytest.raises(FrozenInstanceError):
        options.template = MILES  # type: ignore[misc]


def test_sample_from_record_takes_the_template_through_the_record_options() -> None:
    case = next(c for c in K25 if not c["turn"].get("tool_calls"))
    record = {"id": "r1", "messages": case["messages"], "tools": case["tools"], "turn": case["turn"], "thinking": case["thinking"]}
    record["template_kwargs"] = {"preserve_thinking": True}
    sample = sample_from_record(record, tokenizer("kimi-k2.5"), template=MILES)
    assert sample.prompt_ids == case["prompt_ids"]


# -- the public signatures, written out (not read from the code): every keyword accepted before is accepted now.
# (SAMPLE_PARAMETERS repeats PROMPT_PARAMETERS' lines on purpose: each list is its own function's contract.)

_P, _K = inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY
_NONE = inspect.Parameter.empty
PROMPT_PARAMETERS = [
    ("messages", _P, _NONE),
    ("tools", _P, None),
    ("profile", _P, None),
    ("thinking", _P, True),
    ("tokenizer", _P, None),
    ("template", _K, None),
    ("template_kwargs", _K, None),
    ("thinking_effort", _K, None),
    ("tool_choice", _K, None),
    ("response_format", _K, None),  # K3's response-format system message (issue 33)
]
SAMPLE_PARAMETERS = [
    ("messages", _P, _NONE),
    ("turn", _P, _NONE),
    ("tools", _P, None),
    ("profile", _P, None),
    ("thinking", _P, None),  # None: on, and a turn without reasoning is flagged thinking_assumed (issue 33)
    ("tokenizer", _P, None),
    ("template", _K, None),
    ("template_kwargs", _K, None),
    ("call_index_offset", _K, None),
    ("thinking_effort", _K, None),
    ("tool_choice", _K, None),
    ("stop", _K, None),
    ("server", _K, None),
    ("response_format", _K, None),
]


@pytest.mark.parametrize(
    ("function", "expected"),
    [(render_prompt, PROMPT_PARAMETERS), (encode_prompt, PROMPT_PARAMETERS), (build_training_sample, SAMPLE_PARAMETERS)],
    ids=["render_prompt", "encode_prompt", "build_training_sample"],
)
def test_the_prompt_functions_keep_every_parameter_kind_and_default(function: Any, expected: list[tuple[str, Any, Any]]) -> None:
    found = [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]
    assert found == expected


def test_every_keyword_spelled_out_by_name_still_reaches_the_prompt() -> None:
    case = next(c for c in K3 if c["tools"] and c["thinking"] and c["thinking_effort"] == "low" and c["turn"].get("tool_calls"))
    tok = tokenizer("kimi-k3")
    options = {
        "tools": case["tools"], "profile": "kimi-k3", "thinking": True, "tokenizer": tok, "template": None,
        "template_kwargs": {}, "thinking_effort": "low", "tool_choice": case["tool_choice"],
    }  # fmt: skip
    assert render_prompt(messages=case["messages"], **options) == case["prompt"]
    assert encode_prompt(messages=case["messages"], **options) == case["prompt_ids"]
    sample = build_training_sample(
        messages=case["messages"], turn=case["turn"], **options, call_index_offset=None, stop=None, server=None
    )
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]
