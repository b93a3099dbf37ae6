"""The Kimi tokenizer: Moonshot's tiktoken vocab, split regex, special tokens and chunking rule.

``KimiTokenizer.encode`` reproduces the official ``TikTokenTokenizer.encode`` (tokenization_kimi.py):
special-token text becomes the special id, and long inputs are cut exactly where the official code
cuts them, because those cuts change the BPE result.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import numbers
import os
import re
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import tiktoken

from ._base.arguments import bool_argument, instance_argument
from .errors import InvalidInputError, InvalidInputTypeError, TokenizerLoadError, preview
from .profiles import ChatProfile, get_profile
from .special_tokens import NUM_SPECIAL_SLOTS, SPECIAL_TEXT_SHAPE, SpecialTokenRegistry, registry_matching, registry_named, reserved_token_text

#: sha256 of every tiktoken.model known to be a Kimi vocab.
KNOWN_VOCAB_SHA256: Mapping[str, str] = {
    "b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103": (
        "Kimi tiktoken.model, 163,584 ranks (K2, K2-Instruct, K2-Thinking, K2.5, K2.6, Kimi-Linear, Moonlight)"
    ),
}

#: The split regex of tokenization_kimi.py (fancy-regex syntax, ``&&`` is class intersection).
KIMI_PAT_STR = "|".join(
    [
        r"""[\p{Han}]+""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

#: At most this many distinct template texts are cached per tokenizer (see ``encode_template_text``).
_TEMPLATE_CACHE_SIZE = 4096

#: The official encode cuts its input every 400,000 characters ...
MAX_ENCODE_CHARS = 400_000
#: ... and cuts any run of whitespace or of non-whitespace characters (``str.isspace``) every 25,000.
MAX_RUN_CHARS = 25_000

VOCAB_FILE = "tiktoken.model"
CONFIG_FILE = "tokenizer_config.json"
TEMPLATE_FILE = "chat_template.jinja"
MODEL_CONFIG_FILE = "config.json"
BUNDLED = "kimi-k2.5 (bundled)"
BUNDLED_K3 = "kimi-k3 (bundled)"
#: The special-token table of each bundled tokenizer, by its ``source`` (the first is the default).
_BUNDLED_TABLES = {BUNDLED: "kimi-k2.5", BUNDLED_K3: "kimi-k3"}


@dataclass(frozen=True)
class AddedToken:
    """An entry of ``added_tokens_decoder`` in a tokenizer_config.json."""

    id: int
    text: str
    special: bool


@functools.lru_cache(maxsize=4)
def _long_run(max_run: int) -> re.Pattern[str]:
    # A run longer than max_run. The lookbehinds anchor a match at the start of a run, so the scan is
    # linear: a position inside a run fails at once instead of rescanning the run. Python's ``\s`` is
    # ``str.isspace`` (tested over every code point).
    # (% and not an f-string: the regex's own quantifier braces stay as written)
    return re.compile(r"(?<!\s)\s{%d,}|(?<!\S)\S{%d,}" % (max_run + 1, max_run + 1))  # noqa: UP031


