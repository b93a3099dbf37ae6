"""Reading input files: compressed, with a byte order mark, bounded lines, and the whole-file mistakes
(a JSON array, pretty-printed JSON) refused with a message saying what was found and what to do."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from extras import require
from testdata import OFFICIAL, read_jsonl

from kimi_recon._base import files as _io
from kimi_recon.cli import main
from kimi_recon.dataset import audit_dataset, iter_jsonl, reconstruct_records
from kimi_recon.errors import InputFileError, KimiReconError

REPO = Path(__file__).resolve().parents[2]
CASES = read_jsonl(OFFICIAL / "turns.jsonl")[:4]


def audit_rows() -> list[dict[str, Any]]:
    return [{"id": i, "turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"]} for i, c in enumerate(CASES)]


def jsonl_bytes(rows: list[Any]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def test_gzip_input_is_audited_like_the_plain_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: a .gz file was one unreadable line per chunk and `compared 0`."""
    plain = tmp_path / "d.jsonl"
    plain.write_bytes(jsonl_bytes(audit_rows()))
    packed = tmp_path / "d.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    a, b = audit_dataset(plain, progress=False), audit_dataset(packed, progress=False)
    assert (b.total, b.exact_count, b.error_count) == (a.total, a.exact_count, a.error_count) == (len(CASES), len(CASES), 0)
    assert main(["audit", str(packed), "-q", "--min-exact", "1"]) == 0


def test_gzip_is_told_by_its_bytes_not_its_name(tmp_path: Path) -> None:
    path = tmp_path / "no-suffix.jsonl"
    path.write_bytes(gzip.compress(jsonl_bytes(audit_rows())))
    assert [line for line, _ in iter_jsonl(path)] == [1, 2, 3, 4]


def test_zstandard_input_is_read_when_the_package_is_installed(tmp_path: Path) -> None:
    zstandard = require("zstandard")
    path = tmp_path / "d.jsonl.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(jsonl_bytes(audit_rows())))
    report = audit_dataset(path, progress=False)
    assert (report.total, report.exact_count) == (len(CASES), len(CASES))


def test_a_cut_gzip_file_is_a_named_file_error(tmp_path: Path) -> None:
    data = gzip.compress(jsonl_bytes(audit_rows() * 50))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputFileError, match="cannot be read at line"):
        list(iter_jsonl(path))


def test_a_byte_order_mark_at_the_start_is_not_an_error(tmp_path: Path) -> None:
    """Failed on the old code: line 1 was "not JSON" because of the BOM."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + jsonl_bytes(audit_rows()))
    report = audit_dataset(path, progress=False)
    assert (report.error_count, report.exact_count) == (0, len(CASES))


@pytest.mark.parametrize(
    ("content", "found", "jq"),
    [
        (json.dumps(audit_rows(), indent=2), "a JSON array spread over several lines", "jq -c '.[]'"),
        (json.dumps(audit_rows()), "is a JSON array, not an object", "jq -c '.[]'"),
        (json.dumps(audit_rows()[0], indent=2), "pretty-printed JSON", "jq -c ."),
        ("\n\n" + json.dumps(audit_rows()[0], indent=1), "pretty-printed JSON", "jq -c ."),
    ],
)
def test_whole_file_mistakes_are_refused_saying_what_was_found_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, found: str, jq: str
) -> None:
    """Failed on the old code: each line was an error, `compared 0`, exit 0."""
    path = tmp_path / "d.json"
    path.write_text(content + "\n", encoding="utf-8")
    assert main(["audit", str(path)]) == 2
    err = capsys.readouterr().err
    assert found in err and jq in err and "JSON Lines" in err
    with pytest.raises(InputFileError, match="JSON Lines"):
        audit_dataset(path, progress=False)


def test_a_later_array_line_is_one_record_error_not_a_refused_file(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(jsonl_bytes([audit_rows()[0], [1, 2], audit_rows()[1]]))
    report = audit_dataset(path, progress=False)
    assert (report.total, report.error_count, report.exact_count) == (3, 1, 2)
    assert report.errors[0].line == 2 and "found list [1, 2]" in report.errors[0].message


def test_a_non_json_line_names_its_line_and_what_was_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Failed on the old code: "field 'line': is not JSON: Expecting value: line 1 column 1 (char 0)"."""
    path = tmp_path / "d.jsonl"
    path.write_bytes(jsonl_bytes(audit_rows()[:2]) + b"oops, a note\n" + jsonl_bytes(audit_rows()[2:]))
    assert main(["audit", str(path)]) == 1
    out = capsys.readouterr().out
    line = next(text for text in out.splitlines() if "line 3" in text)
    assert "'oops, a note'" in line and "field 'line'" not in line and "char 0" not in line


