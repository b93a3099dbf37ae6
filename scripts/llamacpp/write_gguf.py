"""Write a tiny one-layer llama GGUF that carries the Kimi tokenizer, for running a real llama-server in tests.

The tokenizer comes from ``kimi-recon export-tokenizer`` (the byte-level vocab and merges, the 256 added tokens as
CONTROL), with llama.cpp's ``kimi-k2`` pre-tokenizer and a Kimi chat template, so llama.cpp picks its Kimi K2 (or K3)
chat parser from the template as it does for a real Kimi GGUF.

The weights make a bigram model: attention and feed-forward write nothing, so the logits depend on the last token
only, through its embedding. A bias dimension favours ~300 common word tokens and gives the turn markers a small
chance, so sampled turns read like words with a ``</think>``, a tool section or an end marker now and then; GBNF
grammars and ``tool_choice`` shape the rest. Deterministic: the same seed writes the same file.

Usage: python scripts/llamacpp/write_gguf.py OUT.gguf [--profile kimi-k3 --chat-template Kimi-K3.jinja] [--random]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

# K2.5's template is the one the package bundles; K3's comes with the llama.cpp sdist (build_server.sh caches it
# beside the binary as Kimi-K3.jinja), so neither needs a download.
_K25_TEMPLATE = Path(__file__).resolve().parents[2] / "kimi_recon" / "data" / "k2.5" / "chat_template.jinja"
_PROFILES = ("kimi-k2.5", "kimi-k3")
_N_EMBD = 64
_N_FF = 64
_N_HEAD = 4
# llama.cpp token types (gguf.TokenType): NORMAL 1, CONTROL 3.
_NORMAL = 1
_CONTROL = 3
# The markers a Kimi turn is made of, on the shared ids (K2.5 names; K3 reuses 163586-163589).
_MARKER_IDS = (163586, 163587, 163588, 163589, 163595, 163596, 163597, 163598, 163599, 163607, 163585, 163593)


def _export_tokenizer(profile: str, out: Path) -> dict[str, Any]:
    subprocess.run(
        [str(Path(sys.executable).with_name("kimi-recon")), "export-tokenizer", str(out), "--profile", profile, "-q"], check=True
    )
    data: dict[str, Any] = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))
    return data


def _word_ids(vocab: dict[str, int]) -> list[int]:
    # Byte-level BPE writes a leading space as "Ġ"; the lowest ranks are the most common merges.
    words = [(i, t) for t, i in vocab.items() if t.startswith("Ġ") and 3 <= len(t) <= 8 and t[1:].isascii()]
    words = [(i, t) for i, t in words if t[1:].isalpha() and t[1:].islower()]
    return [i for i, _ in sorted(words)[:300]]


def write(out: Path, profile: str, template: Path, random_weights: bool, seed: int = 34) -> None:
    import gguf

    with tempfile.TemporaryDirectory() as tmp:
        tok = _export_tokenizer(profile, Path(tmp) / "tokenizer")
    vocab: dict[str, int] = tok["model"]["vocab"]
    added = {int(a["id"]): str(a["content"]) for a in tok["added_tokens"]}
    n_vocab = max([*vocab.values(), *added]) + 1
    tokens = [""] * n_vocab
    types = [_NORMAL] * n_vocab
    for text, i in vocab.items():
        tokens[i] = text
    for i, text in added.items():
        tokens[i] = text
        types[i] = _CONTROL
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]

    rng = np.random.default_rng(seed)
    emb = (rng.standard_normal((n_vocab, _N_EMBD)) * 0.3).astype(np.float32)
    out_w = (rng.standard_normal((n_vocab, _N_EMBD)) * 0.3).astype(np.float32)
    if not random_weights:
        words = _word_ids(vocab)
        emb[:, 0] = 1.0  # the bias dimension: every token carries it, so out_w[:, 0] is a bias on the next token
        # (RMS norm scales these by about 3: a word's logit is ~19, a marker's ~2.3 higher than one word's, so each
        # marker is about 3% of a step; everything else ~-9, never sampled under the default top-k/min-p.)
        out_w[:, 0] = -3.0
        out_w[words, 0] = 6.0
        out_w[list(_MARKER_IDS), 0] = 6.5
        out_w[[163585, 163593], 0] = 5.5  # [EOS], [EOT]: rarer ends
        out_w[163607, 0] = 6.9  # </think>
        # After a marker, words again (dimension 1 marks markers); after a word, a marker a little more often.
        emb[list(_MARKER_IDS), 1] = 2.0
        out_w[words, 1] = 2.0
        out_w[list(_MARKER_IDS), 1] = -2.0

    eos = 163586
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_name(f"kimi-recon tiny {profile}{' random' if random_weights else ''}")
    w.add_context_length(4096)
    w.add_embedding_length(_N_EMBD)
    w.add_block_count(1)
    w.add_feed_forward_length(_N_FF)
    w.add_head_count(_N_HEAD)
    w.add_head_count_kv(_N_HEAD)
    w.add_rope_dimension_count(_N_EMBD // _N_HEAD)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("kimi-k2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(163584)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.add_chat_template(template.read_text(encoding="utf-8"))

    zeros = np.zeros((_N_EMBD, _N_EMBD), dtype=np.float32)
    w.add_tensor("token_embd.weight", emb)
    w.add_tensor("output_norm.weight", np.ones(_N_EMBD, dtype=np.float32))
    w.add_tensor("output.weight", out_w)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(_N_EMBD, dtype=np.float32))
    for name in ("attn_q", "attn_k", "attn_v", "attn_output"):
        w.add_tensor(f"blk.0.{name}.weight", zeros)
    w.add_tensor("blk.0.ffn_norm.weight", np.ones(_N_EMBD, dtype=np.float32))
    w.add_tensor("blk.0.ffn_gate.weight", np.zeros((_N_FF, _N_EMBD), dtype=np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((_N_FF, _N_EMBD), dtype=np.float32))
    w.add_tensor("blk.0.ffn_down.weight", np.zeros((_N_EMBD, _N_FF), dtype=np.float32))
    tmp_out = out.with_suffix(".tmp")
    w.write_header_to_file(tmp_out)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp_out.replace(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--profile", choices=_PROFILES, default="kimi-k2.5")
    p.add_argument("--chat-template", type=Path, default=_K25_TEMPLATE, help="default: the bundled K2.5 template")
    p.add_argument("--random", action="store_true", help="unshaped random weights (turns are noise)")
    a = p.parse_args(argv)
    write(a.out, a.profile, a.chat_template, a.random)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
