"""The tiktoken internals kimi-recon reads, checked against a fresh ``tiktoken.Encoding``.

tiktoken keeps ranks, split regex, special tokens and its bytes encoder private. If a new tiktoken
renames or reshapes any of them, these tests fail with the name of the attribute, before any id is wrong.
"""

from __future__ import annotations

import importlib.metadata

import pytest
import tiktoken

from kimi_recon.errors import TokenizerLoadError
from kimi_recon.tokenizer import (
    TIKTOKEN_INTERNALS,
    encoding_encode_bytes,
    encoding_pat_str,
    encoding_ranks,
    encoding_special_tokens,
)

# A toy vocab: the 256 single bytes plus two merges, and one special token.
RANKS = {bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257}
SPECIALS = {"<|stop|>": 258}
PAT = r"\S+|\s+"


@pytest.fixture
def toy() -> tiktoken.Encoding:
    return tiktoken.Encoding(name="toy", pat_str=PAT, mergeable_ranks=dict(RANKS), special_tokens=dict(SPECIALS))


@pytest.mark.parametrize("name", TIKTOKEN_INTERNALS)
def test_every_private_tiktoken_attribute_we_read_still_exists(toy: tiktoken.Encoding, name: str) -> None:
    assert hasattr(toy, name), f"tiktoken {tiktoken.__version__} no longer has Encoding.{name}"


def test_ranks_read_back_the_mergeable_ranks_the_encoding_was_built_with(toy: tiktoken.Encoding) -> None:
    assert dict(encoding_ranks(toy)) == RANKS


def test_special_tokens_read_back_the_table_the_encoding_was_built_with(toy: tiktoken.Encoding) -> None:
    table = encoding_special_tokens(toy)
    assert table == SPECIALS
    table["<|other|>"] = 1  # a copy: changing it leaves the encoding alone
    assert encoding_special_tokens(toy) == SPECIALS


def test_pat_str_reads_back_the_split_regex_the_encoding_was_built_with(toy: tiktoken.Encoding) -> None:
    assert encoding_pat_str(toy) == PAT


def test_encode_bytes_merges_raw_bytes_and_keeps_invalid_utf8(toy: tiktoken.Encoding) -> None:
    assert encoding_encode_bytes(toy, b"abc ab") == [257, 32, 256]
    assert encoding_encode_bytes(toy, b"ab\xff") == [256, 255]  # not valid UTF-8: still one id per leftover byte
    assert encoding_encode_bytes(toy, b"<|stop|>") == list(b"<|stop|>")  # special text is ordinary here


def test_a_missing_internal_is_a_named_load_error() -> None:
    class NotAnEncoding:
        pass

    with pytest.raises(TokenizerLoadError, match=r"has no Encoding\._mergeable_ranks"):
        encoding_ranks(NotAnEncoding())  # type: ignore[arg-type]


def test_installed_tiktoken_is_inside_the_range_pyproject_allows() -> None:
    # The upper bound exists because the internals above may change in any minor release (0.x).
    major, minor = (int(p) for p in importlib.metadata.version("tiktoken").split(".")[:2])
    assert (0, 7) <= (major, minor) < (0, 15)
