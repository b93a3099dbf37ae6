"""Special tokens per profile: Kimi-K3's names on the shared ids, audits that take a profile."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from testdata import DATA

from kimi_recon import SPECIAL_TOKENS, KimiTokenizer, load_tokenizer
from kimi_recon.audit import check_special_tokens, check_token_ids
from kimi_recon.errors import TokenizerLoadError
from kimi_recon.profiles import special_tokens_for

K3_NAMED = json.loads((DATA / "k3_special_tokens.json").read_text(encoding="utf-8"))["tokens"]
K3 = special_tokens_for("kimi-k3")


def test_k3_registry_has_the_sixteen_named_tokens_of_the_official_config() -> None:
    assert [(t.id, t.text, t.special) for t in K3.named()] == [(t["id"], t["content"], t["special"]) for t in K3_NAMED]
    assert len(K3) == 256 and [t.id for t in K3] == list(range(163584, 163840))


def test_k3_names_differ_from_k25_on_the_same_ids() -> None:
    assert K3.id("<|end_of_msg|>") == 163586 == SPECIAL_TOKENS.id("<|im_end|>")
    assert (K3.id("OPEN"), K3.id("CLOSE"), K3.id("SEP")) == (163587, 163588, 163589)
    assert K3.text(163607) == "<|reserved_token_163607|>"  # K2.5's </think> is a reserved slot in K3
    assert "<|im_end|>" not in K3 and "</think>" not in K3


@pytest.mark.parametrize("profile,table", [("kimi-k2.5", "kimi-k2.5"), ("kimi-k2.6", "kimi-k2.5"), ("kimi-k2-thinking", "kimi-k2.5"), ("kimi-k3", "kimi-k3")])
def test_for_profile_picks_the_profile_table(profile: str, table: str) -> None:
    assert special_tokens_for(profile).name == table


def test_k3_tokenizer_passes_the_k3_audit_and_fails_the_k25_one() -> None:
    k3 = load_tokenizer(profile="kimi-k3")
    report = check_special_tokens(k3, profile="kimi-k3")
    assert report.ok and report.checked == 256, str(report)
    assert not check_special_tokens(k3, profile="kimi-k2.5").ok
    assert not check_special_tokens(load_tokenizer(), profile="kimi-k3").ok


def test_audit_without_profile_checks_against_the_tokenizer_own_table() -> None:
    assert "kimi-k3 table" in check_special_tokens(load_tokenizer(profile="kimi-k3")).subject


def test_k25_im_end_constant_checked_against_k3_says_what_163586_is_there() -> None:
    report = check_token_ids({"IM_END_TOKEN_ID": 163586}, profile="kimi-k3")
    assert report.ok
    assert report.notes == ("IM_END_TOKEN_ID = 163586 is <|end_of_msg|> in kimi-k3 (K2.5's <|im_end|>); the id is right, the name is K2.5's",)


def test_k25_think_end_constant_is_a_problem_in_k3() -> None:
    report = check_token_ids({"THINK_END_TOKEN_ID": 163607}, profile="kimi-k3")
    assert report.problems == (
        "THINK_END_TOKEN_ID = 163607 means K2.5's </think>, which kimi-k3 does not have: id 163607 is "
        "<|reserved_token_163607|> there; K3 writes <|close|>think<|sep|> instead",
    )


@pytest.mark.parametrize(
    "constants,ok",
    [
        ({"END_OF_MSG_TOKEN_ID": 163586}, True),
        ({"STOP_TOKEN_ID": 163586}, True),
        ({"K3_OPEN_ID": 163587}, True),
        ({"END_OF_MSG_TOKEN_ID": 163585}, False),
        ({"IM_END_TOKEN_ID": 163533}, False),
        ({"SEP_TOKEN": 163588}, False),
    ],
)
def test_k3_constants_are_read_in_the_k3_table(constants: dict[str, int], ok: bool) -> None:
    assert check_token_ids(constants, profile="kimi-k3").ok is ok


def test_k3_tokenizer_decodes_k3_names(tok: KimiTokenizer) -> None:
    k3 = load_tokenizer(profile="kimi-k3")
    assert k3.decode([163587, 2778, 163589]) == "<|open|>message<|sep|>"
    assert k3.mergeable_ranks == tok.mergeable_ranks  # the same vocab


def test_a_k3_tokenizer_directory_loads_with_k3_names(tokenizer_dir: Path) -> None:
    path = tokenizer_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {str(t["id"]): {"content": t["content"], "special": t["special"]} for t in K3_NAMED}
    path.write_text(json.dumps(config), encoding="utf-8")
    tok = load_tokenizer(tokenizer_dir)
    assert tok.special_tokens["<|end_of_msg|>"] == 163586
    assert check_special_tokens(tok).ok


def test_a_mixed_k25_k3_directory_is_refused(tokenizer_dir: Path) -> None:
    path = tokenizer_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["added_tokens_decoder"]["163587"]["content"] = "<|open|>"  # K3's name amid K2.5's (163588 is <|im_assistant|>)
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(TokenizerLoadError, match="in the Kimi registry"):
        load_tokenizer(tokenizer_dir)


def test_a_changed_bundled_k3_table_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from kimi_recon import special_tokens

    monkeypatch.setattr(special_tokens, "K3_SPECIAL_TOKENS_SHA256", "0" * 64)
    with pytest.raises(TokenizerLoadError, match=re.escape("data/k3/special_tokens.json has sha256")):
        special_tokens._read_k3_named()


def test_cli_audit_tokens_takes_a_profile(tmp_path: Path) -> None:
    constants = tmp_path / "ids.json"
    constants.write_text(json.dumps({"IM_END_TOKEN_ID": 163586}), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "kimi_recon.cli", "audit-tokens", "--profile", "kimi-k3", "--constants", str(constants)],
        check=False, capture_output=True, text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "kimi-k3 table: 256 checked, OK" in done.stdout
    assert "is <|end_of_msg|> in kimi-k3" in done.stdout
