"""Methods of public classes raise only named errors (``KimiReconError`` subclasses) on bad input, as their
functions do (issue 35: each call below ended in a bare TypeError, KeyError, ValueError, OverflowError or
MemoryError). ``InvalidInputTypeError`` is a ``TypeError`` too, so ``except TypeError`` keeps working."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import kimi_recon
import kimi_recon.compare
import kimi_recon.render
from kimi_recon import SPECIAL_TOKENS, KimiTokenizer, load_tokenizer
from kimi_recon.dataset import audit_dataset, reconstruct_records
from kimi_recon.errors import KimiReconError
from kimi_recon.openrouter.output import OutputFile
from kimi_recon.openrouter.prompts import read_prompts
from kimi_recon.openrouter.rebuild import make_prompt_counter
from kimi_recon.record_options import parse_options
from kimi_recon.servers import get_server
from kimi_recon.usage_check import check_count
from kimi_recon.usage_stats import ConventionLearner, TokenCountTally

TOK: KimiTokenizer = load_tokenizer()
REPORT = audit_dataset([], progress=False)
RESULT = kimi_recon.audit_record({"response": {"content": "hi"}, "reference_ids": [1]})

def _encode_like_official(fast: object, text: str) -> list[int]:
    pytest.importorskip("tokenizers")
    from kimi_recon.fast_tokenizer import encode_like_official

    return encode_like_official(fast, text)  # type: ignore[arg-type]


def _deep_list(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth):
        value = [value]
    return value


# (wrong types on purpose: each call must end in a named error)
CALLS: dict[str, Callable[[], object]] = {
    "encode_many(5)": lambda: TOK.encode_many(5),  # type: ignore[arg-type]
    "encode_many({})": lambda: TOK.encode_many({"a": 1}),  # type: ignore[arg-type]
    "id_of_bytes([1])": lambda: TOK.id_of_bytes([1]),  # type: ignore[arg-type]
    "is_special([1])": lambda: TOK.is_special([1]),  # type: ignore[arg-type]
    "encode_ordinary_piece(3.5)": lambda: TOK.encode_ordinary_piece(3.5),  # type: ignore[arg-type]
    "decode(range(10**12))": lambda: TOK.decode(range(10**12)),
    "SPECIAL_TOKENS[1.5]": lambda: SPECIAL_TOKENS[1.5],  # type: ignore[call-overload]
    "SPECIAL_TOKENS.id(5)": lambda: SPECIAL_TOKENS.id(5),  # type: ignore[arg-type]
    "SPECIAL_TOKENS.text('x')": lambda: SPECIAL_TOKENS.text("x"),  # type: ignore[arg-type]
    "SPECIAL_TOKENS.suggest(range)": lambda: SPECIAL_TOKENS.suggest(range(10**12)),  # type: ignore[arg-type]
    "DatasetAudit.rate(5)": lambda: REPORT.rate(5),  # type: ignore[arg-type]
    "DatasetAudit.summary('x')": lambda: REPORT.summary(examples="x"),  # type: ignore[arg-type]
    "RecordResult.to_row(5)": lambda: RESULT.to_row(5),  # type: ignore[arg-type]
    "TokenCountTally.add(5, 5)": lambda: TokenCountTally().add(5, 5),  # type: ignore[arg-type]
    "ServerProfile.loses([1])": lambda: get_server("vllm").loses([1]),  # type: ignore[arg-type]
    "audit_dataset('a\\x00b')": lambda: audit_dataset("a\x00b", progress=False),
    "read_prompts('\\ud83d')": lambda: read_prompts("\ud83d"),
    "make_prompt_counter(cache_size=2**64)": lambda: make_prompt_counter(cache_size=2**64),
    # found by the fuzz of every public method (tests/test_fuzz_named_errors.py), fresh draws
    "ConventionLearner.learn(5, object())": lambda: ConventionLearner().learn(5, object()),  # type: ignore[arg-type]
    "ConventionLearner.flag('p', TOK)": lambda: ConventionLearner().flag("p", TOK),  # type: ignore[arg-type]
    "encode(disallowed_special=np.int64)": lambda: TOK.encode("x", disallowed_special=np.int64(5)),  # type: ignore[arg-type]  # (a numpy scalar where a collection goes, on purpose)
    "encode(allowed_special=array)": lambda: TOK.encode("x", allowed_special=np.array(["<|im_end|>", "x"])),  # type: ignore[arg-type]
    "encode(allowed_special={set})": lambda: TOK.encode("<|im_end|>", allowed_special={frozenset(), 1}, disallowed_special="all"),  # type: ignore[arg-type]
    "encode_template_text({1, 2})": lambda: TOK.encode_template_text({1, 2}),  # type: ignore[arg-type]
    "special_token_text({1, 2})": lambda: TOK.special_token_text({1, 2}),  # type: ignore[arg-type]
    "ChatProfile.generation_prompt(thinking=array)": lambda: kimi_recon.get_profile("kimi-k2.5").generation_prompt(np.array([1, 2])),  # type: ignore[arg-type]
    "encode_with_specials('x', object())": lambda: TOK.encode_with_specials("x", object()),  # type: ignore[arg-type]
    "reconstruct_records(executor=deep list)": lambda: list(reconstruct_records([{"response": {"content": "x"}}], executor=_deep_list(3000))),  # type: ignore[arg-type]
    "turn_from_response(field=array)": lambda: kimi_recon.turn_from_response({"content": None}, field=np.array([1, 2])),  # type: ignore[arg-type]
    "turn_from_response(field=deep list)": lambda: kimi_recon.turn_from_response({"content": None}, field=_deep_list(3000)),  # type: ignore[arg-type]
    "turn_from_response(lenient=array)": lambda: kimi_recon.turn_from_response({"content": "x"}, lenient=np.array([1, 2])),  # type: ignore[arg-type]
    "Reconstruction.has_flag(array)": lambda: kimi_recon.reconstruct_output_ids({"content": "x"}).has_flag(np.array([1, 2])),  # type: ignore[arg-type]
    "RenderedTurn.has_flag(array)": lambda: kimi_recon.render.render_turn_with_flags(kimi_recon.AssistantTurn(content="x")).has_flag(np.array([1, 2])),  # type: ignore[arg-type]
    "compare_checked_ids(nested lists)": lambda: kimi_recon.compare.compare_checked_ids([], [[[1]]], TOK),  # type: ignore[list-item]
    "parse_options(read=bytearray)": lambda: parse_options(read=bytearray(b"ab")),  # type: ignore[arg-type]
    "check_count(prompt_opens=array)": lambda: check_count("completion_tokens", 0, 0, closed=True, prompt_opens=np.array([1, 2])),  # type: ignore[arg-type]
    "check_count(allowed=object())": lambda: check_count("completion_tokens", 0, 0, closed=True, allowed=object()),  # type: ignore[arg-type]
    "check_count(field=array)": lambda: check_count(np.array([1, 2]), 0, 0, closed=True),  # type: ignore[arg-type]
    "decode(skip_special_tokens=array)": lambda: TOK.decode([1, 2], skip_special_tokens=np.array([1, 2])),  # type: ignore[arg-type]
    "decode(errors=array)": lambda: TOK.decode([1, 2], errors=np.array([1])),  # type: ignore[arg-type]
    "decode(errors='bogus')": lambda: TOK.decode([1, 2], errors="bogus"),
    "decode(errors='\\ud83d')": lambda: TOK.decode([1, 2], errors="\ud83d"),
    "decode(errors='\\x00')": lambda: TOK.decode([1, 2], errors="\x00"),
    "encode_like_official(KimiTokenizer)": lambda: _encode_like_official(TOK, "x"),
    "reconstruct_output_ids(call_index_offset=[])": lambda: kimi_recon.reconstruct_output_ids({"content": "x"}, call_index_offset=[]),  # type: ignore[arg-type]
    "reconstruct_output_ids(call_index_offset=False)": lambda: kimi_recon.reconstruct_output_ids({"content": "x"}, call_index_offset=False),
    "OutputFile.append not open": lambda: OutputFile(Path("never-opened.jsonl")).append({"id": "a", "status": "ok"}),
    "reconstruct_records(executor=array)": lambda: list(reconstruct_records([{"response": {"content": "x"}}], executor=np.array([1, 2]))),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_bad_input_to_a_method_is_a_named_error(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KimiReconError):
        CALLS[name]()


def test_the_named_errors_keep_the_types_callers_caught() -> None:
    with pytest.raises(TypeError):  # InvalidInputTypeError: tiktoken raises TypeError for a text that is not a str
        TOK.encode_template_text({1, 2})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        TOK.special_token_text("x")  # type: ignore[arg-type]
    with pytest.raises(RuntimeError):  # OutputNotOpenError: a RuntimeError before it had a name
        OutputFile(Path("never-opened.jsonl")).append({"id": "a", "status": "ok"})
    assert TOK.special_token_text(np.int64(163586)) == "<|im_end|>"  # type: ignore[arg-type]  # (a numpy id, as a column gives it: accepted at run time)
    assert parse_options(read=[np.array([1, 2]), "profile"], profile="kimi-k3").profile.name == "kimi-k3"  # type: ignore[list-item]
    assert TOK.encode("x", disallowed_special=np.array([1, 2])) == TOK.encode("x")  # was a bare ValueError
    assert TOK.encode("<|im_end|>", allowed_special=np.array([])) == TOK.encode("<|im_end|>", allowed_special=set())  # type: ignore[arg-type]


def test_lookups_take_numpy_integers_and_bytes_like_values_and_membership_never_raises() -> None:
    assert SPECIAL_TOKENS.get(np.int64(163586)) is not None  # type: ignore[arg-type]  # (a numpy id, as a column gives it: accepted at run time)
    assert SPECIAL_TOKENS[np.int64(163586)] == "<|im_end|>"  # type: ignore[call-overload]  # (a numpy id: accepted at run time)
    assert TOK.is_special(np.int64(163586)) and TOK.encode_bytes(bytearray(b"hi")) == TOK.encode_bytes(b"hi")  # type: ignore[arg-type]
    assert [1] not in SPECIAL_TOKENS and "<|im_end|>" in SPECIAL_TOKENS


def test_learned_conventions_applied_names_what_it_was_given_wrong() -> None:
    from kimi_recon.usage_stats import learned_conventions_applied

    for results, usage, flagged, window in (
        (None, lambda r: (None, None, True), lambda r, f: r, 8),
        ([1], None, lambda r, f: r, 8),
        ([1], lambda r: (None, None, True), None, 8),
        ([1], lambda r: (None, None, True), lambda r, f: r, 0),
        ([1], lambda r: None, lambda r, f: r, 8),
        ([1], lambda r: (None, object(), True), lambda r, f: r, 8),
    ):
        with pytest.raises(KimiReconError):
            list(learned_conventions_applied(results, usage, flagged, window))  # type: ignore[arg-type]
