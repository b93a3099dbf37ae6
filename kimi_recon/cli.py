"""The ``kimi-recon`` command line. Heavy modules are imported inside each command, so ``--help`` is fast."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from ._io import atomic_output, check_input, is_stdio, open_input, refuse_output_is_input, to_json_line
from .errors import InputFileError, InvalidInputError, KimiReconError


def _tokenizer(args: argparse.Namespace) -> Any:
    from .tokenizer import load_tokenizer

    return load_tokenizer(args.tokenizer, profile=getattr(args, "profile", None))


def cmd_audit_tokens(args: argparse.Namespace) -> int:
    from .audit import check_token_ids, check_special_tokens

    if args.constants:
        check_input(args.constants, "--constants")
    tok = _tokenizer(args)
    reports = [check_special_tokens(tok, profile=args.profile)]
    if args.constants:
        with open_input(args.constants) as f:
            try:
                constants = json.load(f)
            except (ValueError, RecursionError) as err:
                raise InputFileError(f"{args.constants} is not JSON: {err}", field="--constants") from None
        if not isinstance(constants, dict):
            raise KimiReconError(f"{args.constants} must hold a JSON object of NAME: id")
        reports.append(check_token_ids(constants, tok, profile=args.profile))
    for report in reports:
        print(report)
    return 0 if all(r.ok for r in reports) else 1


def _check_files(args: argparse.Namespace, outputs: Sequence[tuple[str, str | None]]) -> None:
    """Inputs exist and are readable, and no output is the input: checked before any output is opened."""
    check_input(args.input)
    for option, path in outputs:
        if path is not None:
            refuse_output_is_input(path, [args.input], field=option)


def _write_rows(path: str, rows: Iterator[dict[str, Any]], what: str) -> int:
    """Write one JSON row per input record (errors included, as rows with an ``error``); exit 1 if any failed.

    The rows go to a temporary file renamed over ``path`` only once every record is written.
    """
    done = failed = 0
    with atomic_output(path) as out:
        for row in rows:
            failed += row.get("error") is not None
            done += 1
            # a lone surrogate (from a "\\ud800" escape in the input) is written as that escape by atomic_output
            out.write(to_json_line(row) + "\n")
    print(f"{what} {done - failed} of {done} records; {failed} recorded as errors", file=sys.stderr)
    return 1 if failed else 0


def cmd_reconstruct(args: argparse.Namespace) -> int:
    from .dataset import reconstruct_records

    _check_files(args, [("--output", args.output)])
    results = reconstruct_records(
        args.input,
        args.tokenizer,
        profile=args.profile,
        thinking=not args.no_thinking,
        workers=args.workers,
        progress=None,
        server=args.server,
    )
    return _write_rows(args.output, (r.to_dict() for r in results), "reconstructed")


def _training_outputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    from ._training_rows import errors_path_for

    errors = args.errors if args.errors is not None or is_stdio(args.output) else errors_path_for(args.output)
    return [("--output", args.output), ("--errors", errors)]


def cmd_build_samples(args: argparse.Namespace) -> int:
    from ._training_rows import build_samples, write_training_rows

    _check_files(args, _training_outputs(args))
    template = None
    if args.chat_template is not None:
        check_input(args.chat_template, "--chat-template")
        with open(args.chat_template, encoding="utf-8") as f:  # read before the output is touched
            template = f.read()
    results = build_samples(
        args.input,
        args.tokenizer,
        profile=args.profile,
        thinking=not args.no_thinking,
        template=template,
        workers=args.workers,
        progress=None,
        drop_severity=args.drop_severity,
        server=args.server,
    )
    summary = write_training_rows(results, args.output, args.errors)
    print(summary.line("build-samples"), file=sys.stderr)
    return 1 if summary.errors else 0


def cmd_export(args: argparse.Namespace) -> int:
    from ._training_rows import write_training_rows
    from .openrouter.export import export_rows

    _check_files(args, _training_outputs(args))
    results = export_rows(args.input, skip_flagged=args.skip_flagged, skip_truncated=args.skip_truncated)
    summary = write_training_rows(results, args.output, args.errors)
    print(summary.line("export"), file=sys.stderr)
    return 1 if summary.errors else 0


def cmd_audit(args: argparse.Namespace) -> int:
    from ._report_io import check_distinct_outputs, write_reports
    from .dataset import audit_dataset

    args.input = _audit_input(args)
    if args.html_examples < 0:
        raise InvalidInputError(f"must be 0 or more, got {args.html_examples}", field="--html-examples")
    _check_files(args, [("--json", args.json), ("--html", args.html)])
    check_distinct_outputs([("--json", args.json), ("--html", args.html)])
    report = audit_dataset(
        args.input,
        _tokenizer(args),
        profile=args.profile,
        thinking=not args.no_thinking,
        workers=args.workers,
        worst=args.html_examples,
        server=args.server,
    )
    # With --json - (or --html -), stdout carries that report alone and the readable summary goes to stderr.
    to_stdout = any(path is not None and is_stdio(path) for path in (args.json, args.html))
    print(report.summary(), file=sys.stderr if to_stdout else sys.stdout)
    write_reports(report, json_path=args.json, html_path=args.html)
    for path in (args.json, args.html):
        if path is not None and not is_stdio(path):
            print(f"wrote {path}", file=sys.stderr)
    # Unreadable records count against the rate: 1 exact record of 10 lines is 10%, not "1/1".
    if args.min_exact is not None and report.exact_rate_of_all < args.min_exact:
        print(
            f"FAIL: exact rate {report.exact_rate_of_all:.4f} ({report.exact_count} of {report.total} records, "
            f"{report.error_count} unreadable) is below --min-exact {args.min_exact}",
            file=sys.stderr,
        )
        return 1
    return 0


def cmd_export_tokenizer(args: argparse.Namespace) -> int:
    from .fast_tokenizer import export_tokenizer

    result = export_tokenizer(args.directory, args.profile, _tokenizer(args), overwrite=args.overwrite)
    print(f"wrote {', '.join(p.name for p in result.files)} ({result.profile}) to {result.directory}", file=sys.stderr)
    return 0


def _audit_input(args: argparse.Namespace) -> str:
    if args.sample:
        if args.input is not None:
            raise InvalidInputError("give an input file or --sample, not both", field="input")
        from ._sample import sample_path

        return str(sample_path())
    if args.input is None:
        raise InvalidInputError("is missing: give a JSONL file of records (- for stdin), or --sample for the bundled one", field="input")
    return str(args.input)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("kimi-recon")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


class _VersionAction(argparse.Action):
    """``--version``, looked up only when asked (package metadata is slow to read)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, option_string: str | None = None) -> None:
        print(f"kimi-recon {_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kimi-recon", description=__doc__)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True)

    def with_tokenizer(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--tokenizer", default=None, help="tokenizer directory or Hub repo id (default: bundled K2.5)")
        return p

    def with_format(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--profile",
            default=None,
            help="chat format: kimi-k2.5, kimi-k2.6, kimi-k2.7-code, kimi-k2-thinking, kimi-k2-instruct, kimi-k3 "
            "(default: each record's model id decides, kimi-k2.5 when it names none)",
        )
        p.add_argument("--no-thinking", action="store_true", help="the turns were generated with thinking off")
        p.add_argument(
            "--server",
            default=None,
            help="the server whose parsers produced the responses: vllm==0.15.1, vllm==0.33.0, sglang==0.5.23, vllm, "
            "sglang (newest known), none (raw model text); default: what each response reveals, else unknown (may "
            "lose whatever any known parser loses). A record's own server field wins",
        )
        return p

    p = with_tokenizer(sub.add_parser("audit-tokens", help="check the tokenizer's special tokens (and your constants) against the Kimi registry"))
    p.add_argument("--constants", help="a JSON file (or - for stdin) of your own id constants, e.g. {\"IM_END_TOKEN_ID\": 163586}")
    p.add_argument("--profile", default=None, help="check against this profile's table (kimi-k3: K3's names; default: the tokenizer's own)")
    p.set_defaults(func=cmd_audit_tokens)

    p = with_format(with_tokenizer(sub.add_parser("reconstruct", help="responses JSONL -> output ids JSONL")))
    p.add_argument("input", help="JSONL file, or - for stdin")
    p.add_argument("-o", "--output", default="-", help="JSONL file, replaced only once complete; - for stdout (default)")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    p.set_defaults(func=cmd_reconstruct)

    p = with_format(with_tokenizer(sub.add_parser("audit", help="round-trip audit of responses against reference ids")))
    p.add_argument("input", nargs="?", help="JSONL file of records (response + reference ids), or - for stdin")
    p.add_argument("--sample", action="store_true", help="audit the bundled sample of official K2.5 dev conversations")
    p.add_argument("--min-exact", type=_share, default=None, help="exit 1 when exact records are fewer than this share of all records, unreadable ones included (0..1)")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    p.add_argument("--json", help="also write the full report as JSON to this file (- for stdout; the summary then goes to stderr)")
    p.add_argument("--html", help="also write the report as one self-contained HTML page to this file (- for stdout)")
    p.add_argument("--html-examples", type=int, default=20, metavar="N", help="worst records shown token by token (default 20)")
    p.set_defaults(func=cmd_audit)

    p = with_format(
        with_tokenizer(
            sub.add_parser(
                "build-samples",
                help="conversations + responses -> training rows for SpecForge / vLLM speculators (docs/training.md)",
                description="Write one training row (id, input_ids, loss_mask, prompt_len, flags) per good record to "
                "OUTPUT and every failed record, with its id and the reason, to the errors file. Both files are "
                "replaced only when the run completes. Exit 1 when any record failed.",
            )
        )
    )
    p.add_argument("input", help="JSONL file, or - for stdin")
    p.add_argument("-o", "--output", default="-", help="training rows JSONL, replaced only once complete; - for stdout (default)")
    p.add_argument("--errors", default=None, help="failed records JSONL (default: OUTPUT.errors.jsonl; stderr with -o -)")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    p.add_argument(
        "--chat-template",
        metavar="FILE",
        help="render prompts with this Jinja chat template instead of the profile's; a record's template_kwargs "
        "(e.g. {\"preserve_thinking\": true}) reach it as variables",
    )
    p.add_argument(
        "--drop-severity",
        choices=("info", "risk", "loss"),
        default=None,
        help="send records with a flag of this severity or above to the errors file (loss: ids that almost surely "
        "differ from the model's; risk: also those that may differ)",
    )
    p.set_defaults(func=cmd_build_samples)

    p = sub.add_parser(
        "export",
        help="a generate log -> training rows (needs rows written with generate --training-sample)",
        description="Read the resumable log of `kimi-recon generate` and write the training row of every ok "
        "prompt to OUTPUT; error rows, rows without a sample, and (when asked) flagged or truncated rows go "
        "to the errors file with the reason. The log is not modified.",
    )
    p.add_argument("input", metavar="LOG", help="the JSONL that generate wrote, or - for stdin")
    p.add_argument("-o", "--output", default="-", help="training rows JSONL (default: stdout)")
    p.add_argument("--errors", default=None, help="skipped prompts JSONL (default: OUTPUT.errors.jsonl; stderr with -o -)")
    p.add_argument("--skip-flagged", action="store_true", help="send rows with any flag to the errors file")
    p.add_argument("--skip-truncated", action="store_true", help="send rows whose turn was cut (finish_reason length) to the errors file")
    p.set_defaults(func=cmd_export)

    p = with_tokenizer(sub.add_parser("export-tokenizer", help="write a Hugging Face fast tokenizer (tokenizer.json) to DIR"))
    p.add_argument("directory", metavar="DIR")
    p.add_argument("--profile", default="kimi-k2.5", help="whose special-token names to use: kimi-k2.5, kimi-k2.6, kimi-k2-thinking, ...")
    p.add_argument("--overwrite", action="store_true", help="replace tokenizer files already in DIR")
    p.set_defaults(func=cmd_export_tokenizer)

    try:
        from .openrouter.cli import register
    except ImportError:  # the adapter is optional
        pass
    else:
        register(sub)
    return parser


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C while a command runs, so temporary outputs are removed and old ones stay."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _share(text: str) -> float:
    """A number from 0 to 1 (argparse exits 2 with this message otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with sigterm_as_interrupt():
            code: int = args.func(args)
    except (KimiReconError, OSError) as err:
        print(f"kimi-recon: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kimi-recon: interrupted; outputs were left as they were", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
