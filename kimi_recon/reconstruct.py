"""Rebuild the token ids of an assistant turn: render it, then encode it as the profile's tokenizer does.

For the K2.x profiles that is one encode of the whole rendered text; for K3 every rendered segment is
encoded on its own (see :mod:`kimi_recon.segments`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from ._base.arguments import bool_argument, choice_argument, instance_argument
from ._base.reprs import ids_repr, text_repr
from ._compare.ids import check_ids
from ._profile_check import assumed_profile, model_mismatch
from ._server_ids import disagreement, end_ids, open_at_end, prompt_head
from .errors import InvalidInputError, InvalidInputTypeError, preview
from .flags import Flag, FlagCode, flags_to_json
from .logprobs import LogprobsError, ids_from_logprobs
from .models import AssistantTurn
from .profiles import ChatProfile, get_profile, profile_or_model
from .render import RenderedTurn, render_turn_with_flags
from .responses import as_turn
from .segments import encode_rendered_together, encode_segments, encode_with_style, marker_ids, surrogate_flags
from .servers import (
    IDS_FIELDS_AS_GENERATED,
    UNKNOWN,
    ServerProfile,
    get_server,
    losses_of_shape,
    named_or_detected,
    one_id_loss_flag,
    one_id_more_flag,
    rebuilt_call_id_flags,
    server_losses,
)
from .tokenizer import KimiTokenizer, checked_tokenizer, tokenizer_for_profile
from .usage_check import Convention, TokenCounts, check_with_profile, reported_counts

SpecialTextMode = Literal["special", "ordinary"]
#: How the ids were obtained (see :class:`Reconstruction`).
Source = Literal["rendered", "logprobs", "server_token_ids"]


@dataclass(frozen=True)
class Reconstruction:
    """The rebuilt output ids and how they were obtained.

    ``source`` is ``"rendered"`` (one encode of the rendered text), ``"logprobs"`` (the ids the server
    reported, checked against the rendered text) or ``"server_token_ids"`` (the generated ids the server
    returned, e.g. vLLM's and SGLang's ``return_token_ids``). ``flags`` says everything that may make ``ids``
    differ from what the model emitted. ``server`` is the server whose parser losses were considered.
    """

    ids: list[int]
    text: str
    flags: tuple[Flag, ...]
    source: Source
    profile: str
    thinking: bool
    server: str = "unknown"

    def has_flag(self, code: str) -> bool:
        """Whether a flag of ``code`` (a :class:`~kimi_recon.flags.FlagCode` or its value) is among :attr:`flags`."""
        if not isinstance(code, str):  # (an array's == answers for each item, not once)
            raise InvalidInputTypeError(f"must be a flag code (a FlagCode or its string), got {type(code).__name__}", field="code")
        return any(f.code == code for f in self.flags)

    def __repr__(self) -> str:  # the ids and text of a long turn would fill a notebook: ends and lengths only
        return (
            f"Reconstruction(ids={ids_repr(self.ids)}, text={text_repr(self.text)}, "
            f"flags=({', '.join(f.code.value for f in self.flags)}), source={self.source!r}, "
            f"profile={self.profile!r}, thinking={self.thinking}, server={self.server!r})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form: ``ids``, ``text``, ``flags`` (:func:`~kimi_recon.flags.flags_to_json`),
        ``source``, ``profile``, ``thinking``, ``server``."""
        return {
            "ids": list(self.ids),
            "text": self.text,
            "flags": flags_to_json(self.flags),
            "source": self.source,
            "profile": self.profile,
            "thinking": self.thinking,
            "server": self.server,
        }

    @property
    def flag_codes(self) -> tuple[FlagCode, ...]:
        return tuple(f.code for f in self.flags)


def encode_rendered(
    rendered: RenderedTurn,
    tokenizer: KimiTokenizer,
    special_text: SpecialTextMode = "special",
    profile: str | ChatProfile = "kimi-k2.5",  # no model id here to decide it
) -> list[int]:
    """Ids of a rendered turn, encoded as ``profile``'s official tokenizer does.

    ``ordinary`` encodes special-token text inside fields as plain text (in K3 it always is).
    Special tokens are hard BPE boundaries, so encoding the pieces between markers separately and
    joining them gives the same ids as one encode when no field holds special-token text.
    """
    prof = get_profile(profile)
    choice_argument(special_text, "special_text", ("special", "ordinary"))
    instance_argument(rendered, "rendered", RenderedTurn, "a RenderedTurn (see render_turn_with_flags)")
    instance_argument(tokenizer, "tokenizer", KimiTokenizer, "a KimiTokenizer (see load_tokenizer)")
    return _encode_checked(rendered, tokenizer, special_text, prof)


def _encode_checked(rendered: RenderedTurn, tokenizer: KimiTokenizer, special_text: SpecialTextMode, prof: ChatProfile) -> list[int]:
    """:func:`encode_rendered` of arguments already checked."""
    if special_text == "special" or prof.fields_always_ordinary:
        # (encode_segments less its argument checks: every caller's were made)
        return encode_with_style(rendered.segments, tokenizer, marker_ids(prof), prof.encoding, fields_plain=rendered.fields_plain, text=rendered.text)
    ids: list[int] = []
    pending = ""  # consecutive field text is one BPE span
    for seg in rendered.segments:
        if seg.is_marker:
            ids += tokenizer.encode(pending, allowed_special=set())
            pending = ""
            ids += tokenizer.encode(seg.text)
        else:
            pending += seg.text
    return ids + tokenizer.encode(pending, allowed_special=set())


