"""Exact ids from OpenAI-style ``logprobs.content``: each entry's bytes name one vocabulary token."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .errors import InvalidInputError
from .tokenizer import KimiTokenizer

# vLLM's ``return_tokens_as_token_ids`` writes tokens as "token_id:123".
_TOKEN_ID_FORM = re.compile(r"token_id:(\d+)")


class LogprobsError(InvalidInputError):
    """A logprobs entry cannot be mapped to exactly one token id."""


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
            raise LogprobsError(f"has no 'bytes' (token {token!r}); the token's exact bytes are unknown", field=where)
        try:
            key = bytes(raw)
        except (TypeError, ValueError):
            raise LogprobsError(f"'bytes' must be a list of byte values, got {raw!r:.60}", field=f"{where}.bytes") from None
        tid = tokenizer.id_of_bytes(key)
        if tid is None:
            raise LogprobsError(f"bytes {key!r:.60} (token {token!r}) are not one vocabulary token", field=f"{where}.bytes")
        ids.append(tid)
    return ids
