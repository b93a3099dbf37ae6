"""Commands never destroy data: outputs replaced whole, the input never overwritten, inputs checked first,
``-`` for stdin/stdout, and one bad record (deep nesting) is a row, not a stopped run."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon._base.files import atomic_output, refuse_output_is_input
from kimi_recon.cli import main
from kimi_recon.errors import OutputFileError

REPO = Path(__file__).resolve().parents[2]
CASES = read_jsonl(OFFICIAL / "turns.jsonl")[:6]
OLD = b'{"old": "output that must survive"}\n'


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def recon_rows() -> list[dict[str, Any]]:
    return [{"id": i, "turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"]} for i, c in enumerate(CASES)]


def sample_rows() -> list[dict[str, Any]]:
    return [{"id": i, "messages": c["messages"], "tools": c["tools"], "turn": c["turn"], "thinking": c["thinking"]} for i, c in enumerate(CASES)]


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "kimi_recon.cli", *args], input=stdin, check=False, capture_output=True, env=env, timeout=120)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".partial"))


# -- the output is the input ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["reconstruct", "build-samples"])
@pytest.mark.parametrize("link", ["same path", "symlink", "hard link"])
def test_an_output_that_is_the_input_is_refused_and_the_input_kept(
    tmp_path: Path, command: str, link: str, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_jsonl(tmp_path / "d.jsonl", sample_rows())
    before = src.read_bytes()
    out = tmp_path / "alias.jsonl"
    if link == "same path":
        out = src
    elif link == "symlink":
        out.symlink_to(src)
    else:
        os.link(src, out)
    assert main([command, str(src), "-o", str(out)]) == 2
    assert src.read_bytes() == before
    err = capsys.readouterr().err
    assert "also the input" in err and "--output" in err
    assert leftovers(tmp_path) == []


def test_audit_json_report_may_not_overwrite_the_audited_file(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "d.jsonl", recon_rows())
    before = src.read_bytes()
    assert main(["audit", str(src), "--json", str(src)]) == 2
    assert src.read_bytes() == before


def test_stdout_redirected_into_the_input_is_refused(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "d.jsonl", recon_rows())
    before = src.read_bytes()
    env = dict(os.environ, PYTHONPATH=str(REPO))
    with open(src, "ab") as append_to_input:  # `kimi-recon reconstruct d.jsonl >> d.jsonl` would never end
        result = subprocess.run([sys.executable, "-m", "kimi_recon.cli", "reconstruct", str(src)], check=False, stdout=append_to_input, stderr=subprocess.PIPE, env=env, timeout=120)
    assert result.returncode == 2 and b"also the input" in result.stderr
    assert src.read_bytes() == before


def test_refuse_output_is_input_lets_distinct_and_missing_files_through(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("x")
    b.write_text("x")
    refuse_output_is_input(b, [a])
    refuse_output_is_input(tmp_path / "missing", [a])
    with pytest.raises(OutputFileError, match="also the input"):
        refuse_output_is_input(a, [b, a])


# -- inputs checked before outputs are touched ---------------------------------------------------------


@pytest.mark.parametrize("command", ["reconstruct", "build-samples"])
def test_a_missing_input_leaves_an_existing_output_untouched(tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(OLD)
    assert main([command, str(tmp_path / "missing.jsonl"), "-o", str(out)]) == 2
    assert out.read_bytes() == OLD
    assert "missing.jsonl does not exist" in capsys.readouterr().err


def test_a_directory_as_input_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(OLD)
    assert main(["reconstruct", str(tmp_path), "-o", str(out)]) == 2
    assert out.read_bytes() == OLD
    assert "is a directory" in capsys.readouterr().err


def test_a_directory_as_output_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "d.jsonl", recon_rows())
    (tmp_path / "outdir").mkdir()
    assert main(["reconstruct", str(src), "-o", str(tmp_path / "outdir")]) == 2
    assert "is a directory" in capsys.readouterr().err


# -- atomic replacement --------------------------------------------------------------------------------


def test_a_failure_while_writing_keeps_the_old_output_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_bytes(OLD)
    out.chmod(0o640)
    with pytest.raises(KeyboardInterrupt):
        with atomic_output(out) as f:
            f.write("half a row" * 10000)
            raise KeyboardInterrupt
    assert out.read_bytes() == OLD
    assert leftovers(tmp_path) == []
    with atomic_output(out) as f:
        f.write("new\n")
    assert out.read_text() == "new\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640  # the replaced file keeps its permissions
    assert leftovers(tmp_path) == []


def test_writing_through_a_symlink_replaces_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_bytes(OLD)
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with atomic_output(link) as f:
        f.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"


def test_an_output_that_is_a_device_is_written_directly(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "d.jsonl", recon_rows())
    assert main(["reconstruct", str(src), "-o", os.devnull]) == 0
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)  # /dev/null was written to, not replaced by a file


def _start(cmd: list[str], out: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "kimi_recon.cli", *cmd, "-o", str(out)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    end = time.monotonic() + 60
    while time.monotonic() < end:  # wait until rows are really being written into the temporary file
        partial = [p for p in out.parent.iterdir() if p.name.endswith(".partial")]
        if any(p.stat().st_size > 0 for p in partial):  # build-samples also has its (empty) errors file
            return proc
        assert proc.poll() is None, f"finished before it could be stopped: {proc.communicate()}"
        time.sleep(0.01)
    proc.kill()
    raise AssertionError("no rows were written within 60 s")


@pytest.mark.parametrize("command", ["reconstruct", "build-samples"])
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["ctrl-c", "sigterm", "kill-9"])
def test_stopping_a_command_mid_run_leaves_the_old_output_intact(tmp_path: Path, command: str, how: signal.Signals) -> None:
    rows = (sample_rows() if command == "build-samples" else recon_rows()) * 3000
    src = write_jsonl(tmp_path / "d.jsonl", rows)
    out = tmp_path / "out.jsonl"
    out.write_bytes(OLD)
    proc = _start([command, str(src)], out)
    proc.send_signal(how)
    _, stderr = proc.communicate(timeout=60)
    assert out.read_bytes() == OLD
    if how == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL  # only the temporary file can remain; the output is the old one
    else:
        assert proc.returncode == 130, stderr.decode()
        assert b"interrupted" in stderr
        assert leftovers(tmp_path) == []


# -- "-" for stdin and stdout ----------------------------------------------------------------------------


def test_reconstruct_reads_stdin_and_writes_stdout_like_files(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "d.jsonl", recon_rows())
    out = tmp_path / "out.jsonl"
    assert main(["reconstruct", str(src), "-o", str(out)]) == 0
    piped = cli("reconstruct", "-", "-o", "-", stdin=src.read_bytes())
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == out.read_bytes()
    assert not (Path.cwd() / "-").exists()


def test_build_samples_and_audit_read_stdin(tmp_path: Path) -> None:
    samples = cli("build-samples", "-", stdin=write_jsonl(tmp_path / "s.jsonl", sample_rows()).read_bytes())
    assert samples.returncode == 0, samples.stderr
    got = [json.loads(line) for line in samples.stdout.splitlines()]
    assert [g["input_ids"] for g in got] == [c["prompt_ids"] + c["output_ids"] for c in CASES]
    audit = cli("audit", "-", "--json", "-", stdin=write_jsonl(tmp_path / "a.jsonl", recon_rows()).read_bytes())
    assert audit.returncode == 0, audit.stderr
    report = json.loads(audit.stdout)  # stdout is the JSON report alone; the summary went to stderr
    assert report["total"] == len(CASES) and report["exact_rate"] == 1.0
    assert b"kimi-recon audit" in audit.stderr


def test_version_prints_the_installed_version() -> None:
    from importlib.metadata import version

    result = cli("--version")
    assert result.returncode == 0
    assert result.stdout.decode().strip() == f"kimi-recon {version('kimi-recon')}"


# -- one bad record is a row ------------------------------------------------------------------------------


def _deep_tools_json(depth: int) -> str:
    """~``depth``-deep tool parameters as JSON text (built as text: json.dumps itself would recurse)."""
    schema = '{"type": "string"}'
    schema = '{"type": "object", "properties": {"x": ' * depth + schema + "}}" * depth
    return '[{"type": "function", "function": {"name": "deep", "parameters": ' + schema + "}}]"


@pytest.mark.parametrize("command", ["reconstruct", "build-samples"])
def test_deeply_nested_records_become_error_rows_and_later_rows_are_written(tmp_path: Path, command: str) -> None:
    good = sample_rows()[0] | {"reference_ids": CASES[0]["output_ids"]}
    deep_line = '{"id": "deep", "messages": ' + "[" * 100_000 + "]" * 100_000 + "}"
    deep_tools = json.dumps(good | {"id": "tools"})[:-1] + ', "tools": ' + _deep_tools_json(450) + "}"  # 900 JSON levels
    src = write_jsonl(tmp_path / "d.jsonl", [deep_line, deep_tools, good])
    with open(src, "ab") as f:
        f.write(b'{"id": "bytes", "messages": "\xff"}\n')  # not UTF-8
    out = tmp_path / "out.jsonl"
    assert main([command, str(src), "-o", str(out)]) == 1
    rows = read_jsonl(out)
    if command == "build-samples":  # training rows only; the failures are in the errors file, by line
        errors = {e["line"]: e for e in read_jsonl(tmp_path / "out.errors.jsonl")}
        good_rows = iter(rows)
        rows = [errors[n] if n in errors else {**next(good_rows), "error": None} for n in range(1, 5)]
    assert len(rows) == 4
    assert rows[0]["error"] and "nested too deeply" in json.dumps(rows[0]["error"])
    assert rows[2]["error"] is None
    assert rows[3]["error"] and "UTF-8" in json.dumps(rows[3]["error"])
    if command == "build-samples":  # the tools are read, too deep to render: a row naming the record
        assert rows[1]["id"] == "tools" and "field 'tools': is nested more than 200 levels deep" in rows[1]["error"]
    else:  # reconstruct does not read tools
        assert rows[1]["error"] is None


@pytest.mark.parametrize("to_stdout", [False, True], ids=["file", "stdout"])
def test_a_lone_surrogate_in_a_record_is_written_as_its_json_escape_not_a_crash(tmp_path: Path, to_stdout: bool) -> None:
    good = recon_rows()[0]
    src = tmp_path / "d.jsonl"
    src.write_text('{"id": "\\ud800", "turn": {"content": "hi"}}\n' + json.dumps(good) + "\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = cli("reconstruct", str(src), "-o", "-" if to_stdout else str(out))
    assert result.returncode == 0, result.stderr
    data = result.stdout if to_stdout else out.read_bytes()
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["\ud800", "0"]  # read back as the same string
    assert b'"\\ud800"' in data


@pytest.mark.parametrize("command", ["reconstruct", "build-samples"])
def test_unicode_line_breaks_in_a_record_stay_inside_one_row_for_every_line_reader(tmp_path: Path, command: str) -> None:
    # U+0085, U+2028 and U+2029 are legal raw inside a JSON string, but str.splitlines (and JavaScript)
    # break lines at them: every writer escapes them, so a row is one line for any reader.
    text = "a\x85b\u2028c\u2029d"
    row = sample_rows()[0]
    row["id"] = text
    row["turn"] = {**row["turn"], "content": text}
    src = write_jsonl(tmp_path / "in.jsonl", [row])
    out = tmp_path / "out.jsonl"
    result = cli(command, str(src), "-o", str(out))
    assert result.returncode == 0, result.stderr
    written = out.read_text(encoding="utf-8")
    assert not set("\x85\u2028\u2029") & set(written)
    rows = [json.loads(line) for line in written.splitlines()]
    assert len(rows) == 1 and text in json.dumps(rows[0], ensure_ascii=False)
