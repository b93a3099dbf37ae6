"""The default :data:`~kimi_recon.openrouter.rows.Reconstructor`: kimi-recon's own reconstruction.

Imported lazily by the generate run, so the parsing half of the adapter works (and is testable) on its
own. The tokenizer is loaded once per run. The reconstructor runs in the single writer thread; the
prompt counter (for the usage check) runs in the worker threads, before each request is sent, so in a
real run it overlaps the wait for the server (the tokenizer is thread-safe, and tiktoken releases the
GIL while it encodes).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._base.arguments import int_argument
from ..errors import InvalidInputError
from ..flags import Flag, FlagCode
from ..models import AssistantTurn
from .parse import count_tool_calls
from .prompts import Prompt
from .rows import Rebuilt, Reconstructor

if TYPE_CHECKING:
    from ..profiles import ChatProfile
    from ..tokenizer import KimiTokenizer

#: The number of ids of one prompt as the chat template renders it (the usage check's ``prompt_tokens``).
PromptCounter = Callable[[Prompt], int]


def make_reconstructor(
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    tokenizer: str | KimiTokenizer | None = None,
    prompt_ids: bool = False,
    training_sample: bool = False,
    server: str | None = None,
) -> Reconstructor:
    """A function rebuilding one prompt's output ids (and, when asked, its prompt ids and training row)."""
    from ..reconstruct import _output_ids
    from ..tokenizer import load_tokenizer
    from ..training import build_training_sample

    tok = load_tokenizer(tokenizer)

    def rebuild(prompt: Prompt, turn: AssistantTurn) -> Rebuilt:
        offset = count_tool_calls(prompt.messages)
        # without the usage check: generate runs it on the row, the prompt's figure too (--no-usage-check: none)
        recon = _output_ids(turn, tok, profile, thinking, offset, "special", True, None, server, None)[1]
        flags = list(recon.flags)
        if not (prompt_ids or training_sample):
            return Rebuilt(recon.ids, recon.source, tuple(flags))
        sample = build_training_sample(
            list(prompt.messages), turn, list(prompt.tools) if prompt.tools else None, profile, thinking, tok, server=server
        )
        if sample.output_ids != recon.ids:
            # Both come from the same reconstruction; a difference would be a bug worth seeing.
            flags.append(Flag(FlagCode.SAMPLE_OUTPUT_MISMATCH, "the training sample's output ids differ from output_ids"))
        return Rebuilt(
            recon.ids,
            recon.source,
            tuple(flags),
            prompt_ids=sample.prompt_ids if prompt_ids else None,
            sample=sample.to_dict() if training_sample else None,
            prompt_len=sample.prompt_len,
        )

    return rebuild


#: The largest ``cache_size`` :func:`make_prompt_counter` takes: far more pieces than any run repeats.
_MAX_CACHE_SIZE = 1 << 24


