"""The ``kimi-recon`` command line. Heavy modules are imported inside each command, so ``--help`` is fast."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from .errors import KimiReconError


def _tokenizer(args: argparse.Namespace) -> Any:
    from .tokenizer import load_tokenizer

    return load_tokenizer(args.tokenizer)


def cmd_audit_tokens(args: argparse.Namespace) -> int:
    from .audit import audit_ids, audit_special_tokens

    tok = _tokenizer(args)
    reports = [audit_special_tokens(tok)]
    if args.constants:
        with open(args.constants, encoding="utf-8") as f:
            constants = json.load(f)
        if not isinstance(constants, dict):
            raise KimiReconError(f"{args.constants} must hold a JSON object of NAME: id")
        reports.append(audit_ids(constants, tok))
    for report in reports:
        print(report)
    return 0 if all(r.ok for r in reports) else 1


def _open_out(path: str) -> TextIO:
    return open(path, "w", encoding="utf-8") if path != "-" else sys.stdout


def _write_rows(path: str, rows: Iterator[dict[str, Any]], what: str) -> int:
    """Write one JSON row per input record (errors included, as rows with an ``error``); exit 1 if any failed."""
    done = failed = 0
    out = _open_out(path)
    try:
        for row in rows:
            failed += row.get("error") is not None
            done += 1
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"{what} {done - failed} of {done} records; {failed} recorded as errors", file=sys.stderr)
    return 1 if failed else 0


def cmd_reconstruct(args: argparse.Namespace) -> int:
    from .dataset import reconstruct_records

    results = reconstruct_records(
        args.input, args.tokenizer, profile=args.profile, thinking=not args.no_thinking, workers=args.workers, progress=None
    )
    return _write_rows(args.output, (r.to_dict() for r in results), "reconstructed")


def _check_paths(inputs: Sequence[str], output: str) -> None:
    """Validate before touching the output: every input readable, the output not one of them."""
    from ._atomic import refuse_same_file

    for path in inputs:
        with open(path, "rb"):
            pass
    if output != "-":
        refuse_same_file(output, *inputs)


def cmd_build_samples(args: argparse.Namespace) -> int:
    from ._training_rows import build_samples, write_training_rows

    _check_paths([args.input], args.output)
    results = build_samples(
        args.input, args.tokenizer, profile=args.profile, thinking=not args.no_thinking, workers=args.workers, progress=None
    )
    summary = write_training_rows(results, args.output, args.errors)
    print(summary.line("build-samples"), file=sys.stderr)
    return 1 if summary.errors else 0


def cmd_export(args: argparse.Namespace) -> int:
    from ._training_rows import write_training_rows
    from .openrouter.export import export_rows

    _check_paths([args.log], args.output)
    results = export_rows(args.log, skip_flagged=args.skip_flagged, skip_truncated=args.skip_truncated)
    summary = write_training_rows(results, args.output, args.errors)
    print(summary.line("export"), file=sys.stderr)
    return 1 if summary.errors else 0


def cmd_audit(args: argparse.Namespace) -> int:
    from .dataset import audit_dataset

    report = audit_dataset(
        args.input,
        _tokenizer(args),
        profile=args.profile,
        thinking=not args.no_thinking,
        workers=args.workers,
    )
    print(report.summary())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report.to_dict(), f, ensure_ascii=False, indent=2)
    if args.min_exact is not None and report.exact_rate < args.min_exact:
        print(f"FAIL: exact rate {report.exact_rate:.4f} is below --min-exact {args.min_exact}", file=sys.stderr)
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kimi-recon", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def with_tokenizer(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--tokenizer", default=None, help="tokenizer directory or Hub repo id (default: bundled K2.5)")
        return p

    def with_format(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--profile", default="kimi-k2.5", help="chat format: kimi-k2.5, kimi-k2.6, kimi-k2-thinking, kimi-k2-instruct")
        p.add_argument("--no-thinking", action="store_true", help="the turns were generated with thinking off")
        return p

    p = with_tokenizer(sub.add_parser("audit-tokens", help="check the tokenizer's special tokens (and your constants) against the Kimi registry"))
    p.add_argument("--constants", help="a JSON file of your own id constants, e.g. {\"IM_END_TOKEN_ID\": 163586}")
    p.set_defaults(func=cmd_audit_tokens)

    p = with_format(with_tokenizer(sub.add_parser("reconstruct", help="responses JSONL -> output ids JSONL")))
    p.add_argument("input")
    p.add_argument("-o", "--output", default="-")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    p.set_defaults(func=cmd_reconstruct)

    p = with_format(with_tokenizer(sub.add_parser("audit", help="round-trip audit of responses against reference ids")))
    p.add_argument("input")
    p.add_argument("--min-exact", type=float, default=None, help="exit 1 when the exact-match rate is below this (0..1)")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    p.add_argument("--json", help="also write the full report as JSON to this file")
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
    p.add_argument("input")
    p.add_argument("-o", "--output", default="-", help="training rows JSONL (default: stdout)")
    p.add_argument("--errors", default=None, help="failed records JSONL (default: OUTPUT.errors.jsonl; stderr with -o -)")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    p.set_defaults(func=cmd_build_samples)

    p = sub.add_parser(
        "export",
        help="a generate log -> training rows (needs rows written with generate --training-sample)",
        description="Read the resumable log of `kimi-recon generate` and write the training row of every ok "
        "prompt to OUTPUT; error rows, rows without a sample, and (when asked) flagged or truncated rows go "
        "to the errors file with the reason. The log is not modified.",
    )
    p.add_argument("log", help="the JSONL that generate wrote")
    p.add_argument("-o", "--output", default="-", help="training rows JSONL (default: stdout)")
    p.add_argument("--errors", default=None, help="skipped prompts JSONL (default: OUTPUT.errors.jsonl; stderr with -o -)")
    p.add_argument("--skip-flagged", action="store_true", help="send rows with any flag to the errors file")
    p.add_argument("--skip-truncated", action="store_true", help="send rows whose turn was cut (finish_reason length) to the errors file")
    p.set_defaults(func=cmd_export)

    try:
        from .openrouter.cli import register
    except ImportError:  # the adapter is optional
        pass
    else:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KimiReconError as err:
        print(f"kimi-recon: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"kimi-recon: error: {err}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
