"""Compare the ids a model really generated with reconstructed ones, and say what kind of difference it is.

:func:`compare_ids` answers "are these the same ids, and if not, how do they differ?" with a
:class:`Comparison`: one :data:`Kind`, every kind found, the first differing index and the decoded
tokens around it on both sides. :func:`is_canonical` says whether ids are what one encode of their own
text gives; :func:`check_ids` validates an id list.

This is the public face of six private modules, one job each: the result types and the kinds
(:mod:`kimi_recon._compare.comparison`), checks on one id list (:mod:`kimi_recon._compare.ids`), splitting an id list into
its parts (:mod:`kimi_recon._compare.segmentation`), lining two up (:mod:`kimi_recon._compare.align`), the rule that names
the kind (:mod:`kimi_recon._compare.classify`, the steps documented on :func:`compare_ids`) and the evidence
(:mod:`kimi_recon._compare.evidence`).
"""

from __future__ import annotations

from collections.abc import Sequence

from ._base.arguments import instance_argument, int_argument
from ._compare.classify import SUBSTITUTE_MAX_TOKENS, classify
from ._compare.comparison import (
    BENIGN_KINDS,
    EXACT,
    KINDS,
    NON_CANONICAL_BPE,
    REASONING_MISSING,
    SPECIAL_TOKEN_MISMATCH,
    TEXT_MISMATCH,
    TOOL_CALL_FORMAT,
    WHITESPACE_DRIFT,
    Comparison,
    Kind,
    MismatchKind,
    Region,
    TokenView,
)
from ._compare.evidence import comparison
from ._compare.ids import check_ids, is_canonical
from ._compare.segmentation import id_view
from .tokenizer import KimiTokenizer, checked_tokenizer, load_tokenizer

__all__ = [
    "BENIGN_KINDS",
    "EXACT",
    "KINDS",
    "NON_CANONICAL_BPE",
    "REASONING_MISSING",
    "SPECIAL_TOKEN_MISMATCH",
    "SUBSTITUTE_MAX_TOKENS",
    "TEXT_MISMATCH",
    "TOOL_CALL_FORMAT",
    "WHITESPACE_DRIFT",
    "Comparison",
    "Kind",
    "MismatchKind",
    "Region",
    "TokenView",
    "check_ids",
    "compare_checked_ids",
    "compare_ids",
    "is_canonical",
]

#: Steps of difflib's longest-match search (its inner loop) one comparison may spend pairing special ids.
#: Turns with a few special ids need a few hundred and get difflib's pairing exactly; past the budget (texts
#: with thousands of special ids, where difflib is quadratic) the remaining stretches are paired by the
#: units that occur once on each side instead, which is near-linear. Read on every call (tests lower it).
ALIGN_BUDGET = 200_000


def compare_ids(
    reference: Sequence[int],
    reconstructed: Sequence[int],
    tokenizer: KimiTokenizer | None = None,
    *,
    context: int = 4,
) -> Comparison:
    """Compare the ids the model generated (``reference``) with reconstructed ones.

    Decision rule. Every kind of difference present is found, and :attr:`Comparison.kind` is the most
    serious one, in this order (benign first)::

        exact < non_canonical_bpe < whitespace_drift < reasoning_missing
              < special_token_mismatch < tool_call_format < text_mismatch

    so a kind only stands when nothing worse is present: ``non_canonical_bpe`` guarantees the same
    bytes and the same special ids, and a claim such as "the rest are benign BPE differences" is checked
    by ``kind in BENIGN_KINDS``. The kinds are found as follows:

    1. ``exact``: the id lists are equal.
    2. Truncation: when one side's bytes are a prefix of the other's and the longer side continues with
       at least one special id (``<|im_end|>``, ``</think>``, tool-call markers), the kind is
       ``special_token_mismatch`` (the output was cut, or its end token is missing).
    3. ``reasoning_missing``: one side has reasoning (non-whitespace text before its first ``</think>``)
       and the other has none (empty reasoning, or no ``</think>`` at all, as with ``thinking=False``).
       The reasoning and its ``</think>`` are then set aside and the rest of both sides is compared below.
       (When both or neither have reasoning, reasoning differences are compared like any other text.)
    4. ``tool_call_format``: the tool-call sections (``<|tool_calls_section_begin|>`` .. ``_end|>``) differ
       in anything but the BPE split: call ids, markers, argument JSON (whitespace included), or one side
       has a section and the other has none. The sections are then set aside.
    5. What remains is split at its special ids. With the same special ids on both sides, each run of
       ordinary ids between them is compared: the same bytes is ``non_canonical_bpe``, the same text
       apart from whitespace (``str.isspace``) is ``whitespace_drift``, anything else ``text_mismatch``.
       With different special ids it is ``special_token_mismatch``; the special ids are paired by the
       texts around them (so an extra ``<|im_end|>`` in the middle does not shift the pairing; difflib's
       matching while it costs under :data:`ALIGN_BUDGET` steps, then units that occur once on each
       side, so the whole comparison stays near-linear in the number of ids), and each
       stretch between paired special ids is checked. Its common start and end (same bytes, cut at a
       token boundary of both sides, so a different split there only adds ``non_canonical_bpe``) are set
       aside; the rest is explained by the special ids alone when (a) its ordinary text is the same (a
       missing, extra or other special id; whitespace differences add ``whitespace_drift``),
       (b) the same text is spelled with a special id on one side and ordinary ids on the other, (c) one
       side holds only special ids and the other at most :data:`SUBSTITUTE_MAX_TOKENS` ids (a wrong
       constant, such as 163533 for ``<|im_end|>``), or (d) at the end, one side is a prefix of the other
       (a cut). Any other stretch adds ``text_mismatch``.

    So a wrong ``<|im_end|>`` id is ``special_token_mismatch`` even though 163533 is an ordinary id; a
    special-token difference with the same text elsewhere is ``special_token_mismatch``; with a text
    difference elsewhere too it is ``text_mismatch`` (and ``kinds`` lists both).

    Ids outside the vocabulary raise :class:`InvalidInputError` naming ``reference`` or ``reconstructed``.
    """
    tok = checked_tokenizer(tokenizer) or load_tokenizer()
    return compare_checked_ids(check_ids(reference, tok, "reference"), check_ids(reconstructed, tok, "reconstructed"), tok, context=context)


def compare_checked_ids(reference: list[int], reconstructed: list[int], tokenizer: KimiTokenizer, *, context: int = 4) -> Comparison:
    """:func:`compare_ids` for ids already validated (by :func:`check_ids`, or produced by the tokenizer):
    only that they are lists and ``context`` a non-negative int are checked here."""
    context = int_argument(context, "context", minimum=0)
    instance_argument(tokenizer, "tokenizer", KimiTokenizer, "a KimiTokenizer (see load_tokenizer)")
    instance_argument(reference, "reference", list, "a list of token ids (see check_ids)")
    instance_argument(reconstructed, "reconstructed", list, "a list of token ids (see check_ids)")
    view = id_view(tokenizer)
    try:
        kinds, detail = classify(reference, reconstructed, view, ALIGN_BUDGET)
        return comparison(reference, reconstructed, kinds, detail, context, view)
    except (TypeError, ValueError, KeyError, IndexError, OverflowError):
        # ids that were not checked after all: the checker names the list and the item (free when they were)
        check_ids(reference, tokenizer, "reference")
        check_ids(reconstructed, tokenizer, "reconstructed")
        raise
