"""Check rebuilt ids against the token counts the server reported in ``usage``. Pure: no I/O.

A provider counts ``prompt_tokens`` and ``completion_tokens`` with the model's own tokenizer, so they are
an independent witness: rebuilt output ids of another length mean the text that came back is not the
text the model generated; a rebuilt prompt of another length means the provider rendered another prompt.

Providers differ in one known way: whether the token that ends the turn is counted. A count that
differs from the rebuilt length only by that is not a mismatch; the :class:`Convention` that explains it
is recorded instead. The reasoning span (the ids up to and including ``</think>``) is checked the same
way against ``completion_tokens_details.reasoning_tokens`` when the server gives it.
"""

from __future__ import annotations

import enum
import numbers
from collections.abc import Collection, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

from ._base.arguments import bool_argument, int_argument
from .errors import InvalidInputError, InvalidInputTypeError, preview
from .flags import Flag, FlagCode
from .profiles import ChatProfile, get_profile

__all__ = [
    "COMPLETION",
    "PROMPT",
    "REASONING",
    "Convention",
    "CountCheck",
    "TokenCounts",
    "check_count",
    "check_token_counts",
    "check_with_profile",
    "reasoning_span",
    "reported_counts",
    "unreadable_figures",
]

#: The usage fields checked, also the prefix of each mismatch flag (``completion_tokens_mismatch``, …).
COMPLETION = "completion_tokens"
PROMPT = "prompt_tokens"
REASONING = "reasoning_tokens"


_FIELDS = (COMPLETION, PROMPT, REASONING)


class Convention(enum.Enum):
    """How a server's count relates to the rebuilt ids of a span that ends with a closing token.

    ``EXACT``: every id counted. ``WITHOUT_STOP``: the closing token (``<|im_end|>``/``<|end_of_msg|>``
    for the turn, ``</think>`` for the reasoning) not counted. ``WITH_EOS``: the closing token counted
    and an ``[EOS]`` after it too (the turn only). ``WITHOUT_MARKERS``: the reasoning without the
    ``<think>`` the model wrote and its ``</think>`` (vLLM's reasoning parser counts K2-Thinking so).
    ``WITH_OPENER`` / ``WITHOUT_OPENER`` (K3): the three tokens that open the answer (``<|open|>think<|sep|>`` or
    ``<|open|>response<|sep|>``), which the official template ends the prompt with, counted in ``completion_tokens``
    (the vendor's template leaves them to the model) / in neither count (``prompt_tokens`` three short); vendors
    differ (TensorRT-LLM #17845; the Kimi-Vendor-Verifier allows ``prompt_tokens`` +3).
    """

    EXACT = "exact"
    WITHOUT_STOP = "without_stop"
    WITH_EOS = "with_eos"
    WITHOUT_MARKERS = "without_markers"
    WITH_OPENER = "with_opener"
    WITHOUT_OPENER = "without_opener"

    def expected(self, rebuilt: int) -> int:
        """The count a server following this convention reports for ``rebuilt`` ids."""
        return rebuilt + _OFFSETS[self]


#: (K3's answer opens with three tokens: ``<|open|>``, ``think`` or ``response``, ``<|sep|>``)
_K3_OPENER = 3
_OFFSETS = {
    Convention.EXACT: 0,
    Convention.WITHOUT_STOP: -1,
    Convention.WITH_EOS: 1,
    Convention.WITHOUT_MARKERS: -2,
    Convention.WITH_OPENER: _K3_OPENER,
    Convention.WITHOUT_OPENER: -_K3_OPENER,
}


@dataclass(frozen=True)
class CountCheck:
    """One usage figure against the rebuilt ids it counts.

    ``reported`` is the server's figure, ``rebuilt`` the number of rebuilt ids; ``convention`` is the
    one that explains ``reported`` (None: none does, a mismatch). ``delta`` is ``reported - rebuilt``.
    """

    field: str
    reported: int
    rebuilt: int
    convention: Convention | None
    #: why no convention is taken when one would fit (the count fits two readings of the ids), said in :meth:`explain`
    note: str = ""

    @property
    def delta(self) -> int:
        return self.reported - self.rebuilt

    @property
    def agrees(self) -> bool:
        return self.convention is not None

    @property
    def usage_field(self) -> str:
        """Where the figure sits in ``usage``."""
        return f"usage.completion_tokens_details.{REASONING}" if self.field == REASONING else f"usage.{self.field}"

    @property
    def flag_code(self) -> FlagCode:
        """The flag a mismatch raises: ``completion_tokens_mismatch``, ``prompt_tokens_mismatch``, …"""
        return FlagCode(f"{self.field}_mismatch")

    def explain(self) -> str:
        what = {PROMPT: "prompt ids", COMPLETION: "output ids", REASONING: "reasoning ids (through </think>)"}.get(self.field, "ids")
        if self.convention is not None:
            return f"usage {self.field} {self.reported} matches the {self.rebuilt} rebuilt {what} ({self.convention.value})"
        if self.note:
            return f"usage {self.field} is {self.reported} for {self.rebuilt} rebuilt {what} (delta {self.delta:+d}): {self.note}"
        return (
            f"usage {self.field} is {self.reported} but {self.rebuilt} {what} were rebuilt (delta {self.delta:+d}), "
            "and no known counting convention explains it"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "reported": self.reported,
            "rebuilt": self.rebuilt,
            "delta": self.delta,
            "convention": None if self.convention is None else self.convention.value,
        }


