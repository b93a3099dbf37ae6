"""More of the names tiktoken and transformers users type (issue 33, a new user's trial): ``encode(text,
disallowed_special=())`` and ``encode(text, add_special_tokens=False)`` raised TypeError; ``decode_batch``,
``encode_single_token``, ``special_tokens_set``, ``convert_tokens_to_ids``, ``tokenize``, ``all_special_ids``, the
BOS/UNK names were missing; ``apply_chat_template`` said nothing of what to use. Each is checked against tiktoken
itself or the exported tokenizer loaded in transformers, not against kimi-recon."""

from __future__ import annotations

import tempfile
from typing import TYPE_CHECKING, Any

import pytest
from extras import require
from hypothesis import given
from hypothesis import strategies as st

from kimi_recon import KimiTokenizer, load_tokenizer
from kimi_recon.errors import InvalidInputError

if TYPE_CHECKING:
    import transformers
else:
    transformers = require("transformers")

TEXTS = st.text(st.characters(exclude_categories=["Cs"]), max_size=40) | st.sampled_from(["<|im_end|> hi", "[EOS]x", " hello world", "a</think>b"])
_HF: list[Any] = []


def _hf() -> Any:
    """The K2.5 tokenizer as ``kimi-recon export-tokenizer`` writes it, loaded by transformers."""
    if not _HF:
        from kimi_recon.fast_tokenizer import export_tokenizer

        folder = tempfile.mkdtemp()
        export_tokenizer(folder, "kimi-k2.5")
        _HF.append(transformers.AutoTokenizer.from_pretrained(folder))
    return _HF[0]


@given(TEXTS)
def test_the_tiktoken_names_mean_what_they_mean_in_tiktoken(tok: KimiTokenizer, text: str) -> None:
    enc = tok.encoding
    ids = enc.encode(text, allowed_special="all")
    assert tok.encode(text, disallowed_special=()) == ids  # Kimi's default allowed_special="all", nothing refused
    assert tok.encode(text, allowed_special=set(), disallowed_special=()) == enc.encode(text, disallowed_special=())
    assert tok.encode_ordinary_batch([text, text]) == [enc.encode_ordinary(text)] * 2
    assert tok.decode_batch([ids, ids]) == enc.decode_batch([ids, ids])
    assert tok.decode_tokens_bytes(ids) == enc.decode_tokens_bytes(ids)
    for i in ids[:5]:
        piece = enc.decode_single_token_bytes(i)
        assert tok.encode_single_token(piece) == enc.encode_single_token(piece)


def test_disallowed_special_refuses_as_tiktoken_does(tok: KimiTokenizer) -> None:
    enc = tok.encoding
    with pytest.raises(ValueError):
        enc.encode("a<|im_end|>", disallowed_special="all")
    with pytest.raises(InvalidInputError, match="<\\|im_end\\|>") as caught:
        tok.encode("a<|im_end|>", allowed_special=set(), disallowed_special="all")
    assert isinstance(caught.value, ValueError) and caught.value.field == "text"
    with pytest.raises(InvalidInputError):
        tok.encode("a<|im_end|>", allowed_special=set(), disallowed_special={"<|im_end|>"})
    # what is allowed is never refused, in tiktoken too
    assert tok.encode("a<|im_end|>", allowed_special={"<|im_end|>"}, disallowed_special="all") == enc.encode("a<|im_end|>", allowed_special={"<|im_end|>"})
    assert tok.encode("a[EOS]", allowed_special=set(), disallowed_special={"<|im_end|>"}) == enc.encode_ordinary("a[EOS]")


def test_the_special_token_sets_are_tiktokens(tok: KimiTokenizer) -> None:
    enc = tok.encoding
    assert tok.special_tokens_set == enc.special_tokens_set and tok.max_token_value == enc.max_token_value == 163839
    assert tok.encode_single_token("<|im_end|>") == enc.encode_single_token("<|im_end|>") == 163586
    with pytest.raises(KeyError):
        enc.encode_single_token("hello world")
    with pytest.raises(InvalidInputError, match="not one token"):
        tok.encode_single_token("hello world")


@given(TEXTS)
def test_the_transformers_names_match_the_exported_tokenizer_in_transformers(tok: KimiTokenizer, text: str) -> None:
    hf = _hf()
    assert tok.tokenize(text) == hf.tokenize(text)
    tokens = hf.convert_ids_to_tokens(tok.encode(text))
    assert tok.convert_tokens_to_ids(tokens) == hf.convert_tokens_to_ids(tokens) == tok.encode(text)
    assert tok.encode(text, add_special_tokens=True) == hf.encode(text, add_special_tokens=True)
    assert tok.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False)
    for add in (True, False):
        assert tok(text, add_special_tokens=add)["input_ids"] == hf(text, add_special_tokens=add)["input_ids"]


def test_the_special_token_names_are_the_exported_tokenizers(tok: KimiTokenizer) -> None:
    hf = _hf()
    assert (tok.bos_token, tok.bos_token_id, tok.unk_token, tok.unk_token_id) == (hf.bos_token, hf.bos_token_id, hf.unk_token, hf.unk_token_id)
    assert (tok.bos_token_id, tok.unk_token_id) == (163584, 163838)  # tokenizer_config.json of Kimi-K2.5
    assert tok.all_special_tokens == list(hf.all_special_tokens) and tok.all_special_ids == list(hf.all_special_ids)
    assert tok.get_vocab() == hf.get_vocab()


def test_a_token_that_is_none_is_a_named_error_not_unk(tok: KimiTokenizer) -> None:
    assert _hf().convert_tokens_to_ids("no-such-token") == 163838  # transformers' silent [UNK]
    with pytest.raises(InvalidInputError, match="no-such-token"):
        tok.convert_tokens_to_ids(["Ġhello", "no-such-token"])


def test_names_that_mean_something_else_here_say_what_to_use(tok: KimiTokenizer) -> None:
    with pytest.raises(AttributeError, match="render_prompt"):
        tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True)
    with pytest.raises(AttributeError, match="export-tokenizer"):
        tok.save_pretrained("out")
    assert not hasattr(tok, "apply_chat_template") and not hasattr(tok, "no_such_name")


def test_the_bad_values_are_named(tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputError, match="add_special_tokens"):
        tok.encode("hi", add_special_tokens="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="disallowed_special"):
        tok.encode("hi", disallowed_special=5)  # type: ignore[arg-type]


def test_k3_lists_its_own_special_tokens() -> None:
    k3 = load_tokenizer(profile="kimi-k3")
    assert "<|end_of_msg|>" in k3.all_special_tokens and "<|im_end|>" not in k3.all_special_tokens
    assert k3.convert_tokens_to_ids("<|end_of_msg|>") == k3.special_tokens["<|end_of_msg|>"]


def test_decode_takes_tiktokens_errors(tok: KimiTokenizer) -> None:
    enc = tok.encoding
    cut = [enc.encode_single_token(b"\xe4")]  # the first byte of a three-byte character, alone
    assert tok.decode(cut) == enc.decode(cut) == "\ufffd"
    with pytest.raises(UnicodeDecodeError):
        enc.decode(cut, errors="strict")
    with pytest.raises(UnicodeDecodeError):
        tok.decode(cut, errors="strict")
    assert tok.decode(cut, errors="ignore") == enc.decode(cut, errors="ignore") == ""
