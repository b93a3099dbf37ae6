"""A server's own generated ids checked against the message it returned, before they are used.

A server asked for them returns the ids the model generated beside the message its parsers made of them (vLLM
``token_ids``, SGLang ``response_token_ids`` / ``sglext.output_ids``, llama.cpp ``__verbose.tokens``). Those ids are
the truth only when they are this message's: a bad join, another choice's list, ids with the prompt in front or a
turn without the message's reasoning decode to another text. :func:`disagreement` lines the decoded ids up with the
rendered message, unit by unit, and names the first difference that no known loss of the server's parsers
explains (None: every difference is explained, the ids are this message's).

A unit is a special token, a number, a run of word characters or one other character; whitespace is no unit
(parsers strip and add it around markers, between calls, at the ends of fields). A difference is explained when:

* the rendered side only holds text the renderer writes (``</think>``, K3 tags, a call's index) or a rebuilt call
  id's ``functions.``, ``:`` and digits (the server rebuilds ids, or the rendered id is itself a guess), or ``{}``
  for blank arguments (``blank_arguments_to_object``);
* the server's side only holds what the server's parsers drop: text between the calls or after the tool section
  (``text_between_calls_dropped``, ``k3_whitespace_dropped``), whole calls (``calls_dropped``), a K3 ``json`` block
  or duplicate argument (``k3_json_block_dropped``, ``k3_duplicate_keys_merged``), special tokens the detokenizer
  skips (``specials_emptied``), a ``<think>``, the tail of a cut turn (a half-written marker or call), the stop
  string the server matched, or more of a call id the server rebuilt;
* numbers respelled to the same value (``k3_values_respelled``) and K3 argument types.

Everything else (other words, another call's name or arguments, the message's reasoning missing from the ids,
the ids' text missing from the message) is a disagreement. An unknown server may cause any known loss.
"""

from __future__ import annotations

import bisect
import difflib
import functools
import re
from collections.abc import Sequence
from typing import NamedTuple

from ._render.k2 import ARGUMENT_BEGIN, CALL_BEGIN, CALL_END, SECTION_BEGIN, SECTION_END, THINK_BEGIN, THINK_END
from ._render.k3 import CLOSE, OPEN, SEP
from .errors import preview
from .profiles import ChatProfile
from .segments import RenderedTurn
from .servers import LOSSES, UNKNOWN, ServerProfile
from .tokenizer import KimiTokenizer

#: One comparison unit: a special-token text, a number, a run of word characters, one other character.
_UNIT = re.compile(r"<\|[A-Za-z0-9_]+\|>|\[[A-Z]{3}\]|</?think>|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|\w+|\S")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
#: The end tokens a generation can stop on (by role in the special-token table).
_END_ROLES = frozenset({"eos", "eot", "pad"})
#: K3 argument types (``type="…"``): a server writes ``integer`` where the renderer writes ``number``.
_XTML_TYPES = frozenset({"string", "number", "integer", "boolean", "null", "object", "array"})
#: The zones of a K3 channel tag's own pieces (think, response, message): structure, no text of the message.
_CHANNEL_TAGS = frozenset({"tag", "open:think", "open:response", "open:message", "tag:think", "tag:response", "tag:message"})
#: Zones of the tool-call section (K2) or tools block (K3): where parsers drop and rebuild.
_TOOL_ZONES = frozenset({"section", "call", "args", "after", "tag", "tag:tools", "tag:call", "tag:argument", "tag:json"})


class _Unit(NamedTuple):
    text: str
    #: where it sits: "text" (reasoning, content), "section" (K2 between calls, K3 in a call between arguments),
    #: "call" (K2 call id), "args", "after" (after the section / tools block), "tag:NAME" (a K3 tag's own text),
    #: "open:NAME" (a marker opening a call, a section, an argument, a json block)
    zone: str
    marker: bool
    #: the rendered side: the turn field it comes from (None: text the renderer writes); the server's side: None
    field: str | None