@dataclass(frozen=True)
class TokenCounts:
    """Every usage figure a record carried, each against its rebuilt ids (None: not reported or not checkable).

    ``unreadable`` names the figures that were there but not a non-negative integer (``12.5``, ``"12"``,
    ``-1``, ``true``): not checked, and flagged ``usage_figure_unreadable`` (a count is a whole number; a
    server that writes another thing is not one whose figure can vouch for the ids)."""

    completion: CountCheck | None = None
    prompt: CountCheck | None = None
    reasoning: CountCheck | None = None
    unreadable: tuple[str, ...] = ()

    @property
    def checks(self) -> tuple[CountCheck, ...]:
        return tuple(c for c in (self.completion, self.prompt, self.reasoning) if c is not None)

    @property
    def mismatches(self) -> tuple[CountCheck, ...]:
        return tuple(c for c in self.checks if not c.agrees)

    @property
    def agrees(self) -> bool:
        """True when at least one figure was checked and every checked figure agrees."""
        return bool(self.checks) and not self.mismatches

    def to_dict(self) -> dict[str, Any]:
        """``{field: {"reported", "rebuilt", "delta", "convention"}}`` for each figure checked."""
        return {c.field: c.to_dict() for c in self.checks}

    def flags(self) -> tuple[Flag, ...]:
        """One :class:`~kimi_recon.flags.Flag` per figure no convention explains (code ``<field>_mismatch``,
        ``delta`` reported - rebuilt), and one ``usage_figure_unreadable`` per figure in :attr:`unreadable`."""
        unreadable = tuple(
            Flag(FlagCode.USAGE_FIGURE_UNREADABLE, f"usage {where} is not a non-negative integer, so it was not checked", f"usage.{where}")
            for where in self.unreadable
        )
        return tuple(Flag(c.flag_code, c.explain(), c.usage_field, c.delta) for c in self.mismatches) + unreadable

    @classmethod
    def from_dict(cls, data: object) -> TokenCounts | None:
        """The counts :meth:`to_dict` wrote (None when ``data`` is not such a mapping)."""
        if not isinstance(data, Mapping):
            return None
        checks: dict[str, CountCheck] = {}
        for name in (COMPLETION, PROMPT, REASONING):
            entry = data.get(name)
            if not isinstance(entry, Mapping):
                continue
            reported, rebuilt, convention = _count(entry.get("reported")), _count(entry.get("rebuilt")), entry.get("convention")
            if reported is None or rebuilt is None:
                return None
            try:
                conv = None if convention is None else Convention(convention)
            except ValueError:
                return None
            checks[name] = CountCheck(name, reported, rebuilt, conv)
        return cls(checks.get(COMPLETION), checks.get(PROMPT), checks.get(REASONING))


def check_count(
    field: str,
    reported: int,
    rebuilt: int,
    *,
    closed: bool,
    eos_allowed: bool = False,
    allowed: Collection[Convention] | None = None,
    opened: bool = False,
    prompt_opens: bool = False,
) -> CountCheck:
    """``reported`` against ``rebuilt`` ids; ``closed``: the ids end with their span's closing token
    (so a server may leave it out); ``eos_allowed``: a server may count an ``[EOS]`` after it.
    ``allowed`` pins the conventions the server follows (None: any that applies), so a row that fits
    only another one is a mismatch, not explained away. ``opened``: the ids also start with their span's
    opening token (K2-Thinking's ``<think>``), which a server may leave out with the closing one.
    ``prompt_opens``: the prompt ends with the three tokens that open a K3 answer, which a vendor may count as
    generated (``field`` the completion: ``WITH_OPENER``) or in neither count (the prompt: ``WITHOUT_OPENER``)."""
    reported = int_argument(reported, "reported")
    rebuilt = int_argument(rebuilt, "rebuilt", minimum=0)
    if not isinstance(field, str) or field not in _FIELDS:  # (a str first: an array's `in` has no one answer)
        raise InvalidInputError(f"must be one of {', '.join(_FIELDS)}, got {preview(field)}", field="field")
    for name, flag in (("closed", closed), ("eos_allowed", eos_allowed), ("opened", opened), ("prompt_opens", prompt_opens)):
        bool_argument(flag, name)
    allowed = _conventions(allowed, "allowed")
    conventions = [Convention.EXACT]
    if closed:
        conventions.append(Convention.WITHOUT_STOP)
        if eos_allowed:
            conventions.append(Convention.WITH_EOS)
        if opened:
            conventions.append(Convention.WITHOUT_MARKERS)
    if prompt_opens:
        conventions.append(Convention.WITHOUT_OPENER if field == PROMPT else Convention.WITH_OPENER)
    if allowed is not None:
        conventions = [c for c in conventions if c in allowed]
    found = next((c for c in conventions if c.expected(rebuilt) == reported), None)
    return CountCheck(field, reported, rebuilt, found)


