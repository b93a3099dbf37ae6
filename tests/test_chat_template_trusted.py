"""The chat templates this package ships render without jinja's sandbox, with the very same output;
any other template text still renders sandboxed."""

from __future__ import annotations

import pytest
from testdata import OFFICIAL, read_jsonl

from kimi_recon import chat_template, load_tokenizer, render_prompt
from kimi_recon.chat_template import (
    bundled_template_sources,
    compile_template,
    render_chat_template,
)
from kimi_recon.errors import InvalidInputError
from kimi_recon.profiles import get_profile

CASES = read_jsonl(OFFICIAL / "turns.jsonl") + read_jsonl(OFFICIAL / "turns_adversarial.jsonl")
TEMPLATE_PROFILES = ("kimi-k2.5", "kimi-k2-thinking", "kimi-k2-instruct")


def _render_all() -> list[str]:
    out = []
    for profile in TEMPLATE_PROFILES:
        for case in CASES:
            try:
                out.append(render_prompt(case["messages"], case["tools"], profile, case["thinking"]))
            except InvalidInputError as err:
                out.append(f"error: {err}")
    return out


def test_every_template_the_package_ships_is_trusted() -> None:
    sources = bundled_template_sources()
    assert load_tokenizer().chat_template in sources
    for profile in TEMPLATE_PROFILES[1:]:
        assert get_profile(profile).template_source() in sources
    assert compile_template(load_tokenizer().chat_template).environment.__class__.__name__ == "Environment"


def test_bundled_templates_render_the_same_without_the_sandbox_on_the_dev_conversations(monkeypatch: pytest.MonkeyPatch) -> None:
    compile_template.cache_clear()
    trusted = _render_all()
    monkeypatch.setattr(chat_template, "bundled_template_sources", frozenset)  # nothing trusted: all sandboxed
    compile_template.cache_clear()
    try:
        sandboxed = _render_all()
        assert compile_template(load_tokenizer().chat_template).environment.__class__.__name__ == "ImmutableSandboxedEnvironment"
    finally:
        compile_template.cache_clear()
    assert len(trusted) == 3 * len(CASES) and sum(t.startswith("error: ") for t in trusted) < len(CASES)
    assert trusted == sandboxed  # (tests/test_training*.py pin these renders to the official prompts)


@pytest.mark.parametrize(
    "source",
    ["{% set x = [] %}{{ x.append(1) }}", "{{ messages.__class__.__mro__ }}", "{{ ''.__class__.__subclasses__() }}"],
)
def test_a_template_the_package_does_not_ship_stays_sandboxed(source: str) -> None:
    with pytest.raises(InvalidInputError, match="chat template failed"):
        render_chat_template(source, [{"role": "user", "content": "hi"}])
    assert compile_template(source, sandboxed=False).render(messages=[]) is not None  # the sandbox is what refuses
