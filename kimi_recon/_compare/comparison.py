"""What :func:`kimi_recon.compare.compare_ids` returns: the kinds of difference, in order of seriousness, and
the :class:`Comparison` with the evidence (the tokens around the first difference on both sides).

Importable from :mod:`kimi_recon.compare`, where the rule that picks the kind lives.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final, Literal


class MismatchKind(str, enum.Enum):
    """How two id lists differ, from the most benign to the most serious: the one list of the kinds.

    Results carry the plain string values (``Comparison.kind == "exact"``, what rows and reports write);
    ``MismatchKind(comparison.kind)`` gives the member. The constants below, :data:`KINDS` and the
    :data:`Kind` type are derived from (or tested against) this enum.
    """

    EXACT = "exact"
    NON_CANONICAL_BPE = "non_canonical_bpe"
    WHITESPACE_DRIFT = "whitespace_drift"
    REASONING_MISSING = "reasoning_missing"
    SPECIAL_TOKEN_MISMATCH = "special_token_mismatch"
    TOOL_CALL_FORMAT = "tool_call_format"
    TEXT_MISMATCH = "text_mismatch"


#: The type of a kind for type checkers; tests/test_mismatch_kinds.py checks it lists the enum's values in order.
Kind = Literal[
    "exact",
    "non_canonical_bpe",
    "whitespace_drift",
    "reasoning_missing",
    "special_token_mismatch",
    "tool_call_format",
    "text_mismatch",
]

EXACT: Final[Kind] = MismatchKind.EXACT.value
NON_CANONICAL_BPE: Final[Kind] = MismatchKind.NON_CANONICAL_BPE.value
WHITESPACE_DRIFT: Final[Kind] = MismatchKind.WHITESPACE_DRIFT.value
REASONING_MISSING: Final[Kind] = MismatchKind.REASONING_MISSING.value
SPECIAL_TOKEN_MISMATCH: Final[Kind] = MismatchKind.SPECIAL_TOKEN_MISMATCH.value
TOOL_CALL_FORMAT: Final[Kind] = MismatchKind.TOOL_CALL_FORMAT.value
TEXT_MISMATCH: Final[Kind] = MismatchKind.TEXT_MISMATCH.value

#: Every kind, from the most benign to the most serious. :attr:`Comparison.kind` is the most serious
#: kind of difference found.
KINDS: Final[tuple[Kind, ...]] = (
    EXACT,
    NON_CANONICAL_BPE,
    WHITESPACE_DRIFT,
    REASONING_MISSING,
    SPECIAL_TOKEN_MISMATCH,
    TOOL_CALL_FORMAT,
    TEXT_MISMATCH,
)
#: Kinds under which the reconstruction trains the same text: identical ids, or the same bytes split differently.
BENIGN_KINDS: Final[frozenset[Kind]] = frozenset({EXACT, NON_CANONICAL_BPE})

#: Where the first difference falls in the reference: before ``</think>``, in the content, inside the
#: tool-call section, or in the trailing special tokens (``<|im_end|>``) / past the reference's end.
Region = Literal["reasoning", "content", "tool_calls", "end"]

@dataclass(frozen=True)
class TokenView:
    """One token of the evidence window: its position, id, exact bytes, and whether it is special."""

    index: int
    id: int
    data: bytes
    special: bool

    @property
    def text(self) -> str:
        """The bytes as UTF-8; bytes that are only part of a character become ``\\xNN`` escapes."""
        return self.data.decode("utf-8", "backslashreplace")

    def __str__(self) -> str:
        return f"[{self.index}] {self.id} {_token_repr(self.data, self.special)}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "id": self.id, "text": self.text, "bytes": self.data.hex(), "special": self.special}


def _token_repr(data: bytes, special: bool) -> str:
    """``<|im_end|>`` for a special token, ``'text'`` for whole characters, ``b'\\xe4\\xbd'`` for partial ones."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return repr(data)
    return text if special else repr(text)


@dataclass(frozen=True)
class Comparison:
    """How reference ids (what the model generated) compare with reconstructed ids.

    ``kind`` is the most serious kind in ``kinds`` (every kind of difference found, in :data:`KINDS`
    order). ``first_diff`` is the first index where the id lists differ (the shorter length when one is a
    prefix of the other; None when exact), ``region`` where it falls in the reference, and the windows
    hold the tokens around it on each side. ``diff_size`` counts the ids of both sides outside their
    common prefix and suffix (0 when exact): a rough size of the difference, used to rank examples.
    ``reference_canonical`` / ``reconstructed_canonical`` say, for ``non_canonical_bpe`` only, which side
    is what one encode of the text gives (None otherwise).
    """

    kind: Kind
    kinds: tuple[Kind, ...]
    detail: str
    reference_len: int
    reconstructed_len: int
    first_diff: int | None
    region: Region | None
    reference_window: tuple[TokenView, ...]
    reconstructed_window: tuple[TokenView, ...]
    diff_size: int
    reference_canonical: bool | None = None
    reconstructed_canonical: bool | None = None

    @property
    def exact(self) -> bool:
        return self.kind == EXACT

    @property
    def benign(self) -> bool:
        """True for ``exact`` and ``non_canonical_bpe``: the same text, the same special tokens."""
        return self.kind in BENIGN_KINDS

    def headline(self) -> str:
        """One line: kind, lengths and where the first difference is."""
        others = [k for k in self.kinds if k != self.kind]
        also = f" (also {', '.join(others)})" if others else ""
        lengths = f"reference {self.reference_len} ids, reconstructed {self.reconstructed_len} ids"
        if self.first_diff is None:
            return f"{self.kind}: {lengths}"
        return f"{self.kind}{also}: {lengths}; first difference at index {self.first_diff} ({self.region})"

    def explain(self) -> str:
        """A readable, multi-line account: headline, detail and the tokens around the first difference."""
        lines = [self.headline(), f"  {self.detail}"]
        if self.first_diff is not None:
            lines.append("  reference     " + _window_text(self.reference_window, self.first_diff))
            lines.append("  reconstructed " + _window_text(self.reconstructed_window, self.first_diff))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.explain()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "kind": self.kind,
            "kinds": list(self.kinds),
            "exact": self.exact,
            "benign": self.benign,
            "detail": self.detail,
            "reference_len": self.reference_len,
            "reconstructed_len": self.reconstructed_len,
            "first_diff": self.first_diff,
            "region": self.region,
            "reference_window": [t.to_dict() for t in self.reference_window],
            "reconstructed_window": [t.to_dict() for t in self.reconstructed_window],
            "diff_size": self.diff_size,
            "reference_canonical": self.reference_canonical,
            "reconstructed_canonical": self.reconstructed_canonical,
        }


def _window_text(window: tuple[TokenView, ...], first_diff: int) -> str:
    if not window:
        return "(no tokens)"
    parts = [("» " if t.index == first_diff else "") + str(t) for t in window]
    if window[-1].index < first_diff:
        parts.append("» (end)")
    lead = "… " if window[0].index > 0 else ""
    return lead + " | ".join(parts)
