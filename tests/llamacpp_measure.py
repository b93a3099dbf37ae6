"""What kimi-recon makes of a real llama-server's answers: the measure over tests/data/llama.cpp/.

Each row is one answer of llama.cpp's llama-server (built from the pinned sdist, a tiny Kimi GGUF; see
scripts/llamacpp/) with the ids it generated (``true_ids``: its ``__verbose.tokens``; a streamed answer's truth is
its non-streamed twin's, the same seeded request). An answer is rebuilt from the message alone (``logprobs`` and
``__verbose`` removed, ``usage`` kept) or as returned, with the server named (``server="llama.cpp"``) or not.
Outcomes: ``exact`` (no flag of severity risk or loss), ``exact_flagged`` (exact, with one), ``flagged`` (ids differ,
a flag above info says so), ``silent_wrong`` (ids differ, nothing says so), ``refused`` (a named error), ``server_error`` (HTTP 500).
"""

from __future__ import annotations

import collections
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kimi_recon
from kimi_recon.errors import KimiReconError
from kimi_recon.flags import Severity, severity_of
from kimi_recon.openrouter.parse import turn_from_stream

GOLDEN_DIR = Path(__file__).parent / "data" / "llama.cpp"
OUTCOMES = ("exact", "exact_flagged", "flagged", "silent_wrong", "refused", "server_error")
#: Flags counted as saying the ids may be wrong: severity risk or loss (info says how the ids were obtained;
#: unlikely, a loss the model's own text rarely meets; ``truncated`` only that the turn was cut).
def _risky(code: str) -> bool:
    return code not in ("truncated", "truncated_tool_calls") and severity_of(code) >= Severity.RISK


@dataclass(frozen=True)
class Outcome:
    case_id: str
    outcome: str
    flag_codes: tuple[str, ...] = ()


def load_rows(directory: Path = GOLDEN_DIR) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def truth_of(rows: Iterable[Mapping[str, Any]]) -> dict[str, list[int] | None]:
    """case id -> the generated ids (a streamed row takes its non-streamed twin's)."""
    by_id = {str(r["case_id"]): r.get("true_ids") for r in rows}
    out: dict[str, list[int] | None] = {}
    for case_id, ids in by_id.items():
        twin = case_id.removesuffix("/stream") + "/json"
        out[case_id] = ids if not case_id.endswith("/stream") else by_id.get(twin)
    return out


def _message_alone(response: Any) -> Any:
    def one(obj: Any) -> Any:
        if not isinstance(obj, dict):
            return obj
        obj = {k: v for k, v in obj.items() if k != "__verbose"}
        if isinstance(obj.get("choices"), list):
            obj["choices"] = [{k: v for k, v in c.items() if k != "logprobs"} if isinstance(c, dict) else c for c in obj["choices"]]
        return obj

    return [one(c) for c in response] if isinstance(response, list) else one(response)


def rebuild(row: Mapping[str, Any], *, as_returned: bool, server_named: bool) -> tuple[list[int], list[str]]:
    response = row["response"] if as_returned else _message_alone(row["response"])
    turn = turn_from_stream(response) if row["stream"] else kimi_recon.turn_from_response(response)
    recon = kimi_recon.reconstruct_output_ids(
        turn, profile=row["profile"], thinking=row["thinking"], server="llama.cpp" if server_named else None
    )
    return list(recon.ids), [str(f.code.value) for f in recon.flags]


def measure(rows: list[dict[str, Any]], *, as_returned: bool, server_named: bool) -> list[Outcome]:
    truth = truth_of(rows)
    out: list[Outcome] = []
    for row in rows:
        case_id = str(row["case_id"])
        if row["status"] != 200 or truth[case_id] is None:
            out.append(Outcome(case_id, "server_error"))
            continue
        try:
            ids, codes = rebuild(row, as_returned=as_returned, server_named=server_named)
        except KimiReconError as err:
            out.append(Outcome(case_id, "refused", (type(err).__name__,)))
            continue
        if ids == truth[case_id]:
            out.append(Outcome(case_id, "exact_flagged" if any(map(_risky, codes)) else "exact", tuple(codes)))
        else:
            # Wrong ids with any flag above info (unlikely included) are flagged; with none, silent.
            said = any(severity_of(c) > Severity.INFO for c in codes)
            out.append(Outcome(case_id, "flagged" if said else "silent_wrong", tuple(codes)))
    return out


def totals(outcomes: Iterable[Outcome]) -> collections.Counter[str]:
    return collections.Counter(o.outcome for o in outcomes)


def main() -> None:
    rows = load_rows()
    for as_returned in (False, True):
        for named in (False, True):
            got = measure(rows, as_returned=as_returned, server_named=named)
            t = totals(got)
            print(f"{'as returned' if as_returned else 'message alone':14} {'named' if named else 'not named':10} "
                  + " ".join(f"{k}={t[k]}" for k in OUTCOMES))
            for o in got:
                if o.outcome == "silent_wrong":
                    print("   silent:", o.case_id)


if __name__ == "__main__":
    main()
