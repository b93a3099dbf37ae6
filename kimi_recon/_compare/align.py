"""How :func:`kimi_recon.compare.compare_ids` lines up two id lists: units of text between special ids, the
longest matching blocks (difflib within a budget, then unique units), common ends, and whitespace-blind text.

Pure functions on sequences and bytes; the rule that turns what they find into a kind is in
:mod:`kimi_recon._compare.classify`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Hashable, Sequence
from difflib import SequenceMatcher
from itertools import accumulate
from typing import Any, Final


def _units(n: int, specials: list[int], spans: list[bytes], positions: list[int]) -> tuple[list[tuple[str, object]], list[int]]:
    """Interleaved ("text", squashed text) / ("special", id) units of ``n`` ids, and each unit's index in them."""
    units: list[tuple[str, object]] = []
    where: list[int] = []
    # spans has one more item than specials (the text after the last special id, appended below)
    for i, t, span in zip(positions, specials, spans, strict=False):
        units += [("text", _squash(span)), ("special", t)]
        where += [i, i]
    units.append(("text", _squash(spans[-1])))
    where.append(n)
    return units, where


def _matching_blocks(a: Sequence[Hashable], b: Sequence[Hashable], budget: int) -> list[tuple[int, int, int]]:
    """(i, j, n) blocks with ``a[i:i+n] == b[j:j+n]``, in order, none crossing another.

    While the budget lasts these are difflib's matching blocks (``SequenceMatcher(None, a, b,
    autojunk=False)``, before it merges adjacent ones): the longest common block, then the same on
    each side of it. Each search costs one step per pair of equal units it scans, known before it
    runs. A stretch whose search would overrun the budget is split at the units that occur once on
    each side of it (:func:`_unique_pairs`, as patience diff does), and the pieces are searched again;
    once that has scanned a few times the units, the rest only gets its common start and end paired.
    """
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    in_b = Counter(b)
    steps = list(accumulate((in_b.get(x, 0) for x in a), initial=0))  # the search over a[lo:hi] scans steps[hi] - steps[lo]
    scans = 4 * (len(a) + len(b))  # units the unique-unit splits may read, so the whole stays near-linear
    blocks: list[tuple[int, int, int]] = []
    todo = [(0, len(a), 0, len(b))]
    while todo:
        alo, ahi, blo, bhi = todo.pop()
        if alo >= ahi or blo >= bhi:
            continue
        cost = steps[ahi] - steps[alo]
        if cost <= budget:
            budget -= cost
            i, j, n = matcher.find_longest_match(alo, ahi, blo, bhi)
            if n:
                blocks.append((i, j, n))
                todo += [(alo, i, blo, j), (i + n, ahi, j + n, bhi)]
            continue
        scans -= (ahi - alo) + (bhi - blo)
        pairs = _unique_pairs(a, b, alo, ahi, blo, bhi) if scans >= 0 else []
        if not pairs:
            blocks += _common_ends(a, b, alo, ahi, blo, bhi)
            continue
        for i, j in pairs:
            blocks.append((i, j, 1))
            todo.append((alo, i, blo, j))
            alo, blo = i + 1, j + 1
        todo.append((alo, ahi, blo, bhi))
    blocks.sort()
    return blocks


def _unique_pairs(a: Sequence[Hashable], b: Sequence[Hashable], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int]]:
    """The longest in-order chain of units that occur exactly once in ``a[alo:ahi]`` and in ``b[blo:bhi]``,
    as (index in a, index in b)."""
    count_a, count_b = Counter(a[alo:ahi]), Counter(b[blo:bhi])
    where_b = {x: j for j, x in enumerate(b[blo:bhi], blo) if count_b[x] == 1 and count_a.get(x) == 1}
    return _increasing_chain([(i, where_b[x]) for i, x in enumerate(a[alo:ahi], alo) if x in where_b])


def _common_ends(a: Sequence[Hashable], b: Sequence[Hashable], alo: int, ahi: int, blo: int, bhi: int) -> list[tuple[int, int, int]]:
    """The blocks of the common start and the common end of ``a[alo:ahi]`` and ``b[blo:bhi]``."""
    start = _common_prefix(a[alo:ahi], b[blo:bhi])
    end = _common_suffix(a[alo + start : ahi], b[blo + start : bhi])
    blocks = [(alo, blo, start)] if start else []
    return blocks + ([(ahi - end, bhi - end, end)] if end else [])