def _may_have_long_run(piece: str, max_run: int) -> bool:
    """False only when ``piece`` surely has no run longer than ``max_run``.

    Such a run contains a whole block of ``max_run // 2`` characters aligned at a multiple of that size,
    and that block is all whitespace or all non-whitespace; two searches per block rule it out.
    """
    block = max(max_run // 2, 1)
    ascii_text = piece.isascii()
    for start in range(0, len(piece) - block + 1, block):
        if _find_space(piece, start, start + block, ascii_text) < 0 or _NON_SPACE.search(piece, start, start + block) is None:
            return True
    return False


def may_be_cut(text: str) -> bool:
    """False when the official encode surely tokenizes ``text`` whole (:func:`official_chunks` yields it as
    one piece): at most ``MAX_ENCODE_CHARS`` characters and no run longer than ``MAX_RUN_CHARS``."""
    if len(text) <= MAX_RUN_CHARS:
        return False
    return len(text) > MAX_ENCODE_CHARS or _may_have_long_run(text, MAX_RUN_CHARS)


_SPACE = re.compile(r"\s")
_NON_SPACE = re.compile(r"\S")
#: The ASCII characters ``str.isspace`` accepts (``\x1c`` - ``\x1f`` too).
_ASCII_SPACES = tuple(c for c in map(chr, range(128)) if c.isspace())


def _find_space(text: str, start: int, end: int, ascii_text: bool) -> int:
    """The index of the first whitespace character of ``text[start:end]``, or -1; ``ascii_text`` is
    ``text.isascii()``. A regex visits every character of a block without whitespace (a base64 blob in a
    tool argument is 50k of them), and ``str.find`` skips through it many times faster; it looks window by
    window, so the rarer spaces are not searched for to the end of a long text."""
    if not ascii_text:
        found = _SPACE.search(text, start, end)
        return found.start() if found is not None else -1
    for lo in range(start, end, _FIND_WINDOW):
        hi = min(lo + _FIND_WINDOW, end)
        hits = [i for i in (text.find(c, lo, hi) for c in _ASCII_SPACES) if i >= 0]
        if hits:
            return min(hits)
    return -1


_FIND_WINDOW = 16384


def official_chunks(text: str, max_chars: int = MAX_ENCODE_CHARS, max_run: int = MAX_RUN_CHARS) -> Iterator[str]:
    """The pieces the official encode tokenizes separately, in order; they concatenate to ``text``."""
    for start in range(0, len(text), max_chars):
        piece = text[start : start + max_chars]
        cut = 0
        for run_start, run_end in _long_runs(piece, max_run):
            # The official loop cuts a long run at its (max_run + 1)-th character, then every max_run after.
            for pos in range(run_start + max_run, run_end, max_run):
                yield piece[cut:pos]
                cut = pos
        yield piece[cut:]


def _long_runs(piece: str, max_run: int) -> Iterator[tuple[int, int]]:
    """(start, end) of each run of whitespace or of non-whitespace longer than ``max_run`` in ``piece``, in order
    (what ``_long_run(max_run).finditer`` finds, without visiting every character).

    Such a run holds a whole aligned block of ``max(max_run // 2, 1)`` characters of its kind (see
    :func:`_may_have_long_run`), so only the run around such a block is measured: it starts after the last
    character of the other kind in the block before (which is not all of this kind, or its run would have
    reached past this block), and ends at the next character of the other kind."""
    block = max(max_run // 2, 1)
    ascii_text = piece.isascii()
    covered = 0  # the end of the last run measured: blocks before it are inside that run
    for b in range(0, len(piece) - block + 1, block):
        if b < covered:
            continue
        e = b + block
        lo = max(b - block, 0)
        if _find_space(piece, b, e, ascii_text) < 0:  # a run of non-whitespace: measured by its spaces
            before = _find_space(piece[lo:b][::-1], 0, b - lo, ascii_text)
            after = _find_space(piece, e, len(piece), ascii_text)
        elif _NON_SPACE.search(piece, b, e) is None:  # a run of whitespace
            found = _NON_SPACE.search(piece[lo:b][::-1])
            before = found.start() if found is not None else -1
            found = _NON_SPACE.search(piece, e)
            after = found.start() if found is not None else -1
        else:
            continue
        run_start = b - before if before >= 0 else lo
        covered = after if after >= 0 else len(piece)
        if covered - run_start > max_run:
            yield run_start, covered


def _check_text(text: object) -> None:
    if not isinstance(text, str):
        raise InvalidInputTypeError(f"encode() takes a str, got {type(text).__name__}", field="text")


def _check_errors(errors: object) -> None:
    """``errors`` is a codec error handler Python knows (``"strict"``, ``"replace"``, ``"ignore"``, …)."""
    instance_argument(errors, "errors", str, 'an error handler name such as "strict" or "replace"')
    import codecs

    try:
        codecs.lookup_error(errors)  # type: ignore[arg-type]  # (a str, checked above)
    except (LookupError, ValueError):  # (a NUL or a lone surrogate in the name: ValueError, UnicodeEncodeError)
        raise InvalidInputError(f'is no error handler Python knows ("strict", "replace", "ignore", …), got {preview(errors)}', field="errors") from None


def _empty(value: object) -> bool:
    """True for a value that allows no special token: ``""``, ``0``, an empty collection (an array's truth is no
    answer: its length is)."""
    if isinstance(value, Collection):
        return len(value) == 0
    return isinstance(value, int) and value == 0


def _encode_in_official_chunks(text: str, encode_piece: Callable[[str], list[int]]) -> list[int]:
    if len(text) <= MAX_RUN_CHARS:  # no cut can fall inside a text this short
        return encode_piece(text)
    ids: list[int] = []
    for chunk in official_chunks(text):
        ids += encode_piece(chunk)
    return ids


def _split_at(ids: list[int], sep_id: int, n: int) -> list[list[int]] | None:
    """``ids`` cut at its ``n - 1`` occurrences of ``sep_id``, which are dropped; None when it holds another number of them."""
    parts = []
    start = 0
    try:
        for _ in range(n - 1):
            end = ids.index(sep_id, start)
            parts.append(ids[start:end])
            start = end + 1
    except ValueError:
        return None
    last = ids[start:]
    if sep_id in last:
        return None
    parts.append(last)
    return parts


# --- tiktoken adapter -----------------------------------------------------------------------------
# tiktoken keeps the ranks, the split regex and the special-token table of an Encoding in private
# attributes, and its bytes encoder is private too. Every read of them in this package goes through
# the four functions below, and tests/test_tiktoken_adapter.py checks each against a fresh Encoding,
# so a tiktoken that renamed or reshaped one fails there (and here with a TokenizerLoadError naming it),
# not as a wrong id. pyproject caps tiktoken below the next minor for the same reason.

#: The private attributes of ``tiktoken.Encoding`` this package reads.
TIKTOKEN_INTERNALS = ("_mergeable_ranks", "_special_tokens", "_pat_str", "_encode_bytes")


def _tiktoken_internal(encoding: tiktoken.Encoding, name: str) -> Any:
    try:
        return getattr(encoding, name)
    except AttributeError:
        raise TokenizerLoadError(
            f"tiktoken {getattr(tiktoken, '__version__', '?')} has no Encoding.{name}: kimi-recon reads it to "
            "rebuild the Kimi vocab; install a tiktoken this release supports (see pyproject.toml)"
        ) from None


def encoding_ranks(encoding: tiktoken.Encoding) -> Mapping[bytes, int]:
    """Token bytes -> rank of ``encoding``'s BPE vocabulary (special tokens excluded)."""
    ranks: Mapping[bytes, int] = _tiktoken_internal(encoding, "_mergeable_ranks")
    return ranks


def encoding_special_tokens(encoding: tiktoken.Encoding) -> dict[str, int]:
    """Special-token text -> id of ``encoding`` (a copy)."""
    return dict(_tiktoken_internal(encoding, "_special_tokens"))


def encoding_pat_str(encoding: tiktoken.Encoding) -> str:
    """The split regex ``encoding`` was built with."""
    pat_str: str = _tiktoken_internal(encoding, "_pat_str")
    return pat_str


def encoding_encode_bytes(encoding: tiktoken.Encoding, data: bytes) -> list[int]:
    """Ids of raw bytes that need not be valid UTF-8 (special-token text is ordinary text here)."""
    ids: list[int] = _tiktoken_internal(encoding, "_encode_bytes")(data)
    return ids


@functools.lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> character map, which byte-level BPE vocabularies and the ByteLevel steps use."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return dict(sorted(chars.items()))


#: The most ids one decode takes: far past any real turn or document, well short of what exhausts memory.
_MAX_IDS = 1 << 28


class KimiTokenizer:
    """Encode and decode exactly as Moonshot's official Kimi tokenizer does."""

    def __init__(
        self,
        encoding: tiktoken.Encoding,
        *,
        added_tokens: Mapping[int, AddedToken] | None = None,
        chat_template: str | None = None,
        model_config: Mapping[str, Any] | None = None,
        source: str = "",
        vocab_sha256: str | None = None,
    ) -> None:
        instance_argument(encoding, "encoding", tiktoken.Encoding, "a tiktoken.Encoding (load a tokenizer with load_tokenizer)")
        instance_argument(added_tokens, "added_tokens", Mapping, "a mapping of id to AddedToken", none=True)
        instance_argument(chat_template, "chat_template", str, "a string", none=True)
        instance_argument(model_config, "model_config", Mapping, "a mapping", none=True)
        instance_argument(source, "source", str, "a string")
        instance_argument(vocab_sha256, "vocab_sha256", str, "a string", none=True)
        self._encoding = encoding
        self.added_tokens: Mapping[int, AddedToken] = dict(added_tokens or {})
        self.chat_template = chat_template
        self.model_config: Mapping[str, Any] = dict(model_config or {})
        self.source = source
        self.vocab_sha256 = vocab_sha256
        self._special = encoding_special_tokens(encoding)
        self._special_by_id = {v: k for k, v in self._special.items()}
        # encode_with_specials may trust a scan for special texts only if every one has a scannable shape.
        self._specials_scannable = all(SPECIAL_TEXT_SHAPE.fullmatch(t) for t in self._special)
        self._template_ids: dict[str, list[int]] = {}

    def __repr__(self) -> str:
        return f"KimiTokenizer(source={self.source!r}, vocab_size={self.vocab_size})"

    def __reduce__(self) -> str | tuple[Any, ...]:
        # Workers of a process pool re-load from the source instead of unpickling a 160k-entry table;
        # a tokenizer that cannot be re-loaded the same way (a wrapped object, an unchecked vocab) is copied.
        if self.source in (BUNDLED, BUNDLED_K3) or (Path(self.source).is_dir() and self.vocab_sha256 in KNOWN_VOCAB_SHA256):
            return (_reload, (self.source,))
        state = (self.added_tokens, self.chat_template, self.model_config, self.source, self.vocab_sha256)
        return (_rebuild, (self._encoding, *state))

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The underlying tiktoken encoding (Kimi ranks, split regex and special tokens)."""
        return self._encoding

    @property
    def mergeable_ranks(self) -> Mapping[bytes, int]:
        """Token bytes -> id of the BPE vocabulary (special tokens excluded)."""
        return encoding_ranks(self._encoding)

    @property
    def vocab_size(self) -> int:
        """Number of ids: 163,584 BPE ranks plus 256 special slots."""
        return int(self._encoding.n_vocab)

    @property
    def num_base_tokens(self) -> int:
        return self.vocab_size - len(self._special)

    @property
    def special_tokens(self) -> Mapping[str, int]:
        """Special-token text -> id, as this tokenizer's table has it."""
        return self._special

    @property
    def specials_scannable(self) -> bool:
        """Whether every special-token text of the table has a shape ``special_texts_in`` finds (so a scan
        of a text finds every special token one encode would make of it)."""
        return self._specials_scannable

    def special_token_text(self, token_id: int) -> str | None:
        """The text of special token ``token_id``; None for an ordinary id (or one beyond the vocabulary)."""
        if type(token_id) is not int:
            if isinstance(token_id, bool) or not isinstance(token_id, numbers.Integral):
                raise InvalidInputTypeError(f"must be a token id (an int), got {type(token_id).__name__}", field="token_id")
            token_id = int(token_id)  # a numpy id from a column
        return self._special_by_id.get(token_id)

    def encode(
        self,
        text: str,
        *,
        allowed_special: Literal["all"] | Set[str] | bool = "all",
        allow_special: bool | None = None,
        disallowed_special: Literal["all"] | Collection[str] = (),
        add_special_tokens: bool = False,
    ) -> list[int]:
        """Token ids of ``text``, as the official ``TikTokenTokenizer.encode(text)`` returns them.

        ``allowed_special`` is tiktoken's word: ``"all"`` (the default, as the official Kimi encode) reads every
        special-token text as its id; a set of texts only those; ``set()`` (or False) none. Unlike tiktoken,
        special-token text that is not allowed is encoded as ordinary text (what the official Kimi tokenizer
        does with ``allow_special_tokens=False``), never an error. ``allow_special`` is the old spelling
        (deprecated). ``disallowed_special`` is tiktoken's too, and means what it means there: a special-token
        text it names (``"all"``: every one not allowed) found in ``text`` raises :class:`InvalidInputError` (a
        ``ValueError``, as tiktoken's); the default ``()`` raises for none, so ``encode(text, disallowed_special=())``
        works as in tiktoken code. ``add_special_tokens`` is transformers' word and changes nothing: the Kimi
        tokenizer adds no token either way (a prompt opens with its chat template's own text).
        """
        if not (type(disallowed_special) is tuple and not disallowed_special) or add_special_tokens is not False:
            self._check_habit_options(text, allowed_special, disallowed_special, add_special_tokens)
        if allow_special is not None:
            warnings.warn(
                "KimiTokenizer.encode(allow_special=...) is deprecated; use allowed_special= (tiktoken's name): "
                '"all" or set()',
                DeprecationWarning,
                stacklevel=2,
            )
            allowed_special = allow_special
        _check_text(text)
        enc = self._encoding
        if allowed_special is True or (isinstance(allowed_special, str) and allowed_special == "all"):
            return _encode_in_official_chunks(text, functools.partial(enc.encode, allowed_special="all"))
        if allowed_special is False or allowed_special is None or _empty(allowed_special):
            return _encode_in_official_chunks(text, enc.encode_ordinary)
        if isinstance(allowed_special, str) or not isinstance(allowed_special, Set):
            raise InvalidInputError(f'must be "all", a set of special-token texts or a bool, got {preview(allowed_special)}', field="allowed_special")
        allowed = frozenset(t for t in allowed_special if isinstance(t, str) and t in self._special)
        return _encode_in_official_chunks(text, functools.partial(enc.encode, allowed_special=allowed, disallowed_special=()))

    def encode_ordinary_piece(self, text: str) -> list[int]:
        """``encode(text, allowed_special=set())`` with its type checked only when tiktoken refuses it: the hot
        path of the segment encoders."""
        try:
            return _encode_in_official_chunks(text, self._encoding.encode_ordinary)
        except TypeError:
            _check_text(text)  # names the field (a str always got through above)
            raise

    def encode_many(self, texts: Sequence[str], *, allowed_special: Literal["all"] | Set[str] = "all") -> list[list[int]]:
        """``[encode(t, allowed_special=allowed_special) for t in texts]``, every text the official chunking leaves
        whole in one call into tiktoken, which releases the GIL once for all of them instead of once per text.

        Why it pays: on threads, every release and re-take of the GIL is a hand-off between threads (a wake-up of
        the other core), and a record's few short encodes made those hand-offs cost more than the overlap won
        (docs/benchmarks.md, "Many turns"). The texts are joined with a special token none of them holds, which
        is allowed: tiktoken encodes the text between two allowed special tokens on its own (the split regex sees
        that slice and nothing past it), so each part is that text's encode. A special text that is not allowed
        is ordinary text there, and tiktoken goes on looking from the next character after one, so it hides no
        separator it overlaps; one that starts where a separator does could (none of Kimi's tables has one): the
        ids must hold exactly one separator id per separator, else every text is encoded on its own. The
        returned lists are the caller's (fresh).

        >>> tok = load_tokenizer()
        >>> tok.encode_many(["a b", "x<|im_end|>"]) == [tok.encode("a b"), tok.encode("x<|im_end|>")]
        True
        """
        if isinstance(texts, (str, bytes, Mapping)) or not isinstance(texts, Sequence):
            raise InvalidInputTypeError(f"must be a list of str, got {type(texts).__name__}", field="texts")
        for text in texts:
            _check_text(text)
        separator = self._separator
        cut = [may_be_cut(t) for t in texts]
        whole = [i for i, c in enumerate(cut) if not c]
        if separator is None or len(whole) < 2:
            return [self.encode(t, allowed_special=allowed_special) for t in texts]
        sep_text, sep_id = separator
        if allowed_special == "all":
            allowed = self._all_specials
        else:
            allowed = frozenset({sep_text, *(t for t in allowed_special if t in self._special)})
        joined = sep_text.join([texts[i] for i in whole])
        parts = None
        if joined.count(sep_text) == len(whole) - 1:
            parts = _split_at(self._encoding.encode(joined, allowed_special=allowed, disallowed_special=()), sep_id, len(whole))
        if parts is None:  # a text holds the separator's text: one call each
            return [self.encode(t, allowed_special=allowed_special) for t in texts]
        if len(whole) == len(texts):
            return parts
        out = [self.encode(t, allowed_special=allowed_special) if c else [] for t, c in zip(texts, cut, strict=True)]
        for i, ids in zip(whole, parts, strict=True):
            out[i] = ids
        return out

    @functools.cached_property
    def _all_specials(self) -> frozenset[str]:
        return frozenset(self._special)

    @functools.cached_property
    def _separator(self) -> tuple[str, int] | None:
        """(text, id) of the special token :meth:`encode_many` joins texts with: the reserved slot with the highest
        id (no renderer writes one) whose id is no BPE rank; None when there is none (each text is then encoded on
        its own)."""
        ranks = frozenset(encoding_ranks(self._encoding).values())
        reserved = [(tid, text) for text, tid in self._special.items() if text.startswith("<|reserved_token_") and tid not in ranks]
        if not reserved:
            return None
        tid, text = max(reserved)
        return text, tid

    def encode_template_text(self, text: str) -> list[int]:
        """``encode_ordinary_piece`` of a renderer's own text (tag names, attribute keys), cached: a K3 turn
        holds dozens of these tiny pieces, and a call into tiktoken costs more than their BPE. Do not
        mutate the returned list."""
        if type(text) is not str:
            _check_text(text)  # (a set or list would be an unhashable key below)
        ids = self._template_ids.get(text)
        if ids is None:
            ids = self.encode_ordinary_piece(text)
            if len(self._template_ids) < _TEMPLATE_CACHE_SIZE and len(text) <= 64:
                self._template_ids[text] = ids
        return ids

    @property
    def template_text_ids(self) -> Mapping[str, list[int]]:
        """The cache of :meth:`encode_template_text` (the segment encoders read it directly; do not mutate)."""
        return self._template_ids

    def encode_with_specials(self, text: str, special_texts: Set[str]) -> list[int]:
        """``encode(text)``, given every special-token-shaped text that occurs in ``text``.

        The same ids as :meth:`encode`, faster: tiktoken converts the allowed set on every call, and a
        handful of texts costs far less than all 256 (the renderer knows which ones a turn holds).
        """
        if type(special_texts) not in (set, frozenset) and (isinstance(special_texts, str) or not isinstance(special_texts, Collection)):
            raise InvalidInputTypeError(f"must be a set of special-token texts, got {type(special_texts).__name__}", field="special_texts")
        if not self._specials_scannable:
            return self.encode(text)
        _check_text(text)
        allowed = {t for t in special_texts if isinstance(t, str) and t in self._special}
        return _encode_in_official_chunks(text, functools.partial(self._encoding.encode, allowed_special=allowed, disallowed_special=()))

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False, errors: str = "replace") -> str:
        """The text of ``ids`` (invalid UTF-8 becomes U+FFFD, as in the official decode).

        ``skip_special_tokens=True`` drops the ids the tokenizer config marks ``special`` (Hugging Face's
        meaning): ``<|im_end|>`` goes, ``</think>`` and the tool-call markers stay (they are ``special: false``).
        ``errors`` is tiktoken's (and ``bytes.decode``'s): ``"strict"`` raises ``UnicodeDecodeError`` on ids that
        end inside a character instead of writing U+FFFD."""
        if type(errors) is not str or errors != "replace":  # (type first: an array's != answers item by item)
            _check_errors(errors)
        if skip_special_tokens is not False:
            bool_argument(skip_special_tokens, "skip_special_tokens")
        checked = self._checked(ids)
        if skip_special_tokens:
            skipped = self._skipped_ids
            checked = [i for i in checked if i not in skipped]
        return self._encoding.decode(checked, errors=errors)

    @functools.cached_property
    def _skipped_ids(self) -> frozenset[int]:
        if self.added_tokens:
            return frozenset(tid for tid, token in self.added_tokens.items() if token.special)
        return frozenset(self._special_by_id)  # no config flags known: every special slot

    @property
    def eos_token_id(self) -> int | None:
        """The id of ``[EOS]``, the tokenizer's ``eos_token`` (what Hugging Face's ``tokenizer.eos_token_id`` gives
        for the official Kimi tokenizer: 163585). The model stops on another token, ``<|im_end|>`` (163586;
        K3 ``<|end_of_msg|>``): config.json's ``eos_token_id``, :attr:`ChatProfile.stop_token_id`."""
        return self._special.get("[EOS]")

    def __len__(self) -> int:
        """Every id, special slots included (Hugging Face's ``len(tokenizer)``): :attr:`vocab_size`."""
        return self.vocab_size

    def decode_bytes(self, ids: Sequence[int]) -> bytes:
        """The raw bytes of ``ids``; special ids give their text's UTF-8."""
        return self._encoding.decode_bytes(self._checked(ids))

    def encode_bytes(self, data: bytes) -> list[int]:
        """Ids of raw bytes that need not be valid UTF-8, special-token text encoded as ordinary text (a
        ``bytearray`` or ``memoryview`` too)."""
        if not isinstance(data, bytes):
            if not isinstance(data, (bytearray, memoryview)):
                raise InvalidInputTypeError(f"must be bytes, got {type(data).__name__}", field="data")
            data = bytes(data)
        return encoding_encode_bytes(self._encoding, data)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of one id."""
        return self._encoding.decode_single_token_bytes(self._checked([token_id])[0])

    @functools.cached_property
    def _id_by_bytes(self) -> dict[bytes, int]:
        table = dict(self.mergeable_ranks)
        table.update((text.encode("utf-8"), tid) for text, tid in self._special.items())
        return table

    def id_of_bytes(self, data: bytes) -> int | None:
        """The id of the one token whose bytes are ``data`` (special tokens by their text), or None."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise InvalidInputTypeError(f"must be bytes, got {type(data).__name__}", field="data")
        return self._id_by_bytes.get(bytes(data))

    def is_special(self, token_id: int) -> bool:
        """True for the id of a special token (a numpy integer too)."""
        if isinstance(token_id, bool) or not isinstance(token_id, numbers.Integral):
            raise InvalidInputTypeError(f"must be a token id (an int), got {type(token_id).__name__}", field="token_id")
        return token_id in self._special_by_id

    # -- the names tiktoken and transformers users look for, where they mean the same thing ---------------------

    def _check_habit_options(self, text: object, allowed: object, disallowed: object, add_special_tokens: object) -> None:
        """``encode``'s ``disallowed_special`` (tiktoken's meaning) and ``add_special_tokens`` (a bool, nothing added)."""
        if not isinstance(add_special_tokens, bool):
            raise InvalidInputTypeError(f"must be True or False, got {preview(add_special_tokens)}", field="add_special_tokens")
        if disallowed is None or _empty(disallowed):  # (no truth test: an array has none)
            return
        _check_text(text)
        assert isinstance(text, str)
        if isinstance(disallowed, str) and disallowed == "all":
            named: frozenset[str] = frozenset(self._special)
        elif isinstance(disallowed, str) or not isinstance(disallowed, Collection):
            raise InvalidInputError(f'must be "all" or a collection of special-token texts, got {preview(disallowed)}', field="disallowed_special")
        else:
            named = frozenset(t for t in disallowed if isinstance(t, str))
        if allowed is True or (isinstance(allowed, str) and allowed == "all"):
            named = frozenset()
        elif isinstance(allowed, Set):
            named -= frozenset(t for t in allowed if isinstance(t, str))
        found = sorted(t for t in named if t in text)
        if found:
            raise InvalidInputError(
                f"holds the special-token text {found[0]!r}, which disallowed_special refuses: pass allowed_special={{{found[0]!r}}} "
                "to read it as its id, or disallowed_special=() to encode it as ordinary text",
                field="text",
            )

    def encode_ordinary_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """tiktoken's name: :meth:`encode_ordinary` of each text."""
        return self.encode_many(texts, allowed_special=set())

    def decode_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        """tiktoken's name: :meth:`decode` of each id list."""
        return self.batch_decode(batch)

    def decode_tokens_bytes(self, tokens: Sequence[int]) -> list[bytes]:
        """tiktoken's name: the bytes of each id (:meth:`token_bytes`)."""
        return [self._encoding.decode_single_token_bytes(i) for i in self._checked(tokens)]

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        """tiktoken's name: the one id of a text or bytes that is exactly one token (a special-token text is its
        id); raises :class:`InvalidInputError` (a ``ValueError``; tiktoken raises ``KeyError``) otherwise."""
        if isinstance(text_or_bytes, str):
            special = self._special.get(text_or_bytes)
            if special is not None:
                return special
            data = text_or_bytes.encode("utf-8", errors="surrogatepass")
        elif isinstance(text_or_bytes, (bytes, bytearray)):
            data = bytes(text_or_bytes)
        else:
            raise InvalidInputTypeError(f"must be a str or bytes, got {type(text_or_bytes).__name__}", field="text_or_bytes")
        found = self.id_of_bytes(data)
        if found is None:
            raise InvalidInputError(f"{preview(text_or_bytes)} is not one token of this vocabulary", field="text_or_bytes")
        return found

    @property
    def special_tokens_set(self) -> set[str]:
        """tiktoken's name: every special-token text (reserved slots included)."""
        return set(self._special)

    @property
    def max_token_value(self) -> int:
        """tiktoken's name: the highest id (special slots included)."""
        return max(self._encoding.max_token_value, max(self._special.values(), default=0))

    def encode_ordinary(self, text: str) -> list[int]:
        """tiktoken's name: the ids of ``text`` with every special-token text read as ordinary text
        (``encode(text, allowed_special=set())``).

        >>> tok = load_tokenizer()
        >>> tok.encode_ordinary("<|im_end|>") == tok.encoding.encode_ordinary("<|im_end|>")
        True
        """
        return self.encode(text, allowed_special=set())

    def encode_batch(self, texts: Sequence[str], *, allowed_special: Literal["all"] | Set[str] = "all") -> list[list[int]]:
        """tiktoken's name: :meth:`encode` of each text (Kimi's default, as for :meth:`encode`: special-token text
        is read as its id; tiktoken's own default refuses it)."""
        return self.encode_many(texts, allowed_special=allowed_special)

    @property
    def n_vocab(self) -> int:
        """tiktoken's name for :attr:`vocab_size` (every id, special slots included)."""
        return self.vocab_size

    def decode_single_token_bytes(self, token: int) -> bytes:
        """tiktoken's name for :meth:`token_bytes`."""
        return self.token_bytes(token)

    @property
    def eot_token(self) -> int | None:
        """tiktoken's name for the end-of-text id: ``[EOS]`` (163585), :attr:`eos_token_id`. A Kimi turn ends on
        ``<|im_end|>`` (163586) instead: :attr:`~kimi_recon.profiles.ChatProfile.stop_token_id`."""
        return self.eos_token_id

    @property
    def eos_token(self) -> str | None:
        """transformers' name: the text of :attr:`eos_token_id` (``[EOS]``)."""
        return None if self.eos_token_id is None else self._special_by_id.get(self.eos_token_id)

    @property
    def pad_token(self) -> str | None:
        """transformers' name: ``[PAD]``, as the official tokenizer config sets it."""
        return "[PAD]" if "[PAD]" in self._special else None

    @property
    def pad_token_id(self) -> int | None:
        """transformers' name: the id of ``[PAD]`` (163839)."""
        return self._special.get("[PAD]")

    @property
    def bos_token(self) -> str | None:
        """transformers' name: ``[BOS]``, as the official tokenizer config sets it (no Kimi prompt starts with it)."""
        return "[BOS]" if "[BOS]" in self._special else None

    @property
    def bos_token_id(self) -> int | None:
        """transformers' name: the id of ``[BOS]`` (163584)."""
        return self._special.get("[BOS]")

    @property
    def unk_token(self) -> str | None:
        """transformers' name: ``[UNK]``, as the official tokenizer config sets it (byte-level BPE has no unknown text)."""
        return "[UNK]" if "[UNK]" in self._special else None

    @property
    def unk_token_id(self) -> int | None:
        """transformers' name: the id of ``[UNK]`` (163838)."""
        return self._special.get("[UNK]")

    @property
    def all_special_tokens(self) -> list[str]:
        """transformers' name: the tokens the config marks special, as transformers lists them: ``[BOS]``, ``[EOS]``,
        ``[UNK]``, ``[PAD]``, then the others by id (``<|im_end|>``, ...; not ``</think>`` or the tool-call markers,
        which the config does not mark special)."""
        roles = [t for t in ("[BOS]", "[EOS]", "[UNK]", "[PAD]") if t in self._special]
        if self.added_tokens:
            marked = [a.text for _, a in sorted(self.added_tokens.items()) if a.special]
        else:
            marked = [t.text for t in registry_matching(self._special_by_id).named() if t.special]
        return roles + [t for t in marked if t not in roles]

    @property
    def all_special_ids(self) -> list[int]:
        """transformers' name: the ids of :attr:`all_special_tokens`, in that order."""
        return [self._special[t] for t in self.all_special_tokens]

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """transformers' name: the inverse of :meth:`convert_ids_to_tokens` (a special token's text, or a token's
        bytes in GPT-2's byte-level alphabet, ``"Ġhello"``). A string that is no token raises
        :class:`InvalidInputError` naming it, where transformers would give ``[UNK]``'s id without a word."""
        if isinstance(tokens, str):
            return self._token_id(tokens)
        if not isinstance(tokens, Sequence):
            raise InvalidInputTypeError(f"must be a token string or a list of them, got {type(tokens).__name__}", field="tokens")
        return [self._token_id(t) for t in tokens]

    def _token_id(self, token: object) -> int:
        if not isinstance(token, str):
            raise InvalidInputTypeError(f"must be a token string, got {type(token).__name__}", field="tokens")
        special = self._special.get(token)
        if special is not None:
            return special
        inverse = _unicode_to_byte()
        if all(c in inverse for c in token):
            found = self.id_of_bytes(bytes(inverse[c] for c in token))
            if found is not None:
                return found
        raise InvalidInputError(f"{token!r} is no token of this vocabulary (tokens are spelled as convert_ids_to_tokens gives them)", field="tokens")

    def tokenize(self, text: str) -> list[str]:
        """transformers' name: the tokens of ``text`` (:meth:`encode`, then :meth:`convert_ids_to_tokens`)."""
        tokens = self.convert_ids_to_tokens(self.encode(text))
        assert isinstance(tokens, list)
        return tokens

    def get_vocab(self) -> dict[str, int]:
        """transformers' name: every token as :meth:`convert_ids_to_tokens` spells it -> its id."""
        chars = byte_to_unicode()
        vocab = {"".join(chars[b] for b in piece): i for piece, i in self.mergeable_ranks.items()}
        vocab.update(self._special)
        return vocab

    def __getattr__(self, name: str) -> Any:
        # Names other tokenizers have and this one does not, because here they would mean something else: say
        # what to use instead of a bare AttributeError.
        hint = _NOT_HERE.get(name)
        if hint is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise AttributeError(f"KimiTokenizer has no {name}: {hint}")

    def __call__(self, text: str | Sequence[str], *, add_special_tokens: bool = False) -> dict[str, Any]:
        """transformers' habit ``tokenizer(text)``: ``{"input_ids": ids, "attention_mask": [1, ...]}`` (a list of
        each for a list of texts). No token is added, whatever ``add_special_tokens`` says (as the Kimi tokenizer in
        transformers): a Kimi prompt opens with its chat template's own text."""
        if not isinstance(add_special_tokens, bool):
            raise InvalidInputTypeError(f"must be True or False, got {preview(add_special_tokens)}", field="add_special_tokens")
        if isinstance(text, str):
            ids = self.encode(text)
            return {"input_ids": ids, "attention_mask": [1] * len(ids)}
        if not isinstance(text, Sequence):
            raise InvalidInputTypeError(f"must be a str or a list of str, got {type(text).__name__}", field="text")
        batch = self.encode_batch(text)
        return {"input_ids": batch, "attention_mask": [[1] * len(ids) for ids in batch]}

    def batch_decode(self, sequences: Sequence[Sequence[int]], *, skip_special_tokens: bool = False) -> list[str]:
        """transformers' name: :meth:`decode` of each id list."""
        if isinstance(sequences, (str, bytes)) or not isinstance(sequences, Sequence):
            raise InvalidInputTypeError(f"must be a list of id lists, got {type(sequences).__name__}", field="sequences")
        return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in sequences]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """transformers' name: each id's token as the Hugging Face Kimi tokenizer spells it: a special token's text,
        else its bytes in GPT-2's byte-level alphabet (``" hello"`` -> ``"Ġhello"``), as ``tokenizer.json`` holds it."""
        if isinstance(ids, int) and not isinstance(ids, bool):
            return self._token_string(self._checked([ids])[0])
        if isinstance(ids, bool):
            raise InvalidInputError(f"must be a token id or a list of them, got {preview(ids)}", field="ids")
        return [self._token_string(i) for i in self._checked(ids)]

    def _token_string(self, token_id: int) -> str:
        chars = byte_to_unicode()
        return self._special_by_id.get(token_id) or "".join(chars[b] for b in self._encoding.decode_single_token_bytes(token_id))

    def _checked(self, ids: Sequence[int]) -> list[int]:
        if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
            raise InvalidInputError(f"ids must be a sequence of int, got {type(ids).__name__}", field="ids")
        if len(ids) > _MAX_IDS:  # (before list(): a range of 10**12 ids is no token list, and no memory holds it)
            raise InvalidInputError(f"holds {len(ids)} ids, more than the {_MAX_IDS} one call takes", field="ids")
        ids = list(ids)
        if not set(map(type, ids)) <= {int}:  # bool is its own type, so True/False take the slow path
            for i, v in enumerate(ids):
                if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                    raise InvalidInputError(f"item {i} is {preview(v)}, not an integer token id", field="ids")
            ids = [int(v) for v in ids]
        n = self.vocab_size
        if ids and (min(ids) < 0 or max(ids) >= n):
            bad = next(i for i in ids if not 0 <= i < n)
            raise InvalidInputError(f"id {bad} is outside the vocabulary (0..{n - 1})", field="ids")
        return ids


