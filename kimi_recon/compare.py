"""Compare the ids a model really generated with reconstructed ones, and say what kind of difference it is.

:func:`compare_ids` answers "are these the same ids, and if not, how do they differ?" with a
:class:`Comparison`: one :data:`Kind`, every kind found, the first differing index and the decoded
tokens around it on both sides. :func:`is_canonical` says whether ids are what one encode of their own
text gives.

This module holds the rule that picks the kind (:class:`_Comparer`); the result types and the kinds are in
:mod:`kimi_recon._comparison`, the alignment of two id lists in :mod:`kimi_recon._align` (both re-exported
here where they are public).
"""

from __future__ import annotations

import numbers
import weakref
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, filterfalse
from typing import Final

from .errors import InvalidInputError, preview
from ._align import (
    _HEAD_IDS,
    _common_prefix,
    _common_suffix,
    _matching_blocks,
    _same_apart_from_whitespace,
    _squash,  # noqa: F401  (tests import it from here)
    _squashed_heads_differ,
    _text_diff,
    _units,
    _utf8,
)
from ._comparison import (
    BENIGN_KINDS,
    EXACT,
    KINDS,
    NON_CANONICAL_BPE,
    REASONING_MISSING,
    SPECIAL_TOKEN_MISMATCH,
    TEXT_MISMATCH,
    TOOL_CALL_FORMAT,
    WHITESPACE_DRIFT,
    Comparison,
    Kind,
    MismatchKind,
    Region,
    TokenView,
    _token_repr,
)
from .render import CALL_BEGIN, SECTION_BEGIN, SECTION_END, THINK_BEGIN, THINK_END
from .tokenizer import KimiTokenizer, load_tokenizer

__all__ = [
    "BENIGN_KINDS",
    "EXACT",
    "KINDS",
    "NON_CANONICAL_BPE",
    "REASONING_MISSING",
    "SPECIAL_TOKEN_MISMATCH",
    "SUBSTITUTE_MAX_TOKENS",
    "TEXT_MISMATCH",
    "TOOL_CALL_FORMAT",
    "WHITESPACE_DRIFT",
    "Comparison",
    "Kind",
    "MismatchKind",
    "Region",
    "TokenView",
    "check_ids",
    "compare_checked_ids",
    "compare_ids",
    "is_canonical",
]

#: A special id replaced by at most this many other tokens counts as a wrong special id (e.g. the
#: ordinary id 163533, "chas", written where ``<|im_end|>`` 163586 belongs), not as a text difference.
SUBSTITUTE_MAX_TOKENS: Final = 3

_SEVERITY: Final[dict[str, int]] = {k: i for i, k in enumerate(KINDS)}

#: Steps of difflib's longest-match search (its inner loop) one comparison may spend pairing special ids.
#: Turns with a few special ids need a few hundred and get difflib's pairing exactly; past the budget (texts
#: with thousands of special ids, where difflib is quadratic) the remaining stretches are paired by the
#: units that occur once on each side instead, which is near-linear.
ALIGN_BUDGET = 200_000


def check_ids(ids: object, tokenizer: KimiTokenizer, field: str, *, sample: object = None) -> list[int]:
    """``ids`` as a list of int, or an :class:`InvalidInputError` naming ``field`` (and ``sample``).

    Accepts any iterable of integers (lists, tuples, numpy arrays); refuses strings, mappings, bools,
    non-integers and ids outside ``0..vocab_size-1``.
    """
    if isinstance(ids, (str, bytes, bytearray, Mapping)) or not isinstance(ids, Iterable):
        raise InvalidInputError(f"must be a list of token ids, got {type(ids).__name__}", field=field, sample=sample)
    values = list(ids)
    n = tokenizer.vocab_size
    if not set(map(type, values)) <= {int}:  # bool is its own type, so True/False take the slow path
        for i, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise InvalidInputError(f"item {i} is {preview(v)}, not an integer token id", field=field, sample=sample)
        values = [int(v) for v in values]
    if values and (min(values) < 0 or max(values) >= n):
        i, bad = next((i, v) for i, v in enumerate(values) if not 0 <= v < n)
        raise InvalidInputError(
            f"id {bad} at index {i} is outside the vocabulary (0..{n - 1})", field=field, sample=sample
        )
    return values


