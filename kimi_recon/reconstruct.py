"""Rebuild the token ids of an assistant turn: render it, then encode it as the profile's tokenizer does.

For the K2.x profiles that is one encode of the whole rendered text; for K3 every rendered segment is
encoded on its own (see :mod:`kimi_recon.segments`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ._arguments import choice_argument, instance_argument
from ._repr import ids_repr, text_repr
from .flags import Flag, FlagCode, flags_to_json
from .logprobs import LogprobsError, ids_from_logprobs
from .models import AssistantTurn
from ._profile_check import model_mismatch
from .profiles import ChatProfile, get_profile, profile_or_model
from .render import RenderedTurn, render_turn_with_flags
from .responses import as_turn
from .segments import encode_segments, marker_ids, surrogate_flags
from .tokenizer import KimiTokenizer, tokenizer_for_profile

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

    def __repr__(self) -> str:  # the ids and text of a long turn would fill a notebook: ends and lengths only
        return (
            f"Reconstruction(ids={ids_repr(self.ids)}, text={text_repr(self.text)}, "
            f"flags=({', '.join(f.code.value for f in self.flags)}), source={self.source!r}, "
            f"profile={self.profile!r}, thinking={self.thinking})"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form: ``ids``, ``text``, ``flags`` (:func:`~kimi_recon.flags.flags_to_json`),
        ``source``, ``profile``, ``thinking``."""
        return {
            "ids": list(self.ids),
            "text": self.text,
            "flags": flags_to_json(self.flags),
            "source": self.source,
            "profile": self.profile,
            "thinking": self.thinking,
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
    if special_text == "special" or prof.fields_always_ordinary:
        return encode_segments(rendered.segments, tokenizer, prof, fields_plain=rendered.fields_plain, text=rendered.text)
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
    thinking: bool = True,
    *,
    call_index_offset: int = 0,
    special_text: SpecialTextMode = "special",
    use_logprobs: bool = True,
    stop: str | None = None,
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
    """
    turn = as_turn(turn)
    model = turn.metadata.get("model")
    prof = profile_or_model(profile, model)
    tok = tokenizer_for_profile(tokenizer, prof)
    rendered = render_turn_with_flags(turn, prof, thinking, call_index_offset=call_index_offset, stop=stop)
    ids = encode_rendered(rendered, tok, special_text, prof)
    flags = list(rendered.flags) + surrogate_flags(rendered.segments, rendered.text)  # after: the text's UTF-8 is cached
    mismatch = model_mismatch(prof, model)
    if mismatch is not None:
        flags.insert(0, mismatch)
    source: Literal["rendered", "logprobs"] = "rendered"
    if use_logprobs and turn.logprobs is not None:
        from_logprobs, why = _ids_via_logprobs(turn, rendered, ids, tok, prof)
        if from_logprobs is not None:
            ids, source = from_logprobs, "logprobs"
        code = FlagCode.LOGPROBS_USED if from_logprobs is not None else FlagCode.LOGPROBS_FALLBACK
        flags.append(Flag(code, why, "logprobs"))
    return Reconstruction(ids, rendered.text, tuple(flags), source, prof.name, thinking)


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
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"first difference at index {n}"
