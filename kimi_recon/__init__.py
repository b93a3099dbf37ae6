"""kimi-recon: rebuild the exact token IDs a Moonshot Kimi model generated from the text an API returned."""

from .errors import InvalidInputError, InvalidTurnError, KimiReconError, TokenizerLoadError, UnknownSpecialTokenError
from .models import AssistantTurn, ToolCall
from .special_tokens import SPECIAL_TOKENS, SpecialToken, SpecialTokenRegistry
from .tokenizer import KimiTokenizer, load_tokenizer

__all__ = [
    "SPECIAL_TOKENS",
    "AssistantTurn",
    "InvalidInputError",
    "InvalidTurnError",
    "KimiReconError",
    "KimiTokenizer",
    "SpecialToken",
    "SpecialTokenRegistry",
    "TokenizerLoadError",
    "ToolCall",
    "UnknownSpecialTokenError",
    "load_tokenizer",
]
