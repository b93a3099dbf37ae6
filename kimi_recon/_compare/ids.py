"""Checks on one id list: that it is a list of valid ids of a vocabulary (:func:`check_ids`), and whether it is
what one encode of its own text gives (:func:`is_canonical`). Public in :mod:`kimi_recon.compare`."""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from ..errors import InvalidInputError, InvalidInputTypeError, preview
from ..tokenizer import KimiTokenizer, checked_tokenizer, load_tokenizer


def check_ids(ids: object, tokenizer: KimiTokenizer, field: str, *, sample: object = None) -> list[int]:
    """``ids`` as a list of int, or an :class:`InvalidInputError` naming ``field`` (and ``sample``).

    Accepts any ordered iterable of integers (lists, tuples, numpy arrays, generators); refuses strings,
    mappings, sets (no order), bools, non-integers and ids outside ``0..vocab_size-1``.
    """
    if isinstance(ids, (str, bytes, bytearray, Mapping, AbstractSet)) or not isinstance(ids, Iterable):
        # a set has no order (and no repeats): whatever it compares equal to is an accident
        raise InvalidInputTypeError(f"must be a list of token ids, got {type(ids).__name__}", field=field, sample=sample)
    if not isinstance(tokenizer, KimiTokenizer):
        checked_tokenizer(tokenizer)  # names the wrong type
        raise InvalidInputTypeError("must be a KimiTokenizer (see load_tokenizer), got None", field="tokenizer")
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
    tok = checked_tokenizer(tokenizer) or load_tokenizer()
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
