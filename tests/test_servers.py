"""Server knowledge is data: what each server build's parsers can lose is flagged on the turns it can hit,
undone where the evidence proves it (the server's own token ids, usage counted as that server counts), and
a server-issued call id is rebuilt as the id the K2.x model writes.

The expected ids are the raw text the model wrote, encoded by the tokenizer in one go (the official
encode): never the renderer's own output.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kimi_recon import KimiTokenizer, audit_record, reconstruct_output_ids, servers
from kimi_recon.errors import InvalidInputError
from kimi_recon.flags import FlagCode, Severity
from kimi_recon.models import AssistantTurn, ToolCall
from kimi_recon.profiles import PROFILES, get_profile
from kimi_recon.responses import turn_from_response
from kimi_recon.servers import KNOWN_SERVERS, LOSSES, NO_SERVER, SERVERS, UNKNOWN, ServerProfile, detect_server, get_server

CALL = "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": \"Paris\"}<|tool_call_end|><|tool_calls_section_end|>"
TOOL_CALL = {"id": "functions.get_weather:0", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}


def _response(message: dict[str, Any], *, finish: str = "tool_calls", usage: dict[str, Any] | None = None, **choice: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish, **choice}]}
    if usage is not None:
        out["usage"] = usage
    return out


def _codes(flags: Any) -> list[str]:
    return [f.code.value for f in flags]


# -- the registry -------------------------------------------------------------------------------------


def test_every_server_names_only_known_losses_and_unknown_may_lose_them_all() -> None:
    for server in SERVERS.values():
        assert server.losses <= set(LOSSES), server.name
        assert server.completion_conventions <= {"exact", "without_stop", "with_eos"}
    # Not put to an unnamed answer: the losses of any turn, and llama.cpp's own (a llama.cpp answer shows its
    # ``timings`` and is detected instead).
    any_turn = {"calls_dropped", "k3_calls_dropped", "specials_emptied", "k3_specials_emptied", "end_token_hidden", "k3_end_token_hidden"}
    llamacpp_only = {"blank_reasoning_dropped", "reasoning_unclosed", "cut_marker_dropped", "k3_cut_marker_dropped"}
    assert UNKNOWN.losses == set(LOSSES) - any_turn - llamacpp_only and UNKNOWN.completion_conventions == frozenset()
    assert NO_SERVER.losses == frozenset()


def test_server_names_resolve_to_their_build_the_newest_or_the_family() -> None:
    assert get_server("vllm") is SERVERS["vllm==0.33.0"] and get_server("SGLang") is SERVERS["sglang==0.5.23"]
    assert get_server(None) is UNKNOWN and get_server("unknown") is UNKNOWN and get_server("none") is NO_SERVER
    # a release not measured: the union of its family's losses and only the conventions every measured build shares
    later = get_server("vllm==0.22.0")
    assert later.name == "vllm==0.22.0"
    assert later.losses == SERVERS["vllm==0.15.1"].losses | SERVERS["vllm==0.33.0"].losses
    assert later.completion_conventions == {"exact"}
    assert set(KNOWN_SERVERS) >= {"vllm==0.15.1", "vllm==0.33.0", "sglang==0.5.23", "vllm", "sglang"}
    # a name the project does not know (OpenRouter's provider names) is an unknown server that keeps its name
    for name in ("Together", "Moonshot AI", "DeepInfra", "tgi"):
        named = get_server(name)
        assert named.name == name and named.losses == UNKNOWN.losses and named.completion_conventions == frozenset()
    for bad in ("", "   ", "a\x00b", "x" * 201):
        with pytest.raises(InvalidInputError) as err:
            get_server(bad)
        assert err.value.field == "server"


@given(
    family=st.sampled_from([("vllm", "vllm"), ("vLLM", "vllm"), ("SGLang", "sglang"), ("llama.cpp", "llama.cpp"), ("llama-server", "llama.cpp"), ("llamacpp", "llama.cpp")]),
    separator=st.sampled_from(["==", "=", " ", "-", "@", "/", " == "]),
    prefix=st.sampled_from(["", "v"]),
    release=st.sampled_from(["0.22.0", "0.15.1", "0.33.0", "0.5.12.post1", "0.5.23", "1.0", "0.34.0rc1"]),
)
def test_a_release_is_read_however_users_spell_it(family: tuple[str, str], separator: str, prefix: str, release: str) -> None:
    """``vLLM v0.22.0``, ``vllm 0.33.0``, ``sglang-0.5.23``, ``llama-server b11434``: the release of a known family, not an
    unknown server (which would not be put to the family's losses: a dropped call would go unflagged)."""
    spelled, name = family
    prof = get_server(f"{spelled}{separator}{prefix}{release}")
    assert prof.name == f"{name}=={release}"
    every = frozenset().union(*(b.losses for n, b in SERVERS.items() if n.startswith(f"{name}==")))
    assert prof.losses == (SERVERS[prof.name].losses if prof.name in SERVERS else every)


@pytest.mark.parametrize(("spelled", "name"), [("vLLM", "vllm==0.33.0"), ("llama-server", "llama.cpp==11434"), ("llama_cpp", "llama.cpp==11434"), ("sglang-0.5.23", "sglang==0.5.23")])
def test_a_family_is_read_however_users_spell_it(spelled: str, name: str) -> None:
    assert get_server(spelled) is SERVERS[name]


def test_a_provider_name_is_kept_in_the_reconstruction(tok: KimiTokenizer) -> None:
    turn = turn_from_response(_response({"content": "Hi"}, finish="stop"))
    assert reconstruct_output_ids(turn, tok, server="Together").server == "Together"


@pytest.mark.parametrize("name", [None, "unknown", "Together", "Moonshot AI"])
def test_an_unmeasured_name_takes_the_family_the_response_reveals_and_keeps_its_name(name: str | None) -> None:
    """SGLang dropped the whole call of this answer (its blank arguments): the response's ``matched_stop`` shows
    SGLang, whose parser does that, whatever provider name the user gave (it was left unflagged under a name)."""
    from servers_measure import load_rows

    rows = [r for r in load_rows() if r["server"] == "sglang==0.5.23" and r["loss"] == "blank_args" and r["response"] is not None]
    assert rows
    for row in rows:
        turn = turn_from_response(row["response"])
        assert not turn.tool_calls  # (the call is gone from the message)
        result = reconstruct_output_ids(turn, profile=row["profile"], thinking=row["thinking"], server=name)
        assert list(result.ids) != row["output_ids"]
        assert any(f.severity > Severity.INFO for f in result.flags), row["case_id"]
        assert result.server == (name if name not in (None, "unknown") else "sglang*")
    assert servers.named_or_detected("Together", None) is get_server("Together")
    assert servers.named_or_detected("vllm==0.33.0", "sglang*") is SERVERS["vllm==0.33.0"]  # a measured build wins


def test_a_response_reveals_its_server_only_where_a_field_or_id_style_is_its_own() -> None:
    assert detect_server(_response({"content": "x"}, matched_stop=163586)) == "sglang*"
    assert detect_server(_response({"content": "x"}, response_token_ids=[1])) == "sglang*"
    assert detect_server(_response({"content": "x"}, stop_reason=None)) == "vllm*"
    vllm_ids = _response({"tool_calls": [{**TOOL_CALL, "id": "chatcmpl-tool-8f2a9c"}]})
    assert detect_server(vllm_ids) == "vllm*"  # 0.15.1 for K2, 0.33.0 for K3: the build does not show
    family = get_server("vllm*")
    assert family.losses == SERVERS["vllm==0.15.1"].losses | SERVERS["vllm==0.33.0"].losses and family.completion_conventions == {"exact"}
    assert detect_server(_response({"content": "x"})) is None and detect_server({"content": "x"}) is None


# -- flagged: what the named or unknown server can lose -----------------------------------------------


def test_a_plain_answer_has_no_server_flag_and_a_tool_call_turn_is_flagged_for_an_unknown_server(tok: KimiTokenizer) -> None:
    # (reasoning ending in a letter: whitespace a parser stripped after it would show in the count)
    assert reconstruct_output_ids({"reasoning_content": "Hm, hello", "content": "Hi"}, tok).flags == ()
    # a named server can drop whole calls (vLLM 0.33.0 when the request offered no tools): with no usage to rule
    # that out, a plain answer is flagged too; a count that agrees rules it out
    plain = turn_from_response(_response({"reasoning_content": "Hm, hello", "content": "Hi"}, finish="stop"))
    assert any("calls_dropped" in f.message for f in reconstruct_output_ids(plain, tok, server="vllm").flags)
    n = len(tok.encode("Hm, hello</think>Hi<|im_end|>"))
    counted = turn_from_response(_response({"reasoning_content": "Hm, hello", "content": "Hi"}, finish="stop", usage={"completion_tokens": n}))
    assert reconstruct_output_ids(counted, tok, server="vllm").flags == ()


# What vLLM 0.33.0's own parser (parser/kimi_k2.py through its chat handler, scripts/servers/drive_vllm.py) returned
# for K2.x outputs no count can tell apart from the rebuild: the generated text, the message, the count.
_VLLM_033_BY_ITS_PARSER = [
    # the reasoning's trailing newline stripped on a turn without calls (".\n" is one token: the count stays)
    ("kimi-k2.5", "Thinking about it.\n</think>Answer<|im_end|>", {"reasoning_content": "Thinking about it.", "content": "Answer"}, "reasoning_end_stripped"),
    # K2-Thinking: what the model wrote before its <think> comes back at the start of the reasoning, the <think> gone
    ("kimi-k2-thinking", "\n<think>Thinking about it.</think>Answer<|im_end|>", {"reasoning_content": "\nThinking about it.", "content": "Answer"}, "think_begin_moved"),
]


@pytest.mark.parametrize(("profile", "generated", "message", "loss"), _VLLM_033_BY_ITS_PARSER)
@pytest.mark.parametrize("server", ["vllm==0.33.0", "vllm", "vllm*", "vllm==0.22.0", None, "Together"])
def test_what_vllm_033_loses_where_no_count_can_show_it_is_flagged_for_it_and_for_an_unknown_server(
    tok: KimiTokenizer, profile: str, generated: str, message: dict[str, Any], loss: str, server: str | None
) -> None:
    truth = tok.encode(generated)
    turn = turn_from_response(_response(message, finish="stop", usage={"completion_tokens": len(truth)}))
    result = reconstruct_output_ids(turn, tok, profile=profile, thinking=True, server=server)
    assert list(result.ids) != truth and len(result.ids) == len(truth)  # the count agrees: only the flag can say it
    (flag,) = [f for f in result.flags if loss in f.message]
    assert flag.field == "reasoning" and flag.severity >= Severity.UNLIKELY


@pytest.mark.parametrize("server", [None, "unknown", "Together"])
def test_a_count_one_more_than_the_rebuild_from_an_unknown_server_is_flagged(tok: KimiTokenizer, server: str | None) -> None:
    """vLLM (0.15.1 and 0.33.0 alike) returns the content "Use <|im_end|> here." with the special token emptied (a
    request without tools keeps skip_special_tokens) and counts it: one more than the rebuild, which an unknown
    server's "[EOS] counted after the stop" reading explained away."""
    truth = tok.encode("Hm</think>Use <|im_end|> here.<|im_end|>")
    message = {"reasoning_content": "Hm", "content": "Use  here."}
    result = reconstruct_output_ids(turn_from_response(_response(message, finish="stop", usage={"completion_tokens": len(truth)})), tok, thinking=True, server=server)
    assert list(result.ids) != truth and len(result.ids) + 1 == len(truth)
    (flag,) = [f for f in result.flags if "specials_emptied" in f.message]
    assert flag.severity is Severity.RISK
    # the count as the rebuild is counted: nothing to say; a named build's own convention decides by itself
    agreeing = turn_from_response(_response(message, finish="stop", usage={"completion_tokens": len(truth) - 1}))
    assert not [f for f in reconstruct_output_ids(agreeing, tok, thinking=True, server=server).flags if "specials_emptied" in f.message]
    named = reconstruct_output_ids(turn_from_response(_response(message, finish="stop", usage={"completion_tokens": len(truth)})), tok, thinking=True, server="vllm==0.33.0")
    assert FlagCode.COMPLETION_TOKENS_MISMATCH in named.flag_codes or any(f.severity >= Severity.RISK for f in named.flags)


def test_the_builds_that_keep_the_reasonings_end_carry_no_such_flag(tok: KimiTokenizer) -> None:
    # vLLM 0.15.1 and SGLang 0.5.23 return "Thinking about it.\n" as written (their parsers run over the same outputs)
    for server in ("vllm==0.15.1", "sglang==0.5.23", "none"):
        message = {"reasoning_content": "Thinking about it.", "content": "Answer"}
        assert not [f for f in reconstruct_output_ids(message, tok, thinking=True, server=server).flags if "reasoning_end_stripped" in f.message]
    flags = reconstruct_output_ids({"reasoning_content": "Hm.", "content": "Sure.", "tool_calls": [TOOL_CALL]}, tok).flags
    assert FlagCode.SERVER_MAY_HAVE_LOST in _codes(flags)
    assert all(f.severity is Severity.RISK for f in flags if f.code is FlagCode.SERVER_MAY_HAVE_LOST)
    assert reconstruct_output_ids({"reasoning_content": "Hm.", "content": "Sure.", "tool_calls": [TOOL_CALL]}, tok, server="none").flags == ()


def test_k25_reasoning_run_into_the_tool_section_is_flagged_without_usage(tok: KimiTokenizer) -> None:
    """The model wrote no </think>; the parser returns reasoning + calls, and the rebuild writes a </think>."""
    truth = tok.encode("Let me check." + CALL + "<|im_end|>")
    message = {"reasoning_content": "Let me check.", "content": None, "tool_calls": [TOOL_CALL]}
    for server in (None, "vllm==0.33.0", "sglang"):
        result = reconstruct_output_ids(turn_from_response(_response(message)), tok, server=server)
        assert result.ids != truth
        lost = [f for f in result.flags if f.code is FlagCode.SERVER_MAY_HAVE_LOST]
        assert any("think_end_inserted" in f.message and f.field == "reasoning" for f in lost), server


def test_k25_reasoning_run_into_the_tool_section_is_undone_by_usage_counted_as_the_server_counts(tok: KimiTokenizer) -> None:
    truth = tok.encode("Let me check." + CALL + "<|im_end|>")
    message = {"reasoning_content": "Let me check.", "content": None, "tool_calls": [TOOL_CALL]}
    response = _response(message, usage={"prompt_tokens": 10, "completion_tokens": len(truth), "total_tokens": 10 + len(truth)})
    result = reconstruct_output_ids(turn_from_response(response), tok, server="vllm==0.33.0")
    assert result.ids == truth and "</think>" not in result.text
    assert FlagCode.THINK_END_OMITTED in _codes(result.flags)
    # the same count from an unknown server could be "without the stop token": not decided, flagged
    unknown = reconstruct_output_ids(turn_from_response(response), tok)
    assert FlagCode.THINK_END_OMITTED not in _codes(unknown.flags) and FlagCode.SERVER_MAY_HAVE_LOST in _codes(unknown.flags)


def test_a_count_that_agrees_under_the_servers_convention_rules_out_the_losses_that_change_it(tok: KimiTokenizer) -> None:
    truth = tok.encode("Let me check.</think>" + CALL + "<|im_end|>")
    message = {"reasoning_content": "Let me check.", "content": None, "tool_calls": [TOOL_CALL]}
    usage = {"prompt_tokens": 10, "completion_tokens": len(truth)}
    result = reconstruct_output_ids(turn_from_response(_response(message, usage=usage)), tok, server="vllm")
    assert result.ids == truth
    kept = [f.message for f in result.flags if f.code in (FlagCode.SERVER_MAY_HAVE_LOST, FlagCode.SERVER_RARE_LOSS)]
    assert not any("think_end_inserted" in m or "blank_content_nulled" in m for m in kept)
    # a stripped space can merge into a token: the count cannot tell; the model rarely writes one there
    (rare,) = [f for f in result.flags if "whitespace_stripped" in f.message]
    assert rare.code is FlagCode.SERVER_RARE_LOSS and rare.severity is Severity.UNLIKELY and rare.seen == "0 of 73 official K2.x tool-call turns"


def test_whitespace_only_content_the_parser_nulled_is_a_count_mismatch_when_the_server_is_named(tok: KimiTokenizer) -> None:
    truth = tok.encode("Let me check.</think>\n" + CALL + "<|im_end|>")
    message = {"reasoning_content": "Let me check.", "content": None, "tool_calls": [TOOL_CALL]}
    record = {"response": _response(message, usage={"completion_tokens": len(truth)}), "reference_ids": truth, "server": "sglang==0.5.23"}
    result = audit_record(record)
    assert not result.comparison.exact  # type: ignore[union-attr]
    assert result.server == "sglang==0.5.23"
    assert {"completion_tokens_mismatch", "server_may_have_lost"} <= set(_codes(result.flags))


# -- the server's own ids ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where",
    [
        {"token_ids": None},  # vLLM return_token_ids
        {"response_token_ids": None},  # SGLang return_token_ids
        {"sglext": {"output_ids": None}},  # SGLang return_output_ids_in_sglext
    ],
)
def test_the_servers_generated_ids_are_used_and_the_loss_located(tok: KimiTokenizer, where: dict[str, Any]) -> None:
    truth = tok.encode("Let me check.</think>\n" + CALL + "<|im_end|>")
    message = {"reasoning_content": "Let me check.", "content": None, "tool_calls": [TOOL_CALL]}
    key = next(iter(where))
    choice = {key: truth} if key != "sglext" else {"sglext": {"output_ids": [truth]}}
    result = reconstruct_output_ids(turn_from_response(_response(message, **choice)), tok)
    assert result.ids == truth and result.source == "server_token_ids"
    (used,) = [f for f in result.flags if f.code is FlagCode.SERVER_TOKEN_IDS_USED]
    assert used.severity is Severity.INFO and "first difference at index" in used.message
    assert FlagCode.SERVER_MAY_HAVE_LOST not in _codes(result.flags)


