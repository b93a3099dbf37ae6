"""Severity that grades the evidence (issue 37): measured on the golden responses of the real server builds.

``unlikely`` is for a loss a server could cause that nothing in the response can rule in or out and that the
model's own text rarely meets; its frequency (``servers.LOSS_SEEN``) is recomputed here from the goldens, so the
figure a flag carries is the one the data gives. Every row whose ids differ keeps a flag above ``info``, and few
exact official rows carry ``risk`` or ``loss``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from servers_measure import kimi_recon_rebuild, load_rows, loss_frequencies, measure, named_server_rebuild, one_token_loss_frequencies

from kimi_recon import reconstruct_output_ids
from kimi_recon.flags import FlagCode, Severity, severity_of
from kimi_recon.servers import LOSS_SEEN, LOSSES, ONE_ID_SEEN, _is_rare


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return load_rows()


def test_the_frequency_each_rare_loss_flag_carries_is_what_the_goldens_give(rows: list[Mapping[str, Any]]) -> None:
    measured = loss_frequencies(rows)
    for name, (hit, of, _) in LOSS_SEEN.items():
        if name in ("end_token_hidden", "k3_end_token_hidden"):
            continue  # llama.cpp's, counted on the official turns' stop tokens: tests/test_llamacpp.py
        assert measured[name] == (hit, of), name
        seen = LOSSES[name].seen_text
        assert seen is not None and seen.startswith(f"{hit} of {of} ")


def test_only_losses_no_count_can_show_are_graded_by_frequency() -> None:
    from kimi_recon.reconstruct import _COUNT_VISIBLE

    assert not set(LOSS_SEEN) & _COUNT_VISIBLE
    assert _is_rare((0, 73, "x")) and _is_rare((1, 73, "x")) and not _is_rare((2, 73, "x"))
    assert not _is_rare((0, 5, "too few to say")) and not _is_rare(None)


@pytest.mark.parametrize(("usage", "named", "known"), [(True, True, 0), (True, False, 0), (False, True, 0), (False, False, 77)])
def test_no_row_whose_ids_differ_is_left_with_only_info_flags(rows: list[Mapping[str, Any]], usage: bool, named: bool, known: int) -> None:
    """``known``: the message alone from a server nobody named, where vLLM dropped a whole call (a request without
    tools): nothing in such a response shows it, and flagging every plain answer of every unnamed source would bury
    the flags that say something (docs/servers.md); a usage count, or naming the server, flags them all."""
    outcomes = measure(rows, usage=usage, rebuild=named_server_rebuild if named else kimi_recon_rebuild)
    silent = [o for o in outcomes if o.outcome == "silent_wrong"]
    assert len(silent) == known
    assert all(o.flag_codes == () and o.server.startswith("vllm") for o in silent)


@pytest.mark.parametrize(("named", "most"), [(True, 0), (False, 22)])
def test_few_exact_official_rows_carry_risk_or_loss(rows: list[Mapping[str, Any]], named: bool, most: int) -> None:
    """With the server's usage: 0 of 518 exact official rows when the build is named (the 63 server-issued call
    ids rebuilt at the index the history gives are ``replaced_tool_call_id``, unlikely: the model numbers otherwise
    in 0 of 122 official tool-call turns), 22 (4%) when it is not: tool-call turns with thinking on and no
    reasoning, whose closed think block (K2.5 </think>, K3 <|close|>think<|sep|>...) may not be the model's, so
    the count rules out only whole calls. A loss the count
    shows hides behind one agreeing as every id counts only if the server leaves its stop out and the loss took
    one id, which 0 of 73 official K2.x and 0 of 53 K3 tool-call turns show: ``server_rare_loss``. Before the
    grading: 372 and 386; then 63 and 253; then 0 and 190; then 0 and 133; then 0 and 14 (K3's think block not
    yet seen as unsure)."""
    official = [r for r in rows if r["source"] == "official"]
    outcomes = measure(official, usage=True, rebuild=named_server_rebuild if named else kimi_recon_rebuild)
    exact = [o for o in outcomes if o.outcome == "exact"]
    graded = [o for o in exact if any(severity_of(c) >= Severity.RISK for c in o.flag_codes)]
    assert len(exact) == 518 and len(graded) <= most


def test_the_one_id_figures_the_flags_carry_are_what_the_goldens_give(rows: list[Mapping[str, Any]]) -> None:
    measured = one_token_loss_frequencies(rows, ONE_ID_SEEN)
    assert {name: (hit, of) for name, (hit, of, _) in ONE_ID_SEEN.items()} == measured


_K3_CALL = {"id": "search:0", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
_K3_TURN = {"reasoning_content": "Look.", "content": "Searching.", "tool_calls": [_K3_CALL]}


def _graded(delta: int, server: str | None = None) -> dict[str, Severity]:
    """The loss flags of a K3 tool-call turn from a server nobody named whose count is ``delta`` off the rebuilt ids."""
    n = len(reconstruct_output_ids(_K3_TURN, profile="kimi-k3", thinking=True, server="none").ids)
    flags = reconstruct_output_ids(_K3_TURN, profile="kimi-k3", thinking=True, server=server, usage={"completion_tokens": n + delta}).flags
    return {f.message.split("(")[1].split(")")[0]: f.severity for f in flags if f.code in (FlagCode.SERVER_MAY_HAVE_LOST, FlagCode.SERVER_RARE_LOSS)}


def test_a_count_that_agrees_as_every_id_counts_leaves_a_k3_loss_only_if_the_server_drops_the_stop_and_one_id() -> None:
    exact = _graded(0)
    for name in ("k3_duplicate_keys_merged", "k3_whitespace_dropped"):
        assert exact[name] is Severity.UNLIKELY, name
    flag = next(f for f in reconstruct_output_ids(_K3_TURN, profile="kimi-k3", thinking=True, usage={"completion_tokens": 10**6}).flags if "k3_whitespace_dropped" in f.message)
    assert flag.severity is Severity.RISK  # a count no convention explains settles nothing


def test_a_count_one_short_rules_out_every_loss_that_drops_ids_and_one_over_keeps_them_at_risk() -> None:
    short = _graded(-1)
    assert "k3_duplicate_keys_merged" not in short and "k3_whitespace_dropped" not in short
    over = _graded(+1)
    assert over["k3_duplicate_keys_merged"] is Severity.RISK and over["k3_whitespace_dropped"] is Severity.RISK


def test_k2_text_between_calls_is_unlikely_behind_a_count_that_agrees_as_every_id_counts() -> None:
    call = {"id": "functions.search:0", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    turn = {"reasoning_content": "Look.", "content": "Searching.", "tool_calls": [call]}
    n = len(reconstruct_output_ids(turn, thinking=True, server="none").ids)

    def graded(delta: int) -> Severity | None:
        flags = reconstruct_output_ids(turn, thinking=True, usage={"completion_tokens": n + delta}).flags
        return next((f.severity for f in flags if "(text_between_calls_dropped)" in f.message), None)

    assert graded(0) is Severity.UNLIKELY and graded(-1) is None and graded(+1) is Severity.RISK
    # no reasoning: the </think> may not be the model's, so the count settles only whole calls
    bare = {"content": "Searching.", "tool_calls": [call]}
    m = len(reconstruct_output_ids(bare, thinking=True, server="none").ids)
    flags = reconstruct_output_ids(bare, thinking=True, usage={"completion_tokens": m}).flags
    assert any("(text_between_calls_dropped)" in f.message and f.severity is Severity.RISK for f in flags)


def test_a_k3_turn_without_reasoning_keeps_its_risk_behind_any_agreeing_count() -> None:
    """Thinking on, no reasoning: the rebuild opens with a closed think block (six ids) the model may not have
    written; with those unaccounted for, a count that agrees rules out no loss but whole calls."""
    call = {"id": "search:0", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}}
    bare = {"content": "Searching.", "tool_calls": [call]}
    n = len(reconstruct_output_ids(bare, profile="kimi-k3", thinking=True, server="none").ids)
    for delta in (-1, 0, 1):
        flags = reconstruct_output_ids(bare, profile="kimi-k3", thinking=True, usage={"completion_tokens": n + delta}).flags
        assert any("(k3_whitespace_dropped)" in f.message and f.severity is Severity.RISK for f in flags), delta
