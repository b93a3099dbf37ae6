"""The installed distribution's license metadata: an SPDX expression, with the notice of the bundled tokenizer
data shipped as its license file (setuptools refuses the old ``{ text = ... }`` table from 2027-02-18)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import kimi_recon

NOTICE = Path(kimi_recon.__file__).resolve().parent / "data" / "NOTICE"


def test_the_license_is_an_spdx_expression() -> None:
    meta = importlib.metadata.metadata("kimi-recon")
    assert meta["License-Expression"] == "MIT"
    assert "License" not in meta  # the deprecated free-text field is gone


def test_the_notice_of_the_bundled_data_is_the_license_file() -> None:
    meta = importlib.metadata.metadata("kimi-recon")
    assert meta.get_all("License-File") == ["kimi_recon/data/NOTICE"]
    assert "Moonshot" in NOTICE.read_text(encoding="utf-8")


def _editable_pth() -> list[Path]:
    """The ``.pth`` files an editable install of kimi-recon left in this interpreter's site-packages."""
    import sysconfig

    return sorted(Path(sysconfig.get_paths()["purelib"]).glob("__editable__*kimi_recon*.pth"))


def test_an_editable_install_is_a_path_entry_that_type_checkers_follow(tmp_path: Path) -> None:
    """After the README's plain ``pip install -e .``, ``mypy --strict`` on a script outside the repository finds
    the package (issue 36): setuptools writes a ``.pth`` naming the source directory (``package-dir = {"" = "."}``)
    instead of an import-hook finder that mypy cannot follow."""
    import subprocess
    import sys

    pth = _editable_pth()
    if not pth:  # a wheel install: site-packages holds the package itself, which type checkers read
        assert (Path(kimi_recon.__file__).parent / "py.typed").is_file()
        return
    (only,) = pth
    entry = only.read_text(encoding="utf-8").strip()
    assert not entry.startswith("import") and (Path(entry) / "kimi_recon" / "__init__.py").is_file(), entry
    script = tmp_path / "use.py"
    script.write_text("import kimi_recon\n\ntok: kimi_recon.KimiTokenizer = kimi_recon.load_tokenizer()\nids: list[int] = tok.encode('hi')\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable", sys.executable, str(script)],
        cwd=tmp_path, capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
