"""A profile's token ids are read from the special-token table it names, so they cannot disagree with its texts;
every profile's ids are the official ones. The profile is data: its two old rendering methods still work, with
a DeprecationWarning, and give what the dispatch by format gives."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import warnings

import pytest
from testdata import DATA, GOLDEN, OFFICIAL, read_jsonl

from kimi_recon import AssistantTurn
from kimi_recon.profiles import PROFILES
from kimi_recon.render import render_turn_with_flags
from kimi_recon.training import prompt_segments

# The official tables, text -> id: K2.5's as its official tokenizer decodes every special id, K3's added tokens.
OFFICIAL_IDS = {
    "kimi-k2.5": {c["token"]: c["id"] for c in read_jsonl(OFFICIAL / "special.jsonl") if c["id"] >= 163584},
    "kimi-k3": {t["content"]: t["id"] for t in json.loads((DATA / "k3_special_tokens.json").read_text(encoding="utf-8"))["tokens"]},
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profiles_token_ids_are_the_official_ids_of_its_texts(name: str) -> None:
    profile = PROFILES[name]
    official = OFFICIAL_IDS[profile.special_tokens]
    assert profile.stop_token_id == official[profile.stop_token]
    assert profile.eos_token_id == official["[EOS]"]
    assert profile.think_end_token_id == official.get("</think>")


def test_the_ids_are_the_ones_the_profiles_stored_before_they_were_derived() -> None:
    # the literal ids of the profiles before (every K2.x one, and K3 with no </think> token)
    stored = {"kimi-k3": (163586, 163585, None)}
    for name, profile in PROFILES.items():
        assert (profile.stop_token_id, profile.eos_token_id, profile.think_end_token_id) == stored.get(name, (163586, 163585, 163607))


def test_a_profile_copied_with_another_stop_token_gets_that_tokens_id_not_the_old_one() -> None:
    # stored ids went stale in such a copy: the text said [EOS], the id still <|im_end|>'s
    eos_ended = dataclasses.replace(PROFILES["kimi-k2.5"], name="eos-ended", stop_token="[EOS]", stop_alternatives=())
    assert eos_ended.stop_token_id == OFFICIAL_IDS["kimi-k2.5"]["[EOS]"]
    assert eos_ended.eos_token_id is None  # no [EOS] after a turn that ends on it
    k3_stop = dataclasses.replace(PROFILES["kimi-k3"], stop_token="[EOS]")
    assert k3_stop.stop_token_id == OFFICIAL_IDS["kimi-k3"]["[EOS]"]


def test_the_deprecated_profile_render_turn_warns_and_renders_as_render_turn_with_flags() -> None:
    turn = AssistantTurn(reasoning="Think.", content="Hi.")
    for name in ("kimi-k2.5", "kimi-k3"):
        profile = PROFILES[name]
        with pytest.warns(DeprecationWarning, match="render_turn_with_flags"):
            old = profile.render_turn(turn, True, call_index_offset=0, stop=profile.stop_token)
        assert old == render_turn_with_flags(turn, profile, True)


def test_the_deprecated_profile_prompt_segments_warns_and_gives_the_dispatchs_segments() -> None:
    case = read_jsonl(GOLDEN / "official-k3-dev" / "turns.jsonl")[0]
    messages, tools = case["messages"], case["tools"]
    for name in ("kimi-k2.5", "kimi-k3"):
        profile = PROFILES[name]
        with pytest.warns(DeprecationWarning, match="prompt_segments"):
            old = profile.prompt_segments(messages, tools, True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the dispatch itself warns nothing
            assert old == prompt_segments(messages, tools, profile, True)
    assert prompt_segments(messages, tools, PROFILES["kimi-k2.5"], True) is None  # the chat template renders K2.x prompts


def test_the_upward_references_work_in_a_fresh_process_that_imports_only_the_lower_module() -> None:
    # for_profile and the deprecated methods reach upper modules through kimi_recon._base.wiring, set by the package root
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from kimi_recon.special_tokens import SpecialTokenRegistry\n"
        "print(SpecialTokenRegistry.for_profile('moonshotai/kimi-k3').name)\n"
        "from kimi_recon.profiles import PROFILES\n"
        "from kimi_recon.models import AssistantTurn\n"
        "p = PROFILES['kimi-k2.5']\n"
        "print(p.render_turn(AssistantTurn(content='Hi.'), True, call_index_offset=0, stop=p.stop_token).text)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.splitlines() == ["kimi-k3", "</think>Hi.<|im_end|>"]