def reconstruct_output_ids(
    turn: AssistantTurn | Mapping[str, Any] | str | Any,
    tokenizer: KimiTokenizer | None = None,
    profile: str | ChatProfile | None = None,
    thinking: bool | None = None,
    *,
    call_index_offset: int | None = None,
    special_text: SpecialTextMode = "special",
    use_logprobs: bool = True,
    stop: str | None = None,
    server: str | ServerProfile | None = None,
    usage: Mapping[str, Any] | None = None,
) -> Reconstruction:
    """The token ids the model generated for ``turn``, starting right after the generation prompt.

    ``turn`` is an :class:`AssistantTurn` or anything :func:`~kimi_recon.responses.turn_from_response`
    reads (a message, a choice or a chat completion: dict, JSON text or ``openai`` object), read as a
    stored response (``lenient=True``).
    :func:`render_assistant_turn`'s segments encoded as the profile's official tokenizer does, with
    ``tokenizer`` (default: the bundled one of the profile): one encode of the text for the K2.x
    profiles, segment by segment for ``kimi-k3``. When the turn carries logprobs that agree with the
    rendered text, their ids are used instead (exact even for non-canonical BPE splits); otherwise the
    reason for falling back is flagged. ``special_text="ordinary"`` encodes special-token text found
    inside fields as ordinary text (K3 always does). ``stop`` chooses how a finished turn ends (the
    profile's ``stop_token`` by default; see ``ChatProfile.stop_alternatives``).

    ``profile`` None: the turn's ``model`` id decides (a response's ``"model": "moonshotai/kimi-k3"`` is
    rebuilt as ``kimi-k3``), ``kimi-k2.5`` when it names none. A given profile that renders turns
    differently from the one the model id names is flagged ``profile_mismatch``.

    ``thinking`` None (the default) is thinking on, as the model's API defaults, unless the message shows
    otherwise: a turn without reasoning then gets ``thinking_assumed`` (loss), since the ids carry a ``</think>``
    the model never wrote if it was off, and lack the reasoning if it was on (say ``thinking=`` when you know).
    With thinking on (said or assumed) and no reasoning returned, ``usage.completion_tokens_details.reasoning_tokens``
    of 2 or more is ``reasoning_not_returned`` (loss): the model reasoned and the response left it out.

    ``server`` names the server whose parsers produced the turn (:mod:`kimi_recon.servers`: ``"vllm==0.33.0"``,
    ``"sglang"``, …; ``"none"`` for raw model text); None is what the response reveals, else unknown (may
    lose whatever any known parser loses). Each loss it can cause on a turn of this shape is flagged
    ``server_may_have_lost``, unless the evidence rules it out: the generated ids the server returned
    (``metadata["server_token_ids"]``, then used as the ids), logprobs covering the whole output, or
    ``usage.completion_tokens`` (``usage``, else the response's) counted as the named server counts. A figure of
    that usage the ids contradict is flagged (``completion_tokens_mismatch``, ``reasoning_tokens_mismatch``,
    loss), as every door flags the same turn; ``prompt_tokens`` is checked where the prompt is known
    (:func:`~kimi_recon.training.build_training_sample`, the record functions).

    ``call_index_offset`` is how many tool calls the conversation had before this turn: a K2.x call id the model did
    not write (a server's ``call_…``) is rebuilt as the model's own ``functions.NAME:IDX`` at that count plus the
    call's position (``replaced_tool_call_id``, unlikely). None (not said) takes 0, and such an id is then
    ``tool_call_index_assumed`` (risk): with earlier calls in the conversation the index is wrong.
    """
    read, recon = _output_ids(turn, tokenizer, profile, thinking, call_index_offset, special_text, use_logprobs, stop, server, usage)
    if usage is None and "usage" not in read.metadata:  # most turns: no figure to check the ids against
        return recon
    return _usage_checked(read, recon, usage)


def _output_ids(
    turn: object,
    tokenizer: KimiTokenizer | None,
    profile: str | ChatProfile | None,
    thinking: bool | None,
    call_index_offset: int | None,
    special_text: SpecialTextMode,
    use_logprobs: bool,
    stop: str | None,
    server: str | ServerProfile | None,
    usage: Mapping[str, Any] | None,
) -> tuple[AssistantTurn, Reconstruction]:
    """:func:`reconstruct_output_ids` before the usage check (the turn as read, and its reconstruction): for a
    caller that checks the usage itself, the prompt's figure too (a training sample, a generate row)."""
    if usage is not None and not isinstance(usage, Mapping):
        raise InvalidInputTypeError(f"must be a usage object (a mapping) or None, got {type(usage).__name__}", field="usage")
    pending = _rendered_for_ids(turn, tokenizer, profile, thinking, call_index_offset=call_index_offset, stop=stop, server=server)
    if special_text != "special":
        choice_argument(special_text, "special_text", ("special", "ordinary"))
    ids = _encode_checked(pending.rendered, pending.tokenizer, special_text, pending.profile)  # (all checked above)
    return pending.turn, _finished(pending, ids, use_logprobs=use_logprobs, usage=usage)


def _usage_checked(turn: AssistantTurn, recon: Reconstruction, usage: Mapping[str, Any] | None) -> Reconstruction:
    """``recon`` with a flag for each usage figure its ids contradict (:func:`_usage_counts`)."""
    counts = _usage_counts(turn, recon, usage)
    said = counts.flags() if counts is not None else ()
    return dataclasses.replace(recon, flags=recon.flags + said) if said else recon


