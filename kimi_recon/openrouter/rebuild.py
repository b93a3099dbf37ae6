"""The default :data:`~kimi_recon.openrouter.rows.Reconstructor`: kimi-recon's own reconstruction.

Imported lazily by the generate run, so the parsing half of the adapter works (and is testable) on its
own. The tokenizer is loaded once per run and used from the single writer thread only.
"""

from __future__ import annotations

from typing import Any

from ..errors import KimiReconError
from ..models import AssistantTurn
from ..usage_check import PROMPT, TokenCounts, check_with_profile, reported_counts
from .parse import count_tool_calls
from .prompts import Prompt
from .rows import Rebuilt, Reconstructor, flag, flag_dicts


def make_reconstructor(
    *,
    profile: str = "kimi-k2.5",
    thinking: bool = True,
    tokenizer: str | None = None,
    prompt_ids: bool = False,
    training_sample: bool = False,
    check_usage: bool = True,
) -> Reconstructor:
    """A function rebuilding one prompt's output ids (and, when asked, its prompt ids and training row).

    ``check_usage``: compare the rebuilt lengths with the response's ``usage`` (see
    :mod:`kimi_recon.usage_check`); the prompt is rendered and encoded for that when ``usage`` has a
    ``prompt_tokens``, even when its ids are not asked for.
    """
    from ..reconstruct import reconstruct_output_ids
    from ..tokenizer import load_tokenizer
    from ..training import build_training_sample, render_prompt

    tok = load_tokenizer(tokenizer)

    def counts(prompt: Prompt, turn: AssistantTurn, output_ids: list[int], prompt_len: int | None, flags: list[dict[str, Any]]) -> TokenCounts | None:
        usage = turn.metadata.get("usage")
        if not check_usage or usage is None:
            return None
        if prompt_len is None and reported_counts(usage)[0] is not None:
            try:
                tools = list(prompt.tools) if prompt.tools else None
                prompt_len = len(tok.encode(render_prompt(list(prompt.messages), tools, profile, thinking, tok)))
            except KimiReconError as err:  # the row stays usable; only this figure goes unchecked
                flags.append(flag(f"{PROMPT}_unchecked", f"the prompt could not be rendered to check usage.{PROMPT}: {err}", f"usage.{PROMPT}"))
        return check_with_profile(usage, output_ids, prompt_len, profile, truncated_in=turn.metadata.get("truncated_in"))

    def rebuild(prompt: Prompt, turn: AssistantTurn) -> Rebuilt:
        offset = count_tool_calls(prompt.messages)
        recon = reconstruct_output_ids(turn, tok, profile, thinking, call_index_offset=offset)
        flags = list(flag_dicts(recon.flags))
        if not (prompt_ids or training_sample):
            checked = counts(prompt, turn, recon.ids, None, flags)
            return Rebuilt(recon.ids, recon.source, tuple(flags), token_counts=checked)
        sample = build_training_sample(
            list(prompt.messages), turn, list(prompt.tools) if prompt.tools else None, profile, thinking, tok
        )
        if sample.output_ids != recon.ids:
            # Both come from the same reconstruction; a difference would be a bug worth seeing.
            flags.append(flag("sample_output_mismatch", "the training sample's output ids differ from output_ids"))
        checked = counts(prompt, turn, recon.ids, sample.prompt_len, flags)
        return Rebuilt(
            recon.ids,
            recon.source,
            tuple(flags),
            prompt_ids=sample.prompt_ids if prompt_ids else None,
            sample=sample.to_dict() if training_sample else None,
            token_counts=checked,
        )

    return rebuild
