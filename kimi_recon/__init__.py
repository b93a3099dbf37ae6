"""kimi-recon: rebuild the exact token IDs a Moonshot Kimi model generated from the text an API returned."""

from ._training_rows import build_samples, sample_batch, training_row
from ._training_rows import build_samples, sample_batch, training_row
from .audit import AuditReport, assert_special_tokens_ok, audit_ids, audit_special_tokens
from .chat_template import render_chat_template
from .compare import Comparison, compare_ids, is_canonical
from .dataset import DatasetAudit, RecordResult, audit_dataset, audit_record, reconstruct_records
from .errors import (
    FastTokenizerError,
    InvalidInputError,
    InvalidResponseError,
    InvalidTurnError,
    KimiReconError,
    ResponseError,
    TokenizerLoadError,
    UnknownSpecialTokenError,
)
from .fast_tokenizer import build_fast_tokenizer, export_tokenizer, official_encode_cuts
from .logprobs import LogprobsError, ids_from_logprobs
from .models import AssistantTurn, Flag, ToolCall
from .profiles import PROFILES, ChatProfile, get_profile
from .reconstruct import Reconstruction, reconstruct_output_ids
from .render import ReasoningDroppedWarning, RenderedTurn, render_assistant_turn, render_turn
from .responses import turn_from_response
from .special_tokens import SPECIAL_TOKENS, SpecialToken, SpecialTokenRegistry
from .tokenizer import KimiTokenizer, load_tokenizer
from .tool_declaration import render_tools_declaration
from .training import TrainingSample, build_training_sample, render_prompt

__all__ = [
    "PROFILES",
    "SPECIAL_TOKENS",
    "AssistantTurn",
    "AuditReport",
    "ChatProfile",
    "Comparison",
    "DatasetAudit",
    "FastTokenizerError",
    "Flag",
    "InvalidInputError",
    "InvalidResponseError",
    "InvalidTurnError",
    "KimiReconError",
    "KimiTokenizer",
    "LogprobsError",
    "ReasoningDroppedWarning",
    "Reconstruction",
    "ResponseError",
    "RecordResult",
    "RenderedTurn",
    "SpecialToken",
    "SpecialTokenRegistry",
    "TokenizerLoadError",
    "ToolCall",
    "TrainingSample",
    "UnknownSpecialTokenError",
    "assert_special_tokens_ok",
    "audit_dataset",
    "audit_ids",
    "audit_record",
    "audit_special_tokens",
    "build_samples",
    "build_samples",
    "build_training_sample",
    "build_fast_tokenizer",
    "compare_ids",
    "export_tokenizer",
    "get_profile",
    "ids_from_logprobs",
    "is_canonical",
    "load_tokenizer",
    "official_encode_cuts",
    "reconstruct_output_ids",
    "reconstruct_records",
    "render_assistant_turn",
    "render_chat_template",
    "render_prompt",
    "render_tools_declaration",
    "render_turn",
    "sample_batch",
    "training_row",
    "sample_batch",
    "training_row",
    "turn_from_response",
]
