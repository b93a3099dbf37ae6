"""Kimi as a Hugging Face fast tokenizer: a ``tokenizer.json`` built from the tiktoken ranks.

The export is byte-level BPE (GPT-2's byte-to-character map) whose merges are derived from the ranks,
Kimi's split regex as a ``Split`` pre-tokenizer, and every one of the 256 special slots as an added
token with the profile's name and ``special`` flag. It gives the official ids on every text the
official encode does not cut (see :func:`official_encode_cuts`).

``tokenizers`` is an optional extra (``pip install 'kimi-recon[fast]'``); it is imported only when a
tokenizer is built, so :func:`official_encode_cuts` and :func:`bpe_merges` work without it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._base.arguments import instance_argument
from ._base.files import atomic_output
from .chat_template import bundled_k25_template
from .errors import FastTokenizerError as FastTokenizerError  # defined with the others; importable here as before
from .errors import InvalidInputError, InvalidInputTypeError, OutputFileError, preview
from .profiles import get_profile, special_tokens_for
from .special_tokens import NUM_SPECIAL_SLOTS, SpecialTokenRegistry
from .tokenizer import KIMI_PAT_STR, KNOWN_VOCAB_SHA256, VOCAB_FILE, KimiTokenizer, checked_tokenizer, load_tokenizer, official_chunks
from .tokenizer import byte_to_unicode as byte_to_unicode  # moved beside the tokenizer; importable here as before

if TYPE_CHECKING:
    import tokenizers

__all__ = [
    "EXPORT_FILES",
    "ExportedTokenizer",
    "FastTokenizerError",
    "bpe_merges",
    "build_fast_tokenizer",
    "byte_to_unicode",
    "encode_like_official",
    "export_tokenizer",
    "official_encode_cuts",
    "special_tokens_map",
    "tokenizer_config",
    "tokenizer_json",
]

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
SPECIAL_TOKENS_MAP = "special_tokens_map.json"
EXPORT_FILES = (TOKENIZER_JSON, TOKENIZER_CONFIG, SPECIAL_TOKENS_MAP)

#: The slots transformers knows by role; the official tokenizer_config.json names the same four.
_ROLE_IDS = {"bos_token": 163584, "eos_token": 163585, "unk_token": 163838, "pad_token": 163839}


def official_encode_cuts(text: str) -> bool:
    """True when the official encode cuts ``text`` into pieces it tokenizes separately.

    It does so for texts over 400,000 characters and for runs of over 25,000 whitespace or
    non-whitespace characters (``str.isspace``). A ``tokenizers`` pipeline never cuts, so only on
    such texts can the export's ids differ from the official ones; encoding each piece of
    :func:`kimi_recon.tokenizer.official_chunks` separately gives the official ids there too.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"must be a str, got {type(text).__name__}", field="text")
    return next(islice(official_chunks(text), 1, None), None) is not None


def _split_by_bpe(ranks: Mapping[bytes, int], token: bytes, rank: int) -> list[bytes]:
    """The parts BPE leaves of ``token`` using only the merges ranked below ``rank``."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best_rank, best_at = rank, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < best_rank:
                best_rank, best_at = r, i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return parts


def bpe_merges(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merge list equivalent to tiktoken's ranks, in rank order.

    tiktoken merges any adjacent pair whose concatenation has the lowest rank. Inside a token's span,
    the parts just before that token forms are what BPE makes of the token's bytes alone with the
    lower-ranked merges (a merge reaching across the span would have left no parts that tile it), so
    the token's merge is that split, and it must have exactly two parts. A token without such a split
    could only come out of tiktoken as a whole piece; the Kimi vocab has none, and one is refused.
    """
    instance_argument(ranks, "ranks", Mapping, "a mapping of token bytes to rank")
    for token, rank in ranks.items():  # once, before the sort compares them
        if not isinstance(token, bytes) or isinstance(rank, bool) or not isinstance(rank, int):
            raise InvalidInputTypeError(f"must map bytes to int ranks, got {preview(token)}: {preview(rank)}", field="ranks")
    merges: list[tuple[bytes, bytes]] = []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) < 2:
            continue
        parts = _split_by_bpe(ranks, token, rank)
        if len(parts) != 2:
            raise FastTokenizerError(f"token {token!r} (rank {rank}) is not the merge of two lower-ranked tokens: BPE leaves {parts!r}")
        merges.append((parts[0], parts[1]))
    return merges


