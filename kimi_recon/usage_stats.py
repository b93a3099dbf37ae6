"""Per-provider statistics of the usage check (:mod:`kimi_recon.usage_check`), in bounded memory.

What a user picks providers by: the share of rows whose server token counts agree with the rebuilt ids,
which counting conventions each provider follows, and the most common differences. Only counters are
kept, and each is capped, so a run of any length uses the same memory.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TypeVar

from ._base.arguments import bool_argument, instance_argument, int_argument
from .errors import InvalidInputTypeError
from .flags import Flag, FlagCode
from .usage_check import COMPLETION, PROMPT, REASONING, Convention, CountCheck, TokenCounts

__all__ = ["UNKNOWN_PROVIDER", "ConventionLearner", "TokenCountTally", "learned_conventions_applied", "report_lines"]

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
                    "they may be one id off (audit, reconstruct and build-samples flag each once the provider's convention is settled; --server pins it)"
                )
    return out


#: A provider's convention is taken as learned once this many of its rows agree under it, and at least
#: :data:`_LEARNED_SHARE` of its agreeing rows do (a provider that counts two ways teaches nothing).
_LEARNED_ROWS = 5
_LEARNED_SHARE = 0.8


class ConventionLearner:
    """How each provider counts ``usage.completion_tokens``, learned from a run's rows, applied to each row.

    A server nobody named may count any known way, so one row's count that fits the turn without its stop token
    "agrees", although it may be a turn one id short (a token the parser lost, a ``</think>`` of the wrong thinking
    mode). Across a provider's rows the convention shows: when most count every id, a row that fits only another
    convention is a mismatch (:meth:`flag`), as it is for a server whose convention is known. Memory: one counter
    per provider (at most 64; the rest pooled)."""

    def __init__(self) -> None:
        self._seen: dict[str, Counter[Convention]] = {}

    def learn(self, provider: object, counts: TokenCounts | None) -> None:
        """Count the convention under which ``counts``' completion figure agrees (nothing when it does not)."""
        instance_argument(counts, "counts", TokenCounts, "a TokenCounts or None", none=True)
        check = counts.completion if counts is not None else None
        if check is None or check.convention is None:
            return
        self._counter(provider)[check.convention] += 1

    def learned(self, provider: object) -> tuple[Convention, int, int] | None:
        """``(convention, its rows, agreeing rows)`` when ``provider``'s rows have settled on one, else None."""
        seen = self._seen.get(_key(provider))
        if not seen:
            return None
        convention, rows = min(seen.items(), key=lambda kv: (-kv[1], kv[0].value))
        total = sum(seen.values())
        if rows < _LEARNED_ROWS or rows < _LEARNED_SHARE * total:
            return None
        return convention, rows, total

    def flag(self, provider: object, counts: TokenCounts | None, *, closed: bool = True) -> Flag | None:
        """``completion_tokens_mismatch`` when the row's completion figure agrees only under another convention than
        the one ``provider``'s rows settled on; ``closed`` False (a turn cut before its stop token, where every
        convention counts the same ids) never is."""
        instance_argument(counts, "counts", TokenCounts, "a TokenCounts or None", none=True)
        bool_argument(closed, "closed")
        check = counts.completion if counts is not None else None
        if check is None or check.convention is None or not closed:
            return None
        found = self.learned(provider)
        if found is None or found[0] is check.convention:
            return None
        convention, rows, total = found
        delta = check.reported - convention.expected(check.rebuilt)
        return Flag(
            FlagCode.COMPLETION_TOKENS_MISMATCH,
            f"usage completion_tokens {check.reported} fits the {check.rebuilt} rebuilt output ids only if counted "
            f"{check.convention.value}, but {rows} of the {total} rows of {_key(provider)} whose count agrees count "
            f"{convention.value}: counted so, the figure is {delta:+d} off the rebuilt ids (a token the parser lost, or "
            "a </think> of the wrong thinking mode). Name the server (--server) if it counts otherwise",
            f"usage.{COMPLETION}",
            delta=delta,
        )

    def _counter(self, provider: object) -> Counter[Convention]:
        key = _key(provider)
        if key not in self._seen and len(self._seen) >= _MAX_PROVIDERS:
            key = _OTHER
        return self._seen.setdefault(key, Counter())


