"""The pieces a renderer produces, and the per-profile encoder that turns them into ids.

A rendered turn (or prompt) is a sequence of :class:`Segment`: control markers, which are one special
id each, and text. How the official tokenizer turns the sequence into ids is a property of the chat
profile (``ChatProfile.encoding``):

* ``one_encode`` (K2.x): the rendered text is encoded once with special tokens allowed (only the
  special texts the turn holds are passed to tiktoken, which converts the allowed set on every call).
  Encoding the text between markers with ``encode_ordinary`` and writing marker ids directly gives the
  same ids (special tokens are hard BPE boundaries), but measured slower on the benchmark corpus
  (``benchmarks/k3.py``: more calls into tiktoken), so the one encode stays.
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

from .flags import Flag, FlagCode
from .profiles import ChatProfile, EncodingStyle
from .special_tokens import SpecialTokenRegistry, registry_named, special_texts_in
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
    segments: tuple[Segment, ...] | list[Segment],
    tokenizer: KimiTokenizer,
    profile: ChatProfile,
    *,
    fields_plain: bool = False,
    text: str | None = None,
) -> list[int]:
    """The official ids of rendered ``segments`` under ``profile``'s encoding style.

    ``fields_plain``: the caller knows no segment holds special-token-shaped text (a one-encode then
    skips the scan for it); ``text``: their joined text, when the caller has it."""
    return encode_with_style(segments, tokenizer, marker_ids(profile), profile.encoding, fields_plain=fields_plain, text=text)


def encode_with_style(
    segments: tuple[Segment, ...] | list[Segment],
    tokenizer: KimiTokenizer,
    ids_of_markers: dict[str, int],
    style: EncodingStyle,
    *,
    fields_plain: bool = False,
    text: str | None = None,
) -> list[int]:
    """Ids of ``segments`` encoded ``per_segment`` or as ``one_encode`` (see the module docstring);
    ``text`` is their joined text when the caller has it."""
    if style == "per_segment":
        return _encode_per_segment(segments, tokenizer, ids_of_markers)
    return _encode_once(segments, tokenizer, fields_plain, text)


def _encode_per_segment(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, ids_of_markers: dict[str, int]) -> list[int]:
    ids: list[int] = []
    ordinary = tokenizer.encode_ordinary_piece
    short = tokenizer.encoding.encode_ordinary  # a text no official chunk cut can fall in: one call less
    template = tokenizer.encode_template_text
    for seg in segments:
        if seg.special:
            ids.append(ids_of_markers[seg.text])
        elif seg.field is None:
            ids += template(seg.text)
        elif seg.text:
            ids += short(seg.text) if len(seg.text) <= MAX_RUN_CHARS else ordinary(seg.text)
    return ids


def _encode_once(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, fields_plain: bool, text: str | None) -> list[int]:
    """``tokenizer.encode(text)``, allowing only the special texts the segments hold (tiktoken converts
    the allowed set on every call, and a handful costs far less than all 256)."""
    if text is None:
        text = "".join(s.text for s in segments)
    specials = {s.text for s in segments if s.special}
    if not fields_plain:
        specials.update(special_texts_in(text))
    return tokenizer.encode_with_specials(text, specials)


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
        FlagCode.LONE_SURROGATE,
        f"holds {n} UTF-16 surrogate code point{'' if n == 1 else 's'} (first {found.group()!r} at character {found.start()}), "
        "which UTF-8 cannot carry; encoded as U+FFFD (a high+low pair as its character), so the ids there are not the model's",
        field,
    )


def surrogate_flags(segments: Iterable[Segment], text: str | None = None) -> list[Flag]:
    """:func:`surrogate_flag` for each field segment (and template text, under ``None``).

    ``text``: the segments' joined text, when the caller has it: one scan of it skips the per-segment
    scans on the (usual) turn that holds no surrogate."""
    if text is not None:
        try:  # C speed, and free when the text was already encoded (CPython caches a str's UTF-8)
            text.encode("utf-8")
            return []
        except UnicodeEncodeError:
            pass  # a surrogate (the only str UTF-8 refuses): find each one
    return [f for seg in segments if not seg.special and (f := surrogate_flag(seg.text, seg.field)) is not None]