def is_canonical(ids: Sequence[int], tokenizer: KimiTokenizer | None = None) -> bool:
    """True when ``ids`` are exactly what one encode of their own text gives: ``encode(decode(ids)) == ids``.

    The text is the ids' bytes decoded as UTF-8 (never the lossy per-token text). When the bytes are
    not valid UTF-8 (ids cut inside a character, e.g. a turn truncated there), each run of ordinary ids
    between special ids is compared with the byte-level BPE of its bytes instead. Special-token text
    spelled with ordinary ids is not canonical: one encode makes it the special id.
    """
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    values = check_ids(ids, tok, "ids")
    data = tok.decode_bytes(values)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return _canonical_by_bytes(values, tok)
    return tok.encode(text) == values


def _canonical_by_bytes(ids: list[int], tok: KimiTokenizer) -> bool:
    expected: list[int] = []
    for specials, span in _runs(ids, tok):
        if specials:
            expected += span
            continue
        data = tok.decode_bytes(span)
        try:
            expected += tok.encode(data.decode("utf-8"))
        except UnicodeDecodeError:
            expected += tok.encode_bytes(data)
    return expected == ids


def _runs(ids: list[int], tok: KimiTokenizer) -> list[tuple[bool, list[int]]]:
    """Maximal runs of special / ordinary ids, in order."""
    runs: list[tuple[bool, list[int]]] = []
    for t in ids:
        special = tok.is_special(t)
        if runs and runs[-1][0] == special:
            runs[-1][1].append(t)
        else:
            runs.append((special, [t]))
    return runs


def compare_ids(
    reference: Sequence[int],
    reconstructed: Sequence[int],
    tokenizer: KimiTokenizer | None = None,
    *,
    context: int = 4,
) -> Comparison:
    """Compare the ids the model generated (``reference``) with reconstructed ones.

    Decision rule. Every kind of difference present is found, and :attr:`Comparison.kind` is the most
    serious one, in this order (benign first)::

        exact < non_canonical_bpe < whitespace_drift < reasoning_missing
              < special_token_mismatch < tool_call_format < text_mismatch

    so a kind only stands when nothing worse is present: ``non_canonical_bpe`` guarantees the same
    bytes and the same special ids, and a claim such as "the rest are benign BPE differences" is checked
    by ``kind in BENIGN_KINDS``. The kinds are found as follows:

    1. ``exact``: the id lists are equal.
    2. Truncation: when one side's bytes are a prefix of the other's and the longer side continues with
       at least one special id (``<|im_end|>``, ``</think>``, tool-call markers), the kind is
       ``special_token_mismatch`` (the output was cut, or its end token is missing).
    3. ``reasoning_missing``: one side has reasoning (non-whitespace text before its first ``</think>``)
       and the other has none (empty reasoning, or no ``</think>`` at all, as with ``thinking=False``).
       The reasoning and its ``</think>`` are then set aside and the rest of both sides is compared below.
       (When both or neither have reasoning, reasoning differences are compared like any other text.)
    4. ``tool_call_format``: the tool-call sections (``<|tool_calls_section_begin|>`` .. ``_end|>``) differ
       in anything but the BPE split: call ids, markers, argument JSON (whitespace included), or one side
       has a section and the other has none. The sections are then set aside.
    5. What remains is split at its special ids. With the same special ids on both sides, each run of
       ordinary ids between them is compared: the same bytes is ``non_canonical_bpe``, the same text
       apart from whitespace (``str.isspace``) is ``whitespace_drift``, anything else ``text_mismatch``.
       With different special ids it is ``special_token_mismatch``; the special ids are paired by the
       texts around them (so an extra ``<|im_end|>`` in the middle does not shift the pairing; difflib's
       matching while it costs under :data:`ALIGN_BUDGET` steps, then units that occur once on each
       side, so the whole comparison stays near-linear in the number of ids), and each
       stretch between paired special ids is checked. Its common start and end (same bytes, cut at a
       token boundary of both sides, so a different split there only adds ``non_canonical_bpe``) are set
       aside; the rest is explained by the special ids alone when (a) its ordinary text is the same (a
       missing, extra or other special id; whitespace differences add ``whitespace_drift``),
       (b) the same text is spelled with a special id on one side and ordinary ids on the other, (c) one
       side holds only special ids and the other at most :data:`SUBSTITUTE_MAX_TOKENS` ids (a wrong
       constant, such as 163533 for ``<|im_end|>``), or (d) at the end, one side is a prefix of the other
       (a cut). Any other stretch adds ``text_mismatch``.

    So a wrong ``<|im_end|>`` id is ``special_token_mismatch`` even though 163533 is an ordinary id; a
    special-token difference with the same text elsewhere is ``special_token_mismatch``; with a text
    difference elsewhere too it is ``text_mismatch`` (and ``kinds`` lists both).

    Ids outside the vocabulary raise :class:`InvalidInputError` naming ``reference`` or ``reconstructed``.
    """
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    return compare_checked_ids(check_ids(reference, tok, "reference"), check_ids(reconstructed, tok, "reconstructed"), tok, context=context)


