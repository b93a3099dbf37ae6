"""A profile's token ids are read from the special-token table it names, so they cannot disagree with its texts;
every profile's ids are the official ones. The profile is data: its two old rendering methods still work, with
a DeprecationWarning, and give what the dispatch by format gives."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from testdata import DATA, OFFICIAL, read_jsonl

from kimi_recon.profiles import PROFILES

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


def test_no_lower_module_reaches_up_through_a_slot_and_the_moved_apis_are_gone() -> None:
    """``kimi_recon._base.wiring`` held two callables the package root filled so that ``special_tokens`` and
    ``profiles`` could call up; both APIs that needed them moved or went (CHANGELOG): the table of a profile is
    ``profiles.special_tokens_for`` (the layer that knows profiles), the deprecated ``ChatProfile.render_turn`` /
    ``prompt_segments`` are gone. A fresh process that imports only the lower module needs nothing else."""
    import importlib.util

    from kimi_recon.special_tokens import SpecialTokenRegistry

    assert importlib.util.find_spec("kimi_recon._base.wiring") is None
    assert not hasattr(SpecialTokenRegistry, "for_profile")
    assert not hasattr(PROFILES["kimi-k2.5"], "render_turn") and not hasattr(PROFILES["kimi-k2.5"], "prompt_segments")
    code = (
        "from kimi_recon.profiles import special_tokens_for, PROFILES\n"
        "print(special_tokens_for('moonshotai/kimi-k3').name, PROFILES['kimi-k2.5'].special_token_table.name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split() == ["kimi-k3", "kimi-k2.5"]
