"""EAGLE-3 training samples: the prompt from the real chat template plus the rebuilt output ids."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._base.reprs import ids_repr
from ._records.prompt import _encode_prompt, _render_prompt
from ._records.prompt import deep_sorted as deep_sorted  # moved with the prompt rendering; importable here as before
from ._render import formats as _formats
from .errors import InvalidInputError
from .flags import Flag, flags_to_json
from .models import AssistantTurn, tojson
from .profiles import ChatProfile
from .reconstruct import _output_ids, _usage_counts
from .record_options import RecordOptions, parse_options
from .record_options import count_tool_calls as count_tool_calls  # moved below the records; importable here as before
from .responses import as_turn
from .segments import Segment, surrogate_flag
from .tokenizer import KimiTokenizer, tokenizer_for_profile
from .usage_check import TokenCounts

if TYPE_CHECKING:
    from .servers import ServerProfile


@dataclass(frozen=True)
class TrainingSample:
    """``input_ids`` = prompt ids + output ids; ``loss_mask`` is 0 on the prompt and 1 on the output.

    ``token_counts`` is the usage check of a sample built from a record that carries ``usage``
    (:func:`sample_from_record`); its mismatches are among the ``flags``.
    """

    input_ids: list[int]
    loss_mask: list[int]
    prompt_len: int
    flags: tuple[Flag, ...] = ()
    token_counts: TokenCounts | None = None

    @property
    def prompt_ids(self) -> list[int]:
        return self.input_ids[: self.prompt_len]

    def __repr__(self) -> str:
        return (
            f"TrainingSample(input_ids={ids_repr(self.input_ids)}, prompt_len={self.prompt_len}, "
            f"trained={sum(self.loss_mask)}, flags=({', '.join(f.code.value for f in self.flags)}))"
        )

    @property
    def output_ids(self) -> list[int]:
        return self.input_ids[self.prompt_len :]

    def to_dict(self) -> dict[str, Any]:
        """The sample as JSON: ``input_ids``, ``loss_mask``, ``prompt_len``, ``flags`` (objects, see
        :func:`~kimi_recon.flags.flags_to_json`; and ``token_counts`` when the usage was checked);
        ``kimi-recon export`` makes trainer rows of it."""
        row: dict[str, Any] = {
            "input_ids": self.input_ids,
            "loss_mask": self.loss_mask,
            "prompt_len": self.prompt_len,
            "flags": flags_to_json(self.flags),
        }
        if self.token_counts is not None:
            row["token_counts"] = self.token_counts.to_dict()
        return row


# render_prompt, encode_prompt and build_training_sample spell their keywords out (public signatures, pinned by
# tests/test_prompt_options.py) and read them once, by parse_options, into the RecordOptions everything below takes.
def render_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | str | None = None,
    profile: str | ChatProfile | None = None,
    thinking: bool = True,
    tokenizer: KimiTokenizer | None = None,
    *,
    template: str | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    thinking_effort: str | None = None,
    tool_choice: Any = None,
    response_format: Any = None,
) -> str:
    """The prompt text up to and including the generation prompt, as the official ``apply_chat_template``.

    ``kimi-k2.5`` uses the tokenizer directory's own template, with tools deep-sorted and declared in
    the TypeScript style; ``kimi-k3`` Moonshot's reference renderer (see :mod:`kimi_recon._render.k3_prompt`;
    ``thinking_effort`` and ``tool_choice`` are its options); the other profiles use their bundled
    templates, with tools deep-sorted as their official tokenizers do. ``tools`` may be a list or its
    JSON text (see :mod:`kimi_recon.record_options`). ``template`` replaces the template text;
    ``template_kwargs`` reach the template as variables (e.g. ``{"preserve_thinking": True}`` for a
    template that reads it).
    """
    options = parse_options(
        profile=profile,
        thinking=thinking,
        tools=tools,
        template=template,
        template_kwargs=template_kwargs,
        thinking_effort=thinking_effort,
        tool_choice=tool_choice,
        response_format=response_format,
    )
    return _render_prompt(messages, options, tokenizer)


def prompt_segments(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    profile: ChatProfile,
    thinking: bool,
    *,
    thinking_effort: str | None = None,
    tool_choice: Any = None,
    response_format: Any = None,
) -> list[Segment] | None:
    """The prompt's segments for a profile rendered in Python (``kimi-k3``); None for a chat-template profile."""
    return _formats.prompt_segments(
        profile, messages, tools, thinking, thinking_effort=thinking_effort, tool_choice=tool_choice, response_format=response_format
    )


