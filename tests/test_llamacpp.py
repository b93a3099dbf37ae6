"""llama.cpp's llama-server: its answers read as the server's own ids, its losses as data, and a live run.

The golden answers (tests/data/llama.cpp/, written by scripts/llamacpp/conformance.py from a real llama-server
built from the pinned sdist, a tiny Kimi GGUF) carry the ids each answer generated (``__verbose.tokens``). The live
tests start that server on 127.0.0.1: under CI they fail when it cannot be built or started (CI=true), elsewhere
they skip when the binary is not cached (scripts/llamacpp/build_server.sh builds it).
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kimi_recon
from kimi_recon.errors import LogprobsError
from kimi_recon.logprobs import ids_from_logprobs
from kimi_recon.servers import SERVERS, detect_server, get_server
from kimi_recon.tokenizer import load_tokenizer

sys.path.insert(0, str(Path(__file__).parent))
import llamacpp_measure as measure

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts" / "llamacpp"
IM_END, EOT, THINK_END = 163586, 163593, 163607


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return measure.load_rows()


# -- the golden answers, rechecked ------------------------------------------------------------------------


def test_goldens_cover_every_turn_shape(rows: list[dict[str, Any]]) -> None:
    ids = {r["case_id"] for r in rows}
    for part in ("tools-required", "tools-auto", "think=True", "think=False", "grammar/reasoning_into_tools", "grammar/ws_reasoning", "/cut/", "kimi-k3/", "-random/"):
        assert any(part in i for i in ids), part
    assert {r["stream"] for r in rows} == {True, False}
    with_truth = [r for r in rows if not r["stream"] and r["status"] == 200]
    assert len(with_truth) >= 60 and all(r["true_ids"] for r in with_truth)


@pytest.mark.parametrize("named", [False, True])
def test_no_silent_wrong_ids_from_the_message_alone(rows: list[dict[str, Any]], named: bool) -> None:
    got = measure.measure(rows, as_returned=False, server_named=named)
    assert [o.case_id for o in got if o.outcome in ("silent_wrong", "refused")] == []


@pytest.mark.parametrize("named", [False, True])
def test_every_non_streamed_answer_as_returned_gives_its_exact_ids(rows: list[dict[str, Any]], named: bool) -> None:
    got = {o.case_id: o for o in measure.measure(rows, as_returned=True, server_named=named)}
    assert [o.case_id for o in got.values() if o.outcome == "silent_wrong"] == []
    for row in rows:
        if not row["stream"] and row["status"] == 200:
            assert got[row["case_id"]].outcome in ("exact", "exact_flagged"), row["case_id"]
            assert "server_token_ids_used" in got[row["case_id"]].flag_codes


# -- reading llama.cpp's answers ----------------------------------------------------------------------------


def _answer(**extra: Any) -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": " Sunny."}}],
        "usage": {"completion_tokens": 4, "prompt_tokens": 9},
        "timings": {"prompt_n": 9, "predicted_n": 4},
        **extra,
    }


def test_llamacpp_is_known_with_its_ids_field_and_exact_count() -> None:
    prof = get_server("llama.cpp")
    assert prof is SERVERS["llama.cpp==11434"]
    assert prof.token_ids_fields == ("__verbose.tokens",) and prof.completion_conventions == {"exact"}
    assert {"end_token_hidden", "reasoning_unclosed", "blank_reasoning_dropped", "specials_emptied"} <= prof.losses


def test_the_end_token_frequency_is_the_official_turns_stop_tokens() -> None:
    from kimi_recon.servers import LOSS_SEEN, LOSSES

    golden = Path(__file__).parent / "data" / "golden"
    for name, folder in (("end_token_hidden", "official-k2.5-dev"), ("k3_end_token_hidden", "official-k3-dev")):
        turns = [json.loads(line) for line in (golden / folder / "turns.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
        other_end = sum(1 for t in turns if t["output_ids"][-1] != IM_END)  # 163586 is <|end_of_msg|> in K3
        assert LOSS_SEEN[name][:2] == (other_end, len(turns)), name
        assert LOSSES[name].seen_text is not None


def test_timings_reveal_llamacpp_and_other_answers_do_not() -> None:
    assert detect_server(_answer()) == "llama.cpp*"
    plain = _answer()
    del plain["timings"]
    assert detect_server(plain) is None


def test_verbose_tokens_are_read_as_the_servers_ids_with_no_stop_appended() -> None:
    # The model stopped on [EOT], not <|im_end|>: the server's list is taken as generated.
    tok = load_tokenizer()
    ids = [*tok.encode(" Sunny."), EOT]
    turn = kimi_recon.turn_from_response(_answer(__verbose={"tokens": ids}))
    recon = kimi_recon.reconstruct_output_ids(turn, thinking=False, server="llama.cpp")
    assert list(recon.ids) == ids and recon.source == "server_token_ids"


def test_from_the_message_alone_a_llamacpp_stop_is_flagged_as_unknown() -> None:
    turn = kimi_recon.turn_from_response(_answer())
    recon = kimi_recon.reconstruct_output_ids(turn, thinking=False)  # detected by its timings
    assert list(recon.ids)[-1] == IM_END
    assert any("end_token_hidden" in f.message for f in recon.flags)


@pytest.mark.parametrize("wrote_think_end", [False, True])
def test_the_count_decides_whether_unclosed_reasoning_had_its_think_end(wrote_think_end: bool) -> None:
    # llama.cpp returns reasoning as reasoning whether or not the model wrote </think>; its count is exact.
    tok = load_tokenizer()
    reasoning = tok.encode(" still thinking")
    truth = [*reasoning, *([THINK_END] if wrote_think_end else []), IM_END]
    answer = _answer(usage={"completion_tokens": len(truth), "prompt_tokens": 9})
    answer["choices"][0]["message"] = {"role": "assistant", "content": "", "reasoning_content": " still thinking"}
    recon = kimi_recon.reconstruct_output_ids(kimi_recon.turn_from_response(answer), thinking=True, server="llama.cpp")
    assert list(recon.ids) == truth
    codes = [f.code.value for f in recon.flags]
    assert ("think_end_omitted" in codes) is not wrote_think_end
    assert "server_may_have_lost" not in codes


def test_logprob_entries_are_read_by_their_id_and_a_merged_utf8_entry_is_refused() -> None:
    tok = load_tokenizer()
    tian = tok.encode("天")
    assert len(tian) == 1
    entries = [{"id": 220, "token": " ", "bytes": [32]}, {"id": tian[0], "token": "天", "bytes": list("天".encode())}, {"id": IM_END, "token": "", "bytes": []}]
    assert ids_from_logprobs(entries, tok) == [220, tian[0], IM_END]
    # llama.cpp merges a token ending inside a UTF-8 character into the next entry: the id then spells less.
    two = tok.encode(" 天气 ✓")
    merged = [{"id": two[-1], "token": "✓", "bytes": list(" ✓".encode())}]
    if tok.decode_bytes([two[-1]]) != " ✓".encode():
        with pytest.raises(LogprobsError) as err:
            ids_from_logprobs(merged, tok)
        assert "merged" in err.value.message


# -- the live server ----------------------------------------------------------------------------------------


def _script(name: str) -> Any:
    """A module of scripts/llamacpp (not a package: put on the path, as its scripts do)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module(name)