def _increasing_chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest chain of ``pairs`` (sorted by their first item) whose second items increase; of several,
    the one that takes the earliest pair at each step (as difflib prefers the earliest of equal blocks)."""
    # longest[n]: the longest chain that starts at pairs[n], found from the end (a longest increasing
    # subsequence of the negated second items, read backwards).
    tails: list[int] = []
    longest = [0] * len(pairs)
    for n in range(len(pairs) - 1, -1, -1):
        key = -pairs[n][1]
        k = bisect_left(tails, key)
        if k == len(tails):
            tails.append(key)
        else:
            tails[k] = key
        longest[n] = k + 1
    chain: list[tuple[int, int]] = []
    want, last_j = len(tails), -1
    for n, (i, j) in enumerate(pairs):
        if want and longest[n] == want and j > last_j:
            chain.append((i, j))
            want, last_j = want - 1, j
    return chain


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common start of two lists or strings, compared a growing slice at a time."""
    n = min(len(a), len(b))
    i, step = 0, 64
    while i < n:
        j = min(n, i + step)
        if a[i:j] != b[i:j]:
            while a[i] == b[i]:
                i += 1
            return i
        i, step = j, min(step * 2, 1 << 14)
    return n


def _common_suffix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common end of two lists or strings."""
    la, lb = len(a), len(b)
    n = min(la, lb)
    i, step = 0, 64
    while i < n:
        j = min(n, i + step)
        if a[la - j : la - i] != b[lb - j : lb - i]:
            while a[la - 1 - i] == b[lb - 1 - i]:
                i += 1
            return i
        i, step = j, min(step * 2, 1 << 14)
    return n


def _utf8(data: bytes) -> str:
    return data.decode("utf-8", "replace")


#: The ASCII characters ``str.isspace`` calls whitespace (the four separators \x1c-\x1f too).
_ASCII_SPACE: Final = bytes(c for c in range(128) if chr(c).isspace())


def _squash(data: bytes) -> str:
    """The text without its whitespace (``str.isspace``)."""
    if data.isascii():  # the common case, ten times faster than splitting the text
        return data.translate(None, _ASCII_SPACE).decode("ascii")
    return "".join(_utf8(data).split())


#: Ids whose text is read first when deciding whether two long texts differ apart from whitespace.
_HEAD_IDS: Final = 1024


def _squashed_heads_differ(a: bytes, b: bytes) -> bool:
    """True when texts starting with ``a`` and ``b`` surely differ apart from whitespace: their starts do."""
    head_a, head_b = _squash(a), _squash(b)  # the full texts' squashes start with these
    n = max(min(len(head_a), len(head_b)) - 1, 0)  # a character cut at the end of a head may read differently
    return head_a[:n] != head_b[:n]


def _same_apart_from_whitespace(a: bytes, b: bytes) -> bool:
    """``_squash(a) == _squash(b)``, deciding from the first few KB when they differ there already."""
    if a == b:
        return True
    if _squashed_heads_differ(a[:4096], b[:4096]):
        return False
    return _squash(a) == _squash(b)


def _text_diff(a: str, b: str, width: int = 24) -> str:
    """Where two texts first differ, with a little context on each side."""
    i = _common_prefix(a, b)
    lo = max(0, i - width)
    return f"at character {i}, reference {a[lo : i + width]!r} vs reconstruction {b[lo : i + width]!r}"


def _trim_common_ends(ga: list[int], gb: list[int], atoms: Sequence[str], natoms: Sequence[int]) -> tuple[int, int, int, int]:
    """(prefix end a, prefix end b, suffix start a, suffix start b) of the longest common start and end.

    Common means the same bytes with special ids as themselves (not their text: ``atoms`` spells each
    id, see :class:`kimi_recon._compare.segmentation._Tables`), cut at a token boundary of both sides, so a
    different BPE split of the same bytes is trimmed too.
    """
    pa, pb = _shared_start(ga, gb, atoms, natoms, reverse=False)
    ea, eb = _shared_start(ga[pa:][::-1], gb[pb:][::-1], atoms, natoms, reverse=True)
    return pa, pb, len(ga) - ea, len(gb) - eb


def _shared_start(ga: list[int], gb: list[int], atoms: Sequence[str], natoms: Sequence[int], *, reverse: bool) -> tuple[int, int]:
    """How many tokens of each side make their longest common start that ends at a boundary of both.

    ``reverse``: the lists are reversed, and so is each token's text (the common end). Only as much
    of each side is spelled out as the common start needs (a window that doubles), so two unrelated
    texts cost nothing here.
    """
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
