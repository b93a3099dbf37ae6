"""kimi-recon: rebuild the exact token IDs a Moonshot Kimi model generated from the text an API returned.

The names below are imported on first use (PEP 562), so ``import kimi_recon`` and ``kimi-recon --help``
do not pay for tiktoken, jinja2 or the process pool until something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from ._training_rows import build_samples, sample_batch, training_row
    from .audit import AuditReport, assert_special_tokens_ok, audit_ids, audit_special_tokens
    from .chat_template import render_chat_template
    from .compare import Comparison, compare_ids, is_canonical
    from .dataset import DatasetAudit, RecordResult, audit_dataset, audit_record, reconstruct_records
    from .errors import InvalidInputError, InvalidResponseError, InvalidTurnError, KimiReconError, ResponseError, TokenizerLoadError, UnknownSpecialTokenError
    from .fast_tokenizer import FastTokenizerError, build_fast_tokenizer, export_tokenizer, official_encode_cuts
    from .logprobs import LogprobsError, ids_from_logprobs
    from .models import AssistantTurn, Flag, ToolCall
    from .profiles import ChatProfile, PROFILES, get_profile
    from .reconstruct import Reconstruction, reconstruct_output_ids
    from .render import ReasoningDroppedWarning, RenderedTurn, render_assistant_turn, render_turn
    from .responses import turn_from_response
    from .special_tokens import SPECIAL_TOKENS, SpecialToken, SpecialTokenRegistry
    from .tokenizer import KimiTokenizer, load_tokenizer
    from .tool_declaration import render_tools_declaration
    from .training import TrainingSample, build_training_sample, render_prompt

#: public name -> the module (under kimi_recon) that defines it
_EXPORTS: dict[str, str] = {
    "build_samples": "_training_rows",
    "sample_batch": "_training_rows",
    "training_row": "_training_rows",
    "AuditReport": "audit",
    "assert_special_tokens_ok": "audit",
    "audit_ids": "audit",
    "audit_special_tokens": "audit",
    "render_chat_template": "chat_template",
    "Comparison": "compare",
    "compare_ids": "compare",
    "is_canonical": "compare",
    "DatasetAudit": "dataset",
    "RecordResult": "dataset",
    "audit_dataset": "dataset",
    "audit_record": "dataset",
    "reconstruct_records": "dataset",
    "InvalidInputError": "errors",
    "InvalidResponseError": "errors",
    "InvalidTurnError": "errors",
    "KimiReconError": "errors",
    "ResponseError": "errors",
    "TokenizerLoadError": "errors",
    "UnknownSpecialTokenError": "errors",
    "FastTokenizerError": "fast_tokenizer",
    "build_fast_tokenizer": "fast_tokenizer",
    "export_tokenizer": "fast_tokenizer",
    "official_encode_cuts": "fast_tokenizer",
    "LogprobsError": "logprobs",
    "ids_from_logprobs": "logprobs",
    "AssistantTurn": "models",
    "Flag": "models",
    "ToolCall": "models",
    "ChatProfile": "profiles",
    "PROFILES": "profiles",
    "get_profile": "profiles",
    "Reconstruction": "reconstruct",
    "reconstruct_output_ids": "reconstruct",
    "ReasoningDroppedWarning": "render",
    "RenderedTurn": "render",
    "render_assistant_turn": "render",
    "render_turn": "render",
    "turn_from_response": "responses",
    "SPECIAL_TOKENS": "special_tokens",
    "SpecialToken": "special_tokens",
    "SpecialTokenRegistry": "special_tokens",
    "KimiTokenizer": "tokenizer",
    "load_tokenizer": "tokenizer",
    "render_tools_declaration": "tool_declaration",
    "TrainingSample": "training",
    "build_training_sample": "training",
    "render_prompt": "training",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kimi_recon' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