def _live_server_available() -> bool:
    return bool((_script("server").cache_dir() / "bin" / "llama-server").exists())


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not _live_server_available():
        if os.environ.get("CI") == "true":
            pytest.fail("llama-server is not built: .ci/run runs scripts/llamacpp/build_server.sh first")
        pytest.skip("llama-server not built (bash scripts/llamacpp/build_server.sh)")
    llama = _script("server")
    srv = llama.start(llama.gguf("kimi-k2.5"), tmp_path_factory.mktemp("llama") / "server.log")
    try:
        yield srv
    finally:
        llama.stop(srv)


def test_live_answers_rebuild_to_the_ids_the_server_generated(live: Any) -> None:
    conformance, llama = _script("conformance"), _script("server")
    checked = 0
    for case_id, profile, thinking, body in conformance.cases():
        if profile != "kimi-k2.5" or checked >= 12:
            continue
        status, answer = llama.post(live, "/v1/chat/completions", {**body, "stream": False})
        if status != 200:
            continue
        truth = answer["__verbose"]["tokens"]
        turn = kimi_recon.turn_from_response(answer)
        recon = kimi_recon.reconstruct_output_ids(turn, profile=profile, thinking=thinking, server="llama.cpp")
        assert list(recon.ids) == truth, case_id
        alone = {k: v for k, v in answer.items() if k != "__verbose"}
        alone["choices"] = [{k: v for k, v in c.items() if k != "logprobs"} for c in answer["choices"]]
        from_message = kimi_recon.reconstruct_output_ids(kimi_recon.turn_from_response(alone), profile=profile, thinking=thinking)
        assert list(from_message.ids) == truth or from_message.flags, case_id
        checked += 1
    assert checked >= 10


