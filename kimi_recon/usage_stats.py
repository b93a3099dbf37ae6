"""Per-provider statistics of the usage check (:mod:`kimi_recon.usage_check`), in bounded memory.

What a user picks providers by: the share of rows whose server token counts agree with the rebuilt ids,
which counting conventions each provider follows, and the most common differences. Only counters are
kept, and each is capped, so a run of any length uses the same memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from ._base.arguments import instance_argument
from .usage_check import COMPLETION, PROMPT, REASONING, TokenCounts

__all__ = ["UNKNOWN_PROVIDER", "TokenCountTally", "report_lines"]

#: The provider name used for rows that do not say who served them.
UNKNOWN_PROVIDER = "unknown"
#: Distinct providers, and distinct deltas per provider and field, kept; the rest are pooled.
_MAX_PROVIDERS = 64
_MAX_DELTAS = 256
_OTHER = "other"
_FIELDS = (COMPLETION, PROMPT, REASONING)


class _Field:
    def __init__(self) -> None:
        self.checked = 0
        self.agree = 0
        self.conventions: Counter[str] = Counter()
        self.deltas: Counter[int] = Counter()
        self.other_deltas = 0

    def add(self, delta: int, convention: str | None) -> None:
        self.checked += 1
        if convention is not None:
            self.agree += 1
            self.conventions[convention] += 1
        if delta in self.deltas or len(self.deltas) < _MAX_DELTAS:
            self.deltas[delta] += 1
        else:
            self.other_deltas += 1

    def to_dict(self, top: int) -> dict[str, Any]:
        # The convention most rows follow is the provider's, learned from the run; a row that agrees only
        # under another one is suspect (one id too many or too few, e.g. a </think> a parser made up).
        learned = min(self.conventions, key=lambda c: (-self.conventions[c], c)) if self.conventions else None
        return {
            "checked": self.checked,
            "agree": self.agree,
            "mismatch": self.checked - self.agree,
            "conventions": dict(sorted(self.conventions.items())),
            "learned_convention": learned,
            "off_convention": self.agree - (self.conventions[learned] if learned is not None else 0),
            "top_deltas": [{"delta": d, "rows": n} for d, n in sorted(self.deltas.items(), key=lambda kv: (-kv[1], abs(kv[0]), kv[0]))[:top]],
            "other_deltas": self.other_deltas,
        }


class _Provider:
    def __init__(self) -> None:
        self.rows = 0
        self.agree = 0
        self.fields = {name: _Field() for name in _FIELDS}


class TokenCountTally:
    """Adds up :class:`~kimi_recon.usage_check.TokenCounts` per provider; :meth:`to_dict` is the report.

    A row counts when at least one figure was checked; it *agrees* when every checked figure does.
    ``top`` is how many of the most common deltas (``reported - rebuilt``) each field lists.
    """

    def __init__(self, top: int = 5) -> None:
        self.top = top
        self._providers: dict[str, _Provider] = {}
        self.unchecked = 0

    def add(self, provider: object, counts: TokenCounts | None) -> None:
        instance_argument(counts, "counts", TokenCounts, "a TokenCounts (a usage check) or None", none=True)
        checks = counts.checks if counts is not None else ()
        if counts is None or not checks:
            self.unchecked += 1
            return
        name = provider if isinstance(provider, str) and provider else UNKNOWN_PROVIDER
        if name not in self._providers and len(self._providers) >= _MAX_PROVIDERS:
            name = _OTHER
        entry = self._providers.get(name)
        if entry is None:
            entry = self._providers[name] = _Provider()
        entry.rows += 1
        entry.agree += counts.agrees
        for check in checks:
            entry.fields[check.field].add(check.delta, None if check.convention is None else check.convention.value)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self._providers.values())

    def to_dict(self) -> dict[str, Any]:
        """``{"rows_checked", "rows_unchecked", "providers": {name: {"rows", "agree", "agree_rate",
        "fields": {field: {"checked", "agree", "mismatch", "conventions", "learned_convention", "off_convention",
        "top_deltas", "other_deltas"}}}}}``. ``learned_convention`` is the one most rows follow (the provider's,
        learned from the run); ``off_convention`` counts the rows that agree only under another one."""
        providers: dict[str, Any] = {}
        for name in sorted(self._providers, key=lambda n: (-self._providers[n].rows, n)):
            p = self._providers[name]
            providers[name] = {
                "rows": p.rows,
                "agree": p.agree,
                "agree_rate": p.agree / p.rows if p.rows else 0.0,
                "fields": {f: p.fields[f].to_dict(self.top) for f in _FIELDS if p.fields[f].checked},
            }
        return {"rows_checked": self.rows, "rows_unchecked": self.unchecked, "providers": providers}

    def lines(self) -> list[str]:
        """A readable summary, one line per provider and field (empty when nothing was checked)."""
        return report_lines(self.to_dict())


def report_lines(report: Mapping[str, Any]) -> list[str]:
    """The readable form of a :meth:`TokenCountTally.to_dict` report (empty when nothing was checked)."""
    instance_argument(report, "report", Mapping, "an audit report object (a mapping)")
    providers = report.get("providers") or {}
    if not providers:
        return []
    out = ["usage check (server token counts against the rebuilt ids), per provider:"]
    for name, p in providers.items():
        out.append(f"  {name}: {p['agree']}/{p['rows']} rows agree ({100 * p['agree_rate']:.1f}%)")
        for field, f in p["fields"].items():
            seen = ", ".join(f"{k} {v}" for k, v in f["conventions"].items()) or "none"
            deltas = ", ".join(f"{d['delta']:+d} x{d['rows']}" for d in f["top_deltas"])
            out.append(f"    {field}: {f['agree']}/{f['checked']} agree (conventions: {seen}); most common deltas (reported - rebuilt): {deltas}")
            off = int(f.get("off_convention") or 0)
            if off:
                out.append(
                    f"    {field}: {off} rows agree only under another convention than the {f['learned_convention']} most rows follow: "
                    "they may be one id off (name the server, --server, to flag each such row)"
                )
    return out
