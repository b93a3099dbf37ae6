"""The ``kimi-recon`` command line.

Heavy modules are imported inside each command, so ``--help`` is fast (this docstring is not the help text:
:data:`DESCRIPTION` is)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ._base.cli_common import shell_status, sigterm_as_interrupt
from ._base.files import atomic_output, check_input, check_output_name, is_stdio, read_whole, refuse_output_is_input, to_json_line
from ._base.terminal import terminal_safe
from .errors import InputFileError, InvalidInputError, KimiReconError

if TYPE_CHECKING:
    from ._batch.training_rows import WriteSummary
    from .dataset import DatasetAudit, RecordResult


def _tokenizer(args: argparse.Namespace) -> Any:
    from .tokenizer import load_tokenizer

    return load_tokenizer(args.tokenizer, profile=getattr(args, "profile", None))


def cmd_audit_tokens(args: argparse.Namespace) -> int:
    from .audit import check_special_tokens, check_token_ids

    if args.constants:
        check_input(args.constants, "--constants")
    tok = _tokenizer(args)
    reports = [check_special_tokens(tok, profile=args.profile)]
    if args.constants:
        data = read_whole(args.constants, "--constants")
        try:
            constants = json.loads(data)
        except (ValueError, RecursionError) as err:
            raise InputFileError(f"{args.constants} is not JSON: {err}", field="--constants") from None
        if not isinstance(constants, dict):
            raise InputFileError(f"{args.constants} must hold a JSON object of NAME: id, found {type(constants).__name__}", field="--constants")
        reports.append(check_token_ids(constants, tok, profile=args.profile))
    for report in reports:
        if not (args.quiet and report.ok):
            print(terminal_safe(str(report)))
    return 0 if all(r.ok for r in reports) else 1


def _check_files(args: argparse.Namespace, outputs: Sequence[tuple[str, str | None]], parquet: str | None = None) -> None:
    """Inputs exist and are readable, no output is the input, no two outputs are one file, and each output's
    name says a format the command writes (``parquet``: the option that may be Parquet): checked before any
    output is opened."""
    from ._batch.report_io import check_distinct_outputs
    from ._batch.training_rows import check_parquet_writer, is_parquet
    from .tokenizer import tokenizer_files

    check_input(args.input)
    # every file the command reads is an input no output may replace: the chat template, the tokenizer's files too
    inputs = [args.input, *(p for p in (getattr(args, "chat_template", None),) if p is not None), *tokenizer_files(getattr(args, "tokenizer", None))]
    for option, path in outputs:
        if path is None:
            continue
        refuse_output_is_input(path, inputs, field=option)
        if is_parquet(path) and option != parquet:
            what = "training rows (build-samples, export)" if parquet is None else "the training rows (-o)"
            raise InvalidInputError(
                f"{path} names a Parquet file, but this output is JSON text: name it .jsonl (or .jsonl.gz); Parquet is written for {what}",
                field=option,
            )
        if option == parquet:
            check_parquet_writer(path, option)
        check_output_name(path, option)
    check_distinct_outputs(outputs)


def _write_rows(args: argparse.Namespace, rows: Iterator[dict[str, Any]], what: str) -> int:
    """Write one JSON row per input record (errors included, as rows with an ``error``); exit 1 if any failed, or
    if every row carries a ``loss`` flag (none usable: a wrong --profile, a thinking mode nobody said).

    The rows go to a temporary file renamed over ``path`` only once every record is written.
    """
    from ._batch.training_rows import SEVERITY_NAMES

    done = failed = 0
    by_severity = dict.fromkeys(SEVERITY_NAMES, 0)
    loss_codes: dict[str, int] = {}
    with atomic_output(args.output, "--output") as out:
        for row in rows:
            failed += row.get("error") is not None
            done += 1
            if row.get("error") is None:
                flags = [f for f in row.get("flags") or () if isinstance(f, dict)]
                worst = max((str(f.get("severity")) for f in flags), key=_severity_rank, default="none")
                by_severity[worst] = by_severity.get(worst, 0) + 1
                for code in {str(f.get("code")) for f in flags if f.get("severity") == "loss"}:
                    loss_codes[code] = loss_codes.get(code, 0) + 1
            # a lone surrogate (from a "\\ud800" escape in the input) is written as that escape by atomic_output
            out.write(to_json_line(row) + "\n")
    worst_line = ", ".join(f"{s} {n}" for s, n in by_severity.items())
    summary = f"{what} {done - failed} of {done} records (by worst flag: {worst_line}); {failed} recorded as errors"
    # the rule of build-samples (_training_summary): a loss is said even with --quiet, and a run whose every row is
    # an error or a loss fails, so a pipeline does not go on with ids that almost surely differ from the model's
    lossy = by_severity.get("loss", 0)
    if lossy or failed:
        print(terminal_safe(summary), file=sys.stderr)
    else:
        _info(args, summary)
    if lossy:
        print(
            f"{what}: {lossy} of {done - failed} rows carry a loss flag{_loss_codes_text(loss_codes)} (ids that almost surely differ "
            "from the model's): see their flags (severity loss) for what to fix",
            file=sys.stderr,
        )
    if done and lossy + failed == done and lossy:
        print(f"FAIL: {what}: no usable row: every one of the {done} rows carries a loss flag or an error", file=sys.stderr)
        return 1
    return 1 if failed else 0


def _loss_codes_text(codes: Mapping[str, int]) -> str:
    """`` (profile_mismatch 80, reasoning_dropped 3)``: which loss flags, most rows first, so the line says what to fix."""
    if not codes:
        return ""
    ranked = sorted(codes.items(), key=lambda kv: (-kv[1], kv[0]))
    more = f", {len(ranked) - 4} more" if len(ranked) > 4 else ""
    return " (" + ", ".join(f"{code} {n}" for code, n in ranked[:4]) + more + ")"


def _severity_rank(name: object) -> int:
    from .flags import Severity

    try:
        return Severity(name).rank + 1
    except ValueError:  # "none", or a name of another version
        return 0


def _add_workers(p: argparse.ArgumentParser) -> None:
    """``--workers`` and ``--executor`` of the commands that run records through :mod:`kimi_recon.dataset`."""
    p.add_argument("--workers", type=int, default=1, help="records run side by side (0 = all cores; default 1)")
    p.add_argument(
        "--executor", choices=("auto", "threads", "processes"), default="auto",
        help="what runs --workers > 1: threads of this process or worker processes (auto: threads for 2 workers, processes for more; docs/benchmarks.md §10)",
    )


def _check_options(args: argparse.Namespace) -> None:
    """The options every record would be rebuilt with, checked once before any output is opened: a bad one
    stops the command (exit 2, a hint), never a file of error rows (one rule for every command)."""
    from .profiles import get_profile
    from .servers import get_server

    if getattr(args, "profile", None) is not None:
        try:
            get_profile(args.profile)
        except InvalidInputError as err:
            raise InvalidInputError(err.message, field="--profile") from None
    if getattr(args, "server", None) is not None:
        get_server(args.server)
    if getattr(args, "workers", 1) < 0:
        raise InvalidInputError(f"must be 0 (all cores) or more, got {args.workers}", field="--workers")


def cmd_reconstruct(args: argparse.Namespace) -> int:
    from .dataset import reconstruct_records

    _check_options(args)
    _check_files(args, [("--output", args.output)])
    results = reconstruct_records(
        args.input,
        args.tokenizer,
        profile=args.profile,
        thinking=False if args.no_thinking else None,
        workers=args.workers,
        progress=_progress(args),
        server=args.server,
        executor=args.executor,
    )
    return _write_rows(args, (r.to_dict() for r in results), "reconstructed")


def _training_outputs(args: argparse.Namespace) -> list[tuple[str, str | None]]:
    from ._batch.training_rows import default_errors_path

    errors = args.errors if args.errors is not None else default_errors_path(args.output)
    return [("--output", args.output), ("--errors", errors)]


def _training_summary(args: argparse.Namespace, summary: WriteSummary, command: str) -> int:
    """The summary line (rows by their worst flag) and the exit status: 1 when a record failed, or when rows were
    written and none is usable (every one carries a ``loss`` flag: a wrong --profile, a server that dropped the
    reasoning), so a pipeline does not train on them unawares."""
    lossy = summary.by_severity.get("loss", 0)
    if summary.errors or lossy or not args.quiet:
        print(terminal_safe(summary.line(command)), file=sys.stderr)
    if lossy:
        print(
            f"{command}: {lossy} of {summary.rows} rows carry a loss flag{_loss_codes_text(summary.loss_codes)} (ids that almost surely "
            "differ from the model's): drop them with --drop-severity loss, or fix what the flags name (see max_severity and flags in the rows)",
            file=sys.stderr,
        )
    if summary.over_length:
        limit = args.max_length
        if summary.over_length_dropped:
            said = f"left out {summary.over_length_dropped} of them (--drop-over-length; in the errors file)"
        else:
            said = "flagged over_max_length; SpecForge (data.max_length) and vLLM speculators (--seq-length) cut such rows without an error"
        print(
            terminal_safe(
                f"{command}: {summary.over_length} record(s) longer than --max-length {limit:,} ids, the longest {summary.longest_over:,}: {said}. "
                f"Set the trainer's limit to at least {summary.longest_over:,}"
                + ("" if summary.over_length_dropped else ", or leave them out with --drop-over-length")
            ),
            file=sys.stderr,
        )
    if summary.rows and not summary.usable:
        print(f"FAIL: {command}: no usable row: every one of the {summary.rows} rows carries a loss flag", file=sys.stderr)
        return 1
    return 1 if summary.errors else 0


def _check_length_options(args: argparse.Namespace) -> None:
    if args.drop_over_length and args.max_length is None:
        raise InvalidInputError("needs --max-length N: the length over which rows are left out", field="--drop-over-length")


def cmd_build_samples(args: argparse.Namespace) -> int:
    from ._batch.training_rows import build_samples, write_training_rows

    _check_options(args)
    _check_length_options(args)
    _check_files(args, _training_outputs(args), parquet="--output")
    template = None
    if args.chat_template is not None:
        check_input(args.chat_template, "--chat-template")
        try:  # read before the output is touched
            template = read_whole(args.chat_template, "--chat-template").decode("utf-8")
        except UnicodeDecodeError as err:
            raise InputFileError(f"{args.chat_template} is not UTF-8 text ({err.reason} at byte {err.start})", field="--chat-template") from None
    results = build_samples(
        args.input,
        args.tokenizer,
        profile=args.profile,
        thinking=False if args.no_thinking else None,
        template=template,
        workers=args.workers,
        progress=_progress(args),
        drop_severity=args.drop_severity,
        server=args.server,
        max_length=args.max_length,
        drop_over_length=args.drop_over_length,
    )
    return _training_summary(args, write_training_rows(results, args.output, args.errors), "build-samples")


def cmd_export(args: argparse.Namespace) -> int:
    from ._batch.training_rows import write_training_rows
    from .openrouter.export import export_rows

    _check_length_options(args)
    _check_files(args, _training_outputs(args), parquet="--output")
    results = export_rows(
        args.input,
        skip_flagged=args.skip_flagged,
        skip_truncated=args.skip_truncated,
        tokenizer=_tokenizer(args),
        max_length=args.max_length,
        drop_over_length=args.drop_over_length,
    )
    return _training_summary(args, write_training_rows(results, args.output, args.errors), "export")


def _audit_failures(args: argparse.Namespace, report: DatasetAudit) -> list[str]:
    """Why the audit fails, one reason a line (empty when it passes). See AUDIT_HELP's exit status."""
    failures = []
    readable = f"{report.compared} of {report.total} records compared, {report.error_count} unreadable"
    if report.compared == 0:
        if report.total == 0:
            hint = " (the file is empty)"
        elif report.errors and all(e.field == "reference_ids" for e in report.errors):
            # a new user's first try: responses from an API, which carry no ids to compare with
            hint = (
                " (no record has the ids the model generated, to compare with: reference_ids, e.g. from vLLM's "
                "return_token_ids or generate --return-token-ids. Without them the ids are rebuilt, not checked: "
                "kimi-recon reconstruct or build-samples)"
            )
        else:
            hint = " (see the errors above: wrong field names? a file of raw responses without reference_ids?)"
        failures.append(f"nothing was compared: {readable}{hint}")
    # The bundled sample holds one unreadable line on purpose (to show how errors are reported).
    allow = args.allow_errors or (args.sample and args.max_errors is None)
    max_errors = None if allow else (args.max_errors or 0)
    if max_errors is not None and report.error_count > max_errors and report.compared:
        allowed = "--max-errors " + str(max_errors) if args.max_errors is not None else "none allowed; --allow-errors or --max-errors N to accept some"
        failures.append(f"{report.error_count} record{'s' if report.error_count != 1 else ''} could not be read ({allowed})")
    # Unreadable records count against the rates: 1 exact record of 10 lines is 10%, not "1/1".
    if args.min_exact is not None and report.exact_rate_of_all < args.min_exact:
        failures.append(f"exact rate {report.exact_rate_of_all:.4f} ({report.exact_count} of {report.total} records, {report.error_count} unreadable) is below --min-exact {args.min_exact}")
    if report.compared and report.benign_count == 0:
        failures.append(f"no record is exact or a benign re-split: all {report.compared} compared records differ (a wrong --profile? see the kinds above)")
    benign_of_all = report.benign_count / report.total if report.total else 0.0
    if args.min_benign is not None and benign_of_all < args.min_benign:
        failures.append(f"exact + benign rate {benign_of_all:.4f} ({report.benign_count} of {report.total} records, {report.error_count} unreadable) is below --min-benign {args.min_benign}")
    return failures


