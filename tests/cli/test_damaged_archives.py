"""A damaged compressed input stops with a named error (exit 2 on the command line), never a silent short read
(issue 35): a .zst cut inside a frame, or with corrupt bytes, as a cut .gz already did."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kimi_recon._base.files import read_lines
from kimi_recon.cli import main
from kimi_recon.dataset import audit_dataset
from kimi_recon.errors import InputFileError, KimiReconError

zstandard = pytest.importorskip("zstandard")

LINES = [b'{"id": %d, "response": {"content": "hello %d"}, "reference_ids": [1]}\n' % (i, i) for i in range(300)]
DATA = b"".join(LINES)
ONE_FRAME = zstandard.ZstdCompressor().compress(DATA)
THIRDS = [b"".join(LINES[i : i + 100]) for i in (0, 100, 200)]
FRAMES = [zstandard.ZstdCompressor().compress(part) for part in THIRDS]


def _lines(tmp_path: Path, blob: bytes) -> list[bytes]:
    path = tmp_path / "in.jsonl.zst"
    path.write_bytes(blob)
    return list(read_lines(path))


def test_whole_archives_read_whole(tmp_path: Path) -> None:
    assert _lines(tmp_path, ONE_FRAME) == LINES
    assert _lines(tmp_path, b"".join(FRAMES)) == LINES


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_an_archive_cut_anywhere_is_refused_or_ends_between_two_frames(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    blob = data.draw(st.sampled_from([ONE_FRAME, b"".join(FRAMES)]))
    cut = data.draw(st.integers(4, len(blob) - 1))  # (under 4 bytes no magic number says zstandard: a junk line)
    ends = {sum(map(len, FRAMES[:k])) for k in range(1, len(FRAMES))}
    tmp = tmp_path_factory.mktemp("cut")
    if blob is not ONE_FRAME and cut in ends:  # a valid, shorter archive: nothing in it can tell
        assert _lines(tmp, blob[:cut]) == LINES[: 100 * len([e for e in ends if e <= cut])]
        return
    with pytest.raises(InputFileError) as err:
        _lines(tmp, blob[:cut])
    assert "inside a frame" in err.value.message or "damaged" in err.value.message


def test_corrupt_bytes_are_a_named_error_at_every_door(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corrupt = ONE_FRAME[:10] + b"\x00" * 20 + ONE_FRAME[30:]
    path = tmp_path / "in.jsonl.zst"
    out = tmp_path / "out.jsonl"
    for blob in (corrupt, FRAMES[0] + FRAMES[1][: len(FRAMES[1]) // 2]):
        path.write_bytes(blob)
        with pytest.raises(KimiReconError):
            audit_dataset(str(path), progress=False)
        assert main(["reconstruct", str(path), "-o", str(out)]) == 2
        assert not out.exists()
        assert main(["audit", str(path)]) == 2
        assert "Traceback" not in capsys.readouterr().err
