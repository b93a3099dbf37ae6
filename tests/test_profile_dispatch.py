"""What differs between the chat formats is the profile's data: a profile under another name, with the same
fields, renders, encodes and checks exactly as the one it copies (no module branches on a profile's name),
and the K3 golden turns still come out as Moonshot's code made them through that copy."""

from __future__ import annotations

import dataclasses

import pytest
from testdata import GOLDEN, OFFICIAL, read_jsonl

from kimi_recon import check_token_ids, load_tokenizer, reconstruct_output_ids
from kimi_recon.errors import InvalidInputError
from kimi_recon.profiles import PROFILES, ChatProfile, special_tokens_for
from kimi_recon.tokenizer import tokenizer_for_profile
from kimi_recon.training import encode_prompt, render_prompt

K25_TURNS = read_jsonl(OFFICIAL / "turns.jsonl")[:12]
K3_TURNS = read_jsonl(GOLDEN / "official-k3-dev" / "turns.jsonl")[:12]


def _renamed(name: str) -> ChatProfile:
    return dataclasses.replace(PROFILES[name], name=f"my-{name}-copy", description="a copy under another name")


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_profile_under_another_name_reconstructs_the_same_ids_text_and_flag_codes(name: str) -> None:
    copy = _renamed(name)
    for case in K25_TURNS + K3_TURNS:
        if copy.thinking_required and not case["thinking"]:  # K2.7-Code has no non-thinking mode: both refuse
            for profile in (name, copy):
                with pytest.raises(InvalidInputError, match="no non-thinking mode"):
                    reconstruct_output_ids(case["turn"], profile=profile, thinking=False)
            continue
        original = reconstruct_output_ids(case["turn"], profile=name, thinking=case["thinking"])
        renamed = reconstruct_output_ids(case["turn"], profile=copy, thinking=case["thinking"])
        assert (renamed.ids, renamed.text) == (original.ids, original.text)
        # (a message may name the profile)
        assert [(f.code, f.field) for f in renamed.flags] == [(f.code, f.field) for f in original.flags]


def test_a_renamed_k3_profile_rebuilds_the_official_k3_output_and_prompt_ids() -> None:
    copy = _renamed("kimi-k3")
    for case in K3_TURNS:
        rebuilt = reconstruct_output_ids(case["turn"], profile=copy, thinking=case["thinking"])
        assert rebuilt.ids == case["output_ids"]
        options = {"thinking_effort": case["thinking_effort"], "tool_choice": case["tool_choice"]}
        assert render_prompt(case["messages"], case["tools"], copy, case["thinking"], **options) == case["prompt"]
        assert encode_prompt(case["messages"], case["tools"], copy, case["thinking"], **options) == case["prompt_ids"]


def test_a_renamed_k2_profile_rebuilds_the_official_k25_prompt_ids() -> None:
    copy = _renamed("kimi-k2.5")
    for case in K25_TURNS:
        assert encode_prompt(case["messages"], case["tools"], copy, case["thinking"]) == case["prompt_ids"]


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_renamed_profile_gets_the_special_token_table_and_bundled_tokenizer_of_its_data(name: str) -> None:
    copy = _renamed(name)
    assert special_tokens_for(copy).name == PROFILES[name].special_tokens
    assert tokenizer_for_profile(None, copy) is tokenizer_for_profile(None, name)
    assert load_tokenizer(profile=copy) is load_tokenizer(profile=name)
    constants = {"IM_END_TOKEN_ID": 163586, "THINK_END_TOKEN_ID": 163533}
    assert check_token_ids(constants, profile=copy) == check_token_ids(constants, profile=name)