#: What to use instead of a name other tokenizers have (see ``KimiTokenizer.__getattr__``).
_NOT_HERE: Mapping[str, str] = {
    "apply_chat_template": "render the prompt with kimi_recon.render_prompt(messages, tools, profile=...) and encode it "
    "(or build_training_sample for prompt + output ids); or `kimi-recon export-tokenizer DIR` and transformers' "
    "AutoTokenizer.from_pretrained(DIR).apply_chat_template (K2.x)",
    "save_pretrained": "`kimi-recon export-tokenizer DIR` (kimi_recon.fast_tokenizer.export_tokenizer) writes tokenizer.json and its config",
    "from_pretrained": "kimi_recon.load_tokenizer() (bundled K2.5), load_tokenizer(profile='kimi-k3'), or load_tokenizer(path or Hub id)",
    "eos_token_ids": "eos_token_id ([EOS] 163585); a Kimi turn ends on <|im_end|> 163586 (ChatProfile.stop_token_id)",
}


@functools.lru_cache(maxsize=1)
def _unicode_to_byte() -> dict[str, int]:
    return {c: b for b, c in byte_to_unicode().items()}


def load_tokenizer(source: object = None, *, verify_hash: bool = True, profile: str | ChatProfile | None = None) -> KimiTokenizer:
    """Load a Kimi tokenizer.

    ``source`` may be None (the bundled tokenizer: K2.5's, or with ``profile="kimi-k3"`` the same vocab
    with K3's special-token names), a path to a Kimi tokenizer directory as
    Moonshot ships it, a Hugging Face tokenizer object (``AutoTokenizer.from_pretrained(...,
    trust_remote_code=True)``), or a Hub repo id such as ``"moonshotai/Kimi-K2.5"`` (downloads only the
    tokenizer files; needs the ``hf`` extra and a network).
    """
    if source is None:
        return _bundled(get_profile(profile).special_tokens if profile is not None else _BUNDLED_TABLES[BUNDLED])
    if isinstance(source, KimiTokenizer):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = Path(source).expanduser()
        if path.is_dir():
            return load_tokenizer_dir(path, verify_hash=verify_hash)
        if path.exists():
            raise TokenizerLoadError(f"{path} is a file; pass the tokenizer directory that holds {VOCAB_FILE}")
        text = os.fspath(source)
        if _looks_like_repo_id(text):
            return load_tokenizer_dir(_download_from_hub(text), verify_hash=verify_hash)
        raise TokenizerLoadError(f"no tokenizer directory at {path}")
    return _load_hf_object(source, verify_hash=verify_hash)


