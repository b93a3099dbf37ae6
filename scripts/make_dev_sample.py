"""Build kimi_recon/data/sample/k2.5-dev-sample.jsonl from Moonshot's official K2.5 dev conversations.

    python scripts/make_dev_sample.py [OFFICIAL_TURNS_JSONL] [OUTPUT]

Each record is one official conversation's final assistant turn as a chat completion (the response), with
the ids Moonshot's official code gave for it (the reference), as ``kimi-recon audit`` reads them. Three
records are changed on purpose, so the sample shows what an audit finds:

* ``turns-032-truncated``: the official ids cut part-way through the content (at a character boundary), the
  response holding the text of those ids with ``finish_reason: "length"`` (a turn that hit ``max_tokens``);
* ``turns-033-wrong-im-end``: the reference's ``<|im_end|>`` (163586) replaced by 163533, the ordinary id
  that decodes to "chas" (the wrong constant some pipelines carry);
* ``turns-034-reasoning-dropped``: the response without its ``reasoning_content`` (a server that does not
  return the reasoning);
* ``turns-NNN-newlines-normalized``: the first later turn whose content holds a ``\\r``, with its line ends
  normalized to ``\\n`` (a proxy rewriting text);
* the last line: a record cut short mid-JSON (a writer that crashed), which an audit counts as unreadable;
* every other record is an official turn as it is (many have tool calls).

Every response is what a real one is like: it carries ``usage.completion_tokens`` as a server counting every
generated id reports it (the reference's length; for the dropped reasoning, the turn the model generated), and
a thinking-off turn carries no reasoning (the official conversations keep a ``reasoning_content`` the
thinking-off template never renders, which no thinking-off answer has). Each record says ``"server": "none"``:
these turns are what the model wrote, never parsed by a server, so no server loss is flagged on them (on data
from a server, name it or let the response reveal it: docs/servers.md).

The output is deterministic; tests/test_report.py checks the bundled file is what this script writes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OFFICIAL_TURNS = ROOT / "tests" / "data" / "golden" / "official-k2.5-dev" / "turns.jsonl"
OUTPUT = ROOT / "kimi_recon" / "data" / "sample" / "k2.5-dev-sample.jsonl"
COUNT = 34
TRUNCATED, WRONG_IM_END, REASONING_DROPPED = 32, 33, 34
IM_END, CHAS, THINK_END, SECTION_BEGIN = 163586, 163533, 163607, 163595


def completion(message: dict[str, Any], finish_reason: str, generated: int) -> dict[str, Any]:
    return {
        "object": "chat.completion",
        "model": "moonshotai/kimi-k2.5",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"completion_tokens": generated},
    }


def truncated(row: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    """The turn cut at about 60% of its content ids, at the first cut whose ids decode to whole characters."""
    sys.path.insert(0, str(ROOT))
    from kimi_recon import load_tokenizer

    tok = load_tokenizer()
    ids: list[int] = row["output_ids"]
    start = ids.index(THINK_END) + 1
    end = ids.index(SECTION_BEGIN) if SECTION_BEGIN in ids else ids.index(IM_END)
    for cut in range(start + (end - start) * 6 // 10, end):
        try:
            text = tok.decode_bytes(ids[:cut]).decode("utf-8")
        except UnicodeDecodeError:
            continue
        reasoning, _, content = text.partition("</think>")
        message = {"role": "assistant", "content": content, "reasoning_content": reasoning}
        return message, ids[:cut]
    raise SystemExit("no cut at a character boundary")


def records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    newlines = next(i for i, r in enumerate(rows) if i > REASONING_DROPPED and "\r" in (r["turn"].get("content") or ""))
    out = []
    for i, row in ((i, rows[i]) for i in [*range(COUNT), REASONING_DROPPED, newlines]):
        message = dict(row["turn"])
        if not row["thinking"]:
            message.pop("reasoning_content", None)
        reference = list(row["output_ids"])
        rid = f"turns-{i:03d}"
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        if i == TRUNCATED:
            message, reference = truncated(row)
            rid, finish = rid + "-truncated", "length"
        elif i == WRONG_IM_END:
            reference = [CHAS if t == IM_END else t for t in reference]
            rid += "-wrong-im-end"
        elif i == REASONING_DROPPED:
            message.pop("reasoning_content")
            rid += "-reasoning-dropped"
        elif i == newlines:
            message["content"] = message["content"].replace("\r\n", "\n").replace("\r", "\n")
            rid += "-newlines-normalized"
        generated = len(row["output_ids"]) if i == REASONING_DROPPED else len(reference)
        out.append({"id": rid, "thinking": row["thinking"], "server": "none", "response": completion(message, finish, generated), "reference_ids": reference})
    return out


def main(argv: list[str]) -> None:
    source = Path(argv[0]) if argv else OFFICIAL_TURNS
    target = Path(argv[1]) if len(argv) > 1 else OUTPUT
    with source.open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    lines = [json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in records(rows)]
    lines.append(lines[0][:160])  # a record cut short: unreadable
    text = "".join(line + "\n" for line in lines)
    target.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
