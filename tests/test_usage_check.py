"""The usage check: a server's token counts against rebuilt ids, under each known counting convention.

The oracle here is written independently of :mod:`kimi_recon.usage_check`: the counts a server may report
for a finished turn of ``n`` ids are ``n`` (every id), ``n - 1`` (stop token not counted) and ``n + 1``
(``[EOS]`` counted after it); for a turn cut by the length limit only ``n``; for the reasoning span (the
ids through ``</think>``) ``m`` or ``m - 1``; for the prompt only its length.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st

from kimi_recon.profiles import get_profile
from kimi_recon.usage_check import (
    Convention,
    TokenCounts,
    check_token_counts,
    check_with_profile,
)
from kimi_recon.usage_stats import TokenCountTally

IM_END, EOS, THINK_END = 163586, 163585, 163607
ordinary_ids = st.lists(st.integers(0, 163_583), max_size=40)


@st.composite
def turns(draw: st.DrawFn) -> tuple[list[int], int | None, bool]:
    """(output ids, reasoning span length or None, cut in reasoning) of a K2.5 turn: reasoning ids and
    ``</think>`` (thinking on), content ids, ``<|im_end|>`` unless the turn was cut by the length limit."""
    thinking = draw(st.booleans())
    cut = draw(st.sampled_from([None, "reasoning", "content"] if thinking else [None, "content"]))
    reasoning, content = draw(ordinary_ids), draw(ordinary_ids)
    if cut == "reasoning":
        return reasoning, len(reasoning), True
    ids = (reasoning + [THINK_END] if thinking else []) + content
    if cut is None:
        ids.append(IM_END)
    return ids, (len(reasoning) + 1 if thinking else 0), False


def reported(draw: Callable[[st.SearchStrategy[Any]], Any], true_count: int) -> int:
    """A count as some server reports it: under a convention, or off by a random delta."""
    kind = draw(st.sampled_from(["exact", "without_stop", "with_eos", "random"]))
    shift = {"exact": 0, "without_stop": -1, "with_eos": 1}.get(kind)
    if shift is None:
        shift = draw(st.integers(-50, 50))
    return max(0, true_count + shift)


@given(st.data(), turns())
def test_completion_flag_appears_exactly_when_no_convention_explains_the_count(data: st.DataObject, turn: tuple[list[int], int | None, bool]) -> None:
    ids, _, cut_in_reasoning = turn
    count = reported(data.draw, len(ids))
    finished = bool(ids) and ids[-1] == IM_END
    allowed = {len(ids) - 1: "without_stop", len(ids): "exact", len(ids) + 1: "with_eos"} if finished else {len(ids): "exact"}

    counts = check_with_profile({"completion_tokens": count}, ids, None, "kimi-k2.5", truncated_in="reasoning" if cut_in_reasoning else None)

    check = counts.completion
    assert check is not None and counts.prompt is None and counts.reasoning is None
    assert (check.reported, check.rebuilt, check.delta) == (count, len(ids), count - len(ids))
    assert check.agrees == (count in allowed)
    assert (check.convention.value if check.convention else None) == allowed.get(count)
    assert [f.code for f in counts.flags()] == ([] if count in allowed else ["completion_tokens_mismatch"])


@given(st.data(), turns())
def test_reasoning_flag_appears_exactly_when_no_convention_explains_the_span(data: st.DataObject, turn: tuple[list[int], int | None, bool]) -> None:
    ids, span, cut_in_reasoning = turn
    assert span is not None
    count = reported(data.draw, span)
    closed = THINK_END in ids
    allowed = {span, span - 1} if closed else {span}
    usage = {"completion_tokens": len(ids), "completion_tokens_details": {"reasoning_tokens": count}}

    counts = check_with_profile(usage, ids, None, "kimi-k2.5", truncated_in="reasoning" if cut_in_reasoning else None)

    assert counts.completion is not None and counts.completion.convention is Convention.EXACT
    assert counts.reasoning is not None and counts.reasoning.rebuilt == span
    assert counts.reasoning.agrees == (count in allowed)
    assert counts.agrees == (count in allowed)
    assert [f.code for f in counts.flags()] == ([] if count in allowed else ["reasoning_tokens_mismatch"])
    if count == span - 1 and closed:
        assert counts.reasoning.convention is Convention.WITHOUT_STOP


@given(st.integers(0, 5000), st.integers(-20, 20))
def test_prompt_count_agrees_only_when_equal(prompt_len: int, shift: int) -> None:
    count = max(0, prompt_len + shift)
    counts = check_token_counts({"prompt_tokens": count}, None, prompt_len, stop_id=IM_END, eos_id=EOS)
    assert counts.prompt is not None and counts.completion is None
    assert counts.prompt.agrees == (count == prompt_len)
    assert [f.code for f in counts.flags()] == ([] if count == prompt_len else ["prompt_tokens_mismatch"])
    assert counts.prompt.delta == count - prompt_len


@given(st.lists(st.integers(0, 163_583), max_size=30), st.integers(0, 3000), st.integers(-6, 6), st.integers(-6, 6), st.sampled_from(["kimi-k3", "kimi-k2.5"]))
def test_k3s_answer_opener_may_be_counted_as_generated_or_in_neither_count_and_nothing_else(
    body: list[int], prompt_len: int, completion_shift: int, prompt_shift: int, profile: str
) -> None:
    """K3's prompt ends with the three tokens that open the answer (``<|open|>think<|sep|>``); vendors count them in
    ``completion_tokens`` or in neither count (TensorRT-LLM #17845). Only K3, only those three, only when unpinned."""
    prof = get_profile(profile)
    ids = [*body, prof.stop_token_id]
    assume(len(ids) + completion_shift >= 0)
    usage = {"completion_tokens": len(ids) + completion_shift, "prompt_tokens": max(0, prompt_len + prompt_shift)}
    counts = check_with_profile(usage, ids, prompt_len, profile)
    k3 = profile == "kimi-k3"
    completion_ok = {0, -1, 1} | ({3} if k3 else set())
    prompt_ok = {0} | ({-3} if k3 and prompt_len >= 3 else set())
    assert counts.completion is not None and counts.completion.agrees == (completion_shift in completion_ok)
    assert counts.prompt is not None and counts.prompt.agrees == (usage["prompt_tokens"] - prompt_len in prompt_ok)
    if k3 and completion_shift == 3:
        assert counts.completion.convention is Convention.WITH_OPENER
        # a server pinned to count every generated id (vLLM, SGLang) does not count the prompt's opener
        pinned = check_with_profile(usage, ids, prompt_len, profile, completion_conventions={"exact"})
        assert pinned.completion is not None and not pinned.completion.agrees


def test_stop_token_comes_from_the_profile() -> None:
    # A format that ends its turns with another token (as K3 may with [EOS] alone): the profile says which.
    eos_ended = replace(get_profile("kimi-k2.5"), name="eos-ended", stop_token="[EOS]", stop_alternatives=())
    ids = [1, 2, 3, EOS]
    assert check_with_profile({"completion_tokens": 3}, ids, None, eos_ended).completion.convention is Convention.WITHOUT_STOP  # type: ignore[union-attr]
    assert not check_with_profile({"completion_tokens": 5}, ids, None, eos_ended).agrees  # no [EOS] convention there
    assert not check_with_profile({"completion_tokens": 3}, ids, None, "kimi-k2.5").agrees  # K2.5 stops on <|im_end|>


def test_figures_that_are_missing_or_not_counts_are_not_checked() -> None:
    ids = [1, IM_END]
    assert check_token_counts(None, ids, 5, stop_id=IM_END).checks == ()
    usage = {"prompt_tokens": "10", "completion_tokens": True, "completion_tokens_details": {"reasoning_tokens": -1}}
    assert check_token_counts(usage, ids, 5, stop_id=IM_END).checks == ()
    assert check_token_counts({"completion_tokens": 2}, None, None, stop_id=IM_END).checks == ()
    assert not TokenCounts().agrees  # nothing checked is not agreement


def test_counts_survive_their_row_form() -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 9, "completion_tokens_details": {"reasoning_tokens": 4}}
    counts = check_token_counts(usage, [5, 6, THINK_END, 7, IM_END], 10, stop_id=IM_END, eos_id=EOS, think_end_id=THINK_END)
    row = counts.to_dict()
    assert row == {
        "completion_tokens": {"reported": 9, "rebuilt": 5, "delta": 4, "convention": None},
        "prompt_tokens": {"reported": 12, "rebuilt": 10, "delta": 2, "convention": None},
        "reasoning_tokens": {"reported": 4, "rebuilt": 3, "delta": 1, "convention": None},
    }
    assert TokenCounts.from_dict(row) == counts
    assert [(f.code, f.field) for f in counts.flags()] == [
        ("completion_tokens_mismatch", "usage.completion_tokens"),
        ("prompt_tokens_mismatch", "usage.prompt_tokens"),
        ("reasoning_tokens_mismatch", "usage.completion_tokens_details.reasoning_tokens"),
    ]
    assert TokenCounts.from_dict({"completion_tokens": {"reported": 1, "rebuilt": 1, "convention": "bogus"}}) is None


