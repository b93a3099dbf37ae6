"""The special-token registry matches the official tokenizer, and the audits catch wrong ids."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon import SPECIAL_TOKENS, KimiTokenizer
from kimi_recon.audit import assert_special_tokens_ok, check_special_tokens, check_token_ids
from kimi_recon.cli import main
from kimi_recon.errors import UnknownSpecialTokenError
from kimi_recon.special_tokens import SpecialTokenRegistry

OFFICIAL_SPECIAL = [c for c in read_jsonl(OFFICIAL / "special.jsonl") if c["id"] >= 163584]


def test_registry_covers_every_official_special_slot() -> None:
    assert [t.id for t in SPECIAL_TOKENS] == [c["id"] for c in OFFICIAL_SPECIAL] == list(range(163584, 163840))


@pytest.mark.parametrize("case", OFFICIAL_SPECIAL, ids=lambda c: str(c["id"]))
def test_registry_text_matches_official(case: dict[str, Any]) -> None:
    assert SPECIAL_TOKENS.text(case["id"]) == case["token"] == case["decoded"]
    assert SPECIAL_TOKENS.id(case["token"]) == case["id"]


def test_lookups_both_ways_and_by_name() -> None:
    assert SPECIAL_TOKENS.id("<|im_end|>") == 163586
    assert SPECIAL_TOKENS.text(163607) == "</think>"
    assert SPECIAL_TOKENS.id("IM_END") == 163586
    assert SPECIAL_TOKENS.entry("THINK_END").text == "</think>"
    assert SPECIAL_TOKENS.entry(163599).role == "tool_call"
    assert not SPECIAL_TOKENS.entry("<think>").special  # as the official config marks it


def test_roles_cover_the_named_families() -> None:
    roles = {t.text: t.role for t in SPECIAL_TOKENS.named()}
    assert {t for t, r in roles.items() if r == "tool_call"} == {
        "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    }
    assert roles["[BOS]"] == "bos" and roles["[EOS]"] == "eos" and roles["[UNK]"] == "unk" and roles["[PAD]"] == "pad"
    assert sum(t.role == "reserved" for t in SPECIAL_TOKENS) == 256 - len(roles)


def test_near_miss_suggests_the_closest_token() -> None:
    with pytest.raises(UnknownSpecialTokenError, match=r"'<\|im_end\|' is not a known special token; did you mean '<\|im_end\|>' \(id 163586\)\?"):
        SPECIAL_TOKENS.id("<|im_end|")


def test_unknown_id_is_named() -> None:
    with pytest.raises(UnknownSpecialTokenError, match="163533 is not a special-token id"):
        SPECIAL_TOKENS.text(163533)


def test_unknown_error_is_a_keyerror() -> None:
    with pytest.raises(KeyError):
        SPECIAL_TOKENS.id("<|nope|>")


def test_audit_of_bundled_tokenizer_is_clean(tok: KimiTokenizer) -> None:
    report = check_special_tokens(tok)
    assert report.ok, str(report)
    assert report.checked == 256


def _mutations() -> list[Any]:
    params = []
    for i, entry in enumerate(SPECIAL_TOKENS):
        other = 163533 if entry.id != 163533 else 0
        params.append(pytest.param(i, dataclasses.replace(entry, id=other), id=f"{entry.id}-id"))
        params.append(pytest.param(i, dataclasses.replace(entry, text=entry.text[:-1]), id=f"{entry.id}-text"))
    return params


@pytest.mark.parametrize("index,corrupt", _mutations())
def test_audit_catches_every_single_entry_corruption(tok: KimiTokenizer, index: int, corrupt: Any) -> None:
    tokens = list(SPECIAL_TOKENS)
    tokens[index] = corrupt
    report = check_special_tokens(tok, SpecialTokenRegistry(tokens))
    assert not report.ok
    assert any(corrupt.text in p or str(corrupt.id) in p for p in report.problems)


def test_audit_catches_colliding_entries(tok: KimiTokenizer) -> None:
    tokens = list(SPECIAL_TOKENS) + [dataclasses.replace(SPECIAL_TOKENS.entry(163586), name=None)]
    report = check_special_tokens(tok, SpecialTokenRegistry(tokens))
    assert any("collides" in p for p in report.problems)


def test_audit_catches_a_wrong_special_flag(tok: KimiTokenizer) -> None:
    tokens = [dataclasses.replace(t, special=not t.special) if t.id == 163607 else t for t in SPECIAL_TOKENS]
    report = check_special_tokens(tok, SpecialTokenRegistry(tokens))
    assert report.problems == ("'</think>' (id 163607): tokenizer_config marks it special=False, the registry special=True",)


def test_audit_ids_explains_the_chas_bug(tok: KimiTokenizer) -> None:
    report = check_token_ids({"IM_END_TOKEN_ID": 163533, "THINK_END_TOKEN_ID": 163607}, tok)
    assert report.problems == ("IM_END_TOKEN_ID = 163533 decodes to 'chas'; <|im_end|> is 163586",)
    assert "PROBLEM IM_END_TOKEN_ID = 163533 decodes to 'chas'; <|im_end|> is 163586" in str(report)


@pytest.mark.parametrize(
    "name,value",
    [("im_end_id", 163586), ("THINK_START_TOKEN_ID", 163606), ("kimi_tool_call_end_token", 163599), ("PAD_TOKEN_ID", 163839), ("EOS_TOKEN_ID", 163585), ("EOS_TOKEN_ID", 163586)],
)
def test_audit_ids_accepts_right_constants(tok: KimiTokenizer, name: str, value: int) -> None:
    assert check_token_ids({name: value}, tok).ok


@pytest.mark.parametrize("constants", [{"THINK_END_ID": 163606}, {"PAD_ID": 163838}, {"IM_END": -1}, {"IM_END": 10**7}, {"IM_END": "163586"}])
def test_audit_ids_rejects_wrong_constants(tok: KimiTokenizer, constants: dict[str, Any]) -> None:
    assert not check_token_ids(constants, tok).ok


def test_assert_helper_fails_with_the_report(tok: KimiTokenizer) -> None:
    assert_special_tokens_ok(tok, {"IM_END_TOKEN_ID": 163586})
    with pytest.raises(AssertionError, match="decodes to 'chas'"):
        assert_special_tokens_ok(tok, {"IM_END_TOKEN_ID": 163533})


def test_cli_audit_tokens_passes_on_bundled(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit-tokens"]) == 0
    assert "256 checked, OK" in capsys.readouterr().out


def test_cli_audit_tokens_fails_on_wrong_constants(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    constants = tmp_path / "ids.json"
    constants.write_text(json.dumps({"IM_END_TOKEN_ID": 163533}), encoding="utf-8")
    assert main(["audit-tokens", "--constants", str(constants)]) == 1
    assert "163533 decodes to 'chas'" in capsys.readouterr().out


def test_cli_reports_a_broken_tokenizer_without_traceback(tokenizer_dir: Path) -> None:
    (tokenizer_dir / "tokenizer_config.json").write_text("[]", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "kimi_recon.cli", "audit-tokens", "--tokenizer", str(tokenizer_dir)], check=False, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "tokenizer_config.json must hold a JSON object" in proc.stderr and "Traceback" not in proc.stderr