def compare_checked_ids(reference: list[int], reconstructed: list[int], tokenizer: KimiTokenizer, *, context: int = 4) -> Comparison:
    """:func:`compare_ids` for ids already validated (by :func:`check_ids`, or produced by the tokenizer)."""
    return _Comparer(tokenizer).compare(reference, reconstructed, context)


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


class _Comparer:
    def __init__(self, tok: KimiTokenizer) -> None:
        self.tok = tok
        self.enc = tok.encoding
        self.tables = _tables(tok)
        self.special = self.tables.special
        special = tok.special_tokens
        self.think_begin = special.get(THINK_BEGIN)
        self.think_end = special.get(THINK_END)
        self.section_begin = special.get(SECTION_BEGIN)
        self.section_end = special.get(SECTION_END)
        self.call_begin = special.get(CALL_BEGIN)
        self.found: dict[Kind, str] = {}

    # -- helpers -----------------------------------------------------------------------------------

    def note(self, kind: Kind, detail: str) -> None:
        self.found.setdefault(kind, detail)

    def is_special(self, t: int) -> bool:
        return t in self.special

    def data(self, ids: Sequence[int]) -> bytes:
        """The bytes of ids already checked against the vocabulary."""
        return bytes(self.enc.decode_bytes(list(ids)))

    def text(self, ids: Sequence[int]) -> str:
        return self.data(ids).decode("utf-8", "replace")

    def show(self, ids: Sequence[int], limit: int = 6) -> str:
        """Tokens for a message: ``<|im_end|>(163586)`` for specials, ``'chas'(163533)`` for others."""
        if not ids:
            return "nothing"
        parts = [self.token_label(t) for t in ids[:limit]]
        more = f" … (+{len(ids) - limit})" if len(ids) > limit else ""
        return " ".join(parts) + more

    def token_label(self, t: int) -> str:
        return f"{_token_repr(self.tok.token_bytes(t), self.is_special(t))}({t})"

    def special_positions(self, ids: Sequence[int]) -> list[int]:
        special = self.special
        if special.isdisjoint(ids):
            return []
        return [i for i, t in enumerate(ids) if t in special]

    def spans(self, ids: Sequence[int]) -> tuple[list[int], list[bytes]]:
        """The special ids in order, and the bytes of the ordinary runs around them (one more than specials)."""
        specials, spans, _ = self.split(ids)
        return specials, spans

    def split(self, ids: Sequence[int]) -> tuple[list[int], list[bytes], list[int]]:
        """:meth:`spans`, and the index of each special id."""
        positions = self.special_positions(ids)
        starts = [0, *(i + 1 for i in positions)]
        ends = [*positions, len(ids)]
        return [ids[i] for i in positions], [self.data(ids[lo:hi]) for lo, hi in zip(starts, ends)], positions

    # -- the rule ----------------------------------------------------------------------------------

    def compare(self, ref: list[int], rec: list[int], context: int) -> Comparison:
        if ref == rec:
            return self.result(ref, rec, (EXACT,), f"identical ({len(ref)} ids)", context)
        cut = self.truncation(ref, rec)
        if cut is not None:
            self.note(SPECIAL_TOKEN_MISMATCH, cut)
            return self.result(ref, rec, (SPECIAL_TOKEN_MISMATCH,), cut, context)
        kinds: set[Kind] = set()
        a, b = ref, rec
        ra, rb = self.reasoning(ref), self.reasoning(rec)
        if ra[0] != rb[0]:
            kinds.add(REASONING_MISSING)
            n_chars = len(self.text(ref[ra[1] : ra[2]] if ra[0] else rec[rb[1] : rb[2]]).strip())
            who, other = ("reference", "reconstruction") if ra[0] else ("reconstruction", "reference")
            self.note(REASONING_MISSING, f"the {who} has {n_chars} characters of reasoning before </think>; the {other} has none")
            a, b = ref[ra[3] :], rec[rb[3] :]
        kinds |= self.sections(a, b)
        oa, ob = self.outside_sections(a), self.outside_sections(b)
        kinds |= self.diff(oa, ob)
        if not kinds:  # every difference was in a split of identical bytes
            kinds.add(NON_CANONICAL_BPE)
            self.note(NON_CANONICAL_BPE, "same bytes and special ids, split differently")
        ordered = tuple(k for k in KINDS if k in kinds)
        kind = ordered[-1]
        return self.result(ref, rec, ordered, self.found.get(kind, kind), context)

    def truncation(self, ref: list[int], rec: list[int]) -> str | None:
        """A message when one side is the other cut short (its bytes a prefix, the rest holding a special id)."""
        head_a, head_b = self.data(ref[:64]), self.data(rec[:64])
        n = min(len(head_a), len(head_b))
        if head_a[:n] != head_b[:n]:  # neither side's bytes can be a prefix of the other's
            return None
        ba, bb = self.data(ref), self.data(rec)
        if ba == bb or not (ref and rec):
            return None
        if ba.startswith(bb):
            longer, short_len, who, other = ref, len(bb), "reconstruction", "reference"
        elif bb.startswith(ba):
            longer, short_len, who, other = rec, len(ba), "reference", "reconstruction"
        else:
            return None
        ends = list(accumulate(map(self.tables.nbytes.__getitem__, longer)))
        i = bisect_right(ends, short_len)  # the first token that reaches past the shorter side's bytes
        if i == len(longer):
            return None
        tail = longer[i:]
        if self.special.isdisjoint(tail):
            return None
        return f"the {who} is cut short: its text is a prefix of the {other}'s, which continues with {self.show(tail)}"

    def reasoning(self, ids: list[int]) -> tuple[bool, int, int, int]:
        """(has reasoning, reasoning start, reasoning end, index after ``</think>``; 0 when there is none)."""
        if self.think_end is None or self.think_end not in ids:
            return False, 0, 0, 0
        end = ids.index(self.think_end)
        start = 1 if ids and ids[0] == self.think_begin else 0
        has = bool(self.text(ids[start:end]).strip())
        return has, start, end, end + 1

    def section_bounds(self, ids: list[int]) -> tuple[int, int] | None:
        """[begin, end) of the first tool-call section after ``</think>`` (to the end when it is not closed)."""
        if self.section_begin is None:
            return None
        after = ids.index(self.think_end) + 1 if self.think_end is not None and self.think_end in ids else 0
        try:
            begin = ids.index(self.section_begin, after)
        except ValueError:
            return None
        try:
            end = ids.index(self.section_end, begin) + 1 if self.section_end is not None else len(ids)
        except ValueError:
            end = len(ids)
        return begin, end

    def sections(self, a: list[int], b: list[int]) -> set[Kind]:
        sa, sb = self.section_bounds(a), self.section_bounds(b)
        if sa is None and sb is None:
            return set()
        if sa is None or sb is None:
            who = "reference" if sa is not None else "reconstruction"
            other = "reconstruction" if sa is not None else "reference"
            ids, bounds = (a, sa) if sa is not None else (b, sb)
            assert bounds is not None
            calls = ids[bounds[0] : bounds[1]].count(self.call_begin) if self.call_begin is not None else 0
            self.note(TOOL_CALL_FORMAT, f"the {who} has a tool-call section ({calls} call{'' if calls == 1 else 's'}); the {other} has none")
            return {TOOL_CALL_FORMAT}
        xa, xb = a[sa[0] : sa[1]], b[sb[0] : sb[1]]
        if xa == xb:
            return set()
        if self.spans(xa) == self.spans(xb):
            self.note(NON_CANONICAL_BPE, "the tool-call sections have the same bytes, split differently")
            return {NON_CANONICAL_BPE}
        ta, tb = self.text(xa), self.text(xb)
        self.note(TOOL_CALL_FORMAT, "the tool-call sections differ: " + _text_diff(ta, tb))
        return {TOOL_CALL_FORMAT}

    def outside_sections(self, ids: list[int]) -> list[int]:
        bounds = self.section_bounds(ids)
        return ids if bounds is None else ids[: bounds[0]] + ids[bounds[1] :]

    def diff(self, a: list[int], b: list[int]) -> set[Kind]:
        if a == b:
            return set()
        specials_a, spans_a, at_a = self.split(a)
        specials_b, spans_b, at_b = self.split(b)
        if specials_a == specials_b:
            if spans_a == spans_b:
                self.note(NON_CANONICAL_BPE, "same bytes and special ids, split differently")
                return {NON_CANONICAL_BPE}
            for x, y in zip(spans_a, spans_b):
                if not _same_apart_from_whitespace(x, y):
                    self.note(TEXT_MISMATCH, "texts differ: " + _text_diff(_utf8(x), _utf8(y)))
                    return {TEXT_MISMATCH}
            first = next((x, y) for x, y in zip(spans_a, spans_b) if x != y)
            self.note(WHITESPACE_DRIFT, "same text apart from whitespace: " + _text_diff(_utf8(first[0]), _utf8(first[1])))
            return {WHITESPACE_DRIFT}
        kinds: set[Kind] = {SPECIAL_TOKEN_MISMATCH}
        # Align the special ids by the interleaved (text, special, text, ...) units of both sides, so a
        # special id is paired with the one that sits between the same texts.
        units_a, pos_a = _units(len(a), specials_a, spans_a, at_a)
        units_b, pos_b = _units(len(b), specials_b, spans_b, at_b)
        anchors = [
            (pos_a[i + k], pos_b[j + k])
            for i, j, n in _matching_blocks(units_a, units_b, ALIGN_BUDGET)
            for k in range(n)
            if units_a[i + k][0] == "special"
        ]
        prev_a, prev_b = -1, -1
        for na, nb in [*anchors, (len(a), len(b))]:
            final = (na, nb) == (len(a), len(b))
            kinds |= self.gap(a[prev_a + 1 : na], b[prev_b + 1 : nb], final)
            prev_a, prev_b = na, nb
        return kinds

    def trim(self, ga: list[int], gb: list[int]) -> tuple[int, int, int, int]:
        """(prefix end a, prefix end b, suffix start a, suffix start b) of the longest common start and end.

        Common means the same bytes with special ids as themselves (not their text), cut at a token
        boundary of both sides, so a different BPE split of the same bytes is trimmed too.
        """
        pa, pb = self.shared_start(ga, gb, reverse=False)
        ea, eb = self.shared_start(ga[pa:][::-1], gb[pb:][::-1], reverse=True)
        return pa, pb, len(ga) - ea, len(gb) - eb

    def shared_start(self, ga: list[int], gb: list[int], *, reverse: bool) -> tuple[int, int]:
        """How many tokens of each side make their longest common start that ends at a boundary of both.

        ``reverse``: the lists are reversed, and so is each token's text (the common end). Only as much
        of each side is spelled out as the common start needs (a window that doubles), so two unrelated
        texts cost nothing here.
        """
        atoms, natoms = self.tables.atoms, self.tables.natoms
        same = _common_prefix(ga, gb)  # identical ids share every boundary
        width = 64
        while True:
            wa, wb = ga[same : same + width], gb[same : same + width]
            if reverse:  # each token's text reversed too: the whole text, reversed
                sa, sb = "".join(map(atoms.__getitem__, wa[::-1]))[::-1], "".join(map(atoms.__getitem__, wb[::-1]))[::-1]
            else:
                sa, sb = "".join(map(atoms.__getitem__, wa)), "".join(map(atoms.__getitem__, wb))
            common = _common_prefix(sa, sb)
            a_done = common < len(sa) or same + width >= len(ga)
            b_done = common < len(sb) or same + width >= len(gb)
            if (a_done and b_done) or (common == len(sa) and a_done) or (common == len(sb) and b_done):
                break
            width *= 2
        bounds_a = list(accumulate(map(natoms.__getitem__, wa), initial=0))
        bounds_b = list(accumulate(map(natoms.__getitem__, wb), initial=0))
        pa, pb = bisect_right(bounds_a, common) - 1, bisect_right(bounds_b, common) - 1
        while bounds_a[pa] != bounds_b[pb]:
            if bounds_a[pa] > bounds_b[pb]:
                pa -= 1
            else:
                pb -= 1
        return same + pa, same + pb

    def gap(self, ga: list[int], gb: list[int], final: bool) -> set[Kind]:
        """Kinds of one stretch between shared special ids (see :func:`compare_ids`, step 5)."""
        if ga == gb:
            return set()
        pa, pb, sa, sb = self.trim(ga, gb)
        kinds: set[Kind] = set()
        if ga[:pa] != gb[:pb] or ga[sa:] != gb[sb:]:
            self.note(NON_CANONICAL_BPE, "same bytes and special ids, split differently")
            kinds.add(NON_CANONICAL_BPE)
        ma, mb = ga[pa:sa], gb[pb:sb]
        special = self.special
        da, db = self.data(ma), self.data(mb)
        if special.isdisjoint(ma) and special.isdisjoint(mb):
            if _same_apart_from_whitespace(da, db):
                self.note(WHITESPACE_DRIFT, "same text apart from whitespace: " + _text_diff(_utf8(da), _utf8(db)))
                return kinds | {WHITESPACE_DRIFT}
            self.note(TEXT_MISMATCH, "texts differ: " + _text_diff(_utf8(da), _utf8(db)))
            return kinds | {TEXT_MISMATCH}
        where = f"the reference has {self.show(ma)} where the reconstruction has {self.show(mb)}"
        ord_ids_a, ord_ids_b = list(filterfalse(special.__contains__, ma)), list(filterfalse(special.__contains__, mb))
        # (a) a special id missing, extra, or another special id. The full texts are read only when their
        # first ids do not already differ (two long unrelated texts do).
        if not _squashed_heads_differ(self.data(ord_ids_a[:_HEAD_IDS]), self.data(ord_ids_b[:_HEAD_IDS])):
            ord_a, ord_b = self.data(ord_ids_a), self.data(ord_ids_b)
            if _same_apart_from_whitespace(ord_a, ord_b):
                self.note(SPECIAL_TOKEN_MISMATCH, where)
                return kinds if ord_a == ord_b else kinds | {WHITESPACE_DRIFT}
        if _same_apart_from_whitespace(da, db):  # (b) special text as ordinary ids
            self.note(SPECIAL_TOKEN_MISMATCH, f"same text, but special-token text is ordinary ids on one side: {where}")
            return kinds
        only_special = special.issuperset(ma) or special.issuperset(mb)
        if only_special and max(len(ma), len(mb)) <= SUBSTITUTE_MAX_TOKENS:  # (c) a wrong constant
            self.note(SPECIAL_TOKEN_MISMATCH, where)
            return kinds
        if final and (da.startswith(db) or db.startswith(da)):  # (d) a cut
            who = "reconstruction" if len(da) > len(db) else "reference"
            self.note(SPECIAL_TOKEN_MISMATCH, f"the {who} is cut short: {where}")
            return kinds
        self.note(TEXT_MISMATCH, "texts and special ids differ: " + where)
        return kinds | {TEXT_MISMATCH}

    # -- evidence ----------------------------------------------------------------------------------

    def result(self, ref: list[int], rec: list[int], kinds: tuple[Kind, ...], detail: str, context: int) -> Comparison:
        kind = kinds[-1]
        if kind == EXACT:
            return Comparison(kind, kinds, detail, len(ref), len(rec), None, None, (), (), 0)
        first = _common_prefix(ref, rec)
        suffix = _common_suffix(ref[first:], rec[first:])
        diff_size = len(ref) + len(rec) - 2 * (first + suffix)
        canon_ref = canon_rec = None
        if kind == NON_CANONICAL_BPE:
            canon_ref, canon_rec = is_canonical(ref, self.tok), is_canonical(rec, self.tok)
            which = {(False, True): "; the reconstruction is the canonical encoding, the reference is not (the model sampled a non-greedy split)",
                     (True, False): "; the reference is the canonical encoding, the reconstruction is not",
                     (False, False): "; neither side is the canonical encoding"}
            detail += which.get((canon_ref, canon_rec), "")
        return Comparison(
            kind,
            kinds,
            detail,
            len(ref),
            len(rec),
            first,
            self.region(ref, rec, first),
            self.window(ref, first, context),
            self.window(rec, first, context),
            diff_size,
            canon_ref,
            canon_rec,
        )

    def region(self, ref: list[int], rec: list[int], index: int) -> Region:
        """Where the first difference falls, judged from the common prefix and what follows it on each side.

        ``reasoning``: no ``</think>`` yet and one side still has one ahead. ``tool_calls``: inside an open
        tool-call section, or one side opens one where the other has a special id or nothing. ``end``: one side has only end special ids (such as
        ``<|im_end|>``) or nothing left. Otherwise ``content``.
        """
        prefix = ref[:index]
        rest_a, rest_b = ref[index:], rec[index:]
        if self.think_end is not None and self.think_end not in prefix and (self.think_end in rest_a or self.think_end in rest_b):
            return "reasoning"
        if self.section_begin is not None and self.section_begin in prefix:
            last_begin = len(prefix) - 1 - prefix[::-1].index(self.section_begin)
            if self.section_end not in prefix[last_begin:]:
                return "tool_calls"
        heads = rest_a[:1] + rest_b[:1]
        if self.section_begin in heads and all(self.is_special(t) for t in heads):  # a section opened on one side only
            return "tool_calls"
        markers = {self.section_begin, self.section_end}
        if any(all(self.is_special(t) and t not in markers for t in rest) for rest in (rest_a, rest_b)):
            return "end"
        return "content"

    def window(self, ids: list[int], index: int, context: int) -> tuple[TokenView, ...]:
        lo, hi = max(0, index - context), min(len(ids), index + context + 1)
        return tuple(
            TokenView(i, ids[i], self.tok.token_bytes(ids[i]), self.is_special(ids[i]))
            for i in range(lo, hi)
        )