def tokenizer_files(source: object) -> list[Path]:
    """The files :func:`load_tokenizer` reads from a local tokenizer directory ``source`` (those that exist): inputs
    a command must refuse to write over (``-o DIR/tokenizer_config.json`` would destroy the tokenizer it runs
    with). Empty for the bundled tokenizer, a Hub repo id or anything that is not a directory."""
    if not isinstance(source, (str, os.PathLike)):
        return []
    try:
        path = Path(source).expanduser()
        if not path.is_dir():
            return []
        return [path / name for name in (VOCAB_FILE, CONFIG_FILE, TEMPLATE_FILE, MODEL_CONFIG_FILE) if (path / name).exists()]
    except (OSError, ValueError):  # a name no system takes: the load reports it
        return []


def checked_tokenizer(tokenizer: object, field: str = "tokenizer") -> KimiTokenizer | None:
    """``tokenizer`` when it is a :class:`KimiTokenizer` or None; any other object is an
    :class:`~kimi_recon.errors.InvalidInputTypeError` naming ``field`` (load one with :func:`load_tokenizer`)."""
    if tokenizer is None or isinstance(tokenizer, KimiTokenizer):
        return tokenizer
    raise InvalidInputTypeError(
        f"must be a KimiTokenizer (see load_tokenizer) or None, got {type(tokenizer).__name__}", field=field
    )


