"""Run a prompt file through OpenRouter into rows with the rebuilt ids, resumably and without losing a prompt.

Shape of a run: the main thread reads the prompts, opens (locks, repairs, scans) the output, and hands
prompts not yet done to at most ``concurrency`` daemon worker threads. Workers only talk HTTP (with the
SDK's retries plus :func:`~kimi_recon.openrouter.client.retry_after_200`) and parse the response; they
return an outcome and never raise. The main thread is the single writer: it rebuilds the ids, builds
the row and appends it, one flushed line per prompt, before counting the prompt done. Every prompt
handed out therefore ends as exactly one row (``ok`` or ``error``) or, if the process dies first or the
server refuses the key or the account (401, 402, 403: the run then stops sending), as no row at all, and
the next run sends it again. A first SIGINT/SIGTERM stops the sending and gives the requests in flight
``grace_period`` seconds to end as rows; a second one abandons them.
"""

from __future__ import annotations

import math
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeGuard

from .._base.arguments import bool_argument, instance_argument, path_argument
from .._base.files import check_input, output_compression, refuse_output_is_input
from ..errors import InvalidInputError, OutputFileError, preview
from ..flags import Flag, FlagCode
from ..models import AssistantTurn
from ..profiles import get_profile
from ..usage_check import PROMPT, TokenCounts, check_with_profile
from ..usage_stats import TokenCountTally
from .client import DEFAULT_BASE_URL, Fetched, checked_api_key, fetch, is_openrouter, make_client, retry_after_200, secret_of
from .errors import InvalidResponseError, OpenRouterError, holds_secret_spelled, redact_text, refuses_the_account
from .options import RequestOptions, request_kwargs
from .output import OutputFile, without_secret
from .parse import count_tool_calls, replace_foreign_call_ids, turn_from_openrouter
from .prompts import BadPrompt, Prompt, read_prompts
from .rows import CallInfo, Rebuilt, Reconstructor, cost_unknown, error_row, ok_row

if TYPE_CHECKING:
    from openai import OpenAI

    from ..tokenizer import KimiTokenizer
    from .rebuild import PromptCounter


@dataclass(frozen=True)
class GenerateConfig:
    """Everything a run needs besides the API key."""

    prompts: Path
    output: Path
    options: RequestOptions
    base_url: str = DEFAULT_BASE_URL
    concurrency: int = 4
    timeout: float = 600.0
    max_retries: int = 4
    retry_base_delay: float = 0.5
    reconstruct: bool = True
    profile: str = "kimi-k2.5"
    tokenizer: str | None = None
    prompt_ids: bool = False
    training_sample: bool = False
    fix_tool_call_ids: bool = True
    #: the server behind ``base_url`` (:mod:`kimi_recon.servers`); None: what each response reveals, else unknown
    server: str | None = None
    check_usage: bool = True
    max_cost: float | None = None
    limit: int | None = None
    progress: bool = True
    fsync: bool = True
    app_url: str | None = None
    app_title: str | None = None
    #: Send again the prompts whose last row is an error (the new row is appended; the old one stays as history).
    retry_errors: bool = False
    #: Seconds the requests in flight get to finish after a first SIGINT/SIGTERM (their answers may be paid for).
    grace_period: float = 30.0

    def __post_init__(self) -> None:
        """Every setting checked before anything is sent: a bad one would turn every prompt into an error
        row, and error rows count as done, so a corrected rerun would send nothing."""
        path_argument(self.prompts, "prompts")
        path_argument(self.output, "output")
        instance_argument(self.options, "options", RequestOptions, "a RequestOptions")
        for flag in ("reconstruct", "prompt_ids", "training_sample", "fix_tool_call_ids", "check_usage", "progress", "fsync", "retry_errors"):
            bool_argument(getattr(self, flag), flag)
        for text in ("profile", "tokenizer", "server"):
            instance_argument(getattr(self, text), text, str, "a str", none=text != "profile")
        for name in ("concurrency", "max_retries", "timeout", "retry_base_delay", "limit", "grace_period"):
            _check_setting(name, getattr(self, name))
        if self.server is not None:
            from ..servers import get_server

            get_server(self.server)  # a typo fails before anything is sent
        _check_setting("max_cost", self.max_cost)
        _require(
            isinstance(self.base_url, str) and self.base_url.startswith(("http://", "https://")),
            "base_url", "an http:// or https:// URL", self.base_url,
        )  # fmt: skip
        for name in ("app_url", "app_title"):  # sent as HTTP headers, which only carry printable ASCII
            value = getattr(self, name)
            _require(value is None or _is_header_text(value), name, "printable ASCII text (it is sent as an HTTP header)", value)
        get_profile(self.profile)


