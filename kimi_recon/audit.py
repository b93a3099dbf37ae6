"""Audits that catch wrong special-token ids: a tokenizer against the registry, and a user's own constants."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from .special_tokens import SPECIAL_TOKENS, SpecialToken, SpecialTokenRegistry
from .tokenizer import KimiTokenizer, load_tokenizer


@dataclass(frozen=True)
class AuditReport:
    """What an audit checked and what it found. ``ok`` is True when ``problems`` is empty."""

    subject: str
    checked: int
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = f"{self.subject}: {self.checked} checked, " + ("OK" if self.ok else f"{len(self.problems)} problem(s)")
        lines = [head] + [f"  PROBLEM {p}" for p in self.problems] + [f"  note {n}" for n in self.notes]
        return "\n".join(lines)


def audit_special_tokens(tokenizer: KimiTokenizer | None = None, registry: SpecialTokenRegistry | None = None) -> AuditReport:
    """Check every registry entry against ``tokenizer``: its table agrees, ``encode(text) == [id]``,
    ``decode([id]) == text``, and no two registry entries share a text or an id."""
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    reg = registry if registry is not None else SPECIAL_TOKENS
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
    return AuditReport(f"special tokens of {tok.source or 'tokenizer'}", len(reg), tuple(problems))


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
_SUFFIXES = re.compile(r"(_TOKEN_IDS?|_TOKEN|_IDS?)$")


def _meant_tokens(name: str, registry: SpecialTokenRegistry) -> tuple[str, ...]:
    """The token text(s) a constant's name means, or () when the name says nothing we know."""
    key = _SUFFIXES.sub("", re.sub(r"[^A-Z0-9]+", "_", name.upper()).strip("_"))
    for prefix in ("", "KIMI_", "K2_", "K25_"):
        if key.startswith(prefix):
            short = key[len(prefix) :]
            entry = registry.get(short) if short else None
            if entry is not None and entry.name == short:
                return (entry.text,) + tuple(t for t in _ALIASES.get(short, ()) if t != entry.text)
            if short in _ALIASES:
                return _ALIASES[short]
    return ()


def audit_ids(
    constants: Mapping[str, int], tokenizer: KimiTokenizer | None = None, registry: SpecialTokenRegistry | None = None
) -> AuditReport:
    """Check a user's own id constants, e.g. ``{"IM_END_TOKEN_ID": 163533}``.

    Each name is read as the token it means (``IM_END_TOKEN_ID`` -> ``<|im_end|>``); a wrong id is
    reported with what it decodes to and the right id. Names that mean no known token are only
    checked to be valid ids, and listed as notes.
    """
    tok = tokenizer if tokenizer is not None else load_tokenizer()
    reg = registry if registry is not None else SPECIAL_TOKENS
    problems: list[str] = []
    notes: list[str] = []
    for name, value in constants.items():
        if isinstance(value, bool) or not isinstance(value, int):
            problems.append(f"{name} = {value!r} is not an int token id")
            continue
        if not 0 <= value < tok.vocab_size:
            problems.append(f"{name} = {value} is outside the vocabulary (0..{tok.vocab_size - 1})")
            continue
        decoded = tok.decode([value])
        meant = _meant_tokens(name, reg)
        if not meant:
            notes.append(f"{name} = {value} decodes to {decoded!r}; the name does not say which token it means")
            continue
        right = [reg.id(text) for text in meant]
        if value not in right:
            want = " or ".join(f"{text} is {tid}" for text, tid in zip(meant, right))
            problems.append(f"{name} = {value} decodes to {decoded!r}; {want}")
        elif len(meant) > 1:
            notes.append(f"{name} = {value} ({decoded}); note: {' and '.join(meant)} are both called EOS in Kimi configs")
    return AuditReport("id constants", len(constants), tuple(problems), tuple(notes))


def assert_special_tokens_ok(tokenizer: KimiTokenizer | None = None, constants: Mapping[str, int] | None = None) -> None:
    """One line for a user's pytest suite: fail with the full report if the tokenizer or the constants are wrong."""
    reports = [audit_special_tokens(tokenizer)]
    if constants is not None:
        reports.append(audit_ids(constants, tokenizer))
    bad = [str(r) for r in reports if not r.ok]
    if bad:
        raise AssertionError("\n".join(bad))
