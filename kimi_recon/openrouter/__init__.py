"""Optional OpenRouter adapter: exact parsing of OpenRouter responses, and dataset generation.

Install with ``pip install 'kimi-recon[openrouter]'``. Importing this package does not import ``openai``;
only :mod:`kimi_recon.openrouter.client` and the ``generate`` run need it, and they import it when used.
The core of kimi-recon never imports this package.
"""

from __future__ import annotations

from .errors import InvalidResponseError, OpenRouterError, redact
from .parse import (
    assemble_stream,
    count_tool_calls,
    is_model_call_id,
    iter_sse_lines,
    iter_stream_chunks,
    model_call_id,
    replace_foreign_call_ids,
    turn_from_response,
    turn_from_stream,
)

__all__ = [
    "InvalidResponseError",
    "OpenRouterError",
    "assemble_stream",
    "count_tool_calls",
    "is_model_call_id",
    "iter_sse_lines",
    "iter_stream_chunks",
    "model_call_id",
    "redact",
    "replace_foreign_call_ids",
    "turn_from_response",
    "turn_from_stream",
]