@dataclass(frozen=True)
class _SettingRange:
    """The values a numeric setting of :class:`GenerateConfig` may take: its one check, which the ``generate``
    command runs on its flags too (:mod:`kimi_recon.openrouter.cli`, which says it in a flag's words)."""

    integer: bool
    low: float
    #: the config's words for the range: "must be {what}, got …"
    what: str
    #: ``low`` itself is out of range
    above: bool = False
    #: None (no limit) is allowed
    none: bool = False

    def holds(self, value: object) -> bool:
        if value is None:
            return self.none
        if self.integer and _is_int(value):
            number: float = value
        elif not self.integer and _is_number(value):
            number = value
        else:
            return False
        return number > self.low if self.above else number >= self.low


#: The numeric settings of :class:`GenerateConfig` that have a range.
_SETTING_RANGES: dict[str, _SettingRange] = {
    "concurrency": _SettingRange(True, 1, "an integer of at least 1"),
    "max_retries": _SettingRange(True, 0, "an integer of 0 or more"),
    "timeout": _SettingRange(False, 0, "a number of seconds above 0", above=True),
    "retry_base_delay": _SettingRange(False, 0, "a number of 0 or more"),
    "limit": _SettingRange(True, 0, "an integer of 0 or more", none=True),
    "grace_period": _SettingRange(False, 0, "a number of seconds of 0 or more"),
    "max_cost": _SettingRange(False, 0, "a number of 0 or more", none=True),
}


def _check_setting(name: str, value: object) -> None:
    """Raise :class:`~kimi_recon.errors.InvalidInputError` naming ``name`` when ``value`` is out of its
    :data:`_SETTING_RANGES` range."""
    setting = _SETTING_RANGES[name]
    _require(setting.holds(value), name, setting.what, value)


# Not _arguments.int_argument/number_argument: those take numpy integers and infinities, and word their errors otherwise.
def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_header_text(value: object) -> bool:
    return isinstance(value, str) and all(" " <= char <= "~" for char in value)


def _require(ok: bool, field_name: str, what: str, value: object) -> None:
    if not ok:
        raise InvalidInputError(f"must be {what}, got {preview(value, 200)}", field=field_name)


@dataclass(frozen=True)
class RunSummary:
    """What a run did. ``remaining`` prompts have no row yet (a spend limit, --limit, an interrupt, or
    ``refused``: the server refused the key or the account, see :func:`~.errors.refuses_the_account`)."""

    total: int
    already_done: int
    written: int
    ok: int
    errors: int
    cost: float
    remaining: int
    stopped: str | None = None
    repaired_tail: str | None = None
    refused: bool = False
    #: The usage check over this run's rows (:meth:`kimi_recon.usage_stats.TokenCountTally.to_dict`).
    token_counts: Mapping[str, Any] = field(default_factory=dict)
    #: Rows of this run that may have been paid for but carry no usable cost (not in ``cost``).
    cost_unknown: int = 0

    def line(self) -> str:
        parts = [
            f"{self.ok} ok",
            f"{self.errors} errors",
            f"{self.already_done} already done",
            f"{self.remaining} remaining",
            f"${self.cost:.4f} spent this run",
        ]
        if self.cost_unknown:
            parts.append(f"cost unknown for {self.cost_unknown} rows")
        if self.repaired_tail:
            parts.append(f"torn last row {self.repaired_tail.replace('_', ' ')}")
        if self.stopped:
            parts.append(f"stopped: {self.stopped}")
        return "generate: " + ", ".join(parts)

    def lines(self) -> list[str]:
        """:meth:`line`, then the usage check per provider (see docs/openrouter.md)."""
        from ..usage_stats import report_lines

        return [self.line(), *report_lines(self.token_counts)]

    @property
    def exit_code(self) -> int:
        if self.stopped == "interrupted":
            return 130
        if self.refused:
            return 4
        if self.errors:
            return 1
        return 3 if self.remaining else 0