def test_tally_gives_agreement_share_conventions_and_common_deltas_per_provider() -> None:
    tally = TokenCountTally(top=2)
    ids = [1, 2, IM_END]

    def add(provider: str | None, completion: int, prompt: int | None = None) -> None:
        usage = {"completion_tokens": completion} | ({"prompt_tokens": prompt} if prompt is not None else {})
        tally.add(provider, check_token_counts(usage, ids, 7, stop_id=IM_END, eos_id=EOS))

    for _ in range(3):
        add("A", 3, 7)  # exact
    add("A", 2, 7)  # without_stop
    add("A", 6, 7)  # +3: mismatch
    add("B", 4)
    add("B", 4)
    add("B", 9)
    add(None, 3)
    tally.add("A", None)  # no usage: not a checked row
    report = tally.to_dict()
    assert report["rows_checked"] == 9 and report["rows_unchecked"] == 1
    a = report["providers"]["A"]
    assert (a["rows"], a["agree"], a["agree_rate"]) == (5, 4, 0.8)
    assert a["fields"]["completion_tokens"]["conventions"] == {"exact": 3, "without_stop": 1}
    assert a["fields"]["completion_tokens"]["top_deltas"] == [{"delta": 0, "rows": 3}, {"delta": -1, "rows": 1}]
    assert a["fields"]["prompt_tokens"] == {
        "checked": 5, "agree": 5, "mismatch": 0, "conventions": {"exact": 5}, "learned_convention": "exact", "off_convention": 0,
        "top_deltas": [{"delta": 0, "rows": 5}], "other_deltas": 0,
    }  # fmt: skip
    # the convention most of A's rows follow is learned; the one row that fits only another is counted and said
    assert (a["fields"]["completion_tokens"]["learned_convention"], a["fields"]["completion_tokens"]["off_convention"]) == ("exact", 1)
    b = report["providers"]["B"]
    assert (b["rows"], b["agree"]) == (3, 2) and b["fields"]["completion_tokens"]["conventions"] == {"with_eos": 2}
    assert report["providers"]["unknown"]["rows"] == 1
    assert list(report["providers"]) == ["A", "B", "unknown"]  # most rows first
    text = "\n".join(tally.lines())
    assert "A: 4/5 rows agree (80.0%)" in text and "without_stop 1" in text
    assert "completion_tokens: 1 rows agree only under another convention than the exact most rows follow" in text


