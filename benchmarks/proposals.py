"""Prototypes of hot-path fixes for ``kimi_recon``, measured by the benchmarks (not used by the package).

The benchmarks do not edit ``kimi_recon``; when ``reconstruct_output_ids`` misses its 0.9x-of-raw target
they apply these prototypes in-process (:func:`patched`, a monkeypatch that is undone on exit), check
that every record still gets identical ids, and report the speed they would give. Each is a proposal
for the package's owners:

1. ``official_chunks`` scans every text longer than 25,000 characters with a Python regex
   (``_LONG_RUN``): ~9 ns/character on the corpus (the BPE takes ~56), up to ~25 on repetitive text.
   A run of more than 25,000 characters always contains a whole 12,500-character block aligned at a
   multiple of 12,500,
   so checking that no aligned block is all-whitespace or all-non-whitespace (two ``re.search`` calls
   per block, each stopping at the first hit) proves there is no cut, at O(len / 12,500) cost.
   Only texts that fail the check take the existing scan; the chunks are identical.
2. ``tiktoken.Encoding.encode(..., allowed_special="all")`` converts the 256-entry special-token set to
   a Rust hash set on every call (~21 us; ``encode_ordinary("")`` is ~0.2 us). The renderer knows which
   special texts the turn holds (the markers it wrote and what ``special_texts_in`` found in fields),
   so passing just those (``allowed_special=present, disallowed_special=()``) gives the same ids.
3. ``special_texts_in`` runs its candidate regex over every field (~2.7 ns/character); most fields
   hold neither ``<`` nor ``[``, which two ``in`` tests (memchr) rule out first.
4. ``RenderedTurn.text`` joins the segments on every access (twice per reconstruction); a
   ``functools.cached_property`` would join once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from contextlib import contextmanager

from kimi_recon import reconstruct as _reconstruct
from kimi_recon import render as _render
from kimi_recon import tokenizer as _tokenizer
from kimi_recon.render import RenderedTurn
from kimi_recon.tokenizer import MAX_ENCODE_CHARS, MAX_RUN_CHARS, KimiTokenizer, official_chunks

_BLOCK = MAX_RUN_CHARS // 2
_WS = re.compile(r"\s")
_NON_WS = re.compile(r"\S")


def may_have_long_run(piece: str) -> bool:
    """False only when ``piece`` has no run of whitespace or non-whitespace longer than MAX_RUN_CHARS."""
    for start in range(0, len(piece) - _BLOCK + 1, _BLOCK):
        end = start + _BLOCK
        if _WS.search(piece, start, end) is None or _NON_WS.search(piece, start, end) is None:
            return True
    return False


def fast_official_chunks(text: str) -> Iterator[str]:
    """The same pieces as ``official_chunks``; skips the run scan when no aligned block is uniform."""
    if len(text) <= MAX_ENCODE_CHARS and not may_have_long_run(text):
        yield text
        return
    for start in range(0, len(text), MAX_ENCODE_CHARS):
        piece = text[start : start + MAX_ENCODE_CHARS]
        if may_have_long_run(piece):
            yield from official_chunks(piece)
        else:
            yield piece


def special_texts_in_prefiltered(text: str, known: frozenset[str] = _render._KNOWN_SPECIAL_TEXTS) -> list[str]:
    if "<" not in text and "[" not in text:
        return []
    return [m.group() for m in _render._SPECIAL_CANDIDATE.finditer(text) if m.group() in known]


# What render_turn's scan found, by id() of the field text, for the encode that follows: emulates
# render_turn recording the special texts it found on the RenderedTurn (the fix proposed), so the
# measurement does not pay for a second scan. Entries are popped by the encode of the same call.
_FOUND: dict[int, list[str]] = {}


def _recording_special_texts_in(text: str, known: frozenset[str] = _render._KNOWN_SPECIAL_TEXTS) -> list[str]:
    found = special_texts_in_prefiltered(text, known)
    _FOUND[id(text)] = found
    return found


def encode_present_specials(tokenizer: KimiTokenizer, text: str, present: set[str]) -> list[int]:
    """``tokenizer.encode(text)`` with only the special texts present in ``text`` allowed."""
    enc = tokenizer.encoding
    if len(text) <= MAX_RUN_CHARS:
        return enc.encode(text, allowed_special=present, disallowed_special=())
    ids: list[int] = []
    for chunk in fast_official_chunks(text):
        ids += enc.encode(chunk, allowed_special=present, disallowed_special=())
    return ids


def _patched_encode_rendered(rendered: RenderedTurn, tokenizer: KimiTokenizer, special_text: str = "special") -> list[int]:
    if special_text != "special":
        return _ORIGINAL_ENCODE_RENDERED(rendered, tokenizer, special_text)  # type: ignore[arg-type]
    text = rendered.text
    present = {s.text for s in rendered.segments if s.is_marker}
    for seg in rendered.segments:
        if seg.field is not None:
            found = _FOUND.pop(id(seg.text), None)
            present.update(found if found is not None else special_texts_in_prefiltered(seg.text))
    _FOUND.clear()
    return encode_present_specials(tokenizer, text, present)


_ORIGINAL_ENCODE_RENDERED = _reconstruct.encode_rendered


@contextmanager
def patched() -> Iterator[None]:
    """Apply fixes 1-4 to the imported kimi_recon modules for the duration of the block."""
    saved_chunks = _tokenizer.official_chunks
    saved_scan = _render.special_texts_in
    saved_encode = _reconstruct.encode_rendered
    saved_text = RenderedTurn.__dict__["text"]
    cached = functools.cached_property(lambda self: "".join(s.text for s in self.segments))
    cached.__set_name__(RenderedTurn, "text")
    try:
        _tokenizer.official_chunks = fast_official_chunks  # type: ignore[assignment]
        _render.special_texts_in = _recording_special_texts_in
        _reconstruct.encode_rendered = _patched_encode_rendered
        setattr(RenderedTurn, "text", cached)
        yield
    finally:
        _tokenizer.official_chunks = saved_chunks
        _render.special_texts_in = saved_scan
        _reconstruct.encode_rendered = saved_encode
        setattr(RenderedTurn, "text", saved_text)
        _FOUND.clear()