def make_prompt_counter(
    *, profile: str = "kimi-k2.5", thinking: bool = True, tokenizer: str | KimiTokenizer | None = None, cache_size: int = 4096
) -> PromptCounter:
    """A function giving the length of a prompt's ids (the ids ``--prompt-ids`` writes); raises a
    :class:`~kimi_recon.errors.KimiReconError` when the prompt cannot be rendered.

    For a profile whose prompt is one encode of the rendered text (K2.x), the text between special
    tokens is counted piece by piece, and the counts of the last ``cache_size`` pieces are kept: special
    tokens are hard BPE boundaries, so the sum is the one encode's length, and the system prompt and tool
    declaration most runs repeat in every prompt are encoded once. With the bundled K2.5 template, the
    pieces come from :func:`~kimi_recon._render.k25_prompt.k25_prompt_fragments` (the template in Python, no
    jinja render) and the tool declarations of recent tool lists are kept too; messages it does not cover
    are rendered with the template.
    """
    from ..profiles import get_profile
    from ..special_tokens import SPECIAL_TEXT_SHAPE, special_texts_in
    from ..tokenizer import MAX_RUN_CHARS, load_tokenizer, tokenizer_for_profile
    from ..training import encode_prompt, render_prompt

    cache_size = int_argument(cache_size, "cache_size", minimum=0)
    if cache_size > _MAX_CACHE_SIZE:  # (functools.lru_cache takes no more than a C index holds)
        raise InvalidInputError(f"must be at most {_MAX_CACHE_SIZE}, got {cache_size}", field="cache_size")
    prof = get_profile(profile)
    tok = tokenizer_for_profile(load_tokenizer(tokenizer), prof)

    def args(prompt: Prompt) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]] | None]:
        return list(prompt.messages), list(prompt.tools) if prompt.tools else None

    specials = tok.special_tokens
    if prof.encoding != "one_encode" or not all(SPECIAL_TEXT_SHAPE.fullmatch(t) for t in specials):
        return lambda prompt: len(encode_prompt(*args(prompt), prof, thinking, tok))

    @functools.lru_cache(maxsize=cache_size)
    def piece_len(piece: str) -> int:
        return len(tok.encode(piece, allowed_special=set()))

    def rendered(prompt: Prompt) -> int:
        text = render_prompt(*args(prompt), prof, thinking, tok)
        if len(text) > MAX_RUN_CHARS:  # the official encode may cut long runs: encode it as it does
            return len(tok.encode(text))
        return count_between_specials(text, special_texts_in(text, specials), piece_len)

    from .._render.k25_prompt import TEMPLATE_MARKERS, k25_prompt_fragments, uses_k25_template

    if not (type(thinking) is bool and uses_k25_template(prof, tok) and TEMPLATE_MARKERS <= specials.keys()):
        return rendered
    declaration = _declaration_counter(prof, thinking, TOOL_LISTS_KEPT)

    @functools.lru_cache(maxsize=cache_size)
    def fragment_len(fragment: str) -> int:
        return count_between_specials(fragment, special_texts_in(fragment, specials), piece_len)

    def count(prompt: Prompt) -> int:
        messages, tools = args(prompt)
        fragments = k25_prompt_fragments(messages, declaration(tools) if tools else None, thinking)
        if fragments is None:
            return rendered(prompt)
        if sum(map(len, fragments)) > MAX_RUN_CHARS:
            return len(tok.encode("".join(fragments)))
        return sum(1 if f in TEMPLATE_MARKERS else fragment_len(f) for f in fragments if f)

    return count


#: Tool lists whose declaration the prompt counter keeps: a run usually sends one or a few, and each entry holds
#: the list twice (JSON text and parsed) plus its declaration, so many large distinct lists must not pile up.
TOOL_LISTS_KEPT = 32


def _declaration_counter(prof: ChatProfile, thinking: bool, cache_size: int) -> Callable[[list[Mapping[str, Any]]], str | None]:
    """The tool declaration the K2.5 template is given for a tool list (as :func:`~kimi_recon.training.render_prompt`
    makes it), kept for the last ``cache_size`` tool lists: a run usually sends the same tools every time."""
    from .._records.prompt import deep_sorted
    from ..record_options import parse_options
    from ..tool_declaration import render_tools_declaration

    def declaration(tools: object) -> str | None:
        options = parse_options(profile=prof, thinking=thinking, tools=tools)
        return render_tools_declaration(deep_sorted(list(options.tools))) if options.tools else None

    @functools.lru_cache(maxsize=cache_size)
    def of_json(key: str) -> tuple[Any, str | None]:
        plain = json.loads(key)
        return plain, declaration(plain)

    def cached(tools: list[Mapping[str, Any]]) -> str | None:
        try:
            key = json.dumps(tools, sort_keys=True, ensure_ascii=False)
        except (TypeError, ValueError, RecursionError):
            return declaration(tools)
        plain, text = of_json(key)
        # Equal to its JSON's parse: plain JSON (a tuple, a non-string key or a NaN is not), so the key says it all.
        return text if plain == tools else declaration(tools)

    return cached


def count_between_specials(text: str, special_texts: Sequence[str], piece_len: Callable[[str], int]) -> int:
    """The number of ids of ``text``: one per special token in ``special_texts`` (every special-token text in
    ``text``, in order) plus ``piece_len`` of each piece of text between them."""
    total, start = 0, 0
    for special in special_texts:
        at = text.index(special, start)
        total += (piece_len(text[start:at]) if at > start else 0) + 1
        start = at + len(special)
    return total + (piece_len(text[start:]) if start < len(text) else 0)