def test_server_ids_without_the_stop_token_get_it_and_bad_ids_are_refused_by_name(tok: KimiTokenizer) -> None:
    truth = tok.encode("Hm.</think>Hi<|im_end|>")
    message = {"reasoning_content": "Hm.", "content": "Hi"}
    result = reconstruct_output_ids(turn_from_response(_response(message, finish="stop", token_ids=truth[:-1])), tok)
    assert result.ids == truth and "appended" in result.flags[0].message
    with pytest.raises(InvalidInputError, match="outside the vocabulary") as err:  # (it was rendered, flagged unusable)
        reconstruct_output_ids(turn_from_response(_response(message, finish="stop", token_ids=[10**9])), tok)
    assert err.value.field == "choices[0].token_ids"
    empty = reconstruct_output_ids(turn_from_response(_response(message, finish="stop", token_ids=[])), tok)
    assert empty.source == "rendered" and empty.flags[0].code is FlagCode.SERVER_TOKEN_IDS_UNUSABLE


# -- tool-call ids (issue 21) ------------------------------------------------------------------------


def test_a_server_issued_call_id_is_rebuilt_as_the_models_own_at_the_index_said(tok: KimiTokenizer) -> None:
    truth = tok.encode("Hm.</think>" + CALL.replace(":0", ":2") + "<|im_end|>")
    message = {"reasoning_content": "Hm.", "tool_calls": [{**TOOL_CALL, "id": "call_8f2"}]}
    result = reconstruct_output_ids(message, tok, call_index_offset=2, server="none")
    assert result.ids == truth
    (flag,) = result.flags
    assert flag.code is FlagCode.REPLACED_TOOL_CALL_ID and flag.severity is Severity.UNLIKELY and "call_8f2" in flag.message
    assert flag.seen is not None and flag.seen.startswith("0 of 122 ")
    assert flag.field == "tool_calls[0].id"