def end_ids(prof: ChatProfile) -> frozenset[int]:
    """The ids a generation can end on: the profile's stop token and [EOS], [EOT], [PAD]."""
    return _end_ids(prof)


@functools.lru_cache(maxsize=16)
def _end_ids(prof: ChatProfile) -> frozenset[int]:
    table = prof.special_token_table
    return frozenset({prof.stop_token_id, *(t.id for t in table.named() if t.role in _END_ROLES)})


def prompt_head(ids: Sequence[int], tok: KimiTokenizer, prof: ChatProfile) -> str | None:
    """The prompt-like text ``ids`` start with (a role marker no assistant output starts with), else None."""
    if not ids:
        return None
    table = prof.special_token_table
    first = table.get(ids[0]) if ids[0] >= tok.num_base_tokens else None
    if first is None:
        return None
    if first.role == "bos" or (prof.format == "k2" and first.role == "message" and first.id != prof.stop_token_id):
        return first.text
    if first.text == OPEN:
        head = tok.decode_bytes(list(ids[1:4])).decode("utf-8", "replace").lstrip()
        word = re.match(r"\w+", head)
        if word is not None and word.group() in ("message", "system"):
            return OPEN + word.group()
    return None


def open_at_end(ids: Sequence[int], tok: KimiTokenizer, prof: ChatProfile) -> str | None:
    """What the ids end inside of, when it is a tool-call structure left open (the turn was cut), else None."""
    table = prof.special_token_table
    if prof.format == "k2":
        ids_of = table.texts()
        begin, end = ids_of.get(SECTION_BEGIN), ids_of.get(SECTION_END)
        if begin is None or begin not in ids:
            return None
        last = len(ids) - 1 - list(reversed(ids)).index(begin)
        return "an open tool-call section" if end not in ids[last:] else None
    zones = _Zones(prof, thinking=True)
    _units(ids, tok, prof, zones, fields=None, drop=frozenset())
    for name in ("argument", "json", "call", "tools"):
        if name in zones.stack:
            return f"an open {name} tag of the tools block"
    return None


def disagreement(
    got: Sequence[int],
    rendered_ids: Sequence[int],
    rendered: RenderedTurn,
    tok: KimiTokenizer,
    prof: ChatProfile,
    server: ServerProfile,
    *,
    thinking: bool,
    cut: bool,
    message_cut: bool,
    stop_string: str | None,
    ids_guessed: bool,
) -> str | None:
    """Why the server's ids ``got`` are not what its parsers made the message of (None: every difference is a known
    loss of ``server``'s, or none at all). ``rendered_ids`` are the rendered turn's ids; the end tokens of both are
    left out of the comparison (the caller decides the end). ``cut``: the turn was cut (the ids' tail may be half a
    marker or call the parser dropped); ``message_cut``: the message says so (the renderer closed its half-written
    call); ``stop_string``: the stop string the server says it matched; ``ids_guessed``: the rendered
    call ids are the rebuild's guess (the message's were a server's)."""
    ends = _end_ids(prof)
    got = _without_end(got, ends)
    mine = _without_end(rendered_ids, ends)
    if list(got) == list(mine):
        return None
    losses = frozenset(LOSSES) if server.losses == UNKNOWN.losses else server.losses
    # The special tokens a detokenizer skips (skip_special_tokens, vLLM's and SGLang's default too) hold no text
    # of the message: left out on both sides, whatever the server.
    drop = _emptied_texts(prof)
    theirs = _units(got, tok, prof, _Zones(prof, thinking), fields=None, drop=drop)
    ours = _units(mine, tok, prof, _Zones(prof, thinking), fields=_field_map(rendered, ends, prof), drop=drop)
    a, b = [u.text for u in ours], [u.text for u in theirs]
    if a == b:
        return None  # whitespace or skipped special tokens only
    rules = _Rules(losses, cut, message_cut, stop_string, ids_guessed or "ids_rebuilt" in losses, frozenset(_argument_keys(ours)))
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        at_end = j2 == len(theirs) and i2 == len(ours)
        why = rules.unexplained(ours[i1:i2], theirs[j1:j2], at_end=at_end, before=ours[i1 - 1] if i1 else None)
        if why is not None:
            return why
    return None


