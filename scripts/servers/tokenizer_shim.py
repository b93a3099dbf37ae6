"""The tokenizer the servers' parsers are handed: the Hugging Face tokenizer surface they call, backed by
kimi-recon's bundled Kimi tokenizer (same vocab, ids and special-token flags as Moonshot's files).

The parsers only look special tokens up (``vocab.get("<|tool_calls_section_begin|>")``), encode/decode
text and convert tokens; the vocab given is the special-token table, the only part they read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kimi_recon.tokenizer import KimiTokenizer, load_tokenizer


class KimiHFTokenizerShim:
    """Just enough of ``PreTrainedTokenizerBase`` for vLLM's and SGLang's Kimi parsers."""

    is_fast = False

    def __init__(self, profile: str) -> None:
        self.kimi: KimiTokenizer = load_tokenizer(profile=profile)
        self._special = dict(self.kimi.special_tokens)
        self._by_id = {i: t for t, i in self._special.items()}
        self._flagged_special = {i for i, tok in self.kimi.added_tokens.items() if tok.special}
        self.eos_token_id = 163586
        self.eos_token = self._by_id[163586]
        self.all_special_ids = sorted(self._flagged_special)
        self.all_special_tokens = [self._by_id[i] for i in self.all_special_ids]
        self.name_or_path = f"kimi-recon-bundled/{profile}"

    # vocabulary -----------------------------------------------------------------------------------
    def get_vocab(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def vocab(self) -> dict[str, int]:
        return self.get_vocab()

    def get_added_vocab(self) -> dict[str, int]:
        return dict(self._special)

    @property
    def vocab_size(self) -> int:
        return self.kimi.vocab_size

    def __len__(self) -> int:
        return self.kimi.vocab_size

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> Any:
        if isinstance(tokens, str):
            return self._special.get(tokens)
        return [self._special.get(t) for t in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int], skip_special_tokens: bool = False) -> Any:
        """A special token's text, else the token's bytes as one character per byte (latin-1): a
        byte-level token string, as the slow Kimi tokenizer's are, for ``convert_tokens_to_string``."""
        if isinstance(ids, int):
            return self._by_id.get(ids) or self.kimi.token_bytes(ids).decode("latin-1")
        return [self.convert_ids_to_tokens(i) for i in ids if not (skip_special_tokens and i in self._flagged_special)]

    def convert_tokens_to_string(self, tokens: Sequence[str]) -> str:
        data = b"".join(t.encode("utf-8") if t in self._special else t.encode("latin-1") for t in tokens)
        return data.decode("utf-8", errors="replace")

    # text ------------------------------------------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = False, **_: Any) -> list[int]:
        return self.kimi.encode(text)

    def __call__(self, text: str, **_: Any) -> dict[str, list[int]]:
        return {"input_ids": self.encode(text)}

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False, **_: Any) -> str:
        return self.kimi.decode([i for i in ids if not (skip_special_tokens and i in self._flagged_special)])

    def batch_decode(self, batch: Sequence[Sequence[int]], skip_special_tokens: bool = False, **_: Any) -> list[str]:
        return [self.decode(ids, skip_special_tokens=skip_special_tokens) for ids in batch]

    def is_flagged_special(self, token_id: int) -> bool:
        """``special: true`` in the tokenizer config: what ``skip_special_tokens`` drops."""
        return token_id in self._flagged_special
