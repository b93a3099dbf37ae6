"""The command behaves like the shell tools users know: ``python -m kimi_recon`` runs it, and a reader that goes
away early (``| head``) ends it quietly, with the status a shell gives a tool that SIGPIPE ended."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from importlib.resources import files
from pathlib import Path

import pytest


def test_python_dash_m_runs_the_command() -> None:
    done = subprocess.run([sys.executable, "-m", "kimi_recon", "--version"], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and version("kimi-recon") in done.stdout


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path: Path) -> None:
    """``kimi-recon reconstruct FILE | head`` ended with ``error: [Errno 32] Broken pipe``. (Run with a pipe whose
    reader is already gone: with ``| head -c 100`` the whole output could fit in the pipe's buffer first, and
    then no write ever failed.)"""
    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    done = _run_with_stdout_closed(["kimi_recon", "reconstruct", sample], tmp_path)
    assert done.returncode == 141
    assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_a_bad_option_stops_every_command_before_any_output(tmp_path: Path) -> None:
    """One rule: ``reconstruct --profile`` with a name that is no profile wrote a file of error rows over the old
    output and exited 1; now it stops with exit 2 and a hint, as audit and build-samples do, and the old output
    stays as it was."""
    from kimi_recon.cli import main

    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    out = tmp_path / "out.jsonl"
    for command, options in [
        (["reconstruct", sample, "-o", str(out)], ["--profile", "kimi-k2.5-thinking"]),
        (["reconstruct", sample, "-o", str(out)], ["--workers", "-2"]),
        (["build-samples", sample, "-o", str(out)], ["--profile", "kimi-k2.5-thinking"]),
        (["build-samples", sample, "-o", str(out)], ["--workers", "-2"]),
        (["audit", sample, "--json", str(out)], ["--profile", "kimi-k9"]),
    ]:
        out.write_text("old\n", encoding="utf-8")
        assert main(command + options) == 2, options
        assert out.read_text(encoding="utf-8") == "old\n", command
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl"], command


def test_no_output_replaces_the_chat_template_it_reads(tmp_path: Path) -> None:
    """``build-samples --chat-template T -o T`` (or ``--errors T``) overwrote the template (issue 35)."""
    from kimi_recon.cli import main

    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    template = tmp_path / "t.jinja"
    template.write_text("{{ messages }}", encoding="utf-8")
    for option in ("-o", "--errors"):
        assert main(["build-samples", sample, "--chat-template", str(template), option, str(template)]) == 2
        assert template.read_text(encoding="utf-8") == "{{ messages }}"


def test_the_commands_say_their_rows_by_worst_flag_and_fail_when_none_is_usable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``build-samples`` wrote 80 rows that all carried a loss flag with exit 0 and nothing on stderr, and
    ``audit`` exited 0 with no benign record (issue 33): the summary counts rows by their worst flag, a loss
    says how to drop it, and a run with no usable row fails."""
    import json

    from kimi_recon.cli import main

    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    assert main(["reconstruct", sample, "-o", str(tmp_path / "r.jsonl")]) == 1  # (the sample's one broken line)
    assert "(by worst flag: loss 1, risk 1, unlikely 1, info 0, none 33)" in capsys.readouterr().err
    # every row a loss: a thinking-off answer that kept its reasoning (dropped by the rebuild: reasoning_dropped)
    turn = {"role": "assistant", "content": "Hi", "reasoning_content": "Hm."}
    records = [{"id": f"r{i}", "thinking": False, "messages": [{"role": "user", "content": "q"}], "response": turn} for i in range(3)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    assert main(["build-samples", str(path), "-o", str(tmp_path / "rows.jsonl"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "loss 3" in err and "--drop-severity loss" in err and "no usable row" in err
    audited = [{**r, "thinking": True, "reference_ids": [1, 2, 3]} for r in records]
    path.write_text("".join(json.dumps(r) + "\n" for r in audited), encoding="utf-8")
    assert main(["audit", str(path), "--quiet"]) == 1
    assert "no record is exact or a benign re-split" in capsys.readouterr().err


def test_a_k25_file_rebuilt_as_k2_instruct_fails_every_command_that_rebuilds_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``build-samples --profile kimi-k2-instruct`` on a K2.5 file wrote rows that were all ``loss`` and exited 0 with
    nothing on stderr (issue 33); ``reconstruct`` still did. One rule: every row a loss is no usable row, exit 1,
    said on stderr even with ``--quiet``; some usable rows exit 0 and the loss rows are counted."""
    import json

    from kimi_recon import load_tokenizer
    from kimi_recon.cli import main

    tok = load_tokenizer()
    records = [
        {"id": f"r{i}", "messages": [{"role": "user", "content": "q"}], "response": {"role": "assistant", "content": f"A{i}.", "reasoning_content": "Hm."},
         "model": "moonshotai/kimi-k2.5", "thinking": True, "reference_ids": tok.encode(f"Hm.</think>A{i}.<|im_end|>", allowed_special="all")}
        for i in range(4)
    ]
    path = tmp_path / "k25.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    for command in (["reconstruct"], ["build-samples"], ["audit"]):
        out = ["-o", str(tmp_path / "out.jsonl")] if command[0] != "audit" else []
        assert main([*command, str(path), *out, "--profile", "kimi-k2-instruct", "--quiet"]) == 1, command
        err = capsys.readouterr().err
        assert "FAIL" in err and ("no usable row" in err or "no record is exact" in err), (command, err)
        assert main([*command, str(path), *out, "--quiet"]) == 0, command  # its own profile: every row usable
        assert "FAIL" not in capsys.readouterr().err
    # one usable row among losses: exit 0, the losses counted on stderr
    mixed = [*records[:3], {**records[3], "thinking": False}]
    path.write_text("".join(json.dumps(r) + "\n" for r in mixed), encoding="utf-8")
    assert main(["reconstruct", str(path), "-o", str(tmp_path / "out.jsonl"), "--quiet"]) == 0
    assert "1 of 4 rows carry a loss flag" in capsys.readouterr().err


def _run_with_stdout_closed(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m ARGS`` with stdout a pipe nobody reads any more (``| true`` without the race): every write,
    argparse's and the interpreter's final flush included, meets a broken pipe."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", *args], stdout=write_end, stderr=subprocess.PIPE, text=True, check=False, cwd=cwd)
    finally:
        os.close(write_end)


def test_every_command_ends_quietly_when_its_reader_is_gone(tmp_path: Path) -> None:
    """``kimi-recon --version | true`` printed a traceback ending in ``BrokenPipeError``: argparse's ``--help`` and
    ``--version`` print inside argument parsing, and a short output meets the broken pipe only in the
    interpreter's last flush ("Exception ignored ... BrokenPipeError", exit 120). Every command, and both entry
    points, now end with 141 and nothing on stderr."""
    import json

    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    records = tmp_path / "conversations.jsonl"
    records.write_text(
        json.dumps({"id": "a", "thinking": False, "messages": [{"role": "user", "content": "q"}], "response": {"role": "assistant", "content": "Hi"}}) + "\n",
        encoding="utf-8",
    )
    # argparse's --help swallows the error of its own write and exits 0; everything else is ours and ends 141
    for args, status in (
        (["kimi_recon", "--version"], 141),
        (["kimi_recon", "--help"], (0, 141)),
        (["kimi_recon", "reconstruct", "--help"], (0, 141)),
        (["kimi_recon", "audit-tokens"], 141),
        (["kimi_recon", "audit", "--sample"], 141),
        (["kimi_recon", "audit", "--sample", "--json", "-"], 141),
        (["kimi_recon", "reconstruct", sample], 141),
        (["kimi_recon", "build-samples", str(records), "-o", "-"], 141),
        (["kimi_recon.openrouter", "generate", "--help"], (0, 141)),
    ):
        done = _run_with_stdout_closed(args, tmp_path)
        assert done.returncode in (status if isinstance(status, tuple) else (status,)), (args, done.returncode, done.stderr)
        assert "Broken pipe" not in done.stderr and "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, (args, done.stderr)


def test_the_audit_writes_its_report_files_before_stdout_can_end_it(tmp_path: Path) -> None:
    """``kimi-recon audit data.jsonl --html r.html | head -1`` printed the summary first, so the reader leaving
    ended the command before ``r.html`` was written."""
    done = _run_with_stdout_closed(["kimi_recon", "audit", "--sample", "--html", "r.html", "--json", "r.json"], tmp_path)
    assert done.returncode == 141, done.stderr
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!") and (tmp_path / "r.json").stat().st_size > 0


@pytest.mark.parametrize("name", ["tiktoken.model", "tokenizer_config.json", "chat_template.jinja", "config.json"])
def test_no_output_replaces_a_file_of_the_tokenizer_it_reads(tmp_path: Path, name: str) -> None:
    """``reconstruct IN -o TOK/tokenizer_config.json --tokenizer TOK`` replaced the tokenizer's file with rows, and
    ``generate -o TOK/...`` appended rows to it: every file a command reads is an input (issue 35)."""
    import shutil

    from kimi_recon.cli import main

    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    tok = tmp_path / "tok"
    shutil.copytree(str(files("kimi_recon") / "data" / "k2.5"), tok)
    target = tok / name
    before = target.read_bytes()
    commands = [
        ["reconstruct", sample, "-o"], ["audit", sample, "--json"], ["audit", sample, "--html"],
        ["build-samples", sample, "-o"], ["build-samples", sample, "-o", str(tmp_path / "rows.jsonl"), "--errors"],
        ["export", sample, "-o"], ["export", sample, "-o", str(tmp_path / "rows.jsonl"), "--errors"],
    ]  # fmt: skip
    for command in commands:
        assert main([*command, str(target), "--tokenizer", str(tok)]) == 2, command
        assert target.read_bytes() == before, command


def test_generate_refuses_a_log_that_is_a_file_of_its_tokenizer(tmp_path: Path) -> None:
    import io
    import shutil

    pytest.importorskip("openai")
    from kimi_recon.errors import OutputFileError
    from kimi_recon.openrouter.generate import GenerateConfig, run_generate
    from kimi_recon.openrouter.options import RequestOptions

    tok = tmp_path / "tok"
    shutil.copytree(str(files("kimi_recon") / "data" / "k2.5"), tok)
    target = tok / "config.json"
    target.write_text('{"id": "x", "status": "ok"}\n', encoding="utf-8")  # one line a log could hold
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n', encoding="utf-8")
    config = GenerateConfig(
        prompts=prompts, output=target, options=RequestOptions(model="moonshotai/kimi-k2.5"), tokenizer=str(tok),
        base_url="http://127.0.0.1:9",  # nothing is sent; were it, no network
    )
    with pytest.raises(OutputFileError):
        run_generate(config, "sk-or-v1-" + "0" * 40, stderr=io.StringIO())
    assert target.read_text(encoding="utf-8") == '{"id": "x", "status": "ok"}\n'


def test_the_command_alone_lists_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """``kimi-recon`` with nothing after it said only "the following arguments are required: COMMAND"."""
    from kimi_recon.cli import main

    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and all(name in err for name in ("audit", "reconstruct", "build-samples", "export", "generate")) and "--help" in err
    done = subprocess.run([sys.executable, "-m", "kimi_recon"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "build-samples" in done.stderr


def test_the_loss_line_names_the_flags_that_make_the_rows_lossy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """"80 of 80 rows carry a loss flag" said nothing of which: a wrong --profile (profile_mismatch) read like any loss."""
    import json

    from kimi_recon.cli import main

    sample = str(files("kimi_recon") / "data" / "sample" / "k2.5-dev-sample.jsonl")
    out = tmp_path / "ids.jsonl"
    assert main(["reconstruct", sample, "-o", str(out), "--profile", "kimi-k3", "-q"]) == 1
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    n = sum(any(f["code"] == "profile_mismatch" for f in r["flags"]) for r in rows)
    assert n > 0 and f"profile_mismatch {n}" in capsys.readouterr().err


def test_auditing_responses_without_reference_ids_says_what_to_run_instead(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new user's first try is ``audit`` on API responses, which carry no reference ids: the FAIL line asked
    "wrong field names?" and named no command that works on such a file."""
    import json

    from kimi_recon.cli import main

    answer = {"model": "moonshotai/kimi-k2.5", "choices": [{"message": {"role": "assistant", "content": "4", "reasoning": "Add."}, "finish_reason": "stop"}]}
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "response": answer}) + "\n" for i in range(3)), encoding="utf-8")
    assert main(["audit", str(path), "-q"]) == 1
    err = capsys.readouterr().err
    assert "reconstruct or build-samples" in err and "return_token_ids" in err