def _without_end(ids: Sequence[int], ends: frozenset[int]) -> Sequence[int]:
    n = len(ids)
    while n and ids[n - 1] in ends:
        n -= 1
    return ids[:n]


@functools.lru_cache(maxsize=16)
def _emptied_texts(prof: ChatProfile) -> frozenset[str]:
    """The special tokens left out of the comparison: those a detokenizer with ``skip_special_tokens`` skips (the
    table's ``special`` ones), and K2's ``<think>`` and ``</think>``, whose place between reasoning and content is the
    parser's split (and which a parser drops where the model repeats them), not text of the message."""
    return frozenset({*(t.text for t in prof.special_token_table if t.special), THINK_BEGIN, THINK_END})


def _field_map(rendered: RenderedTurn, ends: frozenset[int], prof: ChatProfile) -> list[tuple[str, bool, str | None]]:
    """(text, is a marker, field) of every rendered segment but the end tokens at the end."""
    segments = list(rendered.segments)
    texts = {t.text for t in prof.special_token_table if t.id in ends}
    while segments and segments[-1].special and segments[-1].text in texts:
        segments.pop()
    return [(s.text, s.special, s.field) for s in segments]


def _units(
    ids: Sequence[int],
    tok: KimiTokenizer,
    prof: ChatProfile,
    zones: _Zones,
    *,
    fields: list[tuple[str, bool, str | None]] | None,
    drop: frozenset[str],
) -> list[_Unit]:
    """The comparison units of an id list (``fields`` None: the server's ids) or of the rendered segments
    (``fields``). The special tokens in ``drop`` are left out, the text around them joined."""
    pieces: list[tuple[str, bool, str | None]] = []  # (text, is a marker, field)
    if fields is None:
        table = prof.special_token_table
        run: list[int] = []
        for t in ids:
            entry = table.get(t) if t >= tok.num_base_tokens else None
            if entry is None:
                run.append(t)
                continue
            if entry.text in drop:
                continue  # (the text on both sides joins)
            if run:
                pieces.append((tok.decode_bytes(run).decode("utf-8", "replace"), False, None))
                run = []
            pieces.append((entry.text, True, None))
        if run:
            pieces.append((tok.decode_bytes(run).decode("utf-8", "replace"), False, None))
    else:
        pieces = [p for p in fields if not (p[1] and p[0] in drop)]
    if prof.format == "k3":
        pieces = _without_channel_tags(pieces)
    out: list[_Unit] = []
    texts: list[tuple[str, str | None]] = []

    def flush() -> None:
        # The run of text between two markers, whitespace removed (parsers strip and add it; a spaced detokenizer
        # puts a space where it skipped a special token), each piece's field kept by its place in the run.
        joined, starts, names = "", [], []
        for raw, field in texts:
            text = raw
            if "<" in text or "[" in text:
                # special-token text written as text (a K3 field, a detokenized marker): left out on both sides
                text = _DROPPABLE.sub(lambda m: "" if m.group() in drop or _CHANNEL_TAG.fullmatch(m.group()) else m.group(), text)
            text = "".join(text.split())
            if text:
                starts.append(len(joined))
                names.append(field)
                joined += text
        texts.clear()
        for m in _UNIT.finditer(joined):
            field = None
            if fields is not None:
                k = bisect.bisect_right(starts, m.start()) - 1
                while field is None and k < len(starts) and starts[k] < m.end():
                    field, k = names[k], k + 1
            out.append(zones.unit(m.group(), False, field))

    for text, is_marker, field in pieces:
        if is_marker:
            flush()
            out.append(zones.unit(text, True, None))
        else:
            texts.append((text, field))
    flush()
    return out


