"""Optional OpenRouter adapter: exact parsing of OpenRouter responses, and dataset generation.

Install with ``pip install 'kimi-recon[openrouter]'``. Importing this package does not import ``openai``;
only :mod:`kimi_recon.openrouter.client` and the ``generate`` run need it, and they import it when used.
The core of kimi-recon never imports this package.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what type checkers see; at run time __getattr__ imports on demand (the CLI registers fast)
    from .errors import InvalidResponseError, OpenRouterError, redact
    from .parse import (
        assemble_stream,
        count_tool_calls,
        is_model_call_id,
        iter_sse_lines,
        iter_stream_chunks,
        model_call_id,
        replace_foreign_call_ids,
        turn_from_openrouter,
        turn_from_stream,
    )

#: public name -> the module (under kimi_recon.openrouter) that defines it
_EXPORTS: dict[str, str] = {
    "InvalidResponseError": "errors",
    "OpenRouterError": "errors",
    "redact": "errors",
    "assemble_stream": "parse",
    "count_tool_calls": "parse",
    "is_model_call_id": "parse",
    "iter_sse_lines": "parse",
    "iter_stream_chunks": "parse",
    "model_call_id": "parse",
    "replace_foreign_call_ids": "parse",
    "turn_from_openrouter": "parse",
    "turn_from_stream": "parse",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None and name == "turn_from_response":  # its name before issue 12 (the core has one too)
        warnings.warn(
            "kimi_recon.openrouter.turn_from_response is now kimi_recon.openrouter.turn_from_openrouter",
            DeprecationWarning,
            stacklevel=2,
        )
        return __getattr__("turn_from_openrouter")
    if module is None:
        raise AttributeError(f"module 'kimi_recon.openrouter' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
