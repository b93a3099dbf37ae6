"""What a dataset audit keeps beyond the counts, for reports: where first differences fall, and the worst records.

Both parts are fixed in size whatever the number of records: a histogram of ``POSITION_BINS`` bins per
region, and at most ``limit`` records per non-exact kind, from which the ``limit`` worst are chosen.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeAlias

from ..compare import EXACT, KINDS
from ..errors import InvalidInputError

if TYPE_CHECKING:
    from ..dataset import RecordResult

#: The regions a first difference can fall in (see :meth:`kimi_recon.compare.Comparison.region`), in turn order.
REGIONS: Final[tuple[str, ...]] = ("reasoning", "content", "tool_calls", "end")
#: Bins of the relative position of the first difference: bin ``i`` holds ``i/N <= first_diff/len < (i+1)/N``
#: (a difference at or past the reference's last id falls in the last bin).
POSITION_BINS: Final = 10
#: Records shown in full by default.
DEFAULT_WORST: Final = 20

_SEVERITY: Final[dict[str, int]] = {k: i for i, k in enumerate(KINDS)}


def position_bin(first_diff: int, reference_len: int, bins: int = POSITION_BINS) -> int:
    """The bin of a first difference at ``first_diff`` in a reference of ``reference_len`` ids."""
    if reference_len <= 0:
        return bins - 1  # nothing to match: the difference is at the end
    return min(bins - 1, first_diff * bins // reference_len)


@dataclass(frozen=True)
class AuditBreakdown:
    """Where the first differences fall (``first_diff[region][bin]``) and the worst records, worst first.

    ``worst`` holds up to ``worst_limit`` records: the worst of each non-exact kind in turn (most serious
    kind first, largest ``diff_size`` first within a kind), so every kind found is shown when the limit allows.
    """

    first_diff: Mapping[str, tuple[int, ...]]
    worst: tuple[RecordResult, ...]
    worst_limit: int

    @property
    def region_totals(self) -> dict[str, int]:
        return {region: sum(self.first_diff[region]) for region in REGIONS}

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_diff_histogram": {
                "bins": POSITION_BINS,
                "regions": list(REGIONS),
                "counts": {region: list(self.first_diff[region]) for region in REGIONS},
                "region_totals": self.region_totals,
            },
            "worst": [r.to_dict() for r in self.worst],
            "worst_limit": self.worst_limit,
        }


#: Bounded heaps of the worst records of each kind: ``(diff_size, -index, result)`` entries, smallest on top.
WorstHeaps: TypeAlias = dict[str, list[tuple[int, int, "RecordResult"]]]


def keep_worst(heaps: WorstHeaps, kind: str, diff_size: int, result: RecordResult, limit: int) -> None:
    """Push ``result`` into ``kind``'s heap, keeping at most ``limit`` entries: the largest ``diff_size``."""
    heap = heaps.setdefault(kind, [])
    entry = (diff_size, -result.index, result)  # ties: the earlier record is worse
    if len(heap) < limit:
        heapq.heappush(heap, entry)
    elif entry[:2] > heap[0][:2]:
        heapq.heapreplace(heap, entry)


def worst_first(heap: list[tuple[int, int, RecordResult]]) -> list[tuple[int, int, RecordResult]]:
    """A heap's entries worst first: largest ``diff_size``, then the earlier record."""
    return sorted(heap, key=lambda e: (-e[0], -e[1]))


class BreakdownTally:
    """Streams :class:`~kimi_recon.dataset.RecordResult` s into an :class:`AuditBreakdown` in constant memory."""

    def __init__(self, limit: int = DEFAULT_WORST) -> None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise InvalidInputError(f"must be a non-negative integer, got {limit!r}", field="worst")
        self.limit = limit
        self.histogram: dict[str, list[int]] = {region: [0] * POSITION_BINS for region in REGIONS}
        self.heaps: WorstHeaps = {}

    def add(self, result: RecordResult) -> None:
        c = result.comparison
        if c is None or c.kind == EXACT:
            return
        if c.first_diff is not None and c.region in self.histogram:
            self.histogram[c.region][position_bin(c.first_diff, c.reference_len)] += 1
        if self.limit:
            keep_worst(self.heaps, c.kind, c.diff_size, result, self.limit)

    def freeze(self) -> AuditBreakdown:
        ranked = {kind: worst_first(heap) for kind, heap in self.heaps.items()}
        order = sorted(ranked, key=lambda k: -_SEVERITY[k])
        chosen: list[tuple[int, int, int, RecordResult]] = []
        depth = 0
        while len(chosen) < self.limit and any(depth < len(ranked[k]) for k in order):
            for kind in order:
                if depth < len(ranked[kind]) and len(chosen) < self.limit:
                    size, neg_index, result = ranked[kind][depth]
                    chosen.append((-_SEVERITY[kind], -size, -neg_index, result))
            depth += 1
        worst = tuple(r for *_, r in sorted(chosen, key=lambda e: e[:3]))
        return AuditBreakdown({region: tuple(bins) for region, bins in self.histogram.items()}, worst, self.limit)
