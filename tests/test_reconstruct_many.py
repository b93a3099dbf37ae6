"""``reconstruct_many`` is ``[reconstruct_output_ids(t, ...) for t in turns]``: the same reconstructions (ids, text,
flags, source) and the same errors, now naming the turn's index (issue 23, item 1: the many-turn entry point).

The one-turn function is what the golden tests hold to the official ids; here the many-turn one is held to it on
generated turns of every format, at chunk edges, with logprobs and server ids, and to the official ids directly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from turn_strategies import turns

import kimi_recon
import kimi_recon.reconstruct as reconstruct_module
from kimi_recon import AssistantTurn, load_tokenizer, reconstruct_many, reconstruct_output_ids
from kimi_recon.errors import InvalidInputError, InvalidInputTypeError

GOLDEN = Path(__file__).parent / "data" / "golden"
TEXT = st.lists(st.one_of(st.text(max_size=6), st.sampled_from(["<|im_end|>", "</think>", "<|open|>", "<|sep|>", "\ud83d", "  ", "名前"])), max_size=6).map("".join)


def _turns() -> st.SearchStrategy[AssistantTurn]:
    models = st.sampled_from([{}, {"model": "moonshotai/kimi-k3"}, {"model": "moonshotai/kimi-k2-thinking"}])
    return turns(TEXT, arguments=TEXT | st.just('{"a": 1, "b": "x"}'), metadata=models)


def _as_dicts(recons: list[Any]) -> list[dict[str, Any]]:
    return [r.to_dict() for r in recons]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(_turns(), max_size=9),
    st.sampled_from([None, "kimi-k2.5", "kimi-k3", "kimi-k2-instruct"]),
    st.booleans(),
    st.sampled_from([1, 2, 64]),
)
def test_many_turns_rebuilt_together_equal_each_rebuilt_alone(many: list[AssistantTurn], profile: str | None, thinking: bool, chunk: int) -> None:
    # profile None: each turn's model id picks its profile, so a chunk mixes K2.x and K3 turns
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(reconstruct_module, "MANY_CHUNK", chunk)
        got = reconstruct_many(many, profile=profile, thinking=thinking)
    assert _as_dicts(got) == _as_dicts([reconstruct_output_ids(t, profile=profile, thinking=thinking) for t in many])


def _rows(folder: str) -> list[dict[str, Any]]:
    return [json.loads(line) for name in ("turns.jsonl", "turns_adversarial.jsonl") for line in (GOLDEN / folder / name).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize(("profile", "folder"), [("kimi-k2.5", "official-k2.5-dev"), ("kimi-k3", "official-k3-dev")])
def test_golden_turns_rebuilt_together_are_the_official_ids(profile: str, folder: str) -> None:
    rows = _rows(folder)
    for thinking in (True, False):
        mine = [r for r in rows if r["thinking"] is thinking]
        got = reconstruct_many([r["turn"] for r in mine], load_tokenizer(profile=profile), profile, thinking)
        assert [g.ids for g in got] == [r["output_ids"] for r in mine]
    assert len(rows) >= 100


def test_a_turn_that_cannot_be_read_raises_its_own_error_naming_its_index() -> None:
    turns: list[Any] = [{"content": "fine"}] * 70 + [{"contnt": "typo"}]
    with pytest.raises(InvalidInputError) as caught:
        reconstruct_many(turns)
    assert caught.value.sample == 70 and str(caught.value).startswith("sample 70, field 'response'")
    with pytest.raises(InvalidInputError) as alone:
        reconstruct_output_ids(turns[70])
    assert caught.value.message == alone.value.message and type(caught.value) is type(alone.value)


@pytest.mark.parametrize(
    ("option", "field"),
    [({"profile": "kimi-k9"}, "profile"), ({"tokenizer": "kimi-k3"}, "tokenizer"), ({"thinking": "yes"}, "thinking"), ({"server": 42}, "server")],
)
def test_a_wrong_option_is_the_calls_error_naming_no_turn_even_with_no_turns(option: dict[str, Any], field: str) -> None:
    for batch in ([{"content": "a"}], []):
        with pytest.raises(InvalidInputError) as caught:
            reconstruct_many(batch, **option)
        assert caught.value.sample is None and caught.value.field == field
    with pytest.raises(InvalidInputError) as alone:
        reconstruct_output_ids({"content": "a"}, **option)
    assert alone.value.field == field  # the one-turn function names the same option


def test_a_stop_the_turns_profile_does_not_know_names_the_turn() -> None:
    turns: list[Any] = [{"content": "a"}, {"content": "b", "model": "moonshotai/kimi-k3"}]
    with pytest.raises(InvalidInputError) as caught:
        reconstruct_many(turns, stop="<|im_end|>")  # K2.5's stop: the K3 turn's profile has no such stop
    assert caught.value.sample == 1


@pytest.mark.parametrize("one", [{"content": "hi"}, AssistantTurn(content="hi"), "hi", b"hi", 7])
def test_one_turn_instead_of_many_is_a_named_type_error(one: Any) -> None:
    with pytest.raises(InvalidInputTypeError, match="iterable of turns") as caught:
        reconstruct_many(one)
    assert caught.value.field == "turns"


def test_a_generator_and_an_empty_list_are_read_like_lists() -> None:
    assert reconstruct_many([]) == []
    gen = ({"content": f"turn {i}"} for i in range(130))
    assert [r.ids for r in reconstruct_many(gen)] == [reconstruct_output_ids({"content": f"turn {i}"}).ids for i in range(130)]


def test_logprobs_and_server_ids_are_used_as_alone() -> None:
    tok = load_tokenizer()
    ids = reconstruct_output_ids({"content": "Hi there, friend"}).ids
    logprobs = tuple({"token": "x", "logprob": -0.1, "bytes": list(tok.token_bytes(t))} for t in ids)
    turns = [
        AssistantTurn(content="Hi there, friend", logprobs=logprobs),
        {"choices": [{"message": {"content": "Hi there, friend"}, "finish_reason": "stop", "token_ids": ids}]},
        {"content": "Hi there, friend"},
    ]
    sources: set[str] = set()
    for use_logprobs in (True, False):
        for server in (None, "vllm", "none"):
            got = reconstruct_many(turns, use_logprobs=use_logprobs, server=server)
            assert _as_dicts(got) == _as_dicts([reconstruct_output_ids(t, use_logprobs=use_logprobs, server=server) for t in turns])
            sources.update(r.source for r in got)
    assert sources == {"logprobs", "server_token_ids", "rendered"}  # every way to the ids was taken


def test_it_is_public_beside_the_one_turn_function() -> None:
    assert kimi_recon.reconstruct_many is reconstruct_many


def test_when_the_turns_cannot_be_encoded_together_each_is_encoded_alone_with_the_same_results(monkeypatch: pytest.MonkeyPatch) -> None:
    from kimi_recon.dataset import reconstruct_records

    turns: list[Any] = [{"reasoning_content": "r", "content": f"c {i}"} for i in range(5)] + [{"content": "k3", "model": "moonshotai/kimi-k3"}]
    many, records = _as_dicts(reconstruct_many(turns)), [r.to_dict() for r in reconstruct_records(turns)]

    def broken(*args: Any) -> Any:
        raise RuntimeError("the batch encode broke")

    monkeypatch.setattr(reconstruct_module, "_encoded_together", broken)
    assert _as_dicts(reconstruct_many(turns)) == many
    assert [r.to_dict() for r in reconstruct_records(turns)] == records
    assert all(r["error"] is None for r in records)


@pytest.mark.parametrize("profile", ["kimi-k2.5", "kimi-k3"])
def test_turns_too_long_to_share_a_call_sit_among_short_ones_with_the_same_results(profile: str) -> None:
    from kimi_recon.segments import TOGETHER_MAX_CHARS

    padding = "a line of text, " * (TOGETHER_MAX_CHARS // 16 + 1)
    turns: list[Any] = [
        {"reasoning_content": f"r{i}", "content": (padding if i % 3 == 1 else "") + f"answer {i} 名前"} for i in range(8)
    ]
    assert sum(len(t["content"]) > TOGETHER_MAX_CHARS for t in turns) == 3
    alone = [reconstruct_output_ids(t, profile=profile) for t in turns]
    assert _as_dicts(reconstruct_many(turns, profile=profile)) == _as_dicts(alone)


def test_a_turn_whose_own_encode_fails_raises_in_its_turn_and_is_its_records_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from kimi_recon.dataset import reconstruct_records
    from kimi_recon.errors import InvalidTurnError
    from kimi_recon.segments import TOGETHER_MAX_CHARS

    turns: list[Any] = [{"content": "fine"}, {"content": "boom " * (TOGETHER_MAX_CHARS // 5 + 1)}, {"content": "fine too"}]
    before = [r.to_dict() for r in reconstruct_records(turns)]
    real = reconstruct_module._encode_checked

    def failing(rendered: Any, *args: Any) -> Any:
        if "boom" in rendered.text:
            raise InvalidTurnError("cannot encode this one", field="content")
        return real(rendered, *args)

    monkeypatch.setattr(reconstruct_module, "_encode_checked", failing)
    with pytest.raises(InvalidTurnError) as caught:
        reconstruct_many(turns)
    assert caught.value.sample == 1 and caught.value.field == "content"
    after = [r.to_dict() for r in reconstruct_records(turns)]
    assert after[1]["error"] is not None and "cannot encode this one" in after[1]["error"]["message"]
    assert [after[0], after[2]] == [before[0], before[2]]
