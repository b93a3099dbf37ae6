"""A flag names what it is about: a call id the rebuild wrote or a server rebuilt gets its own code (issue 37).

The K2.x model numbers its calls across the conversation (``functions.NAME:IDX``, IDX = the calls before the turn
plus the call's position). A server-issued id (``call_…``) is rebuilt at that index: ``replaced_tool_call_id``
(unlikely, with how often the model numbers otherwise) when the calls before the turn were said or counted,
``tool_call_index_assumed`` (risk) when nothing said how many came before. A server that writes the ids itself
(SGLang) is checked against that numbering: ``server_rebuilt_tool_call_id`` (unlikely) or
``tool_call_index_disagrees`` (risk).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from servers_measure import load_rows, named_server_rebuild

from kimi_recon import KimiTokenizer, reconstruct_many, reconstruct_output_ids
from kimi_recon._tool_call_ids import MODEL_NUMBERING_SEEN
from kimi_recon.dataset import reconstruct_record
from kimi_recon.flags import FlagCode, Severity
from kimi_recon.models import AssistantTurn, ToolCall
from kimi_recon.profiles import get_profile
from kimi_recon.servers import get_server, rebuilt_call_id_flags

GOLDEN = Path(__file__).parent / "data" / "golden" / "official-k2.5-dev"


def _message(call_id: str, name: str = "search") -> dict[str, Any]:
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"q": "x"}'}}
    return {"reasoning_content": "Look it up.", "content": None, "tool_calls": [call]}


def _official_numbering() -> tuple[int, int]:
    """(tool-call turns whose ids are not calls-before + position, tool-call turns) in the official dev turns,
    counted here from the goldens' messages and turns, not by the library."""
    otherwise = turns = 0
    for name in ("turns.jsonl", "turns_adversarial.jsonl"):
        for line in (GOLDEN / name).read_text(encoding="utf-8").splitlines():
            case = json.loads(line)
            ids = [call["id"] for call in case["turn"].get("tool_calls") or []]
            if not ids:
                continue
            turns += 1
            before = sum(len(m.get("tool_calls") or []) for m in case["messages"] if m.get("role") == "assistant")
            found = [re.fullmatch(r"functions\.(.+):(\d+)", i) for i in ids]
            if not all(f is not None and int(f.group(2)) == before + k for k, f in enumerate(found)):
                otherwise += 1
    return otherwise, turns


def test_how_often_the_model_numbers_otherwise_is_recounted_from_the_official_turns(tok: KimiTokenizer) -> None:
    otherwise, turns = _official_numbering()
    assert turns > 100  # the goldens hold enough tool-call turns to say "rarely"
    assert MODEL_NUMBERING_SEEN[:2] == (otherwise, turns)
    (flag,) = reconstruct_output_ids(_message("call_8f2"), tok, call_index_offset=0, server="none").flags
    assert flag.seen is not None and flag.seen.startswith(f"{otherwise} of {turns} official K2.x tool-call turns")


def test_a_replaced_id_at_the_index_said_is_unlikely_and_says_how_often(tok: KimiTokenizer) -> None:
    result = reconstruct_output_ids(_message("call_8f2"), tok, call_index_offset=3, server="none")
    assert "functions.search:3" in result.text
    (flag,) = result.flags
    assert (flag.code, flag.severity, flag.field) == (FlagCode.REPLACED_TOOL_CALL_ID, Severity.UNLIKELY, "tool_calls[0].id")
    assert "call_8f2" in flag.message and "3 calls before" in flag.message


def test_a_replaced_id_whose_index_nobody_said_is_an_assumed_index_at_risk(tok: KimiTokenizer) -> None:
    result = reconstruct_output_ids(_message("call_8f2"), tok, server="none")
    assert "functions.search:0" in result.text
    (flag,) = result.flags
    assert (flag.code, flag.severity, flag.field) == (FlagCode.TOOL_CALL_INDEX_ASSUMED, Severity.RISK, "tool_calls[0].id")
    assert "call_index_offset" in flag.message and flag.seen is None
    (many,) = reconstruct_many([_message("call_8f2")], tok, server="none")
    assert [f.code for f in many.flags] == [FlagCode.TOOL_CALL_INDEX_ASSUMED]
    # an id the model wrote needs no index at all
    assert reconstruct_output_ids(_message("functions.search:0"), tok, server="none").flags == ()


def test_a_record_counts_the_calls_of_its_messages_else_the_index_is_assumed(tok: KimiTokenizer) -> None:
    earlier = {"role": "assistant", "content": None, "tool_calls": [_message("functions.a:0")["tool_calls"][0], _message("functions.b:1")["tool_calls"][0]]}
    messages = [{"role": "user", "content": "Hi"}, earlier, {"role": "tool", "tool_call_id": "functions.b:1", "content": "r"}]
    base = {"id": "r", "response": {"choices": [{"message": _message("call_x"), "finish_reason": "tool_calls"}]}, "server": "none"}
    counted = reconstruct_record({**base, "messages": messages}, tok)
    assert [f.code for f in counted.flags] == [FlagCode.REPLACED_TOOL_CALL_ID]
    assert "functions.search:2" in counted.text
    said = reconstruct_record({**base, "call_index_offset": 5}, tok)
    assert [f.code for f in said.flags] == [FlagCode.REPLACED_TOOL_CALL_ID] and "functions.search:5" in said.text
    unsaid = reconstruct_record(base, tok)
    assert [f.code for f in unsaid.flags] == [FlagCode.TOOL_CALL_INDEX_ASSUMED] and "functions.search:0" in unsaid.text