def tokenizer_for_profile(tokenizer: KimiTokenizer | None, profile: str | ChatProfile) -> KimiTokenizer:
    """``tokenizer``, or the bundled one of ``profile`` when it is None or the bundled tokenizer of
    another table (so a default K2.5 tokenizer passed along a K3 pipeline decodes K3's names)."""
    if type(tokenizer) is KimiTokenizer and type(profile) is ChatProfile:  # the rebuild's call, on every turn
        table = profile.special_tokens
        return tokenizer if _BUNDLED_TABLES.get(tokenizer.source, table) == table else _bundled(table)
    checked_tokenizer(tokenizer)
    if tokenizer is not None and tokenizer.source not in _BUNDLED_TABLES:
        return tokenizer
    table = get_profile(profile).special_tokens
    if tokenizer is not None and _BUNDLED_TABLES[tokenizer.source] == table:
        return tokenizer
    return _bundled(table)


def _bundled(table: str) -> KimiTokenizer:
    """The bundled vocab with the special-token names of ``table`` (a ``ChatProfile.special_tokens``)."""
    return _BUNDLED_LOADERS[table]()


@functools.lru_cache(maxsize=1)
def _load_bundled() -> KimiTokenizer:
    root = resources.files("kimi_recon") / "data" / "k2.5"
    with resources.as_file(root) as path:
        tok = load_tokenizer_dir(Path(path))
    tok.source = BUNDLED
    return tok


