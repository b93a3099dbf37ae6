"""Shared by the report tests: a crafted audit whose figures are known, and reading figures back out of the HTML."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from testdata import OFFICIAL, read_jsonl

IM_END, CHAS = 163586, 163533
CASES = read_jsonl(OFFICIAL / "turns.jsonl")[:10]


def crafted_records() -> list[Any]:
    """10 official turns: 7 as they are, one with 163533 for <|im_end|>, one with its reasoning dropped from the
    response, one not JSON. Expected: total 10, exact 7, special_token_mismatch 1, reasoning_missing 1, errors 1."""
    rows: list[Any] = []
    for i, c in enumerate(CASES[:7]):
        rows.append({"id": f"ok-{i}", "turn": c["turn"], "thinking": c["thinking"], "reference_ids": c["output_ids"]})
    wrong = CASES[7]
    rows.append({"id": "wrong-im-end", "turn": wrong["turn"], "thinking": wrong["thinking"],
                 "reference_ids": [CHAS if t == IM_END else t for t in wrong["output_ids"]]})
    dropped = next(c for c in CASES if c["thinking"] and c["turn"].get("reasoning_content"))
    turn = {k: v for k, v in dropped["turn"].items() if k != "reasoning_content"}
    rows.append({"id": "no-reasoning", "turn": turn, "thinking": True, "reference_ids": dropped["output_ids"]})
    rows.append('{"id": "broken", "turn": ')
    return rows


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


VOID = frozenset({"meta", "col", "br", "hr", "img", "input", "link", "wbr", "source", "area", "base", "embed"})


class FigureParser(HTMLParser):
    """Collects (JSON path, format, text) of every element carrying ``data-key``, and the page's text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.figures: list[tuple[list[Any], str, str]] = []
        self._open: list[tuple[str, list[Any] | None, str, list[str]]] = []
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag in VOID:
            return
        key = a.get("data-key")
        self._open.append((tag, json.loads(key) if key else None, a.get("data-format") or "", []))

    def handle_endtag(self, tag: str) -> None:
        if not self._open:
            return
        while self._open:
            open_tag, key, fmt, chunks = self._open.pop()
            if key is not None:
                self.figures.append((key, fmt, "".join(chunks)))
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        for _, key, _, chunks in self._open:
            if key is not None:
                chunks.append(data)


def figures_of(page: str) -> FigureParser:
    parser = FigureParser()
    parser.feed(page)
    parser.close()
    return parser


def at(report: dict[str, Any], path: list[Any]) -> Any:
    value: Any = report
    for part in path:
        value = value[part]
    return value


def shown(value: Any, fmt: str) -> str:
    """How the page should show a JSON value: thousands-separated integers, percentages to 2 decimals."""
    if fmt == "pct":
        return f"{value * 100:.2f}%"
    assert isinstance(value, int) and not isinstance(value, bool), value
    return f"{value:,}"