# -- empty turns and pinned counting -----------------------------------------------------------------


def test_a_generation_of_only_the_stop_token_is_an_exact_empty_turn(tok: KimiTokenizer) -> None:
    turn = turn_from_response(_response({"content": ""}, finish="stop", usage={"completion_tokens": 1}))
    result = reconstruct_output_ids(turn, tok, thinking=False, server="vllm")
    assert result.ids == tok.encode("<|im_end|>") and result.flags == ()


def test_an_empty_message_whose_usage_says_more_was_generated_is_a_loss(tok: KimiTokenizer) -> None:
    response = _response({"content": None}, finish="stop", usage={"completion_tokens": 7})
    record = {"response": response, "reference_ids": tok.encode("<|im_end|>"), "thinking": False}
    for server in ("vllm", None):
        result = audit_record(record, server=server)
        assert result.ok and "completion_tokens_mismatch" in _codes(result.flags)
        assert max(f.severity for f in result.flags) is Severity.LOSS


def test_a_named_servers_convention_is_pinned_so_a_count_one_short_is_a_mismatch(tok: KimiTokenizer) -> None:
    ids = tok.encode("Hm.</think>Hi<|im_end|>")
    record = {"response": _response({"reasoning_content": "Hm.", "content": "Hi"}, finish="stop", usage={"completion_tokens": len(ids) - 1}), "reference_ids": ids}
    assert "completion_tokens_mismatch" not in _codes(audit_record(record).flags)  # unknown: without the stop token
    pinned = audit_record(record, server="vllm==0.33.0")
    assert "completion_tokens_mismatch" in _codes(pinned.flags)
    assert audit_record({**record, "server": "sglang"}).server == "sglang==0.5.23"