def _audit_thresholds(args: argparse.Namespace) -> dict[str, Any]:
    """The rules the verdict was judged by, as in effect (see :func:`_audit_failures`): the options' values
    (``--max-errors`` as applied: 0 unless --allow-errors or --sample; None means any number) and the two rules
    every audit has."""
    allow = args.allow_errors or (args.sample and args.max_errors is None)
    return {
        "--min-exact": args.min_exact,
        "--min-benign": args.min_benign,
        "--max-errors": None if allow else (args.max_errors or 0),
        "at least one record compared": True,
        "at least one record exact or benign": True,
    }


def _verdict_writer(outs: Sequence[TextIO]) -> Callable[[RecordResult], None]:
    """What writes each record's verdict to each of ``outs`` as one JSON line (``--records``, the ``--json`` spool)."""
    from ._batch.report_io import record_verdict

    def write(result: RecordResult) -> None:
        line = json.dumps(record_verdict(result)) + "\n"  # ASCII: a lone surrogate is its JSON escape
        for out in outs:
            out.write(line)

    return write


def cmd_audit(args: argparse.Namespace) -> int:
    import tempfile

    from ._batch.report_io import run_facts, write_reports
    from .dataset import audit_dataset

    args.input = _audit_input(args)
    if args.html_examples < 0:
        raise InvalidInputError(f"must be 0 or more, got {args.html_examples}", field="--html-examples")
    _check_options(args)
    _check_files(args, [("--json", args.json), ("--html", args.html), ("--records", args.records)])
    with contextlib.ExitStack() as files:
        # The verdicts are written as the records are read, never held: memory stays flat for any number of them.
        # --records replaces its old self only when the audit ends (an error or Ctrl-C keeps the old one); the
        # JSON report's "records" are spooled to a temporary file and copied into it at the end.
        spool = None if args.json is None else files.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))
        outs: list[TextIO] = [] if spool is None else [spool]
        with contextlib.ExitStack() as records_file:
            if args.records is not None:
                outs.append(records_file.enter_context(atomic_output(args.records, "--records")))
            report = audit_dataset(
                args.input,
                _tokenizer(args),
                profile=args.profile,
                thinking=False if args.no_thinking else None,
                workers=args.workers,
                executor=args.executor,
                worst=args.html_examples,
                server=args.server,
                examples=max(args.examples, 5),  # the JSON report keeps at least 5 of each kind, whatever the summary shows
                progress=_progress(args),
                on_record=_verdict_writer(outs) if outs else None,
            )
        failures = _audit_failures(args, report)
        source = "the bundled sample" if args.sample else ("stdin" if is_stdio(args.input) else str(args.input))
        run = run_facts(source, failures, _audit_thresholds(args))
        if args.records is not None:
            run["records_file"] = "stdout" if is_stdio(args.records) else str(args.records)
        # The report files first: a reader of stdout that goes away (``| head``) must not cost them.
        write_reports(report, json_path=args.json, html_path=args.html, run=run, records=spool)
    # With --json - (or --html -, --records -), stdout carries that output alone and the readable summary goes to stderr.
    to_stdout = any(path is not None and is_stdio(path) for path in (args.json, args.html, args.records))
    if not args.quiet:
        print(terminal_safe(report.summary(examples=args.examples)), file=sys.stderr if to_stdout else sys.stdout)
    for path in (args.json, args.html, args.records):
        if path is not None and not is_stdio(path):
            _info(args, f"wrote {path}")
    for reason in failures:
        print(terminal_safe(f"FAIL: {reason}"), file=sys.stderr)
    return 1 if failures else 0


