"""Rebuild the token ids of an assistant turn: one encode of the whole rendered text."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .logprobs import LogprobsError, ids_from_logprobs
from .models import AssistantTurn, Flag
from .profiles import ChatProfile, get_profile
from .render import IM_END, RenderedTurn, render_turn
from .responses import as_turn
from .tokenizer import KimiTokenizer, load_tokenizer

SpecialTextMode = Literal["special", "ordinary"]


@dataclass(frozen=True)
class Reconstruction:
    """The rebuilt output ids and how they were obtained.

    ``source`` is ``"rendered"`` (one encode of the rendered text) or ``"logprobs"`` (the ids the server
    reported, checked against the rendered text). ``flags`` says everything that may make ``ids`` differ
    from what the model emitted.
    """

    ids: list[int]
    text: str
    flags: tuple[Flag, ...]
    source: Literal["rendered", "logprobs"]
    profile: str
    thinking: bool

    def has_flag(self, code: str) -> bool:
        return any(f.code == code for f in self.flags)

    @property
    def flag_codes(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.flags)


def encode_rendered(rendered: RenderedTurn, tokenizer: KimiTokenizer, special_text: SpecialTextMode = "special") -> list[int]:
    """Ids of a rendered turn. ``ordinary`` encodes special-token text inside fields as plain text.

    Special tokens are hard BPE boundaries, so encoding the pieces between markers separately and
    joining them gives the same ids as one encode when no field holds special-token text.
    """
    if special_text == "special":
        return tokenizer.encode_with_specials(rendered.text, rendered.special_texts)
    if special_text != "ordinary":
        raise ValueError(f"special_text must be 'special' or 'ordinary', got {special_text!r}")
    ids: list[int] = []
    pending = ""  # consecutive field text is one BPE span
    for seg in rendered.segments:
        if seg.is_marker:
            ids += tokenizer.encode(pending, allow_special=False)
            pending = ""
            ids += tokenizer.encode(seg.text)
        else:
            pending += seg.text
    return ids + tokenizer.encode(pending, allow_special=False)


def reconstruct_output_ids(
    turn: AssistantTurn | Mapping[str, Any] | str | Any,
    tokenizer: KimiTokenizer | None = None,
    profile: str | ChatProfile = "kimi-k2.5",
    thinking: bool = True,
    *,
    call_index_offset: int = 0,
    special_text: SpecialTextMode = "special",
    use_logprobs: bool = True,
) -> Reconstruction:
    """The token ids the model generated for ``turn``, starting right after the generation prompt.

    ``turn`` is an :class:`AssistantTurn` or anything :func:`~kimi_recon.responses.turn_from_response`
    reads (a message, a choice or a chat completion: dict, JSON text or ``openai`` object), read as a
    stored response (``lenient=True``). One encode of :func:`render_assistant_turn`'s text with ``tokenizer`` (default: the bundled K2.5
    one), which is what the official tokenizer gives for the same text. When the turn carries logprobs
    that agree with the rendered text, their ids are used instead (exact even for non-canonical BPE
    splits); otherwise the reason for falling back is flagged. ``special_text="ordinary"`` encodes
    special-token text found inside fields as ordinary text.
    """
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    turn = as_turn(turn)
    prof = get_profile(profile)
    rendered = render_turn(turn, prof, thinking, call_index_offset=call_index_offset)
    flags = list(rendered.flags)
    ids = encode_rendered(rendered, tok, special_text)
    source: Literal["rendered", "logprobs"] = "rendered"
    if use_logprobs and turn.logprobs is not None:
        from_logprobs, why = _ids_via_logprobs(turn, rendered, ids, tok)
        if from_logprobs is not None:
            ids, source = from_logprobs, "logprobs"
        flags.append(Flag("logprobs_used" if from_logprobs is not None else "logprobs_fallback", why, "logprobs"))
    return Reconstruction(ids, rendered.text, tuple(flags), source, prof.name, thinking)


def _ids_via_logprobs(
    turn: AssistantTurn, rendered: RenderedTurn, rendered_ids: list[int], tok: KimiTokenizer
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
    # Servers differ in what logprobs cover: the whole output (with or without the stop token), or
    # only the content. Each case is matched on bytes and spliced at a special-token boundary.
    candidates = [(text, "", ""), (text.removesuffix(IM_END), "", IM_END if text.endswith(IM_END) else "")]
    content = turn.content or ""
    if content and text.count(content) == 1:
        start = text.index(content)
        candidates.append((content, text[:start], text[start + len(content) :]))
    for covered, before, after in candidates:
        if covered and lp_bytes == covered.encode("utf-8"):
            ids = tok.encode(before) + lp_ids + tok.encode(after)
            if tok.decode_bytes(ids) != text.encode("utf-8"):
                break
            what = "the whole output" if not before and not after else ("the output without <|im_end|>" if not before else "the content")
            diff = "" if ids == rendered_ids else f"; they differ from the canonical encode ({_first_diff(ids, rendered_ids)})"
            return ids, f"logprobs cover {what} and agree with the rendered text{diff}"
    return None, f"logprobs disagree with the rendered text: they decode to {len(lp_bytes)} bytes that match neither the output nor the content"


def _first_diff(a: list[int], b: list[int]) -> str:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at index {n}"
