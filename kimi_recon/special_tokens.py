"""The canonical special-token tables of the Kimi tokenizers (K2.5 and K3), with lookups both ways.

The K2.5 table is written out here, independent of any tokenizer file, so that it can be used to check
tokenizers (see :mod:`kimi_recon.audit`). It was taken from Moonshot's official K2.5
``tokenizer_config.json`` and is tested against ids decoded by Moonshot's official tokenizer code.
Kimi-K3 uses the same ids with other names (163586 is ``<|end_of_msg|>``, K2.5's ``<think>`` and
tool-call slots are reserved); its 16 named tokens are bundled data (``data/k3/special_tokens.json``,
sha256-checked when read). :func:`kimi_recon.profiles.special_tokens_for` picks the table of a chat profile.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import json
import numbers
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import overload

from ._base.arguments import instance_argument
from .errors import InvalidInputTypeError, TokenizerLoadError, UnknownSpecialTokenError

#: Every special-token text of the Kimi tokenizers has one of these shapes (``<|name|>``, ``[XYZ]``,
#: ``<think>``, ``</think>``); a tokenizer whose table does not is handled without the scan (see
#: ``KimiTokenizer.encode_with_specials``).
SPECIAL_TEXT_SHAPE = re.compile(r"<\|[A-Za-z0-9_]+\|>|\[[A-Z]{3}\]|</?think>")


# The two halves of SPECIAL_TEXT_SHAPE, each starting with one literal character: ``re`` then jumps from
# one occurrence of that character to the next, where the alternation of SPECIAL_TEXT_SHAPE tries every
# position (twenty to thirty times slower on code). The halves share no character, so their matches
# never overlap, and together in text order they are exactly SPECIAL_TEXT_SHAPE's (a property test checks it).
_ANGLE_SHAPE = re.compile(r"<(?:\|[A-Za-z0-9_]+\||/?think)>")
_BRACKET_SHAPE = re.compile(r"\[[A-Z]{3}\]")


def special_texts_in(text: str, known: Container[str] | None = None) -> list[str]:
    """Special-token-shaped substrings of ``text`` (``SPECIAL_TEXT_SHAPE.findall``), in order; only those
    in ``known`` when it is given."""
    instance_argument(text, "text", str, "a string")
    angle = _ANGLE_SHAPE.findall(text) if "<" in text else []  # most text: memchr scans instead of a regex pass
    bracket = _BRACKET_SHAPE.findall(text) if "[" in text else []
    if angle and bracket:
        found = [m.group() for m in sorted((*_ANGLE_SHAPE.finditer(text), *_BRACKET_SHAPE.finditer(text)), key=lambda m: m.start())]
    else:
        found = angle or bracket
    return found if known is None else [t for t in found if t in known]


#: Ids 0..163583 are BPE ranks; the 256 ids from here on are special-token slots.
NUM_BASE_TOKENS = 163_584
NUM_SPECIAL_SLOTS = 256


@dataclass(frozen=True)
class SpecialToken:
    """One special-token slot.

    ``special`` mirrors the tokenizer config's flag (the tool-call markers and ``<think>``/``</think>``
    are not marked special, so ``skip_special_tokens`` keeps them). ``name`` is a readable constant-style
    name for the common tokens, None for reserved slots.
    """

    text: str
    id: int
    special: bool
    role: str
    name: str | None = None


# (id, text, special, role, readable name)
_K25_NAMED: tuple[tuple[int, str, bool, str, str], ...] = (
    (163584, "[BOS]", True, "bos", "BOS"),
    (163585, "[EOS]", True, "eos", "EOS"),
    (163586, "<|im_end|>", True, "message", "IM_END"),
    (163587, "<|im_user|>", True, "message", "IM_USER"),
    (163588, "<|im_assistant|>", True, "message", "IM_ASSISTANT"),
    (163590, "<|start_header_id|>", True, "header", "START_HEADER"),
    (163591, "<|end_header_id|>", True, "header", "END_HEADER"),
    (163593, "[EOT]", True, "eot", "EOT"),
    (163594, "<|im_system|>", True, "message", "IM_SYSTEM"),
    (163595, "<|tool_calls_section_begin|>", False, "tool_call", "TOOL_CALLS_SECTION_BEGIN"),
    (163596, "<|tool_calls_section_end|>", False, "tool_call", "TOOL_CALLS_SECTION_END"),
    (163597, "<|tool_call_begin|>", False, "tool_call", "TOOL_CALL_BEGIN"),
    (163598, "<|tool_call_argument_begin|>", False, "tool_call", "TOOL_CALL_ARGUMENT_BEGIN"),
    (163599, "<|tool_call_end|>", False, "tool_call", "TOOL_CALL_END"),
    (163601, "<|im_middle|>", True, "message", "IM_MIDDLE"),
    (163602, "<|media_begin|>", True, "media", "MEDIA_BEGIN"),
    (163603, "<|media_content|>", True, "media", "MEDIA_CONTENT"),
    (163604, "<|media_end|>", True, "media", "MEDIA_END"),
    (163605, "<|media_pad|>", True, "media", "MEDIA_PAD"),
    (163606, "<think>", False, "thinking", "THINK"),
    (163607, "</think>", False, "thinking", "THINK_END"),
    (163838, "[UNK]", True, "unk", "UNK"),
    (163839, "[PAD]", True, "pad", "PAD"),
)


#: Readable name and role of each named Kimi-K3 token; the texts, ids and flags come from the bundled file.
_K3_NAMES: dict[int, tuple[str, str]] = {
    163584: ("bos", "BOS"),
    163585: ("eos", "EOS"),
    163586: ("message", "END_OF_MSG"),
    163587: ("markup", "OPEN"),
    163588: ("markup", "CLOSE"),
    163589: ("markup", "SEP"),
    163590: ("header", "START_HEADER"),
    163591: ("header", "END_HEADER"),
    163593: ("eot", "EOT"),
    163602: ("media", "MEDIA_BEGIN"),
    163603: ("media", "MEDIA_CONTENT"),
    163604: ("media", "MEDIA_END"),
    163605: ("media", "MEDIA_PAD"),
    163649: ("mode", "OSAGENT_MODE"),
    163838: ("unk", "UNK"),
    163839: ("pad", "PAD"),
}
K3_SPECIAL_TOKENS_FILE = "special_tokens.json"
#: sha256 of the bundled ``data/k3/special_tokens.json`` (checked every time it is read).
K3_SPECIAL_TOKENS_SHA256 = "ee1980dfbc859e6e443b7dff4bbb357446e98ad36b0f7f12988f8f5860837bd3"


def _read_k3_named() -> list[tuple[int, str, bool]]:
    data = (resources.files("kimi_recon") / "data" / "k3" / K3_SPECIAL_TOKENS_FILE).read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != K3_SPECIAL_TOKENS_SHA256:
        raise TokenizerLoadError(f"bundled data/k3/{K3_SPECIAL_TOKENS_FILE} has sha256 {digest}, expected {K3_SPECIAL_TOKENS_SHA256}")
    return [(int(t["id"]), str(t["content"]), bool(t["special"])) for t in json.loads(data)["tokens"]]


def reserved_token_text(token_id: int) -> str:
    """The text of an unnamed special slot, as the official tokenizer names it."""
    return f"<|reserved_token_{token_id}|>"


class SpecialTokenRegistry:
    """An immutable table of special tokens with lookups by text, id and readable name.

    >>> SPECIAL_TOKENS.id("<|im_end|>")
    163586
    >>> SPECIAL_TOKENS.text(163607)
    '</think>'
    """

    def __init__(self, tokens: Iterable[SpecialToken], name: str = "custom") -> None:
        if isinstance(tokens, (str, bytes, Mapping)) or not isinstance(tokens, Iterable):
            raise InvalidInputTypeError(f"must be an iterable of SpecialToken, got {type(tokens).__name__}", field="tokens")
        tokens = list(tokens)
        if not all(isinstance(t, SpecialToken) for t in tokens):
            raise InvalidInputTypeError("must hold only SpecialToken entries", field="tokens")
        self.name = name
        self._tokens = tuple(sorted(tokens, key=lambda t: t.id))
        # Later entries win on a clash; the audit reports clashes instead of the lookups hiding them.
        self._by_text = {t.text: t for t in self._tokens}
        self._by_id = {t.id: t for t in self._tokens}
        self._by_name = {t.name: t for t in self._tokens if t.name}

    @classmethod
    def kimi_k25(cls) -> SpecialTokenRegistry:
        """The canonical Kimi-K2.5 table: 23 named tokens and 233 reserved slots, ids 163584..163839."""
        named = {tid: SpecialToken(text, tid, special, role, name) for tid, text, special, role, name in _K25_NAMED}
        return cls(_with_reserved_slots(named), "kimi-k2.5")

    @classmethod
    def kimi_k3(cls) -> SpecialTokenRegistry:
        """The Kimi-K3 table: 16 named tokens (bundled, sha256-checked) and 240 reserved slots, same ids."""
        return _k3_registry()


    @property
    def tokens(self) -> tuple[SpecialToken, ...]:
        return self._tokens

    def __iter__(self) -> Iterator[SpecialToken]:
        return iter(self._tokens)

    def __len__(self) -> int:
        return len(self._tokens)

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._by_text or key in self._by_id or key in self._by_name
        except TypeError:  # an unhashable key (a list) is in no table, as with a dict's ``in``
            return False

    def __repr__(self) -> str:
        return f"SpecialTokenRegistry({self.name!r}, {len(self._tokens)} tokens)"

    @overload
    def __getitem__(self, key: str) -> int: ...
    @overload
    def __getitem__(self, key: int) -> str: ...
    def __getitem__(self, key: str | int) -> int | str:
        """``SPECIAL_TOKENS["<|im_end|>"]`` (or ``["IM_END"]``) is the id, as tiktoken's ``special_tokens`` mapping
        has it; ``SPECIAL_TOKENS[163586]`` the text. An unknown key raises :class:`UnknownSpecialTokenError`
        (a ``KeyError``) with the closest known token."""
        entry = self.entry(key)
        return entry.text if not isinstance(key, str) else entry.id

    def entry(self, key: str | int) -> SpecialToken:
        """The entry for a token text (``"<|im_end|>"``), a readable name (``"IM_END"``) or an id (a numpy
        integer too)."""
        if isinstance(key, bool) or not isinstance(key, (str, numbers.Integral)):
            raise InvalidInputTypeError(f"special-token key must be a str or an int, got {type(key).__name__}", field="key")
        if not isinstance(key, str):
            key = int(key)
            found = self._by_id.get(key)
            if found is None:
                raise UnknownSpecialTokenError(f"{key} is not a special-token id{self._id_hint(key)}")
            return found
        found = self._by_text.get(key) or self._by_name.get(key)
        if found is None:
            raise UnknownSpecialTokenError(f"{key!r} is not a known special token{self._text_hint(key)}")
        return found

    def id(self, text: str) -> int:
        """The id of a special-token text or readable name."""
        if not isinstance(text, str):
            raise InvalidInputTypeError(f"special-token text must be a str, got {type(text).__name__}", field="text")
        return self.entry(text).id

    def text(self, token_id: int) -> str:
        """The text of a special-token id."""
        if isinstance(token_id, bool) or not isinstance(token_id, numbers.Integral):
            raise InvalidInputTypeError(f"special-token id must be an int, got {type(token_id).__name__}", field="token_id")
        return self.entry(token_id).text

    def get(self, key: str | int) -> SpecialToken | None:
        """Like :meth:`entry`, but None when the key is unknown."""
        try:
            return self.entry(key)
        except UnknownSpecialTokenError:
            return None

    def texts(self) -> dict[str, int]:
        """Text -> id for every entry (the form tiktoken's ``special_tokens`` takes)."""
        return {t.text: t.id for t in self._tokens}

    def named(self) -> tuple[SpecialToken, ...]:
        """The entries that are not reserved slots."""
        return tuple(t for t in self._tokens if t.role != "reserved")

    def suggest(self, text: str) -> str | None:
        """The closest known token text or name to ``text``, for near misses such as ``<|im_end|``."""
        if not isinstance(text, str):
            raise InvalidInputTypeError(f"must be a str, got {type(text).__name__}", field="text")
        if len(text) > 200:  # no token text is this long; difflib's cost grows with it
            return None
        named = [t.text for t in self.named()] + list(self._by_name)
        matches = difflib.get_close_matches(text, named, n=1, cutoff=0.6)
        if not matches:
            matches = difflib.get_close_matches(text, list(self._by_text), n=1, cutoff=0.8)
        return matches[0] if matches else None

    def _text_hint(self, text: str) -> str:
        best = self.suggest(text)
        if best is None:
            return ""
        token = self._by_text.get(best) or self._by_name[best]
        return f"; did you mean {token.text!r} (id {token.id})?"

    def _id_hint(self, token_id: int) -> str:
        if not self._tokens:
            return ""
        return f"; special ids run from {self._tokens[0].id} to {self._tokens[-1].id}"


def _with_reserved_slots(named: dict[int, SpecialToken]) -> Iterator[SpecialToken]:
    for i in range(NUM_BASE_TOKENS, NUM_BASE_TOKENS + NUM_SPECIAL_SLOTS):
        yield named.get(i) or SpecialToken(reserved_token_text(i), i, True, "reserved")


@functools.lru_cache(maxsize=1)
def _k3_registry() -> SpecialTokenRegistry:
    named = {}
    for tid, text, special in _read_k3_named():
        role, name = _K3_NAMES.get(tid, ("other", None))
        named[tid] = SpecialToken(text, tid, special, role, name)
    return SpecialTokenRegistry(_with_reserved_slots(named), "kimi-k3")


def registry_named(name: str) -> SpecialTokenRegistry:
    """A bundled table by name (a ``ChatProfile.special_tokens``): ``kimi-k2.5`` or ``kimi-k3``."""
    table = _TABLES.get(name)
    if table is None:
        raise UnknownSpecialTokenError(f"no special-token table named {name!r}; known: {', '.join(_TABLES)}")
    return table()


def registry_matching(texts_by_id: dict[int, str]) -> SpecialTokenRegistry:
    """The bundled table a tokenizer config's named tokens agree with: another table than K2.5's when the
    config names a token only that table has (K3's ``<|end_of_msg|>``), else K2.5's."""
    for load in _TABLES.values():
        other = load()
        only_there = {t.id: t.text for t in other.named() if SPECIAL_TOKENS.text(t.id) != t.text}
        if any(only_there.get(tid) == text for tid, text in texts_by_id.items()):
            return other
    return SPECIAL_TOKENS


#: The canonical Kimi-K2.5 special-token table (also K2-Thinking and K2.6).
SPECIAL_TOKENS = SpecialTokenRegistry.kimi_k25()

#: The bundled tables by name (``SpecialTokenRegistry.name``, ``ChatProfile.special_tokens``).
_TABLES: dict[str, Callable[[], SpecialTokenRegistry]] = {"kimi-k2.5": lambda: SPECIAL_TOKENS, "kimi-k3": _k3_registry}
