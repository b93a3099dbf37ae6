"""The audit report as one self-contained HTML page, rendered from the JSON form of the audit.

The page is a view of :meth:`kimi_recon.dataset.DatasetAudit.to_dict` and nothing else: every figure it shows
is read from that mapping (and carries ``data-key``, the JSON path it came from, so a test can check the two
agree). No network requests and no script: inline CSS and inline SVG, and a Content-Security-Policy that
forbids fetching anything. Every string from the data (record ids, token text, error messages) is untrusted
and HTML-escaped; long strings are clipped so the page stays small whatever the audit held.

To add a section, write a function ``(report) -> str`` that returns "" when its keys are absent, and add it
to :data:`SECTIONS`.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

__all__ = ["SECTIONS", "render_html"]

KIND_COLORS: Final[dict[str, str]] = {
    "exact": "#2e7d32",
    "non_canonical_bpe": "#7cb342",
    "whitespace_drift": "#f9a825",
    "reasoning_missing": "#ef6c00",
    "special_token_mismatch": "#c62828",
    "tool_call_format": "#8e24aa",
    "text_mismatch": "#5d4037",
    "error": "#546e7a",
}
REGION_COLORS: Final[dict[str, str]] = {
    "reasoning": "#5c6bc0",
    "content": "#26a69a",
    "tool_calls": "#ab47bc",
    "end": "#ef5350",
}
_CSP: Final = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'; base-uri 'none'"
_CSS: Final = """
:root { color-scheme: light; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; --soft: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif; color: var(--fg);
       margin: 0 auto; max-width: 1180px; padding: 24px 28px 60px; background: #fff; }
h1 { font-size: 24px; margin: 0 0 4px; } h2 { font-size: 19px; margin: 34px 0 10px; border-bottom: 1px solid var(--line);
     padding-bottom: 4px; } h3 { font-size: 15px; margin: 0 0 6px; }
.muted { color: var(--muted); } .small { font-size: 12.5px; }
code, .mono, td.tok, .tokid { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 18px 0 6px; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 10px 16px; min-width: 170px; background: var(--soft); }
.card .big { font-size: 26px; font-weight: 650; display: block; }
.card.good { border-left: 6px solid #2e7d32; } .card.bad { border-left: 6px solid #c62828; }
.card.warn { border-left: 6px solid #546e7a; }
table { border-collapse: collapse; margin: 6px 0 10px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; font-size: 13px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.bar { height: 12px; min-width: 1px; border-radius: 2px; display: inline-block; vertical-align: middle; }
.barcell { width: 260px; }
.sw { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px; vertical-align: -1px; }
.kind { font-weight: 600; }
nav.toc a { margin-right: 10px; white-space: nowrap; }
.record { border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; margin: 14px 0; }
.record:target { outline: 3px solid #0969da; }
.record .head { display: flex; flex-wrap: wrap; gap: 6px 14px; align-items: baseline; }
.pill { border-radius: 10px; padding: 1px 8px; color: #fff; font-size: 12.5px; font-weight: 600; }
.flag { border: 1px solid var(--line); border-radius: 10px; padding: 0 7px; font-size: 12px; background: var(--soft); }
.sev { border-radius: 10px; padding: 0 7px; font-size: 12px; }
.sev-loss { background: #ffebe9; border-color: #cf222e; color: #a40e26; }
.sev-risk { background: #fff8c5; border-color: #bf8700; color: #7d4e00; }
.verdict.pass { color: #1a7f37; }
.verdict.fail { color: #cf222e; }
.sev-unlikely { background: #f6f8fa; border-color: #8c959f; color: #57606a; }
.sev-info { background: #ddf4ff; border-color: #0969da; color: #0550ae; }
.detail { margin: 6px 0 8px; overflow-wrap: anywhere; }
table.diff { width: 100%; table-layout: fixed; }
table.diff td, table.diff th { padding: 2px 8px; }
table.diff col.ix { width: 64px; } table.diff col.id { width: 84px; }
td.tok { white-space: pre-wrap; overflow-wrap: anywhere; }
tr.first td { background: #fff4d6; } tr.first td.ix::before { content: "\\25B6  "; color: #c62828; }
tr.ne td.tok, tr.ne td.tokid { background: #ffebe9; } tr.first.ne td.tok { background: #ffd8d3; }
.sp { background: #ddf4ff; color: #0550ae; border: 1px solid #54aeff; border-radius: 4px; padding: 0 3px; font-weight: 600; }
.ws { color: #8c959f; } .raw { color: #9a6700; }
.tokid { color: var(--muted); font-size: 12.5px; }
bdi { unicode-bidi: isolate; }
svg text { font: 11px system-ui, sans-serif; fill: #59636e; }
.legend span { margin-right: 14px; white-space: nowrap; }
footer { margin-top: 40px; font-size: 12.5px; color: var(--muted); }
"""

# Display limits: a hostile record can hold megabytes in its id or text; the page shows a clipped copy.
ID_CHARS: Final = 120
MESSAGE_CHARS: Final = 400
DETAIL_CHARS: Final = 600
TOKEN_CHARS: Final = 80
#: The most characters of one value :func:`esc` writes: the last guard, for a value no section clipped.
ESC_CHARS: Final = 2 * DETAIL_CHARS
#: Flags shown on one record (a record has a handful; the JSON has them all).
FLAGS_SHOWN: Final = 20
#: Rows of the unreadable-records table (the JSON's ``errors`` are already capped by the audit).
ERROR_ROWS: Final = 100

Report = Mapping[str, Any]


# -- escaping and figures -------------------------------------------------------------------------------


def esc(value: object) -> str:
    """HTML-escaped text (quotes too), with lone surrogates made ``\\udXXX`` so the page is valid UTF-8, and
    cut to :data:`ESC_CHARS` whatever the caller clipped (so no data string reaches the page whole)."""
    text = clip(str(value), ESC_CHARS).encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(text, quote=True)


def clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def fmt_int(value: int) -> str:
    return f"{value:,}"


def fmt_pct(value: float) -> str:
    return f"{100 * value:.2f}%"


def figure(path: Sequence[str | int], value: Any, fmt: Callable[[Any], str] = fmt_int, tag: str = "span", cls: str = "") -> str:
    """A figure read from the report at ``path``, tagged with that path (JSON list) for checking."""
    kind = "pct" if fmt is fmt_pct else "int"
    klass = f' class="{cls}"' if cls else ""
    if any(isinstance(part, str) and len(part) > ID_CHARS for part in path):
        # a path through a data string (a provider name) would carry that string whole, unclipped
        return f'<{tag}{klass} data-format="{kind}">{esc(fmt(value))}</{tag}>'
    return f'<{tag}{klass} data-key="{html.escape(json.dumps(list(path)), quote=True)}" data-format="{kind}">{esc(fmt(value))}</{tag}>'


def table(headers: Sequence[tuple[str, str]], rows: Iterable[Sequence[str]], cls: str = "") -> str:
    """A table from already-escaped cells; ``headers`` are (label, css class)."""
    head = "".join(f'<th class="{c}">{esc(h)}</th>' for h, c in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="{headers[i][1]}">{cell}</td>' for i, cell in enumerate(row)) + "</tr>" for row in rows
    )
    klass = f' class="{cls}"' if cls else ""
    return f"<table{klass}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def bar(share: float, color: str) -> str:
    width = max(0.0, min(1.0, share)) * 100
    return f'<span class="bar" style="width:{width:.2f}%;background:{color}"></span>'


def swatch(color: str) -> str:
    return f'<span class="sw" style="background:{color}"></span>'


def anchor(record: Mapping[str, Any], id_key: str = "id") -> str:
    """The record's place as the text says it (``line-12``, ``record-3``: the 0-based index of an iterable), so
    ``report.html#line-12`` is the record the summary calls line 12."""
    line = record.get("line")
    return f"line-{int(line)}" if line is not None else f"record-{int(record['index'])}"


def where(record: Mapping[str, Any], id_key: str = "id") -> str:
    """``line 12 · id 'abc'`` (escaped), as the text summary says it."""
    line = record.get("line")
    place = f"line {int(line)}" if line is not None else f"record {int(record['index'])}"
    rid = record.get(id_key)
    return esc(place) + (f" · id <bdi class=\"mono\">{esc(clip(str(rid), ID_CHARS))}</bdi>" if rid is not None else "")


# -- sections ---------------------------------------------------------------------------------------------


def _card(label: str, big: str, small: str, cls: str = "") -> str:
    """A headline figure: ``big`` and ``small`` are markup already escaped."""
    return f'<div class="card {cls}"><span class="muted small">{esc(label)}</span><span class="big">{big}</span>{small}</div>'


def section_summary(report: Report) -> str:
    total, exact = int(report["total"]), int(report["counts"].get("exact", 0))
    errors = int(report.get("error_count", 0))
    good = "good" if total and exact == total else "bad"
    cards = [
        _card("exact, out of all records", f'{figure(["counts", "exact"], exact)} / {figure(["total"], total)}',
              f'{figure(["exact_rate_of_all"], report.get("exact_rate_of_all", 0.0), fmt_pct)} of all records', good),
        _card("compared", figure(["compared"], report["compared"]),
              f'exact {figure(["exact_rate"], report["exact_rate"], fmt_pct)} of compared'),
        _card("benign (exact + non_canonical_bpe)", figure(["benign_count"], report["benign_count"]),
              f'{figure(["benign_rate"], report["benign_rate"], fmt_pct)} of compared'),
        _card("unreadable records", figure(["error_count"], errors),
              f'{figure(["error_rate"], report.get("error_rate", 0.0), fmt_pct)} of all records', "warn" if errors else ""),
    ]
    think = "on" if report.get("thinking") else "off"
    used: Mapping[str, int] = report.get("profile_counts") or {}
    profiles = (
        "profiles " + ", ".join(f"<code>{esc(p)}</code> {esc(fmt_int(int(n)))}" for p, n in sorted(used.items()))
        if used
        else f'profile <code>{esc(report.get("profile", "?"))}</code>'
    )
    meta = f"{profiles}, thinking {think} unless a record says otherwise"
    if report.get("elapsed_seconds"):
        seconds = float(report["elapsed_seconds"])
        meta += f" · audited in {seconds:.2f} s"
    return f'{_run_line(report)}<p class="muted">{meta}</p><div class="cards">{"".join(cards)}</div>'


def _run_line(report: Report) -> str:
    """The verdict and what was audited, when the command said (``run``): the first thing the page shows."""
    run = report.get("run")
    if not isinstance(run, Mapping):
        return ""
    failures = [str(f) for f in run.get("failures") or ()]
    verdict = (
        '<p class="verdict pass"><strong>PASS</strong>' if run.get("passed")
        else '<p class="verdict fail"><strong>FAIL</strong>: ' + "; ".join(esc(f) for f in failures)
    )
    # an option with its value (``--min-exact 0.99``); a rule every audit has is its name (``True``)
    limits = ", ".join(esc(str(k)) if v is True else f"{esc(str(k))} {esc(str(v))}" for k, v in (run.get("thresholds") or {}).items() if v is not None)
    facts = (
        f'<p class="muted small">input <code>{esc(str(run.get("input", "?")))}</code> · kimi-recon '
        f'{esc(str(run.get("kimi_recon_version", "?")))} · {esc(str(run.get("written_at", "?")))}'
        f'{" · thresholds: " + limits if limits else ""}</p>'
    )
    return verdict + "</p>" + facts


def section_kinds(report: Report) -> str:
    counts: Mapping[str, int] = report["counts"]
    rates: Mapping[str, float] = report.get("rates", {})
    compared = max(1, int(report["compared"]))
    firsts: dict[str, str] = {}
    for rec in report.get("worst", []):
        firsts.setdefault(rec["kind"], anchor(rec))
    rows = []
    for kind, count in counts.items():
        color = KIND_COLORS.get(kind, "#888")
        name = f'{swatch(color)}<span class="kind">{esc(kind)}</span>'
        if kind in firsts:
            name += f' <a class="small" href="#{firsts[kind]}">worst example</a>'
        rows.append([
            name,
            figure(["counts", kind], count),
            figure(["rates", kind], rates.get(kind, 0.0), fmt_pct) if kind in rates else "",
            bar(int(count) / compared, color),
        ])
    errors = int(report.get("error_count", 0))
    rows.append([
        f'{swatch(KIND_COLORS["error"])}<span class="kind">unreadable</span>' + (' <a class="small" href="#unreadable">list</a>' if errors else ""),
        figure(["error_count"], errors),
        figure(["error_rate"], report.get("error_rate", 0.0), fmt_pct) + ' <span class="muted small">of all</span>',
        bar(errors / max(1, int(report["total"])), KIND_COLORS["error"]),
    ])
    heads = [("kind", ""), ("records", "num"), ("share of compared", "num"), ("", "barcell")]
    note = '<p class="muted small">Kinds from most benign to most serious; a record counts under the most serious kind it shows.</p>'
    return "<h2 id=\"kinds\">Mismatch kinds</h2>" + table(heads, rows) + note


def _count_table(report: Report, key: str, label: str) -> str:
    counts: Mapping[str, int] = report.get(key) or {}
    if not counts:
        return f'<p class="muted">No {esc(label)}s.</p>'
    compared = max(1, int(report["compared"]))
    ordered = sorted(counts.items(), key=lambda kv: (-int(kv[1]), kv[0]))
    rows = [[f"<code>{esc(name)}</code>", figure([key, name], n), bar(int(n) / compared, "#57606a")] for name, n in ordered]
    return table([(label, ""), ("records", "num"), ("", "barcell")], rows)


def _severity(report: Report, code: str) -> str:
    """A code's severity: the report's own (``flag_severities``), else this version's table, else unknown."""
    written = (report.get("flag_severities") or {}).get(code)
    if isinstance(written, str):
        return written
    from ..errors import InvalidInputError
    from ..flags import severity_of

    try:
        return severity_of(code).value
    except InvalidInputError:
        return "unknown"


def _flag_table(report: Report) -> str:
    counts: Mapping[str, int] = report.get("flag_counts") or {}
    if not counts:
        return '<p class="muted">No flags.</p>'
    compared = max(1, int(report["compared"]))
    ordered = sorted(counts.items(), key=lambda kv: (-int(kv[1]), kv[0]))
    rows = [
        [f"<code>{esc(name)}</code>", _severity_badge(_severity(report, name)), figure(["flag_counts", name], n), bar(int(n) / compared, "#57606a")]
        for name, n in ordered
    ]
    return table([("flag", ""), ("severity", ""), ("records", "num"), ("", "barcell")], rows)


def _severity_badge(severity: str) -> str:
    return f'<span class="sev sev-{esc(severity)}">{esc(severity)}</span>'


def section_flags(report: Report) -> str:
    if "flag_counts" not in report:
        return ""
    out = "<h2 id=\"flags\">Reconstruction flags</h2>"
    out += (
        '<p class="muted small">What reconstruction noticed that may make ids differ (a record can have several). '
        "Severity: info, nothing may differ; unlikely, a server could have changed text the model rarely writes "
        "and nothing in the response can tell (how often the model wrote it is in the flag's <code>seen</code>); "
        "risk, the evidence says the ids may differ; loss, they differ or almost surely do (drop those before "
        "training).</p>"
    )
    by_severity: Mapping[str, int] = report.get("severity_counts") or {}
    if by_severity:
        out += '<p class="small">records by worst flag: ' + ", ".join(
            f"{_severity_badge(s)} {esc(fmt_int(int(by_severity.get(s, 0))))}" for s in ("loss", "risk", "unlikely", "info", "none")
        ) + "</p>"
    out += _flag_table(report)
    if report.get("source_counts"):
        out += "<h3>Where the ids came from</h3>" + _count_table(report, "source_counts", "source")
    return out


def section_first_diff(report: Report) -> str:
    hist = report.get("first_diff_histogram")
    if not hist:
        return ""
    bins, regions = int(hist["bins"]), [str(r) for r in hist["regions"]]
    counts: Mapping[str, Sequence[int]] = hist["counts"]
    stacks = [sum(int(counts[r][b]) for r in regions) for b in range(bins)]
    peak = max(stacks) or 1
    width, height, left, bottom, top = 640, 220, 40, 30, 12
    plot_h = height - bottom - top
    col = (width - left - 10) / bins
    parts = [f'<svg role="img" aria-label="first differences by position and region" width="{width}" height="{height}" viewBox="0 0 {width} {height}">']
    for tick in (0, peak // 2, peak) if peak > 1 else (0, peak):
        y = top + plot_h - plot_h * tick / peak
        parts.append(f'<line x1="{left}" x2="{width - 10}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eaeef2"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick}</text>')
    for b in range(bins):
        y = top + plot_h
        x = left + b * col + 3
        for r in regions:
            n = int(counts[r][b])
            if not n:
                continue
            h = plot_h * n / peak
            y -= h
            label = f"{r}, {100 * b // bins}–{100 * (b + 1) // bins}% of the turn: {n}"
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{col - 6:.1f}" height="{h:.1f}" fill="{REGION_COLORS.get(r, "#888")}">'
                f"<title>{esc(label)}</title></rect>"
            )
        parts.append(f'<text x="{left + (b + 0.5) * col:.1f}" y="{height - 12}" text-anchor="middle">{100 * b // bins}–{100 * (b + 1) // bins}%</text>')
    parts.append("</svg>")
    legend = '<div class="legend small">' + "".join(
        f"<span>{swatch(REGION_COLORS.get(r, '#888'))}{esc(r)}</span>" for r in regions
    ) + "</div>"
    heads = [("region", "")] + [(f"{100 * b // bins}–{100 * (b + 1) // bins}%", "num") for b in range(bins)] + [("all", "num")]
    totals = hist.get("region_totals", {})
    rows = [
        [f"{swatch(REGION_COLORS.get(r, '#888'))}{esc(r)}"]
        + [figure(["first_diff_histogram", "counts", r, b], int(counts[r][b])) for b in range(bins)]
        + [figure(["first_diff_histogram", "region_totals", r], totals.get(r, sum(counts[r])))]
        for r in regions
    ]
    intro = (
        '<p class="muted small">Where the first differing id falls, as a share of the reference\'s length, and in which part of '
        "the turn: reasoning, content, tool calls, or the end (<code>&lt;|im_end|&gt;</code>, or past one side's last id).</p>"
    )
    return '<h2 id="where">Where the first difference falls</h2>' + intro + "".join(parts) + legend + table(heads, rows)


def section_errors(report: Report) -> str:
    count = int(report.get("error_count", 0))
    if not count:
        return ""
    errors: Sequence[Mapping[str, Any]] = report.get("errors", [])[:ERROR_ROWS]
    rows = [
        [
            f'<span id="err-{anchor(e)}">{where(e, "record_id")}</span>',
            f"<code>{esc(clip(str(e['field']), ID_CHARS))}</code>" if e.get("field") else "",
            f"<bdi>{esc(clip(str(e.get('message', '')), MESSAGE_CHARS))}</bdi>",
            f"<code>{esc(clip(str(e.get('error_type', '')), ID_CHARS))}</code>",
        ]
        for e in errors
    ]
    out = f'<h2 id="unreadable">Unreadable records ({figure(["error_count"], count)})</h2>'
    out += '<p class="muted small">Records that could not be compared: counted in the total, never dropped.</p>'
    out += table([("record", ""), ("field", ""), ("problem", ""), ("error", "")], rows)
    if count > len(errors):
        out += f'<p class="muted">… and {esc(fmt_int(count - len(errors)))} more (the audit keeps the first {esc(len(errors))}).</p>'
    return out


def _token_cell(tok: Mapping[str, Any] | None) -> tuple[str, str]:
    """(token cell, id cell) for one token of a window; "(none)" past that side's end."""
    if tok is None:
        return '<span class="muted small">(none)</span>', ""
    tid = int(tok["id"])
    hover = esc(f"id {tid} · bytes {clip(str(tok.get('bytes', '')), 8 * TOKEN_CHARS)}" + (" · special token" if tok.get("special") else ""))
    if tok.get("special"):
        return f'<span class="sp" title="{hover}">{esc(clip(str(tok.get("text", "")), TOKEN_CHARS))}</span>', f'<span class="tokid">{tid}</span>'
    return f'<span title="{hover}">{_visible(tok)}</span>', f'<span class="tokid">{tid}</span>'


_WHITESPACE: Final = {" ": "·", "\n": "↵\n", "\t": "→", "\r": "\\r"}


#: Characters that show as nothing: zero-width joiners and spaces, directional marks and overrides, BOM.
_INVISIBLE: Final = frozenset("\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2060\ufeff\u00ad")


def _visible(tok: Mapping[str, Any]) -> str:
    """An ordinary token's text with whitespace and control characters made visible, escaped. Bytes that are
    only part of a UTF-8 character (the text has them as ``\\xNN``) are shown as such, styled apart."""
    try:
        text = bytes.fromhex(str(tok.get("bytes", ""))).decode("utf-8")
    except ValueError:  # not whole characters (or no bytes given): the escaped text as the JSON has it
        return f'<span class="raw">{esc(clip(str(tok.get("text", "")), TOKEN_CHARS))}</span>'
    out = []
    for ch in clip(text, TOKEN_CHARS):
        if ch in _WHITESPACE:
            out.append(f'<span class="ws">{_WHITESPACE[ch]}</span>')
        elif ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0:
            out.append(f'<span class="raw">\\x{ord(ch):02x}</span>')
        elif ch.isspace() or ch in _INVISIBLE:  # other spaces, joiners, marks: drift hides in them
            out.append(f'<span class="ws">&lt;U+{ord(ch):04X}&gt;</span>')
        else:
            out.append(esc(ch))
    return "".join(out)


def _diff_table(comparison: Mapping[str, Any]) -> str:
    first = comparison.get("first_diff")
    ref = {int(t["index"]): t for t in comparison.get("reference_window", [])}
    rec = {int(t["index"]): t for t in comparison.get("reconstructed_window", [])}
    indices = sorted(set(ref) | set(rec))
    if first is not None and (not indices or indices[-1] < first):
        indices.append(int(first))  # the difference is one side ending: show the row where it ends
    rows = []
    for i in indices:
        a, b = ref.get(i), rec.get(i)
        cls = " ".join(
            c for c, on in (("first", i == first), ("ne", (a or {}).get("id") != (b or {}).get("id"))) if on
        )
        ta, ia = _token_cell(a)
        tb, ib = _token_cell(b)
        rows.append(f'<tr class="{cls}"><td class="ix tokid">{i}</td><td class="tokid">{ia}</td><td class="tok">{ta}</td>'
                    f'<td class="tokid">{ib}</td><td class="tok">{tb}</td></tr>')
    cols = '<colgroup><col class="ix"><col class="id"><col><col class="id"><col></colgroup>'
    head = "<thead><tr><th>index</th><th>id</th><th>reference (what the model generated)</th><th>id</th><th>reconstruction</th></tr></thead>"
    return f'<table class="diff">{cols}{head}<tbody>{"".join(rows)}</tbody></table>'


def _record_card(n: int, record: Mapping[str, Any]) -> str:
    c: Mapping[str, Any] = record.get("comparison") or {}
    kind = str(record.get("kind", c.get("kind", "?")))
    color = KIND_COLORS.get(kind, "#888")
    also = [k for k in c.get("kinds", []) if k != kind]
    head = [
        f'<a href="#{anchor(record)}" class="mono">#{n}</a>',
        f'<span class="pill" style="background:{color}">{esc(kind)}</span>',
        f"<span>{where(record)}</span>",
    ]
    if also:
        head.append(f'<span class="muted small">also {esc(", ".join(map(str, also)))}</span>')
    facts = (
        f"reference {esc(fmt_int(int(c.get('reference_len', 0))))} ids, reconstruction {esc(fmt_int(int(c.get('reconstructed_len', 0))))} ids; "
        f"first difference at index {esc(c.get('first_diff'))} ({esc(c.get('region'))}); difference size {esc(c.get('diff_size'))}"
        f"; ids from {esc(clip(str(record.get('source')), ID_CHARS))}"
    )
    # a flag repeats once per field it concerns; older reports hold bare codes, newer ones flag objects
    times = Counter(str(f.get("code")) if isinstance(f, Mapping) else str(f) for f in record.get("flags", []))
    written = {str(f.get("code")): str(f["severity"]) for f in record.get("flags", []) if isinstance(f, Mapping) and "severity" in f}
    flags = "".join(
        f'<span class="flag sev-{esc(written.get(f) or _severity({}, f))}">{esc(clip(f, ID_CHARS))}{f" ×{n}" if n > 1 else ""}</span> '
        for f, n in list(times.items())[:FLAGS_SHOWN]
    )
    return (
        f'<div class="record" id="{anchor(record)}"><div class="head">{"".join(head)}</div>'
        f'<div class="small muted">{facts}</div>'
        f'<div class="detail">{esc(clip(str(c.get("detail", "")), DETAIL_CHARS))}</div>'
        + (f'<div class="small">flags: {flags}</div>' if flags else "")
        + _diff_table(c)
        + "</div>"
    )


def section_worst(report: Report) -> str:
    worst: Sequence[Mapping[str, Any]] = report.get("worst") or []
    if "worst" not in report:
        return ""
    limit = report.get("worst_limit", len(worst))
    out = f'<h2 id="worst">Worst records ({esc(len(worst))} shown, up to {esc(limit)})</h2>'
    if not worst:
        none = "Every compared record is exact." if int(report.get("compared", 0)) else "No record was compared."
        return out + f'<p class="muted">{none}</p>'
    out += (
        '<p class="muted small">The worst of each kind in turn, most serious kind first, largest difference first. Each table '
        "lines up both sides by index around the first difference (▶); special tokens are boxed; hover a token for its id and "
        "bytes. <code>·</code> is a space, <code>↵</code> a newline, <code>→</code> a tab.</p>"
    )
    toc = "".join(
        f'<a href="#{anchor(r)}">#{n} {esc(r.get("kind", ""))} · {where(r)}</a> ' for n, r in enumerate(worst, 1)
    )
    out += f'<nav class="toc small">{toc}</nav>'
    return out + "".join(_record_card(n, r) for n, r in enumerate(worst, 1))


def section_token_counts(report: Report) -> str:
    """The usage check per provider (``token_counts``: see :mod:`kimi_recon.usage_stats`)."""
    providers: Mapping[str, Any] = (report.get("token_counts") or {}).get("providers") or {}
    if not providers:
        return ""
    base = ["token_counts", "providers"]
    rows, detail = [], []
    for name, p in providers.items():
        share = float(p["agree_rate"])
        rows.append([
            f"<bdi>{esc(clip(str(name), ID_CHARS))}</bdi>",
            figure([*base, name, "rows"], p["rows"]),
            figure([*base, name, "agree"], p["agree"]),
            figure([*base, name, "agree_rate"], share, fmt_pct),
            bar(share, KIND_COLORS["exact"] if share == 1.0 else KIND_COLORS["whitespace_drift"]),
        ])
        for field, f in p["fields"].items():
            path = [*base, name, "fields", field]
            seen = ", ".join(f"<code>{esc(c)}</code> {figure([*path, 'conventions', c], n)}" for c, n in f["conventions"].items())
            deltas = ", ".join(
                f"{esc(format(int(d['delta']), '+d'))} ×{figure([*path, 'top_deltas', i, 'rows'], d['rows'])}"
                for i, d in enumerate(f["top_deltas"])
            )
            detail.append([
                f"<bdi>{esc(clip(str(name), ID_CHARS))}</bdi>",
                f"<code>{esc(field)}</code>",
                figure([*path, "checked"], f["checked"]),
                figure([*path, "mismatch"], f["mismatch"]),
                seen or '<span class="muted">none</span>',
                deltas,
            ])
    out = '<h2 id="usage">Server token counts</h2>'
    out += (
        '<p class="muted small">Each record\'s <code>usage</code> figures against its rebuilt ids. A record agrees when a '
        "known counting convention explains every figure (<code>exact</code>, <code>without_stop</code>: the stop token "
        "not counted, <code>with_eos</code>: an [EOS] counted after it). A provider whose prompt or completion counts "
        "disagree did not return, or did not read, what the ids say.</p>"
    )
    out += table([("provider", ""), ("records checked", "num"), ("agree", "num"), ("share", "num"), ("", "barcell")], rows)
    out += table(
        [("provider", ""), ("figure", ""), ("checked", "num"), ("mismatches", "num"), ("conventions", ""), ("most common deltas (reported − rebuilt)", "")],
        detail,
    )
    return out


#: The page's sections, in order; each returns "" when the report has no data for it.
SECTIONS: list[Callable[[Report], str]] = [
    section_summary,
    section_kinds,
    section_first_diff,
    section_flags,
    section_token_counts,
    section_errors,
    section_worst,
]


def render_html(report: Report, *, title: str = "kimi-recon audit") -> str:
    """The report (``DatasetAudit.to_dict()``, or that JSON read back) as one self-contained HTML page."""
    body = "".join(section(report) for section in SECTIONS)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{esc(title)}: {esc(fmt_int(int(report['total'])))} records</h1>"
        f"{body}"
        '<footer>Written by kimi-recon. Every figure here is in the audit\'s JSON report (<code>--json</code>).</footer>'
        "</body></html>\n"
    )
