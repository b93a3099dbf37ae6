"""How :func:`kimi_recon.compare.compare_ids` splits one id list: the runs of ordinary ids between special ids,
the reasoning before ``</think>``, the tool-call section, and which of these regions a position falls in.

:class:`IdView` holds what splitting needs of one tokenizer (its special ids, each id's text and length,
the ids of the markers); the rest are pure functions of an id list and a view. The rule that compares
the parts is in :mod:`kimi_recon._compare.classify`.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from .._render.k2 import CALL_BEGIN, SECTION_BEGIN, SECTION_END, THINK_BEGIN, THINK_END
from ..tokenizer import KimiTokenizer
from .comparison import Region, _token_repr


@dataclass(frozen=True)
class _Tables:
    """Per-id lookups for one tokenizer, so a comparison makes C-level passes over a million ids, not a call per id.

    ``atoms`` spells each id as text with one character per comparison unit: an ordinary id's bytes as
    Latin-1 characters, a special id as one character above U+00FF (so a special id never equals its
    text). ``nbytes`` is each id's length in bytes (a special id's text in UTF-8).
    """

    special: frozenset[int]
    atoms: tuple[str, ...]
    natoms: tuple[int, ...]
    nbytes: tuple[int, ...]


# Keyed weakly by the tokenizer, and holding no reference to it, so a dropped tokenizer frees its tables.
_TABLES: weakref.WeakKeyDictionary[KimiTokenizer, _Tables] = weakref.WeakKeyDictionary()


def _tables(tok: KimiTokenizer) -> _Tables:
    tables = _TABLES.get(tok)
    if tables is None:
        enc = tok.encoding
        special = sorted(t for t in range(tok.vocab_size) if tok.is_special(t))
        special_atom = {t: chr(0x100 + k) for k, t in enumerate(special)}
        data = [enc.decode_single_token_bytes(t) for t in range(tok.vocab_size)]
        atoms = tuple(special_atom.get(t) or d.decode("latin-1") for t, d in enumerate(data))
        tables = _Tables(frozenset(special), atoms, tuple(map(len, atoms)), tuple(map(len, data)))
        _TABLES[tok] = tables
    return tables


@dataclass(frozen=True)
class IdView:
    """What splitting and classifying need of one tokenizer: its lookups and the ids of the K2.x markers
    (None where the tokenizer's table has no such token, as K3's has no ``</think>``)."""

    tokenizer: KimiTokenizer
    tables: _Tables
    think_begin: int | None
    think_end: int | None
    section_begin: int | None
    section_end: int | None
    call_begin: int | None

    @property
    def special(self) -> frozenset[int]:
        return self.tables.special

    def data(self, ids: Sequence[int]) -> bytes:
        """The bytes of ids already checked against the vocabulary."""
        return bytes(self.tokenizer.encoding.decode_bytes(list(ids)))

    def text(self, ids: Sequence[int]) -> str:
        return self.data(ids).decode("utf-8", "replace")

    def show(self, ids: Sequence[int], limit: int = 6) -> str:
        """Tokens for a message: ``<|im_end|>(163586)`` for specials, ``'chas'(163533)`` for others."""
        if not ids:
            return "nothing"
        parts = [f"{_token_repr(self.tokenizer.token_bytes(t), t in self.special)}({t})" for t in ids[:limit]]
        more = f" … (+{len(ids) - limit})" if len(ids) > limit else ""
        return " ".join(parts) + more


def id_view(tok: KimiTokenizer) -> IdView:
    """The :class:`IdView` of ``tok`` (its per-id tables built once per tokenizer)."""
    special = tok.special_tokens
    return IdView(
        tok,
        _tables(tok),
        special.get(THINK_BEGIN),
        special.get(THINK_END),
        special.get(SECTION_BEGIN),
        special.get(SECTION_END),
        special.get(CALL_BEGIN),
    )


class Split(NamedTuple):
    """An id list cut at its special ids: the special ids in order, the bytes of the ordinary runs around
    them (one more than the special ids), and the index of each special id."""

    specials: list[int]
    spans: list[bytes]
    positions: list[int]


def split(ids: Sequence[int], view: IdView) -> Split:
    special = view.special
    positions = [] if special.isdisjoint(ids) else [i for i, t in enumerate(ids) if t in special]
    starts = [0, *(i + 1 for i in positions)]
    ends = [*positions, len(ids)]
    return Split([ids[i] for i in positions], [view.data(ids[lo:hi]) for lo, hi in zip(starts, ends, strict=True)], positions)


class Reasoning(NamedTuple):
    """The reasoning of an id list: whether it has any (non-whitespace text before ``</think>``), where its
    text starts and ends, and the index after ``</think>`` (all 0 when there is no ``</think>``)."""

    present: bool
    start: int
    end: int
    after: int


def reasoning(ids: list[int], view: IdView) -> Reasoning:
    if view.think_end is None or view.think_end not in ids:
        return Reasoning(False, 0, 0, 0)
    end = ids.index(view.think_end)
    start = 1 if ids and ids[0] == view.think_begin else 0
    return Reasoning(bool(view.text(ids[start:end]).strip()), start, end, end + 1)


def section_bounds(ids: list[int], view: IdView) -> tuple[int, int] | None:
    """[begin, end) of the first tool-call section after ``</think>`` (to the end when it is not closed)."""
    if view.section_begin is None:
        return None
    after = ids.index(view.think_end) + 1 if view.think_end is not None and view.think_end in ids else 0
    try:
        begin = ids.index(view.section_begin, after)
    except ValueError:
        return None
    try:
        end = ids.index(view.section_end, begin) + 1 if view.section_end is not None else len(ids)
    except ValueError:
        end = len(ids)
    return begin, end


def outside_sections(ids: list[int], view: IdView) -> list[int]:
    """The ids without the tool-call section."""
    bounds = section_bounds(ids, view)
    return ids if bounds is None else ids[: bounds[0]] + ids[bounds[1] :]


def region_at(ref: list[int], rec: list[int], index: int, view: IdView) -> Region:
    """Where the first difference (at ``index``) falls, judged from the common prefix and what follows it on each side.

    ``reasoning``: no ``</think>`` yet and one side still has one ahead. ``tool_calls``: inside an open
    tool-call section, or one side opens one where the other has a special id or nothing. ``end``: one side has only end special ids (such as
    ``<|im_end|>``) or nothing left. Otherwise ``content``.
    """
    prefix = ref[:index]
    rest_a, rest_b = ref[index:], rec[index:]
    think_end, section_begin, special = view.think_end, view.section_begin, view.special
    if think_end is not None and think_end not in prefix and (think_end in rest_a or think_end in rest_b):
        return "reasoning"
    if section_begin is not None and section_begin in prefix:
        last_begin = len(prefix) - 1 - prefix[::-1].index(section_begin)
        if view.section_end not in prefix[last_begin:]:
            return "tool_calls"
    heads = rest_a[:1] + rest_b[:1]
    if section_begin in heads and all(t in special for t in heads):  # a section opened on one side only
        return "tool_calls"
    markers = {section_begin, view.section_end}
    if any(all(t in special and t not in markers for t in rest) for rest in (rest_a, rest_b)):
        return "end"
    return "content"