def cmd_export_tokenizer(args: argparse.Namespace) -> int:
    from .fast_tokenizer import export_tokenizer

    result = export_tokenizer(args.directory, args.profile, _tokenizer(args), overwrite=args.overwrite)
    _info(args, f"wrote {', '.join(p.name for p in result.files)} ({result.profile}) to {result.directory}")
    return 0


def _audit_input(args: argparse.Namespace) -> str:
    if args.sample:
        if args.input is not None:
            raise InvalidInputError("give an input file or --sample, not both", field="input")
        from ._batch.sample import sample_path

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


DESCRIPTION = """\
Rebuild the exact token ids a Moonshot Kimi model generated from the text an OpenAI-compatible API
returned, check them against reference ids, and write training rows.

Inputs are JSON Lines: one JSON object per line (.gz and .zst files are read as they are; - is stdin).
Run `kimi-recon COMMAND --help` for a command's record format and an example.
"""

#: What a record may hold, shared by the commands that read responses.
RECORD_RESPONSE = """\
  "response"   the API's answer: a whole chat completion, one of its choices, or the assistant
               message itself (also accepted under "turn" or "message"; a line with none of these
               keys is taken to be the response)
  "id"         optional, any string or integer; named in errors and reports"""

#: The options any record may set.
RECORD_OPTIONS = """\
  "profile", "thinking"   optional, override --profile / --no-thinking for this record"""