def _count(value: object) -> int | None:
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 0:  # numpy ints from Arrow batches
        return int(value)
    return None


def unreadable_figures(usage: object) -> tuple[str, ...]:
    """The figures of ``usage`` that are there (not null) but not non-negative integers, by their place in it."""
    if not isinstance(usage, Mapping):
        return ()
    details = usage.get("completion_tokens_details")
    figures = [(PROMPT, usage.get(PROMPT)), (COMPLETION, usage.get(COMPLETION))]
    if isinstance(details, Mapping):
        figures.append((f"completion_tokens_details.{REASONING}", details.get(REASONING)))
    return tuple(where for where, value in figures if value is not None and _count(value) is None)


def reported_counts(usage: object) -> tuple[int | None, int | None, int | None]:
    """``(prompt_tokens, completion_tokens, reasoning_tokens)`` of a ``usage`` object; None for a figure
    missing or not a non-negative integer (such a figure is not checked; :func:`unreadable_figures` names it)."""
    if not isinstance(usage, Mapping):
        return None, None, None
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return _count(usage.get(PROMPT)), _count(usage.get(COMPLETION)), _count(reasoning)


def reasoning_span(
    output_ids: Sequence[int], think_end_id: int | None, *, cut_in_reasoning: bool, ran_into: int | None = None
) -> tuple[int, bool] | None:
    """``(length, closed)`` of the reasoning at the start of ``output_ids``: through the first
    ``think_end_id`` (closed); all of them when the turn was cut inside its reasoning (open); up to the
    first ``ran_into`` id when the reasoning ran straight into it (the tool section, no ``</think>``: open);
    none when the turn has no ``think_end_id`` (thinking off). None when the format has no such token."""
    think_end_id = int_argument(think_end_id, "think_end_id", none=True)
    ran_into = int_argument(ran_into, "ran_into", none=True)
    if think_end_id is None:
        return None
    output_ids = _checked_ids(output_ids) or []
    try:
        return output_ids.index(think_end_id) + 1, True
    except ValueError:
        if cut_in_reasoning:
            return len(output_ids), False
        if ran_into is not None and ran_into in output_ids:
            return output_ids.index(ran_into), False
        return 0, False


def check_token_counts(
    usage: object,
    output_ids: Sequence[int] | None,
    prompt_len: int | None = None,
    *,
    stop_id: int,
    eos_id: int | None = None,
    think_end_id: int | None = None,
    cut_in_reasoning: bool = False,
    completion_conventions: Collection[Convention | str] | None = None,
    think_begin_id: int | None = None,
    reasoning_ran_into: int | None = None,
    think_end_unsure: bool = False,
    prompt_opens: bool = False,
) -> TokenCounts:
    """Every figure of ``usage`` that can be checked, against ``output_ids`` and ``prompt_len``.

    ``stop_id`` ends a finished turn and ``eos_id`` is the ``[EOS]`` a server may count after it (take
    both from the profile); ``think_end_id`` closes the reasoning. ``cut_in_reasoning``: the turn was
    cut by the length limit inside its reasoning (its ids are all reasoning). ``completion_conventions``
    pins how the server counts ``completion_tokens`` (e.g. ``{"exact"}`` for vLLM and SGLang: every generated
    id, the stop token included); None accepts any known convention. ``think_begin_id`` is the ``<think>``
    a model writes itself (K2-Thinking); ``reasoning_ran_into`` the id the reasoning ran into when the turn
    has no ``</think>`` (see :func:`reasoning_span`). ``think_end_unsure``: the ids start with a ``</think>`` the
    model may not have written (thinking was assumed on for a turn without reasoning): a figure one short, which
    would read as the count without the closing token, fits the turn without that ``</think>`` as well, so it is
    not taken as agreement. ``prompt_opens``: the prompt ends with the three tokens that open a K3 answer (see
    :class:`Convention`).
    """
    output_ids = _checked_ids(output_ids)
    prompt_len = int_argument(prompt_len, "prompt_len", minimum=0, none=True)
    stop_id = int_argument(stop_id, "stop_id")
    eos_id = int_argument(eos_id, "eos_id", none=True)
    think_end_id = int_argument(think_end_id, "think_end_id", none=True)
    prompt_reported, completion_reported, reasoning_reported = reported_counts(usage)
    allowed = _conventions(completion_conventions)
    think_end_unsure = bool_argument(think_end_unsure, "think_end_unsure")
    prompt_opens = bool_argument(prompt_opens, "prompt_opens")
    completion = reasoning = prompt = None
    if output_ids is not None and completion_reported is not None:
        closed = bool(output_ids) and output_ids[-1] == stop_id
        completion = check_count(
            COMPLETION, completion_reported, len(output_ids), closed=closed, eos_allowed=eos_id is not None, allowed=allowed, prompt_opens=prompt_opens
        )
    if output_ids is not None and reasoning_reported is not None:
        span = reasoning_span(output_ids, think_end_id, cut_in_reasoning=cut_in_reasoning, ran_into=reasoning_ran_into)
        if span is not None:
            opened = think_begin_id is not None and bool(output_ids) and output_ids[0] == think_begin_id
            reasoning = check_count(REASONING, reasoning_reported, span[0], closed=span[1], opened=opened)
    if prompt_len is not None and prompt_reported is not None:
        prompt = check_count(PROMPT, prompt_reported, prompt_len, closed=False, prompt_opens=prompt_opens)
    if think_end_unsure and output_ids and think_end_id is not None and output_ids[0] == think_end_id:
        completion = _ambiguous(completion, "the turn without its stop token, or the turn without the leading </think> (thinking off)")
        reasoning = _ambiguous(reasoning, "the reasoning without its </think>, or no reasoning at all (thinking off)")
    return TokenCounts(completion, prompt, reasoning, unreadable_figures(usage))