# -- the options reach every door ----------------------------------------------------------------------


def test_generate_can_ask_a_self_hosted_server_for_its_token_ids() -> None:
    from kimi_recon.openrouter.options import RequestOptions, request_kwargs
    from kimi_recon.openrouter.prompts import Prompt

    prompt = Prompt(id="p", messages=({"role": "user", "content": "Hi"},), tools=None, line=1)
    assert "return_token_ids" not in request_kwargs(prompt, RequestOptions(model="m"))["extra_body"]
    assert request_kwargs(prompt, RequestOptions(model="m", return_token_ids=True))["extra_body"]["return_token_ids"] is True


def test_the_cli_server_option_names_the_server_in_every_audit_record(tmp_path: Any, tok: KimiTokenizer) -> None:
    import json

    from kimi_recon.cli import main

    ids = tok.encode("Hm.</think>Hi<|im_end|>")
    record = {"response": _response({"reasoning_content": "Hm.", "content": "Hi"}, finish="stop", usage={"completion_tokens": len(ids) - 1}), "reference_ids": ids[:-1]}
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps(record) + "\n", encoding="utf-8")
    out = tmp_path / "report.json"
    main(["audit", str(src), "--server", "vllm", "--json", str(out)])
    report = json.loads(out.read_text(encoding="utf-8"))
    (worst,) = report["worst"]
    assert worst["server"] == "vllm==0.33.0" and "completion_tokens_mismatch" in [f["code"] for f in worst["flags"]]
    # a server the project does not know is read as an unknown server, its name kept
    main(["audit", str(src), "--server", "tgi", "--json", str(out)])
    assert json.loads(out.read_text(encoding="utf-8"))["worst"][0]["server"] == "tgi"


