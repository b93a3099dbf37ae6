"""Audits that catch wrong special-token ids: a tokenizer against the registry, and a user's own constants."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ._base.arguments import instance_argument
from .errors import InvalidInputError, preview
from .profiles import ChatProfile, special_tokens_for
from .special_tokens import SPECIAL_TOKENS, SpecialToken, SpecialTokenRegistry, registry_matching
from .tokenizer import KimiTokenizer, checked_tokenizer, load_tokenizer


@dataclass(frozen=True)
class TokenCheckReport:
    """What an audit checked and what it found. ``ok`` (and ``bool(report)``) is True when ``problems`` is empty."""

    subject: str
    checked: int
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        # ``assert check_token_ids(...)`` must fail on the wrong constant; a dataclass is otherwise always true
        return self.ok

    def __str__(self) -> str:
        head = f"{self.subject}: {self.checked} checked, " + ("OK" if self.ok else f"{len(self.problems)} problem(s)")
        lines = [head] + [f"  PROBLEM {p}" for p in self.problems] + [f"  note {n}" for n in self.notes]
        return "\n".join(lines)


def _tokenizer_and_registry(
    tokenizer: KimiTokenizer | None, registry: SpecialTokenRegistry | None, profile: str | ChatProfile | None
) -> tuple[KimiTokenizer, SpecialTokenRegistry]:
    """The tokenizer (default: the bundled one of ``profile``) and the table to check against: ``registry``,
    else the profile's, else the one the tokenizer's own names agree with."""
    tok = checked_tokenizer(tokenizer) or load_tokenizer(profile=profile)
    instance_argument(registry, "registry", SpecialTokenRegistry, "a SpecialTokenRegistry", none=True)
    if registry is not None:
        return tok, registry
    if profile is not None:
        return tok, special_tokens_for(profile)
    return tok, registry_matching({tid: text for text, tid in tok.special_tokens.items()})


def check_special_tokens(
    tokenizer: KimiTokenizer | None = None,
    registry: SpecialTokenRegistry | None = None,
    *,
    profile: str | ChatProfile | None = None,
) -> TokenCheckReport:
    """Check every registry entry against ``tokenizer``: its table agrees, ``encode(text) == [id]``,
    ``decode([id]) == text``, and no two registry entries share a text or an id.

    The table is ``registry``, else ``profile``'s (``"kimi-k3"``: K3's names), else the one the
    tokenizer's names agree with."""
    tok, reg = _tokenizer_and_registry(tokenizer, registry, profile)
    problems: list[str] = []
    seen_text: dict[str, SpecialToken] = {}
    seen_id: dict[int, SpecialToken] = {}
    for entry in reg:
        label = f"{entry.text!r} (id {entry.id})"
        if entry.text in seen_text:
            problems.append(f"{label} collides with {seen_text[entry.text].text!r} (id {seen_text[entry.text].id}): same text")
        if entry.id in seen_id:
            problems.append(f"{label} collides with {seen_id[entry.id].text!r}: same id")
        seen_text[entry.text] = entry
        seen_id[entry.id] = entry
        table_id = tok.special_tokens.get(entry.text)
        if table_id != entry.id:
            actual = f"id {table_id}" if table_id is not None else "no entry"
            problems.append(f"{label}: the tokenizer's special-token table has {actual}")
        ids = tok.encode(entry.text)
        if ids != [entry.id]:
            problems.append(f"{label}: encode gives {ids}, expected [{entry.id}]")
        if 0 <= entry.id < tok.vocab_size:
            decoded = tok.decode([entry.id])
            if decoded != entry.text:
                problems.append(f"{label}: decode([{entry.id}]) gives {decoded!r}")
        else:
            problems.append(f"{label}: id is outside the vocabulary (0..{tok.vocab_size - 1})")
        added = tok.added_tokens.get(entry.id)
        if added is not None and added.special != entry.special:
            problems.append(f"{label}: tokenizer_config marks it special={added.special}, the registry special={entry.special}")
    return TokenCheckReport(f"special tokens of {tok.source or 'tokenizer'} against the {reg.name} table", len(reg), tuple(problems))


