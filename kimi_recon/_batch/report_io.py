"""Writing an audit's reports (JSON, HTML) through the package's output edge (:mod:`kimi_recon._base.files`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._base.files import SURROGATE, atomic_output, is_device, is_stdio
from ..errors import OutputFileError

if TYPE_CHECKING:
    from ..dataset import DatasetAudit


def check_distinct_outputs(outputs: Sequence[tuple[str, str | os.PathLike[str] | None]]) -> None:
    """Refuse, before any work, two outputs written to one file (or both to stdout): the same path, a
    symlink to it, or a hard link (same device and inode). Devices such as ``/dev/null`` may be shared."""
    seen: dict[object, str] = {}
    for option, path in outputs:
        if path is None or is_device(path):
            continue
        keys: list[object] = ["-"] if is_stdio(path) else [os.path.realpath(os.fspath(path))]
        with contextlib.suppress(OSError):
            if not is_stdio(path):
                st = os.stat(os.fspath(path))
                keys.append((st.st_dev, st.st_ino))
        for key in keys:
            if key in seen:
                raise OutputFileError(
                    f"{os.fspath(path)} is also the {seen[key]} {_what(seen[key])}; writing both would lose one. Give each its own",
                    field=option,
                )
        for key in keys:
            seen[key] = option


def _what(option: str) -> str:
    return "report's file" if option in ("--json", "--html") else "file"


def report_html(report: DatasetAudit) -> str:
    """The HTML page of ``report``, rendered from its JSON form read back (so the page shows only what the JSON holds)."""
    from .report_html import render_html

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
