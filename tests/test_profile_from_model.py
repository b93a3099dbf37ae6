"""With no profile given, the response's or record's ``model`` id picks it; a given profile that contradicts
the model id or the reference ids is flagged ``profile_mismatch`` (issue 21, done-item 1).

Every expected id list is Moonshot's official output (tests/data/golden), never this package's own rebuild.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from testdata import GOLDEN, OFFICIAL, read_jsonl

import kimi_recon
from kimi_recon import profiles
from kimi_recon.dataset import audit_dataset, audit_record, reconstruct_record, reconstruct_records
from kimi_recon.flags import FlagCode
from kimi_recon.profiles import get_profile, profile_for_model

K3_TURNS = read_jsonl(GOLDEN / "official-k3-dev" / "turns.jsonl")
K25_TURNS = read_jsonl(OFFICIAL / "turns.jsonl")


def _completion(turn: dict[str, Any], model: str) -> dict[str, Any]:
    return {"object": "chat.completion", "model": model, "choices": [{"index": 0, "message": turn, "finish_reason": "stop"}]}


def _k3_record(case: dict[str, Any], i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"k3-{i}", "response": _completion(case["turn"], "moonshotai/kimi-k3"), "output_ids": case["output_ids"],
            "thinking": case["thinking"], **extra}


def test_a_k3_response_with_no_profile_is_rebuilt_as_the_official_k3_ids() -> None:
    for case in K3_TURNS[:40]:
        result = kimi_recon.reconstruct_output_ids(_completion(case["turn"], "moonshotai/kimi-k3"), thinking=case["thinking"])
        assert (result.profile, result.ids) == ("kimi-k3", case["output_ids"])
        assert FlagCode.PROFILE_MISMATCH not in result.flag_codes


def test_a_k3_record_with_no_profile_is_audited_and_reconstructed_as_k3() -> None:
    records = [_k3_record(case, i) for i, case in enumerate(K3_TURNS[:30])]
    report = audit_dataset(records)
    assert (report.exact_count, report.compared, report.profile) == (30, 30, "kimi-k3")
    assert report.profile_counts == {"kimi-k3": 30} and not report.profile_hints
    assert [list(r.ids or ()) for r in reconstruct_records(records)] == [c["output_ids"] for c in K3_TURNS[:30]]
    assert reconstruct_record(records[0]).ids == K3_TURNS[0]["output_ids"]


def test_a_record_level_model_id_decides_when_the_response_names_none() -> None:
    case = K3_TURNS[0]
    record = {"model": "moonshotai/kimi-k3", "response": case["turn"], "output_ids": case["output_ids"], "thinking": case["thinking"]}
    assert audit_record(record).kind == "exact"


def test_a_given_profile_that_contradicts_the_model_id_is_flagged_with_the_profile_to_use() -> None:
    case = K3_TURNS[0]
    result = kimi_recon.reconstruct_output_ids(_completion(case["turn"], "moonshotai/kimi-k3"), profile="kimi-k2.5", thinking=case["thinking"])
    assert result.profile == "kimi-k2.5"
    flag = next(f for f in result.flags if f.code == FlagCode.PROFILE_MISMATCH)
    assert flag.field == "profile" and flag.message.endswith("use --profile kimi-k3")


def test_k25_reference_ids_audited_as_k3_and_k3_ids_audited_as_k25_are_flagged_and_the_summary_says_which_profile() -> None:
    # no model id anywhere: only the reference ids tell the format
    k25 = [{"id": f"a{i}", "response": c["turn"], "output_ids": c["output_ids"], "thinking": c["thinking"]} for i, c in enumerate(K25_TURNS[:20])]
    report = audit_dataset(k25, profile="kimi-k3")
    assert report.flag_counts.get("profile_mismatch", 0) >= 19  # every one that holds a K2.x marker id
    assert "rerun with --profile kimi-k2.5" in report.summary()
    k3 = [{"id": f"b{i}", "response": c["turn"], "output_ids": c["output_ids"], "thinking": c["thinking"]} for i, c in enumerate(K3_TURNS[:20])]
    report = audit_dataset(k3, profile="kimi-k2.5")
    assert report.flag_counts["profile_mismatch"] == 20 and report.profile_hints == {"kimi-k3": 20}
    assert "rerun with --profile kimi-k3" in report.summary()


def test_no_golden_record_in_its_own_profile_is_flagged_profile_mismatch() -> None:
    for name, rows in (("kimi-k2.5", K25_TURNS), ("kimi-k3", K3_TURNS)):
        records = [{"response": c["turn"], "output_ids": c["output_ids"], "thinking": c["thinking"]} for c in rows]
        assert "profile_mismatch" not in audit_dataset(records, profile=name).flag_counts


def test_a_k3_training_record_with_no_profile_gets_the_official_k3_prompt_and_output_ids() -> None:
    case = K3_TURNS[0]
    sample = kimi_recon.build_training_sample(
        case["messages"], _completion(case["turn"], "moonshotai/kimi-k3"), case["tools"], thinking=case["thinking"],
        thinking_effort=case["thinking_effort"], tool_choice=case["tool_choice"],
    )
    assert sample.input_ids == case["prompt_ids"] + case["output_ids"]


def test_the_cli_audit_with_no_profile_rebuilds_k3_records_as_k3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kimi_recon.cli import main

    path = tmp_path / "k3.jsonl"
    path.write_text("".join(json.dumps(_k3_record(c, i)) + "\n" for i, c in enumerate(K3_TURNS[:5])), encoding="utf-8")
    main(["audit", str(path)])
    out = capsys.readouterr().out
    assert "profile kimi-k3" in out and "exact 5/5" in out


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("moonshotai/kimi-k2", "kimi-k2-instruct"),  # OpenRouter's slug of Kimi-K2-Instruct
        ("moonshotai/kimi-k2-0905", "kimi-k2-instruct"),
        ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2-instruct"),
        ("moonshotai/kimi-k2.7-code", "kimi-k2.7-code"),
        ("kimi-k2.7-code-highspeed", "kimi-k2.7-code"),
        ("moonshotai/Kimi-K3:nitro", "kimi-k3"),
        ("someone/other-model", "kimi-k2.5"),
    ],
)
def test_model_ids_name_their_profile(model: str, profile: str) -> None:
    assert profile_for_model(model) == profile
    assert profiles.profile_or_model(None, model).name == profile


def test_nothing_naming_a_profile_means_kimi_k25() -> None:
    assert profiles.profile_or_model(None, None).name == "kimi-k2.5"
    assert kimi_recon.reconstruct_output_ids(kimi_recon.AssistantTurn(content="hi")).profile == "kimi-k2.5"


def test_a_misspelt_profile_suggests_the_one_meant() -> None:
    with pytest.raises(kimi_recon.KimiReconError, match=re.escape("did you mean 'kimi-k2.5'")):
        get_profile("kimi-k25")


def _preserve_thinking_cases() -> list[dict[str, Any]]:
    # the official dev set rendered final turns without tool calls with the preserve_thinking template (SOURCES.md §9)
    return [c for c in K25_TURNS if not c["turn"].get("tool_calls") and c["thinking"]]


def test_kimi_k27_code_renders_prompts_with_preserve_thinking_on_as_the_official_patched_k25_template() -> None:
    cases = _preserve_thinking_cases()
    assert len(cases) >= 5
    differs = 0
    for case in cases:
        ids = kimi_recon.training.encode_prompt(case["messages"], case["tools"], "kimi-k2.7-code", True)
        assert ids == case["prompt_ids"]
        differs += ids != kimi_recon.training.encode_prompt(case["messages"], case["tools"], "kimi-k2.5", True)
    assert differs  # the stock K2.5 template drops earlier reasoning: the default matters


def test_kimi_k27_code_outputs_are_k25_outputs_and_thinking_off_is_refused() -> None:
    for case in [c for c in K25_TURNS if c["thinking"]][:20]:
        assert kimi_recon.reconstruct_output_ids(case["turn"], profile="kimi-k2.7-code").ids == case["output_ids"]
    with pytest.raises(kimi_recon.KimiReconError, match="no non-thinking mode") as err:
        kimi_recon.reconstruct_output_ids(K25_TURNS[0]["turn"], profile="kimi-k2.7-code", thinking=False)
    assert getattr(err.value, "field", None) == "thinking"


# -- the ids users have (issue 33): dated slugs, variants, Kimi Code's names; an unknown id is never silent -----


@pytest.mark.parametrize(
    ("model", "profile"),
    [
        ("kimi-k3", "kimi-k3"),
        ("k3", "kimi-k3"),
        ("k3-256k", "kimi-k3"),
        ("k3[1m]", "kimi-k3"),
        ("moonshotai/kimi-k3", "kimi-k3"),
        ("moonshotai/kimi-k3-20260115", "kimi-k3"),
        ("Kimi-K3-Preview", "kimi-k3"),
        ("moonshotai/kimi-k3:nitro", "kimi-k3"),
        ("moonshotai/kimi-k2-thinking-turbo", "kimi-k2-thinking"),
        ("kimi-for-coding", "kimi-k2.7-code"),
        ("kimi-for-coding-highspeed", "kimi-k2.7-code"),
        ("moonshotai/kimi-k2.5-0127", "kimi-k2.5"),
        ("moonshotai/Kimi-K2.6", "kimi-k2.5"),
        ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2-instruct"),
        ("moonshotai/kimi-k2:free", "kimi-k2-instruct"),
        # more of the ids users have: Kimi Code's and Moonshot's names, other dates, Fireworks, Hub repositories of
        # quantised builds (the format is the model's, whatever the weights' precision), routing suffixes
        ("K3", "kimi-k3"),
        ("kimi-code/k3", "kimi-k3"),
        ("kimi-k3-cot", "kimi-k3"),
        ("kimi-k3-thinking", "kimi-k3"),
        ("moonshotai/Kimi-K3-Preview-0115", "kimi-k3"),
        ("kimi-k3@2026-01-15", "kimi-k3"),
        ("moonshotai/kimi-k3-2026-01-15", "kimi-k3"),
        ("kimi_k3", "kimi-k3"),
        ("kimi-k3-fp8", "kimi-k3"),
        ("kimi-k2.6", "kimi-k2.5"),
        ("kimi-k2.6-turbo", "kimi-k2.5"),
        ("moonshotai/kimi-k2.6-20260401", "kimi-k2.5"),
        ("kimi-k2.5-thinking", "kimi-k2.5"),
        ("accounts/fireworks/models/kimi-k2p5", "kimi-k2.5"),
        ("nvidia/Kimi-K2.5-NVFP4", "kimi-k2.5"),
        ("moonshotai/Kimi-K2.5-FP8", "kimi-k2.5"),
        ("kimi-k2-thinking", "kimi-k2-thinking"),
        ("Kimi-K2-Thinking-FP8", "kimi-k2-thinking"),
        ("kimi-k2-thinking-turbo", "kimi-k2-thinking"),
        ("kimi-k2-0711-preview", "kimi-k2-instruct"),
        ("kimi-k2-0905-preview", "kimi-k2-instruct"),
        ("kimi-k2-turbo-preview", "kimi-k2-instruct"),
        ("accounts/fireworks/models/kimi-k2-instruct-0905", "kimi-k2-instruct"),
        ("unsloth/Kimi-K2-Instruct-GGUF", "kimi-k2-instruct"),
        ("RedHatAI/Kimi-K2-Instruct-quantized.w4a16", "kimi-k2-instruct"),
        ("together/moonshotai/Kimi-K2-Instruct", "kimi-k2-instruct"),
        ("kimi-k2.7-code", "kimi-k2.7-code"),
        ("kimi-for-coding-preview", "kimi-k2.7-code"),
        ("/models/Kimi-K2.5-Q4_K_M.gguf", "kimi-k2.5"),  # llama.cpp names the model by its file
        ("unsloth/Kimi-K2-Thinking-UD-Q2_K_XL", "kimi-k2-thinking"),
    ],
)
def test_the_model_ids_users_have_name_their_profile(model: str, profile: str) -> None:
    assert profile_for_model(model, default="") == profile


@pytest.mark.parametrize("model", ["kimi-latest", "default", "my-vllm-served-name", "kimi-k4", "moonshotai/kimi-k3.5"])
def test_an_id_that_names_no_kimi_model_is_flagged_when_no_profile_was_named(model: str) -> None:
    from kimi_recon import audit_record, build_training_sample, reconstruct_output_ids, turn_from_response
    from kimi_recon.flags import FlagCode

    assert profile_for_model(model, default="") == "" and profiles.other_model(model) is None
    response = {"model": model, "choices": [{"message": {"role": "assistant", "content": "Hello", "reasoning_content": "Hm, a greeting"}, "finish_reason": "stop"}]}
    turn = turn_from_response(response)
    assumed = reconstruct_output_ids(turn)
    assert [f.code for f in assumed.flags] == [FlagCode.PROFILE_ASSUMED] and assumed.flags[0].field == "profile"
    assert reconstruct_output_ids(turn, profile="kimi-k2.5").flags == ()  # named: the caller said which format
    # the K2.5 turn as the model writes it (its prompt opens <think>), encoded by the tokenizer alone
    reference = kimi_recon.load_tokenizer().encode("Hm.</think>Hello<|im_end|>", allowed_special="all")
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    record = {"id": "r", "messages": messages, "response": response, "reference_ids": reference}
    assert FlagCode.PROFILE_ASSUMED in [f.code for f in audit_record(record).flags]
    assert FlagCode.PROFILE_ASSUMED not in [f.code for f in audit_record({**record, "profile": "kimi-k2.5"}).flags]
    sample = build_training_sample(messages, turn)
    assert FlagCode.PROFILE_ASSUMED in [f.code for f in sample.flags]


@pytest.mark.parametrize(
    "model",
    ["openai/gpt-4o", "gpt-4o-mini", "anthropic/claude-sonnet-4", "deepseek/deepseek-k3", "Qwen/Qwen3-235B-A22B",
     "meta-llama/llama-3.1-8b-instruct", "mistralai/some-new-model", "moonshot-v1-8k", "kimi-k1.5", "moonshotai/Kimi-K2-Base"],
)
def test_an_id_of_another_model_is_refused_with_no_profile_named_and_flagged_loss_with_one(model: str, tmp_path: Path) -> None:
    """Decided per door (docs/api.md, the Profiles entry): with nothing named, another maker's (or an older Moonshot)
    model is refused naming ``model``, since a flagged row would still pass a loss filter; a named profile is the
    caller's word, so the rebuild runs and says ``profile_mismatch`` (loss). Before, ``openai/gpt-4o`` was rebuilt
    as K2.5 with a risk flag at most (issue 33)."""
    from kimi_recon import audit_record, build_training_sample, reconstruct_output_ids, turn_from_response
    from kimi_recon.cli import main
    from kimi_recon.errors import InvalidInputError

    assert profile_for_model(model, default="") == "" and profiles.other_model(model)
    response = {"model": model, "choices": [{"message": {"role": "assistant", "content": "Hello", "reasoning_content": "Hm, a greeting"}, "finish_reason": "stop"}]}
    turn = turn_from_response(response)
    with pytest.raises(InvalidInputError, match="not a Kimi model") as err:
        reconstruct_output_ids(turn)
    assert err.value.field == "model" and "--profile" in str(err.value)
    with pytest.raises(InvalidInputError, match="not a Kimi model"):
        kimi_recon.reconstruct_many([turn])
    named = reconstruct_output_ids(turn, profile="kimi-k2.5")
    assert [(f.code, f.severity.value) for f in named.flags] == [(FlagCode.PROFILE_MISMATCH, "loss")]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "hi"}]
    record = {"id": "r", "messages": messages, "response": response, "reference_ids": named.ids}
    failed = audit_record(record)
    assert failed.error is not None and failed.error.field == "model"
    assert FlagCode.PROFILE_MISMATCH in audit_record({**record, "profile": "kimi-k2.5"}).flag_codes
    with pytest.raises(InvalidInputError, match="not a Kimi model"):
        build_training_sample(messages, turn)
    assert FlagCode.PROFILE_MISMATCH in [f.code for f in build_training_sample(messages, turn, profile="kimi-k2.5").flags]
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    assert main(["reconstruct", str(path), "-o", str(tmp_path / "out.jsonl"), "--quiet"]) == 1
    row = json.loads((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert row["error"]["field"] == "model"


def test_a_dated_k3_slug_is_rebuilt_in_the_k3_format() -> None:
    from kimi_recon import reconstruct_output_ids, turn_from_response

    response = {"model": "moonshotai/kimi-k3-20260115", "choices": [{"message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}]}
    result = reconstruct_output_ids(turn_from_response(response), thinking=True)
    assert result.profile == "kimi-k3" and "</think>" not in result.text and result.flags == ()
