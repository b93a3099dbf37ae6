"""Flags: what reconstruction noticed that may make the ids differ from what the model emitted.

One code enum (:class:`FlagCode`, every code the package emits), one type (:class:`Flag`) and one
serialisation. Every code has one :class:`Severity` (:data:`SEVERITIES`): ``info`` (nothing may differ),
``unlikely`` (the ids may differ, nothing in the response can tell, and the model rarely writes the text that
would make them differ: the flag's ``seen`` says how often it did in Moonshot's official turns), ``risk`` (the
evidence points at a difference, or the text at stake is common) or ``loss`` (they differ, or almost surely do). A flag is
written as a JSON object ``{"code", "severity", "message", "field"}`` (plus ``"delta"`` on the usage-check
mismatch flags), and a list of flags as a list of those objects: generate rows, ``reconstruct``
rows, ``audit --json`` records and :meth:`~kimi_recon.training.TrainingSample.to_dict` all use
:func:`flags_to_json`.

The one exception is a column whose type Arrow must fix from the first rows it reads: training rows
(``build-samples``, ``export``, ``sample_batch``) and the ``audit_row``/``audit_batch`` columns. There a
list is untyped while it is empty, so a file whose first block has no flags fails to load later
(``datasets.load_dataset("json")`` raises on the first flagged row after it: tests/test_flags.py shows it),
and a flag's ``field`` is null in some rows. Those columns hold :func:`flag_codes_text`: the codes of the
same flags joined by commas (``""`` for none), a plain string in every row, and beside them
:func:`max_severity` (``""``, ``"info"``, ``"risk"`` or ``"loss"``), the column to filter training rows on.

:func:`flags_from_json` reads every shape a file may hold (objects, bare code strings, comma-joined text,
this version's or an older one), mapping renamed codes to their new names (:data:`RENAMED_CODES`).

>>> flag = Flag(FlagCode.TRUNCATED, "cut off", "finish_reason")
>>> flag.code == "truncated", flag.to_dict()
(True, {'code': 'truncated', 'severity': 'risk', 'message': 'cut off', 'field': 'finish_reason'})
>>> flag_codes_text([flag, Flag("lone_surrogate", "m", "content")])
'truncated,lone_surrogate'
>>> [f.code.value for f in flags_from_json("reasoning_missing,truncated")]
['reasoning_not_returned', 'truncated']
>>> flag.severity, max_severity([flag]), flags_at_least([flag], Severity.LOSS)
(<Severity.RISK: 'risk'>, 'risk', ())
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._base.arguments import choice_argument, instance_argument
from .errors import InvalidInputError, InvalidInputTypeError, preview

__all__ = [
    "RENAMED_CODES",
    "SEVERITIES",
    "Flag",
    "FlagCode",
    "Severity",
    "flag_codes_text",
    "flags_at_least",
    "flags_from_json",
    "flags_to_json",
    "max_severity",
]


class Severity(str, enum.Enum):
    """How much a flag says about the ids, in increasing order (``Severity.INFO < Severity.LOSS``).

    ``INFO``: nothing may differ (how the ids were obtained). ``UNLIKELY``: the ids may differ, nothing in
    the response can rule it in or out, and the model rarely writes the text at stake (the flag's ``seen``
    gives how often it did in the official turns); keep such rows unless the data must be verified.
    ``RISK``: the ids may differ from what the model emitted, and the evidence points that way or the text at
    stake is common. ``LOSS``: they differ, or almost surely do; drop such rows before training.
    """

    INFO = "info"
    UNLIKELY = "unlikely"
    RISK = "risk"
    LOSS = "loss"

    @property
    def rank(self) -> int:
        return _RANK[self]

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank < other.rank

    def __le__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank <= other.rank

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank > other.rank

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Severity):
            return NotImplemented
        return self.rank >= other.rank

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


_RANK: Final[Mapping[Severity, int]] = {Severity.INFO: 0, Severity.UNLIKELY: 1, Severity.RISK: 2, Severity.LOSS: 3}


class FlagCode(str, enum.Enum):
    """Every flag code kimi-recon writes (docs/api.md lists them with their meaning; a test keeps the two equal).

    A ``str`` enum: a member equals its value (``FlagCode.TRUNCATED == "truncated"``) and serialises as it,
    so filtering on the exact names keeps working.
    """

    # rendering a turn (kimi_recon.render, kimi_recon._render.k3)
    REASONING_DROPPED = "reasoning_dropped"
    REASONING_INCOMPLETE = "reasoning_incomplete"
    SPECIAL_TEXT_IN_FIELD = "special_text_in_field"
    GENERATED_TOOL_CALL_ID = "generated_tool_call_id"
    FOREIGN_TOOL_CALL_ID = "foreign_tool_call_id"
    ARGUMENTS_NOT_JSON = "arguments_not_json"
    ARGUMENTS_NOT_OBJECT = "arguments_not_object"
    ARGUMENT_NUMBER_RESPELLED = "argument_number_respelled"
    ARGUMENT_SPACING = "argument_spacing"
    TRUNCATED = "truncated"
    TRUNCATED_TOOL_CALLS = "truncated_tool_calls"
    # encoding (kimi_recon.segments, kimi_recon.reconstruct)
    LONE_SURROGATE = "lone_surrogate"
    LOGPROBS_USED = "logprobs_used"
    LOGPROBS_FALLBACK = "logprobs_fallback"
    # the profile against the data (kimi_recon._profile_check)
    PROFILE_MISMATCH = "profile_mismatch"  # severity: loss
    PROFILE_ASSUMED = "profile_assumed"
    # reading a record's options (kimi_recon.record_options)
    TOOLS_NULL_FIELDS_REMOVED = "tools_null_fields_removed"
    TOOLS_WRAPPED = "tools_wrapped"  # severity: info (a chat-completions server accepts only wrapped tools)
    # the usage check (kimi_recon.usage_check)
    COMPLETION_TOKENS_MISMATCH = "completion_tokens_mismatch"
    PROMPT_TOKENS_MISMATCH = "prompt_tokens_mismatch"
    REASONING_TOKENS_MISMATCH = "reasoning_tokens_mismatch"
    PROMPT_TOKENS_UNCHECKED = "prompt_tokens_unchecked"
    USAGE_FIGURE_UNREADABLE = "usage_figure_unreadable"
    # the OpenRouter adapter (kimi_recon.openrouter)
    REPLACED_TOOL_CALL_ID = "replaced_tool_call_id"
    TOOL_CALL_INDEX_ASSUMED = "tool_call_index_assumed"
    REASONING_NOT_RETURNED = "reasoning_not_returned"
    REASONING_SOURCES_DISAGREE = "reasoning_sources_disagree"
    # the thinking mode and the reasoning's keys (kimi_recon.reconstruct, kimi_recon.responses)
    THINKING_ASSUMED = "thinking_assumed"
    REASONING_KEY_UNREAD = "reasoning_key_unread"
    SAMPLE_OUTPUT_MISMATCH = "sample_output_mismatch"
    API_KEY_IN_TEXT = "api_key_in_text"
    # what a server's parsers can lose (kimi_recon.servers, kimi_recon.reconstruct)
    SERVER_MAY_HAVE_LOST = "server_may_have_lost"
    SERVER_RARE_LOSS = "server_rare_loss"
    SERVER_REBUILT_TOOL_CALL_ID = "server_rebuilt_tool_call_id"
    TOOL_CALL_INDEX_DISAGREES = "tool_call_index_disagrees"
    SERVER_TOKEN_IDS_USED = "server_token_ids_used"
    SERVER_TOKEN_IDS_UNUSABLE = "server_token_ids_unusable"
    SERVER_TOKEN_IDS_DISAGREE = "server_token_ids_disagree"
    SERVER_TOKEN_IDS_WITH_PROMPT = "server_token_ids_with_prompt"
    THINK_END_OMITTED = "think_end_omitted"
    STOP_NOT_REBUILT = "stop_not_rebuilt"
    # a trainer's length limit (kimi_recon._batch.training_rows, build-samples --max-length)
    OVER_MAX_LENGTH = "over_max_length"

    def __str__(self) -> str:  # the value, not "FlagCode.TRUNCATED", in messages on every Python version
        return self.value

    def __format__(self, spec: str) -> str:  # and in f-strings (3.12 formats a mixed-in enum as its name)
        return format(self.value, spec)


#: Codes older versions wrote -> their name now. ``reasoning_missing`` (thinking on, the response carried no
#: reasoning) collided with the compare kind ``reasoning_missing`` (one id list has reasoning, the other none).
RENAMED_CODES: Final[Mapping[str, FlagCode]] = {"reasoning_missing": FlagCode.REASONING_NOT_RETURNED}


_I, _U, _R, _L = Severity.INFO, Severity.UNLIKELY, Severity.RISK, Severity.LOSS
#: The one severity of every code (a test checks every member has one and docs/api.md shows it).
SEVERITIES: Final[Mapping[FlagCode, Severity]] = {
    FlagCode.REASONING_DROPPED: _L,  # the model wrote reasoning the ids leave out
    FlagCode.REASONING_INCOMPLETE: _L,  # only a summary or an encrypted blob came back
    FlagCode.SPECIAL_TEXT_IN_FIELD: _U,  # special ids or plain text: the model writes a marker's text as plain pieces rarely
    FlagCode.GENERATED_TOOL_CALL_ID: _R,  # the index of the written id is assumed
    FlagCode.FOREIGN_TOOL_CALL_ID: _L,  # the model never writes a server's id
    FlagCode.ARGUMENTS_NOT_JSON: _R,
    FlagCode.ARGUMENTS_NOT_OBJECT: _R,
    FlagCode.ARGUMENT_NUMBER_RESPELLED: _R,
    FlagCode.ARGUMENT_SPACING: _R,
    FlagCode.TRUNCATED: _R,  # the last ids may split differently where the cut fell
    FlagCode.TRUNCATED_TOOL_CALLS: _L,  # where the cut fell inside the section is unknown; the tail is made up
    FlagCode.LONE_SURROGATE: _L,
    FlagCode.LOGPROBS_USED: _I,
    FlagCode.LOGPROBS_FALLBACK: _R,
    FlagCode.PROFILE_MISMATCH: _L,  # rebuilt in another chat format than the data's
    FlagCode.PROFILE_ASSUMED: _R,  # no profile named and the model id names none: the default format was assumed
    FlagCode.TOOLS_WRAPPED: _I,  # a chat-completions server accepts only wrapped tools: the prompt is the one it rendered
    FlagCode.TOOLS_NULL_FIELDS_REMOVED: _I,  # the original is restored exactly
    FlagCode.COMPLETION_TOKENS_MISMATCH: _L,
    FlagCode.PROMPT_TOKENS_MISMATCH: _L,
    FlagCode.REASONING_TOKENS_MISMATCH: _L,
    FlagCode.PROMPT_TOKENS_UNCHECKED: _R,
    FlagCode.USAGE_FIGURE_UNREADABLE: _R,
    # a server-issued id written in the model's format at the index its template gives (the calls before the turn,
    # counted, plus its position): the model numbers otherwise rarely (the flag's seen)
    FlagCode.REPLACED_TOOL_CALL_ID: _U,
    FlagCode.TOOL_CALL_INDEX_ASSUMED: _R,  # the same, but nothing said how many calls came before the turn
    FlagCode.REASONING_NOT_RETURNED: _L,  # thinking on: the model wrote reasoning nobody returned
    FlagCode.REASONING_SOURCES_DISAGREE: _R,
    # thinking on by default, no reasoning in the message, nothing saying the mode: an extra </think> (thinking was
    # off) or reasoning nobody returned (it was on); both are other ids, unless the model wrote no reasoning at all
    FlagCode.THINKING_ASSUMED: _L,
    FlagCode.REASONING_KEY_UNREAD: _L,  # reasoning under a key no reader knows: the ids leave it out
    FlagCode.SAMPLE_OUTPUT_MISMATCH: _L,
    FlagCode.API_KEY_IN_TEXT: _L,  # the text was redacted
    FlagCode.SERVER_MAY_HAVE_LOST: _R,  # the server's parser can lose text on a turn of this shape
    FlagCode.SERVER_RARE_LOSS: _U,  # the same, where no count can tell and the model rarely writes the text at stake
    # the server writes its own functions.NAME:N ids (SGLang): this one is the model's numbering, which it rarely leaves
    FlagCode.SERVER_REBUILT_TOOL_CALL_ID: _U,
    FlagCode.TOOL_CALL_INDEX_DISAGREES: _R,  # a server that rebuilds ids numbered a call otherwise than the conversation
    FlagCode.SERVER_TOKEN_IDS_USED: _I,  # the ids the server generated, checked against the message
    FlagCode.SERVER_TOKEN_IDS_UNUSABLE: _R,
    # the server's ids and its message are two different turns: which one is this record's is unknown
    FlagCode.SERVER_TOKEN_IDS_DISAGREE: _L,
    FlagCode.SERVER_TOKEN_IDS_WITH_PROMPT: _R,  # the prompt's ids in front, no prompt known: the message's rendering kept
    FlagCode.STOP_NOT_REBUILT: _L,  # the server named an end (a stop string, [EOT]) the rebuild does not write
    FlagCode.THINK_END_OMITTED: _R,  # decided by usage.completion_tokens under the server's convention
    FlagCode.OVER_MAX_LENGTH: _I,  # the ids are the model's; a trainer with that limit cuts them without a word
}


def severity_of(code: FlagCode | str) -> Severity:
    """The severity of a code (a code string is read as :class:`Flag` reads it)."""
    return SEVERITIES[_code(code, "code")]


def _code(value: object, field: str) -> FlagCode:
    if isinstance(value, FlagCode):
        return value
    if isinstance(value, str):
        renamed = RENAMED_CODES.get(value)
        if renamed is not None:
            return renamed
        try:
            return FlagCode(value)
        except ValueError:
            pass
    raise InvalidInputError(f"unknown flag code {preview(value)}; expected one of {[c.value for c in FlagCode]}", field=field)


@dataclass(frozen=True)
class Flag:
    """Something reconstruction noticed that a user should see: why the IDs may not be what the model emitted.

    ``code`` is a :class:`FlagCode` (a code string is converted; an unknown one raises
    :class:`~kimi_recon.errors.InvalidInputError`); ``field`` names the turn field concerned, when there is
    one; ``delta`` is the usage-check mismatch's ``reported - rebuilt``; ``seen`` says, on an ``unlikely``
    flag, how often the model wrote the text at stake in Moonshot's official turns (``"0 of 73 official K2.x
    tool-call turns"``).
    """

    code: FlagCode
    message: str
    field: str | None = None
    delta: int | None = None
    seen: str | None = None

    def __post_init__(self) -> None:
        if type(self.code) is not FlagCode:  # (a member, what the package itself passes, is kept as it is)
            object.__setattr__(self, "code", _code(self.code, "code"))

    @property
    def severity(self) -> Severity:
        """The code's severity (:data:`SEVERITIES`)."""
        return SEVERITIES[self.code]

    def to_dict(self) -> dict[str, Any]:
        """The flag as JSON: ``{"code", "severity", "message", "field"}``, and ``"delta"`` and ``"seen"`` when
        there are."""
        out: dict[str, Any] = {"code": self.code.value, "severity": self.severity.value, "message": self.message, "field": self.field}
        if self.delta is not None:
            out["delta"] = self.delta
        if self.seen is not None:
            out["seen"] = self.seen
        return out

    @classmethod
    def from_json(cls, value: object, field: str = "flags") -> Flag:
        """A flag as any version wrote it: a :meth:`to_dict` object, or a bare code string (message ``""``).

        A written ``severity`` is not read back: it is the code's in this version's table (:data:`SEVERITIES`),
        so a file written before a code's severity was revised filters as this version says."""
        instance_argument(field, "field", str, "a field name")
        if isinstance(value, str):
            return cls(_code(value, field), "")
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"a flag must be an object or a code string, got {type(value).__name__}", field=field)
        message, where, delta, seen = value.get("message"), value.get("field"), value.get("delta"), value.get("seen")
        code = _code(value.get("code"), f"{field}[].code")
        return cls(
            code,
            message if isinstance(message, str) else "",
            where if isinstance(where, str) else None,
            delta if isinstance(delta, int) and not isinstance(delta, bool) else None,
            seen if isinstance(seen, str) else None,
        )