@dataclass(frozen=True)
class _Outcome:
    prompt: Prompt
    response: dict[str, Any] | None = None
    turn: AssistantTurn | None = None
    error: Mapping[str, Any] | None = None
    call: CallInfo = field(default_factory=CallInfo)
    prompt_len: int | None = None  # for the usage check
    prompt_len_error: str | None = None
    refused: bool = False  # the server refused the key or the account: no row, the prompt is not done


def _count_prompt(prompt: Prompt, count: PromptCounter | None, secret: str) -> tuple[int | None, str | None]:
    """The prompt's length in ids for the usage check, or why it is unknown (never raises)."""
    if count is None:
        return None, None
    try:
        return count(prompt), None
    except Exception as err:  # noqa: BLE001 - only this figure goes unchecked; the row is still made
        return None, redact_text(f"{type(err).__name__}: {err}", secret)


def _fetch_one(
    client: OpenAI,
    prompt: Prompt,
    options: RequestOptions,
    config: GenerateConfig,
    secret: str,
    count_prompt: PromptCounter | None = None,
) -> _Outcome:
    """One prompt's HTTP exchange and parse. Never raises: every failure becomes an error outcome.

    The prompt is counted for the usage check first: in a real run that work overlaps the requests
    other workers have in flight, instead of adding to the single writer's."""
    prompt_len, prompt_len_error = _count_prompt(prompt, count_prompt, secret)
    outcome = _exchange(client, prompt, options, config, secret)
    return replace(outcome, prompt_len=prompt_len, prompt_len_error=prompt_len_error)


def _exchange(client: OpenAI, prompt: Prompt, options: RequestOptions, config: GenerateConfig, secret: str) -> _Outcome:
    kwargs = request_kwargs(prompt, options)
    offset = count_tool_calls(prompt.messages)
    last: list[Fetched] = []  # the latest response received, kept for the error row
    adapter_retries = [0]  # retries after an HTTP 200 (see retry_after_200)
    start = time.monotonic()

    def attempt() -> tuple[Fetched, AssistantTurn]:
        fetched = fetch(client, kwargs, secret=secret)
        last[:] = [fetched]
        return fetched, turn_from_openrouter(fetched.response, call_index_offset=offset, sample=prompt.id)

    def call(sdk_retries: int | None = None) -> CallInfo:
        """Retries: the SDK's for the last attempt, plus the attempts made after an HTTP 200."""
        if sdk_retries is None:
            sdk_retries = last[0].retries if last else 0
        return CallInfo(retries=sdk_retries + adapter_retries[0], elapsed_s=time.monotonic() - start, stream=options.stream)

    def count(_: OpenRouterError) -> None:
        adapter_retries[0] += 1
        last.clear()  # the SDK retries of a superseded attempt are not those of the next one

    try:
        (fetched, turn), _ = retry_after_200(
            attempt, max_retries=config.max_retries, base_delay=config.retry_base_delay, on_retry=count
        )
    except OpenRouterError as err:
        err = err.redacted(secret).with_prompt_id(prompt.id)
        response = dict(err.response) if err.response is not None else (last[0].response if last else None)
        return _Outcome(prompt, response=response, error=err.to_dict(), call=call(err.retries), refused=refuses_the_account(err))
    except InvalidResponseError as err:
        named = err.with_sample(prompt.id)
        error = {"type": "invalid_response", "code": None, "message": redact_text(str(named), secret), "field": err.field}
        return _Outcome(prompt, response=last[0].response if last else None, error=error, call=call())
    except Exception as err:  # noqa: BLE001 - a bug or an unforeseen transport failure must still leave a row
        message = redact_text(f"prompt {prompt.id!r}: {type(err).__name__}: {err}", secret)
        return _Outcome(prompt, response=last[0].response if last else None, error={"type": "internal", "code": None, "message": message}, call=call())
    return _Outcome(prompt, response=fetched.response, turn=turn, call=call())