AUDIT_HELP = f"""\
Rebuild each record's output ids from its response and compare them with the ids the model really
generated. Prints a summary (exact, benign, not benign, errors, worst examples) and optionally writes
the full report as JSON and as one HTML page.

Each input line is a JSON object:
{RECORD_RESPONSE}
  "reference_ids"  the ids the model generated (also "output_ids" or "reference")
{RECORD_OPTIONS}
  "usage", "provider", "messages"   optional: the server's token counts are checked when present

Exit status: 0 passed; 1 a record could not be read (unless --allow-errors or within --max-errors),
nothing was compared, no compared record is exact or benign, or a --min-exact / --min-benign threshold
was missed; 2 bad usage or an unreadable file; 130 interrupted; 141 the reader of stdout went away.

Example:
  kimi-recon audit data.jsonl --min-exact 0.99 --json report.json --html report.html
  kimi-recon audit --sample              # the bundled sample of official K2.5 conversations
"""

RECONSTRUCT_HELP = f"""\
Rebuild the output ids of each record's response and write one JSON row per input record:
{{"index", "line", "id", "output_ids", "source", "flags", "token_counts", "error", "server", "profile"}}
("profile": the chat format the ids were rebuilt in). A record that cannot be read gets a row with "error"
(naming its line) and null "output_ids"; nothing is dropped.

Each input line is a JSON object:
{RECORD_RESPONSE}
{RECORD_OPTIONS}

Exit status: 0 every record rebuilt; 1 some rows hold an error, or every row holds an error or a loss flag
(none usable; the loss rows are counted on stderr even with --quiet); 2 bad usage or an unreadable file.

Example:
  kimi-recon reconstruct responses.jsonl -o ids.jsonl --profile kimi-k2.6
"""

