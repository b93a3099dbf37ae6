"""Writing an audit's reports (JSON, HTML): checked paths, written whole or not at all."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import InvalidInputError

if TYPE_CHECKING:
    from .dataset import DatasetAudit


def check_outputs(source: str | os.PathLike[str], *outputs: str | os.PathLike[str] | None) -> None:
    """Refuse, before any work, an output that is the input or that another output also names."""
    seen = {Path(source).resolve()}
    for out in outputs:
        if out is None:
            continue
        path = Path(out).resolve()
        if path in seen:
            raise InvalidInputError(f"{os.fspath(out)!r} is the input or another report's file; refusing to overwrite it", field="output")
        seen.add(path)


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to a temporary file in the target's folder and rename it into place once complete."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private; a report is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def report_html(report: DatasetAudit) -> str:
    """The HTML page of ``report``, rendered from its JSON form read back (so the page shows only what the JSON holds)."""
    from ._report_html import render_html

    return render_html(json.loads(json.dumps(report.to_dict())))


def write_reports(report: DatasetAudit, *, json_path: str | os.PathLike[str] | None = None, html_path: str | os.PathLike[str] | None = None) -> None:
    if json_path is not None:
        write_text_atomic(json_path, json.dumps(report.to_dict(), ensure_ascii=False, indent=2))
    if html_path is not None:
        write_text_atomic(html_path, report_html(report))