#: The text of rebuilt ids (the run's tokenizer), to look for the key in what the ids would spell.
Decoder = Callable[[list[int]], str]


def _ids_hold_secret(row: Mapping[str, Any], decode: Decoder, secret: str) -> bool:
    """True when the ids of ``row`` decode to text holding the key or a piece of it. The row's text fields
    are searched when it is written; the ids also spell the prompt, which the row does not carry.

    One decode per row: the sample's ``input_ids`` are the prompt ids then the output ids, and without a
    sample the two lists are decoded as one (a piece across their boundary would only be a false alarm).
    """
    sample = row.get("sample")
    ids = sample.get("input_ids") if isinstance(sample, Mapping) else None
    if not isinstance(ids, list):
        ids = [*(row.get("prompt_ids") or ()), *(row.get("output_ids") or ())]
    if not ids:
        return False
    try:
        text = decode(ids)
    except Exception:  # noqa: BLE001 - ids the tokenizer cannot decode spell nothing to look for
        return False
    return holds_secret_spelled(text, secret)


#: Keys under which a response carries token ids (vLLM ``token_ids``/``prompt_token_ids``, SGLang
#: ``response_token_ids``/``output_ids``, llama.cpp ``__verbose.tokens``).
_RESPONSE_ID_KEYS = frozenset({"token_ids", "prompt_token_ids", "response_token_ids", "output_ids", "tokens", "input_ids"})


def _response_spells_secret(response: object, decode: Decoder | None, secret: str) -> bool:
    """True when the ids or the logprob bytes a response carries spell the key (or a piece, or another spelling:
    :func:`~kimi_recon.openrouter.errors.holds_secret_spelled`). The text search of the written line cannot see
    these: ``[82, 75, 45, ...]`` holds no letter of the key."""
    id_lists: list[list[int]] = []
    byte_runs: list[int] = []

    def walk(value: object, key: object, depth: int) -> None:
        if depth > 64:
            return
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, k, depth + 1)
        elif isinstance(value, list):
            if value and all(type(v) is int for v in value):
                if key in _RESPONSE_ID_KEYS:
                    id_lists.append(value)
                elif key == "bytes":
                    byte_runs.extend(v for v in value if 0 <= v < 256)
                return
            for v in value:
                walk(v, key, depth + 1)

    walk(response, None, 0)
    if byte_runs and holds_secret_spelled(bytes(byte_runs).decode("utf-8", "replace"), secret):
        return True
    for ids in id_lists:
        try:
            text = decode(ids) if decode is not None else ""
        except Exception:  # noqa: BLE001 - ids the tokenizer cannot decode spell nothing to look for
            continue
        if holds_secret_spelled(text, secret):
            return True
    return False