def _usage_counts(
    turn: AssistantTurn, recon: Reconstruction, usage: Mapping[str, Any] | None = None, prompt_len: int | None = None
) -> TokenCounts | None:
    """The usage check of ``recon``'s ids (``usage``, else ``turn``'s response's; None when neither is an object):
    the one verdict every door gives on the same turn (:func:`reconstruct_output_ids`, :func:`reconstruct_many`,
    the training sample, the record functions), ``prompt_len`` the prompt's figure where the door knows it.
    The counting convention is the reconstruction's server's when pinned (:mod:`kimi_recon.servers`)."""
    source = usage if usage is not None and isinstance(usage, Mapping) else turn.metadata.get("usage")
    if source is None or not isinstance(source, Mapping):  # (None first: most turns, and Mapping's check is not cheap)
        return None
    return check_with_profile(
        source,
        recon.ids,
        prompt_len,
        recon.profile,
        truncated_in=turn.metadata.get("truncated_in"),
        completion_conventions=get_server(recon.server).completion_conventions or None,
        reasoning_into_tools=recon.has_flag(FlagCode.THINK_END_OMITTED),
        think_end_unsure=recon.has_flag(FlagCode.THINKING_ASSUMED),
    )


#: Turns :func:`reconstruct_many` reads and renders before it encodes and finishes them: each phase then runs over a
#: chunk whose code and data stay in the CPU's caches, where one turn after another through all three phases evicts
#: them (docs/benchmarks.md, "One turn and many").
MANY_CHUNK = 64


def reconstruct_many(
    turns: Iterable[AssistantTurn | Mapping[str, Any] | str | Any],
    tokenizer: KimiTokenizer | None = None,
    profile: str | ChatProfile | None = None,
    thinking: bool | None = None,
    *,
    use_logprobs: bool = True,
    stop: str | None = None,
    server: str | ServerProfile | None = None,
) -> list[Reconstruction]:
    """``[reconstruct_output_ids(t, tokenizer, profile, thinking, use_logprobs=…, stop=…, server=…) for t in turns]``,
    the same reconstructions, faster.

    The turns go :data:`MANY_CHUNK` at a time: every turn of a chunk is read and rendered, then encoded (the K2.x
    turns in one call into tiktoken, :func:`~kimi_recon.segments.encode_rendered_together`; K3 turns one by one,
    which on one thread costs less CPU than their pieces in one call; a turn longer than
    :data:`~kimi_recon.segments.TOGETHER_MAX_CHARS` on its own), then finished. A turn that cannot be read or rebuilt
    raises its error (an :class:`~kimi_recon.errors.InvalidInputError`) naming the turn by its index as ``sample``;
    a wrong option (``tokenizer``, ``profile``, ``thinking``, ``server``) raises before any turn is read, naming none.
    For one result or one recorded error per record, see :func:`kimi_recon.dataset.reconstruct_records`.

    >>> from kimi_recon import AssistantTurn
    >>> turns = [AssistantTurn(content="Hi."), {"reasoning_content": "Think.", "content": "Bye."}]
    >>> [r.ids for r in reconstruct_many(turns)] == [reconstruct_output_ids(t).ids for t in turns]
    True
    """
    if isinstance(turns, (str, bytes, bytearray, Mapping, AssistantTurn)) or not isinstance(turns, Iterable):
        raise InvalidInputTypeError(
            f"must be an iterable of turns (one turn: reconstruct_output_ids), got {type(turns).__name__}", field="turns"
        )
    # The options every turn shares are the call's to get right: their errors name no turn (an empty list too).
    checked_tokenizer(tokenizer)
    if profile is not None:
        get_profile(profile)
    if thinking is not None:
        bool_argument(thinking, "thinking")
    if server is not None:
        get_server(server)
    out: list[Reconstruction] = []
    numbered = enumerate(turns)
    while chunk := list(itertools.islice(numbered, MANY_CHUNK)):
        pending = []
        for index, turn in chunk:
            try:
                pending.append(_rendered_for_ids(turn, tokenizer, profile, thinking, call_index_offset=None, stop=stop, server=server))
            except InvalidInputError as err:
                raise err.with_sample(index) from None
        for (index, _), p, ids in zip(chunk, pending, _encode_pending(pending, per_segment_together=False), strict=True):
            try:
                recon = _finished(p, ids, use_logprobs=use_logprobs)
                out.append(_usage_checked(p.turn, recon, None))  # (the verdict reconstruct_output_ids gives the same turn)
            except InvalidInputError as err:
                raise err.with_sample(index) from None
    return out


class _PendingTurn(NamedTuple):
    """A turn rendered and waiting for its ids (:func:`_rendered_for_ids`), with the options it was rendered with."""

    turn: AssistantTurn
    rendered: RenderedTurn
    tokenizer: KimiTokenizer
    profile: ChatProfile
    thinking: bool
    server: ServerProfile
    #: whether the caller or the record said the thinking mode (else it is on by default: flag thinking_assumed)
    thinking_stated: bool = True
    #: the options the turn was rendered with (a server's ids are checked against the turn rendered otherwise);
    #: the offset is the tool calls before the turn as said (None: not said, 0 taken)
    call_index_offset: int | None = 0
    stop: str | None = None


