"""One record of a dataset: its format (keys, options, the JSONL reader), its result types, and what is done
to one record (reconstruct, audit, the ``datasets``/Ray row functions). See :mod:`kimi_recon.dataset`.
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import functools
import json
import numbers
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, TypeVar, Union

from .. import responses
from .._base.arguments import instance_argument
from .._base.files import check_input, read_lines
from .._profile_check import ids_mismatch
from ..compare import Comparison, check_ids, compare_checked_ids
from ..errors import InvalidInputError, InvalidInputTypeError, InvalidRecordError, preview
from ..flags import Flag, FlagCode, flag_codes_text, flags_to_json, max_severity
from ..models import AssistantTurn
from ..profiles import get_profile
from ..reconstruct import Reconstruction, _encode_pending, _finished, _PendingTurn, _rendered_for_ids, _with_assumed_profile
from ..record_options import OPTION_KEYS, _record_thinking, arrow_tools, call_index_offset_of, calls_before_the_turn, parse_options
from ..servers import ServerProfile, get_server, server_of
from ..tokenizer import BUNDLED, KimiTokenizer, load_tokenizer, tokenizer_for_profile
from ..usage_check import PROMPT, TokenCounts, check_with_profile, reported_counts
from .arrow import arrow_value, check_batch, plain

#: Keys a record may hold its response under, in the order they are looked for.
RESPONSE_KEYS: tuple[str, ...] = ("response", "turn", "message")
#: Keys a record may hold its reference ids under, in the order they are looked for.
REFERENCE_KEYS: tuple[str, ...] = ("reference_ids", "output_ids", "reference")
#: The kind of a record that could not be compared.
ERROR = "error"

TokenizerArg = Union[KimiTokenizer, str, "os.PathLike[str]", None]
RecordsArg = Union[Iterable[Any], str, "os.PathLike[str]"]


@dataclass(frozen=True)
class RecordError:
    """Why one record could not be compared: where it is, which field, and what was wrong."""

    index: int
    line: int | None
    record_id: str | None
    field: str | None
    message: str
    error_type: str

    def where(self) -> str:
        place = f"line {self.line}" if self.line is not None else f"record {self.index}"
        return place + (f" (id {self.record_id!r})" if self.record_id is not None else "")

    def __str__(self) -> str:
        field_part = f"field {self.field!r}: " if self.field else ""
        return f"{self.where()}: {field_part}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def record_error(index: int, line: int | None, rid: str | None, err: Exception) -> RecordError:
    """A record's failure as data: an :class:`InvalidInputError`'s field and message, else the exception's type
    and text; an unreadable JSONL line's own number (an :class:`InvalidRecordError`'s) wins over ``line``."""
    if isinstance(err, InvalidRecordError) and err.line is not None:
        line = err.line
    if isinstance(err, InvalidInputError):
        return RecordError(index, line, rid, err.field, err.message, type(err).__name__)
    return RecordError(index, line, rid, None, f"{type(err).__name__}: {err}", type(err).__name__)


@dataclass(frozen=True)
class RecordResult:
    """The audit of one record: its comparison, or the error that prevented one.

    ``index`` is the record's 0-based position in the input, ``line`` its 1-based line in a JSONL file.
    ``source`` and ``flags`` come from the reconstruction (see :class:`~kimi_recon.reconstruct.Reconstruction`),
    plus the usage check's mismatch flags; ``token_counts`` is the usage check (None when the record has
    no ``usage``), ``provider`` who served the response (when the record says).
    """

    index: int
    line: int | None
    record_id: str | None
    comparison: Comparison | None = None
    source: str | None = None
    flags: tuple[Flag, ...] = ()
    error: RecordError | None = None
    token_counts: TokenCounts | None = None
    provider: str | None = None
    #: the profile the ids were rebuilt with (None when the record could not be read)
    profile: str | None = None
    server: str | None = None

    @property
    def kind(self) -> str:
        """The comparison's kind, or ``"error"``."""
        return self.comparison.kind if self.comparison is not None else ERROR

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def flag_codes(self) -> tuple[FlagCode, ...]:
        return tuple(f.code for f in self.flags)

    def where(self) -> str:
        place = f"line {self.line}" if self.line is not None else f"record {self.index}"
        return place + (f" (id {self.record_id!r})" if self.record_id is not None else "")

    def __str__(self) -> str:
        if self.error is not None:
            return f"{ERROR}: {self.error}"
        assert self.comparison is not None
        # one entry a code, counted: two losses of one server are two flags of the same code (their fields differ)
        counts = collections.Counter(f"{f.code.value} ({f.severity.value})" for f in self.flags)
        flags = f" [flags: {', '.join(code + (f' x{n}' if n > 1 else '') for code, n in counts.items())}]" if counts else ""
        return f"{self.where()}, source {self.source}{flags}: {self.comparison.explain()}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (nested)."""
        return {
            "index": self.index,
            "line": self.line,
            "id": self.record_id,
            "kind": self.kind,
            "source": self.source,
            "flags": flags_to_json(self.flags),
            "comparison": self.comparison.to_dict() if self.comparison is not None else None,
            "error": self.error.to_dict() if self.error is not None else None,
            "provider": self.provider,
            "server": self.server,
            "token_counts": self.token_counts.to_dict() if self.token_counts is not None else None,
            "profile": self.profile,
        }

    def to_row(self, prefix: str = "audit_") -> dict[str, Any]:
        """Flat columns with the same types for every record (for ``datasets`` / Arrow / pandas).

        ``kind``, ``exact``, ``benign``, ``first_diff`` (-1 when none), ``region``, ``detail``,
        ``source``, ``flags`` (the codes comma-separated: :func:`~kimi_recon.flags.flag_codes_text`, since Arrow
        cannot type a list that is empty in the first rows), ``max_severity`` (their highest severity, ``""`` for
        none), ``error_field`` and ``error`` ("" when none).
        """
        instance_argument(prefix, "prefix", str, "a column-name prefix (a str)")
        c, e = self.comparison, self.error
        row: dict[str, Any] = {
            "kind": self.kind,
            "exact": bool(c is not None and c.exact),
            "benign": bool(c is not None and c.benign),
            "first_diff": -1 if c is None or c.first_diff is None else c.first_diff,
            "region": (c.region or "") if c is not None else "",
            "detail": c.detail if c is not None else "",
            "source": self.source or "",
            "flags": flag_codes_text(self.flags),
            "max_severity": max_severity(self.flags),
            "error_field": (e.field or "") if e is not None else "",
            "error": e.message if e is not None else "",
        }
        return {prefix + k: v for k, v in row.items()}


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict[str, Any] | InvalidRecordError]]:
    """``(line number, record)`` for each non-blank line of a JSONL file, 1-based, read lazily.

    A line that is not UTF-8, not JSON, or not a JSON object gives an :class:`InvalidRecordError`
    in place of the record, so the caller can report it and go on.
    """
    instance_argument(path, "path", (str, os.PathLike), "a JSONL path")
    for line_no, raw in _iter_lines(path):
        yield line_no, _parse_line(raw, line_no)


