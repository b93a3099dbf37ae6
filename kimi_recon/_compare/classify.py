"""The rule that names how two id lists differ (the steps documented on :func:`kimi_recon.compare.compare_ids`).

:func:`classify` is the rule, one line per step; the functions below it check one step each and return
what they found as :data:`Finding` pairs (a kind and why, in the order found). Splitting is in
:mod:`kimi_recon._compare.segmentation`, lining up in :mod:`kimi_recon._compare.align`, the evidence in
:mod:`kimi_recon._compare.evidence`.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate, filterfalse
from typing import Final

from .align import (
    _HEAD_IDS,
    _matching_blocks,
    _same_apart_from_whitespace,
    _squashed_heads_differ,
    _text_diff,
    _trim_common_ends,
    _units,
    _utf8,
)
from .comparison import (
    EXACT,
    KINDS,
    NON_CANONICAL_BPE,
    REASONING_MISSING,
    SPECIAL_TOKEN_MISMATCH,
    TEXT_MISMATCH,
    TOOL_CALL_FORMAT,
    WHITESPACE_DRIFT,
    Kind,
)
from .segmentation import IdView, outside_sections, reasoning, section_bounds, split

#: A special id replaced by at most this many other tokens counts as a wrong special id (e.g. the
#: ordinary id 163533, "chas", written where ``<|im_end|>`` 163586 belongs), not as a text difference.
SUBSTITUTE_MAX_TOKENS: Final = 3

#: A kind of difference and why it was named; None for a kind another finding explains.
Finding = tuple[Kind, str | None]

_SAME_BYTES: Final = "same bytes and special ids, split differently"


def classify(ref: list[int], rec: list[int], view: IdView, budget: int) -> tuple[tuple[Kind, ...], str]:
    """Every kind of difference between ``ref`` and ``rec`` (in :data:`KINDS` order, so the last is the
    most serious) and why the most serious one was named. The numbered steps are those of
    :func:`kimi_recon.compare.compare_ids`'s docstring; ``budget``: see ``compare.ALIGN_BUDGET``."""
    if ref == rec:  # 1. exact
        return (EXACT,), f"identical ({len(ref)} ids)"
    cut = _truncation(ref, rec, view)  # 2. one side cut short before a special id
    if cut is not None:
        return (SPECIAL_TOKEN_MISMATCH,), cut
    a, b, found = _lone_reasoning(ref, rec, view)  # 3. reasoning_missing; that reasoning set aside
    found += _sections(a, b, view)  # 4. the tool-call sections; then set aside
    found += _rest(outside_sections(a, view), outside_sections(b, view), view, budget)  # 5. the rest
    if not found:  # every difference was in a split of identical bytes
        found.append((NON_CANONICAL_BPE, _SAME_BYTES))
    present = {kind for kind, _ in found}
    kinds = tuple(k for k in KINDS if k in present)
    worst = kinds[-1]
    return kinds, next((why for k, why in found if k == worst and why is not None), worst)


def _truncation(ref: list[int], rec: list[int], view: IdView) -> str | None:
    """Step 2: why one side is the other cut short (its bytes a prefix, the rest holding a special id), or None."""
    head_a, head_b = view.data(ref[:64]), view.data(rec[:64])
    n = min(len(head_a), len(head_b))
    if head_a[:n] != head_b[:n]:  # neither side's bytes can be a prefix of the other's
        return None
    ba, bb = view.data(ref), view.data(rec)
    if ba == bb or not (ref and rec):
        return None
    if ba.startswith(bb):
        longer, short_len, who, other = ref, len(bb), "reconstruction", "reference"
    elif bb.startswith(ba):
        longer, short_len, who, other = rec, len(ba), "reference", "reconstruction"
    else:
        return None
    ends = list(accumulate(map(view.tables.nbytes.__getitem__, longer)))
    i = bisect_right(ends, short_len)  # the first token that reaches past the shorter side's bytes
    if i == len(longer):
        return None
    tail = longer[i:]
    if view.special.isdisjoint(tail):
        return None
    return f"the {who} is cut short: its text is a prefix of the {other}'s, which continues with {view.show(tail)}"


def _lone_reasoning(ref: list[int], rec: list[int], view: IdView) -> tuple[list[int], list[int], list[Finding]]:
    """Step 3: when only one side has reasoning, both sides after their ``</think>`` and ``reasoning_missing``;
    else both sides whole and nothing found."""
    ra, rb = reasoning(ref, view), reasoning(rec, view)
    if ra.present == rb.present:
        return ref, rec, []
    n_chars = len(view.text(ref[ra.start : ra.end] if ra.present else rec[rb.start : rb.end]).strip())
    who, other = ("reference", "reconstruction") if ra.present else ("reconstruction", "reference")
    why = f"the {who} has {n_chars} characters of reasoning before </think>; the {other} has none"
    return ref[ra.after :], rec[rb.after :], [(REASONING_MISSING, why)]