@functools.lru_cache(maxsize=1)
def _load_bundled_k3() -> KimiTokenizer:
    """The bundled vocab with Kimi-K3's special-token names (K3 ships the same tiktoken.model)."""
    k25 = _load_bundled()
    registry = registry_named("kimi-k3")
    added = {t.id: AddedToken(t.id, t.text, t.special) for t in registry.named()}
    encoding = build_encoding(dict(k25.mergeable_ranks), added, name="kimi:k3")
    return KimiTokenizer(encoding, added_tokens=added, source=BUNDLED_K3, vocab_sha256=k25.vocab_sha256)


#: The loader of the bundled tokenizer of each special-token table, by the table's name.
_BUNDLED_LOADERS: Mapping[str, Callable[[], KimiTokenizer]] = {"kimi-k2.5": _load_bundled, "kimi-k3": _load_bundled_k3}


def _reload(source: str) -> KimiTokenizer:
    if source in _BUNDLED_TABLES:
        return _bundled(_BUNDLED_TABLES[source])
    return load_tokenizer(source)


def _rebuild(
    encoding: tiktoken.Encoding,
    added_tokens: Mapping[int, AddedToken],
    chat_template: str | None,
    model_config: Mapping[str, Any],
    source: str,
    vocab_sha256: str | None,
) -> KimiTokenizer:
    return KimiTokenizer(
        encoding, added_tokens=added_tokens, chat_template=chat_template, model_config=model_config, source=source, vocab_sha256=vocab_sha256
    )


