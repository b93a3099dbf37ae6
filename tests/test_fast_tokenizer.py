"""The exported fast tokenizer (tokenizer.json) gives the official Kimi ids, decodes, offsets and loss masks."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from extras import require
from hypothesis import given
from hypothesis import strategies as st
from testdata import GOLDEN, OFFICIAL, read_jsonl

from kimi_recon import KimiTokenizer, build_training_sample, cli, load_tokenizer, render_prompt
from kimi_recon._render.k3_prompt import k3_prompt_segments
from kimi_recon.errors import OutputFileError
from kimi_recon.fast_tokenizer import (
    EXPORT_FILES,
    FastTokenizerError,
    bpe_merges,
    build_fast_tokenizer,
    byte_to_unicode,
    encode_like_official,
    export_tokenizer,
    official_encode_cuts,
)
from kimi_recon.profiles import special_tokens_for
from kimi_recon.render import render_assistant_turn, render_turn_with_flags
from kimi_recon.segments import Segment
from kimi_recon.special_tokens import NUM_BASE_TOKENS, SPECIAL_TOKENS

if TYPE_CHECKING:
    import tokenizers
else:
    tokenizers = require("tokenizers")  # the whole module is about the export it builds

K25_CONFIG = Path(__file__).parent.parent / "kimi_recon" / "data" / "k2.5" / "tokenizer_config.json"


@pytest.fixture(scope="session")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One export per test session (building the 163k-entry tokenizer takes seconds)."""
    out = tmp_path_factory.mktemp("fast-k2.5")
    export_tokenizer(out)
    return out


@pytest.fixture(scope="session")
def fast(export_dir: Path) -> tokenizers.Tokenizer:
    return tokenizers.Tokenizer.from_file(str(export_dir / "tokenizer.json"))


@pytest.fixture(scope="session")
def fast_ordinary(tok: KimiTokenizer) -> tokenizers.Tokenizer:
    return build_fast_tokenizer(tokenizer=tok, added_tokens=False)


def _ids(fast: tokenizers.Tokenizer, text: str) -> list[int]:
    ids: list[int] = fast.encode(text, add_special_tokens=False).ids
    return ids


# ---------------------------------------------------------------------------------------------
# Merges derived from the ranks