def _sections(a: list[int], b: list[int], view: IdView) -> list[Finding]:
    """Step 4: how the tool-call sections differ."""
    sa, sb = section_bounds(a, view), section_bounds(b, view)
    if sa is None and sb is None:
        return []
    if sa is None or sb is None:
        who, other = ("reference", "reconstruction") if sa is not None else ("reconstruction", "reference")
        ids, bounds = (a, sa) if sa is not None else (b, sb)
        assert bounds is not None
        calls = ids[bounds[0] : bounds[1]].count(view.call_begin) if view.call_begin is not None else 0
        return [(TOOL_CALL_FORMAT, f"the {who} has a tool-call section ({calls} call{'' if calls == 1 else 's'}); the {other} has none")]
    xa, xb = a[sa[0] : sa[1]], b[sb[0] : sb[1]]
    if xa == xb:
        return []
    if split(xa, view)[:2] == split(xb, view)[:2]:
        return [(NON_CANONICAL_BPE, "the tool-call sections have the same bytes, split differently")]
    return [(TOOL_CALL_FORMAT, "the tool-call sections differ: " + _text_diff(view.text(xa), view.text(xb)))]


def _rest(a: list[int], b: list[int], view: IdView, budget: int) -> list[Finding]:
    """Step 5: how the ids outside the reasoning set aside and the tool-call sections differ."""
    if a == b:
        return []
    specials_a, spans_a, at_a = split(a, view)
    specials_b, spans_b, at_b = split(b, view)
    if specials_a == specials_b:
        if spans_a == spans_b:
            return [(NON_CANONICAL_BPE, _SAME_BYTES)]
        for x, y in zip(spans_a, spans_b, strict=True):
            if not _same_apart_from_whitespace(x, y):
                return [(TEXT_MISMATCH, "texts differ: " + _text_diff(_utf8(x), _utf8(y)))]
        x, y = next((x, y) for x, y in zip(spans_a, spans_b, strict=True) if x != y)
        return [(WHITESPACE_DRIFT, "same text apart from whitespace: " + _text_diff(_utf8(x), _utf8(y)))]
    found: list[Finding] = [(SPECIAL_TOKEN_MISMATCH, None)]
    # Align the special ids by the interleaved (text, special, text, ...) units of both sides, so a
    # special id is paired with the one that sits between the same texts.
    units_a, pos_a = _units(len(a), specials_a, spans_a, at_a)
    units_b, pos_b = _units(len(b), specials_b, spans_b, at_b)
    anchors = [
        (pos_a[i + k], pos_b[j + k])
        for i, j, n in _matching_blocks(units_a, units_b, budget)
        for k in range(n)
        if units_a[i + k][0] == "special"
    ]
    prev_a, prev_b = -1, -1
    for na, nb in [*anchors, (len(a), len(b))]:
        final = (na, nb) == (len(a), len(b))
        found += _stretch(a[prev_a + 1 : na], b[prev_b + 1 : nb], final, view)
        prev_a, prev_b = na, nb
    return found


def _stretch(ga: list[int], gb: list[int], final: bool, view: IdView) -> list[Finding]:
    """Step 5, one stretch between paired special ids: its common ends set aside, what the rest adds."""
    if ga == gb:
        return []
    pa, pb, sa, sb = _trim_common_ends(ga, gb, view.tables.atoms, view.tables.natoms)
    found: list[Finding] = []
    if ga[:pa] != gb[:pb] or ga[sa:] != gb[sb:]:
        found.append((NON_CANONICAL_BPE, _SAME_BYTES))
    ma, mb = ga[pa:sa], gb[pb:sb]
    special = view.special
    da, db = view.data(ma), view.data(mb)
    if special.isdisjoint(ma) and special.isdisjoint(mb):
        if _same_apart_from_whitespace(da, db):
            return found + [(WHITESPACE_DRIFT, "same text apart from whitespace: " + _text_diff(_utf8(da), _utf8(db)))]
        return found + [(TEXT_MISMATCH, "texts differ: " + _text_diff(_utf8(da), _utf8(db)))]
    where = f"the reference has {view.show(ma)} where the reconstruction has {view.show(mb)}"
    ord_ids_a, ord_ids_b = list(filterfalse(special.__contains__, ma)), list(filterfalse(special.__contains__, mb))
    # (a) a special id missing, extra, or another special id. The full texts are read only when their
    # first ids do not already differ (two long unrelated texts do).
    if not _squashed_heads_differ(view.data(ord_ids_a[:_HEAD_IDS]), view.data(ord_ids_b[:_HEAD_IDS])):
        ord_a, ord_b = view.data(ord_ids_a), view.data(ord_ids_b)
        if _same_apart_from_whitespace(ord_a, ord_b):
            found.append((SPECIAL_TOKEN_MISMATCH, where))
            return found if ord_a == ord_b else found + [(WHITESPACE_DRIFT, None)]
    if _same_apart_from_whitespace(da, db):  # (b) special text as ordinary ids
        return found + [(SPECIAL_TOKEN_MISMATCH, f"same text, but special-token text is ordinary ids on one side: {where}")]
    only_special = special.issuperset(ma) or special.issuperset(mb)
    if only_special and max(len(ma), len(mb)) <= SUBSTITUTE_MAX_TOKENS:  # (c) a wrong constant
        return found + [(SPECIAL_TOKEN_MISMATCH, where)]
    if final and (da.startswith(db) or db.startswith(da)):  # (d) a cut
        who = "reconstruction" if len(da) > len(db) else "reference"
        return found + [(SPECIAL_TOKEN_MISMATCH, f"the {who} is cut short: {where}")]
    return found + [(TEXT_MISMATCH, "texts and special ids differ: " + where)]