BUILD_SAMPLES_HELP = f"""\
Write one training row {{"id", "input_ids", "loss_mask", "prompt_len", "flags", "max_severity",
"token_counts"}} per good record to OUTPUT (SpecForge and vLLM speculators read it as is; see
docs/training.md) and every failed record, with its line, id and the reason, to the errors file. Both files
are replaced only when the run completes. OUTPUT named .parquet is Parquet, .gz/.zst compressed JSONL.
Give --max-length your trainer's limit: longer rows are cut by the trainers without a word.

Each input line is a JSON object:
  "messages"   the prompt: the chat messages before the assistant turn
  "tools"      optional: the tool declarations sent with it
  "response"   the API's answer: a whole chat completion, one of its choices, or the assistant
               message itself (also accepted under "turn" or "message")
  "id"         optional, any string or integer; the row's id ("line-N" when missing)
{RECORD_OPTIONS}
  "template_kwargs", "call_index_offset"   optional (docs/pitfalls.md, record options)

Exit status: 0 every record became a row; 1 some records failed, or every row carries a loss flag (none
usable); 2 bad usage or an unreadable file; 141 the reader of stdout went away. The summary on stderr
counts the rows by their worst flag and gives the longest row.

Example:
  kimi-recon build-samples conversations.jsonl -o samples.jsonl --workers 0 --max-length 65536
"""