def test_merges_follow_bpe_not_the_first_split_point() -> None:
    # "abc" is reached through "bc" (rank 3) before "ab" (rank 4) exists, so its merge is a + bc.
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5}
    assert bpe_merges(ranks) == [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc")]


def test_token_that_bpe_cannot_reach_is_refused() -> None:
    ranks = {b"a": 0, b"b": 1, b"c": 2, b"abc": 3}
    with pytest.raises(FastTokenizerError, match=r"b'abc' \(rank 3\) is not the merge of two lower-ranked tokens"):
        bpe_merges(ranks)


def test_every_kimi_token_is_one_merge_of_two_lower_ranked_tokens(tok: KimiTokenizer, export_dir: Path) -> None:
    ranks = tok.mergeable_ranks
    to_byte = {ch: b for b, ch in byte_to_unicode().items()}
    exported = json.loads((export_dir / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    merges = [tuple(bytes(to_byte[ch] for ch in part) for part in m.split(" ")) for m in exported]
    assert len(merges) == NUM_BASE_TOKENS - 256
    merged_ranks = [ranks[a + b] for a, b in merges]
    assert merged_ranks == sorted(merged_ranks)
    assert all(ranks[a] < ranks[a + b] and ranks[b] < ranks[a + b] for a, b in merges)


# ---------------------------------------------------------------------------------------------
# The official ids: dev encode cases, published vectors, dev turns


OFFICIAL_ENCODE = read_jsonl(OFFICIAL / "encode.jsonl")
UNCUT = [c for c in OFFICIAL_ENCODE if not official_encode_cuts(c["text"])]
CUT = [c for c in OFFICIAL_ENCODE if official_encode_cuts(c["text"])]


def test_dev_encode_cases_split_into_cut_and_uncut() -> None:
    assert len(OFFICIAL_ENCODE) == len(UNCUT) + len(CUT) and len(UNCUT) >= 300 and len(CUT) >= 4


@pytest.mark.parametrize("case", UNCUT, ids=[f"encode-{i}" for i in range(len(UNCUT))])
def test_export_encodes_like_official_tokenizer(fast: tokenizers.Tokenizer, case: dict[str, Any]) -> None:
    assert _ids(fast, case["text"]) == case["ids"]
    assert fast.decode(case["ids"], skip_special_tokens=False) == case["text"]


@pytest.mark.parametrize("case", CUT, ids=[f"cut-{i}" for i in range(len(CUT))])
def test_encoding_the_official_pieces_gives_official_ids_where_it_cuts(fast: tokenizers.Tokenizer, case: dict[str, Any]) -> None:
    assert encode_like_official(fast, case["text"]) == case["ids"]
    assert fast.decode(case["ids"], skip_special_tokens=False) == case["text"]


def test_official_cuts_are_the_one_known_difference(fast: tokenizers.Tokenizer, tok: KimiTokenizer) -> None:
    # One encode of a cut text is what tiktoken gives the whole text, which is not always the official ids.
    differing = []
    for case in CUT:
        whole = _ids(fast, case["text"])
        assert whole == tok.encoding.encode(case["text"], allowed_special="all")
        differing += [whole != case["ids"]]
    assert 0 < sum(differing) < len(CUT)


@pytest.mark.parametrize(
    "text,cut",
    [
        ("x" * 25_000, False),
        ("x" * 25_001, True),
        (" " * 25_001, True),
        ("x " * 200_000, False),  # 400,000 characters, short runs: one piece
        ("x " * 200_000 + "x", True),  # 400,001 characters
        ("", False),
    ],
)
def test_official_encode_cuts_at_the_official_limits(text: str, cut: bool) -> None:
    assert official_encode_cuts(text) is cut


def _vector_cases() -> list[Any]:
    doc = json.loads((GOLDEN / "kimi_encode_vectors.json").read_text(encoding="utf-8"))
    return [
        pytest.param(case["input"], case["expected"], source["allowed_special"] == "all", id=f"{name}-{i}")
        for name, source in doc["sources"].items()
        for i, case in enumerate(source["cases"])
    ]


@pytest.mark.parametrize("text,expected,allow_special", _vector_cases())
def test_export_matches_published_vectors(
    fast: tokenizers.Tokenizer, fast_ordinary: tokenizers.Tokenizer, text: str, expected: list[int], allow_special: bool
) -> None:
    assert _ids(fast if allow_special else fast_ordinary, text) == expected


def test_export_gives_llama_cpp_kimi_k2_pre_tokenizer_hash(fast: tokenizers.Tokenizer) -> None:
    # llama.cpp's converter names a pre-tokenizer by sha256(str(tokenizer.encode(CHK_TXT))).
    chk = json.loads((GOLDEN / "kimi_encode_vectors.json").read_text(encoding="utf-8"))["llama_cpp_chkhsh"]
    digest = hashlib.sha256(str(_ids(fast, chk["text"])).encode()).hexdigest()
    assert digest == chk["published_chkhsh"]["moonshotai/Kimi-K2-Base (res='kimi-k2')"]


TURNS = read_jsonl(OFFICIAL / "turns.jsonl") + read_jsonl(OFFICIAL / "turns_adversarial.jsonl")


@pytest.mark.parametrize("case", TURNS, ids=[f"turn-{i}" for i in range(len(TURNS))])
def test_export_encodes_dev_turns_like_official(fast: tokenizers.Tokenizer, case: dict[str, Any]) -> None:
    for field in ("prompt", "output"):
        assert not official_encode_cuts(case[field])
        assert _ids(fast, case[field]) == case[f"{field}_ids"]
        assert fast.decode(case[f"{field}_ids"], skip_special_tokens=False) == case[field]


K3_DEV = read_jsonl(GOLDEN / "official-k3-dev" / "turns.jsonl") + read_jsonl(GOLDEN / "official-k3-dev" / "turns_adversarial.jsonl")


@pytest.fixture(scope="session")
def fast_k3(tok: KimiTokenizer) -> tokenizers.Tokenizer:
    return build_fast_tokenizer("kimi-k3", tok)


def _per_segment(fast: tokenizers.Tokenizer, ordinary: tokenizers.Tokenizer, segments: Sequence[Segment]) -> list[int]:
    # As K3's tokenizer does: a control marker is one special id, every text piece ordinary text.
    ids: list[int] = []
    for seg in segments:
        if seg.special:
            marker_ids = _ids(fast, seg.text)
            assert len(marker_ids) == 1
            ids += marker_ids
        elif seg.text:
            ids += _ids(ordinary, seg.text)
    return ids


@pytest.mark.parametrize("case", K3_DEV, ids=[f"k3-{i}" for i in range(len(K3_DEV))])
def test_k3_export_encodes_dev_turns_per_segment_like_official(
    fast_k3: tokenizers.Tokenizer, fast_ordinary: tokenizers.Tokenizer, case: dict[str, Any]
) -> None:
    prompt = k3_prompt_segments(
        case["messages"], case["tools"], thinking=case["thinking"], thinking_effort=case["thinking_effort"], tool_choice=case["tool_choice"]
    )
    output = render_turn_with_flags(case["turn"], "kimi-k3", case["thinking"]).segments
    assert _per_segment(fast_k3, fast_ordinary, prompt) == case["prompt_ids"]
    assert _per_segment(fast_k3, fast_ordinary, output) == case["output_ids"]
    assert fast_k3.decode(case["prompt_ids"] + case["output_ids"], skip_special_tokens=False) == case["prompt"] + case["output"]


def test_k3_export_names_the_k3_slots(fast_k3: tokenizers.Tokenizer) -> None:
    # K3 renamed 163586-163589 and reserved K2.5's <think>: that text is ordinary text in K3.
    assert [fast_k3.token_to_id(t) for t in ("<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>")] == [163586, 163587, 163588, 163589]
    assert fast_k3.token_to_id("<|reserved_token_163606|>") == 163606
    assert 163606 not in _ids(fast_k3, "<think>") and fast_k3.token_to_id("<think>") is None
    # <|open|> is not special (it survives skip_special_tokens); <|end_of_msg|> is.
    assert fast_k3.decode([163587, 163586], skip_special_tokens=True) == "<|open|>"


def test_k3_export_loads_in_transformers_with_k3_names(tmp_path: Path, tok: KimiTokenizer) -> None:
    PreTrainedTokenizerFast = require("transformers").PreTrainedTokenizerFast

    export_tokenizer(tmp_path, "kimi-k3", tok)
    hf = PreTrainedTokenizerFast.from_pretrained(str(tmp_path))
    assert hf.convert_ids_to_tokens([163586, 163587, 163649]) == ["<|end_of_msg|>", "<|open|>", "<osagent_mode>"]
    assert "<|end_of_msg|>" in hf.all_special_tokens and "<|open|>" not in hf.all_special_tokens


def test_code_points_split_like_tiktoken(fast_ordinary: tokenizers.Tokenizer, tok: KimiTokenizer) -> None:
    # The split regex runs on Oniguruma here and on fancy-regex in tiktoken; their Unicode classes must
    # agree. Contexts that tell the regex's classes apart, for every code point below U+3000 (the dense
    # alphabetic scripts) and every 13th one of the rest of planes 0-3 and 14 (a one-off run over every
    # code point of planes 0-12 in 15 contexts found no difference; docs/fast-tokenizer.md).
    points = [c for c in (*range(0x40000), *range(0xE0000, 0xE1000)) if (c < 0x3000 or c % 13 == 0) and not 0xD800 <= c < 0xE000]
    pattern = "a{0} {0}{0}1{0}\n{0}A{0}"
    texts = ["".join(pattern.format(chr(c)) for c in points[i : i + 500]) for i in range(0, len(points), 500)]
    fast_ids = [e.ids for e in fast_ordinary.encode_batch(texts, add_special_tokens=False)]
    differing = [i for i, (a, b) in enumerate(zip(fast_ids, tok.encoding.encode_ordinary_batch(texts), strict=True)) if a != b]
    assert differing == []


# ---------------------------------------------------------------------------------------------
# Round trips against KimiTokenizer on generated text

SCRIPTS = [
    "Hello, World! It's a test.", "Здравствуй, мир", "Γειά σου", "مرحبا بالعالم", "שלום", "नमस्ते दुनिया", "สวัสดี",
    "你好世界，汉字", "こんにちは、カタカナ", "안녕하세요", "ẞtraße café naïve", "e\u0301\u0302", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "1234567.89",
]
EMOJI = ["🙂", "👩‍💻", "🇺🇸", "👍🏽", "❤️", "🏳️‍🌈", "👨‍👩‍👧‍👦", "✈\ufe0e"]
SPECIAL_TEXT = [t.text for t in SPECIAL_TOKENS] + ["<|im_end|", "<think", "[EOS", "<|reserved_token_163840|>"]
pieces = st.one_of(
    st.text(st.characters(codec="utf-8"), max_size=30),
    st.sampled_from(SCRIPTS),
    st.sampled_from(EMOJI),
    st.sampled_from(SPECIAL_TEXT),
    st.builds(lambda c, n: c * n, st.sampled_from([" ", "\t", "\n", "\r\n", "\u3000", "\xa0", "\u2028", "x", "!"]), st.integers(1, 300)),
)
texts = st.lists(pieces, max_size=12).map("".join)


@given(texts)
def test_export_encodes_generated_text_like_kimi_tokenizer(fast: tokenizers.Tokenizer, tok: KimiTokenizer, text: str) -> None:
    ids = _ids(fast, text)
    assert ids == tok.encode(text)
    assert fast.decode(ids, skip_special_tokens=False) == text


K3_SPECIAL_TEXT = [t.text for t in special_tokens_for("kimi-k3")] + ["<think>", "</think>", "<|im_end|>", "<|open|"]
k3_texts = st.lists(st.one_of(pieces, st.sampled_from(K3_SPECIAL_TEXT)), max_size=12).map("".join)


@given(k3_texts)
def test_k3_export_encodes_generated_text_like_k3_kimi_tokenizer(fast_k3: tokenizers.Tokenizer, text: str) -> None:
    k3tok = load_tokenizer(profile="kimi-k3")
    ids = _ids(fast_k3, text)
    assert ids == k3tok.encode(text)
    assert fast_k3.decode(ids, skip_special_tokens=False) == text


@given(texts)
def test_ordinary_export_encodes_special_text_as_text(fast_ordinary: tokenizers.Tokenizer, tok: KimiTokenizer, text: str) -> None:
    assert _ids(fast_ordinary, text) == tok.encode(text, allowed_special=set())


@given(st.lists(st.integers(0, NUM_BASE_TOKENS + 255), max_size=40))
def test_export_decodes_any_ids_like_kimi_tokenizer(fast: tokenizers.Tokenizer, tok: KimiTokenizer, ids: list[int]) -> None:
    # Includes ids that end or start inside a UTF-8 character: both replace the broken bytes the same way.
    assert fast.decode(ids, skip_special_tokens=False) == tok.decode(ids)


# ---------------------------------------------------------------------------------------------
# Special tokens


def test_all_256_special_slots_are_added_tokens_with_official_names_and_flags(fast: tokenizers.Tokenizer, export_dir: Path) -> None:
    official = json.loads(K25_CONFIG.read_text(encoding="utf-8"))["added_tokens_decoder"]
    added = json.loads((export_dir / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    assert [t["id"] for t in added] == list(range(NUM_BASE_TOKENS, NUM_BASE_TOKENS + 256))
    for token in added:
        entry = official.get(str(token["id"]))
        expected = (entry["content"], entry["special"]) if entry else (f"<|reserved_token_{token['id']}|>", True)
        assert (token["content"], token["special"]) == expected
        assert fast.token_to_id(token["content"]) == token["id"]


@pytest.mark.parametrize("case", read_jsonl(OFFICIAL / "special.jsonl"), ids=lambda c: str(c["id"]))
def test_export_decodes_special_ids_like_official(fast: tokenizers.Tokenizer, case: dict[str, Any]) -> None:
    assert fast.decode([case["id"]], skip_special_tokens=False) == case["decoded"]


def test_unknown_profile_names_the_field() -> None:
    with pytest.raises(ValueError, match="field 'profile': unknown profile 'kimi-k9'"):
        build_fast_tokenizer("kimi-k9")


# ---------------------------------------------------------------------------------------------
# transformers


@pytest.fixture(scope="session")
def hf_tokenizer(export_dir: Path) -> Any:
    PreTrainedTokenizerFast = require("transformers").PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(export_dir))


def test_transformers_loads_the_export_without_remote_code(hf_tokenizer: Any, tok: KimiTokenizer) -> None:
    text = "Hello world<|im_end|>你好</think> 🇺🇸"
    assert hf_tokenizer(text)["input_ids"] == tok.encode(text)  # no BOS/EOS added
    assert (hf_tokenizer.bos_token, hf_tokenizer.eos_token, hf_tokenizer.unk_token, hf_tokenizer.pad_token) == ("[BOS]", "[EOS]", "[UNK]", "[PAD]")
    assert len(hf_tokenizer) == 163_840
    ids = tok.encode(text)
    assert hf_tokenizer.decode(ids) == text
    # <|im_end|> is special, </think> is not (the official flags): skip_special_tokens drops only the first.
    assert hf_tokenizer.decode(ids, skip_special_tokens=True) == "Hello world你好</think> 🇺🇸"


def test_transformers_decode_keeps_spaces_before_punctuation(hf_tokenizer: Any, tok: KimiTokenizer) -> None:
    text = "a , b . c ! don 't"
    assert hf_tokenizer.decode(tok.encode(text)) == text


# ---------------------------------------------------------------------------------------------
# Offsets


def _char_spans(tok: KimiTokenizer, text: str, ids: list[int]) -> list[tuple[int, int]]:
    """Each token's span: from the character holding its first byte to the one after its last byte."""
    char_of_byte = [i for i, ch in enumerate(text) for _ in ch.encode("utf-8")]
    spans, at = [], 0
    for tid in ids:
        n = len(tok.token_bytes(tid))
        spans.append((char_of_byte[at], char_of_byte[at + n - 1] + 1))
        at += n
    return spans


def test_offsets_of_a_character_split_across_tokens_cover_it_in_both(fast: tokenizers.Tokenizer) -> None:
    # " 🇺🇸": 67496 is " " + 3 bytes of 🇺, 118581 the last byte of 🇺 + 🇸.
    enc = fast.encode(" 🇺🇸", add_special_tokens=False)
    assert enc.ids == [67496, 118581]
    assert enc.offsets == [(0, 2), (1, 3)]


@pytest.mark.parametrize("case", TURNS[:40], ids=[f"turn-{i}" for i in range(40)])
def test_offsets_line_up_with_every_token_of_dev_turns(fast: tokenizers.Tokenizer, tok: KimiTokenizer, case: dict[str, Any]) -> None:
    text = case["prompt"] + case["output"]
    enc = fast.encode(text, add_special_tokens=False)
    assert enc.offsets == _char_spans(tok, text, enc.ids)


@given(texts)
def test_offsets_line_up_with_every_token(fast: tokenizers.Tokenizer, tok: KimiTokenizer, text: str) -> None:
    enc = fast.encode(text, add_special_tokens=False)
    assert enc.offsets == _char_spans(tok, text, enc.ids)


def test_transformers_offset_mapping_is_the_tokenizers_offsets(hf_tokenizer: Any, fast: tokenizers.Tokenizer) -> None:
    text = "<|im_user|>user<|im_middle|>héllo 🇺🇸 世界<|im_end|>"
    assert [tuple(o) for o in hf_tokenizer(text, return_offsets_mapping=True)["offset_mapping"]] == fast.encode(text, add_special_tokens=False).offsets


WITH_TOOL_CALLS = [c for c in TURNS if c["turn"].get("tool_calls")]


@pytest.mark.parametrize("case", WITH_TOOL_CALLS, ids=[f"tools-{i}" for i in range(len(WITH_TOOL_CALLS))])
def test_loss_mask_from_offsets_equals_build_training_sample(hf_tokenizer: Any, tok: KimiTokenizer, case: dict[str, Any]) -> None:
    # What SpecForge does with a fast tokenizer: render the conversation as text, find the assistant's
    # span, and mark the tokens whose offsets fall inside it.
    prompt = render_prompt(case["messages"], case["tools"], thinking=case["thinking"], tokenizer=tok)
    text = prompt + render_assistant_turn(case["turn"], thinking=case["thinking"])
    enc = hf_tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    mask = [int(start >= len(prompt)) for start, _ in enc["offset_mapping"]]
    sample = build_training_sample(case["messages"], case["turn"], case["tools"], thinking=case["thinking"], tokenizer=tok)
    assert enc["input_ids"] == sample.input_ids
    assert mask == sample.loss_mask


# ---------------------------------------------------------------------------------------------
# Export and command line


def test_export_refuses_existing_files_and_source_folders(tmp_path: Path, tok: KimiTokenizer) -> None:
    (tmp_path / "tokenizer.json").write_text("keep me", encoding="utf-8")
    with pytest.raises(OutputFileError, match=r"field 'directory': .* already holds tokenizer\.json; pass overwrite=True"):
        export_tokenizer(tmp_path, tokenizer=tok)
    assert (tmp_path / "tokenizer.json").read_text(encoding="utf-8") == "keep me"
    (tmp_path / "tiktoken.model").write_bytes(b"")
    with pytest.raises(OutputFileError, match=re.escape("holds a tiktoken.model: it is a tokenizer source folder")):
        export_tokenizer(tmp_path, tokenizer=tok, overwrite=True)


def test_export_writes_the_three_files_and_nothing_else(export_dir: Path) -> None:
    assert sorted(p.name for p in export_dir.iterdir()) == sorted(EXPORT_FILES)
    config = json.loads((export_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast" and "auto_map" not in config
    assert config["clean_up_tokenization_spaces"] is False


def test_cli_export_writes_the_same_files(tmp_path: Path, export_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # In-process, so the merges derived for the session's export are reused.
    out = tmp_path / "out"
    assert cli.main(["export-tokenizer", str(out), "--profile", "kimi-k2.6"]) == 0
    assert "wrote tokenizer.json, tokenizer_config.json, special_tokens_map.json (kimi-k2.5)" in capsys.readouterr().err
    for name in EXPORT_FILES:
        assert (out / name).read_bytes() == (export_dir / name).read_bytes()


def test_cli_export_refuses_to_replace_files(tmp_path: Path) -> None:
    (tmp_path / "special_tokens_map.json").write_text("{}", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "kimi_recon.cli", "export-tokenizer", str(tmp_path)], check=False, capture_output=True, text=True)
    assert done.returncode == 2
    assert "already holds special_tokens_map.json; pass overwrite=True (--overwrite) to replace them" in done.stderr
    assert (tmp_path / "special_tokens_map.json").read_text(encoding="utf-8") == "{}"


def test_core_does_not_import_tokenizers() -> None:
    code = (
        "import sys; sys.modules['tokenizers'] = None\n"
        "import kimi_recon, kimi_recon.cli, kimi_recon.fast_tokenizer as f\n"
        "assert f.official_encode_cuts('x' * 25001)\n"
        "try:\n    f.build_fast_tokenizer()\nexcept f.FastTokenizerError as e:\n    print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "needs the tokenizers package: pip install 'kimi-recon[fast]'" in done.stdout


def test_the_exported_tokenizer_carries_the_chat_template_transformers_renders(tmp_path: Path) -> None:
    """``apply_chat_template`` raised on the exported tokenizer (no template; issue 33). It now renders the
    profile's bundled template: the prompt kimi-recon renders (itself checked against the official prompts)."""
    transformers = require("transformers")
    from kimi_recon import render_prompt

    export_tokenizer(tmp_path / "k25", "kimi-k2.5")
    hf = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "k25"))
    cases = [c for c in read_jsonl(OFFICIAL / "turns.jsonl") if not c.get("tools")][:12]
    assert cases
    for case in cases:
        for thinking in (True, False):
            rendered = hf.apply_chat_template(case["messages"], tokenize=False, add_generation_prompt=True, thinking=thinking)
            assert rendered == render_prompt(case["messages"], None, "kimi-k2.5", thinking)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]
    with pytest.raises(Exception, match="tools_ts_str"):  # no silent other prompt: the official declares tools in Python
        hf.apply_chat_template(cases[0]["messages"], tools=tools, tokenize=False, add_generation_prompt=True)
    export_tokenizer(tmp_path / "k3", "kimi-k3")  # K3's official renderer is Python: no template is written
    assert "chat_template" not in json.loads((tmp_path / "k3" / "tokenizer_config.json").read_text(encoding="utf-8"))
