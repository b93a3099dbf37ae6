"""Writing an audit's reports (JSON, HTML) through the package's output edge (:mod:`kimi_recon._io`)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ._io import SURROGATE, atomic_output, is_stdio
from .errors import OutputFileError

if TYPE_CHECKING:
    from .dataset import DatasetAudit


def check_distinct_outputs(outputs: Sequence[tuple[str, str | os.PathLike[str] | None]]) -> None:
    """Refuse, before any work, two reports written to one file (or both to stdout)."""
    seen: dict[str, str] = {}
    for option, path in outputs:
        if path is None:
            continue
        key = "-" if is_stdio(path) else os.path.realpath(os.fspath(path))
        if key in seen:
            raise OutputFileError(f"{os.fspath(path)} is also the {seen[key]} report's file; give each report its own", field=option)
        seen[key] = option


def report_html(report: DatasetAudit) -> str:
    """The HTML page of ``report``, rendered from its JSON form read back (so the page shows only what the JSON holds)."""
    from ._report_html import render_html

    return render_html(json.loads(json.dumps(report.to_dict())))


def write_reports(
    report: DatasetAudit,
    *,
    json_path: str | os.PathLike[str] | None = None,
    html_path: str | os.PathLike[str] | None = None,
) -> None:
    """Write the JSON and/or HTML report, each replacing its file whole (``-`` is stdout)."""
    if json_path is not None:
        # A record id or text read from JSON may hold a lone surrogate (``"\ud800"``), which UTF-8 cannot
        # carry: written as a JSON escape it reads back as the same string.
        text = SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
        with atomic_output(json_path, "--json") as f:
            f.write(text + "\n")
    if html_path is not None:
        page = report_html(report)
        with atomic_output(html_path, "--html") as f:
            f.write(page)