def _row_for(
    outcome: _Outcome,
    options: RequestOptions,
    config: GenerateConfig,
    rebuild: Reconstructor | None,
    secret: str,
    decode: Decoder | None = None,
) -> tuple[dict[str, Any], TokenCounts | None]:
    """The output row of one outcome, and the usage check it carries (for the run's tally, so the writer does
    not read it back from the row); reconstruction failures keep the response (it was paid for)."""
    prompt = outcome.prompt
    if outcome.error is not None or outcome.turn is None or outcome.response is None:
        error = outcome.error or {"type": "internal", "code": None, "message": "no turn and no error"}
        return error_row(prompt.id, options.model, error, line=prompt.line, response=outcome.response, call=outcome.call), None
    # A server-issued id is only worth replacing where the model writes one (not in K3).
    fix_ids = config.fix_tool_call_ids and get_profile(config.profile).writes_tool_call_ids
    turn = replace_foreign_call_ids(outcome.turn) if fix_ids else _keeping_server_ids(outcome.turn)
    try:
        rebuilt = rebuild(prompt, turn) if rebuild is not None else None
    except Exception as err:  # noqa: BLE001 - a failed rebuild is a row that keeps the paid-for response
        field_name = getattr(err, "field", None)
        message = redact_text(f"prompt {prompt.id!r}: reconstruction failed: {err}", secret)
        error = {"type": "reconstruction", "code": None, "message": message, "field": field_name}
        return error_row(prompt.id, options.model, error, line=prompt.line, response=outcome.response, call=outcome.call), None
    if rebuilt is not None and config.check_usage:
        rebuilt = _with_usage_check(rebuilt, outcome, turn, config.profile, config.server)
    row = ok_row(prompt, options, outcome.response, turn, rebuilt, outcome.call)
    if _response_spells_secret(outcome.response, decode, secret):
        return {**without_secret(row), "response": None}, None  # (its ids and bytes would spell the key)
    if decode is not None and _ids_hold_secret(row, decode, secret):
        return without_secret(row), None
    return row, rebuilt.token_counts if rebuilt is not None else None


def _keeping_server_ids(turn: AssistantTurn) -> AssistantTurn:
    """``turn`` marked so the renderer writes its server-issued ids verbatim (flag ``foreign_tool_call_id``)."""
    return replace(turn, metadata={**turn.metadata, "keep_server_call_ids": True})


def _with_usage_check(rebuilt: Rebuilt, outcome: _Outcome, turn: AssistantTurn, profile: str, server: str | None = None) -> Rebuilt:
    """``rebuilt`` with the usage check of its lengths (see :mod:`kimi_recon.usage_check`)."""
    usage = turn.metadata.get("usage")
    if usage is None:
        return rebuilt
    prompt_len = rebuilt.prompt_len if rebuilt.prompt_len is not None else outcome.prompt_len
    flags = rebuilt.flags
    if prompt_len is None and outcome.prompt_len_error is not None:
        message = f"the prompt could not be rendered to check usage.{PROMPT}: {outcome.prompt_len_error}"
        flags += (Flag(FlagCode.PROMPT_TOKENS_UNCHECKED, message, f"usage.{PROMPT}"),)
    from ..servers import named_or_detected

    pinned = named_or_detected(server, turn.metadata.get("server_detected")).completion_conventions
    counts = check_with_profile(
        usage,
        rebuilt.output_ids,
        prompt_len,
        profile,
        truncated_in=turn.metadata.get("truncated_in"),
        completion_conventions=pinned or None,
        reasoning_into_tools=any(f.code is FlagCode.THINK_END_OMITTED for f in rebuilt.flags),
    )
    return replace(rebuilt, flags=flags, token_counts=counts)


def _bad_prompt_row(bad: BadPrompt, model: str) -> dict[str, Any]:
    return error_row(bad.id, model, {"type": "invalid_prompt", "code": None, "message": bad.message}, line=bad.line)


def _rebuilders(
    config: GenerateConfig, reconstructor: Reconstructor | None
) -> tuple[Reconstructor | None, PromptCounter | None, Decoder | None]:
    """The run's reconstructor, prompt counter (for the usage check) and the decoder of its ids, the
    tokenizer loaded once for all three. A reconstructor passed in brings no decoder."""
    rebuild = reconstructor
    tokenizer: str | KimiTokenizer | None = config.tokenizer
    decode: Decoder | None = None
    if rebuild is None and config.reconstruct:
        from ..tokenizer import load_tokenizer, tokenizer_for_profile
        from .rebuild import make_reconstructor

        tokenizer = load_tokenizer(config.tokenizer) if config.tokenizer is not None else None
        decode = tokenizer_for_profile(tokenizer, config.profile).decode
        rebuild = make_reconstructor(
            profile=config.profile,
            thinking=config.options.thinking,
            tokenizer=tokenizer,
            prompt_ids=config.prompt_ids,
            training_sample=config.training_sample,
            server=config.server,
        )
    count_prompt: PromptCounter | None = None
    if rebuild is not None and config.check_usage and not (config.prompt_ids or config.training_sample):
        # (with prompt ids or samples, the reconstruction encodes the prompt anyway)
        from .rebuild import make_prompt_counter

        count_prompt = make_prompt_counter(profile=config.profile, thinking=config.options.thinking, tokenizer=tokenizer)
    return rebuild, count_prompt, decode


