"""The ``kimi-recon`` command line. Heavy modules are imported inside each command, so ``--help`` is fast."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any, TextIO

from .errors import InvalidInputError, KimiReconError


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


def cmd_build_samples(args: argparse.Namespace) -> int:
    from .dataset import iter_jsonl, record_id
    from .training import sample_from_record

    tok = _tokenizer(args)

    def rows() -> Iterator[dict[str, Any]]:
        for line, record in iter_jsonl(args.input):
            if isinstance(record, InvalidInputError):
                yield {"line": line, "id": None, "error": str(record)}
                continue
            try:
                sample = sample_from_record(record, tok, profile=args.profile, thinking=not args.no_thinking)
            except KimiReconError as err:  # a record's failure is a row, never a stopped run
                yield {"line": line, "id": record_id(record), "error": str(err)}
            else:
                yield {"line": line, "id": record_id(record), **sample.to_dict(), "error": None}

    return _write_rows(args.output, rows(), "built samples for")


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


def cmd_export_tokenizer(args: argparse.Namespace) -> int:
    from .fast_tokenizer import export_tokenizer

    result = export_tokenizer(args.directory, args.profile, _tokenizer(args), overwrite=args.overwrite)
    print(f"wrote {', '.join(p.name for p in result.files)} ({result.profile}) to {result.directory}", file=sys.stderr)
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

    p = with_format(with_tokenizer(sub.add_parser("build-samples", help="conversations + responses -> EAGLE-3 training rows")))
    p.add_argument("input")
    p.add_argument("-o", "--output", default="-")
    p.set_defaults(func=cmd_build_samples)

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
