"""The default :data:`~kimi_recon.openrouter.rows.Reconstructor`: kimi-recon's own reconstruction.

Imported lazily by the generate run, so the parsing half of the adapter works (and is testable) on its
own. The tokenizer is loaded once per run. The reconstructor runs in the single writer thread; the
prompt counter (for the usage check) runs in the worker threads, before each request is sent, so in a
real run it overlaps the wait for the server (the tokenizer is thread-safe, and tiktoken releases the
GIL while it encodes).
"""

from __future__ import annotations

from collections.abc import Callable

from ..models import AssistantTurn
from .parse import count_tool_calls
from .prompts import Prompt
from .rows import Rebuilt, Reconstructor, flag, flag_dicts

#: The number of ids of one prompt as the chat template renders it (the usage check's ``prompt_tokens``).
PromptCounter = Callable[[Prompt], int]


def make_reconstructor(
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    tokenizer: str | None = None,
    prompt_ids: bool = False,
    training_sample: bool = False,
) -> Reconstructor:
    """A function rebuilding one prompt's output ids (and, when asked, its prompt ids and training row)."""
    from ..reconstruct import reconstruct_output_ids
    from ..tokenizer import load_tokenizer
    from ..training import build_training_sample

    tok = load_tokenizer(tokenizer)

    def rebuild(prompt: Prompt, turn: AssistantTurn) -> Rebuilt:
        offset = count_tool_calls(prompt.messages)
        recon = reconstruct_output_ids(turn, tok, profile, thinking, call_index_offset=offset)
        flags = list(flag_dicts(recon.flags))
        if not (prompt_ids or training_sample):
            return Rebuilt(recon.ids, recon.source, tuple(flags))
        sample = build_training_sample(
            list(prompt.messages), turn, list(prompt.tools) if prompt.tools else None, profile, thinking, tok
        )
        if sample.output_ids != recon.ids:
            # Both come from the same reconstruction; a difference would be a bug worth seeing.
            flags.append(flag("sample_output_mismatch", "the training sample's output ids differ from output_ids"))
        return Rebuilt(
            recon.ids,
            recon.source,
            tuple(flags),
            prompt_ids=sample.prompt_ids if prompt_ids else None,
            sample=sample.to_dict() if training_sample else None,
            prompt_len=sample.prompt_len,
        )

    return rebuild


def make_prompt_counter(*, profile: str = "kimi-k2.5", thinking: bool = True, tokenizer: str | None = None) -> PromptCounter:
    """A function giving the length of a prompt's ids (the ids ``--prompt-ids`` writes); raises a
    :class:`~kimi_recon.errors.KimiReconError` when the prompt cannot be rendered."""
    from ..tokenizer import load_tokenizer, tokenizer_for_profile
    from ..training import encode_prompt

    tok = tokenizer_for_profile(load_tokenizer(tokenizer), profile)

    def count(prompt: Prompt) -> int:
        return len(encode_prompt(list(prompt.messages), list(prompt.tools) if prompt.tools else None, profile, thinking, tok))

    return count
