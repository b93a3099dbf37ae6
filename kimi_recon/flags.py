"""Flags: what reconstruction noticed that may make the ids differ from what the model emitted.

One code enum (:class:`FlagCode`, every code the package emits), one type (:class:`Flag`) and one
serialisation. A flag is written as a JSON object ``{"code", "message", "field"}`` (plus ``"delta"`` on the
usage-check mismatch flags), and a list of flags as a list of those objects: generate rows, ``reconstruct``
rows, ``audit --json`` records and :meth:`~kimi_recon.training.TrainingSample.to_dict` all use
:func:`flags_to_json`.

The one exception is a column whose type Arrow must fix from the first rows it reads: training rows
(``build-samples``, ``export``, ``sample_batch``) and the ``audit_row``/``audit_batch`` columns. There a
list is untyped while it is empty, so a file whose first block has no flags fails to load later
(``datasets.load_dataset("json")`` raises on the first flagged row after it: tests/test_flags.py shows it),
and a flag's ``field`` is null in some rows. Those columns hold :func:`flag_codes_text`: the codes of the
same flags joined by commas (``""`` for none), a plain string in every row.

:func:`flags_from_json` reads every shape a file may hold (objects, bare code strings, comma-joined text,
this version's or an older one), mapping renamed codes to their new names (:data:`RENAMED_CODES`).

>>> flag = Flag(FlagCode.TRUNCATED, "cut off", "finish_reason")
>>> flag.code == "truncated", flag.to_dict()
(True, {'code': 'truncated', 'message': 'cut off', 'field': 'finish_reason'})
>>> flag_codes_text([flag, Flag("lone_surrogate", "m", "content")])
'truncated,lone_surrogate'
>>> [f.code.value for f in flags_from_json("reasoning_missing,truncated")]
['reasoning_not_returned', 'truncated']
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .errors import InvalidInputError, InvalidInputTypeError, preview

__all__ = ["RENAMED_CODES", "Flag", "FlagCode", "flag_codes_text", "flags_from_json", "flags_to_json"]


class FlagCode(str, enum.Enum):
    """Every flag code kimi-recon writes (docs/api.md lists them with their meaning; a test keeps the two equal).

    A ``str`` enum: a member equals its value (``FlagCode.TRUNCATED == "truncated"``) and serialises as it,
    so filtering on the exact names keeps working.
    """

    # rendering a turn (kimi_recon.render, kimi_recon._k3)
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
    # reading a record's options (kimi_recon.record_options)
    TOOLS_NULL_FIELDS_REMOVED = "tools_null_fields_removed"
    TOOLS_WRAPPED = "tools_wrapped"  # severity: info (a chat-completions server accepts only wrapped tools)
    # the usage check (kimi_recon.usage_check)
    COMPLETION_TOKENS_MISMATCH = "completion_tokens_mismatch"
    PROMPT_TOKENS_MISMATCH = "prompt_tokens_mismatch"
    REASONING_TOKENS_MISMATCH = "reasoning_tokens_mismatch"
    PROMPT_TOKENS_UNCHECKED = "prompt_tokens_unchecked"
    USAGE_FIGURE_UNREADABLE = "usage_figure_unreadable"  # severity: risk
    # the OpenRouter adapter (kimi_recon.openrouter)
    REPLACED_TOOL_CALL_ID = "replaced_tool_call_id"
    REASONING_NOT_RETURNED = "reasoning_not_returned"
    REASONING_SOURCES_DISAGREE = "reasoning_sources_disagree"
    SAMPLE_OUTPUT_MISMATCH = "sample_output_mismatch"
    API_KEY_IN_TEXT = "api_key_in_text"

    def __str__(self) -> str:  # the value, not "FlagCode.TRUNCATED", in messages on every Python version
        return self.value

    def __format__(self, spec: str) -> str:  # and in f-strings (3.12 formats a mixed-in enum as its name)
        return format(self.value, spec)


#: Codes older versions wrote -> their name now. ``reasoning_missing`` (thinking on, the response carried no
#: reasoning) collided with the compare kind ``reasoning_missing`` (one id list has reasoning, the other none).
RENAMED_CODES: Final[Mapping[str, FlagCode]] = {"reasoning_missing": FlagCode.REASONING_NOT_RETURNED}


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
    one; ``delta`` is the usage-check mismatch's ``reported - rebuilt``.
    """

    code: FlagCode
    message: str
    field: str | None = None
    delta: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", _code(self.code, "code"))

    def to_dict(self) -> dict[str, Any]:
        """The flag as JSON: ``{"code", "message", "field"}``, and ``"delta"`` when there is one."""
        out: dict[str, Any] = {"code": self.code.value, "message": self.message, "field": self.field}
        if self.delta is not None:
            out["delta"] = self.delta
        return out

    @classmethod
    def from_json(cls, value: object, field: str = "flags") -> Flag:
        """A flag as any version wrote it: a :meth:`to_dict` object, or a bare code string (message ``""``)."""
        if isinstance(value, str):
            return cls(_code(value, field), "")
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"a flag must be an object or a code string, got {type(value).__name__}", field=field)
        message, where, delta = value.get("message"), value.get("field"), value.get("delta")
        return cls(
            _code(value.get("code"), f"{field}[].code"),
            message if isinstance(message, str) else "",
            where if isinstance(where, str) else None,
            delta if isinstance(delta, int) and not isinstance(delta, bool) else None,
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
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(Flag(_code(code, field), "") for code in value.split(",") if code)
    if not isinstance(value, list):
        raise InvalidInputError(f"must be a list of flags or comma-separated codes, got {type(value).__name__}", field=field)
    return tuple(Flag.from_json(item, field) for item in value)