@dataclass
class _Spend:
    """What this run spent, and whether ``--max-cost`` lets another prompt go out.

    The limit is kept with the dearest answer so far as the price of each request in flight: a prompt is
    sent only while ``spent + in_flight * dearest`` is under the limit, and until one answer has a cost,
    one prompt at a time is in flight. With answers of $1 and a limit of $3, three prompts are sent,
    whatever the concurrency. A row that may have been paid for but carries no usable cost (none, a NaN,
    an infinity, a negative, a string) makes the spend unknown: with a limit, sending stops there.
    """

    max_cost: float | None
    secret: str | None = None  # the reason quotes the server's cost, which is printed: scrubbed like any server text
    spent: float = 0.0
    dearest: float | None = None
    unknown: str | None = None  # why the spend became unknown (the first row without a usable cost)
    unknown_rows: int = 0

    def add(self, row: Mapping[str, Any]) -> None:
        cost = row.get("cost")
        if isinstance(cost, float):  # rows.cost_of: finite and 0 or more
            self.spent += cost
            if row.get("usage") is not None:
                self.dearest = max(cost, self.dearest or 0.0)
        elif cost_unknown(row):
            self.unknown_rows += 1
            if self.unknown is None:
                why = row.get("cost_invalid") or "it reported no usage.cost"
                self.unknown = redact_text(f"prompt {row.get('id')!r}: {why}", self.secret)

    def stop_reason(self) -> str | None:
        if self.max_cost is None:
            return None
        if self.unknown is not None:
            return f"the spend is unknown ({self.unknown}), so the spend limit ${self.max_cost} cannot be kept"
        if self.spent >= self.max_cost:
            return f"spend limit ${self.max_cost} reached"
        return None

    def may_send(self, in_flight: int) -> bool:
        if self.max_cost is None:
            return True
        if self.dearest is None:
            return in_flight == 0  # the first priced answer sizes the rest
        return self.spent + in_flight * self.dearest < self.max_cost