def test_a_line_past_the_length_bound_stops_the_read_naming_the_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_io, "MAX_LINE_BYTES", 1000)
    path = tmp_path / "d.jsonl"
    path.write_bytes(jsonl_bytes(audit_rows()[:1])[:900] + b"\n" + b"x" * 5000 + b"\n")
    with pytest.raises(InputFileError, match="line 2 is longer than 1000 bytes"):
        list(reconstruct_records(path))


def test_reconstruct_of_dev_zero_ends_with_an_error_instead_of_hanging(tmp_path: Path) -> None:
    """Failed on the old code: the command never ended (one unbounded line)."""
    result = subprocess.run(
        [sys.executable, "-m", "kimi_recon.cli", "reconstruct", "/dev/zero", "-o", str(tmp_path / "out.jsonl")],
        check=False, capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert result.returncode == 2 and "line 1 is longer than" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_a_missing_input_is_a_kimi_recon_error(tmp_path: Path) -> None:
    with pytest.raises(KimiReconError):
        audit_dataset(tmp_path / "missing.jsonl", progress=False)


def test_generate_reads_its_prompts_through_the_same_reader(tmp_path: Path) -> None:
    """Failed on the old code: a .gz prompt file was one bad prompt per chunk, a JSON array one bad prompt per line."""
    from kimi_recon.openrouter.prompts import Prompt, read_prompts

    prompts = [{"id": f"p{i}", "messages": [{"role": "user", "content": f"q{i}"}]} for i in range(3)]
    packed = tmp_path / "p.jsonl.gz"
    packed.write_bytes(gzip.compress(b"\xef\xbb\xbf" + jsonl_bytes(prompts)))
    assert [p.id for p in read_prompts(packed) if isinstance(p, Prompt)] == ["p0", "p1", "p2"]
    array = tmp_path / "p.json"
    array.write_text(json.dumps(prompts, indent=2), encoding="utf-8")
    with pytest.raises(InputFileError, match=r"field 'prompts'.*JSON array"):
        read_prompts(array)


def test_zstandard_input_without_the_package_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "d.jsonl.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    monkeypatch.setitem(sys.modules, "zstandard", None)  # import fails as when not installed
    with pytest.raises(InputFileError, match=r"kimi-recon\[zstd\]"):
        list(iter_jsonl(path))


@pytest.mark.parametrize("argv", [
    ["audit-tokens", "--constants", "/dev/zero"],
    ["build-samples", "IN", "--chat-template", "/dev/zero", "-o", "OUT"],
])  # fmt: skip
def test_files_read_whole_are_bounded_too(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """Failed on the old code: json.load / f.read() of /dev/zero grew memory until MemoryError."""
    src = tmp_path / "in.jsonl"
    src.write_bytes(jsonl_bytes(audit_rows()))
    argv = [str(src) if a == "IN" else str(tmp_path / "out.jsonl") if a == "OUT" else a for a in argv]
    assert main(argv) == 2
    assert "/dev/zero is longer than" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()


def test_constants_with_a_byte_order_mark_are_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"IM_END_TOKEN_ID": 163586}).encode())
    assert main(["audit-tokens", "--constants", str(path)]) == 0


@pytest.mark.parametrize("first", [b"[]", b"[1, 2]", b"[" * 5000])
def test_a_first_line_that_is_not_an_array_of_records_is_one_record_error(tmp_path: Path, first: bytes) -> None:
    path = tmp_path / "d.jsonl"
    path.write_bytes(first + b"\n" + jsonl_bytes(audit_rows()[:1]))
    report = audit_dataset(path, progress=False)
    assert (report.total, report.error_count, report.exact_count) == (2, 1, 1)
