"""Exact ids from OpenAI-style ``logprobs.content``: each entry's bytes name one vocabulary token."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import LogprobsError as LogprobsError  # defined with the others; importable here as before
from .errors import preview
from .tokenizer import KimiTokenizer

# vLLM's ``return_tokens_as_token_ids`` writes tokens as "token_id:123".
_TOKEN_ID_FORM = re.compile(r"token_id:(\d+)")


def ids_from_logprobs(content: Sequence[Mapping[str, Any]], tokenizer: KimiTokenizer) -> list[int]:
    """The token ids of a ``logprobs.content`` list, exact even where the model's split was non-canonical.

    Each entry's ``bytes`` (a list of byte values) is looked up in the vocabulary (and the special
    tokens' text). An entry without ``bytes`` is accepted only when its ``token`` is ``token_id:N`` or a
    special-token text: a token string alone is lossy for tokens that split a UTF-8 character.
    """
    if isinstance(content, (str, bytes)) or not isinstance(content, Sequence):
        raise LogprobsError(f"must be a list of entries, got {type(content).__name__}", field="logprobs.content")
    ids = []
    for i, entry in enumerate(content):
        where = f"logprobs.content[{i}]"
        if not isinstance(entry, Mapping):
            raise LogprobsError(f"must be an object, got {type(entry).__name__}", field=where)
        token = entry.get("token")
        raw = entry.get("bytes")
        if raw is None:
            if isinstance(token, str):
                m = _TOKEN_ID_FORM.fullmatch(token)
                if m and int(m.group(1)) < tokenizer.vocab_size:
                    ids.append(int(m.group(1)))
                    continue
                if token in tokenizer.special_tokens:
                    ids.append(tokenizer.special_tokens[token])
                    continue
            raise LogprobsError(f"has no 'bytes' (token {preview(token)}); the token's exact bytes are unknown", field=where)
        key = _token_bytes(raw, f"{where}.bytes")
        tid = tokenizer.id_of_bytes(key)
        if tid is None:
            raise LogprobsError(f"bytes {preview(key)} (token {preview(token)}) are not one vocabulary token", field=f"{where}.bytes")
        ids.append(tid)
    return ids


def _token_bytes(raw: object, field: str) -> bytes:
    """The bytes of a ``bytes`` entry: a list of ints 0..255 (or a bytes object).

    ``bytes(raw)`` alone would read an int ``n`` (or a bool) as ``n`` zero bytes, and those can name a
    real token (``bytes(1)`` is the NUL token), so anything but a list of byte values is refused.
    """
    if isinstance(raw, (bytes, bytearray)):
        return bytes(raw)
    if isinstance(raw, (str, Mapping)) or not isinstance(raw, Sequence):
        raise LogprobsError(f"'bytes' must be a list of byte values, got {type(raw).__name__} {preview(raw, 60)}", field=field)
    for i, b in enumerate(raw):
        if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= 255:
            raise LogprobsError(f"'bytes' must be a list of byte values 0..255; item {i} is {preview(b)}", field=field)
    return bytes(raw)