def _iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    check_input(path, "records")  # a missing file is an InputFileNotFoundError (a KimiReconError and a FileNotFoundError)
    for line_no, raw in enumerate(read_lines(path, "records"), 1):  # "-" is stdin
        if raw.strip():
            yield line_no, raw


def _parse_line(raw: str | bytes, line: int | None) -> dict[str, Any] | InvalidRecordError:
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        value = json.loads(text)
    except UnicodeDecodeError as err:
        return InvalidRecordError(f"is not UTF-8 text ({err.reason} at byte {err.start})", line=line)
    except json.JSONDecodeError as err:
        return InvalidRecordError(
            f"is not JSON ({err.msg}, column {err.colno}); the line starts {preview(err.doc.strip(), 60)}", line=line
        )
    except ValueError as err:
        return InvalidRecordError(f"is not JSON: {err}", line=line)
    except RecursionError:
        return InvalidRecordError("is nested too deeply to read", line=line)
    if not isinstance(value, dict):
        return InvalidRecordError(
            f"must be a JSON object, found {type(value).__name__} {preview(value, 60)}", line=line
        )
    return value


def _pick(record: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    for key in keys:
        if key in record and record[key] is not None:
            return key, record[key]
    return None


def record_id(record: object) -> str | None:
    """The record's ``id`` as a string, or None."""
    if isinstance(record, Mapping):
        value = record.get("id")
        return None if value is None else str(value)
    return None


def turn_of_record(rec: Mapping[str, Any]) -> AssistantTurn:
    """The assistant turn of a record's response: a chat completion, a choice, or an assistant message.

    :func:`kimi_recon.responses.turn_from_response` read leniently (as datasets store responses), with
    the record's ``finish_reason`` (default ``"stop"``) and ``logprobs`` used where the response has none.
    Errors name the field inside the record, e.g. ``response.choices[0].message.tool_calls[0].function.name``.
    """
    field, response = response_of(rec)
    return _turn_of_response(rec, field, response)


def _turn_of_response(rec: Mapping[str, Any], field: str, response: Any) -> AssistantTurn:
    """:func:`turn_of_record` of the record's response (:func:`response_of`), once it is found."""
    offset = call_index_offset_of(rec)
    turn = responses.turn_from_response(
        response,
        call_index_offset=offset,
        field=field,
        finish_reason=rec.get("finish_reason", "stop"),
        logprobs=rec.get("logprobs"),
        lenient=True,
    )
    model = rec.get("model")
    if "model" not in turn.metadata and isinstance(model, str):  # a generate row names the model beside the response
        turn = dataclasses.replace(turn, metadata={**turn.metadata, "model": model})
    return turn


@functools.lru_cache(maxsize=8)
def _tokenizer_from_source(source: str | None) -> KimiTokenizer:
    return load_tokenizer(None if source in (None, BUNDLED) else source)


def get_tokenizer(tokenizer: TokenizerArg = None) -> KimiTokenizer:
    """A tokenizer object as is; a source (None for the bundled one, a directory, a Hub id) loaded once per process."""
    if isinstance(tokenizer, KimiTokenizer):
        return tokenizer
    if tokenizer is not None and not isinstance(tokenizer, (str, os.PathLike)):
        raise InvalidInputTypeError(
            f"must be a KimiTokenizer, a tokenizer directory or Hub id, or None, got {type(tokenizer).__name__}", field="tokenizer"
        )
    return _tokenizer_from_source(None if tokenizer is None else os.fspath(tokenizer))


#: The options a record may set for reconstruction (it has no prompt: tools and template options are not read).
_RECONSTRUCT_OPTIONS = ("profile", "thinking", "call_index_offset")


def _options(record: Mapping[str, Any], profile: str | None, thinking: bool, model: object = None) -> tuple[str, bool, int]:
    """The record's profile (no profile anywhere: the ``model`` id's), thinking and call_index_offset, read by
    :func:`kimi_recon.record_options.parse_options`."""
    if model is None:
        model = record.get("model")
    own = (record.get("profile"), _record_thinking(record), record.get("call_index_offset"))
    if _plain_options(own, profile, thinking, model):  # the usual record: a few combinations over a whole dataset
        return _plain_options_read(*own, profile, thinking, model)
    options = parse_options(record, profile=profile, thinking=thinking, read=_RECONSTRUCT_OPTIONS, model=model)
    return options.profile.name, options.thinking, options.call_index_offset or 0


def _plain_options(own: tuple[object, object, object], profile: object, thinking: object, model: object) -> bool:
    """Whether a record's options and the call's are values a cache can key on (strings, bools, ints or None)."""
    record_profile, _record_thinking, offset = own
    return (
        type(thinking) is bool
        and (profile is None or type(profile) is str)
        and (model is None or type(model) is str)
        and (record_profile is None or type(record_profile) is str)
        and (_record_thinking is None or type(_record_thinking) is bool)
        and (offset is None or type(offset) is int)
    )


@functools.lru_cache(maxsize=256)
def _plain_options_read(
    record_profile: str | None, _record_thinking: bool | None, offset: int | None, profile: str | None, thinking: bool, model: str | None
) -> tuple[str, bool, int]:
    """:func:`_options` of a record whose options are plain values: the same ``parse_options`` reading, once per
    combination (an error is raised every time: ``lru_cache`` keeps no exception)."""
    record = {k: v for k, v in zip(_RECONSTRUCT_OPTIONS, (record_profile, _record_thinking, offset), strict=True) if v is not None}
    options = parse_options(record, profile=profile, thinking=thinking, read=_RECONSTRUCT_OPTIONS, model=model)
    return options.profile.name, options.thinking, options.call_index_offset or 0


def _as_record(record: object, line: int | None) -> Mapping[str, Any]:
    if isinstance(record, InvalidInputError):
        raise record
    if isinstance(record, (str, bytes)):
        parsed = _parse_line(record, line)
        if isinstance(parsed, InvalidInputError):
            raise parsed
        return parsed
    if not isinstance(record, Mapping):
        raise InvalidInputError(f"must be an object (a mapping), got {type(record).__name__}", field="record")
    return record


def reconstruct_record(
    record: Mapping[str, Any] | str | bytes,
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    use_logprobs: bool = True,
    server: str | None = None,
) -> Reconstruction:
    """The output ids of one record's response (a JSON line is parsed first).

    The response is looked for under :data:`RESPONSE_KEYS`; a record with none of them is taken to be
    the response itself (a chat completion, a choice or an assistant message). The record's own
    ``profile``, ``thinking`` and ``call_index_offset`` win over the arguments; with no profile at all, the
    response's (or the record's) ``model`` id decides, ``kimi-k2.5`` when it names none. Raises
    :class:`InvalidInputError` naming the field and the record's ``id``. A ``usage`` (the record's, else its
    response's) is checked against the ids as :func:`reconstruct_records` checks it: a figure they contradict is
    flagged (``completion_tokens_mismatch`` …).
    """
    rec = _as_record(record, None)
    try:
        tok = get_tokenizer(tokenizer)
        turn, recon = _reconstruct(rec, tok, profile, thinking, use_logprobs, server)
        # the usage check every door gives the same record (reconstruct_records, audit_record, build_samples)
        return dataclasses.replace(recon, flags=_with_usage_check(rec, turn, recon, tok)[2])
    except InvalidInputError as err:
        raise err.with_sample(record_id(rec)) from None


def response_of(rec: Mapping[str, Any]) -> tuple[str, Any]:
    """(key, response) of a record; a record with no response key but message-like keys is the response."""
    instance_argument(rec, "record", Mapping, "a record object (a mapping)")
    found = _pick(rec, RESPONSE_KEYS)
    if found is not None:
        return found
    if "choices" in rec or any(k in rec for k in responses.MESSAGE_FIELDS):
        return "response", rec
    raise missing_field(rec, RESPONSE_KEYS)


#: Every key a record is read for (anything else in a record may be a misspelling of one of them).
_KNOWN_KEYS = frozenset(
    {*RESPONSE_KEYS, *REFERENCE_KEYS, *OPTION_KEYS, "id", "model", "messages", "finish_reason", "logprobs", "usage",
     "provider", "prompt_ids", "choices", "role", *responses.MESSAGE_FIELDS}
)


def missing_field(rec: Mapping[str, Any], keys: Sequence[str]) -> InvalidInputError:
    """The error for a record with none of ``keys``, saying which of its own keys looks like a misspelt one."""
    need = keys[0] if len(keys) == 1 else f"one of {', '.join(keys)}"
    own = [k for k in rec if isinstance(k, str)]
    unknown = [k for k in own if k not in _KNOWN_KEYS]  # a key read as something else is no misspelling
    guesses = [(k, difflib.get_close_matches(k.lower(), keys, n=1, cutoff=0.6)) for k in unknown]
    # a prefix counts as well ("resp" for "response", "ref" for "reference_ids")
    guesses += [(k, [w]) for k in unknown for w in keys if len(k) >= 3 and w.startswith(k.lower())]
    hint = next((f"; did you mean {found[0]!r} (the record has {key!r})?" for key, found in guesses if found), "")
    hint = hint or _habit_hint(rec, keys)
    present = f" (it has: {', '.join(sorted(own)[:8])}{' …' if len(own) > 8 else ''})" if own and not hint else ""
    return InvalidInputError(f"is missing: a record needs {need}{hint}{present}", field=keys[0])


def _habit_hint(rec: Mapping[str, Any], keys: Sequence[str]) -> str:
    """What to do with the shapes other tools' data has: a fine-tuning record whose ``messages`` end with the
    answer, SpecForge's or ShareGPT's ``conversations``. They are not read as a prompt and a response: which
    message is the answer to rebuild is the user's to say, never a guess that would change the prompt."""
    messages = rec.get("messages")
    if keys == RESPONSE_KEYS and isinstance(messages, list) and messages and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "assistant":
        return (
            "; its messages end with an assistant message (a fine-tuning record?): if that is the answer to rebuild, "
            'put it under "response" and keep the messages before it in "messages"'
        )
    if "conversations" in rec:
        return (
            "; the record has 'conversations' (SpecForge's and ShareGPT's name): give the prompt as \"messages\" "
            '({"role", "content"} objects; ShareGPT\'s from/value renamed) and the answer as "response"'
        )
    return ""


def record_server(rec: Mapping[str, Any], server: str | None = None) -> ServerProfile:
    """The server of a record: its ``server`` field, else ``server``, else what its response reveals, else unknown."""
    found = _pick(rec, RESPONSE_KEYS)
    return server_of(rec, found[1] if found is not None else rec, server)


def _reconstruct(
    rec: Mapping[str, Any], tok: KimiTokenizer, profile: str | None, thinking: bool | None, use_logprobs: bool, server: str | None = None
) -> tuple[AssistantTurn, Reconstruction]:
    """The record's turn and its reconstruction, without the usage check (which may render the prompt)."""
    pending = _pending_of(rec, tok, profile, thinking, server)
    return pending.turn, _finished(pending, None, use_logprobs=use_logprobs, usage=_usage_of(rec))


def _pending_of(rec: Mapping[str, Any], tok: KimiTokenizer, profile: str | None, thinking: bool | None, server: str | None) -> _PendingTurn:
    """The record's turn, read and rendered with the record's options, waiting for its ids."""
    field, response = response_of(rec)
    turn = _turn_of_response(rec, field, response)
    if "server_token_ids" in turn.metadata and "server_prompt_token_ids" not in turn.metadata:
        turn = _with_record_prompt(rec, turn)
    model = turn.metadata.get("model")
    prof, think, offset = _options(rec, profile, True if thinking is None else thinking, model)
    # the mode is stated when the call or the record (or its request) says it; else it is on by default, and a
    # message without reasoning says so (thinking_assumed)
    stated = thinking is not None or _record_thinking(rec) is not None
    said: int | None = offset
    if turn.tool_calls and rec.get("call_index_offset") is None:
        # the model numbers its calls across the conversation: count those of the record's messages, as the
        # training rows do (a replaced server call id is rebuilt at that index); no messages: not said
        said = calls_before_the_turn(rec.get("messages"))
    # (record_server's reading, with the response found once)
    pending = _rendered_for_ids(turn, tok, prof, think if stated else None, call_index_offset=said, stop=None, server=server_of(rec, response, server))
    if profile is None and rec.get("profile") is None:  # the format came from the model id, or was assumed
        pending = pending._replace(rendered=_with_assumed_profile(pending.rendered, model if model is not None else rec.get("model")))
    return pending


def _with_record_prompt(rec: Mapping[str, Any], turn: AssistantTurn) -> AssistantTurn:
    """The turn with the record's own prompt ids (``prompt_ids``, ``prompt_token_ids``) beside the server's output
    ids, so that a list with the prompt in front is cut (the response carried no prompt ids of its own)."""
    for key in ("prompt_ids", "prompt_token_ids"):
        if rec.get(key) is not None:
            meta = {**turn.metadata, "server_prompt_token_ids": rec[key], "server_prompt_token_ids_field": key}
            return dataclasses.replace(turn, metadata=meta)
    return turn


def _checked_usage(rec: Mapping[str, Any], turn: AssistantTurn) -> Mapping[str, Any] | None:
    """The ``usage`` the usage check weighs: the record's own, else its response's; None when neither is an object."""
    usage = rec.get("usage")
    if usage is None or not isinstance(usage, Mapping):  # (None first: most records, and no ABC check for it)
        usage = turn.metadata.get("usage")
    return None if usage is None or not isinstance(usage, Mapping) else usage


def _usage_of(rec: Mapping[str, Any]) -> Mapping[str, Any] | None:
    usage = rec.get("usage")
    return usage if isinstance(usage, Mapping) else None


#: What the usage check adds to a reconstruction: (reconstruction, usage check, every flag, provider).
Checked = tuple[Reconstruction, TokenCounts | None, tuple[Flag, ...], str | None]


def _with_usage_check(rec: Mapping[str, Any], turn: AssistantTurn, recon: Reconstruction, tok: KimiTokenizer) -> Checked:
    """The reconstruction, the usage check, every flag (the check's included) and the provider."""
    provider = rec.get("provider", turn.metadata.get("provider"))
    provider = provider if isinstance(provider, str) else None
    if _checked_usage(rec, turn) is None:  # most records: no figures to check
        return recon, None, recon.flags, provider
    counts, unchecked = record_token_counts(
        rec, turn, recon.ids, tok, recon.profile, recon.thinking, server=recon.server, reasoning_into_tools=recon.has_flag(FlagCode.THINK_END_OMITTED),
        think_end_unsure=recon.has_flag(FlagCode.THINKING_ASSUMED),
    )
    return recon, counts, recon.flags + unchecked + (counts.flags() if counts is not None else ()), provider


_S = TypeVar("_S")


def checked_together(
    items: Sequence[tuple[int, int | None, object]],
    tok: KimiTokenizer,
    profile: str | None,
    thinking: bool | None,
    use_logprobs: bool,
    server: str | None,
    before: Callable[[Mapping[str, Any]], _S],
) -> list[tuple[str | None, _S | None, Checked | Exception]]:
    """Each ``(index, line, record)`` rebuilt and its usage checked (:func:`_with_usage_check`), in order, as
    ``(record id, before(record), checked)``, the last an exception for a record that failed (``before`` runs first: an audit's checks of its
    reference ids). Every turn is rendered first, then the turns are encoded together
    (:func:`~kimi_recon.reconstruct._encode_pending`: one call into tiktoken, so threads hand the GIL over once
    a chunk, not a few times a record), then each is finished: the same results as one at a time."""
    started: list[tuple[str | None, tuple[Mapping[str, Any], _S, _PendingTurn] | Exception]] = []
    for _index, line, record in items:
        rid: str | None = None
        try:
            rec = _as_record(record, line)
            rid = record_id(rec)
            state = before(rec)
            started.append((rid, (rec, state, _pending_of(rec, tok, profile, thinking, server))))
        except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
            started.append((rid, err))
    pending = [entry[2] for _, entry in started if not isinstance(entry, Exception)]
    encoded = iter(_encode_pending(pending))  # (None for a turn that then is encoded alone: an error is its record's)
    out: list[tuple[str | None, _S | None, Checked | Exception]] = []
    for rid, entry in started:
        if isinstance(entry, Exception):
            out.append((rid, None, entry))
            continue
        held, kept, turn = entry
        ids = next(encoded)
        try:
            recon = _finished(turn, ids, use_logprobs=use_logprobs, usage=_usage_of(held))
            out.append((rid, kept, _with_usage_check(held, turn.turn, recon, tok)))
        except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
            out.append((rid, kept, err))
    return out


def record_token_counts(
    rec: Mapping[str, Any],
    turn: AssistantTurn,
    output_ids: Sequence[int],
    tokenizer: KimiTokenizer,
    profile: str,
    thinking: bool,
    prompt_len: int | None = None,
    server: str | ServerProfile | None = None,
    reasoning_into_tools: bool = False,
    think_end_unsure: bool = False,
) -> tuple[TokenCounts | None, tuple[Flag, ...]]:
    """The usage check of one record (None when it carries no ``usage``) and the flags of figures that
    could not be checked.

    ``usage`` is the record's own or its response's. The prompt length is ``prompt_len`` when given,
    else the record's ``messages`` (and ``tools``) rendered and encoded, else its ``prompt_ids``' length.
    A prompt that cannot be rendered leaves ``prompt_tokens`` unchecked (code ``prompt_tokens_unchecked``)
    rather than failing the record. ``server`` pins the counting convention its ``completion_tokens``
    follows (:attr:`~kimi_recon.servers.ServerProfile.completion_conventions`; None or unknown: any known one).
    """
    instance_argument(rec, "record", Mapping, "a record object (a mapping)")
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn")
    usage = _checked_usage(rec, turn)
    if usage is None:
        return None, ()
    unchecked: tuple[Flag, ...] = ()
    if prompt_len is None and reported_counts(usage)[0] is not None:
        messages, prompt_ids = rec.get("messages"), rec.get("prompt_ids")
        if isinstance(messages, list):
            from .prompt import _encode_prompt  # lazy: it loads jinja2, which only a prompt count needs

            try:
                opts = parse_options(rec, profile=profile, thinking=thinking)
                prompt_len = len(_encode_prompt(messages, opts, tokenizer_for_profile(tokenizer, opts.profile))[0])
            except (InvalidInputError, TypeError, ValueError) as err:
                why = f"the prompt could not be rendered to check usage.{PROMPT}: {type(err).__name__}: {err}"
                unchecked = (Flag(FlagCode.PROMPT_TOKENS_UNCHECKED, why, f"usage.{PROMPT}"),)
        elif isinstance(prompt_ids, Sequence) and not isinstance(prompt_ids, (str, bytes)):
            prompt_len = len(prompt_ids)
    pinned = get_server(server).completion_conventions if server is not None else frozenset()
    counts = check_with_profile(
        usage,
        output_ids,
        prompt_len,
        profile,
        truncated_in=turn.metadata.get("truncated_in"),
        completion_conventions=pinned or None,
        reasoning_into_tools=reasoning_into_tools,
        think_end_unsure=think_end_unsure,
    )
    return counts, unchecked


def audit_record(
    record: Mapping[str, Any] | str | bytes,
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    use_logprobs: bool = True,
    index: int = 0,
    line: int | None = None,
    server: str | None = None,
) -> RecordResult:
    """Reconstruct one record's output ids and compare them with its reference ids. Never raises on bad data.

    ``tokenizer`` is a :class:`KimiTokenizer` or a source (None = bundled, a directory, a Hub id) that
    is loaded once per process. A malformed record (not JSON, no response, bad turn, reference ids
    missing or out of the vocabulary) gives a result whose ``error`` names the field; any other
    exception is reported the same way with its type, so one bad record never stops a batch. ``server``
    names the server that produced the response (see :func:`~kimi_recon.reconstruct.reconstruct_output_ids`);
    the record's ``server`` field wins.
    """
    try:
        tok = get_tokenizer(tokenizer)
    except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
        return _failed(index, line, record_id(record), err)
    return audit_records([(index, line, record)], tok, profile, thinking, use_logprobs, server)[0]


def _reference_of(tok: KimiTokenizer, rec: Mapping[str, Any]) -> tuple[list[int], str]:
    """A record's checked reference ids and the key they are under (its response must be there too)."""
    response_of(rec)
    found = _pick(rec, REFERENCE_KEYS)
    if found is None:
        raise missing_field(rec, REFERENCE_KEYS)
    return check_ids(found[1], tok, found[0]), found[0]


def audit_records(
    items: Sequence[tuple[int, int | None, object]], tok: KimiTokenizer, profile: str | None, thinking: bool | None, use_logprobs: bool, server: str | None
) -> list[RecordResult]:
    """:func:`audit_record` of each ``(index, line, record)``, in order, the turns encoded together
    (:func:`checked_together`)."""
    out = []
    checked = checked_together(items, tok, profile, thinking, use_logprobs, server, functools.partial(_reference_of, tok))
    for (index, line, _), (rid, reference, result) in zip(items, checked, strict=True):
        if isinstance(result, Exception):
            out.append(_failed(index, line, rid, result))
            continue
        try:
            recon, counts, flags, provider = result
            ref_ids, ref_key = reference  # type: ignore[misc]  # (set for every record that got this far)
            wrong_format = ids_mismatch(get_profile(recon.profile), ref_ids, ref_key)
            if wrong_format is not None:
                flags = (wrong_format, *flags)
            # the profile's names (K3 spells 163586 `<|end_of_msg|>`); reconstructed ids come from the tokenizer
            comparison = compare_checked_ids(ref_ids, recon.ids, tokenizer_for_profile(tok, recon.profile))
        except Exception as err:  # noqa: BLE001 - a record's failure is data, not a crash
            out.append(_failed(index, line, rid, err))
            continue
        out.append(RecordResult(
            index, line, rid, comparison, recon.source, flags, token_counts=counts, provider=provider, profile=recon.profile, server=recon.server
        ))
    return out


def _failed(index: int, line: int | None, rid: str | None, err: Exception) -> RecordResult:
    error = record_error(index, line, rid, err)
    return RecordResult(index, error.line, rid, error=error)


def audit_row(
    record: Mapping[str, Any],
    tokenizer: TokenizerArg = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    use_logprobs: bool = True,
    prefix: str = "audit_",
    server: str | None = None,
) -> dict[str, Any]:
    """:func:`audit_record` as flat columns (:meth:`RecordResult.to_row`): ``dataset.map(audit_row, num_proc=N)``.

    The record is a row of an Arrow table, so its objects are read as such (:mod:`kimi_recon._records.arrow`): a
    response Arrow may have changed is an error row, messages that cannot be read back leave the usage
    check's ``prompt_tokens`` unchecked (flag ``prompt_tokens_unchecked``)."""
    instance_argument(prefix, "prefix", str, "a string")
    if isinstance(record, Mapping):
        try:
            record = _arrow_record(record)
        except InvalidInputError as err:
            rid = record_id(record)
            return RecordResult(0, None, rid, error=record_error(0, None, rid, err)).to_row(prefix)
    return audit_record(record, tokenizer, profile=profile, thinking=thinking, use_logprobs=use_logprobs, server=server).to_row(prefix)


def _arrow_record(record: Mapping[str, Any]) -> dict[str, Any]:
    """A row of an Arrow table with its object columns read as :mod:`kimi_recon._records.arrow` says (text stays text)."""
    out: dict[str, Any] = {}
    for key, cell in record.items():
        value = plain(cell)
        out[key] = value if isinstance(value, (str, bytes)) else arrow_tools(value) if key == "tools" else arrow_value(key, value)
    return out


def batch_indices(
    tokenizer: TokenizerArg | Sequence[int], indices: Sequence[int] | None, n: int
) -> tuple[TokenizerArg, list[int] | None]:
    """The tokenizer and the dataset indices of a batch's ``n`` rows. ``datasets.map(..., with_indices=True)``
    passes the indices as the second argument, where the tokenizer goes: a list of ints there is taken for them."""
    if hasattr(tokenizer, "tolist") or (isinstance(tokenizer, Sequence) and not isinstance(tokenizer, str)):
        if indices is not None:
            raise InvalidInputError("are given twice: as the second argument and as indices=", field="indices")
        indices, tokenizer = tokenizer.tolist() if hasattr(tokenizer, "tolist") else tokenizer, None  # type: ignore[union-attr]
    if indices is None:
        return tokenizer, None
    if isinstance(indices, (str, bytes, Mapping, AbstractSet)) or not isinstance(indices, Iterable):
        raise InvalidInputTypeError(f"must be a list of the rows' dataset indices, got {type(indices).__name__}", field="indices")
    plain = list(indices)
    if not all(isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in plain):
        raise InvalidInputTypeError("must be integer dataset indices", field="indices")
    plain = [int(i) for i in plain]
    if len(plain) != n:
        raise InvalidInputError(f"has {len(plain)} entries for a batch of {n} rows", field="indices")
    return tokenizer, plain


def audit_batch(
    batch: Mapping[str, Sequence[Any]],
    tokenizer: TokenizerArg | Sequence[int] = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    use_logprobs: bool = True,
    prefix: str = "audit_",
    server: str | None = None,
) -> dict[str, list[Any]]:
    """Column-wise :func:`audit_row` over a batch (``dataset.map(audit_batch, batched=True)``, Ray ``map_batches``).

    Returns only the audit columns; ``datasets`` adds them to the batch, with Ray merge them yourself. A row's
    columns stay beside its record, so they name no place; ``with_indices=True`` is accepted (see
    :func:`~kimi_recon.sample_batch`).
    """
    columns, n = check_batch(batch)
    instance_argument(prefix, "prefix", str, "a string")
    tokenizer, _ = batch_indices(tokenizer, None, n)
    out: dict[str, list[Any]] = {}
    for i in range(n):
        row = audit_row(
            {c: batch[c][i] for c in columns}, tokenizer, profile=profile, thinking=thinking, use_logprobs=use_logprobs, prefix=prefix, server=server
        )
        for k, v in row.items():
            out.setdefault(k, []).append(v)
    if not out:
        out = {column: [] for column in RecordResult(0, None, None).to_row(prefix)}  # the same columns, no rows
    return out


# -- streaming over many records ---------------------------------------------------------------------

#: (0-based index, 1-based line or None, the record: a mapping, a raw JSON line, or a parse error)