def _chars(token: bytes) -> str:
    # latin-1 reads each byte as the character of the same number, which translate() then maps.
    return token.decode("latin-1").translate(byte_to_unicode())


_DERIVED: dict[str, tuple[dict[str, int], tuple[str, ...]]] = {}


def _vocab_and_merges(tokenizer: KimiTokenizer) -> tuple[dict[str, int], tuple[str, ...]]:
    # Seconds for the 163k ranks, so derived once per known vocab (its sha256 names the same ranks,
    # whichever profile's tokenizer object carries them).
    known = tokenizer.vocab_sha256 if tokenizer.vocab_sha256 in KNOWN_VOCAB_SHA256 else None
    if known is not None and known in _DERIVED:
        return _DERIVED[known]
    ranks = tokenizer.mergeable_ranks
    vocab = {_chars(token): rank for token, rank in sorted(ranks.items(), key=lambda kv: kv[1])}
    # Byte-level characters never include a space, so "left right" is unambiguous in every reader.
    merges = tuple(f"{_chars(a)} {_chars(b)}" for a, b in bpe_merges(ranks))
    if known is not None:
        _DERIVED[known] = (vocab, merges)
    return vocab, merges


def _added_tokens(registry: SpecialTokenRegistry, num_base: int) -> list[dict[str, Any]]:
    slots = range(num_base, num_base + NUM_SPECIAL_SLOTS)
    missing = [i for i in slots if registry.get(i) is None]
    if missing or len(registry) != NUM_SPECIAL_SLOTS:
        raise FastTokenizerError(f"the special-token table must name every slot {num_base}..{num_base + NUM_SPECIAL_SLOTS - 1} once; missing {missing[:5]}")
    return [
        {
            "id": t.id,
            "content": t.text,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            # Added tokens are matched in the raw text, as tiktoken matches special tokens.
            "normalized": False,
            "special": t.special,
        }
        for t in registry
    ]


def tokenizer_json(profile: str = "kimi-k2.5", tokenizer: KimiTokenizer | None = None, *, added_tokens: bool = True) -> dict[str, Any]:
    """The ``tokenizer.json`` document (a JSON-ready dict) for ``profile`` and ``tokenizer``'s ranks.

    With ``added_tokens=False`` the special slots are left out: that tokenizer encodes special-token
    text as ordinary text, like ``KimiTokenizer.encode(text, allowed_special=set())``.
    """
    checked_tokenizer(tokenizer)
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    vocab, merges = _vocab_and_merges(tok)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": _added_tokens(special_tokens_for(profile), len(vocab)) if added_tokens else [],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": KIMI_PAT_STR}, "behavior": "Isolated", "invert": False},
                # The split above is the whole pre-tokenization; this step only maps bytes to characters.
                {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
            ],
        },
        # No BOS/EOS: the official encode adds none.
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            # tiktoken emits a piece that is a whole token as that token without merging.
            "ignore_merges": True,
            "vocab": dict(vocab),
            "merges": list(merges),
        },
    }


def _tokenizers_module() -> Any:
    try:
        import tokenizers
    except ImportError:
        raise FastTokenizerError("the fast tokenizer needs the tokenizers package: pip install 'kimi-recon[fast]' (in a clone: pip install -e '.[fast]')") from None
    return tokenizers


def build_fast_tokenizer(profile: str = "kimi-k2.5", tokenizer: KimiTokenizer | None = None, *, added_tokens: bool = True) -> tokenizers.Tokenizer:
    """The Kimi tokenizer as a ``tokenizers.Tokenizer`` (see :func:`tokenizer_json`)."""
    checked_tokenizer(tokenizer)
    module = _tokenizers_module()
    fast: tokenizers.Tokenizer = module.Tokenizer.from_str(json.dumps(tokenizer_json(profile, tokenizer, added_tokens=added_tokens)))
    return fast


#: The official template declares tools in a TypeScript style Moonshot's tokenizer computes in Python
#: (``tools_ts_str``); a plain Jinja render cannot, and would write another prompt without a word. The exported
#: template refuses tools given without it (transformers raises the template's ``raise_exception``).
_TOOLS_GUARD = (
    "{%- if tools and tools_ts_str is not defined -%}"
    "{{ raise_exception('This exported Kimi template cannot declare tools as the official tokenizer does "
    "(tools_ts_str is computed in Python): render prompts with tools with kimi_recon.render_prompt') }}"
    "{%- endif -%}"
)