# Readable aliases users give their constants, beyond the registry's own names.
_ALIASES: Mapping[str, tuple[str, ...]] = {
    "EOS": ("[EOS]", "<|im_end|>"),  # config.json's eos_token_id is <|im_end|>; the tokenizer's eos_token is [EOS]
    "STOP": ("<|im_end|>",),
    "END_OF_TURN": ("<|im_end|>",),
    "THINK_START": ("<think>",),
    "THINK_BEGIN": ("<think>",),
    "THINK_OPEN": ("<think>",),
    "THINK_CLOSE": ("</think>",),
    "THINKING_END": ("</think>",),
    "THINK_STOP": ("</think>",),
    "USER": ("<|im_user|>",),
    "ASSISTANT": ("<|im_assistant|>",),
    "SYSTEM": ("<|im_system|>",),
    "MIDDLE": ("<|im_middle|>",),
    "TOOL_CALLS_BEGIN": ("<|tool_calls_section_begin|>",),
    "TOOL_CALLS_END": ("<|tool_calls_section_end|>",),
    "TOOL_CALL_ARG_BEGIN": ("<|tool_call_argument_begin|>",),
    "TOOL_CALL_ARGS_BEGIN": ("<|tool_call_argument_begin|>",),
    "IMAGE_PAD": ("<|media_pad|>",),
    "MEDIA_PLACEHOLDER": ("<|media_pad|>",),
}
# The same for Kimi-K3's table (163586 ``<|end_of_msg|>`` ends every message).
_K3_ALIASES: Mapping[str, tuple[str, ...]] = {
    "EOS": ("[EOS]", "<|end_of_msg|>"),
    "STOP": ("<|end_of_msg|>",),
    "END_OF_TURN": ("<|end_of_msg|>",),
    "EOM": ("<|end_of_msg|>",),
    "END_OF_MESSAGE": ("<|end_of_msg|>",),
    "MSG_END": ("<|end_of_msg|>",),
    "TAG_OPEN": ("<|open|>",),
    "TAG_CLOSE": ("<|close|>",),
    "TAG_SEP": ("<|sep|>",),
    "IMAGE_PAD": ("<|media_pad|>",),
    "MEDIA_PLACEHOLDER": ("<|media_pad|>",),
}
# K2.5 tokens a K3 pipeline may still name, and what K3 has instead: the same id under another name, or
# XTML text (tags are ordinary text between <|open|>/<|close|> and <|sep|>).
_K25_IN_K3: Mapping[str, str] = {
    "<|im_end|>": "<|end_of_msg|>",
    "<think>": "<|open|>think<|sep|>",
    "</think>": "<|close|>think<|sep|>",
    "<|im_user|>": '<|open|>message role="user"<|sep|>',
    "<|im_assistant|>": '<|open|>message role="assistant"<|sep|>',
    "<|im_system|>": '<|open|>message role="system"<|sep|>',
    "<|im_middle|>": "<|sep|>",
    "<|tool_calls_section_begin|>": "<|open|>tools<|sep|>",
    "<|tool_calls_section_end|>": "<|close|>tools<|sep|>",
    "<|tool_call_begin|>": '<|open|>call tool="…" index="…"<|sep|>',
    "<|tool_call_argument_begin|>": '<|open|>argument key="…" type="…"<|sep|>',
    "<|tool_call_end|>": "<|close|>call<|sep|>",
}
#: Per special-token table (``SpecialTokenRegistry.name``): the other names constants use for its tokens,
#: and what it has instead of each K2.5 token (a table missing here has K2.5's tokens).
_ALIASES_OF: Mapping[str, Mapping[str, tuple[str, ...]]] = {"kimi-k2.5": _ALIASES, "kimi-k3": _K3_ALIASES}
_INSTEAD_OF_K25: Mapping[str, Mapping[str, str]] = {"kimi-k3": _K25_IN_K3}
_SUFFIXES = re.compile(r"(_TOKEN_IDS?|_TOKEN|_IDS?)$")


