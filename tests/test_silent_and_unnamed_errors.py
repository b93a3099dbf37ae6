"""Regression tests for issue 9's silent wrong answers and unnamed exceptions, each with the issue's own example:
surrogates are flagged, integer/boolean logprob bytes refused, and bad input raises a named KimiReconError."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import kimi_recon
from kimi_recon import KimiReconError, build_training_sample, load_tokenizer, reconstruct_output_ids, turn_from_response
from kimi_recon.errors import InvalidInputError
from kimi_recon.logprobs import LogprobsError, ids_from_logprobs

TOK = load_tokenizer()
IM_END, THINK_END = 163586, 163607


# -- lone UTF-16 surrogates ------------------------------------------------------------------------


def test_a_lone_surrogate_in_a_response_is_flagged_naming_the_field() -> None:
    rebuilt = reconstruct_output_ids({"content": "a\ud83d b"})
    flag = next(f for f in rebuilt.flags if f.code == "lone_surrogate")
    assert flag.field == "content" and "'\\ud83d' at character 1" in flag.message
    # the ids are U+FFFD's, so they decode to other text than the rendered one: the flag says why
    assert TOK.decode(rebuilt.ids) != rebuilt.text


@pytest.mark.parametrize("field", ["reasoning", "content"])
def test_a_surrogate_from_a_json_escape_in_a_chat_completion_is_flagged(field: str) -> None:
    # (json.dumps writes the lone surrogate as the escape \ud83d, as a server's JSON does)
    raw = json.dumps({"choices": [{"message": {"role": "assistant", field: "x\ud83d"}, "finish_reason": "stop"}]})
    rebuilt = reconstruct_output_ids(turn_from_response(raw))
    assert [f.field for f in rebuilt.flags if f.code == "lone_surrogate"] == [field]


def test_a_text_without_surrogates_has_no_surrogate_flag_and_decodes_to_the_rendered_text() -> None:
    rebuilt = reconstruct_output_ids({"content": "a \U0001f600 b", "reasoning": "r"})
    assert not rebuilt.has_flag("lone_surrogate") and TOK.decode(rebuilt.ids) == rebuilt.text


def test_a_surrogate_with_logprobs_falls_back_with_the_flag_instead_of_crashing() -> None:
    rebuilt = reconstruct_output_ids({"content": "a\ud83d", "logprobs": {"content": [{"token": "a", "bytes": [97]}]}}, thinking=False)
    assert rebuilt.flag_codes == ("lone_surrogate", "logprobs_fallback") and rebuilt.source == "rendered"


def test_a_surrogate_in_the_prompt_of_a_training_sample_is_flagged() -> None:
    sample = build_training_sample([{"role": "user", "content": "x\ud800"}], {"content": "ok"}, thinking=False)
    assert [(f.code, f.field) for f in sample.flags] == [("lone_surrogate", "messages")]


# -- logprobs bytes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [1, True, False, 5, 2**64, "ab", {"0": 97}, [True], [97.0], [256], [-1], [2**64]])
def test_logprob_bytes_that_are_not_a_list_of_byte_values_are_refused(raw: Any) -> None:
    with pytest.raises(LogprobsError) as err:
        ids_from_logprobs([{"token": "\x00", "bytes": raw}], TOK)
    assert err.value.field == "logprobs.content[0].bytes"


@pytest.mark.parametrize("raw", [1, True])
def test_integer_or_boolean_logprob_bytes_are_not_trusted_as_logprobs_used(raw: Any) -> None:
    # bytes(1) and bytes(True) are b"\x00", a real token: this used to be "logprobs_used"
    rebuilt = reconstruct_output_ids({"content": "\x00", "logprobs": {"content": [{"token": "x", "logprob": -1, "bytes": raw}]}})
    assert rebuilt.source == "rendered" and rebuilt.has_flag("logprobs_fallback") and not rebuilt.has_flag("logprobs_used")


def test_logprob_bytes_as_a_list_or_a_bytes_object_name_the_same_token() -> None:
    assert ids_from_logprobs([{"bytes": [104, 105]}, {"bytes": b"hi"}], TOK) == [TOK.id_of_bytes(b"hi")] * 2


# -- named errors ------------------------------------------------------------------------------------


def test_ids_from_logprobs_with_a_2_to_the_64_byte_is_a_named_error() -> None:
    with pytest.raises(KimiReconError):
        ids_from_logprobs([{"token": "x", "bytes": [2**64]}], TOK)


def test_finish_reason_list_is_a_named_error_not_unhashable() -> None:
    with pytest.raises(InvalidInputError) as err:
        reconstruct_output_ids({"content": "hi", "finish_reason": []})
    assert err.value.field == "finish_reason"


@pytest.mark.parametrize("text", ['{"content": "hi", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"choices": ' + "[" * 100_000 + "]" * 100_000 + "}"])
def test_deep_json_text_is_a_named_error_not_recursion_error(text: str) -> None:
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        turn_from_response(text)
    with pytest.raises(InvalidInputError, match="nested too deeply"):
        reconstruct_output_ids(text)


def test_deep_json_arguments_are_flagged_unreadable_not_recursion_error() -> None:
    args = "[" * 100_000 + "]" * 100_000
    rebuilt = reconstruct_output_ids({"tool_calls": [{"id": "functions.f:0", "function": {"name": "f", "arguments": args}}], "finish_reason": "tool_calls"})
    assert rebuilt.has_flag("arguments_not_json") and args in rebuilt.text


@pytest.mark.parametrize("ids", [[1.5], [True], [1, "2"], [None]])
def test_tokenizer_decode_of_non_integer_ids_is_a_named_error(ids: list[Any]) -> None:
    for method in (TOK.decode, TOK.decode_bytes):
        with pytest.raises(InvalidInputError) as err:
            method(ids)
        assert err.value.field == "ids"
    with pytest.raises(InvalidInputError):
        TOK.token_bytes(next(v for v in ids if type(v) is not int))


def test_build_training_sample_with_numeric_content_is_a_named_error() -> None:
    with pytest.raises(InvalidInputError) as err:
        build_training_sample([{"role": "user", "content": 5}], {"content": "ok"})
    assert err.value.field == "messages[0].content"


def test_build_training_sample_with_tools_5_is_a_named_error() -> None:
    with pytest.raises(InvalidInputError) as err:
        build_training_sample([{"role": "user", "content": "hi"}], {"content": "ok"}, tools=5)  # type: ignore[arg-type]
    assert err.value.field == "tools"


def test_build_training_sample_with_mixed_int_and_str_keys_is_a_named_error() -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {1: {"type": "string"}, "a": {"type": "string"}}}}}]
    with pytest.raises(InvalidInputError) as err:
        build_training_sample([{"role": "user", "content": "hi"}], {"content": "ok"}, tools=tools)
    assert err.value.field == "tools"


def test_a_content_part_that_is_not_an_object_is_a_named_error_not_an_empty_rendering() -> None:
    with pytest.raises(InvalidInputError) as err:
        kimi_recon.render_prompt([{"role": "user", "content": [5]}])  # the template's part['type'] would be undefined
    assert err.value.field == "messages[0].content[0]"


# -- audit --min-exact ---------------------------------------------------------------------------------


def _audit(tmp_path: Path, lines: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "kimi_recon.cli", "audit", str(path), *args], check=False, capture_output=True, text=True, timeout=120)


GOOD = json.dumps({"id": "a", "response": {"content": "hi"}, "reference_ids": TOK.encode("</think>hi<|im_end|>")})


def test_audit_min_exact_fails_a_file_where_9_of_10_lines_are_unreadable(tmp_path: Path) -> None:
    done = _audit(tmp_path, ["not json {"] * 9 + [GOOD], "--min-exact", "0.9")
    assert done.returncode == 1
    assert "1 of 10 records, 9 unreadable" in done.stderr
    assert "exact of all records (errors count as not exact): 1/10 = 10.00%" in done.stdout


def test_audit_min_exact_passes_a_file_of_exact_records(tmp_path: Path) -> None:
    done = _audit(tmp_path, [GOOD] * 3, "--min-exact", "1")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("value", ["90", "-0.1", "nan", "x"])
def test_audit_min_exact_outside_0_to_1_is_a_usage_error(tmp_path: Path, value: str) -> None:
    done = _audit(tmp_path, [GOOD], "--min-exact", value)
    assert done.returncode == 2 and "must be a number from 0 to 1" in done.stderr


# -- found by tests/test_fuzz_named_errors.py ----------------------------------------------------------


def _deep(depth: int = 3000) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize(
    "call",
    [
        lambda: turn_from_response({"role": _deep(), "content": "hi"}),  # the message named the role with repr()
        lambda: turn_from_response({"content": "hi"}, choice=None),  # type: ignore[arg-type]
        lambda: reconstruct_output_ids({"content": "hi"}, call_index_offset=_deep()),
        lambda: ids_from_logprobs([{"token": "x", "bytes": _deep()}], TOK),
        lambda: TOK.decode([_deep()]),
        lambda: kimi_recon.compare_ids([_deep()], [1], TOK),
        lambda: kimi_recon.render_prompt([{"role": "user", "content": "hi"}], [{"type": "function", "function": {"name": "f", "parameters": _deep()}}]),
        lambda: kimi_recon.render_prompt([{"role": "user", "content": "hi"}], template="{{ 1 / 0 }}"),
        lambda: kimi_recon.check_token_ids(None),  # type: ignore[arg-type]
        lambda: kimi_recon.AssistantTurn(content="x", finish_reason=[]),  # type: ignore[arg-type]
    ],
    ids=["deep-role", "choice-none", "deep-offset", "deep-logprob-bytes", "deep-id", "deep-compare-id", "deep-tools", "template-raises", "audit-ids-none", "turn-finish-list"],
)
def test_input_that_used_to_escape_as_a_python_error_is_a_named_error(call: Any) -> None:
    with pytest.raises(KimiReconError):
        call()


def test_a_surrogate_in_a_reconstruct_row_is_written_escaped_instead_of_stopping_the_run(tmp_path: Path) -> None:
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    # (thinking said: a message without reasoning whose mode nothing says is a loss, and a file of only those fails)
    src.write_text('{"id": "a\\ud83d", "thinking": false, "response": {"content": "x\\ud83d"}}\n{"id": "b", "thinking": false, "response": {"content": "y"}}\n', encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kimi_recon.cli", "reconstruct", str(src), "-o", str(out)], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["a\ud83d", "b"] and "lone_surrogate" in [f["code"] for f in rows[0]["flags"]]