# -- kimi-recon generate --base-url against the running llama-server ------------------------------------------


def _prompts(path: Path, n: int) -> None:
    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
    lines = []
    for i in range(n):
        prompt: dict[str, Any] = {"id": f"p{i}", "messages": [{"role": "user", "content": f"Weather in city {i}?"}]}
        if i % 2:
            prompt["tools"] = [weather]
        lines.append(json.dumps(prompt))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _generate(live: Any, prompts: Path, log: Path, *extra: str) -> subprocess.Popen[str]:
    # A local server needs no OpenRouter key: none is passed.
    env = {k: v for k, v in os.environ.items() if k != "OPENROUTER_API_KEY"}
    cmd = [
        sys.executable, "-m", "kimi_recon", "generate", str(prompts), "-o", str(log), "--base-url", f"{live.base_url}/v1",
        "--server", "llama.cpp", "--max-tokens", "40", "--seed", "1", "--concurrency", "1", "-q", *extra,
    ]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _rows(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_generate_against_llamacpp_rebuilds_the_servers_ids_resumes_streams_and_exports(live: Any, tmp_path: Path) -> None:
    prompts, log = tmp_path / "prompts.jsonl", tmp_path / "log.jsonl"
    _prompts(prompts, 40)
    # Killed after its first rows: the rerun sends only what is missing, one row per prompt in the end.
    proc = _generate(live, prompts, log, "--return-token-ids", "--logprobs", "--top-logprobs", "1", "--training-sample")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not log.exists() or log.read_bytes().count(b"\n") < 3) and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # (a row cut by the kill is not counted: the rerun mends it)
    done_before = {json.loads(line)["id"] for line in log.read_text(encoding="utf-8").split("\n")[:-1] if line.strip()}
    rerun = _generate(live, prompts, log, "--return-token-ids", "--logprobs", "--top-logprobs", "1", "--training-sample")
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    rows = _rows(log)
    assert sorted(r["id"] for r in rows) == sorted(f"p{i}" for i in range(40)) and 0 < len(done_before) < 40
    ok = [r for r in rows if r["status"] == "ok"]
    assert len(ok) >= 30
    for row in ok:
        # The rebuilt ids are the ones the server generated (its __verbose.tokens), said so.
        assert row["output_ids"] == row["response"]["__verbose"]["tokens"], row["id"]
        assert row["output_source"] == "server_token_ids"
    # Streamed (a stream has no __verbose ids, and llama.cpp refuses logprobs with tools there: the message
    # alone): same seeds, so the same ids or a flag above info that says they may differ.
    slog = tmp_path / "stream.jsonl"
    sproc = _generate(live, prompts, slog, "--stream")
    _, err = sproc.communicate(timeout=300)
    assert sproc.returncode == 0, err
    truth = {r["id"]: r["output_ids"] for r in ok}
    streamed = [r for r in _rows(slog) if r["status"] == "ok" and r["id"] in truth]
    assert len(streamed) >= 20
    for row in streamed:
        said = [f for f in row["flags"] if f["severity"] != "info"]
        assert row["output_ids"] == truth[row["id"]] or said, row["id"]
    # export: the trainers' rows, one per ok prompt.
    samples = tmp_path / "samples.jsonl"
    exported = subprocess.run([sys.executable, "-m", "kimi_recon", "export", str(log), "-o", str(samples), "-q"], capture_output=True, text=True, check=False)
    assert exported.returncode in (0, 1), exported.stderr
    by_id = {r["id"]: r for r in ok}
    trained = _rows(samples)
    assert len(trained) == len(ok)
    for sample in trained:
        generated = by_id[sample["id"]]["output_ids"]
        assert sample["input_ids"][sample["prompt_len"] :] == generated  # the server's own ids, [EOT] stops too
