"""The pieces a renderer produces, and the per-profile encoder that turns them into ids.

A rendered turn (or prompt) is a sequence of :class:`Segment`: control markers, which are one special
id each, and text. How the official tokenizer turns the sequence into ids is a property of the chat
profile (``ChatProfile.encoding``):

* ``one_encode`` (K2.x): the ids of one encode of the rendered text with special tokens allowed. Special
  tokens are hard BPE boundaries, so when no field holds special-token text and the official chunking
  leaves the text whole, they are built from the pieces: the text between markers with
  ``encode_ordinary`` and each marker's id, which skips tiktoken's conversion of the allowed set and its
  scan for special tokens (as fast as one encode on ``benchmarks/k3.py``, within 1%). Otherwise the text is encoded
  once, allowing only the special texts the turn holds (tiktoken converts the allowed set on every call).
* ``per_segment`` (K3): every segment is encoded on its own, markers as special ids and every text
  piece as ordinary text, so no BPE merge crosses a segment boundary and special-token text inside a
  field stays ordinary text.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ._base.files import SURROGATE
from .errors import InvalidInputTypeError
from .flags import Flag, FlagCode
from .profiles import ChatProfile, EncodingStyle
from .special_tokens import registry_named, special_texts_in
from .tokenizer import MAX_RUN_CHARS, KimiTokenizer, may_be_cut


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


_TEXT_OF = operator.itemgetter(0)


def marker(text: str) -> Segment:
    """A control marker: the special token ``text``."""
    return Segment(text, None, True)


@dataclass(frozen=True)
class RenderedTurn:
    """The rendered text, the pieces it was built from, and what rendering noticed.

    ``fields_plain``: the renderer checked that no field holds special-token-shaped text (so a one-encode
    need not scan the text between markers for it). ``fields_ordinary``: the format encodes field text as
    ordinary text whatever it holds (``per_segment``, K3).
    """

    segments: tuple[Segment, ...]
    flags: tuple[Flag, ...]
    fields_plain: bool = False
    fields_ordinary: bool = False
    #: the segments' texts joined: set here, not a cached property, which on Python 3.11 takes a lock on every first
    #: read (twice the join's time on a short turn, and every rebuilt turn reads it)
    text: str = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # (the third field was the special texts before they were computed on demand: a set passed there is loud)
        if self.fields_plain is not True and self.fields_plain is not False:
            raise InvalidInputTypeError(f"must be True or False, got {type(self.fields_plain).__name__}", field="fields_plain")
        if self.fields_ordinary is not True and self.fields_ordinary is not False:
            raise InvalidInputTypeError(f"must be True or False, got {type(self.fields_ordinary).__name__}", field="fields_ordinary")
        try:
            text = "".join(map(_TEXT_OF, self.segments))  # C all the way (a K3 tool call holds ~70 segments)
        except (TypeError, IndexError):  # (not a sequence of segments: no text to read)
            raise InvalidInputTypeError(f"must be a tuple of Segment, got {type(self.segments).__name__}", field="segments") from None
        object.__setattr__(self, "text", text)

    @functools.cached_property
    def special_texts(self) -> frozenset[str]:
        """The special-token texts an encode of the turn may meet as special tokens: the markers, and (unless
        ``fields_ordinary``) every special-token-shaped text a field holds, so a one-encode can allow exactly
        those. Computed when read: no encoder of the package needs it."""
        found = {piece for piece, _field, special in self.segments if special}
        if not self.fields_ordinary:
            for piece, field, special in self.segments:
                if field is not None and not special:
                    found.update(special_texts_in(piece))
        return frozenset(found)

    def has_flag(self, code: str) -> bool:
        """Whether a flag of ``code`` (a :class:`~kimi_recon.flags.FlagCode` or its value) is among :attr:`flags`."""
        if not isinstance(code, str):  # (an array's == answers for each item, not once)
            raise InvalidInputTypeError(f"must be a flag code (a FlagCode or its string), got {type(code).__name__}", field="code")
        return any(f.code == code for f in self.flags)


def rendered_turn(segments: tuple[Segment, ...], flags: tuple[Flag, ...], *, fields_plain: bool = False, fields_ordinary: bool = False) -> RenderedTurn:
    """``RenderedTurn(segments, flags, fields_plain=…, fields_ordinary=…)`` for a renderer, whose arguments are right
    by construction: without the frozen dataclass's ``__init__`` (each field through ``object.__setattr__``) and its
    checks, half the time on every rendered turn (``tests/test_hot_path_shortcuts.py`` checks the two are equal)."""
    turn = object.__new__(RenderedTurn)
    turn.__dict__.update(
        segments=segments, flags=flags, fields_plain=fields_plain, fields_ordinary=fields_ordinary, text="".join(map(_TEXT_OF, segments))
    )
    return turn


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
    if not isinstance(profile, ChatProfile) or not isinstance(tokenizer, KimiTokenizer):
        wrong = ("profile", "a ChatProfile (see get_profile)", profile) if not isinstance(profile, ChatProfile) else ("tokenizer", "a KimiTokenizer", tokenizer)
        raise InvalidInputTypeError(f"must be {wrong[1]}, got {type(wrong[2]).__name__}", field=wrong[0])
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


#: A ``per_segment`` turn's ids in the order they are joined: an ``int`` is the index of a text in the list of texts
#: to encode (its ids come fresh from tiktoken), a list is ids to copy (a marker's, a cached template text's).
_Plan = list[int | list[int]]


def _encode_per_segment(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, ids_of_markers: dict[str, int]) -> list[int]:
    """The ``per_segment`` ids of one turn, in one pass: :func:`_plan_per_segment`'s plan, whose list of texts
    lets turns share a call into tiktoken (:func:`encode_rendered_together`), costs one turn alone about 7% (a K3
    tool-call turn, timeit: 78.6 against 73.3 µs; its dozens of pieces each go into the plan, then out of it)."""
    ids: list[int] = []
    ordinary = tokenizer.encode_ordinary_piece
    short = tokenizer.encoding.encode_ordinary  # a text no official chunk cut can fall in: one call less
    template = tokenizer.encode_template_text
    cached = tokenizer.template_text_ids.get  # (as in the plan)
    for text, field, special in segments:
        if special:
            ids.append(ids_of_markers[text])
        elif field is None:
            ids += cached(text) or template(text)
        elif text:
            ids = _followed_by(ids, short(text) if len(text) <= MAX_RUN_CHARS else ordinary(text))
    return ids


def _plan_per_segment(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, ids_of_markers: dict[str, int], texts: list[str]) -> _Plan:
    """The plan of ``per_segment`` ids: each marker's id, each template text's (cached), each field text
    appended to ``texts`` to be encoded on its own."""
    plan: _Plan = []
    template = tokenizer.encode_template_text
    cached = tokenizer.template_text_ids.get  # its cache, read here: a K3 tool call holds dozens of these pieces
    for text, field, special in segments:
        if special:
            plan.append([ids_of_markers[text]])
        elif field is None:
            plan.append(cached(text) or template(text))
        elif text:
            plan.append(len(texts))
            texts.append(text)
    return plan


def _assembled(plan: _Plan, encoded: list[list[int]]) -> list[int]:
    """The ids of ``plan``, with ``encoded[i]`` (lists the caller gives away) for each text index ``i``."""
    ids: list[int] = []
    for part in plan:
        if type(part) is int:
            ids = _followed_by(ids, encoded[part])
        else:
            ids += part  # type: ignore[arg-type]  # (not an int: a list to copy)
    return ids


#: The longest rendered turn :func:`encode_rendered_together` encodes beside others. Past it, what sharing a call
#: costs grows with the text (the joined text's scan for special tokens, the search of the ids for separators, the
#: pieces' UTF-8 left unconverted for the surrogate check) and what it saves does not (a call into tiktoken): on
#: 10k-character turns their own encode made ``reconstruct_many`` 5-6% faster, with any limit from 500 to 4,000
#: the same within the noise on ordinary turns (docs/benchmarks.md, "One turn and many").
TOGETHER_MAX_CHARS = 2_000


def encode_rendered_together(rendered: Sequence[RenderedTurn], tokenizer: KimiTokenizer, profile: ChatProfile) -> list[list[int] | None]:
    """``encode_segments`` of each rendered turn (special-token text in fields read as the profile's official
    tokenizer reads it), in one call into tiktoken for them all (:meth:`~kimi_recon.tokenizer.KimiTokenizer.encode_many`);
    None for a turn the caller must encode on its own: one longer than :data:`TOGETHER_MAX_CHARS`, every one when
    fewer than two are left. A one-encode is ``tokenizer.encode(text)`` of each turn's text (which the piece-wise
    encode equals); a ``per_segment`` turn is its field texts encoded as ordinary text beside every other turn's,
    with its markers' and template texts' ids as :func:`encode_segments` writes them. The arguments are the
    caller's to have checked."""
    out: list[list[int] | None] = [None] * len(rendered)
    short = [i for i, turn in enumerate(rendered) if len(turn.text) <= TOGETHER_MAX_CHARS]
    if len(short) < 2:
        return out  # nothing to share a call with: the one-turn encode is the faster road
    together = _one_encodes_together if profile.encoding != "per_segment" else _per_segment_together
    for i, ids in zip(short, together([rendered[i] for i in short], tokenizer, profile), strict=True):
        out[i] = ids
    return out


