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

    An entry with an integer ``id`` (llama.cpp's) is read by its id, checked against its bytes: llama.cpp gives the
    stop token's entry empty bytes (the id is taken when it names a special token), and merges a token that ends
    inside a UTF-8 character into the next entry, whose bytes then spell more than its id: such a list is
    refused (its ids are incomplete), never read by the bytes.
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
        given = entry.get("id")
        if isinstance(given, int) and not isinstance(given, bool):
            ids.append(_checked_entry_id(given, raw, token, tokenizer, where))
            continue
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


def _checked_entry_id(tid: int, raw: object, token: object, tokenizer: KimiTokenizer, where: str) -> int:
    """An entry's own ``id``, when its bytes agree with it (empty bytes: only for a special token)."""
    if not 0 <= tid < tokenizer.vocab_size:
        raise LogprobsError(f"'id' {tid} is outside the vocabulary (0..{tokenizer.vocab_size - 1})", field=f"{where}.id")
    key = b"" if raw is None else _token_bytes(raw, f"{where}.bytes")
    if not key and tokenizer.is_special(tid):
        return tid
    if key != tokenizer.decode_bytes([tid]):
        raise LogprobsError(
            f"'id' {tid} does not spell the entry's bytes {preview(key)} (token {preview(token)}): a token that ends "
            "inside a UTF-8 character was merged into this entry (llama.cpp), so the entries' ids are incomplete",
            field=f"{where}.id",
        )
    return tid


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