# -- the hot path's shortcut: a turn without tool calls is not put to the shape tests that need them -----

_FIELD = st.one_of(st.none(), st.just(""), st.just(" "), st.just("\n"), st.text(max_size=6))
_ARGS = st.sampled_from(["", "{}", "{ }", '{"a": 1}', "[1]", "x", '{"b": "c"}'])
_TURNS = st.builds(
    AssistantTurn,
    reasoning=_FIELD,
    content=_FIELD,
    tool_calls=st.lists(st.builds(ToolCall, st.none() | st.just("call_1"), st.just("f"), _ARGS), max_size=3).map(tuple),
    finish_reason=st.sampled_from([None, "stop", "length", "tool_calls"]),
)
_SERVERS = [*SERVERS.values(), UNKNOWN, NO_SERVER, get_server("vllm*"), get_server("sglang*")]


@given(_TURNS.filter(lambda t: not t.tool_calls), st.sampled_from(["kimi-k2.5", "kimi-k2-instruct", "kimi-k3"]), st.booleans())
def test_the_shape_tests_a_turn_without_tool_calls_skips_find_nothing_on_it(turn: AssistantTurn, profile: str, thinking: bool) -> None:
    assert servers._NEEDS_CALLS  # (the shortcut is there to check)
    for applies in servers._NEEDS_CALLS:
        assert not applies(turn, get_profile(profile), thinking)


