"""The tokenizer matches Moonshot's official K2.5 tokenizer, and bad input gets clear errors."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from extras import require
from hypothesis import given
from hypothesis import strategies as st
from testdata import GOLDEN, OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, load_tokenizer
from kimi_recon.errors import InvalidInputError, TokenizerLoadError
from kimi_recon.special_tokens import SPECIAL_TOKENS
from kimi_recon.tokenizer import KIMI_PAT_STR, official_chunks


def _vector_cases() -> list[Any]:
    doc = json.loads((GOLDEN / "kimi_encode_vectors.json").read_text(encoding="utf-8"))
    cases = []
    for name, source in doc["sources"].items():
        for i, case in enumerate(source["cases"]):
            cases.append(pytest.param(case["input"], case["expected"], source["allowed_special"] == "all", id=f"{name}-{i}"))
    return cases


VECTOR_CASES = _vector_cases()


def test_published_vectors_are_all_loaded() -> None:
    assert len(VECTOR_CASES) == 109


@pytest.mark.parametrize("text,expected,allow_special", VECTOR_CASES)
def test_encode_matches_published_vectors(tok: KimiTokenizer, text: str, expected: list[int], allow_special: bool) -> None:
    assert tok.encode(text, allowed_special="all" if allow_special else set()) == expected


OFFICIAL_ENCODE = read_jsonl(OFFICIAL / "encode.jsonl")


@pytest.mark.parametrize("case", OFFICIAL_ENCODE, ids=[f"encode-{i}" for i in range(len(OFFICIAL_ENCODE))])
def test_encode_matches_official_tokenizer(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    assert tok.encode(case["text"]) == case["ids"]


def test_official_encode_cases_include_long_runs() -> None:
    # The chunking rule is only exercised by texts with runs longer than 25,000 characters.
    assert any(re.search(r"\s{25001,}|\S{25001,}", c["text"]) for c in OFFICIAL_ENCODE)


@pytest.mark.parametrize("case", read_jsonl(OFFICIAL / "special.jsonl"), ids=lambda c: str(c["id"]))
def test_decode_matches_official_tokenizer(tok: KimiTokenizer, case: dict[str, Any]) -> None:
    assert tok.decode([case["id"]]) == case["decoded"]


def test_facts_from_the_issue(tok: KimiTokenizer) -> None:
    assert tok.decode([163533]) == "chas"
    assert tok.encode("<|im_end|>") == [163586]
    assert tok.encode("</think>") == [163607]
    assert tok.vocab_size == 163_840


def test_allow_special_false_encodes_special_text_as_ordinary_text(tok: KimiTokenizer) -> None:
    ids = tok.encode("<|im_end|>", allowed_special=set())
    assert 163586 not in ids and len(ids) > 1
    assert tok.decode(ids) == "<|im_end|>"


def _official_chunks_oracle(text: str, max_chars: int, max_run: int) -> list[str]:
    """The official chunking loop, character by character (the slow reference)."""
    out = []
    for start in range(0, len(text), max_chars):
        s = text[start : start + max_chars]
        run_len, run_space, cut = 0, s[0].isspace() if s else False, 0
        for i, ch in enumerate(s):
            if ch.isspace() != run_space:
                run_len, run_space = 1, ch.isspace()
            else:
                run_len += 1
                if run_len > max_run:
                    out.append(s[cut:i])
                    cut, run_len = i, 1
        out.append(s[cut:])
    return out


runs = st.lists(
    st.tuples(st.sampled_from([" ", "\n", "\u3000", "a", "字", "<|im_end|>"]), st.integers(1, 40)), max_size=12
).map(lambda parts: "".join(ch * n for ch, n in parts))


@given(runs, st.integers(5, 60), st.integers(2, 12))
def test_chunking_equals_official_loop(text: str, max_chars: int, max_run: int) -> None:
    assert list(official_chunks(text, max_chars, max_run)) == _official_chunks_oracle(text, max_chars, max_run)


def test_regex_whitespace_is_str_isspace() -> None:
    # The fast chunker finds runs with re's \s; the official loop uses str.isspace.
    ws = re.compile(r"\s")
    mismatches = [cp for cp in range(sys.maxunicode + 1) if bool(ws.match(chr(cp))) != chr(cp).isspace()]
    assert mismatches == []


specials = st.sampled_from([t.text for t in SPECIAL_TOKENS.named()] + ["<|reserved_token_163700|>"])
unicode_text = st.text(st.characters(codec="utf-8"), max_size=60)
pieces = st.lists(st.one_of(unicode_text, specials, st.builds(lambda c, n: c * n, st.sampled_from([" ", "x", "\n", "é"]), st.integers(1, 30_000))), max_size=6)


@given(pieces)
def test_decode_encode_roundtrip(tok: KimiTokenizer, parts: list[str]) -> None:
    text = "".join(parts)
    assert tok.decode(tok.encode(text)) == text


@given(st.lists(st.tuples(st.text(st.characters(codec="utf-8"), max_size=40), specials), max_size=5), unicode_text)
def test_special_tokens_are_hard_boundaries(tok: KimiTokenizer, pairs: list[tuple[str, str]], tail: str) -> None:
    # Encoding the whole string equals encoding the pieces between specials, with the special ids in place.
    plain = [p for p, _ in pairs] + [tail]
    if any(s.text in p for p in plain for s in SPECIAL_TOKENS):
        return
    text = "".join(p + s for p, s in pairs) + tail
    expected: list[int] = []
    for p, s in pairs:
        expected += tok.encode(p) + [SPECIAL_TOKENS.id(s)]
    expected += tok.encode(tail)
    assert tok.encode(text) == expected


@given(st.text(st.characters(codec="utf-8"), max_size=200))
def test_short_text_encodes_like_raw_tiktoken(tok: KimiTokenizer, text: str) -> None:
    assert tok.encode(text) == tok.encoding.encode(text, allowed_special="all")


def test_encode_rejects_non_str(tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputError, match="encode\\(\\) takes a str, got bytes"):
        tok.encode(b"hello")  # type: ignore[arg-type]


def test_decode_rejects_out_of_range_id(tok: KimiTokenizer) -> None:
    with pytest.raises(InvalidInputError, match="id 163840 is outside the vocabulary"):
        tok.decode([1, 163840])


def test_bundled_tokenizer_is_cached_and_checked() -> None:
    tok = load_tokenizer()
    assert tok is load_tokenizer()
    assert tok.vocab_sha256 == "b6c497a7469b33ced9c38afb1ad6e47f03f5e5dc05f15930799210ec050c5103"
    assert tok.chat_template is not None and "<|im_assistant|>" in tok.chat_template


def test_directory_loads_like_bundled(tokenizer_dir: Path, tok: KimiTokenizer) -> None:
    other = load_tokenizer(tokenizer_dir)
    text = "Hello <|im_end|> 世界</think>"
    assert other.encode(text) == tok.encode(text)
    assert other.model_config["eos_token_id"] == 163586


def test_missing_vocab_names_the_file(tokenizer_dir: Path) -> None:
    (tokenizer_dir / "tiktoken.model").unlink()
    with pytest.raises(TokenizerLoadError, match=re.escape("tiktoken.model is missing")):
        load_tokenizer(tokenizer_dir)


def test_unknown_vocab_hash_is_named(tokenizer_dir: Path) -> None:
    vocab = tokenizer_dir / "tiktoken.model"
    lines = vocab.read_bytes().splitlines()
    vocab.write_bytes(b"\n".join(lines[:-1]) + b"\n")  # drop the last rank
    import hashlib

    digest = hashlib.sha256(vocab.read_bytes()).hexdigest()
    with pytest.raises(TokenizerLoadError, match=f"sha256 {digest}, which is not a known Kimi vocab"):
        load_tokenizer(tokenizer_dir)


def test_corrupt_vocab_is_reported_when_hash_check_is_off(tokenizer_dir: Path) -> None:
    (tokenizer_dir / "tiktoken.model").write_bytes(b"not base64!! x\n")
    with pytest.raises(TokenizerLoadError, match="is not a tiktoken rank file"):
        load_tokenizer(tokenizer_dir, verify_hash=False)


def test_corrupt_config_names_the_file(tokenizer_dir: Path) -> None:
    (tokenizer_dir / "tokenizer_config.json").write_text("{ nope", encoding="utf-8")
    with pytest.raises(TokenizerLoadError, match=re.escape("tokenizer_config.json is not valid JSON")):
        load_tokenizer(tokenizer_dir)


def test_config_disagreeing_with_registry_is_refused(tokenizer_dir: Path) -> None:
    path = tokenizer_dir / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["added_tokens_decoder"]["163586"]["content"] = "<|im_stop|>"
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(TokenizerLoadError, match=re.escape("id 163586 is '<|im_stop|>' here but '<|im_end|>' in the Kimi registry")):
        load_tokenizer(tokenizer_dir)


def test_k2_instruct_config_without_think_tokens_loads(tokenizer_dir: Path) -> None:
    (tokenizer_dir / "tokenizer_config.json").write_bytes((GOLDEN.parent / "k2-instruct-tokenizer_config.json").read_bytes())
    (tokenizer_dir / "chat_template.jinja").unlink()
    tok = load_tokenizer(tokenizer_dir)
    assert tok.special_token_text(163606) == "<|reserved_token_163606|>"
    assert tok.chat_template is not None  # embedded in that config


def test_a_file_path_is_not_a_directory(tokenizer_dir: Path) -> None:
    with pytest.raises(TokenizerLoadError, match="is a file; pass the tokenizer directory"):
        load_tokenizer(tokenizer_dir / "tiktoken.model")


def test_hub_repo_id_offline_gives_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    require("huggingface_hub")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TokenizerLoadError, match=re.escape("could not download the tokenizer files of 'moonshotai/Kimi-K2.5'")):
        load_tokenizer("moonshotai/Kimi-K2.5")


class _OfficialLikeTokenizer:
    """Stands in for the official remote-code ``TikTokenTokenizer``: it keeps ``vocab_file`` and ``model``."""

    def __init__(self, directory: Path, model: tiktoken.Encoding) -> None:
        self.vocab_file = str(directory / "tiktoken.model")
        self.model = model
        self.chat_template = "{{ messages }}"
        self.name_or_path = "moonshotai/Kimi-K2.5"


def test_hf_object_with_vocab_file_is_wrapped(tokenizer_dir: Path, tok: KimiTokenizer) -> None:
    wrapped = load_tokenizer(_OfficialLikeTokenizer(tokenizer_dir, tok.encoding))
    assert wrapped.encode("a<|im_end|>") == tok.encode("a<|im_end|>")
    assert wrapped.chat_template == "{{ messages }}"


def test_hf_object_with_only_a_tiktoken_model_is_wrapped(tmp_path: Path, tok: KimiTokenizer) -> None:
    obj = _OfficialLikeTokenizer(tmp_path, tok.encoding)  # vocab_file points nowhere
    wrapped = load_tokenizer(obj)
    assert wrapped.encode("x" * 30_000 + "<think>") == tok.encode("x" * 30_000 + "<think>")


def test_unusable_object_is_refused() -> None:
    with pytest.raises(TokenizerLoadError, match="cannot use a int as a Kimi tokenizer"):
        load_tokenizer(42)


def test_tokenizer_pickles_by_source(tok: KimiTokenizer) -> None:
    import pickle

    assert pickle.loads(pickle.dumps(tok)) is tok  # the bundled one is cached per process


def test_core_import_does_not_pull_heavy_modules() -> None:
    import subprocess

    code = "import sys, kimi_recon; bad = [m for m in ('transformers', 'openai', 'torch', 'datasets') if m in sys.modules]; print(bad)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ})
    assert out.stdout.strip() == "[]"


@given(pieces)
def test_encode_with_the_specials_present_equals_encode(tok: KimiTokenizer, parts: list[str]) -> None:
    from kimi_recon.special_tokens import special_texts_in

    text = "".join(parts)
    assert tok.encode_with_specials(text, set(special_texts_in(text))) == tok.encode(text)


def test_encode_with_specials_falls_back_for_unscannable_tables(tok: KimiTokenizer) -> None:
    odd = tiktoken.Encoding(
        name="odd", pat_str=KIMI_PAT_STR, mergeable_ranks=dict(tok.mergeable_ranks),
        special_tokens={**tok.special_tokens, "@@stop@@": 163840},
    )
    other = KimiTokenizer(odd, source="odd")
    assert other.encode_with_specials("a@@stop@@", set()) == other.encode("a@@stop@@") == [64, 163840]


def test_wrapped_object_tokenizer_survives_pickling(tmp_path: Path, tok: KimiTokenizer) -> None:
    import pickle

    wrapped = load_tokenizer(_OfficialLikeTokenizer(tmp_path, tok.encoding))
    copy = pickle.loads(pickle.dumps(wrapped))
    assert copy.encode("a<|im_end|>é") == tok.encode("a<|im_end|>é") and copy.chat_template == wrapped.chat_template


def test_directory_tokenizer_pickles_by_reloading(tokenizer_dir: Path) -> None:
    import pickle

    other = load_tokenizer(tokenizer_dir)
    data = pickle.dumps(other)
    assert len(data) < 1_000  # the path, not the 160k-entry table
    assert pickle.loads(data).encode("x<think>") == other.encode("x<think>")
