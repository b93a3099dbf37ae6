"""kimi-recon: rebuild the exact token IDs a Moonshot Kimi model generated from the text an API returned.

The public API is the names below (pinned by tests/test_exported_members.py); everything else lives in
a documented submodule (``kimi_recon.errors``, ``kimi_recon.special_tokens``, ``kimi_recon.profiles``,
``kimi_recon.fast_tokenizer``, ``kimi_recon.logprobs``, ``kimi_recon.openrouter``; see docs/api.md) or
is internal. Names are imported on first use (PEP 562), so ``import kimi_recon`` and ``kimi-recon --help``
do not pay for tiktoken, jinja2 or the process pool until something needs them.

>>> import kimi_recon
>>> turn = kimi_recon.AssistantTurn(reasoning="Think.", content="Hi.")
>>> kimi_recon.reconstruct_output_ids(turn).ids[-1]  # <|im_end|>
163586
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on demand
    from ._batch.training_rows import build_samples, sample_batch
    from .audit import check_special_tokens, check_token_ids
    from .compare import Comparison, compare_ids
    from .dataset import audit_dataset, audit_record
    from .errors import KimiReconError
    from .models import AssistantTurn, Flag, ToolCall
    from .profiles import get_profile
    from .reconstruct import Reconstruction, reconstruct_many, reconstruct_output_ids
    from .render import render_assistant_turn
    from .responses import turn_from_response
    from .special_tokens import SPECIAL_TOKENS
    from .tokenizer import KimiTokenizer, load_tokenizer
    from .training import TrainingSample, build_training_sample, render_prompt

#: public name -> the module (under kimi_recon) that defines it
_EXPORTS: dict[str, str] = {
    # the tokenizer
    "load_tokenizer": "tokenizer",
    "KimiTokenizer": "tokenizer",
    # reading a response
    "turn_from_response": "responses",
    "AssistantTurn": "models",
    "ToolCall": "models",
    "Flag": "models",
    # the ids of one turn (or many), and how two id lists differ
    "render_assistant_turn": "render",
    "reconstruct_output_ids": "reconstruct",
    "reconstruct_many": "reconstruct",
    "Reconstruction": "reconstruct",
    "compare_ids": "compare",
    "Comparison": "compare",
    # special-token ids: the tokenizer's table and a user's constants
    "check_special_tokens": "audit",
    "check_token_ids": "audit",
    "SPECIAL_TOKENS": "special_tokens",
    "get_profile": "profiles",
    # round-trip audits of records
    "audit_record": "dataset",
    "audit_dataset": "dataset",
    # training samples
    "render_prompt": "training",
    "build_training_sample": "training",
    "TrainingSample": "training",
    "build_samples": "_batch.training_rows",
    "sample_batch": "_batch.training_rows",
    # the base of every error (the others: kimi_recon.errors)
    "KimiReconError": "errors",
}

#: names the package exported before issue 12 -> (module, name there); they still work, with a warning.
_MOVED: dict[str, tuple[str, str]] = {
    "AuditReport": ("audit", "TokenCheckReport"),
    "audit_special_tokens": ("audit", "check_special_tokens"),
    "audit_ids": ("audit", "check_token_ids"),
    "assert_special_tokens_ok": ("audit", "assert_special_tokens_ok"),
    "render_turn": ("render", "render_turn_with_flags"),
    "ResponseError": ("errors", "ServerReportedError"),
    "render_chat_template": ("chat_template", "render_chat_template"),
    "is_canonical": ("compare", "is_canonical"),
    "DatasetAudit": ("dataset", "DatasetAudit"),
    "RecordResult": ("dataset", "RecordResult"),
    "reconstruct_records": ("dataset", "reconstruct_records"),
    "InvalidInputError": ("errors", "InvalidInputError"),
    "InvalidResponseError": ("errors", "InvalidResponseError"),
    "InvalidTurnError": ("errors", "InvalidTurnError"),
    "TokenizerLoadError": ("errors", "TokenizerLoadError"),
    "UnknownSpecialTokenError": ("errors", "UnknownSpecialTokenError"),
    "FastTokenizerError": ("errors", "FastTokenizerError"),
    "build_fast_tokenizer": ("fast_tokenizer", "build_fast_tokenizer"),
    "export_tokenizer": ("fast_tokenizer", "export_tokenizer"),
    "official_encode_cuts": ("fast_tokenizer", "official_encode_cuts"),
    "LogprobsError": ("logprobs", "LogprobsError"),
    "ids_from_logprobs": ("logprobs", "ids_from_logprobs"),
    "ChatProfile": ("profiles", "ChatProfile"),
    "PROFILES": ("profiles", "PROFILES"),
    "ReasoningDroppedWarning": ("render", "ReasoningDroppedWarning"),
    "RenderedTurn": ("render", "RenderedTurn"),
    "SpecialToken": ("special_tokens", "SpecialToken"),
    "SpecialTokenRegistry": ("special_tokens", "SpecialTokenRegistry"),
    "render_tools_declaration": ("tool_declaration", "render_tools_declaration"),
    "training_row": ("_batch.training_rows", "training_row"),
}

__all__ = [  # the names of _EXPORTS, spelled out for linters and IDEs (a test checks they agree)
    "AssistantTurn",
    "Comparison",
    "Flag",
    "KimiReconError",
    "KimiTokenizer",
    "Reconstruction",
    "SPECIAL_TOKENS",
    "ToolCall",
    "TrainingSample",
    "audit_dataset",
    "audit_record",
    "build_samples",
    "build_training_sample",
    "check_special_tokens",
    "check_token_ids",
    "compare_ids",
    "get_profile",
    "load_tokenizer",
    "reconstruct_many",
    "reconstruct_output_ids",
    "render_assistant_turn",
    "render_prompt",
    "sample_batch",
    "turn_from_response",
]


# Only at run time: seen by a type checker, a module __getattr__ makes every unknown name (a typo such as
# kimi_recon.reconstruct_ouput_ids) an Any that passes `mypy --strict`; the names above are what it should see.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        module = _EXPORTS.get(name)
        if module is not None:
            value = getattr(importlib.import_module(f".{module}", __name__), name)
            globals()[name] = value  # later lookups skip __getattr__
            return value
        if name in _MOVED:
            module, new_name = _MOVED[name]
            warnings.warn(
                f"kimi_recon.{name} is no longer part of the top-level API; use kimi_recon.{module}.{new_name}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(f".{module}", __name__), new_name)
        raise AttributeError(f"module 'kimi_recon' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
