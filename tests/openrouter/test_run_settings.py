"""The numeric run settings (--timeout, --concurrency, --max-retries, --limit, --max-cost, --grace) are checked in
one place, GenerateConfig; the generate command runs that check on its flags and refuses a bad value with the
exit code and message it always gave (issue 24 item 2). The messages below are written out as the command
and the config gave them before the check moved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kimi_recon.cli import main as kimi_recon_main
from kimi_recon.errors import InvalidInputError
from kimi_recon.openrouter import generate
from kimi_recon.openrouter.cli import main
from kimi_recon.openrouter.generate import GenerateConfig
from kimi_recon.openrouter.options import RequestOptions

BAD_FLAGS = [
    (["--timeout", "0"], "argument --timeout: must be above 0, got 0"),
    (["--timeout", "-0"], "argument --timeout: must be above 0, got -0"),
    (["--timeout", "-1"], "argument --timeout: must be above 0, got -1"),
    (["--timeout", "nan"], "argument --timeout: must be above 0, got nan"),
    (["--timeout", "inf"], "argument --timeout: must be above 0, got inf"),
    (["--timeout", "1e999"], "argument --timeout: must be above 0, got 1e999"),
    (["--timeout", "x"], "argument --timeout: not a number: 'x'"),
    (["--concurrency", "0"], "argument --concurrency: must be at least 1, got 0"),
    (["--concurrency", "00"], "argument --concurrency: must be at least 1, got 00"),
    (["--concurrency", "-3"], "argument --concurrency: must be at least 1, got -3"),
    (["--concurrency", "1.5"], "argument --concurrency: not an integer: '1.5'"),
    (["--max-retries", "-1"], "argument --max-retries: must be at least 0, got -1"),
    (["--limit", "-1"], "argument --limit: must be at least 0, got -1"),
    (["--limit", "two"], "argument --limit: not an integer: 'two'"),
    (["--max-cost", "-0.5"], "argument --max-cost: must be at least 0, got -0.5"),
    (["--max-cost", "nan"], "argument --max-cost: must be at least 0, got nan"),
    (["--grace", "-1"], "argument --grace: must be at least 0, got -1"),
    (["--grace", "inf"], "argument --grace: must be at least 0, got inf"),
]


def _generate_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["generate", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "o.jsonl"), *extra]


@pytest.mark.parametrize(("flag", "message"), BAD_FLAGS, ids=[" ".join(f) for f, _ in BAD_FLAGS])
def test_a_bad_run_setting_flag_exits_2_with_the_message_it_always_gave(
    flag: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(_generate_args(tmp_path, *flag))
    assert exit_.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("usage: kimi-recon generate ")
    assert err[-1] == f"kimi-recon generate: error: {message}"
    assert not (tmp_path / "o.jsonl").exists()


def test_the_main_command_line_gives_the_same_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        kimi_recon_main(_generate_args(tmp_path, "--concurrency", "0"))
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "kimi-recon generate: error: argument --concurrency: must be at least 1, got 0"


def test_the_flags_range_is_the_configs_own_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """One check: narrowing the config's range narrows the flag's (a second copy in the command would not follow)."""
    stricter = generate._SettingRange(True, 2, "an integer of at least 2")
    monkeypatch.setitem(generate._SETTING_RANGES, "concurrency", stricter)
    with pytest.raises(SystemExit):
        main(_generate_args(tmp_path, "--concurrency", "1"))
    assert capsys.readouterr().err.splitlines()[-1] == "kimi-recon generate: error: argument --concurrency: must be at least 2, got 1"
    with pytest.raises(InvalidInputError, match=r"^field 'concurrency': must be an integer of at least 2, got 1$"):
        GenerateConfig(tmp_path / "p.jsonl", tmp_path / "o.jsonl", RequestOptions("m"), concurrency=1)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ({"concurrency": 0}, "field 'concurrency': must be an integer of at least 1, got 0"),
        ({"concurrency": True}, "field 'concurrency': must be an integer of at least 1, got True"),
        ({"max_retries": 1.0}, "field 'max_retries': must be an integer of 0 or more, got 1.0"),
        ({"timeout": 0}, "field 'timeout': must be a number of seconds above 0, got 0"),
        ({"timeout": float("nan")}, "field 'timeout': must be a number of seconds above 0, got nan"),
        ({"retry_base_delay": -1}, "field 'retry_base_delay': must be a number of 0 or more, got -1"),
        ({"limit": -1}, "field 'limit': must be an integer of 0 or more, got -1"),
        ({"grace_period": "1"}, "field 'grace_period': must be a number of seconds of 0 or more, got '1'"),
        ({"max_cost": True}, "field 'max_cost': must be a number of 0 or more, got True"),
    ],
)
def test_the_config_refuses_a_bad_run_setting_with_the_message_it_always_gave(setting: dict[str, Any], message: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError) as err:
        GenerateConfig(tmp_path / "p.jsonl", tmp_path / "o.jsonl", RequestOptions("m"), **setting)
    assert str(err.value) == message


@pytest.mark.parametrize("setting", [{"limit": None}, {"max_cost": None}, {"limit": 0, "max_cost": 0.0, "max_retries": 0, "grace_period": 0}])
def test_no_limit_and_the_lowest_values_are_accepted(setting: dict[str, Any], tmp_path: Path) -> None:
    config = GenerateConfig(tmp_path / "p.jsonl", tmp_path / "o.jsonl", RequestOptions("m"), **setting)
    assert all(getattr(config, k) == v for k, v in setting.items())
