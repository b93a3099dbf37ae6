"""What kimi-recon makes of the responses real servers return: the measure over tests/data/servers/.

Each golden row holds the ids the model generated and the chat completion one server build returned
for them (scripts/server_conformance.py wrote it by running that build's own parsers). A row's outcome:

* ``exact``: the rebuilt ids are the generated ids (its flags, if any, are kept in ``flag_codes``);
* ``flagged``: the rebuilt ids differ and at least one flag above ``info`` says the ids may be inexact;
* ``refused``: ``turn_from_response`` refused the response (a named error);
* ``silent_wrong``: the rebuilt ids differ and nothing above ``info`` says so: the worst outcome;
* ``server_error``: the server itself failed on the output (no response to rebuild).

``measure_row(row, usage=True)`` runs the usage check as a user with the server's ``usage`` would;
``usage=False`` measures the message alone. srv-lib asserts on these functions; pass ``rebuild`` to
measure another rebuild function (the tests check that a wrong one is caught).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kimi_recon
from kimi_recon.errors import KimiReconError
from kimi_recon.flags import Severity, severity_of
from kimi_recon.usage_check import check_with_profile

SERVERS_DIR = Path(__file__).parent / "data" / "servers"
OUTCOMES = ("exact", "flagged", "refused", "silent_wrong", "server_error")

#: (row) -> (rebuilt ids, flag codes); raises KimiReconError to refuse
Rebuild = Callable[[Mapping[str, Any], bool], tuple[list[int], list[str]]]


@dataclass(frozen=True)
class RowOutcome:
    case_id: str
    server: str
    profile: str
    thinking: bool
    shape: str
    loss: str
    outcome: str
    flag_codes: tuple[str, ...] = ()
    detail: str = ""


def load_rows(directory: Path = SERVERS_DIR) -> list[dict[str, Any]]:
    """Every golden row of every server build, in file order."""
    rows: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def load_swapped_rows(directory: Path = SERVERS_DIR) -> list[dict[str, Any]]:
    """Every row of every build driven with its Kimi files swapped into a measured build's tree (MANIFEST.json
    ``swapped_builds``): the base build's rows of the profiles driven, named after the build, with the rows that
    differ (tests/data/servers/swapped/) in their place."""
    manifest = json.loads((directory / "MANIFEST.json").read_text(encoding="utf-8"))
    base_rows: dict[str, list[dict[str, Any]]] = {}
    rows: list[dict[str, Any]] = []
    for build, info in sorted(manifest.get("swapped_builds", {}).items()):
        if not info.get("driven"):
            continue
        base = info["base"]
        if base not in base_rows:
            files = (manifest["builds"][base]["file"], manifest["builds"][base]["random_file"])
            base_rows[base] = [json.loads(line) for f in files for line in (directory / f).read_text(encoding="utf-8").splitlines()]
        differing = {r["case_id"]: r for r in map(json.loads, (directory / info["file"]).read_text(encoding="utf-8").splitlines())}
        skipped = set(info.get("profiles_not_driven") or {})
        for row in base_rows[base]:
            if row["profile"] in skipped:
                continue
            rows.append(differing.get(row["case_id"]) or {**row, "server": build})
    return rows


def kimi_recon_rebuild(row: Mapping[str, Any], usage: bool, *, server_named: bool = False) -> tuple[list[int], list[str]]:
    """kimi-recon's rebuild of one row: ``turn_from_response``, ``reconstruct_output_ids``, the usage check.

    ``server_named``: the row's build is given (``server=``), as a user who knows their deployment would;
    otherwise the server is what the response reveals, else unknown. Without ``usage`` the rebuild sees none."""
    from kimi_recon.servers import get_server

    response = row["response"]
    offset = int(row.get("history_tool_calls") or 0)
    turn = kimi_recon.turn_from_response(response, call_index_offset=offset)
    server = row["server"] if server_named else None
    given = response.get("usage") if usage and isinstance(response.get("usage"), Mapping) else {}
    recon = kimi_recon.reconstruct_output_ids(
        turn, profile=row["profile"], thinking=row["thinking"], call_index_offset=offset, server=server, usage=given
    )
    codes = [str(f.code.value if hasattr(f.code, "value") else f.code) for f in recon.flags]
    if usage and isinstance(response.get("usage"), Mapping):
        pinned = get_server(recon.server).completion_conventions
        counts = check_with_profile(
            response["usage"],
            recon.ids,
            None,
            row["profile"],
            truncated_in=turn.metadata.get("truncated_in"),
            completion_conventions=pinned or None,
            reasoning_into_tools="think_end_omitted" in codes,
        )
        codes += [str(f.code.value if hasattr(f.code, "value") else f.code) for f in counts.flags()]
    return list(recon.ids), codes


def named_server_rebuild(row: Mapping[str, Any], usage: bool) -> tuple[list[int], list[str]]:
    """:func:`kimi_recon_rebuild` with the row's server build named."""
    return kimi_recon_rebuild(row, usage, server_named=True)


