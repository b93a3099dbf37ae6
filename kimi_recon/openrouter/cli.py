"""``kimi-recon generate``: prompts JSONL -> OpenRouter -> a resumable log with the rebuilt ids (``export`` makes training rows).

:func:`register` adds the subcommand to the main CLI. Nothing here imports ``openai`` (or the
reconstruction stack) until the command runs, so ``kimi-recon --help`` stays fast and works without
the ``openrouter`` extra. ``python -m kimi_recon.openrouter`` runs the command on its own.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .._base.arguments import instance_argument
from .._base.terminal import terminal_safe
from ..errors import KimiReconError

DESCRIPTION = """\
Send every prompt of PROMPTS to a Kimi model through OpenRouter (or any OpenAI-compatible server with
--base-url) and append one row per prompt to OUT: the response, the token ids the model generated
(rebuilt from the text), flags, the usage check and the cost. `kimi-recon export OUT` turns the log
into training rows. Needs the openrouter extra: pip install 'kimi-recon[openrouter]'.

Each line of PROMPTS is a JSON object:
  "messages"   the chat so far, ending with a user or tool message: [{"role": "user", "content": "..."}]
  "tools"      optional: tool declarations, [{"type": "function", "function": {"name", "parameters"}}]
  "id"         optional: a unique string or integer (default: derived from the content)

Example:
  export OPENROUTER_API_KEY=...
  kimi-recon generate prompts.jsonl -o log.jsonl --model moonshotai/kimi-k2.5 --training-sample --max-cost 5
"""

EPILOG = """\
The API key is read from OPENROUTER_API_KEY and is never printed or written.
Re-running the same command resumes: prompts already in OUT (as a row or an error) are skipped;
with --retry-errors, prompts whose last row is an error are sent again (a new row is appended).
A first Ctrl-C (or SIGTERM) stops sending and lets the requests in flight finish for up to --grace
seconds; a second one abandons them (they have no row, so a rerun sends them again).
Exit status: 0 all done, 1 some prompts recorded as errors, 2 bad usage or setup,
3 prompts remain (spend limit or --limit), 4 the server refused the key or the account
(HTTP 401, 402, 403: nothing more is sent and those prompts get no row; fix it and re-run), 130 interrupted.
"""


def _csv(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def _read_number(kind: type[float] | type[int], text: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None


def _out_of_range(text: str, low: float, high: float = math.inf, *, above: bool = False) -> argparse.ArgumentTypeError:
    bound = f"above {low:g}" if above else f"at least {low:g}"
    return argparse.ArgumentTypeError(f"must be {bound}" + (f" and at most {high:g}" if high != math.inf else "") + f", got {text}")


def _number(kind: type[float] | type[int], low: float, high: float = math.inf, *, above: bool = False) -> Callable[[str], Any]:
    """An argparse type: ``kind`` in [low, high] (or (low, high] with ``above``), finite. (For a request setting,
    whose range only the command line sets; a run setting's is the config's: :func:`_setting`.)"""

    def parse(text: str) -> Any:
        value = _read_number(kind, text)
        if not math.isfinite(value) or value < low or (above and value == low) or value > high:
            raise _out_of_range(text, low, high, above=above)
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its messages
    return parse


def _setting(name: str) -> Callable[[str], Any]:
    """An argparse type for the :class:`~kimi_recon.openrouter.generate.GenerateConfig` setting ``name``: the
    text read as a number, whose range the config's own check decides (:func:`~.generate._check_setting`,
    imported once a flag is given: the command imports it anyway), refused in a flag's words."""

    def parse(text: str) -> Any:
        from .generate import _SETTING_RANGES, _check_setting

        setting = _SETTING_RANGES[name]
        value = _read_number(int if setting.integer else float, text)
        try:
            _check_setting(name, value)
        except KimiReconError:
            raise _out_of_range(text, setting.low, above=setting.above) from None
        return value

    return parse


def _non_empty(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text


def _url(text: str) -> str:
    if not text.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"must be an http:// or https:// URL, got {text!r}")
    return text


def _output(text: str) -> Path:
    if text == "-":
        raise argparse.ArgumentTypeError(
            "must be a file: the output is an append-only log that a rerun reads back to resume, so it cannot be - (stdout)"
        )
    return Path(text)