EXPORT_HELP = """\
Read the resumable log of `kimi-recon generate` and write the training row of every ok prompt to
OUTPUT; error rows, rows without a sample, and (when asked) flagged or truncated rows go to the errors
file with the reason. Every row is checked (ids in the vocabulary, a 0/1 loss mask as long as the ids,
a prompt length inside them) before it is written. The log is not modified.

Exit status: 0 every log row became a training row; 1 some went to the errors file; 2 bad usage.

Example:
  kimi-recon generate prompts.jsonl -o log.jsonl --training-sample
  kimi-recon export log.jsonl -o samples.jsonl --skip-truncated
"""

AUDIT_TOKENS_HELP = """\
Check that a tokenizer's special tokens are the Kimi ones (names, ids, special flags), and, with
--constants, that your own id constants are right. CONSTANTS is a JSON object of NAME: id, e.g.
{"IM_END_TOKEN_ID": 163586, "EOS": 163586}; a name is matched to a special token by its spelling.

Exit status: 0 everything matches; 1 a check failed (each problem is printed); 2 bad usage.

Example:
  kimi-recon audit-tokens --tokenizer ./Kimi-K2.5 --constants my_ids.json
"""

EXPORT_TOKENIZER_HELP = """\
Write a Hugging Face fast tokenizer (tokenizer.json, tokenizer_config.json, special_tokens_map.json)
that encodes exactly like the Kimi tokenizer, for transformers and other runtimes (needs the fast
extra: pip install 'kimi-recon[fast]' (in a clone: pip install -e '.[fast]')). See docs/fast-tokenizer.md.

Example:
  kimi-recon export-tokenizer ./kimi-k2.5-fast
  kimi-recon export-tokenizer ./kimi-k3-fast --profile kimi-k3
"""


def _command(sub: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, text: str) -> argparse.ArgumentParser:
    return sub.add_parser(name, help=summary, description=text, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_output_options(p: argparse.ArgumentParser) -> None:
    """``--no-progress`` and ``-q/--quiet``, on every command."""
    p.add_argument("--no-progress", action="store_true", help="no progress bar (also: TQDM_DISABLE=1)")
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bar and no informational lines on stderr; errors and failures are still printed"
    )


