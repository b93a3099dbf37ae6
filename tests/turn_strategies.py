"""Hypothesis strategies for assistant turns, shared by the property tests (``from turn_strategies import turns``)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from kimi_recon import AssistantTurn, ToolCall


def turns(
    text: st.SearchStrategy[str],
    *,
    call_ids: st.SearchStrategy[str | None] | None = None,
    arguments: st.SearchStrategy[str] | None = None,
    max_calls: int = 2,
    metadata: st.SearchStrategy[dict[str, Any]] | None = None,
) -> st.SearchStrategy[AssistantTurn]:
    """Turns whose reasoning, content and tool calls (names, ``call_ids``: None by default; ``arguments``: ``text``
    by default) are drawn from ``text``, with every finish reason, and ``metadata`` (none by default)."""
    calls = st.lists(st.builds(ToolCall, call_ids if call_ids is not None else st.none(), text.filter(bool), arguments if arguments is not None else text), max_size=max_calls)
    return st.builds(
        AssistantTurn,
        reasoning=st.none() | text,
        content=st.none() | text,
        tool_calls=calls.map(tuple),
        finish_reason=st.sampled_from(["stop", "length", "tool_calls"]),
        metadata=metadata if metadata is not None else st.builds(dict),
    )