#: OpenRouter's documented reasoning.effort values.
EFFORTS = ("xhigh", "high", "medium", "low", "minimal", "none")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompts", type=Path, help="JSONL (.gz, .zst too), one {\"messages\": [...], \"tools\": [...], \"id\": ...} per line; - for stdin")
    p.add_argument("-o", "--output", type=_output, required=True, help="JSONL file to append rows to (created if missing; a regular file)")
    p.add_argument("--model", type=_non_empty, default="moonshotai/kimi-k2.5", help="OpenRouter model slug (default: %(default)s)")

    g = p.add_argument_group("request")
    g.add_argument("--max-tokens", type=_number(int, 1), default=None)
    g.add_argument("--temperature", type=_number(float, 0, 2), default=None)
    g.add_argument("--top-p", type=_number(float, 0, 1, above=True), default=None)
    g.add_argument("--seed", type=int, default=None)
    g.add_argument("--no-thinking", action="store_true", help="turn reasoning off (reasoning.enabled=false); rebuild without thinking")
    g.add_argument("--reasoning-effort", choices=EFFORTS, default=None, help="reasoning.effort")
    g.add_argument("--reasoning-max-tokens", type=_number(int, 1), default=None, help="reasoning.max_tokens budget")
    g.add_argument("--logprobs", action="store_true", help="ask for logprobs (exact ids even for unusual token splits, where supported)")
    g.add_argument("--top-logprobs", type=_number(int, 0, 20), default=None)
    g.add_argument("--provider-order", type=_csv, default=[], help="provider.order, comma-separated")
    g.add_argument("--provider-only", type=_csv, default=[], help="provider.only, comma-separated")
    g.add_argument("--require-parameters", action="store_true", help="provider.require_parameters: only providers supporting every parameter sent")
    g.add_argument("--no-fallbacks", action="store_true", help="provider.allow_fallbacks=false")
    g.add_argument("--quantizations", type=_csv, default=[], help="provider.quantizations, comma-separated")
    g.add_argument("--extra-body", type=_json_object, default={}, help="more OpenRouter body fields, as a JSON object")
    g.add_argument("--stream", action="store_true", help="stream responses (SSE); rows hold the assembled response")
    g.add_argument(
        "--return-token-ids",
        action="store_true",
        help="self-hosted vLLM/SGLang/llama.cpp (--base-url): ask for the generated token ids (return_token_ids; llama.cpp: return_tokens + verbose); they become "
        "the rebuilt ids, exact even where the server's parsers lost text",
    )

    g = p.add_argument_group("transport")
    g.add_argument("--base-url", type=_url, default=None, help="API base URL (default: $OPENROUTER_BASE_URL or https://openrouter.ai/api/v1)")
    g.add_argument("--concurrency", type=_setting("concurrency"), default=4, help="requests in flight (default: %(default)s)")
    g.add_argument("--timeout", type=_setting("timeout"), default=600.0, help="seconds per connect/read (default: %(default)s)")
    g.add_argument("--max-retries", type=_setting("max_retries"), default=4, help="retries on 429/5xx/timeouts (default: %(default)s)")
    g.add_argument("--app-url", default=None, help="HTTP-Referer header for OpenRouter attribution")
    g.add_argument("--app-title", default=None, help="X-Title header for OpenRouter attribution")

    g = p.add_argument_group("output")
    g.add_argument("--tokenizer", default=None, help="tokenizer directory or Hub repo id (default: bundled K2.5)")
    g.add_argument("--profile", default=None, help="chat format used to rebuild ids (default: the --model's, e.g. kimi-k3 for moonshotai/kimi-k3; a --model that names none needs it)")
    g.add_argument("--prompt-ids", action="store_true", help="also write the prompt ids")
    g.add_argument("--training-sample", action="store_true", help="also write the training sample (input_ids, loss_mask); `kimi-recon export` turns the log into trainer rows")
    g.add_argument("--no-reconstruct", action="store_true", help="store responses only; rebuild ids later")
    g.add_argument("--no-usage-check", action="store_true", help="do not compare the rebuilt ids with the server's usage token counts")
    g.add_argument("--keep-server-call-ids", action="store_true", help="do not replace server-issued tool-call ids with functions.NAME:IDX")
    g.add_argument(
        "--server",
        default=None,
        help="the server behind --base-url, for what its parsers lose: vllm==0.15.1, vllm==0.33.0, sglang==0.5.23, vllm, "
        "sglang (default: what each response reveals, else unknown)",
    )
    g.add_argument(
        "--max-cost",
        type=_setting("max_cost"),
        default=None,
        help="send no prompt whose answer (priced as the dearest one so far) would take this run past this many USD; stops when a cost is unknown",
    )
    g.add_argument("--limit", type=_setting("limit"), default=None, help="send at most this many prompts in this run")
    g.add_argument("--retry-errors", action="store_true", help="send again the prompts whose last row in OUT is an error (by default error rows count as done)")
    g.add_argument("--grace", type=_setting("grace_period"), default=30.0, help="seconds the requests in flight get to finish after a first Ctrl-C/SIGTERM (default: %(default)s)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar (also: TQDM_DISABLE=1)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary on stderr unless something failed")
    g.add_argument("--no-fsync", action="store_true", help="do not fsync each row (faster; a power cut may lose recent rows)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``generate`` subcommand to the main CLI's subparsers."""
    instance_argument(subparsers, "subparsers", argparse._SubParsersAction, "argparse subparsers (ArgumentParser.add_subparsers())")
    p = subparsers.add_parser(
        "generate",
        help="run a prompt file through OpenRouter into a resumable log with rebuilt ids (needs the openrouter extra)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_arguments(p)
    p.set_defaults(func=cmd_generate)


def _profile_of_model(model: str) -> str:
    """The format of ``--model``'s answers when no ``--profile`` is given: the profile its id names, else a usage
    error naming ``--model`` (before anything is sent): another maker's model is no Kimi model, and an id that names
    none (a local server's own name) would have every row rebuilt as K2.5 without a word."""
    from ..errors import InvalidInputError, preview
    from ..profiles import other_model, profile_for_model

    named = profile_for_model(model, default="")
    if named:
        return named
    other = other_model(model)
    why = f"names {other}, not a Kimi model" if other else "names no Kimi model kimi-recon knows (a server's own name?)"
    raise InvalidInputError(f"{preview(model)} {why}: say the format of its answers with --profile (kimi-k2.5, kimi-k3, …)", field="--model")


def cmd_generate(args: argparse.Namespace) -> int:
    """Run the command; returns the exit status (see EPILOG)."""
    if args.return_token_ids and args.stream:  # a usage error: before the extra, the key or anything is sent
        print(
            "kimi-recon: error: --return-token-ids and --stream cannot go together: a streamed answer is "
            "assembled from its text and the server's ids would be dropped; leave out --stream to get them",
            file=sys.stderr,
        )
        return 2
    try:
        import openai  # noqa: F401  (checked here so the message names the extra)
    except ImportError:
        print("kimi-recon generate needs the openrouter extra: pip install 'kimi-recon[openrouter]' (in a clone: pip install -e '.[openrouter]')", file=sys.stderr)
        return 2
    from .._batch.pool import progress_disabled_by_env
    from .client import BASE_URL_ENV, DEFAULT_BASE_URL, api_key_from_env
    from .generate import GenerateConfig, run_generate
    from .options import RequestOptions, provider_preferences, reasoning_settings

    profile = args.profile if args.profile is not None else _profile_of_model(args.model)  # before anything is sent
    base_url = args.base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
    api_key = api_key_from_env(base_url=base_url)  # a self-hosted server (--base-url) needs no key
    options = RequestOptions(
        model=args.model,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        reasoning=reasoning_settings(
            enabled=not args.no_thinking, effort=args.reasoning_effort, max_tokens=args.reasoning_max_tokens
        ),
        logprobs=args.logprobs or args.top_logprobs is not None,
        top_logprobs=args.top_logprobs,
        provider=provider_preferences(
            order=args.provider_order,
            only=args.provider_only,
            require_parameters=args.require_parameters,
            allow_fallbacks=False if args.no_fallbacks else None,
            quantizations=args.quantizations,
        ),
        stream=args.stream,
        extra_body=args.extra_body,
        return_token_ids=args.return_token_ids,
    )
    config = GenerateConfig(
        prompts=args.prompts,
        output=args.output,
        options=options,
        base_url=base_url,
        concurrency=args.concurrency,
        timeout=args.timeout,
        max_retries=args.max_retries,
        reconstruct=not args.no_reconstruct,
        profile=profile,
        tokenizer=args.tokenizer,
        prompt_ids=args.prompt_ids,
        training_sample=args.training_sample,
        fix_tool_call_ids=not args.keep_server_call_ids,
        server=args.server,
        check_usage=not args.no_usage_check,
        max_cost=args.max_cost,
        limit=args.limit,
        retry_errors=args.retry_errors,
        grace_period=args.grace,
        progress=not (args.no_progress or args.quiet or progress_disabled_by_env()),
        fsync=not args.no_fsync,
        app_url=args.app_url,
        app_title=args.app_title,
    )
    summary = run_generate(config, api_key)
    if summary.exit_code != 0 or not args.quiet:
        # provider names and error texts come from the server: escaped, so none can drive the terminal
        print(terminal_safe("\n".join(summary.lines())), file=sys.stderr)
    return summary.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point: ``python -m kimi_recon.openrouter generate PROMPTS -o OUT ...``."""
    from .._base.cli_common import shell_status

    return shell_status(lambda: _run(argv))  # a reader that goes away (``| head``) ends the command quietly


def _run(argv: Sequence[str] | None) -> int:
    from .._base.cli_common import sigterm_as_interrupt

    parser = argparse.ArgumentParser(prog="kimi-recon", description="OpenRouter adapter of kimi-recon")
    sub = parser.add_subparsers(dest="command", required=True)
    register(sub)
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():  # a SIGTERM stops the run like Ctrl-C: rows written so far stay whole
            code: int = args.func(args)
    except BrokenPipeError:  # not an error of ours: shell_status ends the command quietly
        raise
    except (KimiReconError, OSError) as err:
        print(terminal_safe(f"kimi-recon: error: {err}"), file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