def _conventions(value: object, field: str = "completion_conventions") -> set[Convention] | None:
    """``completion_conventions`` checked: None, or a collection of :class:`Convention` members or their values."""
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidInputTypeError(f"must be a collection of conventions, got {type(value).__name__}", field=field)
    out = set()
    for item in value:
        try:
            out.add(Convention(item))
        except ValueError:
            known = ", ".join(c.value for c in Convention)
            raise InvalidInputError(f"holds {preview(item)}, not a convention ({known})", field=field) from None
    return out


def _ambiguous(check: CountCheck | None, readings: str) -> CountCheck | None:
    """``check`` with no convention when only the count without the closing token explains it, which the other
    reading of the ids explains too: which one holds is unknown, so it is not agreement."""
    if check is None or check.convention is not Convention.WITHOUT_STOP:
        return check
    return CountCheck(check.field, check.reported, check.rebuilt, None, f"it fits {readings}; the thinking mode decides, and nothing says it")


def _checked_ids(ids: object) -> list[int] | None:
    """Output ids as a list (a numpy array or tuple from a batch becomes one); only their count and a few
    ids are read, so the items are not checked one by one."""
    if ids is None or type(ids) is list:
        return ids
    if isinstance(ids, (str, bytes, Mapping, AbstractSet)) or not isinstance(ids, Iterable):
        raise InvalidInputTypeError(f"must be a list of token ids, got {type(ids).__name__}", field="output_ids")
    values = list(ids)
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in values):
        raise InvalidInputTypeError("must be a list of integer token ids", field="output_ids")
    return [int(v) for v in values]


def check_with_profile(
    usage: object,
    output_ids: Sequence[int] | None,
    prompt_len: int | None,
    profile: str | ChatProfile,
    *,
    truncated_in: str | None = None,
    completion_conventions: Collection[Convention | str] | None = None,
    reasoning_into_tools: bool = False,
    think_end_unsure: bool = False,
) -> TokenCounts:
    """:func:`check_token_counts` with the closing tokens of ``profile``; ``truncated_in`` is the turn's
    ``metadata["truncated_in"]`` (where a length cut fell); ``completion_conventions`` as there;
    ``reasoning_into_tools``: the rebuilt turn has reasoning that ran straight into the tool section
    (flag ``think_end_omitted``)."""
    from .segments import marker_ids

    prof = get_profile(profile)
    markers = marker_ids(prof) if prof.format == "k2" else {}
    return check_token_counts(
        usage,
        output_ids,
        prompt_len,
        stop_id=prof.stop_token_id,
        eos_id=prof.eos_token_id,
        think_end_id=prof.think_end_token_id,
        cut_in_reasoning=truncated_in == "reasoning",
        completion_conventions=completion_conventions,
        think_begin_id=markers.get("<think>") if prof.thinking_style == "model_opens" else None,
        reasoning_ran_into=markers.get("<|tool_calls_section_begin|>") if reasoning_into_tools else None,
        think_end_unsure=think_end_unsure,
        prompt_opens=prof.format == "k3",
    )