def _progress(args: argparse.Namespace) -> bool | None:
    """None: a bar when stderr is a terminal; False when asked for none."""
    return False if args.no_progress or args.quiet else None


def _info(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(terminal_safe(text), file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kimi-recon", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_tokenizer(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--tokenizer", default=None, help="tokenizer directory or Hub repo id (default: bundled K2.5)")
        add_output_options(p)
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
            help="the server whose parsers produced the responses: vllm==0.15.1, vllm==0.33.0, sglang==0.5.23, "
            "llama.cpp, vllm, sglang (newest known), another release (vllm==0.22.0, 'vLLM v0.22.0': what any build of "
            "its family loses), none (raw model text), or a provider's name (Together: an unknown server, named); "
            "default: what each response reveals, else unknown (may lose whatever any known parser loses). A record's "
            "own server field wins",
        )
        return p

    p = with_tokenizer(_command(sub, "audit-tokens", "check the tokenizer's special tokens (and your constants) against the Kimi registry", AUDIT_TOKENS_HELP))
    p.add_argument("--constants", help="a JSON file (or - for stdin) of your own id constants, e.g. {\"IM_END_TOKEN_ID\": 163586}")
    p.add_argument("--profile", default=None, help="check against this profile's table (kimi-k3: K3's names; default: the tokenizer's own)")
    p.set_defaults(func=cmd_audit_tokens)

    p = with_format(with_tokenizer(_command(sub, "reconstruct", "responses JSONL -> output ids JSONL", RECONSTRUCT_HELP)))
    p.add_argument("input", help="JSONL file (.gz, .zst too), or - for stdin")
    p.add_argument("-o", "--output", default="-", help="JSONL file, replaced only once complete; - for stdout (default)")
    _add_workers(p)
    p.set_defaults(func=cmd_reconstruct)

    p = with_format(with_tokenizer(_command(sub, "audit", "round-trip audit of responses against reference ids", AUDIT_HELP)))
    p.add_argument("input", nargs="?", help="JSONL file of records (.gz, .zst too), or - for stdin")
    p.add_argument("--sample", action="store_true", help="audit the bundled sample of official K2.5 dev conversations (its one unreadable line, there on purpose, does not fail the audit)")
    g = p.add_argument_group("pass/fail (exit 1 when a rule fails; unreadable records count as neither exact nor benign)")
    g.add_argument("--min-exact", type=_share, default=None, metavar="SHARE", help="fail when exact records are fewer than SHARE (0..1) of all records")
    g.add_argument("--min-benign", type=_share, default=None, metavar="SHARE", help="fail when exact + benign (non_canonical_bpe) records are fewer than SHARE (0..1) of all records")
    errors = g.add_mutually_exclusive_group()
    errors.add_argument("--max-errors", type=_count, default=None, metavar="N", help="fail when more than N records cannot be read (default 0)")
    errors.add_argument("--allow-errors", action="store_true", help="unreadable records alone do not fail the audit (nothing compared still does)")
    _add_workers(p)
    p.add_argument("--examples", type=_count, default=5, metavar="N", help="errors and worst records of each kind listed in the summary (default 5; the JSON report keeps up to 100 errors)")
    p.add_argument("--json", help="also write the full report as JSON to this file (- for stdout; the summary then goes to stderr)")
    p.add_argument("--html", help="also write the report as one self-contained HTML page to this file (- for stdout)")
    p.add_argument("--html-examples", type=int, default=20, metavar="N", help="worst records shown token by token in the HTML page (default 20)")
    p.add_argument(
        "--records",
        metavar="FILE",
        help="also write one verdict per record to this JSON Lines file, in input order (index, line, id, profile, kind, exact, "
        "benign, first_diff, region, detail, source, flags, max_severity, error_field, error), streamed as the audit goes (- for stdout)",
    )
    p.set_defaults(func=cmd_audit)

    p = with_format(with_tokenizer(_command(sub, "build-samples", "conversations + responses -> training rows for SpecForge / vLLM speculators", BUILD_SAMPLES_HELP)))
    p.add_argument("input", help="JSONL file (.gz, .zst too), or - for stdin")
    p.add_argument(
        "-o",
        "--output",
        default="-",
        help="training rows JSONL, or Parquet when the name ends in .parquet (needs pyarrow: the parquet extra); replaced only once complete; - for stdout (default)",
    )
    p.add_argument("--errors", default=None, help="failed records JSONL (default: OUTPUT.errors.jsonl; stderr with -o - or a device such as /dev/null)")
    p.add_argument("--workers", type=int, default=1, help="processes to use (0 = all cores)")
    _add_length_options(p)
    p.add_argument(
        "--chat-template",
        metavar="FILE",
        help="render prompts with this Jinja chat template instead of the profile's; a record's template_kwargs "
        "(e.g. {\"preserve_thinking\": true}) reach it as variables",
    )
    p.add_argument(
        "--drop-severity",
        choices=("info", "unlikely", "risk", "loss"),
        default=None,
        help="send records with a flag of this severity or above to the errors file (loss: ids that almost surely "
        "differ from the model's; risk: also those the evidence says may differ; unlikely: also those a server "
        "could have changed where the model rarely writes the text at stake)",
    )
    p.set_defaults(func=cmd_build_samples)

    p = _command(sub, "export", "a generate log -> training rows (needs rows written with generate --training-sample)", EXPORT_HELP)
    p.add_argument("input", metavar="LOG", help="the JSONL that generate wrote, or - for stdin")
    p.add_argument("-o", "--output", default="-", help="training rows JSONL, or Parquet when the name ends in .parquet (the parquet extra); default: stdout")
    p.add_argument("--errors", default=None, help="skipped prompts JSONL (default: OUTPUT.errors.jsonl; stderr with -o - or a device)")
    p.add_argument("--skip-flagged", action="store_true", help="send rows with any flag to the errors file")
    p.add_argument("--skip-truncated", action="store_true", help="send rows whose turn was cut (finish_reason length) to the errors file")
    _add_length_options(p)
    p.add_argument("--tokenizer", default=None, help="check the rows' ids against this tokenizer's vocabulary (default: bundled K2.5)")
    add_output_options(p)
    p.set_defaults(func=cmd_export)

    p = with_tokenizer(_command(sub, "export-tokenizer", "write a Hugging Face fast tokenizer (tokenizer.json) to DIR", EXPORT_TOKENIZER_HELP))
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