def measure_row(row: Mapping[str, Any], *, usage: bool = True, rebuild: Rebuild = kimi_recon_rebuild) -> RowOutcome:
    base = dict(case_id=row["case_id"], server=row["server"], profile=row["profile"], thinking=row["thinking"], shape=row["shape"], loss=row["loss"])
    if row.get("response") is None:
        return RowOutcome(**base, outcome="server_error", detail=str((row.get("error") or {}).get("message", ""))[:200])
    try:
        ids, codes = rebuild(row, usage)
    except KimiReconError as err:
        return RowOutcome(**base, outcome="refused", detail=f"{type(err).__name__}: {err}"[:300])
    truth = list(row["output_ids"])
    if ids == truth:
        outcome = "exact"
    elif any(_above_info(code) for code in codes):
        outcome = "flagged"
    else:
        outcome = "silent_wrong"
    return RowOutcome(**base, outcome=outcome, flag_codes=tuple(codes))


def _above_info(code: str) -> bool:
    """A code above ``info`` (a code this version does not know, as a rebuild under test may write, counts)."""
    try:
        return severity_of(code) > Severity.INFO
    except KimiReconError:
        return True


def measure(rows: Iterable[Mapping[str, Any]], *, usage: bool = True, rebuild: Rebuild = kimi_recon_rebuild) -> list[RowOutcome]:
    return [measure_row(r, usage=usage, rebuild=rebuild) for r in rows]


