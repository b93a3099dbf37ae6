"""The id a K2.x model writes for its own tool calls (``functions.NAME:IDX``): read by the parser (a
server-issued id is told from the model's own) and written by the K2.x renderer, so it lives below both."""

from __future__ import annotations

import re

from .errors import InvalidInputTypeError

#: The id format the model writes for its own tool calls.
MODEL_TOOL_CALL_ID = re.compile(r"functions\.(?P<name>.+):(?P<index>\d+)")


def model_tool_call_id(name: str, index: int) -> str:
    """The id the model writes for its ``index``-th tool call of the conversation."""
    if not isinstance(name, str) or isinstance(index, bool) or not isinstance(index, int):
        raise InvalidInputTypeError(f"needs a string name and an int index, got {type(name).__name__} and {type(index).__name__}", field="tool_calls[].id")
    return f"functions.{name}:{index}"
