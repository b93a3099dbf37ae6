"""One input, one verdict: a ``usage`` count that proves the ids wrong flags the turn at every door it comes in by.

Issue 35: ``reconstruct_output_ids``, ``reconstruct_many`` and ``build_training_sample`` ignored a
``usage.completion_tokens`` of 40 for 6 rebuilt ids (no flag), while ``reconstruct_records``, ``audit_record``,
``build_samples`` and ``sample_batch`` flagged ``completion_tokens_mismatch`` (``loss``) on the same input, and
``reconstruct_record`` did not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kimi_recon import KimiTokenizer, build_samples, build_training_sample, reconstruct_many, reconstruct_output_ids, sample_batch
from kimi_recon.dataset import audit_record, reconstruct_record, reconstruct_records
from kimi_recon.flags import max_severity

MESSAGES = [{"role": "user", "content": "q"}]
# "Hm." reasoning, "Hi." content, thinking on: K2.5's output "Hm.</think>Hi.<|im_end|>" is 6 ids (Hm . </think> Hi .
# <|im_end|>), read off the token table: 163358 13 163607 18699 13 163586.
REBUILT = [163358, 13, 163607, 18699, 13, 163586]


def _response(usage: dict[str, Any] | None, message: dict[str, Any] | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "model": "moonshotai/kimi-k2.5",
        "choices": [{"index": 0, "message": message or {"role": "assistant", "content": "Hi.", "reasoning_content": "Hm."}, "finish_reason": "stop"}],
    }
    if usage is not None:
        response["usage"] = usage
    return response


Verdict = tuple[frozenset[str], str]


def _verdicts(record: dict[str, Any], tok: KimiTokenizer) -> dict[str, Verdict]:
    """The flag codes and the max severity each door gives ``record`` (its turn, for the doors that take one)."""
    response, usage, thinking = record["response"], record.get("usage"), record.get("thinking")

    def codes(flags: Any) -> Verdict:
        return frozenset(f.code.value for f in flags), max_severity(flags)

    def row_codes(row: dict[str, Any]) -> Verdict:
        flags = row["flags"]
        assert isinstance(flags, str), row
        return frozenset(c for c in flags.split(",") if c), row["max_severity"]

    doors: dict[str, Callable[[], Verdict]] = {
        "reconstruct_output_ids": lambda: codes(reconstruct_output_ids(response, tok, thinking=thinking, usage=usage).flags),
        "reconstruct_record": lambda: codes(reconstruct_record(record, tok).flags),
        "reconstruct_records": lambda: codes(next(iter(reconstruct_records([record], tok))).flags),
        "audit_record": lambda: codes(audit_record({**record, "reference_ids": REBUILT}, tok).flags),
        "build_training_sample": lambda: codes(build_training_sample(MESSAGES, response, thinking=thinking, tokenizer=tok).flags),
        "build_samples": lambda: row_codes(next(iter(build_samples([record], tok))).row or {}),
        "sample_batch": lambda: row_codes({k: v[0] for k, v in sample_batch({k: [v] for k, v in record.items()}, tok).items()}),
    }
    if usage is None:  # reconstruct_many takes the response's usage only (no usage= of its own)
        doors["reconstruct_many"] = lambda: codes(reconstruct_many([response], tok, thinking=thinking)[0].flags)
    else:  # build_training_sample reads the response's usage: give it the record's there
        doors["build_training_sample"] = lambda: codes(build_training_sample(MESSAGES, {**response, "usage": usage}, thinking=thinking, tokenizer=tok).flags)
    return {name: door() for name, door in doors.items()}


CASES: dict[str, tuple[dict[str, Any], str]] = {
    # the issue's example: 40 counted, 6 rebuilt
    "count_proves_ids_wrong": ({"id": "a", "messages": MESSAGES, "response": _response({"completion_tokens": 40}), "thinking": True}, "loss"),
    # the record's own usage, not its response's
    "records_own_usage": ({"id": "a", "messages": MESSAGES, "response": _response(None), "usage": {"completion_tokens": 40}, "thinking": True}, "loss"),
    # a count that agrees (every id counted): no count flag anywhere; the unknown server's reasoning_end_stripped
    # (the reasoning ends in punctuation: whitespace after it no count shows) is server_rare_loss at every door alike
    "count_agrees": ({"id": "a", "messages": MESSAGES, "response": _response({"completion_tokens": 6}), "thinking": True}, "unlikely"),
    # the reasoning count wrong, the completion right
    "reasoning_count_wrong": (
        {"id": "a", "messages": MESSAGES, "response": _response({"completion_tokens": 6, "completion_tokens_details": {"reasoning_tokens": 30}}), "thinking": True},
        "loss",
    ),
    # thinking unstated, no reasoning: the ids start with a </think> the model may not have written; 3 fits neither reading
    "thinking_assumed": (
        {"id": "a", "messages": MESSAGES, "response": _response({"completion_tokens": 3}, {"role": "assistant", "content": "Hi."})},
        "loss",
    ),
    # a figure that is no count
    "figure_unreadable": ({"id": "a", "messages": MESSAGES, "response": _response({"completion_tokens": "6"}), "thinking": True}, "risk"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_door_gives_the_same_verdict_on_the_same_input(tok: KimiTokenizer, case: str) -> None:
    record, severity = CASES[case]
    verdicts = _verdicts(record, tok)
    assert set(verdicts.values()) == {verdicts["reconstruct_records"]}, verdicts
    assert verdicts["reconstruct_records"][1] == severity, verdicts
    assert ("completion_tokens_mismatch" in verdicts["reconstruct_records"][0]) == (case in ("count_proves_ids_wrong", "records_own_usage", "thinking_assumed"))


def test_the_issue_example_flags_completion_tokens_mismatch_at_each_turn_door(tok: KimiTokenizer) -> None:
    response = _response({"completion_tokens": 40})
    recon = reconstruct_output_ids(response, tok, thinking=True)
    assert recon.ids == REBUILT
    for flags in (recon.flags, reconstruct_many([response], tok, thinking=True)[0].flags, build_training_sample(MESSAGES, response, thinking=True, tokenizer=tok).flags):
        assert [(f.code.value, f.delta) for f in flags if f.code.value != "server_rare_loss"] == [("completion_tokens_mismatch", 34)]
    sample = build_training_sample(MESSAGES, response, thinking=True, tokenizer=tok)
    assert sample.token_counts is not None and sample.token_counts.completion is not None
    assert (sample.token_counts.completion.reported, sample.token_counts.completion.rebuilt) == (40, 6)


def test_a_usage_that_is_no_object_is_a_named_error(tok: KimiTokenizer) -> None:
    from kimi_recon.errors import InvalidInputTypeError

    with pytest.raises(InvalidInputTypeError) as err:
        reconstruct_output_ids(_response(None), tok, usage=[40])  # type: ignore[arg-type]
    assert err.value.field == "usage"