def test_tally_memory_is_bounded_by_capped_counters() -> None:
    tally = TokenCountTally()
    for delta in range(2000):
        tally.add(f"p{delta % 100}", check_token_counts({"completion_tokens": 10 + delta}, [1] * 10, None, stop_id=IM_END))
    report = tally.to_dict()
    assert len(report["providers"]) <= 65  # 64 named, the rest pooled under "other"
    assert report["rows_checked"] == 2000
    assert sum(p["rows"] for p in report["providers"].values()) == 2000
    pooled = report["providers"]["other"]["fields"]["completion_tokens"]
    assert pooled["checked"] == 720 and pooled["other_deltas"] == 720 - 256  # 256 distinct deltas kept


TEXT = st.text(alphabet=st.sampled_from(list("abc xyz,.!?\n\t0123456789éü好世界🙂")), max_size=60)


@given(st.data(), TEXT, TEXT, st.sampled_from(["stop", "length"]))
def test_audited_turns_are_flagged_exactly_when_no_convention_explains_their_usage(
    data: st.DataObject, reasoning: str, content: str, finish: str
) -> None:
    from kimi_recon.dataset import audit_record
    from kimi_recon.tokenizer import load_tokenizer

    assume(finish == "stop" or reasoning or content)  # a turn cut before its first token has no ids
    tok = load_tokenizer()
    # The oracle: the turn's text as K2.5 writes it, encoded in one go by the tokenizer (not by the check).
    cut_in_reasoning = finish == "length" and not content
    if cut_in_reasoning:
        text = reasoning
    else:
        text = reasoning + "</think>" + content + ("<|im_end|>" if finish == "stop" else "")
    n = len(tok.encode(text))
    span = n if cut_in_reasoning else len(tok.encode(reasoning)) + 1
    completion_ok = {n - 1, n, n + 1} if finish == "stop" else {n}
    reasoning_ok = {span} if cut_in_reasoning else {span - 1, span}
    completion, reasoning_count = reported(data.draw, n), reported(data.draw, span)
    record = {
        "response": {"choices": [{"message": {"role": "assistant", "reasoning_content": reasoning, "content": content}, "finish_reason": finish}],
                     "usage": {"completion_tokens": completion, "completion_tokens_details": {"reasoning_tokens": reasoning_count}}},
        "reference_ids": tok.encode(text),
        "thinking": True,  # said: with no reasoning and no mode said, a count one short is not agreement (tests/test_thinking_mode.py)
    }
    result = audit_record(record, tok)
    assert result.error is None and result.comparison is not None and result.comparison.exact
    expected = [code for code, ok in (("completion_tokens_mismatch", completion in completion_ok),
                                      ("reasoning_tokens_mismatch", reasoning_count in reasoning_ok)) if not ok]
    assert [f for f in result.flag_codes if f.endswith("_mismatch")] == expected
    assert result.token_counts is not None and result.token_counts.completion is not None
    assert result.token_counts.completion.delta == completion - n
