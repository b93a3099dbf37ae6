"""The evidence of a :class:`~kimi_recon._compare.comparison.Comparison`: where the id lists first differ, in which
region, the tokens around it on both sides, the size of the difference, and (for ``non_canonical_bpe``)
which side is the canonical encoding."""

from __future__ import annotations

from .align import _common_prefix, _common_suffix
from .comparison import EXACT, NON_CANONICAL_BPE, Comparison, Kind, TokenView
from .ids import is_canonical
from .segmentation import IdView, region_at

_WHICH_IS_CANONICAL = {
    (False, True): "; the reconstruction is the canonical encoding, the reference is not (the model sampled a non-greedy split)",
    (True, False): "; the reference is the canonical encoding, the reconstruction is not",
    (False, False): "; neither side is the canonical encoding",
}


def comparison(ref: list[int], rec: list[int], kinds: tuple[Kind, ...], detail: str, context: int, view: IdView) -> Comparison:
    """The :class:`Comparison` of ``ref`` and ``rec`` whose kinds :func:`kimi_recon._compare.classify.classify` found."""
    kind = kinds[-1]
    if kind == EXACT:
        return Comparison(kind, kinds, detail, len(ref), len(rec), None, None, (), (), 0)
    first = _common_prefix(ref, rec)
    suffix = _common_suffix(ref[first:], rec[first:])
    diff_size = len(ref) + len(rec) - 2 * (first + suffix)
    canon_ref = canon_rec = None
    if kind == NON_CANONICAL_BPE:
        canon_ref, canon_rec = is_canonical(ref, view.tokenizer), is_canonical(rec, view.tokenizer)
        detail += _WHICH_IS_CANONICAL.get((canon_ref, canon_rec), "")
    return Comparison(
        kind,
        kinds,
        detail,
        len(ref),
        len(rec),
        first,
        region_at(ref, rec, first, view),
        _window(ref, first, context, view),
        _window(rec, first, context, view),
        diff_size,
        canon_ref,
        canon_rec,
    )


def _window(ids: list[int], index: int, context: int, view: IdView) -> tuple[TokenView, ...]:
    """The tokens of ``ids`` within ``context`` of ``index``."""
    lo, hi = max(0, index - context), min(len(ids), index + context + 1)
    tok, special = view.tokenizer, view.special
    return tuple(TokenView(i, ids[i], tok.token_bytes(ids[i]), ids[i] in special) for i in range(lo, hi))
