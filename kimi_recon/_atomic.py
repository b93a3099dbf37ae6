"""Output files that appear whole or not at all: written to a temp file in the same folder, renamed into place.

Kept minimal on purpose: the shared private I/O module replaces it when it lands.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from .errors import InvalidInputError


def refuse_same_file(output: str | os.PathLike[str], *inputs: str | os.PathLike[str]) -> None:
    """Raise when ``output`` is one of ``inputs`` (writing it would destroy the data being read)."""
    out = Path(output)
    for path in inputs:
        src = Path(path)
        same = out.resolve() == src.resolve() or (out.exists() and src.exists() and os.path.samefile(out, src))
        if same:
            raise InvalidInputError(f"output {os.fspath(out)!r} is the input file; choose another output", field="output")


@contextmanager
def atomic_writer(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text file to write ``path`` through; it replaces ``path`` only when the block ends without error."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a finished output gets the usual mode
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