@given(_TURNS, st.sampled_from(sorted(PROFILES)), st.booleans())
def test_the_shape_tests_a_thinking_mode_skips_find_nothing_under_it(turn: AssistantTurn, profile: str, thinking: bool) -> None:
    prof = get_profile(profile)
    assert servers._NEEDS_THINKING  # (the shortcut is there to check)
    for applies, styles in servers._NEEDS_THINKING.items():
        if not (thinking and prof.thinking_style in styles):
            assert not applies(turn, prof, thinking), applies.__name__


@given(_TURNS, st.sampled_from(sorted(PROFILES)), st.booleans())
def test_the_shape_tests_answered_once_per_server_answer_so_on_every_turn(turn: AssistantTurn, profile: str, thinking: bool) -> None:
    assert servers._ANSWERED_BY_CALLS
    for applies, (with_calls, without) in servers._ANSWERED_BY_CALLS.items():
        assert tuple(applies(turn, get_profile(profile), thinking)) == (with_calls if turn.tool_calls else without), applies.__name__


@given(_TURNS, st.sampled_from(sorted(PROFILES)), st.booleans(), st.sampled_from(_SERVERS))
def test_losses_of_shape_are_every_loss_of_the_servers_format_whose_test_finds_fields(
    turn: AssistantTurn, profile: str, thinking: bool, server: ServerProfile
) -> None:
    prof = get_profile(profile)
    every_loss = [
        (name, tuple(fields))
        for name in sorted(server.losses)
        if LOSSES[name].format == prof.format and name not in ("ids_rebuilt", "ids_renumbered") and (fields := LOSSES[name].applies(turn, prof, thinking))
    ]
    got = servers.losses_of_shape(turn, prof, thinking, server)
    assert [name for name, _ in got] == [name for name, _ in every_loss]
    assert [flag.field for _, flag in got] == [fields[0] for _, fields in every_loss]
    assert all(", ".join(fields) in flag.message for (_, flag), (_, fields) in zip(got, every_loss, strict=True))


