"""Writing an audit's reports (JSON, HTML) through the package's output edge (:mod:`kimi_recon._base.files`)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .._base.files import SURROGATE, atomic_output, is_device, is_stdio
from ..errors import OutputFileError

if TYPE_CHECKING:
    from .._records.record import RecordResult
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


def report_html(report: DatasetAudit, run: Mapping[str, Any] | None = None) -> str:
    """The HTML page of ``report``, rendered from its JSON form read back (so the page shows only what the JSON holds)."""
    from .report_html import render_html

    return render_html(json.loads(json.dumps(_with_run(report, run))))


def _write_json(out: TextIO, report: DatasetAudit, run: Mapping[str, Any] | None, records: TextIO | None) -> None:
    """The JSON report, indented; with ``records`` (one verdict's JSON a line, read from its start), ``"records"``
    last, one verdict a line, copied through as they are: the report never holds them in memory."""
    # A record id or text read from JSON may hold a lone surrogate (``"\ud800"``), which UTF-8 cannot carry:
    # written as a JSON escape it reads back as the same string.
    head = SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(_with_run(report, run), ensure_ascii=False, indent=2))
    if records is None:
        out.write(head + "\n")
        return
    out.write(head[: -len("\n}")] + ',\n  "records": [')
    first = True
    for line in records:
        out.write(("\n    " if first else ",\n    ") + line.rstrip("\n"))
        first = False
    out.write("]\n}\n" if first else "\n  ]\n}\n")


def record_verdict(result: RecordResult) -> dict[str, Any]:
    """One record's verdict, a line of ``audit --records``: where it is (``index`` from 0, ``line`` in the file or
    None, ``id``), the ``profile`` that rebuilt it, and :meth:`RecordResult.to_row`'s flat columns (``kind``,
    ``exact``, ``benign``, ``first_diff``, ``region``, ``detail``, ``source``, ``flags``, ``max_severity``,
    ``error_field``, ``error``): the same keys and types on every line, so ``jq``, pandas and ``datasets`` read it as
    a table."""
    return {"index": result.index, "line": result.line, "id": result.record_id, "profile": result.profile, **result.to_row(prefix="")}


def _with_run(report: DatasetAudit, run: Mapping[str, Any] | None) -> dict[str, Any]:
    """``report.to_dict()`` with the ``run`` the command adds (what was read, by which version, when, the verdict)."""
    return {**report.to_dict(), "run": dict(run)} if run else report.to_dict()


def run_facts(input_name: str, failures: Sequence[str], thresholds: Mapping[str, Any]) -> dict[str, Any]:
    """What a report says about its run: the input, the kimi-recon version, when (UTC), and the pass/fail verdict
    with the thresholds it was judged by."""
    import datetime
    from importlib.metadata import PackageNotFoundError, version

    try:
        own = version("kimi-recon")
    except PackageNotFoundError:  # run from a source tree that was never installed
        own = "unknown"
    return {
        "input": input_name,
        "kimi_recon_version": own,
        "written_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "passed": not failures,
        "failures": list(failures),
        "thresholds": dict(thresholds),
    }


def write_reports(
    report: DatasetAudit,
    *,
    json_path: str | os.PathLike[str] | None = None,
    html_path: str | os.PathLike[str] | None = None,
    run: Mapping[str, Any] | None = None,
    records: TextIO | None = None,
) -> None:
    """Write the JSON and/or HTML report, each replacing its file whole (``-`` is stdout); ``run``
    (:func:`run_facts`) is written in both as ``"run"``. ``records``, a file of one verdict (:func:`record_verdict`)
    as JSON a line, becomes the JSON report's ``"records"``, copied from the file's start."""
    outputs: list[tuple[str | os.PathLike[str], str]] = []
    if json_path is not None:
        outputs.append((json_path, "--json"))
    if html_path is not None:
        outputs.append((html_path, "--html"))
    # Files first, stdout last: a reader of stdout that goes away (``| head``) must not cost the files.
    for path, option in sorted(outputs, key=lambda output: is_stdio(output[0])):
        with atomic_output(path, option) as f:
            if option == "--json":
                if records is not None:
                    records.seek(0)
                _write_json(f, report, run, records)
            else:
                f.write(report_html(report, run))
