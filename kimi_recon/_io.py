"""The file edges of every command: inputs checked before any output is touched, outputs replaced whole.

A command must never destroy data. So an output is written to a temporary file in the output's own folder
(same file system, so the rename is atomic) and renamed over the old output only once it is complete and
synced: Ctrl-C, a crash or a full disk leaves the old output (or none), never a partial file that looks
complete. An output that is one of the inputs (same ``st_dev``/``st_ino``, so also through a symlink or a
hard link) is refused before anything is read. ``-`` is stdin for an input and stdout for an output.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from typing import BinaryIO, TextIO, Union

from .errors import InputFileError, InputFileNotFoundError, OutputFileError

#: The path that means stdin (for an input) or stdout (for an output).
STDIO = "-"

PathArg = Union[str, "os.PathLike[str]"]

#: A UTF-16 surrogate code point. A ``str`` can hold one (from a ``"\\ud83d"`` JSON escape: half an emoji
#: cut by a stream, or a server bug); UTF-8 cannot, so every writer and encoder looks for it.
SURROGATE = re.compile("[\ud800-\udfff]")

#: Characters JSON may leave raw inside strings but that many line readers (``str.splitlines``,
#: JavaScript) treat as line breaks; escaping them keeps one row per line for every reader.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_LINE_BREAKS_TABLE = str.maketrans(_LINE_BREAKS)


def to_json_line(row: object) -> str:
    """``row`` as one line of JSON (no newline): UTF-8 text kept readable, every possible line break
    escaped. The one writer of JSON lines for every output."""
    return json.dumps(row, ensure_ascii=False).translate(_LINE_BREAKS_TABLE)


def is_stdio(path: PathArg) -> bool:
    return os.fspath(path) == STDIO


def check_input(path: PathArg, field: str = "input") -> None:
    """Raise :class:`InputFileError` unless ``path`` is ``-`` or an existing, readable file."""
    if is_stdio(path):
        return
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise InputFileNotFoundError(f"{name} does not exist", field=field) from None
    except OSError as err:
        raise InputFileError(f"{name} cannot be read: {err.strerror}", field=field) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputFileError(f"{name} is a directory, not a file", field=field)
    if stat.S_ISREG(st.st_mode):  # opening a FIFO would block until a writer comes; only test files
        try:
            with open(name, "rb"):
                pass
        except OSError as err:
            raise InputFileError(f"{name} cannot be read: {err.strerror}", field=field) from None


def _regular_identity(st: os.stat_result) -> tuple[int, int] | None:
    # Only regular files can be clobbered; two terminals or pipes sharing an inode are not "the same file".
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def _identity(path: PathArg, std_fd: int) -> tuple[int, int] | None:
    try:
        st = os.fstat(std_fd) if is_stdio(path) else os.stat(os.fspath(path))
    except (OSError, ValueError):
        return None
    return _regular_identity(st)


def refuse_output_is_input(output: PathArg, inputs: Iterable[PathArg], field: str = "output") -> None:
    """Raise :class:`OutputFileError` when ``output`` is the same file as one of ``inputs``.

    Compares device and inode numbers, so a symlink, a hard link or ``-`` redirected to the file is caught.
    """
    out_id = _identity(output, 1)
    if out_id is None:
        return
    for source in inputs:
        if _identity(source, 0) == out_id:
            out_name, in_name = os.fspath(output), os.fspath(source)
            how = "" if out_name == in_name else f" ({out_name} and {in_name} are links to one file)"
            raise OutputFileError(
                f"{out_name} is also the input{how}; writing it would destroy the input. Choose another output",
                field=field,
            )


@contextlib.contextmanager
def open_input(path: PathArg) -> Iterator[BinaryIO]:
    """The input's bytes: the file, or stdin for ``-`` (not closed afterwards)."""
    if is_stdio(path):
        yield sys.stdin.buffer
        return
    with open(os.fspath(path), "rb") as f:
        yield f


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: A lone UTF-16 surrogate (from a ``"\\ud800"`` escape in the input) has no UTF-8 form; written as
#: ``\\ud800`` it is, inside a JSON string (the only place one can be), the standard escape of the same
#: string, so a row reads back unchanged instead of stopping the run.
_ERRORS = "backslashreplace"


@contextlib.contextmanager
def _stdout_text() -> Iterator[TextIO]:
    """stdout as UTF-8 with :data:`_ERRORS`, whatever the locale; stdout itself stays open."""
    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:  # replaced by a text-only stream (a test's capture): use it as it is
        yield sys.stdout
        sys.stdout.flush()
        return
    text = io.TextIOWrapper(buffer, encoding="utf-8", errors=_ERRORS, newline="\n")
    try:
        yield text
    finally:
        text.flush()
        text.detach()


@contextlib.contextmanager
def atomic_output(path: PathArg, field: str = "output") -> Iterator[TextIO]:
    """A UTF-8 text stream that replaces ``path`` only when the ``with`` block ends without an exception.

    ``-`` is stdout. A symlink is followed (its target is replaced, the link kept). An existing output
    that is not a regular file (``/dev/null``, a FIFO) is written directly: there is no old content to
    keep. A temporary ``.NAME.*.partial`` file may be left behind only by a kill -9 or a power cut.
    Lone surrogates are written as ``\\udXXX`` (see :data:`_ERRORS`).
    """
    if is_stdio(path):
        with _stdout_text() as out:
            yield out
        return
    target = os.path.realpath(os.fspath(path))
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputFileError(f"{os.fspath(path)} is a directory", field=field)
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(target, "w", encoding="utf-8", errors=_ERRORS, newline="\n") as f:
            yield f
        return
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise OutputFileError(f"the folder of {os.fspath(path)} does not exist", field=field)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)}.", suffix=".partial")
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8", errors=_ERRORS, newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); a no-op where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