#: Special-token text inside text, and K3 channel tags written as text.
_DROPPABLE = re.compile(r"<\|(?:open|close)\|>(?:think|response|message)<\|sep\|>|<\|[A-Za-z0-9_]+\|>|\[[A-Z]{3}\]|</?think>")
_CHANNEL_TAG = re.compile(r"<\|(?:open|close)\|>(?:think|response|message)<\|sep\|>")
_CHANNELS = frozenset({"think", "response", "message"})
#: The K3 tags of an assistant turn, longest first where one is a prefix of another.
_K3_TAGS = ("argument", "response", "message", "think", "tools", "call", "json")


def _without_channel_tags(pieces: list[tuple[str, bool, str | None]]) -> list[tuple[str, bool, str | None]]:
    """K3 pieces without the channel tags (``<|close|>think<|sep|>``, ``<|open|>response<|sep|>``, ...), the text on
    both sides of one joined: where a parser splits reasoning from content is not text of the message (and a
    parser drops the tags a model repeats)."""
    out: list[tuple[str, bool, str | None]] = []
    i, n = 0, len(pieces)
    while i < n:
        text, is_marker, field = pieces[i]
        if (
            is_marker
            and text in (OPEN, CLOSE)
            and i + 2 < n
            and not pieces[i + 1][1]
            and pieces[i + 1][0] in _CHANNELS
            and pieces[i + 2][1]
            and pieces[i + 2][0] == SEP
        ):
            i += 3
            continue
        if not is_marker and out and not out[-1][1] and out[-1][2] == field:
            out[-1] = (out[-1][0] + text, False, field)
        else:
            out.append((text, is_marker, field))
        i += 1
    return out


class _Zones:
    """Where each unit sits, from the markers seen so far (K2 section markers; K3 tags)."""

    def __init__(self, prof: ChatProfile, thinking: bool) -> None:
        self.k3 = prof.format == "k3"
        self.zone = "text"
        self.stack: list[str] = ["message", "think" if thinking and prof.thinking_style == "prompt_opens" else "response"]
        self.pending: str | None = None  # OPEN or CLOSE: the next word is a tag's name
        self.in_tag: str | None = None  # the name of the tag whose header is being read
        self.tools_closed = False

    def unit(self, text: str, marker: bool, field: str | None) -> _Unit:
        if not self.k3:
            return self._k2(text, marker, field)
        return self._k3(text, marker, field)

    def _k2(self, text: str, marker: bool, field: str | None) -> _Unit:
        if not marker:
            return _Unit(text, self.zone, False, field)
        if text == SECTION_BEGIN:
            self.zone = "section"
            return _Unit(text, "open:section", True, field)
        if text == CALL_BEGIN:
            self.zone = "call"
            return _Unit(text, "open:call", True, field)
        if text == ARGUMENT_BEGIN:
            self.zone = "args"
        elif text == CALL_END:
            self.zone = "section"
        elif text == SECTION_END:
            self.zone = "after"
        elif text in (THINK_BEGIN, THINK_END):
            return _Unit(text, "text", True, field)
        return _Unit(text, self.zone if self.zone != "call" else "section", True, field)

    def _k3(self, text: str, marker: bool, field: str | None) -> _Unit:
        if marker and text in (OPEN, CLOSE):
            self.pending, self.in_tag = text, None
            return _Unit(text, "tag", True, field)
        if marker and text == SEP:
            self.pending, self.in_tag = None, None
            return _Unit(text, "tag", True, field)
        if self.pending is not None and not marker:
            # the tag's name starts the unit (whitespace is gone: 'calltool' of call tool="…")
            name, opening = next((t for t in _K3_TAGS if text.startswith(t)), text), self.pending == OPEN
            self.pending, self.in_tag = None, name
            if opening:
                self.stack.append(name)
            elif name in self.stack:
                del self.stack[len(self.stack) - 1 - self.stack[::-1].index(name) :]
                self.tools_closed = self.tools_closed or name == "tools"
            return _Unit(text, f"open:{name}" if opening else f"close:{name}", False, field)
        if self.in_tag is not None:
            return _Unit(text, f"tag:{self.in_tag}", marker, field)
        top = self.stack[-1] if self.stack else "message"
        if top in ("argument", "json"):
            zone = "args"
        elif top in ("tools", "call"):
            zone = "section"
        elif self.tools_closed:
            zone = "after"
        else:
            zone = "text"
        return _Unit(text, zone, marker, field)