def tally(outcomes: Iterable[RowOutcome], key: Callable[[RowOutcome], Any]) -> dict[Any, collections.Counter[str]]:
    table: dict[Any, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for o in outcomes:
        table[key(o)][o.outcome] += 1
    return dict(table)


def totals(outcomes: Iterable[RowOutcome]) -> collections.Counter[str]:
    return collections.Counter(o.outcome for o in outcomes)


def format_table(outcomes: Sequence[RowOutcome], key: Callable[[RowOutcome], Any] = lambda o: (o.server, o.shape), title: str = "") -> str:
    """A plain-text table: one line per key (server and turn shape by default) and a total line."""
    table = tally(outcomes, key)
    head = ["exact", "flagged", "refused", "silent", "srv err", "rows"]
    lines = [title] if title else []
    width = max([len(" / ".join(map(str, k)) if isinstance(k, tuple) else str(k)) for k in table] + [10])
    lines.append(f"{'':<{width}}  " + "  ".join(f"{h:>7}" for h in head))
    for k in sorted(table, key=str):
        c = table[k]
        label = " / ".join(map(str, k)) if isinstance(k, tuple) else str(k)
        lines.append(f"{label:<{width}}  " + "  ".join(f"{c[o]:>7}" for o in OUTCOMES) + f"  {sum(c.values()):>7}")
    t = totals(outcomes)
    lines.append(f"{'total':<{width}}  " + "  ".join(f"{t[o]:>7}" for o in OUTCOMES) + f"  {sum(t.values()):>7}")
    return "\n".join(lines)


def silent_wrong(outcomes: Iterable[RowOutcome]) -> Iterator[RowOutcome]:
    return (o for o in outcomes if o.outcome == "silent_wrong")


def markdown_table(outcomes: Sequence[RowOutcome], key: Callable[[RowOutcome], Any], header: Sequence[str]) -> str:
    """The same figures as a Markdown table (docs/servers.md is written from these)."""
    table = tally(outcomes, key)
    names = ["exact", "flagged", "refused", "silent wrong", "server error", "rows"]
    lines = ["| " + " | ".join([*header, *names]) + " |", "|" + "---|" * (len(header) + len(names))]
    for k in sorted(table, key=str):
        c = table[k]
        cells = list(k) if isinstance(k, tuple) else [k]
        lines.append("| " + " | ".join([*map(str, cells), *(str(c[o]) for o in OUTCOMES), str(sum(c.values()))]) + " |")
    return "\n".join(lines)


def pivot_markdown(outcomes: Sequence[RowOutcome], row_key: Callable[[RowOutcome], str], first: str) -> str:
    """Rows by ``row_key``, one column per server, each cell ``exact / flagged / refused / silent wrong``."""
    servers = sorted({o.server for o in outcomes})
    table: dict[str, dict[str, collections.Counter[str]]] = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    for o in outcomes:
        table[row_key(o)][o.server][o.outcome] += 1
    lines = ["| " + " | ".join([first, *servers]) + " |", "|" + "---|" * (len(servers) + 1)]
    for k in sorted(table):
        cells = []
        for server in servers:
            c = table[k][server]
            cells.append(" / ".join(str(c[o]) for o in OUTCOMES[:4]) + (f" (+{c['server_error']} err)" if c["server_error"] else "") if c else "–")
        lines.append("| " + " | ".join([k, *cells]) + " |")
    return "\n".join(lines)


def loss_frequencies(rows: Iterable[Mapping[str, Any]]) -> dict[str, tuple[int, int]]:
    """For every loss of the measured builds: ``(official turns it hit, official turns of the shape it applies to)``,
    each turn counted once over the builds. A turn is hit when, with the server named and its usage weighed, the
    rebuild differs from the generated ids and no ``loss`` flag says so: the server changed the model's own text
    where no count could show it. ``kimi_recon.servers.LOSS_SEEN`` holds these figures for the losses no count
    can show."""
    from kimi_recon.profiles import get_profile
    from kimi_recon.servers import get_server, server_losses

    applies: dict[str, set[str]] = collections.defaultdict(set)
    hit: dict[str, set[str]] = collections.defaultdict(set)
    for row in rows:
        if row.get("source") != "official" or row.get("response") is None:
            continue
        outcome = measure_row(row, usage=True, rebuild=named_server_rebuild)
        uncaught = outcome.outcome != "exact" and not any(severity_of(c) is Severity.LOSS for c in outcome.flag_codes)
        offset = int(row.get("history_tool_calls") or 0)
        turn = kimi_recon.turn_from_response(row["response"], call_index_offset=offset)
        for name, _ in server_losses(turn, get_profile(row["profile"]), row["thinking"], get_server(row["server"])):
            applies[name].add(row["case_id"])
            if uncaught:
                hit[name].add(row["case_id"])
    return {name: (len(hit[name]), len(cases)) for name, cases in applies.items()}


def one_token_loss_frequencies(rows: Iterable[Mapping[str, Any]], names: Iterable[str]) -> dict[str, tuple[int, int]]:
    """For each loss in ``names`` (losses that drop text, so the count shows them): ``(official turns one id short,
    official turns of the shape it applies to)``, each turn counted once over the builds that have the loss. A turn
    is one id short when the message the server returned, rebuilt as it stands (no server's losses weighed), has
    exactly one id fewer than the generated ids, whatever dropped it (for ``text_between_calls_dropped``, where it
    acts: the first difference after the first ``<|tool_call_end|>``): such a loss alone hides behind a count that
    agrees when the server leaves its stop token out. ``kimi_recon.servers.ONE_ID_SEEN`` holds these figures."""
    from kimi_recon.profiles import get_profile
    from kimi_recon.segments import marker_ids
    from kimi_recon.servers import get_server, server_losses

    call_end = marker_ids(get_profile("kimi-k2.5"))["<|tool_call_end|>"]

    def between_calls(truth: list[int], rebuilt: list[int]) -> bool:
        first = next((i for i, (a, b) in enumerate(zip(truth, rebuilt, strict=False)) if a != b), len(rebuilt))  # (rebuilt is the shorter)
        return call_end in truth[:first]

    wanted = set(names)
    applies: dict[str, set[str]] = collections.defaultdict(set)
    short: dict[str, set[str]] = collections.defaultdict(set)
    for row in rows:
        if row.get("source") != "official" or row.get("response") is None:
            continue
        offset = int(row.get("history_tool_calls") or 0)
        turn = kimi_recon.turn_from_response(row["response"], call_index_offset=offset)
        found = {name for name, _ in server_losses(turn, get_profile(row["profile"]), row["thinking"], get_server(row["server"]))} & wanted
        if not found:
            continue
        rebuilt = kimi_recon.reconstruct_output_ids(turn, profile=row["profile"], thinking=row["thinking"], call_index_offset=offset, server="none")
        one_short = len(row["output_ids"]) - len(rebuilt.ids) == 1
        for name in found:
            applies[name].add(row["case_id"])
            if one_short and (name != "text_between_calls_dropped" or between_calls(list(row["output_ids"]), list(rebuilt.ids))):
                short[name].add(row["case_id"])
    return {name: (len(short[name]), len(applies[name])) for name in sorted(applies)}


def with_server_ids_rebuild(row: Mapping[str, Any], usage: bool, *, server_named: bool = False) -> tuple[list[int], list[str]]:
    """:func:`kimi_recon_rebuild` of the response as a server asked for its ids returns it: the generated ids put
    back where the build writes them (vLLM ``token_ids``, SGLang ``response_token_ids``)."""
    response = json.loads(json.dumps(row["response"]))
    key = "response_token_ids" if row["server"].startswith("sglang") else "token_ids"
    response["choices"][0][key] = list(row["output_ids"])
    return kimi_recon_rebuild({**row, "response": response}, usage, server_named=server_named)


#: The modes docs/servers.md gives figures for: (title, usage weighed, rebuild).
DOC_MODES: tuple[tuple[str, bool, Rebuild], ...] = (
    ("message + usage, the server named", True, named_server_rebuild),
    ("message + usage, the server not named", True, kimi_recon_rebuild),
    ("message alone, the server named", False, named_server_rebuild),
    ("message alone, the server not named", False, kimi_recon_rebuild),
    ("the server's own ids returned (return_token_ids), not named", True, with_server_ids_rebuild),
)
#: The other golden sets (streamed answers; vLLM's spaced detokenizer) and the modes given for them.
DOC_OTHER_SETS: tuple[tuple[str, str, tuple[int, ...]], ...] = (
    ("stream", "streamed (the parser's own parse_delta, deltas accumulated as a client does)", (0, 1, 3)),
    ("spaced", "vLLM's default detokenizer (spaces around every marker)", (0, 1, 3)),
)
DOC_BEGIN = "<!-- figures: python tests/servers_measure.py --doc -->"
DOC_END = "<!-- end of figures -->"


def doc_figures() -> str:
    """The figures block of docs/servers.md: one table per mode and golden set, a line per server build, the exact
    rows split by whether they carry a ``risk``/``loss`` flag (what ``--drop-severity risk`` would drop though the
    ids are right)."""
    out = [DOC_BEGIN, ""]
    sets = [("", "", tuple(range(len(DOC_MODES))))] + [(d, title, modes) for d, title, modes in DOC_OTHER_SETS]
    for directory, set_title, modes in sets:
        rows = [r for r in (load_rows(SERVERS_DIR / directory) if directory else load_rows())]
        for i in modes:
            title, usage, rebuild = DOC_MODES[i]
            out += _mode_table(f"{set_title}: {title}" if set_title else title, measure(rows, usage=usage, rebuild=rebuild))
    out.append(DOC_END)
    return "\n".join(out)


def _mode_table(title: str, outcomes: Sequence[RowOutcome]) -> list[str]:
    out = [f"**{title}**", "", "| server | rows | exact | exact, flagged risk or loss | flagged | silent wrong | refused or server error |", "|---|---|---|---|---|---|---|"]
    by_server: dict[str, list[RowOutcome]] = collections.defaultdict(list)
    for o in outcomes:
        by_server[o.server].append(o)
    for server in [*sorted(by_server), "total"]:
        group = outcomes if server == "total" else by_server[server]
        c = totals(group)
        graded = sum(1 for o in group if o.outcome == "exact" and any(_at_least_risk(code) for code in o.flag_codes))
        cells = [server, len(group), c["exact"], graded, c["flagged"], c["silent_wrong"], c["refused"] + c["server_error"]]
        out.append("| " + " | ".join(f"**{v}**" if server == "total" else str(v) for v in cells) + " |")
    return [*out, ""]


def _at_least_risk(code: str) -> bool:
    try:
        return severity_of(code) >= Severity.RISK
    except KimiReconError:
        return True


def main(argv: Sequence[str]) -> None:
    rows = load_rows()
    if "--doc" in argv:
        print(doc_figures())
        return
    for use_usage in (False, True):
        out = measure(rows, usage=use_usage)
        title = f"usage check {'on' if use_usage else 'off'}"
        if "--markdown" in argv:
            print(f"### {title}: per server\n\n" + markdown_table(out, lambda o: o.server, ["server"]) + "\n")
            print(f"### {title}: per turn shape (exact / flagged / refused / silent wrong)\n\n" + pivot_markdown(out, lambda o: o.shape, "turn shape") + "\n")
            if use_usage:
                print(f"### {title}: per raw output kind\n\n" + pivot_markdown(out, lambda o: o.loss, "raw output") + "\n")
        else:
            print(format_table(out, title=f"== {title} =="))
            print(format_table(out, key=lambda o: o.server))
            print()


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