def _meant_tokens(name: str, registry: SpecialTokenRegistry) -> tuple[str, ...]:
    """The token text(s) a constant's name means, or () when the name says nothing we know."""
    key = _SUFFIXES.sub("", re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_"))
    aliases = _ALIASES_OF.get(registry.name, _ALIASES)
    for prefix in ("", "KIMI_", "K2_", "K25_", "K3_"):
        if key.startswith(prefix):
            short = key[len(prefix) :]
            entry = registry.get(short) if short else None
            if entry is not None and entry.name == short:
                return (entry.text,) + tuple(t for t in aliases.get(short, ()) if t != entry.text)
            if short in aliases:
                return aliases[short]
    return ()


def _k25_constant_in_k3(name: str, value: int, decoded: str, reg: SpecialTokenRegistry) -> tuple[str | None, str | None]:
    """(problem, note) for a constant named after a K2.5 token, checked against a table that renames
    K2.5's tokens (K3's)."""
    meant = _meant_tokens(name, SPECIAL_TOKENS)
    renamed = _INSTEAD_OF_K25.get(reg.name)
    if not meant or renamed is None:
        return None, None
    k25 = meant[0]
    k25_id = SPECIAL_TOKENS.id(k25)
    here = reg.text(k25_id)
    instead = renamed.get(k25)
    if instead is not None and instead in reg:  # the same id under another name
        if value == k25_id:
            return None, f"{name} = {value} is {here} in {reg.name} (K2.5's {k25}); the id is right, the name is K2.5's"
        return f"{name} = {value} decodes to {decoded!r}; in {reg.name}, K2.5's {k25} is {instead} ({reg.id(instead)})", None
    what = f"; K3 writes {instead} instead" if instead else ""
    return f"{name} = {value} means K2.5's {k25}, which {reg.name} does not have: id {k25_id} is {here} there{what}", None


def check_token_ids(
    constants: Mapping[str, int],
    tokenizer: KimiTokenizer | None = None,
    registry: SpecialTokenRegistry | None = None,
    *,
    profile: str | ChatProfile | None = None,
) -> TokenCheckReport:
    """Check a user's own id constants, e.g. ``{"IM_END_TOKEN_ID": 163533}``.

    Each name is read as the token it means (``IM_END_TOKEN_ID`` -> ``<|im_end|>``); a wrong id is
    reported with what it decodes to and the right id. Names that mean no known token are only
    checked to be valid ids, and listed as notes. With ``profile="kimi-k3"`` the names are read in K3's
    table; a K2.5 name says what K3 has instead (``IM_END_TOKEN_ID = 163586`` is ``<|end_of_msg|>`` there).
    """
    if not isinstance(constants, Mapping):
        raise InvalidInputError(f"must be an object of NAME: id, got {type(constants).__name__}", field="constants")
    tok, reg = _tokenizer_and_registry(tokenizer, registry, profile)
    problems: list[str] = []
    notes: list[str] = []
    for name, value in constants.items():
        if not isinstance(name, str):
            problems.append(f"{preview(name)} is not a constant name (a string)")
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{name} = {preview(value)} is not an int token id")
            continue
        if not 0 <= value < tok.vocab_size:
            problems.append(f"{name} = {value} is outside the vocabulary (0..{tok.vocab_size - 1})")
            continue
        decoded = tok.decode([value])
        meant = _meant_tokens(name, reg)
        if not meant:
            problem, note = _k25_constant_in_k3(name, value, decoded, reg)
            if problem is not None or note is not None:
                problems.extend([problem] if problem else [])
                notes.extend([note] if note else [])
                continue
            notes.append(f"{name} = {value} decodes to {decoded!r}; the name does not say which token it means")
            continue
        right = [reg.id(text) for text in meant]
        if value not in right:
            want = " or ".join(f"{text} is {tid}" for text, tid in zip(meant, right, strict=True))
            problems.append(f"{name} = {value} decodes to {decoded!r}; {want}")
        elif len(meant) > 1:
            notes.append(f"{name} = {value} ({decoded}); note: {' and '.join(meant)} are both called EOS in Kimi configs")
    return TokenCheckReport("id constants", len(constants), tuple(problems), tuple(notes))


def assert_special_tokens_ok(
    tokenizer: KimiTokenizer | None = None,
    constants: Mapping[str, int] | None = None,
    *,
    profile: str | ChatProfile | None = None,
) -> None:
    """One line for a user's pytest suite: fail with the full report if the tokenizer or the constants are wrong."""
    reports = [check_special_tokens(tokenizer, profile=profile)]
    if constants is not None:
        reports.append(check_token_ids(constants, tokenizer, profile=profile))
    bad = [str(r) for r in reports if not r.ok]
    if bad:
        raise AssertionError("\n".join(bad))


# The names before the reorganisation of issue 12 ("audit" now means only the round trip of kimi_recon.dataset);
# kept so code written against them still runs. Not exported.
audit_special_tokens = check_special_tokens
audit_ids = check_token_ids
AuditReport = TokenCheckReport
