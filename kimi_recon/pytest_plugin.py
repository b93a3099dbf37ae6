"""pytest plugin (auto-loaded once kimi-recon is installed): fixtures that run kimi-recon's audits in one line.

    def test_special_tokens(kimi_special_tokens_audit):
        kimi_special_tokens_audit(constants={"IM_END_TOKEN_ID": 163586})

    def test_round_trip(kimi_roundtrip_audit):
        kimi_roundtrip_audit("data/responses_with_reference_ids.jsonl", min_exact=0.95)

``--kimi-tokenizer PATH`` selects the tokenizer (default: the bundled K2.5 one). Imports are deferred so
that loading the plugin costs a pytest run nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from os import PathLike
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .dataset import DatasetAudit
    from .tokenizer import KimiTokenizer


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kimi-recon")
    group.addoption("--kimi-tokenizer", default=None, help="Kimi tokenizer directory for kimi-recon fixtures (default: bundled K2.5)")


@pytest.fixture(scope="session")
def kimi_tokenizer(request: pytest.FixtureRequest) -> KimiTokenizer:
    """The Kimi tokenizer selected by ``--kimi-tokenizer`` (default: the bundled K2.5 one)."""
    from .tokenizer import load_tokenizer

    return load_tokenizer(request.config.getoption("--kimi-tokenizer"))


@pytest.fixture()
def kimi_special_tokens_audit(kimi_tokenizer: KimiTokenizer) -> Callable[..., None]:
    """Call it to fail the test when the tokenizer's special tokens, or your constants, are wrong."""
    from .audit import assert_special_tokens_ok

    def run(constants: Mapping[str, int] | None = None) -> None:
        assert_special_tokens_ok(kimi_tokenizer, constants)

    return run


@pytest.fixture()
def kimi_roundtrip_audit(kimi_tokenizer: KimiTokenizer, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., DatasetAudit]:
    """Call it with a JSONL path or records (response + reference ids); it fails the test below ``min_exact``
    (default 1.0) or ``min_benign`` (exact or non-canonical BPE), or when any record is malformed. A failure
    writes the HTML and JSON reports to a temporary folder and names them in its message."""
    from ._batch.report_io import write_reports
    from .dataset import audit_dataset

    def run(
        records: str | PathLike[str] | Iterable[Mapping[str, Any]],
        *,
        min_exact: float = 1.0,
        min_benign: float | None = None,
        allow_errors: bool = False,
        **kwargs: Any,
    ) -> DatasetAudit:
        from ._base.arguments import bool_argument, number_argument

        min_exact = number_argument(min_exact, "min_exact")
        min_benign = None if min_benign is None else number_argument(min_benign, "min_benign")
        bool_argument(allow_errors, "allow_errors")
        report = audit_dataset(records, kimi_tokenizer, progress=False, **kwargs)
        failures = []
        if report.exact_rate < min_exact:
            failures.append(f"exact rate {report.exact_rate:.4f} < {min_exact}")
        if min_benign is not None and report.benign_rate < min_benign:
            failures.append(f"benign rate {report.benign_rate:.4f} < {min_benign}")
        if report.errors and not allow_errors:
            failures.append(f"{len(report.errors)} malformed record(s)")
        if failures:
            folder = tmp_path_factory.mktemp("kimi-audit")
            html, json_path = folder / "report.html", folder / "report.json"
            write_reports(report, json_path=json_path, html_path=html)
            where = f"report: {html} (JSON: {json_path})"
            from ._base.terminal import terminal_safe

            # record ids and provider names come from the data: escaped, so none can drive the terminal
            message = "; ".join(failures) + f"; {where}\n" + report.summary() + f"\n{where}"
            pytest.fail(terminal_safe(message), pytrace=False)
        return report

    return run