def _one_encodes_together(rendered: list[RenderedTurn], tokenizer: KimiTokenizer, profile: ChatProfile) -> list[list[int]]:
    return tokenizer.encode_many([turn.text for turn in rendered])


def _per_segment_together(rendered: list[RenderedTurn], tokenizer: KimiTokenizer, profile: ChatProfile) -> list[list[int]]:
    pieces: list[str] = []
    ids_of_markers = marker_ids(profile)
    plans = [_plan_per_segment(turn.segments, tokenizer, ids_of_markers, pieces) for turn in rendered]
    encoded = tokenizer.encode_many(pieces, allowed_special=frozenset()) if pieces else []
    return [_assembled(plan, encoded) for plan in plans]


def _followed_by(ids: list[int], more: list[int]) -> list[int]:
    """``ids + more`` in whichever of the two lists (both the caller's) is longer: adding a list's ids to
    another writes each id's reference count, and a turn's ids are fresh objects scattered in memory, so the
    shorter side's ids are the ones copied (the longer list's references move as one block)."""
    if len(more) > len(ids):
        more[:0] = ids
        return more
    ids += more
    return ids


def _encode_once(segments: tuple[Segment, ...] | list[Segment], tokenizer: KimiTokenizer, fields_plain: bool, text: str | None) -> list[int]:
    """``tokenizer.encode(text)``: the text between markers with ``encode_ordinary`` and the markers' ids
    when that is provably the same (see :func:`_encode_between_markers`), else one encode allowing only
    the special texts the segments hold (tiktoken converts the allowed set on every call, and a handful
    costs far less than all 256)."""
    if text is None:
        text = "".join(s.text for s in segments)
    if fields_plain and not may_be_cut(text) and tokenizer.specials_scannable:
        ids = _encode_between_markers(segments, tokenizer.special_tokens, tokenizer.encoding.encode_ordinary)
        if ids is not None:
            return ids
    specials = {s.text for s in segments if s.special}
    if not fields_plain:
        specials.update(special_texts_in(text))
    return tokenizer.encode_with_specials(text, specials)


