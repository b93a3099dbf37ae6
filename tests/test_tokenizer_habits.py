"""The names tiktoken and transformers users look for on a tokenizer (issue 33), each checked against what
tiktoken itself or the exported Hugging Face tokenizer gives for the same input, not against kimi-recon."""

from __future__ import annotations

from typing import TYPE_CHECKING

from extras import require
from hypothesis import given
from hypothesis import strategies as st

from kimi_recon import KimiTokenizer
from kimi_recon.fast_tokenizer import build_fast_tokenizer

if TYPE_CHECKING:
    import tokenizers
else:
    tokenizers = require("tokenizers")

TEXTS = st.text(st.characters(exclude_categories=["Cs"]), max_size=40) | st.sampled_from(["<|im_end|> hi", "[EOS]x", " hello world"])
_FAST: list[tokenizers.Tokenizer] = []


def _fast() -> tokenizers.Tokenizer:
    if not _FAST:
        _FAST.append(build_fast_tokenizer("kimi-k2.5"))
    return _FAST[0]


@given(TEXTS)
def test_the_tiktoken_names_mean_what_they_mean_in_tiktoken(tok: KimiTokenizer, text: str) -> None:
    enc = tok.encoding
    assert tok.encode_ordinary(text) == enc.encode_ordinary(text)
    assert tok.encode_batch([text, text]) == [enc.encode(text, allowed_special="all")] * 2
    assert tok.n_vocab == enc.n_vocab
    ids = enc.encode_ordinary(text)
    assert [tok.decode_single_token_bytes(i) for i in ids] == [enc.decode_single_token_bytes(i) for i in ids]


def test_the_end_and_pad_tokens_are_the_official_configs() -> None:
    from kimi_recon import load_tokenizer

    tok = load_tokenizer()
    assert tok.eot_token == tok.eos_token_id == 163585 and tok.eos_token == "[EOS]"  # tokenizer_config.json
    assert tok.pad_token == "[PAD]" and tok.pad_token_id == 163839


@given(TEXTS)
def test_the_transformers_names_match_the_exported_hugging_face_tokenizer(tok: KimiTokenizer, text: str) -> None:
    ids = tok.encode(text)
    assert tok.convert_ids_to_tokens(ids) == [_fast().id_to_token(i) for i in ids]
    if ids:
        assert tok.convert_ids_to_tokens(ids[0]) == _fast().id_to_token(ids[0])
    assert tok(text) == {"input_ids": ids, "attention_mask": [1] * len(ids)}
    assert tok([text, ""]) == {"input_ids": [ids, []], "attention_mask": [[1] * len(ids), []]}
    assert tok.batch_decode([ids, ids], skip_special_tokens=True) == [tok.decode(ids, skip_special_tokens=True)] * 2
