"""Methods of public classes raise only named errors (``KimiReconError`` subclasses) on bad input, as their
functions do (issue 35: each call below ended in a bare TypeError, KeyError, ValueError, OverflowError or
MemoryError). ``InvalidInputTypeError`` is a ``TypeError`` too, so ``except TypeError`` keeps working."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import kimi_recon
from kimi_recon import SPECIAL_TOKENS, KimiTokenizer, load_tokenizer
from kimi_recon.dataset import audit_dataset
from kimi_recon.errors import KimiReconError
from kimi_recon.openrouter.prompts import read_prompts
from kimi_recon.openrouter.rebuild import make_prompt_counter
from kimi_recon.servers import get_server
from kimi_recon.usage_stats import TokenCountTally

TOK: KimiTokenizer = load_tokenizer()
REPORT = audit_dataset([], progress=False)
RESULT = kimi_recon.audit_record({"response": {"content": "hi"}, "reference_ids": [1]})

# (wrong types on purpose: each call must end in a named error)
CALLS: dict[str, Callable[[], object]] = {
    "encode_many(5)": lambda: TOK.encode_many(5),  # type: ignore[arg-type]
    "encode_many({})": lambda: TOK.encode_many({"a": 1}),  # type: ignore[arg-type]
    "id_of_bytes([1])": lambda: TOK.id_of_bytes([1]),  # type: ignore[arg-type]
    "is_special([1])": lambda: TOK.is_special([1]),  # type: ignore[arg-type]
    "encode_ordinary_piece(3.5)": lambda: TOK.encode_ordinary_piece(3.5),  # type: ignore[arg-type]
    "decode(range(10**12))": lambda: TOK.decode(range(10**12)),
    "SPECIAL_TOKENS[1.5]": lambda: SPECIAL_TOKENS[1.5],  # type: ignore[call-overload]
    "SPECIAL_TOKENS.id(5)": lambda: SPECIAL_TOKENS.id(5),  # type: ignore[arg-type]
    "SPECIAL_TOKENS.text('x')": lambda: SPECIAL_TOKENS.text("x"),  # type: ignore[arg-type]
    "SPECIAL_TOKENS.suggest(range)": lambda: SPECIAL_TOKENS.suggest(range(10**12)),  # type: ignore[arg-type]
    "DatasetAudit.rate(5)": lambda: REPORT.rate(5),  # type: ignore[arg-type]
    "DatasetAudit.summary('x')": lambda: REPORT.summary(examples="x"),  # type: ignore[arg-type]
    "RecordResult.to_row(5)": lambda: RESULT.to_row(5),  # type: ignore[arg-type]
    "TokenCountTally.add(5, 5)": lambda: TokenCountTally().add(5, 5),  # type: ignore[arg-type]
    "ServerProfile.loses([1])": lambda: get_server("vllm").loses([1]),  # type: ignore[arg-type]
    "audit_dataset('a\\x00b')": lambda: audit_dataset("a\x00b", progress=False),
    "read_prompts('\\ud83d')": lambda: read_prompts("\ud83d"),
    "make_prompt_counter(cache_size=2**64)": lambda: make_prompt_counter(cache_size=2**64),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_bad_input_to_a_method_is_a_named_error(name: str) -> None:
    with pytest.raises(KimiReconError):
        CALLS[name]()


def test_lookups_take_numpy_integers_and_bytes_like_values_and_membership_never_raises() -> None:
    assert SPECIAL_TOKENS.get(np.int64(163586)) is not None  # type: ignore[arg-type]  # a numpy id, as a column gives it
    assert SPECIAL_TOKENS[np.int64(163586)] == "<|im_end|>"  # type: ignore[call-overload]
    assert TOK.is_special(np.int64(163586)) and TOK.encode_bytes(bytearray(b"hi")) == TOK.encode_bytes(b"hi")  # type: ignore[arg-type]
    assert [1] not in SPECIAL_TOKENS and "<|im_end|>" in SPECIAL_TOKENS
