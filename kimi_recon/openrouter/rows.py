"""Output rows: one JSON object per prompt, ``status`` ``ok`` or ``error``. Pure functions.

Rows start with ``id`` and ``status`` and end with the raw ``response``, so the file stays greppable.
An error row keeps whatever response had arrived: a paid-for response that could not be rebuilt must
not be lost, it can be reprocessed offline once the cause is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._base.arguments import instance_argument, int_argument
from .._tool_call_ids import MODEL_NUMBERING_SEEN_TEXT
from ..flags import Flag, FlagCode, flags_to_json
from ..models import AssistantTurn
from ..usage_check import TokenCounts
from .options import RequestOptions
from .prompts import Prompt


@dataclass(frozen=True)
class Rebuilt:
    """What reconstruction produced for one turn."""

    output_ids: list[int]
    source: str
    flags: tuple[Flag, ...] = ()
    prompt_ids: list[int] | None = None
    sample: Mapping[str, Any] | None = None
    prompt_len: int | None = None  # known when the prompt was encoded for prompt_ids or the sample
    token_counts: TokenCounts | None = None


#: Rebuilds one prompt's turn; raises a KimiReconError when it cannot.
Reconstructor = Callable[[Prompt, AssistantTurn], Rebuilt]


@dataclass(frozen=True)
class CallInfo:
    """How the response was obtained."""

    retries: int = 0
    elapsed_s: float = 0.0
    stream: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


#: The codes both the adapter and the rebuild may give a turn: the adapter's (it knows the request) is kept.
_ADAPTER_REASONING_CODES = frozenset({FlagCode.REASONING_NOT_RETURNED, FlagCode.REASONING_SOURCES_DISAGREE})


def adapter_flags(turn: AssistantTurn, thinking: bool) -> list[Flag]:
    """What the adapter knows may make the rebuilt ids differ from the model's (beyond the renderer's flags)."""
    flags = []
    for entry in turn.metadata.get("replaced_tool_call_ids", ()):
        flags.append(
            Flag(
                FlagCode.REPLACED_TOOL_CALL_ID,
                f"server id {entry['id']!r} replaced by {entry['suggested_id']!r}, the model's own format at the "
                "conversation-wide index (the request's calls before the turn + position), which the model leaves rarely",
                f"tool_calls[{entry['index']}].id",
                seen=MODEL_NUMBERING_SEEN_TEXT,
            )
        )
    if thinking and turn.reasoning is None and turn.reasoning_complete:
        usage = turn.metadata.get("usage")
        details = usage.get("completion_tokens_details") if isinstance(usage, Mapping) else None
        spent = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
        extra = f" although the usage reports {spent} reasoning tokens" if spent else ""
        flags.append(
            Flag(
                FlagCode.REASONING_NOT_RETURNED,
                f"thinking is on but the response carried no reasoning{extra}; an empty think block was assumed",
                "reasoning",
            )
        )
    if turn.metadata.get("reasoning_sources_disagree"):
        flags.append(
            Flag(
                FlagCode.REASONING_SOURCES_DISAGREE,
                "'reasoning' and the reasoning_details text differ; 'reasoning' was used",
                "reasoning",
            )
        )
    return flags


def cost_of(usage: object) -> tuple[float | None, str | None]:
    """The USD cost in a response's usage, and why it is unusable when the server sent one that is not a
    finite number of 0 or more (a NaN, an infinity, a negative, a string): such a cost is unknown, never
    summed, so ``--max-cost`` cannot be blinded by it (see :func:`cost_unknown`)."""
    if not isinstance(usage, Mapping) or usage.get("cost") is None:
        return None, None
    cost = usage["cost"]
    if isinstance(cost, (int, float)) and not isinstance(cost, bool):
        try:
            value = float(cost)
        except OverflowError:  # an int past float's range
            value = math.inf
        if math.isfinite(value) and value >= 0:
            return value, None
    return None, f"usage.cost is {cost!r:.60}, not a finite number of 0 or more; the cost of this row is unknown"


def cost_unknown(row: Mapping[str, Any]) -> bool:
    """True when ``row`` may have been paid for but says no usable cost: an ``ok`` row, or one carrying a usage."""
    return row.get("cost") is None and (row.get("status") == "ok" or row.get("usage") is not None)


def _with_cost(row: dict[str, Any], usage: Mapping[str, Any] | None) -> None:
    row["cost"], problem = cost_of(usage)
    if problem is not None:
        row["cost_invalid"] = problem


def usage_of(response: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    usage = response.get("usage") if response is not None else None
    return usage if isinstance(usage, Mapping) else None


def ok_row(
    prompt: Prompt,
    options: RequestOptions,
    response: Mapping[str, Any],
    turn: AssistantTurn,
    rebuilt: Rebuilt | None,
    call: CallInfo,
) -> dict[str, Any]:
    """The row of a prompt whose turn was read (and, unless disabled, rebuilt)."""
    instance_argument(prompt, "prompt", Prompt, "a Prompt")
    instance_argument(options, "options", RequestOptions, "a RequestOptions")
    instance_argument(response, "response", Mapping, "a mapping")
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn")
    instance_argument(rebuilt, "rebuilt", Rebuilt, "a Rebuilt", none=True)
    instance_argument(call, "call", CallInfo, "a CallInfo")
    usage = usage_of(response)
    flags = adapter_flags(turn, options.thinking)
    row: dict[str, Any] = {"id": prompt.id, "status": "ok", "line": prompt.line, "model": options.model}
    row["provider"] = turn.metadata.get("provider")
    if rebuilt is not None:
        row["output_ids"] = rebuilt.output_ids
        row["output_source"] = rebuilt.source
        # (the rebuild says what the message shows about its reasoning too, which the adapter said first)
        said = {f.code for f in flags}
        flags.extend(f for f in rebuilt.flags if f.code not in said or f.code not in _ADAPTER_REASONING_CODES)
        if rebuilt.prompt_ids is not None:
            row["prompt_ids"] = rebuilt.prompt_ids
        if rebuilt.sample is not None:
            row["sample"] = dict(rebuilt.sample)
        if rebuilt.token_counts is not None:
            flags.extend(rebuilt.token_counts.flags())  # each with its delta (reported - rebuilt)
            row["token_counts"] = rebuilt.token_counts.to_dict()
    row["flags"] = flags_to_json(flags)
    row["finish_reason"] = turn.finish_reason
    row["native_finish_reason"] = turn.metadata.get("native_finish_reason")
    row["truncated"] = turn.truncated
    row["reasoning_complete"] = turn.reasoning_complete
    row["usage"] = dict(usage) if usage is not None else None
    _with_cost(row, usage)
    row["retries"] = call.retries
    row["elapsed_s"] = round(call.elapsed_s, 3)
    row["stream"] = call.stream
    row.update(call.extra)
    row["response"] = dict(response)
    return row


def error_row(
    prompt_id: str,
    model: str,
    error: Mapping[str, Any],
    *,
    line: int | None = None,
    response: Mapping[str, Any] | None = None,
    call: CallInfo | None = None,
) -> dict[str, Any]:
    """The row of a prompt that produced no usable turn. ``error`` is ``{"type", "code", "message"}``."""
    instance_argument(prompt_id, "prompt_id", str, "a str")
    instance_argument(model, "model", str, "a str")
    instance_argument(error, "error", Mapping, "a mapping")
    int_argument(line, "line", none=True)
    instance_argument(response, "response", Mapping, "a mapping", none=True)
    instance_argument(call, "call", CallInfo, "a CallInfo", none=True)
    usage = usage_of(response)
    row: dict[str, Any] = {"id": prompt_id, "status": "error", "line": line, "model": model, "error": dict(error)}
    row["usage"] = dict(usage) if usage is not None else None
    _with_cost(row, usage)
    if call is not None:
        row["retries"] = call.retries
        row["elapsed_s"] = round(call.elapsed_s, 3)
        row["stream"] = call.stream
        row.update(call.extra)
    row["response"] = dict(response) if response is not None else None
    return row

