"""The output file (locking, torn tails, resume scan) and the prompt file (ids, validation)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kimi_recon.errors import InvalidInputError
from kimi_recon.openrouter.options import RequestOptions, provider_preferences, reasoning_settings, request_kwargs
from kimi_recon.openrouter.output import OutputFile, OutputLockedError, to_json_line
from kimi_recon.openrouter.prompts import BadPrompt, Prompt, parse_prompts


def row(rid: str, status: str = "ok", cost: float | None = 0.5) -> str:
    return json.dumps({"id": rid, "status": status, "cost": cost}) + "\n"


def test_open_reads_done_ids_counts_and_spend(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(row("a") + row("b", "error", None) + row("c"), encoding="utf-8")
    with OutputFile(path) as out:
        assert out.state is not None
        assert out.state.done == {"a", "b", "c"}
        assert (out.state.ok, out.state.errors, out.state.cost, out.state.repaired_tail) == (2, 1, 1.0, None)


def test_a_torn_last_row_is_cut_off_so_its_prompt_runs_again(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(row("a") + '{"id": "b", "status": "ok", "output_ids": [1, 2', encoding="utf-8")
    with OutputFile(path) as out:
        assert out.state is not None and out.state.done == {"a"} and out.state.repaired_tail == "truncated"
        out.append({"id": "b", "status": "ok"})
    assert path.read_text(encoding="utf-8") == row("a") + '{"id": "b", "status": "ok"}\n'


def test_a_whole_last_row_missing_only_its_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(row("a") + row("b").rstrip("\n"), encoding="utf-8")
    with OutputFile(path) as out:
        assert out.state is not None and out.state.done == {"a", "b"} and out.state.repaired_tail == "newline_added"
    assert path.read_text(encoding="utf-8") == row("a") + row("b")


def test_a_torn_first_and_only_row_leaves_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes('{"id": "a", "status": "ok", "text": "caf\u00e9'.encode()[:-1])  # cut inside a UTF-8 character
    with OutputFile(path) as out:
        assert out.state is not None and out.state.done == frozenset()
    assert path.read_bytes() == b""


def test_a_second_writer_is_refused_while_the_first_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with OutputFile(path):
        with pytest.raises(OutputLockedError, match="another run"):
            OutputFile(path).open()
    with OutputFile(path):  # released on close
        pass


def test_a_damaged_row_in_the_middle_refuses_to_resume(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(row("a") + "garbage\n" + row("b"), encoding="utf-8")
    with pytest.raises(InvalidInputError, match=":2 is not an output row"):
        OutputFile(path).open()


def test_a_prompt_written_twice_refuses_to_resume(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(row("a") + row("a"), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="already in the file"):
        OutputFile(path).open()


def test_rows_are_single_lines_even_with_unicode_line_breaks() -> None:
    line = to_json_line({"id": "a", "text": "x\u2028y\u2029z\x85w\n中文"})
    assert len(line.splitlines()) == 1
    assert json.loads(line)["text"] == "x\u2028y\u2029z\x85w\n中文"
    assert "中文" in line  # non-ASCII stays readable (and compact)


def test_secret_is_scrubbed_from_appended_rows(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with OutputFile(path, secret="sk-or-SECRET") as out:
        out.append({"id": "a", "error": {"message": "echo Bearer sk-or-SECRET"}})
    assert "sk-or-SECRET" not in path.read_text(encoding="utf-8")


# -- prompts ------------------------------------------------------------------------------------------


def test_prompt_ids_are_explicit_or_derived_and_stable() -> None:
    a = json.dumps({"messages": [{"role": "user", "content": "hi"}]})
    b = json.dumps({"id": "x", "messages": [{"role": "user", "content": "hi"}]})
    first = parse_prompts([a, b, a])
    again = parse_prompts(["", json.dumps({"messages": [{"role": "user", "content": "other"}]}), a, b, a])
    ids = [p.id for p in first]
    assert ids[1] == "x"
    assert ids[0].startswith("sha256:") and ids[2] == ids[0] + "#2"
    assert [p.id for p in again][1:] == ids  # adding a line elsewhere does not move the ids


def test_duplicate_explicit_ids_are_refused_before_anything_is_sent() -> None:
    line = json.dumps({"id": "x", "messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(InvalidInputError, match="'x' appears on lines 1 and 2"):
        parse_prompts([line, line])


@pytest.mark.parametrize(
    ("line", "expected_id", "reason"),
    [
        ("[1, 2]", "line-1", "must be a JSON object"),
        ('{"id": "q", "messages": []}', "q", "non-empty list"),
        ('{"id": "q", "messages": [{"role": "robot", "content": "x"}]}', "q", "role"),
        ('{"id": "q", "messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}}', "q", "'tools'"),
        ('{"id": true, "messages": [{"role": "user", "content": "x"}]}', "line-1", "'id'"),
    ],
)
def test_bad_prompt_lines_become_bad_prompts_naming_the_id(line: str, expected_id: str, reason: str) -> None:
    (item,) = parse_prompts([line])
    assert isinstance(item, BadPrompt)
    assert item.id == expected_id and reason in item.message


def test_request_kwargs_put_openrouter_fields_in_extra_body() -> None:
    prompt = Prompt("a", ({"role": "user", "content": "hi"},), None, 1)
    options = RequestOptions(
        model="moonshotai/kimi-k2.5",
        reasoning=reasoning_settings(max_tokens=2048),
        provider=provider_preferences(order=["a", "b"]),
        stream=True,
    )
    kwargs = request_kwargs(prompt, options)
    assert kwargs["extra_body"] == {
        "usage": {"include": True},
        "reasoning": {"enabled": True, "exclude": False, "max_tokens": 2048},
        "provider": {"order": ["a", "b"]},
    }
    assert kwargs["stream"] is True and kwargs["stream_options"] == {"include_usage": True}
    assert "tools" not in kwargs and "logprobs" not in kwargs


def test_options_refuse_contradictions() -> None:
    with pytest.raises(InvalidInputError):
        RequestOptions(model="m", extra_body={"messages": []})
    with pytest.raises(InvalidInputError):
        reasoning_settings(effort="high", max_tokens=100)
    with pytest.raises(InvalidInputError):
        RequestOptions(model="m", top_logprobs=3)
    assert RequestOptions(model="m", reasoning=reasoning_settings(enabled=False)).thinking is False
    assert RequestOptions(model="m").thinking is True


def test_prompt_tools_are_read_by_the_record_options_parser() -> None:
    # JSON text is parsed (not iterated character by character); Arrow's filler nulls are removed before sending.
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    messages = [{"role": "user", "content": "x"}]
    (as_text,) = parse_prompts([json.dumps({"id": "t", "messages": messages, "tools": json.dumps(tools)})])
    assert isinstance(as_text, Prompt) and as_text.tools == tuple(tools)
    filled = [{"type": "function", "function": {"name": "f", "description": None, "parameters": {"type": "object", "properties": {"c": None}}}}]
    (cleaned,) = parse_prompts([json.dumps({"id": "n", "messages": messages, "tools": filled})])
    assert isinstance(cleaned, Prompt) and cleaned.tools == tuple(tools)
    (bad,) = parse_prompts([json.dumps({"id": "b", "messages": messages, "tools": "[1]"})])
    assert isinstance(bad, BadPrompt) and "field 'tools[0]': must be a tool object" in bad.message