def run_generate(
    config: GenerateConfig,
    api_key: str,
    *,
    client: OpenAI | None = None,
    reconstructor: Reconstructor | None = None,
    stderr: TextIO | None = None,
) -> RunSummary:
    """Run ``config.prompts`` through OpenRouter into ``config.output`` and say what happened.

    ``client`` and ``reconstructor`` replace the defaults (an SDK client from the config; kimi-recon's
    reconstruction with the configured profile and tokenizer), e.g. in tests.
    """
    from tqdm import tqdm

    err_stream = stderr if stderr is not None else sys.stderr
    options = config.options
    # a key no request can carry would make every prompt an error row; a self-hosted server takes a placeholder
    api_key = checked_api_key(api_key, placeholder_ok=not is_openrouter(config.base_url))
    secret = secret_of(api_key)
    check_input(config.prompts, "prompts")
    from ..tokenizer import tokenizer_files

    # every file the run reads is an input the log may not be (-o DIR/config.json would append rows to it)
    refuse_output_is_input(config.output, [config.prompts, *tokenizer_files(config.tokenizer)])
    if output_compression(config.output) is not None or str(config.output).lower().endswith(".parquet"):
        # every other command writes such a name as it says; the log is appended to row by row, which no
        # compressed or columnar file allows, and plain text under that name is a file zcat and datasets refuse
        raise OutputFileError(
            f"{config.output} names a compressed or Parquet file, but the log is JSON Lines appended to as answers arrive: "
            "name it .jsonl (compress it after the run: every command reads .gz and .zst)",
            field="output",
        )
    items = read_prompts(config.prompts, secret=secret)
    out = OutputFile(config.output, fsync=config.fsync, secret=secret)
    out.lock_existing()  # a rival run on the same file is refused now, not after the tokenizer has loaded
    try:
        # A bad --tokenizer fails here, before the output is created or changed.
        rebuild, count_prompt, decode = _rebuilders(config, reconstructor)
    except BaseException:
        out.close()
        raise
    with out:
        state = out.state
        assert state is not None
        done = state.done - state.failed if config.retry_errors else state.done
        todo = [item for item in items if item.id not in done]
        already = len(items) - len(todo)
        if config.limit is not None:
            todo = todo[: config.limit]

        if client is None:
            client = make_client(
                api_key,
                base_url=config.base_url,
                timeout=config.timeout,
                max_retries=config.max_retries,
                app_url=config.app_url,
                app_title=config.app_title,
            )

        counts = {"ok": 0, "errors": 0, "written": 0}
        tally = TokenCountTally()
        budget = _Spend(config.max_cost, secret)
        tokens = 0
        started = time.monotonic()
        bar = tqdm(total=len(todo), unit="prompt", file=err_stream, disable=not (config.progress and todo), dynamic_ncols=True)

        def write(row: dict[str, Any], token_counts: TokenCounts | None = None) -> None:
            """Append ``row``; ``token_counts`` is the usage check it carries (:func:`_row_for`)."""
            nonlocal tokens
            status = out.append(row)  # may differ from the row's: e.g. a response that echoed the key
            counts["written"] += 1
            counts["ok" if status == "ok" else "errors"] += 1
            if status == "ok":
                tally.add(row.get("provider"), token_counts)
            budget.add(row)
            usage = row.get("usage")
            if isinstance(usage, Mapping) and isinstance(usage.get("completion_tokens"), int):
                tokens += usage["completion_tokens"]
            bar.update(1)
            rate = tokens / max(time.monotonic() - started, 1e-9)
            bar.set_postfix(ok=counts["ok"], err=counts["errors"], spent=f"${budget.spent:.4f}", tok_s=f"{rate:.0f}", refresh=False)

        stopped: str | None = None
        refused = False
        pending: list[Prompt] = []
        try:
            for item in todo:  # bad lines cost nothing: record them first
                if isinstance(item, BadPrompt):
                    write(_bad_prompt_row(item, options.model))
                else:
                    pending.append(item)
            run = _Run(config, client, options, api_key, rebuild, count_prompt, decode, err_stream)
            stopped, refused = _dispatch(pending, run, write, budget)
        except KeyboardInterrupt:  # a second signal, or one outside the dispatch: in-flight requests are abandoned
            stopped = "interrupted"
        finally:
            bar.close()
        summary = RunSummary(
            total=len(items),
            already_done=already,
            written=counts["written"],
            ok=counts["ok"],
            errors=counts["errors"],
            cost=budget.spent,
            remaining=len(items) - already - counts["written"],
            stopped=stopped,
            repaired_tail=state.repaired_tail,
            refused=refused,
            token_counts=tally.to_dict(),
            cost_unknown=budget.unknown_rows,
        )
    return summary


@dataclass(frozen=True)
class _Run:
    """What the workers and the writer of one run share."""

    config: GenerateConfig
    client: OpenAI
    options: RequestOptions
    secret: str
    rebuild: Reconstructor | None
    count_prompt: PromptCounter | None
    decode: Decoder | None
    err_stream: TextIO


class _Signals:
    """SIGINT and SIGTERM during the dispatch: the first one stops sending and lets the requests in flight
    finish (their answers may already be paid for); a second one raises ``KeyboardInterrupt`` at once.

    Only the main thread can install handlers; elsewhere the first signal interrupts as it always did."""

    def __init__(self) -> None:
        self.first = threading.Event()
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)

    def _handle(self, signum: int, frame: object) -> None:
        if self.first.is_set():
            raise KeyboardInterrupt
        self.first.set()


