"""Every public entry point and CLI command, fed malformed input (wrong types, deep nesting, surrogates, huge
numbers, non-UTF-8 bytes), raises only named errors (KimiReconError), finishes, and gives ids whose text is
the rendered text unless a flag says why not."""

from __future__ import annotations

import contextlib
import enum
import importlib
import inspect
import io
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kimi_recon
import kimi_recon.audit
import kimi_recon.chat_template
import kimi_recon.compare
import kimi_recon.dataset
import kimi_recon.errors
import kimi_recon.logprobs
import kimi_recon.profiles
import kimi_recon.render
import kimi_recon.tool_declaration
from kimi_recon import KimiReconError, load_tokenizer
from kimi_recon.cli import main as cli_main

TOK = load_tokenizer()
T = TypeVar("T")

#: Fast enough for CI (a few seconds a test), broad enough to reach every field; KIMI_FUZZ_EXAMPLES=1000 digs deeper.
# The same examples every run (CI included), so a red CI is a change's doing, not a new draw; set
# KIMI_FUZZ_EXPLORE=1 (and raise the example counts) to hunt with fresh ones.
DERANDOMIZE = os.environ.get("KIMI_FUZZ_EXPLORE") != "1"
fuzz = settings(
    max_examples=int(os.environ.get("KIMI_FUZZ_EXAMPLES", "40")), deadline=None, suppress_health_check=list(HealthCheck), derandomize=DERANDOMIZE
)

FIELDS = [
    "role", "content", "reasoning", "reasoning_content", "reasoning_details", "tool_calls", "id", "type", "function",
    "name", "arguments", "finish_reason", "native_finish_reason", "logprobs", "choices", "message", "index", "error",
    "bytes", "token", "text", "messages", "tools", "response", "turn", "reference_ids", "thinking", "profile",
    "call_index_offset", "template_kwargs", "usage", "parameters", "properties", "description",
]  # fmt: skip

odd_text = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        ["\ud83d", "a\udc00b", "\ud83d\ude00", "<|im_end|>", "</think>", "<|tool_calls_section_begin|>", "functions.f:0",
         '{"a": 1}', "", " ", "stop", "length", "tool_calls", "assistant", "user", "function", "kimi-k3", "\x00"]
    ),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.builds(lambda n: "[" * n, st.just(3000)),  # JSON text nested past the recursion limit
)
huge = st.sampled_from([2**64, -(2**64), 2**1000, -1, 0, 1, 163586, 10**30, 1.5, float("nan"), float("inf"), -0.0])
scalars = st.one_of(st.none(), st.booleans(), huge, st.integers(), st.floats(), odd_text, st.binary(max_size=6))
keys = st.one_of(st.sampled_from(FIELDS), st.text(max_size=4), st.integers(-2, 2))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(keys, inner, max_size=5)), max_leaves=16)


@dataclass(frozen=True)
class Nested:
    """``value`` inside ``depth`` lists or objects, built only when the test runs (:func:`real`), so that
    Hypothesis can print a failing example without recursing 3000 levels itself."""

    value: Any
    depth: int
    kind: str

    def build(self) -> Any:
        value = real(self.value)
        for _ in range(self.depth):
            value = [value] if self.kind == "list" else {"a": value}
        return value