def encode_prompt(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | str | None = None,
    profile: str | ChatProfile | None = None,
    thinking: bool = True,
    tokenizer: KimiTokenizer | None = None,
    *,
    template: str | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    thinking_effort: str | None = None,
    tool_choice: Any = None,
    response_format: Any = None,
) -> list[int]:
    """The prompt ids a training sample starts with: the prompt rendered as the official code renders it
    (:func:`render_prompt`), encoded as the official tokenizer encodes it for that profile."""
    options = parse_options(
        profile=profile,
        thinking=thinking,
        tools=tools,
        template=template,
        template_kwargs=template_kwargs,
        thinking_effort=thinking_effort,
        tool_choice=tool_choice,
        response_format=response_format,
    )
    return _encode_prompt(messages, options, tokenizer_for_profile(tokenizer, options.profile))[0]


def build_training_sample(
    messages: Sequence[Mapping[str, Any]],
    turn: AssistantTurn | Mapping[str, Any] | Any,
    tools: Sequence[Mapping[str, Any]] | str | KimiTokenizer | None = None,
    profile: str | ChatProfile | None = None,
    thinking: bool | None = None,
    tokenizer: KimiTokenizer | None = None,
    *,
    template: str | None = None,
    template_kwargs: Mapping[str, Any] | None = None,
    call_index_offset: int | None = None,
    thinking_effort: str | None = None,
    tool_choice: Any = None,
    stop: str | None = None,
    server: str | None = None,
    response_format: Any = None,
) -> TrainingSample:
    """One training row: prompt ids (loss 0) followed by the turn's output ids (loss 1).

    ``turn`` is an :class:`AssistantTurn` or anything :func:`~kimi_recon.responses.turn_from_response`
    reads. The prompt is :func:`render_prompt` (``tools`` may be JSON text; ``template`` and
    ``template_kwargs`` as there). Tool calls of ``turn`` without an id are numbered after the tool
    calls already in ``messages``, or after ``call_index_offset`` when given. ``thinking_effort`` and
    ``tool_choice`` are ``kimi-k3`` prompt options (effort ``max`` by default when thinking is on);
    ``stop`` chooses how a finished turn ends, ``server`` the server whose parsers produced the turn
    (both as in :func:`reconstruct_output_ids`). ``profile`` None: the turn's ``model`` id decides,
    ``kimi-k2.5`` when it names none.

    The tokenizer: pass it as ``tokenizer=`` (every function takes that keyword). Its place stays the sixth so
    that calls written before keep working; for a conversation without tools it may also come right after
    the data, as in ``reconstruct_output_ids(turn, tok)``: a :class:`KimiTokenizer` in the third place is taken
    for it (``build_training_sample(messages, turn, tok)``).
    """
    if isinstance(tools, KimiTokenizer):
        if tokenizer is not None:
            raise InvalidInputError("is given twice: in the third place and as tokenizer=", field="tokenizer")
        tools, tokenizer = None, tools
    turn = as_turn(turn)
    options = parse_options(
        model=turn.metadata.get("model"),
        profile=profile,
        thinking=thinking,
        tools=tools,
        template=template,
        template_kwargs=template_kwargs,
        call_index_offset=call_index_offset,
        thinking_effort=thinking_effort,
        tool_choice=tool_choice,
        response_format=response_format,
    )
    return _build(messages, turn, options, tokenizer_for_profile(tokenizer, options.profile), stop, server)


def _build(
    messages: Sequence[Mapping[str, Any]],
    turn: AssistantTurn,
    options: RecordOptions,
    tok: KimiTokenizer,
    stop: str | None = None,
    server: str | ServerProfile | None = None,
    usage: Mapping[str, Any] | None = None,
) -> TrainingSample:
    prof = options.profile
    messages = _without_the_turn(messages, turn)
    prompt_ids, prompt_text = _encode_prompt(messages, options, tok)
    prompt_flag = surrogate_flag(prompt_text, "messages")
    offset = options.call_index_offset if options.call_index_offset is not None else count_tool_calls(messages)
    # (the public door checks profile/thinking/offset again, through turn_options: cheap, and stop/server are its own)
    thinking = options.thinking if options.thinking_stated else None  # (None: on, and a turn without reasoning says so)
    read, output = _output_ids(turn, tok, prof, thinking, offset, "special", True, stop, server, usage)
    # the usage check with the prompt's figure too: the verdict a record of the same turn gets (sample_from_record)
    counts = _usage_counts(read, output, usage, len(prompt_ids))
    return TrainingSample(
        input_ids=prompt_ids + output.ids,
        loss_mask=[0] * len(prompt_ids) + [1] * len(output.ids),
        prompt_len=len(prompt_ids),
        flags=options.flags + ((prompt_flag,) if prompt_flag is not None else ()) + output.flags + (counts.flags() if counts is not None else ()),
        token_counts=counts,
    )