def _dispatch(
    prompts: list[Prompt],
    run: _Run,
    write: Callable[[dict[str, Any], TokenCounts | None], None],
    budget: _Spend,
) -> tuple[str | None, bool]:
    """Feed ``prompts`` to worker threads, ``concurrency`` at a time, writing each row as it completes;
    return why sending stopped early (or None) and whether the server refused the key or the account.

    Workers are daemon threads. On a first SIGINT/SIGTERM nothing new is sent and the requests in flight
    get ``grace_period`` seconds to finish and be written; a second signal (or the end of the grace period)
    abandons the rest (they have no row, so the next run sends them again). When the server refuses the
    key or the account, nothing new is sent; the requests in flight finish and their rows are written
    (they may have been paid for), except those refused the same way, which get no row and stay to be sent.
    """
    config = run.config
    work: queue.Queue[Prompt | None] = queue.Queue()
    results: queue.Queue[_Outcome] = queue.Queue()

    def worker() -> None:
        while True:
            prompt = work.get()
            if prompt is None:
                return
            results.put(_fetch_one(run.client, prompt, run.options, config, run.secret, run.count_prompt))

    n_workers = min(config.concurrency, len(prompts))
    for _ in range(n_workers):
        threading.Thread(target=worker, name="openrouter-worker", daemon=True).start()

    next_index = 0
    in_flight = 0
    stopped: str | None = None
    refused = False
    deadline: float | None = None  # after a first signal: when the requests in flight are abandoned
    try:
        with _Signals() as signals:
            while next_index < len(prompts) or in_flight:
                if signals.first.is_set() and deadline is None:
                    stopped, deadline = "interrupted", time.monotonic() + config.grace_period
                    if in_flight:
                        print(
                            f"\ngenerate: interrupted; waiting up to {config.grace_period:g} s for the {in_flight} "
                            "requests in flight (they may be paid for); interrupt again to abandon them",
                            file=run.err_stream,
                            flush=True,
                        )
                if deadline is not None and time.monotonic() >= deadline:
                    break
                if stopped is None:
                    stopped = budget.stop_reason()
                while stopped is None and next_index < len(prompts) and in_flight < config.concurrency and budget.may_send(in_flight):
                    work.put(prompts[next_index])
                    next_index += 1
                    in_flight += 1
                if not in_flight:
                    break
                try:
                    outcome = results.get(timeout=0.2)  # a timeout keeps signals and the grace period responsive
                except queue.Empty:
                    continue
                in_flight -= 1
                if outcome.refused:
                    # No row: an error row would count as done, and a rerun with a fixed key must send this prompt.
                    if not refused:
                        refused, stopped = True, _refused_reason(outcome)
                    continue
                try:
                    row, token_counts = _row_for(outcome, run.options, config, run.rebuild, run.secret, run.decode)
                except Exception as err:  # noqa: BLE001 - never lose a prompt to a bug in row building
                    message = redact_text(f"prompt {outcome.prompt.id!r}: {type(err).__name__}: {err}", run.secret)
                    error = {"type": "internal", "code": None, "message": message}
                    row = error_row(outcome.prompt.id, run.options.model, error, line=outcome.prompt.line, response=outcome.response)
                    token_counts = None
                write(row, token_counts)
    finally:
        for _ in range(n_workers):
            work.put(None)
    return stopped, refused


def _refused_reason(outcome: _Outcome) -> str:
    """Why the run stopped, for the summary line. The server's text was redacted before it was cut."""
    error = outcome.error or {}
    message = str(error.get("message", ""))
    message = message if len(message) <= 300 else message[:300] + "…"
    return (
        f"the server refused the API key or the account (HTTP {error.get('code')} on prompt {outcome.prompt.id!r}: "
        f"{message}); fix OPENROUTER_API_KEY or the account's credit, then re-run: prompts without a row are sent again"
    )
