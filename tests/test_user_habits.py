"""The API speaks the words users bring from tiktoken, Hugging Face and notebooks, and type checkers see only
real names (issue 21, done-item 5). Expected ids are the official ones (tests/data/golden), not our own."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from testdata import OFFICIAL, read_jsonl

import kimi_recon
from kimi_recon.dataset import audit_dataset
from kimi_recon.errors import UnknownSpecialTokenError

ROOT = Path(__file__).resolve().parent.parent
K25_TURNS = read_jsonl(OFFICIAL / "turns.jsonl")
ENCODE = read_jsonl(OFFICIAL / "encode.jsonl")
SPECIAL = read_jsonl(OFFICIAL / "special.jsonl")


def _mypy(tmp_path: Path, source: str) -> tuple[int, str]:
    pytest.importorskip("mypy")
    script = tmp_path / "user_script.py"
    script.write_text(source, encoding="utf-8")
    # the package as the sources (MYPYPATH), so the check sees exactly this tree whatever the install mode
    env = {"MYPYPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--cache-dir=/dev/null", str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    return done.returncode, done.stdout + done.stderr


def test_mypy_strict_refuses_a_misspelt_top_level_name_and_accepts_the_real_one(tmp_path: Path) -> None:
    code, out = _mypy(tmp_path, "import kimi_recon\n\nresult = kimi_recon.reconstruct_ouput_ids(kimi_recon.AssistantTurn(content='hi'))\n")
    assert code == 1 and 'has no attribute "reconstruct_ouput_ids"' in out, out
    code, out = _mypy(tmp_path, "import kimi_recon\n\nids: list[int] = kimi_recon.reconstruct_output_ids(kimi_recon.AssistantTurn(content='hi')).ids\n")
    assert code == 0, out


def test_a_long_reconstruction_has_a_short_repr_with_the_counts() -> None:
    text = " ".join(f"word{i}" for i in range(5000))
    result = kimi_recon.reconstruct_output_ids(kimi_recon.AssistantTurn(reasoning="r", content=text))
    shown = repr(result)
    assert len(shown) < 400, len(shown)
    assert f"{len(result.ids):,} ids" in shown and f"{len(result.text):,} chars" in shown
    assert str(result.ids[0]) in shown and str(result.ids[-1]) in shown
    assert len(repr(kimi_recon.AssistantTurn(content=text))) < 400


def test_reconstruction_to_dict_is_json_with_the_official_ids() -> None:
    case = K25_TURNS[0]
    result = kimi_recon.reconstruct_output_ids(case["turn"], thinking=case["thinking"])
    data = json.loads(json.dumps(result.to_dict()))
    assert data["ids"] == case["output_ids"] and data["text"] == case["output"]
    assert set(data) == {"ids", "text", "flags", "source", "profile", "thinking", "server"}


def test_a_dataset_audit_shows_itself_in_a_notebook() -> None:
    records = [{"response": c["turn"], "output_ids": c["output_ids"], "thinking": c["thinking"]} for c in K25_TURNS[:3]]
    report = audit_dataset(records)
    assert report._repr_html_() == report.to_html()
    assert repr(report).startswith("DatasetAudit(total=3, compared=3, exact=3")


@pytest.mark.parametrize("row", ENCODE[:40], ids=lambda r: str(len(r["text"])))
def test_allowed_special_all_is_the_official_encode(row: dict[str, object]) -> None:
    assert kimi_recon.load_tokenizer().encode(str(row["text"]), allowed_special="all") == row["ids"]


def test_allowed_special_as_a_set_reads_only_those_texts_and_the_old_spelling_warns() -> None:
    tok = kimi_recon.load_tokenizer()
    text = "a<|im_end|>b</think>"
    only_think = tok.encode(text, allowed_special={"</think>"})
    assert only_think[-1] == 163607 and 163586 not in only_think
    assert only_think[:-1] == tok.encode("a<|im_end|>b", allowed_special=set())
    with pytest.warns(DeprecationWarning, match="allowed_special"):
        old = tok.encode(text, allow_special=False)
    assert old == tok.encode(text, allowed_special=set())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok.encode(text)  # the default path does not warn


def test_skip_special_tokens_drops_exactly_the_ids_the_official_config_marks_special() -> None:
    tok = kimi_recon.load_tokenizer()
    special = {e.id for e in kimi_recon.SPECIAL_TOKENS if e.special}
    assert 163586 in special and 163607 not in special  # config: <|im_end|> special, </think> not
    ids = [163607, 1234, 163586, 163595, 163585]
    kept = [i for i in ids if i not in special]
    assert tok.decode(ids, skip_special_tokens=True) == tok.decode(kept)
    assert tok.decode(ids) == "".join(tok.decode([i]) for i in ids)


def test_eos_token_id_and_len_are_the_hugging_face_figures() -> None:
    tok = kimi_recon.load_tokenizer()
    by_id = {r["id"]: r["decoded"] for r in SPECIAL}
    assert by_id[tok.eos_token_id] == "[EOS]"  # tokenizer_config's eos_token (the model stops on <|im_end|>)
    assert len(tok) == 163_840 == tok.vocab_size


def test_special_tokens_can_be_indexed_by_text_and_by_id_as_the_official_decode_names_them() -> None:
    by_id = {r["id"]: r["decoded"] for r in SPECIAL if r["id"] >= 163584}
    for token_id, text in by_id.items():
        assert kimi_recon.SPECIAL_TOKENS[text] == token_id and kimi_recon.SPECIAL_TOKENS[token_id] == text
    assert kimi_recon.SPECIAL_TOKENS["IM_END"] == 163586
    with pytest.raises(KeyError, match="did you mean"):
        kimi_recon.SPECIAL_TOKENS["<|im_end|"]
    with pytest.raises(UnknownSpecialTokenError):
        kimi_recon.SPECIAL_TOKENS[5]


def test_the_tokenizer_may_come_right_after_the_data_in_build_training_sample() -> None:
    case = next(c for c in K25_TURNS if c["turn"].get("tool_calls") and not c["tools"])
    tok = kimi_recon.load_tokenizer()
    new = kimi_recon.build_training_sample(case["messages"], case["turn"], tok, thinking=case["thinking"])
    old = kimi_recon.build_training_sample(case["messages"], case["turn"], None, None, case["thinking"], tok)
    keyword = kimi_recon.build_training_sample(case["messages"], case["turn"], thinking=case["thinking"], tokenizer=tok)
    assert new.input_ids == old.input_ids == keyword.input_ids == case["prompt_ids"] + case["output_ids"]
    with pytest.raises(kimi_recon.KimiReconError, match="given twice"):
        kimi_recon.build_training_sample(case["messages"], case["turn"], tok, tokenizer=tok)


def test_the_readme_install_is_one_mypy_can_follow() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set up") : readme.index("## Use")]
    # plain commands (issue 36): the editable install is a path entry (pyproject's package-dir), which mypy
    # follows; tests/test_package_metadata.py runs mypy on a script outside the repository
    assert "pip install -e . &&" in setup and "pip install -e '.[dev]'" in setup and "editable_mode" not in setup