class _Rules:
    """Whether one differing stretch (the rendered side's units, the server's) is explained by a known loss."""

    def __init__(
        self, losses: frozenset[str], cut: bool, message_cut: bool, stop_string: str | None, ids_rebuilt: bool, keys: frozenset[str]
    ) -> None:
        self.losses, self.cut, self.message_cut, self.ids_rebuilt, self.keys = losses, cut, message_cut, ids_rebuilt, keys
        self.stop = "".join(stop_string.split()) if stop_string else None

    def _has(self, *names: str) -> bool:
        return any(n in self.losses for n in names)

    def unexplained(self, ours: Sequence[_Unit], theirs: Sequence[_Unit], *, at_end: bool, before: _Unit | None) -> str | None:
        if ours and theirs and len(ours) == len(theirs) and all(self._respelled(o, t) for o, t in zip(ours, theirs, strict=True)):
            return None
        blank_args = [u.text for u in ours] == ["{", "}"] and not theirs and self._has("blank_arguments_to_object", "k3_json_block_dropped")
        # a cut turn's half-written call, which the renderer closed
        closed = at_end and self.message_cut and all(u.field is None or u.field.startswith("tool_calls[") for u in ours)
        for u in ours:
            if not blank_args and not closed and not self._made_up(u):
                return self._say(ours, theirs, before)
        if theirs and not self._dropped(theirs, at_end):
            return self._say(ours, theirs, before)
        return None

    def _respelled(self, o: _Unit, t: _Unit) -> bool:
        """The same number written otherwise (1.50 -> 1.5, 1e2 -> 100.0), or a K3 argument type."""
        if o.text in _XTML_TYPES and t.text in _XTML_TYPES and o.zone == t.zone == "tag:argument":
            return True
        if not (self._has("k3_values_respelled") and _NUMBER.fullmatch(o.text) and _NUMBER.fullmatch(t.text)):
            return False
        return float(o.text) == float(t.text)

    def _made_up(self, u: _Unit) -> bool:
        """A rendered unit the model may not have written: the renderer's own text, a rebuilt id's frame."""
        if u.field is None:
            return True  # markers and template text (</think>, K3 tags and indexes)
        if u.field.endswith(".id") and (self.ids_rebuilt or self.cut):  # (a cut call's id is the parser's)
            return u.text in ("functions", ".", ":") or u.text.isdigit()
        return False

    def _dropped(self, theirs: Sequence[_Unit], at_end: bool) -> bool:
        """The server's units are what its parsers drop (or the half-written tail of a cut turn)."""
        if at_end and self.stop is not None and "".join(u.text for u in theirs) == self.stop:
            return True  # the stop string the server matched (the message leaves it out)
        opened = {u.zone[5:] for u in theirs if u.zone.startswith("open:")}
        in_tools = all(_in_tools(u) for u in theirs)
        if at_end and self.cut and not any(_closes_a_call(u) for u in theirs):
            # the tail of a cut turn: a call or section the parser dropped half-written, a marker it held back
            words = [u for u in theirs if not (u.marker or _in_tools(u))]
            if not words or _marker_prefix("".join(u.text for u in words)):
                return True
        if in_tools and opened & {"section", "call", "tools"} and self._has("calls_dropped", "k3_calls_dropped") and self._whole_calls(theirs):
            return True  # whole calls (or the whole section) the parser dropped
        if in_tools and opened == {"argument"} and self._has("k3_duplicate_keys_merged"):
            # an argument whose key the message has: a duplicate key the parser merged
            keys = _argument_keys(theirs)
            return bool(keys) and all(k in self.keys for k in keys)
        if in_tools and opened == {"json"} and self._has("k3_json_block_dropped"):
            return True  # a json block that vanished
        return all(self._dropped_unit(u) for u in theirs)

    def _whole_calls(self, theirs: Sequence[_Unit]) -> bool:
        """``theirs`` holds whole calls: nothing of a call the message has (its id, its arguments) comes before the
        first call they open (a call's end may: the line-up puts the message's call's end anywhere among the equal
        ends), and text between calls only where the parser drops it."""
        opened = False
        for u in theirs:
            if u.zone in ("open:call", "open:section", "open:tools"):
                opened = True
            elif not opened and not u.marker and u.zone in ("call", "args", "open:argument", "open:json", "tag:argument", "tag:json", "tag:call"):
                return False
            elif not u.marker and u.zone in ("section", "after") and not self._has("text_between_calls_dropped", "k3_whitespace_dropped"):
                return False
        return opened

    def _dropped_unit(self, u: _Unit) -> bool:
        if u.marker and u.text in (THINK_BEGIN, THINK_END):
            return True  # the parser's split of reasoning and content (the renderer writes it where the profile says)
        if u.zone in _CHANNEL_TAGS:
            return True  # a K3 channel's tags, which the parser turned into the message's fields: no text of theirs
        if u.zone in ("section", "after"):
            return self._has("text_between_calls_dropped", "k3_whitespace_dropped")
        if u.zone == "call":
            return self.ids_rebuilt  # more of a call id the server rebuilt
        if u.zone == "tag:call":
            return u.text.isdigit()  # the index the model wrote
        if u.zone == "tag:argument":
            return u.text in _XTML_TYPES
        return False

    def _say(self, ours: Sequence[_Unit], theirs: Sequence[_Unit], before: _Unit | None) -> str:
        ours_field = next((u.field for u in ours if u.field is not None), None)
        where = ours_field or (before.field if before is not None and before.field else None) or _zone_name(theirs[0].zone if theirs else "text")
        mine = " ".join(u.text for u in ours)
        their = " ".join(u.text for u in theirs)
        if ours_field == "reasoning" and not theirs:
            return f"the message's reasoning ({preview(mine)}) is not in the ids"
        if not theirs:
            return f"the message's {where} holds {preview(mine)}, which the ids lack"
        if not ours:
            return f"the ids hold {preview(their)} (at the message's {where}), which the message lacks"
        return f"the ids hold {preview(their)} where the message's {where} has {preview(mine)}"