@pytest.mark.parametrize("server", ["sglang==0.5.23", "sglang", "sglang*", None])
def test_ids_a_server_may_have_written_itself_are_checked_against_the_models_numbering(tok: KimiTokenizer, server: str | None) -> None:
    def codes(call_id: str) -> dict[FlagCode, Any]:
        flags = reconstruct_output_ids(_message(call_id), tok, call_index_offset=1, server=server).flags
        return {f.code: f for f in flags if f.code in (FlagCode.SERVER_REBUILT_TOOL_CALL_ID, FlagCode.TOOL_CALL_INDEX_DISAGREES)}

    (agreeing,) = codes("functions.search:1").values()
    assert agreeing.code is FlagCode.SERVER_REBUILT_TOOL_CALL_ID and agreeing.severity is Severity.UNLIKELY
    assert agreeing.seen is not None and agreeing.field == "tool_calls"
    # SGLang 0.5.12.post1 counts the history twice: the id says 3 where the model's numbering gives 1
    (off,) = codes("functions.search:3").values()
    assert off.code is FlagCode.TOOL_CALL_INDEX_DISAGREES and off.severity is Severity.RISK
    assert off.field == "tool_calls[0].id" and "3" in off.message and "1" in off.message


@pytest.mark.parametrize("server", ["vllm==0.33.0", "vllm==0.15.1", "none"])
def test_a_server_that_keeps_the_models_ids_gets_no_call_id_flag(tok: KimiTokenizer, server: str) -> None:
    for call_id in ("functions.search:1", "functions.search:3"):
        flags = reconstruct_output_ids(_message(call_id), tok, call_index_offset=1, server=server).flags
        assert not {f.code for f in flags} & {FlagCode.SERVER_REBUILT_TOOL_CALL_ID, FlagCode.TOOL_CALL_INDEX_DISAGREES}


def test_every_sglang_k2_tool_call_row_names_its_rebuilt_call_ids() -> None:
    """Before, the blanket ``server_may_have_lost`` was the only flag such a row had about its call ids."""
    rows = [
        r
        for r in load_rows()
        if r["server"].startswith("sglang") and r["profile"] != "kimi-k3" and r.get("response") is not None
        and (r["response"]["choices"][0]["message"].get("tool_calls") or [])
    ]
    assert len(rows) > 50
    for row in rows:
        _, codes = named_server_rebuild(row, True)
        assert "server_rebuilt_tool_call_id" in codes or "tool_call_index_disagrees" in codes, row["case_id"]


# -- the server-written ids, read against the model's numbering, whatever their spelling --------------------------

_NAMES = st.sampled_from(["search", "get.weather", "a:b"])
_IDS = st.one_of(
    st.none(),
    st.just("call_1"),
    st.builds(lambda name, index: f"functions.{name}:{index}", _NAMES, st.sampled_from(["0", "1", "2", "3", "01", "\u0661", "x"])),
)


@given(st.lists(st.tuples(_IDS, _NAMES), min_size=1, max_size=4), st.none() | st.integers(0, 2), st.sets(st.integers(0, 3)))
def test_a_server_written_id_agrees_when_its_index_is_the_models_numbering(
    calls: list[tuple[str | None, str]], offset: int | None, replaced: set[int]
) -> None:
    turn = AssistantTurn(
        tool_calls=tuple(ToolCall(call_id, name, "{}") for call_id, name in calls),
        metadata={"replaced_tool_call_ids": [{"index": i} for i in sorted(replaced)]},
    )
    agreeing: list[tuple[int, str]] = []
    disagreeing: list[tuple[int, str]] = []
    for i, (call_id, _name) in enumerate(calls):  # the spec: the index the id spells (any digits), the name aside
        if call_id is None or i in replaced:
            continue
        found = re.fullmatch(r"functions\.(.+):(\d+)", call_id)
        if found is not None:
            (agreeing if int(found.group(2)) == (offset or 0) + i else disagreeing).append((i, call_id))
    flags = rebuilt_call_id_flags(turn, get_profile("kimi-k2.5"), get_server("sglang"), offset)
    assert [f.field for f in flags if f.code is FlagCode.TOOL_CALL_INDEX_DISAGREES] == [f"tool_calls[{i}].id" for i, _ in disagreeing]
    rebuilt = [f for f in flags if f.code is FlagCode.SERVER_REBUILT_TOOL_CALL_ID]
    assert len(rebuilt) == (1 if agreeing else 0)
    if agreeing:
        assert rebuilt[0].message.count("functions.") == len(agreeing)
        assert all(repr(call_id) in rebuilt[0].message for _, call_id in agreeing)