def _encode_between_markers(
    segments: tuple[Segment, ...] | list[Segment], specials: Mapping[str, int], encode_ordinary: Callable[[str], list[int]]
) -> list[int] | None:
    """One encode's ids, built from the pieces: the text between two markers with ``encode_ordinary``, each
    marker as its id; None when a marker is not a special token of the table (one encode would read its
    text as ordinary text).

    The caller makes this exact: one encode cuts its text only at the special-token texts it holds
    (tiktoken encodes the text between them on its own, as ordinary text), when the official chunking
    leaves the text whole (:func:`~kimi_recon.tokenizer.may_be_cut` is False). With no special-token text in
    any field (``fields_plain``, a scan that finds every one when every special text of the tokenizer has a
    scannable shape), the texts one encode cuts at are the markers; no special text crosses a marker's edge,
    as none holds ``<`` or ``[`` after its first character. No allowed set to convert and no scan of the
    text for special tokens, against a few more calls into tiktoken: the same time as one encode.
    """
    ids: list[int] = []
    piece: str | None = None  # the text since the last marker (adjacent texts are one BPE span)
    for text, _field, special in segments:
        if special:
            tid = specials.get(text)
            if tid is None:
                return None
            if piece:
                ids = _followed_by(ids, encode_ordinary(piece))
            piece = None
            ids.append(tid)
        elif piece is None:
            piece = text
        else:  # texts next to each other (no renderer writes them): one span, and it must hold no special text
            piece += text
            if special_texts_in(piece):
                return None
    if piece:
        ids = _followed_by(ids, encode_ordinary(piece))
    return ids


def surrogate_flag(text: str, field: str | None) -> Flag | None:
    """A ``lone_surrogate`` flag when ``text`` holds UTF-16 surrogate code points, else None.

    UTF-8 cannot carry them (they come from a ``\\ud83d`` JSON escape: half an emoji split across two
    stream chunks, or a server bug), so no token ids spell that text: the encoder writes U+FFFD for a
    lone one (and the character for a high+low pair), and the ids decode to other text. The model's
    ids there cannot be known from the text.
    """
    found = SURROGATE.search(text)
    if found is None:
        return None
    n = len(SURROGATE.findall(text))
    return Flag(
        FlagCode.LONE_SURROGATE,
        f"holds {n} UTF-16 surrogate code point{'' if n == 1 else 's'} (first {found.group()!r} at character {found.start()}), "
        "which UTF-8 cannot carry; encoded as U+FFFD (a high+low pair as its character), so the ids there are not the model's",
        field,
    )


def surrogate_flags(segments: Iterable[Segment], text: str | None = None) -> list[Flag]:
    """:func:`surrogate_flag` for each field segment (and template text, under ``None``).

    ``text``: the segments' joined text, when the caller has it. ASCII text (a flag CPython keeps) holds
    no surrogate, and text UTF-8 accepts holds none either. Which check is cheaper depends on the turn: a
    piece's UTF-8 is a copy of what CPython cached when the encoder read the piece, and the joined text's
    is a fresh conversion, cheaper than visiting dozens of short pieces (a K3 tool call)."""
    pieces = segments if isinstance(segments, (tuple, list)) else tuple(segments)
    if text is not None:
        if text.isascii():
            return []
        if len(pieces) * _CHARS_PER_VISIT > len(text):
            try:
                text.encode("utf-8")
                return []
            except UnicodeEncodeError:
                pass  # a surrogate (the only str UTF-8 refuses): find each one
    flags = []
    for piece, field, special in pieces:
        if special or piece.isascii():
            continue
        try:
            piece.encode("utf-8")
        except UnicodeEncodeError:
            if (flag := surrogate_flag(piece, field)) is not None:
                flags.append(flag)
    return flags


#: About as many characters as UTF-8 converts in the time of one visit to a piece.
_CHARS_PER_VISIT = 100
