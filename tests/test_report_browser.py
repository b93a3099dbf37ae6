"""The HTML report in a real browser: headless Chromium renders it, and the rendered DOM shows the audit's figures.

Needs Debian's ``chromium`` (``.ci/run`` installs it). Skipped only outside CI when it is missing; with
``CI=true`` a missing browser is a failure.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from report_helpers import at, crafted_records, figures_of, shown

from kimi_recon import load_tokenizer
from kimi_recon.dataset import audit_dataset

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-extensions", "--mute-audio",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # nothing on the page may reach a network
]


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("chromium is not installed; CI must install it (apt-get install -y chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium); CI runs this test")
    return CHROMIUM


def run_chromium(browser: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [browser, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True, text=True, timeout=120, check=True, env={**os.environ, "HOME": str(profile)},
    )


def decode_png(data: bytes) -> tuple[int, int, int, list[bytes]]:
    """(width, height, bytes per pixel, rows) of an 8-bit RGB/RGBA/grey PNG, unfiltered."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if ctype == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and body[12] == 0, "only 8-bit, non-interlaced PNGs"
            bpp = {0: 1, 2: 3, 4: 2, 6: 4}[color]
        elif ctype == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows: list[bytes] = []
    prev = bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if kind == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif kind == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, bpp, rows


def test_png_decoder_reads_a_known_image() -> None:
    """The decoder the screenshot check relies on, on a 2x2 RGB image written here with every filter type."""
    pixels = [bytes([255, 0, 0, 0, 255, 0]), bytes([0, 0, 255, 255, 255, 255])]
    raw = b"\x00" + pixels[0] + b"\x02" + bytes((a - b) & 255 for a, b in zip(pixels[1], pixels[0], strict=True))

    def chunk(t: bytes, b: bytes) -> bytes:
        return struct.pack(">I", len(b)) + t + b + struct.pack(">I", zlib.crc32(t + b))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    assert decode_png(png) == (2, 2, 3, pixels)


def test_chromium_renders_the_report_with_the_audit_figures(chromium: str, tmp_path: Path) -> None:
    report = audit_dataset(crafted_records(), load_tokenizer(), progress=False)
    d = report.to_dict()
    page = tmp_path / "report.html"
    page.write_text(report.to_html(), encoding="utf-8")
    dom = run_chromium(chromium, tmp_path / "profile", "--dump-dom", page.as_uri()).stdout

    parsed = figures_of(dom)
    figures = {tuple(p): (f, text) for p, f, text in parsed.figures}
    assert figures[("counts", "exact")][1] == "7" and figures[("total",)][1] == "10"
    assert figures[("exact_rate_of_all",)][1] == "70.00%" and figures[("error_count",)][1] == "1"
    for path, (fmt, text) in figures.items():  # the browser shows every figure as the JSON has it
        assert text == shown(at(d, list(path)), fmt), path
    text = " ".join(" ".join(parsed.text).split())
    card = text[text.index("#1 special_token_mismatch") :]
    assert "wrong-im-end" in card[:200]
    assert "163533 chas 163586 <|im_end|>" in card  # the wrong id beside the right one, on the same row

    shot = tmp_path / "shot.png"
    run_chromium(chromium, tmp_path / "profile", f"--screenshot={shot}", "--window-size=640,480", "--hide-scrollbars", page.as_uri())
    width, height, bpp, rows = decode_png(shot.read_bytes())
    assert (width, height) == (640, 480)
    pixels = [row[i : i + 3] for row in rows[::4] for i in range(0, len(row), bpp * 4)]
    background = max(set(pixels), key=pixels.count)
    ink = sum(p != background for p in pixels) / len(pixels)
    values = [v for p in pixels for v in p]
    mean = sum(values) / len(values)
    variance = sum((v - mean) ** 2 for v in values) / len(values)
    assert len(set(pixels)) > 20 and 0.02 < ink < 0.9 and variance > 100, (len(set(pixels)), ink, variance)