def tokenizer_config(profile: str = "kimi-k2.5") -> dict[str, Any]:
    """``tokenizer_config.json`` for ``transformers``: the generic fast class, no remote code, and the profile's
    chat template (K2.x: its bundled Jinja template, so ``apply_chat_template`` renders the official prompt; K3's
    official renderer is Python, not a template: none is written, and ``kimi_recon.render_prompt`` renders it)."""
    registry = special_tokens_for(profile)
    roles = {role: registry.text(tid) for role, tid in _ROLE_IDS.items()}
    prof = get_profile(profile)
    template = _TOOLS_GUARD + (prof.template_source() or bundled_k25_template()) if prof.format == "k2" else None
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        **({"chat_template": template} if template is not None else {}),
        **roles,
        "additional_special_tokens": [t.text for t in registry.named() if t.special and t.id not in _ROLE_IDS.values()],
        # transformers would otherwise "clean up" spaces before punctuation when decoding.
        "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {
            str(t.id): {"content": t.text, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": t.special}
            for t in registry
        },
    }


def special_tokens_map(profile: str = "kimi-k2.5") -> dict[str, Any]:
    config = tokenizer_config(profile)
    return {key: config[key] for key in (*_ROLE_IDS, "additional_special_tokens")}


@dataclass(frozen=True)
class ExportedTokenizer:
    """What :func:`export_tokenizer` wrote."""

    directory: Path
    files: tuple[Path, ...]
    profile: str


def export_tokenizer(
    directory: str | os.PathLike[str],
    profile: str = "kimi-k2.5",
    tokenizer: KimiTokenizer | None = None,
    *,
    overwrite: bool = False,
) -> ExportedTokenizer:
    """Write ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json`` to ``directory``.

    Refuses (``OutputFileError``) a folder that holds a ``tiktoken.model`` (a tokenizer source folder,
    whose own config it would replace) and, unless ``overwrite``, one that already holds any of the three
    files. Each file is written to a temporary file in the folder and renamed into place when complete.
    """
    instance_argument(directory, "directory", (str, os.PathLike), "a folder path")
    out = Path(directory).expanduser()
    name = get_profile(profile).name
    if out.exists() and not out.is_dir():
        raise OutputFileError(f"{out} exists and is not a directory", field="directory")
    if (out / VOCAB_FILE).exists():
        raise OutputFileError(f"{out} holds a {VOCAB_FILE}: it is a tokenizer source folder; export to another folder", field="directory")
    existing = [f for f in EXPORT_FILES if (out / f).exists()]
    if existing and not overwrite:
        raise OutputFileError(f"{out} already holds {', '.join(existing)}; pass overwrite=True (--overwrite) to replace them", field="directory")
    texts = {
        TOKENIZER_JSON: json.dumps(tokenizer_json(name, tokenizer), ensure_ascii=False),
        TOKENIZER_CONFIG: json.dumps(tokenizer_config(name), ensure_ascii=False, indent=2),
        SPECIAL_TOKENS_MAP: json.dumps(special_tokens_map(name), ensure_ascii=False, indent=2),
    }
    _tokenizers_module().Tokenizer.from_str(texts[TOKENIZER_JSON])  # a document tokenizers refuses is never written
    out.mkdir(parents=True, exist_ok=True)
    for filename, text in texts.items():
        with atomic_output(out / filename, field="directory") as f:
            f.write(text + "\n")
    return ExportedTokenizer(out, tuple(out / f for f in texts), name)


def encode_like_official(fast: tokenizers.Tokenizer, text: str) -> list[int]:
    """The official ids of ``text`` with a fast tokenizer: the pieces the official encode cuts, encoded one by one."""
    if not isinstance(text, str):
        raise InvalidInputError(f"must be a str, got {type(text).__name__}", field="text")
    if not callable(getattr(fast, "encode_batch", None)):
        raise InvalidInputTypeError(f"must be a tokenizers.Tokenizer, got {type(fast).__name__}", field="fast")
    ids: list[int] = []
    try:
        for encoding in fast.encode_batch(list(official_chunks(text)), add_special_tokens=False):  # [text] when uncut
            ids += encoding.ids
    except (TypeError, AttributeError):  # another object with an encode_batch (a KimiTokenizer, a tiktoken Encoding)
        raise InvalidInputTypeError(f"must be a tokenizers.Tokenizer, got {type(fast).__name__}", field="fast") from None
    return ids