def load_tokenizer_dir(path: Path, *, verify_hash: bool = True) -> KimiTokenizer:
    """Load a Kimi tokenizer directory (tiktoken.model, tokenizer_config.json, optional template and config)."""
    instance_argument(path, "path", (str, os.PathLike), "a tokenizer directory path")
    path = Path(path)
    vocab_path = path / VOCAB_FILE
    config_path = path / CONFIG_FILE
    for required in (vocab_path, config_path):
        if not required.is_file():
            raise TokenizerLoadError(f"{required} is missing (a Kimi tokenizer directory needs {VOCAB_FILE} and {CONFIG_FILE})")
    data = vocab_path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if verify_hash and digest not in KNOWN_VOCAB_SHA256:
        raise TokenizerLoadError(
            f"{vocab_path} has sha256 {digest}, which is not a known Kimi vocab "
            f"(known: {', '.join(KNOWN_VOCAB_SHA256)}); pass verify_hash=False to load it anyway"
        )
    ranks = parse_tiktoken_ranks(data, vocab_path)
    config = _read_json(config_path)
    added = parse_added_tokens(config, config_path)
    check_added_tokens(added, len(ranks), config_path)
    template = _read_template(path, config)
    model_config = _read_json(path / MODEL_CONFIG_FILE) if (path / MODEL_CONFIG_FILE).is_file() else {}
    encoding = build_encoding(ranks, added, name=f"kimi:{path.name}")
    return KimiTokenizer(
        encoding,
        added_tokens=added,
        chat_template=template,
        model_config=model_config,
        source=str(path),
        vocab_sha256=digest,
    )