def _without_the_turn(messages: Sequence[Mapping[str, Any]], turn: AssistantTurn) -> Sequence[Mapping[str, Any]]:
    """``messages`` without a last assistant message that is ``turn`` itself (a record that stores the whole
    conversation, the answer included); such a message that is not ``turn`` is refused: rendered, the prompt
    would hold the answer and the model would be trained to say it twice."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return messages  # not a list of messages: the renderer refuses it, naming the field
    if not messages or not isinstance(messages[-1], Mapping) or messages[-1].get("role") != "assistant":
        return messages
    where = f"messages[{len(messages) - 1}]"
    try:
        last = as_turn(messages[-1], sample=None)
    except InvalidInputError as err:
        raise InvalidInputError(f"is an assistant message before the turn to train on, and unreadable as one: {err.message}", field=where) from None
    if _same_turn(last, turn):
        return messages[:-1]
    raise InvalidInputError(
        "is an assistant message that differs from the turn to train on; messages are the prompt and must end "
        "before that turn (drop the last message if it is the answer, or give the turn that follows it)",
        field=where,
    )


def _same_turn(a: AssistantTurn, b: AssistantTurn) -> bool:
    def calls(turn: AssistantTurn) -> list[tuple[str, str]]:
        return [(c.name, c.arguments if isinstance(c.arguments, str) else tojson(c.arguments)) for c in turn.tool_calls]

    # (not strict: lists of different lengths are told apart by calls(a) == calls(b) below)
    ids_agree = all(x.id is None or y.id is None or x.id == y.id for x, y in zip(a.tool_calls, b.tool_calls, strict=False))
    # history messages often drop the reasoning: a message without any is still the same answer
    reasoning_agrees = not a.reasoning or a.reasoning == (b.reasoning or "")
    return reasoning_agrees and (a.content or "") == (b.content or "") and calls(a) == calls(b) and ids_agree


def sample_from_record(
    record: Mapping[str, Any],
    tokenizer: KimiTokenizer | None = None,
    *,
    profile: str | None = None,
    thinking: bool | None = None,
    template: str | None = None,
    server: str | None = None,
) -> TrainingSample:
    """A training sample from one record: ``messages``, optional ``tools``, and the response (under
    ``response``, ``turn`` or ``message``, as :mod:`kimi_recon.dataset` reads it).

    The record's own ``profile``, ``thinking``, ``tools``, ``call_index_offset``, ``template_kwargs``,
    ``thinking_effort`` and ``tool_choice`` are read by :func:`kimi_recon.record_options.parse_options`
    and win over the arguments. Errors name the field and the record id.

    A record carrying ``usage`` (its own or its response's) gets the usage check: ``token_counts`` and
    a ``<field>_mismatch`` flag for each figure no counting convention explains (the record's server's
    convention when it is pinned: ``server``, or the record's ``server`` field, see :mod:`kimi_recon.servers`)."""
    from ._records.record import missing_field, record_id, record_server, turn_of_record

    try:
        messages = record.get("messages")
        if messages is None:
            raise missing_field(record, ("messages",))
        if not isinstance(messages, list):
            raise InvalidInputError(f"must be a list of messages, got {type(messages).__name__}", field="messages")
        turn = turn_of_record(record)
        options = parse_options(record, profile=profile, thinking=thinking, template=template, model=turn.metadata.get("model"))
        tok = tokenizer_for_profile(tokenizer, options.profile)
        srv = record_server(record, server)
        usage = record.get("usage")
        sample = _build(messages, turn, options, tok, server=srv, usage=usage if isinstance(usage, Mapping) else None)
    except InvalidInputError as err:
        raise err.with_sample(record_id(record)) from None
    return sample  # (checked against the record's usage, else its response's, by _build)