_SPACES = st.text(alphabet=st.sampled_from(" \t\n\r\x0b\x0c\x1c\x85\xa0\u2028\u3000a"), max_size=4)
_BLANKISH = st.builds(
    AssistantTurn,
    reasoning=st.none() | _SPACES,
    content=st.none() | _SPACES,
    tool_calls=st.lists(st.builds(ToolCall, st.none(), st.just("f"), _ARGS), max_size=2).map(tuple),
    finish_reason=st.sampled_from([None, "stop", "length"]),
)


@given(_BLANKISH, st.sampled_from(["kimi-k2.5", "kimi-k2-instruct", "kimi-k3"]), st.booleans())
def test_the_shape_tests_read_blank_and_space_edged_fields_as_the_strip_and_generator_spelling_did(turn: AssistantTurn, profile: str, thinking: bool) -> None:
    # the spelling before the hot path's rewrite (copies of the text, a generator per turn), as the reference
    prof = get_profile(profile)
    blank_content = not (turn.content or "").strip()
    opened = thinking and prof.thinking_style == "prompt_opens"
    assert servers._no_content_before_calls(turn, prof, thinking) == (("content",) if turn.tool_calls and blank_content else ())
    assert servers._content_empty(turn, prof, thinking) == (("content",) if not turn.tool_calls and blank_content and not turn.truncated else ())
    assert servers._reasoning_into_calls(turn, prof, thinking) == (
        ("reasoning",) if opened and turn.tool_calls and bool(turn.reasoning) and blank_content else ()
    )
    edged = tuple(n for n, t in (("reasoning", turn.reasoning), ("content", turn.content)) if t and (t[0] == " " or t[-1] == " "))
    assert tuple(servers._boundary_space(turn, prof, thinking)) == edged


@given(st.text(alphabet=st.sampled_from(" {}\ta"), max_size=6) | st.text(max_size=5))
def test_blank_object_arguments_are_those_without_spaces_equal_to_an_empty_object(text: str) -> None:
    blank = text.replace(" ", "") in ("{}", "")
    turn = AssistantTurn(tool_calls=(ToolCall(None, "f", '{"a": 1}'), ToolCall(None, "g", text)))
    assert servers._empty_object_arguments(turn, get_profile("kimi-k2.5"), True) == (("tool_calls[1].function.arguments",) if blank else ())


@pytest.mark.parametrize(
    ("choice", "end", "flagged"),
    [
        ({}, "<|im_end|>", False),
        ({"stop_reason": 163586}, "<|im_end|>", False),
        ({"stop_reason": 163585}, "[EOS]", False),
        ({"matched_stop": 163585}, "[EOS]", False),
        ({"stop_reason": "END"}, "<|im_end|>", True),
        ({"matched_stop": 163593}, "<|im_end|>", True),
    ],
)
def test_the_end_a_server_says_is_the_end_written_or_flagged(tok: KimiTokenizer, choice: dict[str, Any], end: str, flagged: bool) -> None:
    """vLLM's ``stop_reason`` and SGLang's ``matched_stop`` were ignored: a turn that ended on ``[EOS]`` or a stop
    string was given ``<|im_end|>`` with no flag (issue 35)."""
    response = {"choices": [{"message": {"role": "assistant", "content": "Hi", "reasoning_content": "Hm."}, "finish_reason": "stop", **choice}]}
    result = reconstruct_output_ids(turn_from_response(response), tok)
    assert result.ids == tok.encode("Hm.</think>Hi" + end, allowed_special="all")
    assert (FlagCode.STOP_NOT_REBUILT in [f.code for f in result.flags]) is flagged
