"""The id a K2.x model writes for its own tool calls (``functions.NAME:IDX``): read by the parser (a
server-issued id is told from the model's own) and written by the K2.x renderer, so it lives below both."""

from __future__ import annotations

import re
from typing import Final

from .errors import InvalidInputTypeError

#: The id format the model writes for its own tool calls.
MODEL_TOOL_CALL_ID = re.compile(r"functions\.(?P<name>.+):(?P<index>\d+)")

#: How often the K2.x model numbers a call otherwise than its template does (the tool calls earlier in the
#: conversation plus the call's position in the turn): ``(turns, tool-call turns, what those are)`` in Moonshot's
#: official dev turns (tests/data/golden/official-k2.5-dev, turns and adversarial turns; recounted by
#: tests/test_call_id_flags.py). A rebuilt id written at that index is off only when the model left its numbering.
MODEL_NUMBERING_SEEN: Final[tuple[int, int, str]] = (0, 122, "official K2.x tool-call turns")
#: :data:`MODEL_NUMBERING_SEEN` as a flag's ``seen`` says it.
MODEL_NUMBERING_SEEN_TEXT: Final[str] = (
    f"{MODEL_NUMBERING_SEEN[0]} of {MODEL_NUMBERING_SEEN[1]} {MODEL_NUMBERING_SEEN[2]} number a call otherwise "
    "than the calls before the turn plus its position"
)


def model_tool_call_id(name: str, index: int) -> str:
    """The id the model writes for its ``index``-th tool call of the conversation."""
    if not isinstance(name, str) or isinstance(index, bool) or not isinstance(index, int):
        raise InvalidInputTypeError(f"needs a string name and an int index, got {type(name).__name__} and {type(index).__name__}", field="tool_calls[].id")
    return f"functions.{name}:{index}"