def _share(text: str) -> float:
    """A number from 0 to 1 (argparse exits 2 with this message otherwise)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number from 0 to 1, got {text!r}")
    return value


def _whole_number(text: str, minimum: int) -> int:
    """``text`` as a whole number of at least ``minimum`` (argparse exits 2 with this message otherwise)."""
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(f"must be a whole number, {minimum} or more, got {text!r}")
    return value


def _count(text: str) -> int:
    """A whole number, 0 or more."""
    return _whole_number(text, 0)


def _add_length_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-length",
        type=_positive,
        default=None,
        metavar="N",
        help="flag rows of more than N ids over_max_length and count them on stderr: SpecForge (data.max_length, default 2048) "
        "and vLLM speculators (--seq-length, default 8192) cut longer rows without an error; give the trainer's limit",
    )
    p.add_argument("--drop-over-length", action="store_true", help="send the records over --max-length to the errors file instead (counted on stderr)")


def _positive(text: str) -> int:
    """A whole number, 1 or more."""
    return _whole_number(text, 1)


def main(argv: Sequence[str] | None = None) -> int:
    # ``kimi-recon reconstruct - | head``: a reader that has what it wanted ends the command quietly, 141
    return shell_status(lambda: _run(argv))


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        # `kimi-recon` alone: the commands and what they do (as git and pip answer), not only "COMMAND is required"
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        with sigterm_as_interrupt():
            code: int = args.func(args)
    except BrokenPipeError:  # not an error of ours: shell_status ends the command quietly
        raise
    except (KimiReconError, OSError) as err:
        print(terminal_safe(f"kimi-recon: error: {err}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kimi-recon: interrupted; outputs were left as they were", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