def _rendered_for_ids(
    turn: AssistantTurn | Mapping[str, Any] | str | Any,
    tokenizer: KimiTokenizer | None,
    profile: str | ChatProfile | None,
    thinking: bool | None,
    *,
    call_index_offset: int | None,
    stop: str | None,
    server: str | ServerProfile | None,
) -> _PendingTurn:
    """The first half of :func:`reconstruct_output_ids` (its arguments, checked): the turn read and rendered.
    The ids of the rendered turn then come one turn at a time or a batch at a time (:func:`_encode_pending`)."""
    if type(turn) is not AssistantTurn:
        turn = as_turn(turn)
    stated = thinking is not None
    thinking = True if thinking is None else thinking
    meta = turn.metadata
    prof = profile if type(profile) is ChatProfile else profile_or_model(profile, meta.get("model"))
    tok = tokenizer_for_profile(tokenizer, prof)
    detected = meta.get("server_detected")
    srv = UNKNOWN if server is None and detected is None else named_or_detected(server, detected)  # (its answer, unasked)
    stop_flag = None
    if stop is None and "matched_stop" in meta:
        stop, stop_flag = _stop_the_server_saw(meta["matched_stop"], prof)
    rendered = render_turn_with_flags(turn, prof, thinking, call_index_offset=0 if call_index_offset is None else call_index_offset, stop=stop)
    if call_index_offset is None and turn.tool_calls:
        rendered = _index_not_said(rendered)
    if stop_flag is not None:
        rendered = dataclasses.replace(rendered, flags=(*rendered.flags, stop_flag))
    if profile is None:
        rendered = _with_assumed_profile(rendered, meta.get("model"))
    return tuple.__new__(_PendingTurn, (turn, rendered, tok, prof, thinking, srv, stated, call_index_offset, stop))  # (less __new__'s frame)


def _index_not_said(rendered: RenderedTurn) -> RenderedTurn:
    """``rendered`` with each ``replaced_tool_call_id`` made ``tool_call_index_assumed``: nothing said how many tool
    calls came before the turn, so the index written (0 + position) is the model's only in a first turn with calls."""
    if not any(f.code is FlagCode.REPLACED_TOOL_CALL_ID for f in rendered.flags):
        return rendered
    flags = tuple(
        Flag(
            FlagCode.TOOL_CALL_INDEX_ASSUMED,
            f.message.split(" at the index its template gives", 1)[0]
            + ", numbered as if no tool call came before this turn (nothing said how many did: pass call_index_offset, "
            "or the record's messages); with earlier calls the index is wrong",
            f.field,
        )
        if f.code is FlagCode.REPLACED_TOOL_CALL_ID
        else f
        for f in rendered.flags
    )
    return dataclasses.replace(rendered, flags=flags)


def reasoning_flags(turn: AssistantTurn, prof: ChatProfile, thinking: bool, stated: bool, usage: object) -> list[Flag]:
    """What the message says about its reasoning that the rendered ids cannot: reasoning under a key no reader
    knows, two sources that disagree, reasoning the model spent tokens on and the response left out, and a
    thinking mode nobody said for a message without reasoning (every door: the turn, the record, the sample)."""
    out: list[Flag] = []
    unread = turn.metadata.get("unread_reasoning_keys")
    if unread and isinstance(unread, Mapping):
        keys = ", ".join(repr(k) for k in unread)
        if not turn.reasoning:
            out.append(Flag(
                FlagCode.REASONING_KEY_UNREAD,
                f"the message holds reasoning under {keys}, a key no reader knows (reasoning, reasoning_content and "
                "reasoning_details are read); the ids leave it out: move it to reasoning_content if the model wrote it",
                "reasoning",
            ))
        elif any(str(text).strip() != turn.reasoning.strip() for text in unread.values()):
            out.append(Flag(
                FlagCode.REASONING_SOURCES_DISAGREE,
                f"the text under {keys} differs from {turn.metadata.get('reasoning_source') or 'the reasoning'}, which was used",
                "reasoning",
            ))
    if turn.metadata.get("reasoning_sources_disagree"):
        out.append(Flag(FlagCode.REASONING_SOURCES_DISAGREE, "'reasoning' and the reasoning_details text differ; 'reasoning' was used", "reasoning"))
    if turn.reasoning or not turn.reasoning_complete or unread or not thinking or prof.thinking_style != "prompt_opens":
        return out
    spent = reported_counts(usage)[2]
    if spent is not None and spent >= 2:  # (1 is the </think> of an empty reasoning, which some servers count)
        out.append(Flag(
            FlagCode.REASONING_NOT_RETURNED,
            f"the usage reports {spent} reasoning tokens but the response carried no reasoning; an empty think block was "
            "rebuilt, so the ids lack what the model reasoned",
            "reasoning",
        ))
    elif not stated and not spent and not prof.thinking_required:  # (0 fits thinking off, or on without </think> counted)
        end = "</think>" if prof.format == "k2" else "the think channel's close"
        out.append(Flag(
            FlagCode.THINKING_ASSUMED,
            f"the message carries no reasoning and nothing says the thinking mode (no thinking setting on the record or "
            f"its request), so it was taken as on: if the answer was made with thinking off the ids start with {end} "
            "the model never wrote; if on, the response left the reasoning out. Say the mode: thinking=False / "
            "--no-thinking, a record's thinking, or the request it was made with",
            "reasoning",
        ))
    return out


def _stop_the_server_saw(matched: object, prof: ChatProfile) -> tuple[str | None, Flag | None]:
    """What a finished turn ends on when the server says (vLLM ``stop_reason``, SGLang ``matched_stop``): the
    profile's stop token (None), another end the profile writes (``[EOS]``), or, for an end it cannot write (a
    stop string, ``[EOT]``), the profile's stop token with a flag: the model generated no such token."""
    if isinstance(matched, int) and not isinstance(matched, bool):
        entry = prof.special_token_table.get(matched)
        text = entry.text if entry is not None else None
        if text == prof.stop_token:
            return None, None
        if text is not None and text in prof.stop_alternatives:
            return text, None
        said = f"the token {matched}" + (f" ({text})" if text else "")
    else:
        said = f"the stop string {preview(matched)}"
    return None, Flag(
        FlagCode.STOP_NOT_REBUILT,
        f"the server says the generation ended on {said}, which the rebuild cannot write: it wrote "
        f"{prof.stop_token}; the last ids differ from what the model generated",
        "finish_reason",
    )


