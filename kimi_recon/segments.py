"""The pieces a renderer produces, and the per-profile encoder that turns them into ids.

A rendered turn (or prompt) is a sequence of :class:`Segment`: control markers, which are one special
id each, and text. How the official tokenizer turns the sequence into ids is a property of the chat
profile (``ChatProfile.encoding``):

* ``one_encode`` (K2.x): the rendered text is encoded once with special tokens allowed. Special tokens
  are hard BPE boundaries, so this equals encoding the text between markers with ``encode_ordinary``
  (split at any special-token text a field holds) and writing each marker's id directly, which avoids
  the special-token set tiktoken converts on every call.
* ``per_segment`` (K3): every segment is encoded on its own, markers as special ids and every text
  piece as ordinary text, so no BPE merge crosses a segment boundary and special-token text inside a
  field stays ordinary text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from .models import Flag
from .profiles import ChatProfile, EncodingStyle
from .special_tokens import SPECIAL_TEXT_SHAPE, SpecialTokenRegistry, registry_named
from .tokenizer import MAX_RUN_CHARS, KimiTokenizer


class Segment(NamedTuple):
    """A piece of rendered text: a control ``special`` marker, template text, or the text of a turn ``field``.

    A named tuple rather than a frozen dataclass: a K3 turn is dozens of these, built on the hot path.
    """

    text: str
    field: str | None = None
    special: bool = False

    @property
    def is_marker(self) -> bool:
        """A control marker (one special id); template text and field text are not markers."""
        return self.special


def marker(text: str) -> Segment:
    """A control marker: the special token ``text``."""
    return Segment(text, None, True)


@dataclass(frozen=True)
class RenderedTurn:
    """The rendered text, the pieces it was built from, and what rendering noticed.

    ``special_texts`` holds every special-token-shaped text in the turn: the markers rendering wrote
    and whatever the fields contain, so a one-encode can allow exactly those.
    """

    segments: tuple[Segment, ...]
    flags: tuple[Flag, ...]
    special_texts: frozenset[str] = frozenset()
    #: True when the renderer checked that no field holds special-token-shaped text (so a one-encode
    #: need not scan the text between markers for it)
    fields_plain: bool = False

    @functools.cached_property
    def text(self) -> str:
        return "".join(s.text for s in self.segments)

    def has_flag(self, code: str) -> bool:
        return any(f.code == code for f in self.flags)


@functools.lru_cache(maxsize=8)
def _marker_ids(table: str) -> dict[str, int]:
    return registry_named(table).texts()


def marker_ids(profile: ChatProfile) -> dict[str, int]:
    """Special-token text -> id in ``profile``'s table (markers are written as these ids directly)."""
    return _marker_ids(profile.special_tokens)


def encode_segments(
    segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, profile: ChatProfile, *, fields_plain: bool = False
) -> list[int]:
    """The official ids of rendered ``segments`` under ``profile``'s encoding style.

    ``fields_plain``: the caller knows no segment holds special-token-shaped text (a one-encode then
    skips the scan for it)."""
    return encode_with_style(segments, tokenizer, marker_ids(profile), profile.encoding, fields_plain=fields_plain)


def encode_with_style(
    segments: tuple[Segment, ...] | list[Segment],
    tokenizer: KimiTokenizer,
    ids_of_markers: dict[str, int],
    style: EncodingStyle,
    *,
    fields_plain: bool = False,
) -> list[int]:
    """Ids of ``segments`` encoded ``per_segment`` or as ``one_encode`` (see the module docstring)."""
    if style == "per_segment":
        return _encode_per_segment(segments, tokenizer, ids_of_markers)
    return _encode_between_markers(segments, tokenizer, fields_plain)


def _encode_per_segment(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, ids_of_markers: dict[str, int]) -> list[int]:
    ids: list[int] = []
    ordinary = tokenizer.encode_ordinary_piece
    template = tokenizer.encode_template_text
    for seg in segments:
        if seg.special:
            ids.append(ids_of_markers[seg.text])
        elif seg.field is None:
            ids += template(seg.text)
        elif seg.text:
            ids += ordinary(seg.text)
    return ids


def _encode_between_markers(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, fields_plain: bool) -> list[int]:
    """``tokenizer.encode("".join(texts))``, computed between markers.

    The official chunking (cuts every 400,000 characters and inside runs longer than 25,000) is
    measured on the whole text, so a text long enough to be cut is encoded whole instead.
    """
    total = sum(len(s.text) for s in segments)
    specials = tokenizer.special_tokens
    if total > MAX_RUN_CHARS:
        return tokenizer.encode("".join(s.text for s in segments))
    span = tokenizer.encode_ordinary_piece if fields_plain else functools.partial(_encode_span, tokenizer=tokenizer)
    ids: list[int] = []
    pending: list[str] = []  # consecutive non-marker text is one BPE span
    for seg in segments:
        if seg.special and seg.text in specials:
            if pending:
                ids += span("".join(pending))
                pending = []
            ids.append(specials[seg.text])
        else:
            pending.append(seg.text)
    if pending:
        ids += span("".join(pending))
    return ids


def _encode_span(text: str, tokenizer: KimiTokenizer) -> list[int]:
    """One span between markers: special-token text inside it is a special id, as one encode makes it."""
    if "<" not in text and "[" not in text:
        return tokenizer.encode_ordinary_piece(text)
    if not tokenizer.specials_scannable:
        return tokenizer.encode(text)
    specials = tokenizer.special_tokens
    ids: list[int] = []
    start = 0
    for match in SPECIAL_TEXT_SHAPE.finditer(text):
        tid = specials.get(match.group())
        if tid is None:
            continue
        if match.start() > start:
            ids += tokenizer.encode_ordinary_piece(text[start : match.start()])
        ids.append(tid)
        start = match.end()
    if start < len(text):
        ids += tokenizer.encode_ordinary_piece(text[start:])
    return ids


def special_texts_of(registry: SpecialTokenRegistry) -> frozenset[str]:
    """The texts of ``registry``'s named tokens (reserved slots excluded)."""
    return frozenset(t.text for t in registry.named())


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_flag(text: str, field: str | None) -> Flag | None:
    """A ``lone_surrogate`` flag when ``text`` holds UTF-16 surrogate code points, else None.

    UTF-8 cannot carry them (they come from a ``\\ud83d`` JSON escape: half an emoji split across two
    stream chunks, or a server bug), so no token ids spell that text: the encoder writes U+FFFD for a
    lone one (and the character for a high+low pair), and the ids decode to other text. The model's
    ids there cannot be known from the text.
    """
    found = _SURROGATE.search(text)
    if found is None:
        return None
    n = len(_SURROGATE.findall(text))
    return Flag(
        "lone_surrogate",
        f"holds {n} UTF-16 surrogate code point{'' if n == 1 else 's'} (first {found.group()!r} at character {found.start()}), "
        "which UTF-8 cannot carry; encoded as U+FFFD (a high+low pair as its character), so the ids there are not the model's",
        field,
    )


def surrogate_flags(segments: Iterable[Segment]) -> list[Flag]:
    """:func:`surrogate_flag` for each field segment (and template text, under ``None``)."""
    return [f for seg in segments if not seg.special and (f := surrogate_flag(seg.text, seg.field)) is not None]
