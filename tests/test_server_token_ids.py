"""A server's own generated ids are checked before they are used (issue 37, item 3).

The ids a server returns (vLLM ``token_ids``, SGLang ``response_token_ids`` / ``sglext.output_ids``, llama.cpp
``__verbose.tokens``) are used only when the message is what that server's parsers make of their text; ids of
another turn, with another turn's or the prompt's ids in front, or without the message's reasoning are flagged
and not used. The ends: a stop token is appended only to a turn that stopped. Ids that are not token ids are
refused by name.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from servers_measure import SERVERS_DIR, load_rows

import kimi_recon
from kimi_recon import AssistantTurn, KimiTokenizer, ToolCall, get_profile, load_tokenizer, reconstruct_output_ids, turn_from_response
from kimi_recon.dataset import reconstruct_record
from kimi_recon.errors import InvalidInputError
from kimi_recon.flags import FlagCode, Severity
from kimi_recon.reconstruct import Reconstruction
from kimi_recon.tokenizer import tokenizer_for_profile

IM_END, EOS, EOT = 163586, 163585, 163593
SERVERS = [None, "vllm==0.15.1", "vllm==0.33.0", "sglang==0.5.23", "llama.cpp", "vllm==0.22.0", "Together"]


@pytest.fixture(scope="module")
def tok() -> KimiTokenizer:
    return load_tokenizer()


def _response(message: Mapping[str, Any], finish: str = "stop", **choice: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", **message}, **choice}]}


def _rebuild(message: Mapping[str, Any], ids: Any, *, server: str | None = "vllm==0.33.0", finish: str = "stop", thinking: bool = True, **extra: Any) -> Reconstruction:
    response = _response(message, finish, token_ids=ids, **extra)
    return reconstruct_output_ids(turn_from_response(response), thinking=thinking, server=server)


def _above_info(result: Reconstruction) -> list[str]:
    return [f.code.value for f in result.flags if f.severity > Severity.INFO]


def _message(turn: AssistantTurn) -> dict[str, Any]:
    calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_text}} for c in turn.tool_calls]
    return {"reasoning_content": turn.reasoning, "content": turn.content, **({"tool_calls": calls} if calls else {})}


# -- generated turns: their own ids are used unchanged, another turn's are not ------------------------------

_lower = st.text(st.sampled_from("abcdefghij .,\n"), min_size=1, max_size=40).filter(lambda t: any(c.isalpha() for c in t))
_upper = st.text(st.sampled_from("KLMNOPQRST .,\n"), min_size=1, max_size=40).filter(lambda t: any(c.isalpha() for c in t))
_values = st.one_of(st.integers(-1000, 1000), st.booleans(), st.text(st.sampled_from("abcxyz "), max_size=8))


def _turns(words: st.SearchStrategy[str], names: str) -> st.SearchStrategy[AssistantTurn]:
    calls = st.lists(
        st.builds(
            lambda name, args: (name, json.dumps(args)),
            st.text(st.sampled_from(names), min_size=1, max_size=8),
            st.dictionaries(st.text(st.sampled_from(names), min_size=1, max_size=5), _values, max_size=3),
        ),
        max_size=2,
    )
    return st.builds(
        lambda reasoning, content, made: AssistantTurn(
            reasoning=reasoning,
            content=content,
            tool_calls=tuple(ToolCall(f"functions.{n}:{i}", n, a) for i, (n, a) in enumerate(made)),
            finish_reason="tool_calls" if made else "stop",
        ),
        words,
        words,
        calls,
    )


_PROFILES = st.sampled_from(["kimi-k2.5", "kimi-k3"])


def _rendered_ids(turn: AssistantTurn, profile: str, thinking: bool = True) -> list[int]:
    return list(reconstruct_output_ids(turn, profile=profile, thinking=thinking, server="none").ids)


def _with_ids(turn: AssistantTurn, ids: list[int], profile: str, server: str | None) -> Reconstruction:
    response = {**_response(_message(turn), turn.finish_reason or "stop", token_ids=ids), "model": f"moonshotai/{profile}"}
    return reconstruct_output_ids(turn_from_response(response), profile=profile, thinking=True, server=server)


@given(_turns(_lower, "abcdefg_"), _PROFILES, st.sampled_from(SERVERS))
def test_the_ids_of_the_rendered_turn_are_used_unchanged(turn: AssistantTurn, profile: str, server: str | None) -> None:
    ids = _rendered_ids(turn, profile)
    result = _with_ids(turn, ids, profile, server)
    assert result.source == "server_token_ids" and list(result.ids) == ids
    assert FlagCode.SERVER_TOKEN_IDS_USED in result.flag_codes
    assert FlagCode.SERVER_TOKEN_IDS_DISAGREE not in result.flag_codes


@given(_turns(_lower, "abcdefg_"), _turns(_upper, "KLMNOPQ_"), _PROFILES, st.sampled_from(SERVERS))
def test_another_turns_ids_are_flagged_and_not_used(turn: AssistantTurn, other: AssistantTurn, profile: str, server: str | None) -> None:
    assume((turn.content or "").strip())  # (a message with no text of its own fits any ids the parser emptied)
    theirs = _rendered_ids(other, profile)
    result = _with_ids(turn, theirs, profile, server)
    assert result.source == "rendered" and list(result.ids) == _rendered_ids(turn, profile)
    (flag,) = [f for f in result.flags if f.code is FlagCode.SERVER_TOKEN_IDS_DISAGREE]
    assert flag.severity is Severity.LOSS and flag.field == "choices[0].token_ids"


@given(turn=_turns(_lower, "abcdefg_"), other=_turns(_upper, "KLMNOPQ_"), cut=st.integers(1, 40), profile=_PROFILES, server=st.sampled_from(SERVERS))
def test_ids_with_a_prefix_of_another_turns_ids_are_flagged(
    tok: KimiTokenizer, turn: AssistantTurn, other: AssistantTurn, cut: int, profile: str, server: str | None
) -> None:
    head = _rendered_ids(other, profile)[:cut]
    assume(any(c.isalpha() for c in tok.decode([t for t in head if not tok.is_special(t)])))
    result = _with_ids(turn, head + _rendered_ids(turn, profile), profile, server)
    assert result.source == "rendered"
    assert {"server_token_ids_disagree", "server_token_ids_with_prompt"} & set(_above_info(result))


@given(_turns(_lower, "abcdefg_"), _PROFILES, st.sampled_from(SERVERS))
def test_ids_without_the_messages_reasoning_are_flagged(turn: AssistantTurn, profile: str, server: str | None) -> None:
    assume((turn.reasoning or "").strip())
    without = AssistantTurn(content=turn.content, tool_calls=turn.tool_calls, finish_reason=turn.finish_reason)
    result = _with_ids(turn, _rendered_ids(without, profile), profile, server)
    assert result.source == "rendered"
    (flag,) = [f for f in result.flags if f.code is FlagCode.SERVER_TOKEN_IDS_DISAGREE]
    assert "reasoning" in flag.message


def test_the_disagreement_names_the_field_and_what_differs(tok: KimiTokenizer) -> None:
    call = {"id": "functions.get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    message = {"reasoning_content": "Check.", "content": None, "tool_calls": [call]}
    london = tok.encode(
        "Check.</think><|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "London"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>'
    )
    result = _rebuild(message, london)
    (flag,) = [f for f in result.flags if f.code is FlagCode.SERVER_TOKEN_IDS_DISAGREE]
    assert "London" in flag.message and "Paris" in flag.message and "tool_calls[0].function.arguments" in flag.message
    assert result.source == "rendered" and "Paris" in tok.decode(list(result.ids))


# -- the prompt in front -------------------------------------------------------------------------------------


def test_the_prompt_in_front_is_cut_when_known_and_flagged_when_not(tok: KimiTokenizer) -> None:
    message = {"reasoning_content": "Hm.", "content": "Hi"}
    prompt = tok.encode("<|im_user|>user<|im_middle|>hello<|im_end|><|im_assistant|>assistant<|im_middle|><think>")
    output = tok.encode("Hm.</think>Hi<|im_end|>")
    known = reconstruct_output_ids(turn_from_response({**_response(message, token_ids=prompt + output), "prompt_token_ids": prompt}), thinking=True)
    assert list(known.ids) == output and known.source == "server_token_ids"
    assert any("prompt's" in f.message for f in known.flags if f.code is FlagCode.SERVER_TOKEN_IDS_USED)
    unknown = _rebuild(message, prompt + output)
    assert unknown.source == "rendered" and list(unknown.ids) == output
    (flag,) = [f for f in unknown.flags if f.code is FlagCode.SERVER_TOKEN_IDS_WITH_PROMPT]
    assert "<|im_user|>" in flag.message and flag.severity is Severity.RISK


def test_a_records_prompt_ids_cut_the_prompt_in_front(tok: KimiTokenizer) -> None:
    prompt = tok.encode("<|im_system|>system<|im_middle|>S<|im_end|><|im_assistant|>assistant<|im_middle|><think>")
    output = tok.encode("Hm.</think>Hi<|im_end|>")
    record = {"response": _response({"reasoning_content": "Hm.", "content": "Hi"}, token_ids=prompt + output), "prompt_ids": prompt, "thinking": True}
    result = reconstruct_record(record)
    assert list(result.ids) == output and result.source == "server_token_ids"


def test_a_k3_list_starting_with_a_message_tag_is_a_prompt() -> None:
    k3 = tokenizer_for_profile(None, get_profile("kimi-k3"))
    prompt = k3.encode('<|open|>message role="user"<|sep|>hi<|close|>message<|sep|><|end_of_msg|>')
    output = _rendered_ids(AssistantTurn(reasoning="Hm.", content="Hi"), "kimi-k3")
    response = {**_response({"reasoning_content": "Hm.", "content": "Hi"}, token_ids=prompt + output), "model": "moonshotai/kimi-k3"}
    result = reconstruct_output_ids(turn_from_response(response), profile="kimi-k3", thinking=True)
    assert result.source == "rendered" and FlagCode.SERVER_TOKEN_IDS_WITH_PROMPT in result.flag_codes


# -- the end of the ids ----------------------------------------------------------------------------------------


def test_a_missing_stop_token_is_appended_only_to_a_turn_that_stopped(tok: KimiTokenizer) -> None:
    message = {"reasoning_content": "Hm.", "content": "Hi"}
    body = tok.encode("Hm.</think>Hi")
    assert list(_rebuild(message, body).ids) == [*body, IM_END]  # a build that leaves the stop token out
    for end in (EOS, EOT):  # another end token: the turn ended there
        assert list(_rebuild(message, [*body, end]).ids) == [*body, end]
    # the server said it stopped on [EOS]: that is the end appended
    assert list(_rebuild(message, body, stop_reason=EOS).ids) == [*body, EOS]
    # a stop string ended it: no stop token was generated
    said = _rebuild(message, body, stop_reason="Bye")
    assert list(said.ids) == body and FlagCode.STOP_NOT_REBUILT not in said.flag_codes
    # cut at the length limit: nothing appended
    assert list(_rebuild(message, body, finish="length").ids) == body


def test_ids_cut_inside_a_tool_call_that_finish_reason_hides_get_no_stop_token_and_are_flagged_truncated(tok: KimiTokenizer) -> None:
    # vLLM 0.15.1 says "tool_calls" for a turn cut at the length limit inside its tool section
    cut = tok.encode("Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_w")
    message = {"content": "Let me check.", "tool_calls": []}
    result = _rebuild(message, cut, server="vllm==0.15.1", finish="tool_calls", thinking=False)
    assert list(result.ids) == cut and result.source == "server_token_ids"
    (flag,) = [f for f in result.flags if f.code is FlagCode.TRUNCATED]
    assert "tool_calls" in flag.message and flag.field == "finish_reason"


def test_a_cut_message_whose_ids_end_on_a_stop_token_is_another_turns(tok: KimiTokenizer) -> None:
    ids = tok.encode("Hm.</think>Hi there<|im_end|>")
    result = _rebuild({"reasoning_content": "Hm.", "content": "Hi there"}, ids, finish="length")
    assert result.source == "rendered" and FlagCode.SERVER_TOKEN_IDS_DISAGREE in result.flag_codes


# -- ids that are not token ids --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ids",
    [[True, 5], [1.0, 5], [5, -1], [5, 10**9], ["5", 6], "5 6", [5, None]],
    ids=["bool", "float", "negative", "beyond_vocab", "string_item", "string", "null_item"],
)
def test_ids_that_are_not_token_ids_are_refused_by_name(ids: Any) -> None:
    with pytest.raises(InvalidInputError) as err:
        _rebuild({"content": "Hi"}, ids)
    assert err.value.field == "choices[0].token_ids"
    with pytest.raises(InvalidInputError) as in_batch:
        kimi_recon.reconstruct_many([_response({"content": "Hi"}, token_ids=ids)])
    assert in_batch.value.sample == 0


def test_bad_prompt_ids_beside_the_ids_are_refused_by_name(tok: KimiTokenizer) -> None:
    response = {**_response({"content": "Hi"}, token_ids=tok.encode("Hi<|im_end|>")), "prompt_token_ids": [1, -3]}
    with pytest.raises(InvalidInputError) as err:
        reconstruct_output_ids(turn_from_response(response), thinking=False)
    assert err.value.field == "prompt_token_ids"


# -- the real servers' answers, as returned ----------------------------------------------------------------------


def _as_returned(row: Mapping[str, Any], named: bool) -> tuple[str, Reconstruction]:
    response = json.loads(json.dumps(row["response"]))
    key = "response_token_ids" if row["server"].startswith("sglang") else "token_ids"
    response["choices"][0][key] = row["output_ids"]
    offset = int(row.get("history_tool_calls") or 0)
    turn = turn_from_response(response, call_index_offset=offset)
    result = reconstruct_output_ids(turn, profile=row["profile"], thinking=row["thinking"], call_index_offset=offset, server=row["server"] if named else None)
    if list(result.ids) == row["output_ids"]:
        return "exact", result
    return ("flagged" if _above_info(result) else "silent_wrong"), result


#: Rows whose ids are not used: the model wrote stray markers (a second <|close|>think<|sep|>, text before <think>)
#: and the parser dropped text around them, a loss no server profile holds yet. They are flagged, never silent.
#: Lower as the library learns more.
DISAGREE_MAX = 35


@pytest.mark.parametrize("named", [False, True])
def test_the_servers_own_answers_with_their_ids_rebuild_exactly_and_never_silently_wrong(named: bool) -> None:
    rows = [r for r in load_rows() + load_rows(SERVERS_DIR / "spaced") + load_rows(SERVERS_DIR / "stream") if r["response"] is not None]
    outcomes = [(row, *_as_returned(row, named)) for row in rows]
    assert [r["case_id"] for r, outcome, _ in outcomes if outcome == "silent_wrong"] == []
    not_used = [(r, res) for r, outcome, res in outcomes if outcome != "exact"]
    assert all(FlagCode.SERVER_TOKEN_IDS_DISAGREE in res.flag_codes and r["source"] == "official" for r, res in not_used)
    assert len(not_used) <= DISAGREE_MAX
    assert len(rows) - len(not_used) >= 2470