def _with_assumed_profile(rendered: RenderedTurn, model: object) -> RenderedTurn:
    """``rendered`` with a ``profile_assumed`` flag when no profile was named and ``model`` names none (the
    default format was assumed): the one place both the turn and the record doors say so."""
    flag = assumed_profile(model)
    return rendered if flag is None else dataclasses.replace(rendered, flags=(*rendered.flags, flag))


def _encode_pending(pending: Sequence[_PendingTurn], *, per_segment_together: bool = True) -> list[list[int] | None]:
    """The ids of each pending turn as :func:`reconstruct_output_ids` encodes them (``special_text="special"``),
    the turns of one tokenizer and profile in one call into tiktoken (:func:`~kimi_recon.segments.encode_rendered_together`)
    and the others one by one, here, so that a chunk's encodes all run before its finishing (against encoding them
    in the finishing: the same time within the noise, and one contract for both callers). Every
    ``per_segment`` (K3) turn is encoded on its own when ``per_segment_together`` is False: on one thread its pieces
    call by call cost about 5% less CPU than every turn's pieces in one call, which the records path keeps (on two
    threads, one call a turn hands the GIL over at every call). When encoding them together raises, each is
    encoded on its own; None for a turn whose own encode raises: :func:`_finished` encodes it again and raises
    its error, in its turn."""
    try:
        encoded = _encoded_together(pending, per_segment_together)
    except Exception:  # noqa: BLE001 - each turn, encoded on its own, raises its own error (if any)
        encoded = [None] * len(pending)
    for k, p in enumerate(pending):
        if encoded[k] is None:
            with contextlib.suppress(Exception):
                encoded[k] = _encode_checked(p.rendered, p.tokenizer, "special", p.profile)
    return encoded


def _encoded_together(pending: Sequence[_PendingTurn], per_segment_together: bool) -> list[list[int] | None]:
    groups: dict[tuple[int, str], list[int]] = {}
    for i, p in enumerate(pending):
        if per_segment_together or p.profile.encoding != "per_segment":
            groups.setdefault((id(p.tokenizer), p.profile.name), []).append(i)
    out: list[list[int] | None] = [None] * len(pending)
    for members in groups.values():
        first = pending[members[0]]
        encoded = encode_rendered_together([pending[i].rendered for i in members], first.tokenizer, first.profile)
        for i, ids in zip(members, encoded, strict=True):
            out[i] = ids
    return out


def _finished(pending: _PendingTurn, ids: list[int] | None, *, use_logprobs: bool = True, usage: Mapping[str, Any] | None = None) -> Reconstruction:
    """The second half of :func:`reconstruct_output_ids`: the reconstruction of a pending turn whose rendered
    text encodes to ``ids`` (the caller's: they may be replaced, never copied; None: encoded here, ``special_text="special"``)."""
    turn, rendered, tok, prof, thinking, srv, stated, offset, _stop = pending
    if ids is None:
        ids = _encode_checked(rendered, tok, "special", prof)
    meta = turn.metadata
    text = rendered.text
    flags = list(rendered.flags)
    if not text.isascii():  # (ASCII text holds no surrogate: most turns skip the call)
        flags += surrogate_flags(rendered.segments, text)  # after the encode: the text's UTF-8 is cached
    given = usage if usage is not None else meta.get("usage")
    # (a turn with reasoning and no note on it gets no flag there: most turns; tests/test_hot_path_shortcuts.py checks it)
    if not turn.reasoning or "unread_reasoning_keys" in meta or "reasoning_sources_disagree" in meta:
        flags += reasoning_flags(turn, prof, thinking, stated, given)
    model = meta.get("model")
    if model is not None:
        mismatch = model_mismatch(prof, model)
        if mismatch is not None:
            flags.insert(0, mismatch)
    source: Source = "rendered"
    covered = False  # whether the ids came from the server itself, whole
    if meta.get("server_token_ids") is not None:
        from_server, said = _ids_from_server(pending, ids)
        if from_server is not None:
            # the ids are the server's, checked against the message: what the rendering could not know is moot
            flags = [f for f in flags if f.code not in _MOOT_WITH_SERVER_IDS]
            ids, source, covered = from_server, "server_token_ids", True
        flags.extend(said)
    if source == "rendered" and use_logprobs and turn.logprobs is not None:
        from_logprobs, why = _ids_via_logprobs(turn, rendered, ids, tok, prof)
        if from_logprobs is not None:
            ids, source = from_logprobs, "logprobs"
            covered = "cover the content" not in why
        code = FlagCode.LOGPROBS_USED if from_logprobs is not None else FlagCode.LOGPROBS_FALLBACK
        flags.append(Flag(code, why, "logprobs"))
        if from_logprobs is not None and "the output without" in why and srv.losses & _END_TOKEN_HIDDEN:
            # llama.cpp streams no logprob entry for the stop token: the one the rebuild appends is a guess.
            hidden = losses_of_shape(turn, prof, thinking is True, srv)
            flags.extend(flag for name, flag in hidden if name in _END_TOKEN_HIDDEN)
    if not covered and srv.losses:
        # (the turn, profile and server are checked above; a thinking flag that is not a bool gets its error there)
        lost = losses_of_shape(turn, prof, thinking, srv) if thinking is True or thinking is False else server_losses(turn, prof, thinking, srv)
        if given is None:  # most turns: no count to weigh, every loss of the shape stands
            flags += [flag for _, flag in lost]
        else:
            if lost:
                ids, text, kept = _weigh_with_usage(lost, ids, text, turn, prof, srv, given)
                flags.extend(kept)
            if not turn.truncated and reported_counts(given)[1] == len(ids) + 1:
                more = one_id_more_flag(srv, prof.format)
                if more is not None:
                    flags.append(more)
        if turn.tool_calls:
            flags.extend(rebuilt_call_id_flags(turn, prof, srv, offset))
    return _built(ids, text, tuple(flags), source, prof.name, thinking, srv.name)


