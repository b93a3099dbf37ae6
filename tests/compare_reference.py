"""The quadratic ``compare_ids`` as it was before issue 9 (difflib over every special id), kept verbatim as
the reference the near-linear one must agree with (tests/test_compare_speed.py). Not part of the package."""

# The old code exactly as it ran, so it is not edited to the rules its successor follows (zip strict=, import order).
# ruff: noqa: B905, I001
from __future__ import annotations

from collections.abc import Sequence
from difflib import SequenceMatcher

from kimi_recon.compare import (
    EXACT,
    KINDS,
    NON_CANONICAL_BPE,
    REASONING_MISSING,
    SPECIAL_TOKEN_MISMATCH,
    SUBSTITUTE_MAX_TOKENS,
    TEXT_MISMATCH,
    TOOL_CALL_FORMAT,
    WHITESPACE_DRIFT,
    Comparison,
    Kind,
    Region,
    TokenView,
    is_canonical,
)
from kimi_recon._compare.comparison import _token_repr
from kimi_recon.render import CALL_BEGIN, SECTION_BEGIN, SECTION_END, THINK_BEGIN, THINK_END
from kimi_recon.tokenizer import KimiTokenizer


def reference_compare(reference: list[int], reconstructed: list[int], tokenizer: KimiTokenizer, *, context: int = 4) -> Comparison:
    return _Comparer(tokenizer).compare(reference, reconstructed, context)


