"""The public API is exactly these names (like httpx's test_exported_members.py): adding or dropping one is a decision."""

from __future__ import annotations

import importlib
import warnings

import pytest

import kimi_recon
import kimi_recon.openrouter

PUBLIC = {
    # the tokenizer
    "load_tokenizer", "KimiTokenizer",
    # reading a response
    "turn_from_response", "AssistantTurn", "ToolCall", "Flag",
    # the ids of one turn (or many), and how two id lists differ
    "render_assistant_turn", "reconstruct_output_ids", "reconstruct_many", "Reconstruction", "compare_ids", "Comparison",
    # special-token ids: the tokenizer's table and a user's constants
    "check_special_tokens", "check_token_ids", "SPECIAL_TOKENS", "get_profile",
    # round-trip audits of records
    "audit_record", "audit_dataset",
    # training samples
    "render_prompt", "build_training_sample", "TrainingSample", "build_samples", "sample_batch",
    # the base of every error
    "KimiReconError",
}  # fmt: skip

OPENROUTER_PUBLIC = {
    "InvalidResponseError", "OpenRouterError", "redact", "assemble_stream", "count_tool_calls", "is_model_call_id",
    "iter_sse_lines", "iter_stream_chunks", "model_call_id", "replace_foreign_call_ids", "turn_from_openrouter",
    "turn_from_stream",
}  # fmt: skip


def test_the_top_level_exports_exactly_the_public_api() -> None:
    assert set(kimi_recon.__all__) == PUBLIC
    assert len(kimi_recon.__all__) == len(PUBLIC)  # no name twice


def test_the_openrouter_package_exports_exactly_its_public_api() -> None:
    assert set(kimi_recon.openrouter.__all__) == OPENROUTER_PUBLIC


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_every_public_name_resolves_and_names_itself(name: str) -> None:
    value = getattr(kimi_recon, name)
    if hasattr(value, "__name__"):  # functions and classes say their own name (constants do not)
        assert value.__name__ == name


def test_every_name_of_every_documented_submodule_is_defined() -> None:
    for module in ("errors", "special_tokens", "profiles", "fast_tokenizer", "logprobs", "audit", "dataset", "compare"):
        mod = importlib.import_module(f"kimi_recon.{module}")
        for name in getattr(mod, "__all__", ()):
            assert hasattr(mod, name), f"kimi_recon.{module}.__all__ names {name!r}, which it does not define"


@pytest.mark.parametrize("old", sorted(kimi_recon._MOVED))
def test_a_name_dropped_from_the_top_level_still_works_with_a_warning_naming_its_home(old: str) -> None:
    module, new = kimi_recon._MOVED[old]
    with pytest.warns(DeprecationWarning, match=rf"use kimi_recon\.{module}\.{new}$"):
        value = getattr(kimi_recon, old)
    assert value is getattr(importlib.import_module(f"kimi_recon.{module}"), new)
    assert old not in kimi_recon.__all__


def test_renamed_functions_keep_their_old_names_in_their_modules() -> None:
    from kimi_recon import audit, errors, render
    from kimi_recon.openrouter import parse

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert audit.audit_special_tokens is audit.check_special_tokens
        assert audit.audit_ids is audit.check_token_ids
        assert audit.AuditReport is audit.TokenCheckReport
        assert render.render_turn is render.render_turn_with_flags
        assert errors.ResponseError is errors.ServerReportedError
        assert parse.turn_from_response is parse.turn_from_openrouter


def test_the_old_openrouter_turn_from_response_warns_and_gives_turn_from_openrouter() -> None:
    with pytest.warns(DeprecationWarning, match="now kimi_recon.openrouter.turn_from_openrouter"):
        old = kimi_recon.openrouter.turn_from_response
    assert old is kimi_recon.openrouter.turn_from_openrouter