def parse_tiktoken_ranks(data: bytes, path: Path) -> dict[bytes, int]:
    """``base64-token rank`` lines, as tiktoken writes them."""
    ranks: dict[bytes, int] = {}
    try:
        for line in data.splitlines():
            if line:
                token, rank = line.split()
                ranks[base64.b64decode(token, validate=True)] = int(rank)
    except (ValueError, binascii.Error) as err:
        raise TokenizerLoadError(f"{path} is not a tiktoken rank file: {err}") from None
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise TokenizerLoadError(f"{path}: ranks are not contiguous from 0")
    return ranks


def parse_added_tokens(config: Mapping[str, Any], path: Path) -> dict[int, AddedToken]:
    raw = config.get("added_tokens_decoder", {})
    if not isinstance(raw, Mapping):
        raise TokenizerLoadError(f"{path}: 'added_tokens_decoder' must be an object")
    added = {}
    for key, entry in raw.items():
        try:
            tid = int(key)
            content = entry["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
            added[tid] = AddedToken(tid, content, bool(entry.get("special", True)))
        except (ValueError, KeyError, TypeError) as err:
            raise TokenizerLoadError(f"{path}: bad added token {key!r}: {err}") from None
    return added


def check_added_tokens(added: Mapping[int, AddedToken], num_base: int, path: Path, registry: SpecialTokenRegistry | None = None) -> None:
    """Refuse a config whose added tokens contradict the canonical table (same text, other id, or vice versa).

    Without ``registry``, the table is the one the config's names agree with (K3 or K2.5)."""
    if registry is None:
        registry = registry_matching({tid: t.text for tid, t in added.items()})
    for tid, token in added.items():
        if not num_base <= tid < num_base + NUM_SPECIAL_SLOTS:
            raise TokenizerLoadError(f"{path}: added token {token.text!r} has id {tid}, outside the special slots")
        by_id, by_text = registry.get(tid), registry.get(token.text)
        if by_id is not None and by_id.role != "reserved" and by_id.text != token.text:
            raise TokenizerLoadError(f"{path}: id {tid} is {token.text!r} here but {by_id.text!r} in the Kimi registry")
        if by_text is not None and by_text.text == token.text and by_text.id != tid:
            raise TokenizerLoadError(f"{path}: {token.text!r} has id {tid} here but {by_text.id} in the Kimi registry")


def build_encoding(ranks: dict[bytes, int], added: Mapping[int, AddedToken], name: str) -> tiktoken.Encoding:
    num_base = len(ranks)
    specials = {}
    for tid in range(num_base, num_base + NUM_SPECIAL_SLOTS):
        token = added.get(tid)
        specials[token.text if token else reserved_token_text(tid)] = tid
    return tiktoken.Encoding(name=name, pat_str=KIMI_PAT_STR, mergeable_ranks=ranks, special_tokens=specials)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise TokenizerLoadError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(value, dict):
        raise TokenizerLoadError(f"{path} must hold a JSON object")
    return value


def _read_template(path: Path, config: Mapping[str, Any]) -> str | None:
    template_path = path / TEMPLATE_FILE
    if template_path.is_file():
        try:
            return template_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise TokenizerLoadError(f"{template_path} cannot be read: {err}") from None
    template = config.get("chat_template")
    return template if isinstance(template, str) else None


_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _looks_like_repo_id(text: str) -> bool:
    return bool(_REPO_ID.match(text)) and not text.startswith((".", "/", "~"))


def _download_from_hub(repo_id: str) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise TokenizerLoadError(
            f"loading {repo_id!r} from the Hugging Face Hub needs huggingface_hub: pip install 'kimi-recon[hf]' (in a clone: pip install -e '.[hf]')"
        ) from None
    patterns = [VOCAB_FILE, CONFIG_FILE, TEMPLATE_FILE, MODEL_CONFIG_FILE]
    try:
        return Path(snapshot_download(repo_id, allow_patterns=patterns))
    except Exception as err:  # noqa: BLE001 - the hub raises many types (offline, 404, auth); all mean "could not fetch"
        raise TokenizerLoadError(
            f"could not download the tokenizer files of {repo_id!r} from the Hugging Face Hub "
            f"({type(err).__name__}: {err}); when offline, pass a local tokenizer directory or use the bundled default"
        ) from None


def _load_hf_object(obj: object, *, verify_hash: bool) -> KimiTokenizer:
    """Wrap an official ``TikTokenTokenizer`` (HF remote code) by re-reading its own files."""
    vocab_file = getattr(obj, "vocab_file", None)
    if isinstance(vocab_file, (str, os.PathLike)) and Path(vocab_file).is_file():
        tok = load_tokenizer_dir(Path(vocab_file).parent, verify_hash=verify_hash)
        template = getattr(obj, "chat_template", None)
        if isinstance(template, str):
            tok.chat_template = template
        return tok
    model = getattr(obj, "model", None)
    if isinstance(model, tiktoken.Encoding):
        ranks = dict(encoding_ranks(model))
        digest = hashlib.sha256(b"".join(base64.b64encode(t) + b" " + str(r).encode() + b"\n" for t, r in sorted(ranks.items(), key=lambda kv: kv[1]))).hexdigest()
        if verify_hash and digest not in KNOWN_VOCAB_SHA256:
            raise TokenizerLoadError(f"the tokenizer object's vocab has sha256 {digest}, which is not a known Kimi vocab")
        encoding = tiktoken.Encoding(
            name=model.name, pat_str=encoding_pat_str(model), mergeable_ranks=ranks, special_tokens=encoding_special_tokens(model)
        )
        if encoding_pat_str(encoding) != KIMI_PAT_STR:
            raise TokenizerLoadError("the tokenizer object's split regex is not Kimi's")
        template = getattr(obj, "chat_template", None)
        return KimiTokenizer(
            encoding,
            chat_template=template if isinstance(template, str) else None,
            source=f"hf:{getattr(obj, 'name_or_path', type(obj).__name__)}",
            vocab_sha256=digest,
        )
    raise TokenizerLoadError(
        f"cannot use a {type(obj).__name__} as a Kimi tokenizer: expected None, a directory path, a Hub repo id, "
        "or a Kimi TikTokenTokenizer (with a 'vocab_file' or a tiktoken 'model')"
    )