class _Comparer:
    def __init__(self, tok: KimiTokenizer) -> None:
        self.tok = tok
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
        return self.tok.is_special(t)

    def text(self, ids: Sequence[int]) -> str:
        return self.tok.decode_bytes(list(ids)).decode("utf-8", "replace")

    def show(self, ids: Sequence[int], limit: int = 6) -> str:
        """Tokens for a message: ``<|im_end|>(163586)`` for specials, ``'chas'(163533)`` for others."""
        if not ids:
            return "nothing"
        parts = [self.token_label(t) for t in ids[:limit]]
        more = f" … (+{len(ids) - limit})" if len(ids) > limit else ""
        return " ".join(parts) + more

    def token_label(self, t: int) -> str:
        return f"{_token_repr(self.tok.token_bytes(t), self.is_special(t))}({t})"

    def spans(self, ids: Sequence[int]) -> tuple[list[int], list[bytes]]:
        """The special ids in order, and the bytes of the ordinary runs around them (one more than specials)."""
        specials: list[int] = []
        spans: list[bytes] = []
        start = 0
        for i, t in enumerate(ids):
            if self.is_special(t):
                specials.append(t)
                spans.append(self.tok.decode_bytes(list(ids[start:i])))
                start = i + 1
        spans.append(self.tok.decode_bytes(list(ids[start:])))
        return specials, spans

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
        ba, bb = self.tok.decode_bytes(ref), self.tok.decode_bytes(rec)
        if ba == bb or not (ref and rec):
            return None
        if ba.startswith(bb):
            longer, short_len, who, other = ref, len(bb), "reconstruction", "reference"
        elif bb.startswith(ba):
            longer, short_len, who, other = rec, len(ba), "reference", "reconstruction"
        else:
            return None
        pos = 0
        for i, t in enumerate(longer):
            pos += len(self.tok.token_bytes(t))
            if pos > short_len:
                tail = longer[i:]
                break
        else:
            return None
        if not any(self.is_special(t) for t in tail):
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
        specials_a, spans_a = self.spans(a)
        specials_b, spans_b = self.spans(b)
        if specials_a == specials_b:
            if spans_a == spans_b:
                self.note(NON_CANONICAL_BPE, "same bytes and special ids, split differently")
                return {NON_CANONICAL_BPE}
            for x, y in zip(spans_a, spans_b):
                if _squash(x) != _squash(y):
                    self.note(TEXT_MISMATCH, "texts differ: " + _text_diff(_utf8(x), _utf8(y)))
                    return {TEXT_MISMATCH}
            first = next((x, y) for x, y in zip(spans_a, spans_b) if x != y)
            self.note(WHITESPACE_DRIFT, "same text apart from whitespace: " + _text_diff(_utf8(first[0]), _utf8(first[1])))
            return {WHITESPACE_DRIFT}
        kinds: set[Kind] = {SPECIAL_TOKEN_MISMATCH}
        # Align the special ids by the interleaved (text, special, text, ...) units of both sides, so a
        # special id is paired with the one that sits between the same texts.
        units_a, pos_a = self.units(a)
        units_b, pos_b = self.units(b)
        matcher = SequenceMatcher(None, units_a, units_b, autojunk=False)
        anchors = [
            (pos_a[i + k], pos_b[j + k])
            for i, j, n in matcher.get_matching_blocks()
            for k in range(n)
            if units_a[i + k][0] == "special"
        ]
        prev_a, prev_b = -1, -1
        for na, nb in [*anchors, (len(a), len(b))]:
            final = (na, nb) == (len(a), len(b))
            kinds |= self.gap(a[prev_a + 1 : na], b[prev_b + 1 : nb], final)
            prev_a, prev_b = na, nb
        return kinds

    def units(self, ids: list[int]) -> tuple[list[tuple[str, object]], list[int]]:
        """Interleaved ("text", squashed text) / ("special", id) units, and each unit's index in ``ids``."""
        units: list[tuple[str, object]] = []
        positions: list[int] = []
        start = 0
        for i, t in enumerate(ids):
            if self.is_special(t):
                units += [("text", _squash(self.tok.decode_bytes(ids[start:i]))), ("special", t)]
                positions += [i, i]
                start = i + 1
        units.append(("text", _squash(self.tok.decode_bytes(ids[start:]))))
        positions.append(len(ids))
        return units, positions

    def trim(self, ga: list[int], gb: list[int]) -> tuple[int, int, int, int]:
        """(prefix end a, prefix end b, suffix start a, suffix start b) of the longest common start and end.

        Common means the same bytes with special ids as themselves (not their text), cut at a token
        boundary of both sides, so a different BPE split of the same bytes is trimmed too.
        """
        ua, ub = self.atoms(ga), self.atoms(gb)
        bounds_a, bounds_b = _boundaries(ua), _boundaries(ub)
        common = _common_prefix([x for u in ua for x in u], [x for u in ub for x in u])
        cut = max(x for x in set(bounds_a) & set(bounds_b) if x <= common)
        pa, pb = bounds_a.index(cut), bounds_b.index(cut)
        ra, rb = [u[::-1] for u in ua[pa:][::-1]], [u[::-1] for u in ub[pb:][::-1]]
        rbounds_a, rbounds_b = _boundaries(ra), _boundaries(rb)
        common = _common_prefix([x for u in ra for x in u], [x for u in rb for x in u])
        cut = max(x for x in set(rbounds_a) & set(rbounds_b) if x <= common)
        return pa, pb, len(ga) - rbounds_a.index(cut), len(gb) - rbounds_b.index(cut)

    def atoms(self, ids: list[int]) -> list[tuple[int, ...]]:
        """Each token as a tuple of byte values, or ``(256 + id,)`` for a special id."""
        return [(256 + t,) if self.is_special(t) else tuple(self.tok.token_bytes(t)) for t in ids]

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
        if not any(self.is_special(t) for t in ma + mb):
            ba, bb = self.tok.decode_bytes(ma), self.tok.decode_bytes(mb)
            if _squash(ba) == _squash(bb):
                self.note(WHITESPACE_DRIFT, "same text apart from whitespace: " + _text_diff(_utf8(ba), _utf8(bb)))
                return kinds | {WHITESPACE_DRIFT}
            self.note(TEXT_MISMATCH, "texts differ: " + _text_diff(_utf8(ba), _utf8(bb)))
            return kinds | {TEXT_MISMATCH}
        where = f"the reference has {self.show(ma)} where the reconstruction has {self.show(mb)}"
        ord_a = self.tok.decode_bytes([t for t in ma if not self.is_special(t)])
        ord_b = self.tok.decode_bytes([t for t in mb if not self.is_special(t)])
        if _squash(ord_a) == _squash(ord_b):  # (a) a special id missing, extra, or another special id
            self.note(SPECIAL_TOKEN_MISMATCH, where)
            return kinds if ord_a == ord_b else kinds | {WHITESPACE_DRIFT}
        if _squash(self.tok.decode_bytes(ma)) == _squash(self.tok.decode_bytes(mb)):  # (b) special text as ordinary ids
            self.note(SPECIAL_TOKEN_MISMATCH, f"same text, but special-token text is ordinary ids on one side: {where}")
            return kinds
        only_special = all(self.is_special(t) for t in ma) or all(self.is_special(t) for t in mb)
        if only_special and max(len(ma), len(mb)) <= SUBSTITUTE_MAX_TOKENS:  # (c) a wrong constant
            self.note(SPECIAL_TOKEN_MISMATCH, where)
            return kinds
        if final:  # (d) a cut
            ba, bb = self.tok.decode_bytes(ma), self.tok.decode_bytes(mb)
            if ba.startswith(bb) or bb.startswith(ba):
                who = "reconstruction" if len(ba) > len(bb) else "reference"
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
        suffix = _common_prefix(ref[first:][::-1], rec[first:][::-1])
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


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


def _boundaries(atoms: list[tuple[int, ...]]) -> list[int]:
    """Unit offsets of the token boundaries: 0, then the end of each token."""
    out = [0]
    for a in atoms:
        out.append(out[-1] + len(a))
    return out


def _utf8(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _squash(data: bytes) -> str:
    """The text without its whitespace (``str.isspace``)."""
    return "".join(_utf8(data).split())


def _text_diff(a: str, b: str, width: int = 24) -> str:
    """Where two texts first differ, with a little context on each side."""
    n = min(len(a), len(b))
    i = next((k for k in range(n) if a[k] != b[k]), n)
    lo = max(0, i - width)
    return f"at character {i}, reference {a[lo : i + width]!r} vs reconstruction {b[lo : i + width]!r}"