def _built(ids: list[int], text: str, flags: tuple[Flag, ...], source: Source, profile: str, thinking: bool, server: str) -> Reconstruction:
    """``Reconstruction(ids, text, flags, source, profile, thinking, server)`` without a frozen dataclass's
    ``__init__``, which sets each field through ``object.__setattr__``: half the time, on every rebuilt turn. The
    class has no ``__post_init__`` to skip (``tests/test_hot_path_shortcuts.py`` checks the two are equal)."""
    recon = object.__new__(Reconstruction)
    recon.__dict__.update(ids=ids, text=text, flags=flags, source=source, profile=profile, thinking=thinking, server=server)
    return recon


#: Losses that leave the stop token unknown (the server ends on any end token and does not say which).
_END_TOKEN_HIDDEN = frozenset({"end_token_hidden", "k3_end_token_hidden"})


#: Losses that always change the number of generated tokens (the text lost or added sits between special
#: tokens, which are BPE boundaries): a completion count that agrees under the server's convention rules them out.
_COUNT_VISIBLE = frozenset(
    {
        "text_between_calls_dropped",
        "blank_content_nulled",
        "blank_message_nulled",
        "think_end_inserted",
        "calls_dropped",
        "k3_calls_dropped",
        "k3_json_block_dropped",
        "k3_duplicate_keys_merged",
        "k3_whitespace_dropped",
        "k3_blank_message_nulled",
        "blank_reasoning_dropped",
        "reasoning_unclosed",
        "specials_emptied",
        "k3_specials_emptied",
    }
)


#: Losses that always change the count by more than one id (a whole call with its markers): a count that agrees
#: under any known convention (which differ by one) rules them out, the server's own unknown.
_COUNT_VISIBLE_BY_MANY = frozenset({"calls_dropped", "k3_calls_dropped"})


#: Losses after which the rebuild holds one id more than the model wrote (a ``</think>`` it may not have written);
#: the other count-visible ones leave it one or more ids short.
_COUNT_ADDED = frozenset({"think_end_inserted", "reasoning_unclosed"})
_ANY_CONVENTION = (Convention.EXACT, Convention.WITHOUT_STOP, Convention.WITH_EOS)
#: How a rebuilt turn starts when it closes a think block it has no reasoning for (K2.x, K3).
_THINK_CLOSED = ("</think>", "<|close|>think<|sep|>")


def _weighed_under_any_convention(lost: tuple[tuple[str, Flag], ...], delta: int, srv: ServerProfile, *, opened: bool = False) -> tuple[Flag, ...]:
    """The loss flags left when ``usage.completion_tokens`` is ``delta`` off the rebuilt ids and the server may count
    any known way. A loss that drops k >= 1 ids hides only under a convention counting ``delta - k``, one that adds
    a ``</think>`` only under one counting ``delta + 1``: with no such convention it is ruled out. A count that
    agrees as every id counts (``delta`` 0) hides a dropping loss only if the server leaves its stop token out and
    the loss took exactly one id: ``server_rare_loss`` when that was rare (:data:`~kimi_recon.servers.ONE_ID_SEEN`).
    ``opened``: the ids open with the model's own ``<think>``, which a server may count without both markers."""
    # (a turn that opens with the model's own <think>, K2-Thinking, may be counted without both markers)
    offsets = [c.expected(0) for c in (*_ANY_CONVENTION, *((Convention.WITHOUT_MARKERS,) if opened else ()))]
    if delta not in offsets:
        return tuple(flag for _, flag in lost)
    kept: list[Flag] = []
    for name, flag in lost:
        if name in _COUNT_VISIBLE_BY_MANY:
            continue
        if name not in _COUNT_VISIBLE:
            kept.append(flag)
            continue
        hiding = [delta - o for o in offsets if (o == delta + 1 if name in _COUNT_ADDED else o <= delta - 1)]
        if not hiding:
            continue  # no convention leaves room for it
        rare = one_id_loss_flag(srv.name, name, flag.field) if name not in _COUNT_ADDED and hiding == [1] else None
        kept.append(rare if rare is not None else flag)
    return tuple(kept)


