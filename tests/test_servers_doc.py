"""The figures docs/servers.md gives are what the golden responses give today (issue 37 item 6).

The block between its figure markers is written by ``python tests/servers_measure.py --doc``; a change that moves
any figure (a flag graded otherwise, a loss learned, a golden row added) fails here until the block is rewritten.
"""

from __future__ import annotations

from pathlib import Path

from servers_measure import DOC_BEGIN, DOC_END, doc_figures

DOC = Path(__file__).resolve().parents[1] / "docs" / "servers.md"


def test_the_figures_in_docs_servers_md_are_what_the_goldens_give_today() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert text.count(DOC_BEGIN) == 1 and text.count(DOC_END) == 1
    shown = text[text.index(DOC_BEGIN) : text.index(DOC_END) + len(DOC_END)]
    assert shown == doc_figures(), "figures moved: run python tests/servers_measure.py --doc and put its block in docs/servers.md"