def real(value: Any, depth: int = 0) -> Any:
    """``value`` with every :class:`Nested` built (they sit near the top: what is deeper is built already)."""
    if isinstance(value, Nested):
        return value.build()
    if depth > 40:
        return value
    if isinstance(value, list):
        return [real(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {k: real(v, depth + 1) for k, v in value.items()}
    return value


deep = st.builds(Nested, values, st.sampled_from([30, 1200, 3000]), st.sampled_from(["list", "dict"]))
hostile = st.one_of(values, deep)


def _maybe(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """A plausible value, or a hostile one."""
    return st.one_of(good, good, hostile)


tool_call = st.fixed_dictionaries(
    {"id": _maybe(st.sampled_from(["functions.f:0", "call_1", None])), "type": _maybe(st.just("function")),
     "function": _maybe(st.fixed_dictionaries({"name": _maybe(st.sampled_from(["f", "get.weather"])),
                                               "arguments": _maybe(st.sampled_from(['{"a": 1}', "{}", "not json", '{"a": "\\ud83d"}']))}))}
)  # fmt: skip
logprob_entry = st.fixed_dictionaries({"token": _maybe(st.sampled_from(["h", "token_id:71", "<|im_end|>"])), "bytes": _maybe(st.sampled_from([[104], [104, 105], None]))})
message = st.fixed_dictionaries(
    {},
    optional={
        "role": _maybe(st.just("assistant")),
        "content": _maybe(odd_text),
        "reasoning": _maybe(odd_text),
        "reasoning_content": _maybe(odd_text),
        "tool_calls": _maybe(st.lists(tool_call, max_size=2)),
        "finish_reason": _maybe(st.sampled_from(["stop", "length", "tool_calls", None])),
        "logprobs": _maybe(st.fixed_dictionaries({"content": _maybe(st.lists(logprob_entry, max_size=3))})),
    },
)
completion = st.builds(lambda m, fr: {"choices": [{"index": 0, "message": m, "finish_reason": fr}]}, message, _maybe(st.just("stop")))
as_json_text = st.one_of(message, completion).map(lambda v: json.dumps(v, default=repr))  # surrogates become \\ud83d escapes
non_utf8 = st.sampled_from([b"\xff\xfe{", b'{"content": "\xe4"}', b"\x80", b'{"content": "hi"}'])
turns = st.one_of(message, completion, as_json_text, non_utf8, hostile)
chat_message = st.fixed_dictionaries(
    {"role": _maybe(st.sampled_from(["user", "system", "assistant", "tool"])), "content": _maybe(odd_text)},
    optional={"tool_calls": _maybe(st.lists(tool_call, max_size=1)), "tool_call_id": _maybe(st.just("functions.f:0")), "name": _maybe(odd_text)},
)
messages = _maybe(st.lists(chat_message, min_size=1, max_size=3))
tool = st.fixed_dictionaries(
    {"type": _maybe(st.just("function")),
     "function": _maybe(st.fixed_dictionaries({"name": _maybe(st.just("f")), "description": _maybe(odd_text),
                                               "parameters": _maybe(st.just({"type": "object", "properties": {"a": {"type": "string"}}}))}))}
)  # fmt: skip
tools = st.one_of(st.none(), _maybe(st.lists(tool, max_size=2)), st.lists(tool, max_size=2).map(lambda v: json.dumps(v, default=repr)))
profiles = _maybe(st.sampled_from(list(kimi_recon.profiles.PROFILES)))
offsets = _maybe(st.integers(0, 5))
id_lists = _maybe(st.lists(st.one_of(st.integers(0, TOK.vocab_size - 1), st.sampled_from([163586, 163607, 163595])), max_size=12))


def named(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """``fn``'s result, or None when it raised a named error; any other exception fails the test."""
    try:
        return fn(*real(list(args)), **real(kwargs))
    except KimiReconError:
        return None


def _text_or_flag(ids: list[int], text: str, flag_codes: tuple[str, ...] | list[str], profile: str = "kimi-k2.5") -> None:
    """Ids decode (with the profile's tokenizer) to the rendered text, or a flag says why not."""
    if "lone_surrogate" not in flag_codes:
        assert load_tokenizer(profile=profile).decode_bytes(ids) == text.encode("utf-8"), flag_codes


# -- API entry points ---------------------------------------------------------------------------------


@fuzz
@given(turns, profiles, st.booleans(), offsets, st.booleans())
def test_reconstruct_output_ids_raises_only_named_errors_and_its_ids_are_the_rendered_text_or_flagged(
    turn: Any, profile: Any, thinking: bool, offset: Any, use_logprobs: bool
) -> None:
    rebuilt = named(kimi_recon.reconstruct_output_ids, turn, None, profile, thinking, call_index_offset=offset, use_logprobs=use_logprobs)
    if rebuilt is not None:
        _text_or_flag(rebuilt.ids, rebuilt.text, rebuilt.flag_codes, rebuilt.profile)
        assert named(kimi_recon.render_assistant_turn, turn, profile, thinking, call_index_offset=offset) == rebuilt.text


@fuzz
@given(turns, st.booleans(), _maybe(st.integers(0, 2)), _maybe(st.sampled_from(["stop", None])))
def test_turn_from_response_and_render_turn_raise_only_named_errors(turn: Any, lenient: bool, choice: Any, finish: Any) -> None:
    parsed = named(kimi_recon.turn_from_response, turn, lenient=lenient, choice=choice, finish_reason=finish)
    if parsed is not None:
        named(kimi_recon.render.render_turn_with_flags, parsed)


@fuzz
@given(messages, turns, tools, profiles, st.booleans(), st.one_of(st.none(), offsets), st.one_of(st.none(), _maybe(st.just({"preserve_thinking": True}))))
def test_build_training_sample_raises_only_named_errors_and_its_ids_are_the_rendered_text_or_flagged(
    msgs: Any, turn: Any, tool_list: Any, profile: Any, thinking: bool, offset: Any, template_kwargs: Any
) -> None:
    msgs, turn, tool_list, profile, offset, template_kwargs = real([msgs, turn, tool_list, profile, offset, template_kwargs])
    sample = named(
        kimi_recon.build_training_sample, msgs, turn, tool_list, profile, thinking, call_index_offset=offset, template_kwargs=template_kwargs
    )
    if sample is None:
        return
    if isinstance(msgs, list) and msgs and isinstance(msgs[-1], dict) and msgs[-1].get("role") == "assistant":
        # messages that already end with the answer are read without it (the answer is the turn, not the prompt)
        if sample.prompt_len < len(kimi_recon.training.encode_prompt(msgs, tool_list, profile, thinking, template_kwargs=template_kwargs)):
            msgs = msgs[:-1]
    prompt = kimi_recon.render_prompt(msgs, tool_list, profile, thinking, template_kwargs=template_kwargs)
    offset_used = offset if offset is not None else None
    output = kimi_recon.reconstruct_output_ids(
        turn, None, profile, thinking, call_index_offset=offset_used if offset_used is not None else _calls_in(msgs)
    )
    assert sample.loss_mask == [0] * sample.prompt_len + [1] * (len(sample.input_ids) - sample.prompt_len)
    _text_or_flag(sample.input_ids, prompt + output.text, [f.code for f in sample.flags], output.profile)


def _calls_in(msgs: Any) -> int:
    from kimi_recon.training import count_tool_calls

    return count_tool_calls(msgs)


@fuzz
@given(messages, tools, profiles, st.booleans(), _maybe(st.sampled_from([None, "{{ messages[0]['content'] }}", "{{ 1 / 0 }}", "{% for"])))
def test_render_prompt_and_render_chat_template_raise_only_named_errors(msgs: Any, tool_list: Any, profile: Any, thinking: bool, template: Any) -> None:
    named(kimi_recon.render_prompt, msgs, tool_list, profile, thinking, template=template)
    if isinstance(template, str):
        named(kimi_recon.chat_template.render_chat_template, template, msgs, tools=tool_list)
    named(kimi_recon.tool_declaration.render_tools_declaration, tool_list)


@fuzz
@given(id_lists, id_lists)
def test_compare_ids_and_is_canonical_raise_only_named_errors(a: Any, b: Any) -> None:
    named(kimi_recon.compare_ids, a, b, TOK)
    named(kimi_recon.compare.is_canonical, a, TOK)


@fuzz
@given(_maybe(st.lists(logprob_entry, max_size=4)), hostile)
def test_ids_from_logprobs_raises_only_named_errors(content: Any, other: Any) -> None:
    named(kimi_recon.logprobs.ids_from_logprobs, content, TOK)
    named(kimi_recon.logprobs.ids_from_logprobs, [{"token": "x", "bytes": other}], TOK)


@fuzz
@given(hostile, id_lists, _maybe(odd_text))
def test_tokenizer_methods_raise_only_named_errors(value: Any, ids: Any, text: Any) -> None:
    for method in (TOK.encode, TOK.decode, TOK.decode_bytes, TOK.token_bytes):
        named(method, value)
    named(TOK.decode, ids)
    named(TOK.encode, text)
    named(TOK.encode_with_specials, text, frozenset({"<|im_end|>"}))


@fuzz
@given(_maybe(st.dictionaries(st.one_of(st.sampled_from(["IM_END_TOKEN_ID", "EOS", "THINK_END"]), keys), _maybe(st.integers(0, 200_000)), max_size=3)), st.one_of(st.none(), profiles))
def test_special_token_audits_raise_only_named_errors(constants: Any, profile: Any) -> None:
    named(kimi_recon.check_token_ids, constants, TOK, profile=profile)
    named(kimi_recon.check_special_tokens, TOK, profile=profile)
    with contextlib.suppress(AssertionError):  # it asserts by design when the constants are wrong
        named(kimi_recon.audit.assert_special_tokens_ok, TOK, constants, profile=profile)


record = st.one_of(
    st.fixed_dictionaries(
        {"id": _maybe(st.just("r1")), "response": turns},
        optional={"reference_ids": id_lists, "messages": messages, "tools": tools, "thinking": _maybe(st.booleans()), "profile": profiles},
    ),
    hostile,
)  # fmt: skip


@fuzz
@given(st.lists(record, min_size=1, max_size=3))
def test_dataset_functions_raise_only_named_errors_and_keep_every_record(records: list[Any]) -> None:
    records = real(records)
    for r in records:
        named(kimi_recon.audit_record, r, TOK)
    audit = named(kimi_recon.audit_dataset, records, TOK, progress=False)
    if audit is not None:
        assert audit.total == len(records)
    rebuilt = named(lambda: list(kimi_recon.dataset.reconstruct_records(records, TOK)))
    if rebuilt is not None:
        assert len(rebuilt) == len(records)


@fuzz
@given(hostile)
def test_profile_and_tokenizer_lookups_raise_only_named_errors(value: Any) -> None:
    named(kimi_recon.get_profile, value)
    if not isinstance(value, (str, bytes)):  # a string may name a Hub repo, which needs a network
        named(kimi_recon.load_tokenizer, value)


@fuzz
@given(_maybe(odd_text), _maybe(odd_text), st.lists(_maybe(tool_call), max_size=2), _maybe(st.sampled_from(["stop", "length"])))
def test_assistant_turns_built_directly_raise_only_named_errors(reasoning: Any, content: Any, calls: Any, finish: Any) -> None:
    reasoning, content, calls, finish = real([reasoning, content, calls, finish])
    built = named(lambda: kimi_recon.AssistantTurn(reasoning=reasoning, content=content, tool_calls=tuple(calls), finish_reason=finish))
    if built is not None:
        rebuilt = named(kimi_recon.reconstruct_output_ids, built)
        if rebuilt is not None:
            _text_or_flag(rebuilt.ids, rebuilt.text, rebuilt.flag_codes)


# -- CLI commands --------------------------------------------------------------------------------------

line_of_record = st.one_of(record.map(lambda r: json.dumps(r, default=repr).encode()), non_utf8, st.builds(lambda n: b"[" * n, st.just(5000)), st.just(b'{"id": "x"'))


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


def _run(argv: list[str]) -> int:
    """``kimi-recon ARGV`` in this process; argparse's exit is a return code too."""
    return _run_capturing(argv)[0]


def _run_capturing(argv: list[str]) -> tuple[int, str]:
    """:func:`_run` and what the command wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as stop:
            code = int(stop.code or 0)
    return code, err.getvalue()


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-cli")


@fuzz
@given(lines=st.lists(line_of_record, min_size=1, max_size=4))
def test_cli_reconstruct_and_build_samples_write_one_row_per_line_and_raise_nothing(workdir: Path, lines: list[bytes]) -> None:
    src, out = workdir / "in.jsonl", workdir / "out.jsonl"
    src.write_bytes(b"\n".join(lines) + b"\n")
    n = sum(1 for line in lines if line.strip())
    errors = workdir / "errors.jsonl"  # build-samples writes failed records there
    for command in ("reconstruct", "build-samples"):
        out.unlink(missing_ok=True)
        errors.unlink(missing_ok=True)
        code, err = _run_capturing([command, str(src), "-o", str(out), *(["--errors", str(errors)] if command == "build-samples" else [])])
        if code == 2:  # only a whole file that is not JSON Lines (line 1 a JSON array of objects) is refused, and nothing is written
            assert "reads JSON Lines" in err and not out.exists() and not errors.exists(), (command, err)
            continue
        assert code in (0, 1), command
        rows = _rows(out) + (_rows(errors) if errors.exists() else [])
        assert len(rows) == n, command  # every line comes out as a row or as a recorded error
        for row in rows:
            ids = row.get("output_ids") if command == "reconstruct" else row.get("input_ids")
            assert (row.get("error") is None) == isinstance(ids, list), row


@fuzz
@given(lines=st.lists(line_of_record, min_size=1, max_size=4), min_exact=st.sampled_from(["0", "0.5", "1", "2", "x"]))
def test_cli_audit_raises_nothing_and_counts_every_line(workdir: Path, lines: list[bytes], min_exact: str) -> None:
    src, report = workdir / "audit.jsonl", workdir / "report.json"
    src.write_bytes(b"\n".join(lines) + b"\n")
    report.unlink(missing_ok=True)
    code = _run(["audit", str(src), "--min-exact", min_exact, "--json", str(report)])
    assert code in (0, 1, 2)
    if code != 2:
        assert json.loads(report.read_text(encoding="utf-8"))["total"] == sum(1 for line in lines if line.strip())


@fuzz
@given(constants=st.one_of(hostile.map(lambda v: json.dumps(v, default=repr).encode()), non_utf8, st.builds(lambda n: b"[" * n, st.just(5000))))
def test_cli_audit_tokens_raises_nothing_on_any_constants_file(workdir: Path, constants: bytes) -> None:
    path = workdir / "constants.json"
    path.write_bytes(constants)
    assert _run(["audit-tokens", "--constants", str(path)]) in (0, 1, 2)


# -- every public name ---------------------------------------------------------------------------------
#
# Each function and class that kimi_recon.__all__ and the documented submodules (docs/api.md's module map;
# a module's __all__, else the names the map lists) offer, called with random arguments: wrong Python
# types, hostile values, and plausible ones so that a call gets past its first check. Pass: it returns
# (an iterator is drained) or raises a KimiReconError.

_API = (Path(__file__).resolve().parent.parent / "docs" / "api.md").read_text(encoding="utf-8")
_MAP = _API.split("<!-- module-map -->", 1)[1].split("<!-- /module-map -->", 1)[0]
_MAP_ROWS = dict(re.findall(r"^\| `(kimi_recon[\w.]*)` \| (.*) \|$", _MAP, re.MULTILINE))

#: Names not called here, and why (each is exercised elsewhere).
NOT_CALLED = {
    "kimi_recon.cli.main": "the CLI: tests above and tests/cli run it with hostile files",
    "kimi_recon.openrouter.cli.main": "the CLI (generate, export): tests/openrouter run it",
    "kimi_recon.openrouter.client.make_client": "opens network connections",
    "kimi_recon.openrouter.client.fetch": "sends requests over the network",
    "kimi_recon.openrouter.generate.run_generate": "sends requests over the network (tests/openrouter use a fake server)",
    "kimi_recon.pytest_plugin.kimi_tokenizer": "a pytest fixture (pytest refuses direct calls): tests/test_pytest_plugin.py",
    "kimi_recon.pytest_plugin.kimi_special_tokens_audit": "a pytest fixture: tests/test_pytest_plugin.py",
    "kimi_recon.pytest_plugin.kimi_roundtrip_audit": "a pytest fixture: tests/test_pytest_plugin.py",
}
for _slow in ("build_fast_tokenizer", "export_tokenizer", "tokenizer_json"):
    NOT_CALLED[f"kimi_recon.fast_tokenizer.{_slow}"] = "builds the whole fast tokenizer (seconds a call): tests/test_fast_tokenizer.py"
#: Callables that build the whole fast tokenizer (seconds) when handed the real one: hostile arguments only.
SLOW_WITH_A_TOKENIZER = {"bpe_merges"}


def _public_callables() -> list[tuple[str, Callable[..., Any]]]:
    found: dict[str, Callable[..., Any]] = {}
    for module in sorted(_MAP_ROWS):
        if module.endswith("__main__"):
            continue
        loaded = importlib.import_module(module)
        names = getattr(loaded, "__all__", None) or re.findall(r"`([A-Za-z_]\w*)`", _MAP_ROWS[module])
        for name in names:
            obj = getattr(loaded, name, None)
            qualified = f"{module}.{name}"
            if not (inspect.isfunction(obj) or inspect.isclass(obj)) or qualified in NOT_CALLED:
                continue  # constants, typing aliases (Kind, Region)
            if inspect.isclass(obj) and issubclass(obj, (BaseException, enum.Enum)):
                continue  # exceptions; an enum's call is a lookup whose ValueError is Python's contract
            found[qualified] = obj
    return sorted(found.items())


PUBLIC = _public_callables()

#: Names that still raise an unnamed exception on some wrong-typed argument (what it is), fuzzed but not yet
#: held to the rule. Shrink this table; never grow it.
KNOWN_UNNAMED: dict[str, str] = {}
#: A missing input path is a FileNotFoundError until branch api-first (issue 22) makes it InputFileNotFoundError,
#: a KimiReconError that is still a FileNotFoundError; after that merge this tolerates nothing.
MISSING_INPUT: tuple[type[BaseException], ...] = () if hasattr(kimi_recon.errors, "InputFileNotFoundError") else (FileNotFoundError,)

safe_text = st.one_of(
    st.text(st.characters(blacklist_characters="/\\-~", blacklist_categories=["Cs"]), max_size=8),  # no path leaves the temp folder
    st.sampled_from(["kimi-k2.5", "kimi-k3", "kimi-k2-thinking", "stop", "assistant", "x.jsonl", "\x00", "\ud83d", "<|im_end|>", "[[[[", "{}"]),
)
plain_values = st.recursive(
    st.one_of(st.none(), st.booleans(), huge, st.integers(), st.floats(), safe_text, st.binary(max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.one_of(st.sampled_from(FIELDS), safe_text), inner, max_size=4)),
    max_leaves=10,
)
odd_objects = st.sampled_from(
    [object(), {1, 2}, frozenset({"a"}), (1, 2), np.int64(5), np.float64(1.5), np.array([1, 2]), np.array([{"a": 1}], dtype=object),
     Path("missing.jsonl"), iter([1, 2]), b"\xff", bytearray(b"ab"), 1j, Ellipsis, type, len]
)  # fmt: skip
good_turn = {"role": "assistant", "content": "hi", "reasoning_content": "r"}
good_messages = [{"role": "user", "content": "q"}]
plausible = st.sampled_from(
    [TOK, good_turn, {"choices": [{"message": good_turn, "finish_reason": "stop"}]}, good_messages, [1, 2, 3], "kimi-k2.5", True, 0, 1,
     {"id": "r", "messages": good_messages, "response": good_turn, "reference_ids": [1, 2]}, {"prompt_tokens": 3, "completion_tokens": 2},
     kimi_recon.AssistantTurn(content="hi")]
)  # fmt: skip
argument = st.one_of(plain_values, odd_objects, plausible, deep)
hostile_argument = st.one_of(plain_values, odd_objects, deep)


def _drained(result: Any) -> Any:
    """Iterators (build_samples, reconstruct_records, ...) do their work when read: read a few items."""
    if inspect.isgenerator(result) or (hasattr(result, "__next__") and hasattr(result, "__iter__")):
        for _, _item in zip(range(8), result, strict=False):  # at most 8: the iterator may be endless
            pass
    return result


@st.composite
def calls(draw: st.DrawFn, fn: Callable[..., Any], name: str) -> tuple[list[Any], dict[str, Any]]:
    """Arguments for ``fn``: each required parameter a value, each optional one sometimes."""
    values = hostile_argument if name.rsplit(".", 1)[-1] in SLOW_WITH_A_TOKENIZER else argument
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            args += draw(st.lists(values, max_size=2))
        elif p.kind is p.VAR_KEYWORD:
            continue
        elif p.default is p.empty or draw(st.booleans()):
            if p.kind is p.POSITIONAL_ONLY or (p.kind is p.POSITIONAL_OR_KEYWORD and not kwargs and p.default is p.empty):
                args.append(draw(values))
            else:
                kwargs[p.name] = draw(values)
    return args, kwargs


@pytest.mark.parametrize(("name", "fn"), PUBLIC, ids=[n for n, _ in PUBLIC])
def test_every_public_name_raises_only_named_errors_on_any_arguments(name: str, fn: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name in KNOWN_UNNAMED:
        pytest.skip(f"known: {KNOWN_UNNAMED[name]}")
    monkeypatch.chdir(tmp_path)  # a path argument that names a file to write writes it here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    @settings(
        max_examples=int(os.environ.get("KIMI_FUZZ_PUBLIC_EXAMPLES", "12")),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=DERANDOMIZE,
    )
    @given(calls(fn, name))
    def check(drawn: tuple[list[Any], dict[str, Any]]) -> None:
        args, kwargs = drawn
        try:
            _drained(fn(*real(args), **real(kwargs)))
        except KimiReconError:
            pass
        except MISSING_INPUT:
            pass
        except AssertionError:
            if not name.endswith("assert_special_tokens_ok"):  # it asserts by design when the constants are wrong
                raise

    check()


def test_the_known_unnamed_table_names_only_public_callables() -> None:
    assert set(KNOWN_UNNAMED) <= {n for n, _ in PUBLIC}


# -- every public method of every public class -----------------------------------------------------------
#
# Each public class above (kimi_recon.__all__, the documented submodules, kimi_recon.openrouter's) gets real
# instances (INSTANCES), and each of its public methods, its class and static methods and the operators it
# defines ([], in, call) is called with the same random arguments as the functions: wrong types, hostile
# values, plausible ones. Pass: it returns (an iterator is drained) or raises a KimiReconError. Properties are
# read on every instance.

#: Operators a class may define for its users, called like methods.
_OPERATORS = ("__getitem__", "__contains__", "__call__")


def _instances() -> dict[str, Callable[[], list[Any]]]:
    """Real instances of each public class with methods, made when a test asks (each call makes new ones: a
    method that changes its object cannot spoil the next example)."""
    from kimi_recon.audit import check_special_tokens
    from kimi_recon.compare import Comparison, compare_ids
    from kimi_recon.dataset import audit_dataset, audit_record, reconstruct_records
    from kimi_recon.flags import Flag, FlagCode
    from kimi_recon.models import AssistantTurn, ToolCall
    from kimi_recon.openrouter.generate import RunSummary
    from kimi_recon.openrouter.options import RequestOptions
    from kimi_recon.openrouter.output import OutputFile
    from kimi_recon.render import render_turn_with_flags
    from kimi_recon.servers import LOSSES, get_server
    from kimi_recon.special_tokens import SPECIAL_TOKENS
    from kimi_recon.usage_check import TokenCounts, check_with_profile
    from kimi_recon.usage_stats import ConventionLearner, TokenCountTally

    record = {"id": "r", "messages": good_messages, "response": {**good_turn, "usage": {"completion_tokens": 9}}, "reference_ids": [1, 2]}
    call = ToolCall("functions.f:0", "f", '{"a": 1}')

    def counts() -> TokenCounts:
        return check_with_profile({"prompt_tokens": 3, "completion_tokens": 2, "completion_tokens_details": {"reasoning_tokens": 1}}, [1, 163607, 163586], 3, "kimi-k2.5")

    def comparison() -> Comparison:
        return compare_ids([1, 2, 163586], [1, 3, 163586], TOK)

    tally = TokenCountTally()
    tally.add("p", counts())
    learner = ConventionLearner()
    learner.learn("p", counts())
    return {
        "AssistantTurn": lambda: [AssistantTurn(content="hi"), AssistantTurn(reasoning="r", tool_calls=(call,), finish_reason="length")],
        "Comparison": lambda: [comparison(), compare_ids([1], [1], TOK)],
        "Flag": lambda: [Flag(FlagCode.TRUNCATED, "cut", "content", 2)],
        "KimiTokenizer": lambda: [TOK, load_tokenizer(profile="kimi-k3")],
        "Reconstruction": lambda: [kimi_recon.reconstruct_output_ids(good_turn), kimi_recon.reconstruct_output_ids({"content": "x"}, profile="kimi-k3")],
        "ToolCall": lambda: [call, ToolCall(None, "f", {"a": [1]}), ToolCall("x", "f", "not json")],
        "TrainingSample": lambda: [kimi_recon.build_training_sample(good_messages, good_turn)],
        "TokenCheckReport": lambda: [check_special_tokens(TOK)],
        "TokenView": lambda: list(comparison().reference_window[:2]),
        "DatasetAudit": lambda: [audit_dataset([record, {"id": "bad"}], TOK, progress=False), audit_dataset([], progress=False)],
        "RecordError": lambda: [r.error for r in reconstruct_records([{"id": "bad"}], TOK)],
        "RecordReconstruction": lambda: list(reconstruct_records([record, {"id": "bad"}], TOK)),
        "RecordResult": lambda: [audit_record(record, TOK), audit_record({"id": "bad"}, TOK)],
        "RunSummary": lambda: [RunSummary(3, 1, 2, 1, 1, 0.5, 0, stopped="x", token_counts=tally.to_dict())],
        "RequestOptions": lambda: [RequestOptions(model="moonshotai/kimi-k2.5"), RequestOptions(model="m", reasoning=None, stream=True)],
        "OutputFile": lambda: [OutputFile(Path("log.jsonl"), fsync=False)],
        "ChatProfile": lambda: [kimi_recon.get_profile(p) for p in kimi_recon.profiles.PROFILES],
        "RenderedTurn": lambda: [render_turn_with_flags(AssistantTurn(content="hi", tool_calls=(call,)))],
        "Segment": lambda: list(render_turn_with_flags(AssistantTurn(content="hi", tool_calls=(call,))).segments[:3]),
        "ParserLoss": lambda: list(LOSSES.values())[:3],
        "ServerProfile": lambda: [get_server("vllm"), get_server("unknown"), get_server("llama.cpp")],
        "SpecialTokenRegistry": lambda: [SPECIAL_TOKENS],
        "CountCheck": lambda: list(counts().checks),
        "TokenCounts": lambda: [counts()],
        "ConventionLearner": lambda: [learner],
        "TokenCountTally": lambda: [tally],
    }


def _methods(cls: type) -> list[str]:
    """The public methods of ``cls`` (its own and those of kimi_recon classes it derives from) and its operators."""
    found: list[str] = []
    for klass in cls.__mro__:
        if not klass.__module__.startswith("kimi_recon"):
            continue
        for attr, value in vars(klass).items():
            if attr in found or isinstance(value, property):
                continue
            if (not attr.startswith("_") and (callable(value) or isinstance(value, (classmethod, staticmethod)))) or attr in _OPERATORS:
                found.append(attr)
    return sorted(found)


def _properties(cls: type) -> list[str]:
    return sorted({attr for klass in cls.__mro__ if klass.__module__.startswith("kimi_recon") for attr, v in vars(klass).items() if isinstance(v, property)})


PUBLIC_CLASSES = sorted({obj.__name__: obj for _, obj in PUBLIC if inspect.isclass(obj)}.items())
METHODS = [(f"{name}.{method}", name, method) for name, cls in PUBLIC_CLASSES for method in _methods(cls)]
#: Methods not called here, and why.
METHODS_NOT_CALLED = {
    "OutputFile.open": "opens the log for appending (a context manager): tests/openrouter run it with hostile files",
}


def test_every_public_class_with_methods_has_instances_to_call_them_on() -> None:
    instances = _instances()
    missing = [name for name, cls in PUBLIC_CLASSES if (_methods(cls) or _properties(cls)) and name not in instances]
    assert not missing, f"add instances of {missing} to _instances()"
    for name, make in instances.items():
        made = make()
        assert made, name  # an empty list calls nothing
        cls = dict(PUBLIC_CLASSES)[name]
        assert all(isinstance(obj, cls) for obj in made), name
        for obj in made:  # every property of a real instance reads
            for prop in _properties(cls):
                getattr(obj, prop)


@pytest.mark.parametrize(("qualified", "cls_name", "method"), METHODS, ids=[q for q, _, _ in METHODS])
def test_every_public_method_raises_only_named_errors_on_any_arguments(
    qualified: str, cls_name: str, method: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if qualified in METHODS_NOT_CALLED:
        pytest.skip(METHODS_NOT_CALLED[qualified])
    monkeypatch.chdir(tmp_path)  # OutputFile and any path argument write here
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    make = _instances()[cls_name]
    cls = dict(PUBLIC_CLASSES)[cls_name]
    unbound = getattr(cls, method)
    static = isinstance(inspect.getattr_static(cls, method), (classmethod, staticmethod))

    @settings(
        max_examples=int(os.environ.get("KIMI_FUZZ_PUBLIC_EXAMPLES", "12")),
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=DERANDOMIZE,
    )
    @given(st.data())
    def check(data: st.DataObject) -> None:
        objects = make()
        obj = objects[data.draw(st.integers(0, len(objects) - 1))]
        bound = getattr(cls, method) if static else getattr(obj, method)
        args, kwargs = data.draw(calls(bound, qualified) if static else _method_calls(unbound, qualified))
        try:
            _drained(bound(*real(args), **real(kwargs)))
        except KimiReconError:
            pass
        finally:
            close = getattr(obj, "close", None)  # an OutputFile holds a lock
            if callable(close):
                close()

    check()


def _method_calls(unbound: Callable[..., Any], name: str) -> st.SearchStrategy[tuple[list[Any], dict[str, Any]]]:
    """:func:`calls` for a method, without its ``self``."""
    return calls(unbound, name).map(lambda drawn: (drawn[0][1:], drawn[1]) if drawn[0] else drawn)