def _weigh_with_usage(
    lost: tuple[tuple[str, Flag], ...],
    ids: list[int],
    text: str,
    turn: AssistantTurn,
    prof: ChatProfile,
    srv: ServerProfile,
    given: object,
) -> tuple[list[int], str, tuple[Flag, ...]]:
    """The ids, text and loss flags after ``usage.completion_tokens`` is weighed (``given``: the usage the caller
    read, the argument's or else the response's), when the server's counting convention is pinned: a count that
    agrees rules out the losses that change it; one that fits only the turn without the ``</think>`` a K2.5 parser
    makes up decides that rendering (flag ``think_end_omitted``)."""
    every = tuple(flag for _, flag in lost)
    if turn.truncated:
        return ids, text, every
    reported = reported_counts(given)[1]
    if reported is None:
        return ids, text, every
    if not srv.completion_conventions:
        if not turn.reasoning and text.startswith(_THINK_CLOSED):
            # a think block closed with no reasoning in it may not be the model's (an empty answer, thinking off: K2.x's
            # </think>, K3's <|close|>think<|sep|><|open|>response<|sep|>): ids the named losses do not account for may
            # stand in the rebuild, so the count rules out only whole calls
            if any(c.expected(len(ids)) == reported for c in _ANY_CONVENTION):
                return ids, text, tuple(flag for name, flag in lost if name not in _COUNT_VISIBLE_BY_MANY)
            return ids, text, every
        opened = prof.thinking_style == "model_opens" and ids[:1] == [marker_ids(prof).get("<think>")]
        return ids, text, _weighed_under_any_convention(lost, reported - len(ids), srv, opened=opened)
    conventions = [Convention(c) for c in srv.completion_conventions]
    names = {name for name, _ in lost}
    invisible = tuple(flag for name, flag in lost if name not in _COUNT_VISIBLE)
    if not any(c.expected(len(ids)) == reported for c in conventions) and ("think_end_inserted" in names or "reasoning_unclosed" in names):
        end = prof.think_end_token_id
        if end is not None and end in ids and any(c.expected(len(ids) - 1) == reported for c in conventions):
            at = ids.index(end)
            ids = ids[:at] + ids[at + 1 :]
            text = text.replace("</think>", "", 1)
            decided = Flag(
                FlagCode.THINK_END_OMITTED,
                f"usage.completion_tokens {reported} fits only the turn without </think> (server {srv.name} counts "
                f"{'/'.join(sorted(srv.completion_conventions))}): "
                + ("the reasoning ran straight into the tool section" if turn.tool_calls else "the model wrote no </think>"),
                "reasoning",
            )
            return ids, text, (decided, *invisible)
    if any(c.expected(len(ids)) == reported for c in conventions):
        return ids, text, invisible
    return ids, text, every


#: Flags about the rendered ids that the server's own ids, once checked against the message, leave without object:
#: the call ids, arguments, special-token text, reasoning and end the rebuild had to choose are what was generated.
_MOOT_WITH_SERVER_IDS = frozenset(
    {
        FlagCode.REASONING_DROPPED,
        FlagCode.SPECIAL_TEXT_IN_FIELD,
        FlagCode.GENERATED_TOOL_CALL_ID,
        FlagCode.FOREIGN_TOOL_CALL_ID,
        FlagCode.REPLACED_TOOL_CALL_ID,
        FlagCode.TOOL_CALL_INDEX_ASSUMED,
        FlagCode.ARGUMENTS_NOT_JSON,
        FlagCode.ARGUMENTS_NOT_OBJECT,
        FlagCode.ARGUMENT_NUMBER_RESPELLED,
        FlagCode.ARGUMENT_SPACING,
        FlagCode.TRUNCATED_TOOL_CALLS,
        FlagCode.LONE_SURROGATE,
        FlagCode.THINKING_ASSUMED,
        FlagCode.STOP_NOT_REBUILT,
    }
)
#: The rendering flags that say the rendered call ids are the rebuild's guess (the message's were a server's).
_IDS_GUESSED = frozenset(
    {FlagCode.GENERATED_TOOL_CALL_ID, FlagCode.FOREIGN_TOOL_CALL_ID, FlagCode.REPLACED_TOOL_CALL_ID, FlagCode.TOOL_CALL_INDEX_ASSUMED}
)