def _checked_flags(flags: object) -> list[Flag]:
    if isinstance(flags, (str, bytes, Mapping)) or not isinstance(flags, Iterable):
        raise InvalidInputTypeError(f"must be a list of Flag objects, got {type(flags).__name__}", field="flags")
    values = list(flags)
    for i, flag in enumerate(values):
        if not isinstance(flag, Flag):
            raise InvalidInputTypeError(f"item {i} must be a Flag, got {type(flag).__name__}", field="flags")
    return values


def flags_to_json(flags: Iterable[Flag]) -> list[dict[str, Any]]:
    """The one serialised form of a list of flags: a list of :meth:`Flag.to_dict` objects."""
    flags = _checked_flags(flags)
    return [f.to_dict() for f in flags]


def flag_codes_text(flags: Iterable[Flag]) -> str:
    """The flat form for Arrow-typed columns (training rows, audit columns): the codes joined by commas."""
    flags = _checked_flags(flags)
    return ",".join(f.code.value for f in flags)


def flags_from_json(value: object, field: str = "flags") -> tuple[Flag, ...]:
    """The flags of a ``flags`` value in any shape a file holds: a list of objects or of code strings, or
    comma-joined codes (``""`` or None: none). Renamed codes come back under their new name."""
    instance_argument(field, "field", str, "a field name")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(Flag(_code(code, field), "") for code in value.split(",") if code)
    if not isinstance(value, list):
        raise InvalidInputError(f"must be a list of flags or comma-separated codes, got {type(value).__name__}", field=field)
    return tuple(Flag.from_json(item, field) for item in value)


def severity_argument(value: object, field: str = "severity") -> Severity:
    """``value`` as a :class:`Severity` (a member or its name), else an :class:`InvalidInputError` naming ``field``."""
    if isinstance(value, Severity):
        return value
    return Severity(choice_argument(value, field, [s.value for s in Severity]))


def max_severity(flags: Iterable[Flag]) -> str:
    """The highest severity among ``flags`` as text (``""`` for none): a plain string column for Arrow."""
    top = max((f.severity for f in _checked_flags(flags)), default=None)
    return "" if top is None else top.value


def flags_at_least(flags: Iterable[Flag], severity: Severity | str) -> tuple[Flag, ...]:
    """The flags of ``severity`` or above: ``flags_at_least(r.flags, Severity.LOSS)`` is why a row should go."""
    floor = severity_argument(severity)
    return tuple(f for f in _checked_flags(flags) if f.severity >= floor)