def off_convention(counts: TokenCounts, flag: Flag) -> TokenCounts:
    """``counts`` with its completion figure no longer agreeing, as ``flag`` (:meth:`ConventionLearner.flag`) says:
    the per-provider table then counts the row as a mismatch, as its flags do."""
    check = counts.completion
    if check is None or flag.code is not FlagCode.COMPLETION_TOKENS_MISMATCH:
        return counts
    note = f"it fits only the {check.convention.value if check.convention else 'no'} convention, which its provider's other rows do not follow"
    return dataclasses.replace(counts, completion=CountCheck(check.field, check.reported, check.rebuilt, None, note))


def _key(provider: object) -> str:
    return provider if isinstance(provider, str) and provider else UNKNOWN_PROVIDER


_T = TypeVar("_T")
#: At most this many results are held, in input order, while a run learns how a provider counts: a row whose
#: count agrees under some convention waits until its provider's rows have settled on one (or this many wait).
LEARN_WINDOW = 128


def learned_conventions_applied(
    results: Iterable[_T],
    usage: Callable[[_T], tuple[str | None, TokenCounts | None, bool]],
    flagged: Callable[[_T, Flag], _T],
    window: int = LEARN_WINDOW,
) -> Iterator[_T]:
    """``results`` in order, each whose completion count agrees only under another counting convention than the one
    its provider's rows settled on passed through ``flagged`` with its ``completion_tokens_mismatch``
    (:class:`ConventionLearner`). ``usage(result)`` is ``(provider, usage check, closed)``: who served it, its check
    (None: none), and whether the turn ended on its stop token. A result with nothing to judge passes at once
    unless an earlier one waits; memory: at most ``window`` results."""
    if isinstance(results, (str, bytes, Mapping)) or not isinstance(results, Iterable):
        raise InvalidInputTypeError(f"must be an iterable of results, got {type(results).__name__}", field="results")
    for name, fn in (("usage", usage), ("flagged", flagged)):
        if not callable(fn):
            raise InvalidInputTypeError(f"must be a function, got {type(fn).__name__}", field=name)
    return _applied(results, _checked_usage(usage), flagged, int_argument(window, "window", minimum=1))


def _checked_usage(usage: Callable[[_T], tuple[str | None, TokenCounts | None, bool]]) -> Callable[[_T], tuple[str | None, TokenCounts | None, bool]]:
    """``usage`` whose answer is checked: a triple whose check is a :class:`TokenCounts` or None."""

    def checked(result: _T) -> tuple[str | None, TokenCounts | None, bool]:
        got = usage(result)
        if type(got) is not tuple or len(got) != 3:
            raise InvalidInputTypeError(f"must return (provider, usage check, closed), got {type(got).__name__}", field="usage")
        instance_argument(got[1], "usage", TokenCounts, "a function returning a TokenCounts or None second", none=True)
        return got

    return checked


def _applied(
    results: Iterable[_T],
    usage: Callable[[_T], tuple[str | None, TokenCounts | None, bool]],
    flagged: Callable[[_T, Flag], _T],
    window: int,
) -> Iterator[_T]:
    learner = ConventionLearner()
    held: deque[_T] = deque()

    def waits(result: _T) -> bool:
        provider, counts, _ = usage(result)
        check = counts.completion if counts is not None else None
        return check is not None and check.convention is not None and learner.learned(provider) is None

    def judged(result: _T) -> _T:
        provider, counts, closed = usage(result)
        flag = learner.flag(provider, counts, closed=closed) if counts is not None else None
        return result if flag is None else flagged(result, flag)

    for result in results:
        provider, counts, _ = usage(result)
        learner.learn(provider, counts)
        if not held and not waits(result):
            yield judged(result)
            continue
        held.append(result)
        while held and (len(held) >= window or not waits(held[0])):
            yield judged(held.popleft())
    while held:
        yield judged(held.popleft())
