"""The text a server's detokenizer gives its parsers for a finished or cut generation.

Both servers decode the generated ids without the stop token that ended the turn (vLLM skips its text,
SGLang trims the matched stop id) and, with ``skip_special_tokens``, without the ids the tokenizer config
flags ``special: true`` (the Kimi markers ``<think>``, the tool-call section tokens and K3's
``<|open|>``/``<|close|>``/``<|sep|>`` are flagged ``special: false`` and stay). Assumption, stated in
tests/data/servers/README.md: no spaces are inserted between added tokens (``spaces_between_special_tokens``
off, as Kimi deployments run and vLLM's K3 parser forces).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STOP_ID = 163586


def server_text(tok: Any, output_ids: Sequence[int], finished: bool, *, skip_special_tokens: bool) -> str:
    ids = list(output_ids)
    if finished and ids and ids[-1] == STOP_ID:
        ids = ids[:-1]
    return str(tok.decode(ids, skip_special_tokens=skip_special_tokens))
