"""The cases issue 22 found ending in a bare TypeError/ValueError/RecursionError, each now a KimiReconError naming
the field (a wrong Python type: InvalidInputTypeError, also a TypeError and a ValueError, so old handlers still
catch it), and the decisions on usage figures and sets of ids."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import kimi_recon
from kimi_recon import KimiTokenizer, compare_ids, reconstruct_output_ids
from kimi_recon.compare import check_ids
from kimi_recon.errors import InvalidInputError, InvalidInputTypeError, InvalidResponseError, KimiReconError
from kimi_recon.flags import FlagCode
from kimi_recon.openrouter import turn_from_stream
from kimi_recon.usage_check import check_with_profile


def test_a_wrong_type_error_is_also_a_type_error_and_a_value_error_for_old_handlers() -> None:
    err = InvalidInputTypeError("must be an integer", field="context")
    assert isinstance(err, KimiReconError) and isinstance(err, TypeError) and isinstance(err, ValueError)
    assert isinstance(err.with_sample("r1"), InvalidInputTypeError) and "sample 'r1'" in str(err.with_sample("r1"))


def test_a_float_context_in_compare_ids_is_a_named_type_error(tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputTypeError) as caught:
        compare_ids([1, 2], [1, 2], tok, context=1.5)  # type: ignore[arg-type]
    assert caught.value.field == "context"
    with pytest.raises(TypeError):  # code written for the bare TypeError of before keeps working
        compare_ids([1, 2], [1, 2], tok, context="4")  # type: ignore[arg-type]


def test_check_ids_refuses_a_set_because_it_has_no_order(tok: KimiTokenizer) -> None:
    for ids in ({1, 2, 3}, frozenset({5}), {1: 2}.keys()):
        with pytest.raises(InvalidInputTypeError, match="must be a list of token ids"):
            check_ids(ids, tok, "reference_ids")
    assert check_ids((i for i in [3, 1, 2]), tok, "reference_ids") == [3, 1, 2]  # ordered iterables stay accepted
    assert check_ids(np.array([3, 1]), tok, "reference_ids") == [3, 1]


def test_special_text_bogus_is_a_named_error_not_a_bare_value_error() -> None:
    with pytest.raises(InvalidInputError) as caught:
        reconstruct_output_ids({"content": "hi"}, special_text="bogus")  # type: ignore[arg-type]
    assert caught.value.field == "special_text"


def test_arguments_holding_objects_json_cannot_write_are_a_named_error() -> None:
    for value in (object(), {1, 2}, 1j):
        turn = {"content": "", "tool_calls": [{"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": {"a": value}}}]}
        with pytest.raises(InvalidInputTypeError) as caught:
            reconstruct_output_ids(turn)
        assert caught.value.field is not None and caught.value.field.endswith("arguments")


def test_a_stream_line_nested_990_deep_is_an_invalid_response_not_a_recursion_error() -> None:
    line = 'data: {"choices": [{"delta": ' + '{"a": ' * 990 + "1" + "}" * 990 + "}]}"
    with pytest.raises(InvalidResponseError, match="nested too deeply"):
        turn_from_stream([line, "data: [DONE]"])
    with pytest.raises(InvalidResponseError, match="not UTF-8"):
        turn_from_stream([b"data: \xff\n\n"])


def test_the_usage_check_reads_numpy_ids_and_figures_as_lists_and_ints(tok: KimiTokenizer) -> None:
    ids = reconstruct_output_ids({"content": "hello there"}, tok).ids
    usage = {"completion_tokens": len(ids), "prompt_tokens": 7}
    as_lists = check_with_profile(usage, ids, 7, "kimi-k2.5")
    as_numpy = check_with_profile({k: np.int64(v) for k, v in usage.items()}, np.array(ids), np.int64(7), "kimi-k2.5")  # type: ignore[arg-type]  # numpy values, as a datasets column gives them
    assert as_numpy == as_lists and as_lists.agrees


@pytest.mark.parametrize("figure", [12.0, 12.5, "12", -1, True])
def test_a_usage_figure_that_is_not_a_count_is_flagged_not_skipped_silently(tok: KimiTokenizer, figure: Any) -> None:
    ids = reconstruct_output_ids({"content": "hello there"}, tok).ids
    counts = check_with_profile({"completion_tokens": figure, "prompt_tokens": 1}, ids, 1, "kimi-k2.5")
    assert counts.completion is None  # not checked: a count is a whole non-negative number
    flags = counts.flags()
    assert [(f.code, f.field) for f in flags] == [(FlagCode.USAGE_FIGURE_UNREADABLE, "usage.completion_tokens")]
    assert counts.prompt is not None and counts.prompt.agrees


def test_a_record_with_an_unreadable_usage_figure_carries_the_flag(tok: KimiTokenizer) -> None:
    record = {"id": "r", "response": {"content": "hi"}, "reference_ids": reconstruct_output_ids({"content": "hi"}, tok).ids, "usage": {"completion_tokens": "3"}}
    result = kimi_recon.audit_record(record, tok)
    assert result.ok and FlagCode.USAGE_FIGURE_UNREADABLE in result.flag_codes


def test_a_tokenizer_argument_of_the_wrong_type_is_named() -> None:
    # (wrong types on purpose: the error must name them)
    for call in (lambda: reconstruct_output_ids({"content": "x"}, [1, 2]), lambda: kimi_recon.check_special_tokens({"vocab": 1})):  # type: ignore[arg-type]
        with pytest.raises(InvalidInputTypeError) as caught:
            call()
        assert caught.value.field == "tokenizer"


def test_audit_record_reports_a_wrong_tokenizer_as_a_named_error(tok: KimiTokenizer) -> None:
    result = kimi_recon.audit_record({"response": {"content": "x"}, "reference_ids": [1]}, 3.5)  # type: ignore[arg-type]
    assert result.error is not None and result.error.error_type == "InvalidInputTypeError" and result.error.field == "tokenizer"


def test_workers_and_chunk_size_of_the_wrong_type_are_named(tok: KimiTokenizer) -> None:
    records = [{"response": {"content": "x"}, "reference_ids": [1]}]
    with pytest.raises(InvalidInputTypeError):
        kimi_recon.audit_dataset(records, tok, workers="2", progress=False)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        list(kimi_recon.build_samples(records, tok, workers=2**40))
    with pytest.raises(InvalidInputTypeError):
        kimi_recon.audit_dataset(42, tok, progress=False)  # type: ignore[arg-type]


def test_the_pytest_plugin_refuses_a_threshold_that_is_not_a_number(pytester: pytest.Pytester) -> None:
    data = pytester.path / "records.jsonl"
    data.write_text(json.dumps({"response": {"content": "x"}, "reference_ids": [87]}) + "\n", encoding="utf-8")
    pytester.makepyfile(
        f"""
        import pytest
        from kimi_recon.errors import InvalidInputTypeError

        def test_threshold(kimi_roundtrip_audit):
            with pytest.raises(InvalidInputTypeError, match="min_exact"):
                kimi_roundtrip_audit({str(data)!r}, min_exact="0.9")
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