def _ids_from_server(pending: _PendingTurn, rendered_ids: list[int]) -> tuple[list[int] | None, list[Flag]]:
    """The generated ids the server returned, once checked, or None; and the flags that say what was found.

    Ids that are not token ids of the vocabulary are refused (:class:`~kimi_recon.errors.InvalidInputError` naming
    the field). The prompt's ids in front are cut when the prompt is known (``server_prompt_token_ids``: the
    response's ``prompt_token_ids``, or a record's ``prompt_ids``); a list that starts like a prompt is not used.
    A missing stop token is appended only to a turn that stopped: not after another end token, not to a cut turn,
    not when the server says a stop string ended it, not when the ids end inside an open tool-call structure (a cut
    ``finish_reason`` hides: flagged ``truncated``). Then the ids are decoded and lined up with the message
    (:func:`kimi_recon._server_ids.disagreement`): ids whose text the server's known losses do not turn into this
    message are not used (``server_token_ids_disagree``, the rendered ids kept)."""
    turn, rendered, tok, prof, srv = pending.turn, pending.rendered, pending.tokenizer, pending.profile, pending.server
    field = str(turn.metadata.get("server_token_ids_field", "token_ids"))
    got = check_ids(turn.metadata["server_token_ids"], tok, field)
    if not got:
        return None, [Flag(FlagCode.SERVER_TOKEN_IDS_UNUSABLE, "the list is empty; the ids were rendered instead", field)]
    notes: list[str] = []
    prompt: list[int] = []
    if turn.metadata.get("server_prompt_token_ids") is not None:
        where = str(turn.metadata.get("server_prompt_token_ids_field", "prompt_token_ids"))
        prompt = check_ids(turn.metadata["server_prompt_token_ids"], tok, where)
    if prompt and len(got) > len(prompt) and got[: len(prompt)] == prompt:
        got = got[len(prompt) :]
        notes.append(f"the prompt's {len(prompt)} ids in front were cut")
    head = prompt_head(got, tok, prof)
    if head is not None:
        known = "they are not the known prompt's" if prompt else "no prompt is known to cut"
        return None, [Flag(
            FlagCode.SERVER_TOKEN_IDS_WITH_PROMPT,
            f"the list starts with {head}, which starts a prompt and never an assistant output: the prompt's ids are in "
            f"front and {known} (pass the prompt ids: the response's prompt_token_ids or the record's prompt_ids); "
            "the ids were rendered instead",
            field,
        )]
    ends = end_ids(prof)
    if turn.truncated and got[-1] in ends:
        return None, [Flag(
            FlagCode.SERVER_TOKEN_IDS_DISAGREE,
            f"the message was cut at the length limit (finish_reason 'length') but the ids end on the end token "
            f"{tok.decode([got[-1]])}, which a cut turn never generated: they are another turn's; the rendered ids were kept",
            field,
        )]
    matched = turn.metadata.get("matched_stop")
    stop_string = matched if isinstance(matched, str) else None
    hidden_cut = None if turn.truncated else open_at_end(got, tok, prof)
    cut = turn.truncated or hidden_cut is not None
    if (
        not cut
        and stop_string is None
        and field not in IDS_FIELDS_AS_GENERATED
        and got[-1] not in ends
        and rendered_ids
        and rendered_ids[-1] in ends
    ):
        # the end the server says it stopped on (vLLM stop_reason, SGLang matched_stop), else the rendered turn's
        end = matched if isinstance(matched, int) and not isinstance(matched, bool) and 0 <= matched < tok.vocab_size else rendered_ids[-1]
        if got[-1] != end:
            got = [*got, end]
            notes.append(f"the stop token {tok.decode([end])} was appended (the list ended without it)")
    said = "".join(f"; {n}" for n in notes)
    if got == rendered_ids:
        return got, [Flag(FlagCode.SERVER_TOKEN_IDS_USED, f"the server's generated ids, identical to the rendered turn{said}", field)]
    compared, compared_ids = rendered, rendered_ids
    if turn.reasoning and rendered.has_flag(FlagCode.REASONING_DROPPED):
        # the message's reasoning was left out of the rendering (thinking off); the server's ids may well hold it
        compared = render_turn_with_flags(turn, prof, True, call_index_offset=pending.call_index_offset or 0, stop=pending.stop)
        compared_ids = _encode_checked(compared, tok, "special", prof)
    why = disagreement(
        got,
        compared_ids,
        compared,
        tok,
        prof,
        srv,
        thinking=pending.thinking or compared is not rendered,
        cut=cut,
        message_cut=turn.truncated,
        stop_string=stop_string,
        ids_guessed=any(f.code in _IDS_GUESSED for f in rendered.flags),
    )
    if why is not None:
        return None, [Flag(
            FlagCode.SERVER_TOKEN_IDS_DISAGREE,
            f"the server's ids decode to another text than the message: {why}, which no known loss of server "
            f"{srv.name} explains (another choice's or record's ids, the prompt's in front, a turn without the "
            "message's reasoning); they were not used, the rendered ids were kept",
            field,
        )]
    out = [Flag(
        FlagCode.SERVER_TOKEN_IDS_USED,
        f"the server's generated ids were used; the rendered message differs ({_first_diff(got, rendered_ids)}), as "
        f"server {srv.name}'s parsers are known to make it differ{said}",
        field,
    )]
    if hidden_cut is not None:
        out.append(Flag(
            FlagCode.TRUNCATED,
            f"the ids end inside {hidden_cut}: the turn was cut at the length limit though finish_reason says "
            f"{turn.finish_reason!r}; no stop token was appended",
            "finish_reason",
        ))
    return got, out


def _ids_via_logprobs(
    turn: AssistantTurn, rendered: RenderedTurn, rendered_ids: list[int], tok: KimiTokenizer, prof: ChatProfile
) -> tuple[list[int] | None, str]:
    """Logprob ids spliced into the rendered ids, or None and the reason to fall back."""
    assert turn.logprobs is not None
    if not turn.logprobs:
        return None, "logprobs missing: the list is empty"
    try:
        lp_ids = ids_from_logprobs(turn.logprobs, tok)
    except LogprobsError as err:
        return None, f"logprobs partial: {err}"
    lp_bytes = tok.decode_bytes(lp_ids)
    text = rendered.text
    segments = rendered.segments
    # Servers differ in what logprobs cover: the whole output (with or without the stop token), or
    # only the content. Each case is matched on bytes and spliced at a segment boundary.
    candidates: list[tuple[str, list[int], list[int], str]] = [(text, [], [], "the whole output")]
    if segments and segments[-1].special:
        stop = segments[-1].text
        candidates.append((text[: -len(stop)], [], [marker_ids(prof)[stop]], f"the output without {stop}"))
    at = [i for i, s in enumerate(segments) if s.field == "content"]
    if len(at) == 1:
        i = at[0]
        before = encode_segments(segments[:i], tok, prof)
        after = encode_segments(segments[i + 1 :], tok, prof)
        candidates.append((segments[i].text, before, after, "the content"))
    for covered, before_ids, after_ids, what in candidates:
        # (surrogatepass: a lone surrogate in the text is compared, not a crash; no real token matches it)
        if covered and lp_bytes == covered.encode("utf-8", "surrogatepass"):
            ids = before_ids + lp_ids + after_ids
            if tok.decode_bytes(ids) != text.encode("utf-8", "surrogatepass"):
                break
            diff = "" if ids == rendered_ids else f"; they differ from the canonical encode ({_first_diff(ids, rendered_ids)})"
            return ids, f"logprobs cover {what} and agree with the rendered text{diff}"
    return None, f"logprobs disagree with the rendered text: they decode to {len(lp_bytes)} bytes that match neither the output nor the content"


def _first_diff(a: list[int], b: list[int]) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    return f"first difference at index {n}"