def _in_tools(u: _Unit) -> bool:
    """A unit of the tool-call section or tools block (or a K3 tag's own text)."""
    return u.zone in _TOOL_ZONES or u.zone.startswith(("open:", "tag:", "close:"))


def _closes_a_call(u: _Unit) -> bool:
    """A unit that ends a call or the section: what a turn cut inside the call has not written."""
    return (u.marker and u.text in (CALL_END, SECTION_END)) or u.zone in ("close:call", "close:tools")


def _argument_keys(units: Sequence[_Unit]) -> list[str]:
    """The keys of the K3 arguments opened among ``units`` (``argument key="KEY" …``, whitespace gone)."""
    keys: list[str] = []
    for i, u in enumerate(units):
        if u.zone == "open:argument" and u.text == "argumentkey":
            quotes = [j for j in range(i + 1, min(len(units), i + 64)) if units[j].text == '"'][:2]
            if len(quotes) == 2:
                keys.append("".join(v.text for v in units[quotes[0] + 1 : quotes[1]]))
    return keys


def _zone_name(zone: str) -> str:
    return {"text": "reasoning or content", "call": "tool call id", "args": "tool call arguments"}.get(zone, "tool calls")


@functools.lru_cache(maxsize=1)
def _marker_texts() -> tuple[str, ...]:
    from .special_tokens import SPECIAL_TOKENS, SpecialTokenRegistry

    return tuple({t.text for t in (*SPECIAL_TOKENS.named(), *SpecialTokenRegistry.kimi_k3().named())})


def _marker_prefix(text: str) -> bool:
    """``text`` is the start of a special token's text (a cut turn's half-written marker the parser held back)."""
    return bool(text) and any(m.startswith(text) for m in _marker_texts())
