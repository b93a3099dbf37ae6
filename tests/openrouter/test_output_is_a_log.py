"""``generate -o FILE`` checks that FILE is a generate log before it touches it (issue 35): the torn-tail repair
deleted the last line of any file and then refused, and emptied a one-line JSON file without a final newline;
a log with a non-UTF-8 byte crashed resume with a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from kimi_recon.errors import KimiReconError
from kimi_recon.openrouter.output import OutputFile

ROW = b'{"id": "a", "status": "ok", "line": 1}\n'


@pytest.mark.parametrize(
    "content",
    [
        b"first line of my notes\nsecond line, no newline",
        b'{"a": 1}',
        b'{"a": 1}\n{"b": 2}\n',
        ROW + b"plain text tail",
        ROW + b'{"id": "b", "status": "ok"}\n\xff\xfe\n',
        # a dataset or a prompts file whose records have string ids is no log: rows were appended to it
        b'{"id": "rec1", "response": {"content": "x"}, "reference_ids": [1]}',
        b'{"id": "p1", "messages": [{"role": "user", "content": "hi"}]}\n',
        ROW + b'{"id": "p2", "status": "done"}\n',
        ROW + b'{"id": "p3", "messages": [{"role": "user"',  # not a row cut short: no status after the id
        # a UTF-16 line (its newline too), which json.loads would read as a row
        ROW + '{"id": "b", "status": "ok"}\n'.encode("utf-16-be"),
    ],
)
def test_a_file_that_is_not_a_generate_log_is_refused_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(content)
    with pytest.raises(KimiReconError) as err, OutputFile(path, fsync=False):
        pass
    assert "output" in str(err.value)  # the error names the -o file's field
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    ("content", "kept", "done"),
    [
        (ROW + b'{"id": "b", "sta', ROW, {"a"}),  # a row cut short: dropped
        (ROW + ROW[:-1].replace(b'"a"', b'"b"'), ROW + ROW.replace(b'"a"', b'"b"'), {"a", "b"}),  # whole: newline added
        (b'{"id', b"", set()),  # the first write cut short
    ],
)
def test_a_logs_torn_tail_is_still_repaired(tmp_path: Path, content: bytes, kept: bytes, done: set[str]) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes(content)
    with OutputFile(path, fsync=False) as out:
        assert out.state is not None and set(out.state.done) == done
    assert path.read_bytes() == kept
