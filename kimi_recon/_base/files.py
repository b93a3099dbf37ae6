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
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO, TextIO, Union

from ..errors import InputFileError, InputFileNotFoundError, OutputFileError

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


def is_device(path: PathArg) -> bool:
    """True when ``path`` exists and is neither a regular file nor a folder (``/dev/null``, a FIFO, a terminal)."""
    if is_stdio(path):
        return False
    try:
        mode = os.stat(os.fspath(path)).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


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
    except ValueError as err:  # a NUL byte or a lone surrogate: no file has that name
        raise InputFileError(f"{name!r} is no file name the system takes ({err})", field=field) from None
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


#: The longest line an input may have. A longer one (or an input with no newline, such as ``/dev/zero``)
#: stops the read with an :class:`InputFileError` naming the line, instead of growing memory without bound.
#: A 64 MiB record is far past any real response; raise it here if yours are larger.
MAX_LINE_BYTES = 64 * 2**20

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: A zstandard skippable frame starts with 0x184D2A5? (little-endian): pzstd's files and seekable ones begin so.
_ZSTD_SKIPPABLE_MAGIC = re.compile(rb"[\x50-\x5f]\x2a\x4d\x18")
_BOM = b"\xef\xbb\xbf"


def _peek(f: BinaryIO, n: int) -> bytes:
    peek = getattr(f, "peek", None)
    return bytes(peek(n)[:n]) if peek is not None else b""


@contextlib.contextmanager
def open_input(path: PathArg, field: str = "input") -> Iterator[BinaryIO]:
    """The input's bytes: the file, or stdin for ``-`` (not closed afterwards).

    gzip and zstandard data (told by its first bytes, not the file name) is decompressed as it is read;
    zstandard needs the ``zstandard`` package."""
    name = "stdin" if is_stdio(path) else os.fspath(path)
    with contextlib.ExitStack() as stack:
        if is_stdio(path):
            raw: BinaryIO = sys.stdin.buffer
        else:
            try:
                raw = stack.enter_context(open(name, "rb"))
            except FileNotFoundError:
                raise InputFileNotFoundError(f"{name} does not exist", field=field) from None
            except IsADirectoryError:
                raise InputFileError(f"{name} is a directory, not a file", field=field) from None
            except OSError as err:
                raise InputFileError(f"{name} cannot be read: {err.strerror}", field=field) from None
            except ValueError as err:  # a NUL byte or a lone surrogate: no file has that name
                raise InputFileError(f"{name!r} is no file name the system takes ({err})", field=field) from None
        head = _peek(raw, 4)
        if head.startswith(_GZIP_MAGIC):
            import gzip

            yield stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))  # type: ignore[misc]
        elif head.startswith(_ZSTD_MAGIC) or _ZSTD_SKIPPABLE_MAGIC.match(head):
            try:
                import zstandard  # type: ignore[import-not-found, unused-ignore]
            except ImportError:
                raise InputFileError(
                    f"{name} is zstandard-compressed: pip install 'kimi-recon[zstd]' (in a clone: pip install -e '.[zstd]'), or decompress it first (zstd -d)", field=field
                ) from None
            yield stack.enter_context(io.BufferedReader(_ZstdFrames(raw, zstandard)))
        else:
            yield raw


class _ZstdFrames(io.RawIOBase):
    """The decompressed bytes of the one zstandard frame of ``raw``. Unlike zstandard's own stream reader, which
    returns what it has and then ends, input that ends inside a frame raises ``EOFError`` and damaged data
    ``ValueError``, so a cut or corrupt archive is never read as a short file.

    A second frame that holds data raises ``ValueError`` too: a file cut exactly between two frames is a valid,
    shorter archive (zstandard has no end-of-archive mark; nothing in the bytes can tell), so a file of several
    frames cannot be told from a cut one and is not read. ``zstd`` writes one frame whatever its threads;
    several come from ``cat a.zst b.zst``, ``pzstd`` or a writer that ends a frame per batch, and
    ``zstd -dc F | zstd -o ONE.zst`` makes one (after checking F is whole). Skippable frames and empty frames
    hold no data and are passed over."""

    _CHUNK = 1 << 16

    def __init__(self, raw: BinaryIO, zstandard: Any) -> None:
        self._raw, self._zstd = raw, zstandard
        self._frame = zstandard.ZstdDecompressor().decompressobj()
        self._started = False  # whether the current frame has taken any input
        self._frame_bytes = 0  # what the current frame has given so far
        self._data_frames = 0  # finished frames that gave data
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._raw.read(self._CHUNK)
            if not chunk:
                if self._started:
                    raise EOFError("the zstandard data ends inside a frame (a cut file)")
                return 0
            self._pending = self._feed(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def _feed(self, chunk: bytes) -> bytes:
        out = []
        while chunk:
            self._started = True
            try:
                piece = self._frame.decompress(chunk)
            except self._zstd.ZstdError as err:
                raise ValueError(f"damaged zstandard data ({err})") from None
            if piece and not self._frame_bytes and self._data_frames:
                raise ValueError(
                    "a second zstandard frame starts here; a file of several frames cannot be told from one cut "
                    "between two frames (zstandard has no end mark), so it is not read: make it one frame first "
                    "(zstd -dc FILE | zstd -o ONE.zst), after checking that FILE is whole"
                )
            self._frame_bytes += len(piece)
            out.append(piece)
            if not self._frame.eof:
                break
            chunk = self._frame.unused_data
            self._data_frames += self._frame_bytes > 0
            self._frame = self._zstd.ZstdDecompressor().decompressobj()
            self._started = False
            self._frame_bytes = 0
        return b"".join(out)


#: What reading damaged compressed data raises: gzip.BadGzipFile (an OSError), a cut .gz (EOFError), a corrupt
#: deflate stream (zlib.error, which is no OSError), zstandard's errors (ValueError, EOFError).
_DAMAGED = (OSError, EOFError, ValueError, zlib.error)


def read_lines(path: PathArg, field: str = "input") -> Iterator[bytes]:
    """Every line of a (possibly compressed) input, blank ones included, a UTF-8 byte order mark at its
    start removed. Each line is read with a bound (:data:`MAX_LINE_BYTES`); a longer one, or damaged
    compressed data, raises :class:`InputFileError` naming the 1-based line, and so does a first non-blank
    line that shows the file is not JSON Lines (:func:`refuse_non_jsonl`)."""
    name = "stdin" if is_stdio(path) else os.fspath(path)
    first = True
    with open_input(path, field) as f:
        line_no = 0
        while True:
            line_no += 1
            try:
                raw = f.readline(MAX_LINE_BYTES + 1)
            except _DAMAGED as err:
                raise InputFileError(f"{name} cannot be read at line {line_no}: {err}", field=field) from None
            if not raw:
                return
            if len(raw) > MAX_LINE_BYTES:
                raise InputFileError(
                    f"{name}: line {line_no} is longer than {MAX_LINE_BYTES} bytes (no newline found); "
                    "is this a JSON Lines file?",
                    field=field,
                )
            if line_no == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            if first and raw.strip():
                refuse_non_jsonl(raw, line_no, path, field)
                first = False
            yield raw


def refuse_non_jsonl(raw: bytes, line_no: int, path: PathArg, field: str = "input") -> None:
    """Raise :class:`InputFileError` when the first non-blank line shows a whole file that is not JSON Lines:
    a JSON array (on one line or spread over many) or pretty-printed JSON. Read on, such a file would give
    one error per line and nothing compared; said once, it tells what to do."""
    text = raw.strip().decode("utf-8", "replace")
    name = "stdin" if os.fspath(path) == "-" else os.fspath(path)
    try:
        value = json.loads(text)
    except ValueError:
        # What json.dumps(indent=...) and jq write: a lone bracket, or an array whose items run on after a comma.
        # A record merely cut short (a truncated file) is left to be reported as that line's error.
        if text == "[" or (text.startswith("[") and text.endswith(",")):
            found = "a JSON array spread over several lines"
        elif text == "{":
            found = "pretty-printed JSON (an object spread over several lines)"
        else:
            return
        jq_filter = "'.[]'" if text.startswith("[") else "."
        raise InputFileError(
            f"{name} holds {found}, starting at line {line_no}; kimi-recon reads JSON Lines, one object per line. "
            f"Convert it first, e.g. jq -c {jq_filter} FILE > FILE.jsonl",
            field=field,
        ) from None
    except RecursionError:
        return
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):  # a dataset as one array
        raise InputFileError(
            f"{name}: line {line_no} is a JSON array, not an object; kimi-recon reads JSON Lines, "
            "one object per line. If the array is the dataset, convert it first: jq -c '.[]' FILE > FILE.jsonl",
            field=field,
        )


def read_whole(path: PathArg, field: str = "input") -> bytes:
    """A small input read whole (a constants file, a chat template), with :data:`MAX_LINE_BYTES` as its bound
    and a leading UTF-8 byte order mark dropped; longer raises :class:`InputFileError` (so ``/dev/zero`` ends)."""
    name = "stdin" if is_stdio(path) else os.fspath(path)
    with open_input(path, field) as f:
        try:
            data = f.read(MAX_LINE_BYTES + 1)
        except _DAMAGED as err:
            raise InputFileError(f"{name} cannot be read: {err}", field=field) from None
    if len(data) > MAX_LINE_BYTES:
        raise InputFileError(f"{name} is longer than {MAX_LINE_BYTES} bytes; is it the right file?", field=field)
    return data.removeprefix(_BOM)


def count_records(path: PathArg) -> int | None:
    """The number of non-blank lines of a regular file (for a progress bar's total); None for stdin,
    a pipe or a device, and for a file that cannot be read through (the real read reports why)."""
    if is_stdio(path):
        return None
    try:
        if not stat.S_ISREG(os.stat(os.fspath(path)).st_mode):
            return None
        return sum(1 for raw in read_lines(path) if raw.strip())
    except (OSError, InputFileError):
        return None


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
    keep. A temporary ``.NAME.HOST-PID.*.partial`` file may be left behind only by a kill -9 or a power cut;
    the next write of the same output removes it (:func:`remove_stale_partials`).
    Lone surrogates are written as ``\\udXXX`` (see :data:`_ERRORS`). A name ending in ``.gz`` is written
    gzip-compressed and one ending in ``.zst`` zstandard-compressed (the ``zstd`` extra), as the inputs are read:
    a ``.gz`` name holding plain text is a file ``zcat`` and ``datasets`` cannot read.
    """
    if is_stdio(path):
        with _stdout_text() as out:
            yield out
        return
    compression = output_compression(path)
    if compression == "zst":
        _zstandard(path, field)  # before the old output is touched
    with _replaced(path, field, binary=compression is not None) as f:
        if compression is None:
            yield f
            return
        with _compressed_text(f, compression, path) as text:
            yield text


def check_output_name(path: PathArg, field: str = "output") -> None:
    """Raise :class:`OutputFileError` before any work when an output's name asks for what cannot be written
    here (a ``.zst`` name without the zstandard package)."""
    if not is_stdio(path) and output_compression(path) == "zst":
        _zstandard(path, field)


def output_compression(path: PathArg) -> str | None:
    """``"gz"`` or ``"zst"`` when an output named ``path`` is written compressed (its name ends so, any case), else None."""
    name = os.fspath(path).lower()
    return "gz" if name.endswith(".gz") else "zst" if name.endswith(".zst") else None


def _zstandard(path: PathArg, field: str) -> Any:
    try:
        import zstandard  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        raise OutputFileError(
            f"{os.fspath(path)} names a zstandard file, which needs the zstandard package: pip install 'kimi-recon[zstd]' "
            "(in a clone: pip install -e '.[zstd]'), or name it .gz (gzip needs nothing)",
            field=field,
        ) from None
    return zstandard


@contextlib.contextmanager
def _compressed_text(raw: BinaryIO, compression: str, path: PathArg) -> Iterator[TextIO]:
    """UTF-8 text compressed into ``raw``, which stays open (the caller syncs and renames it). The compressed
    stream is finished only when the block ends without an exception."""
    stream: Any
    if compression == "gz":
        import gzip

        # no file name or time in the header: the temporary file's name is no one's business, and the same rows
        # give the same bytes
        stream = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0)
    else:
        stream = _zstandard(path, "output").ZstdCompressor().stream_writer(raw, closefd=False)
    text = io.TextIOWrapper(stream, encoding="utf-8", errors=_ERRORS, newline="\n")
    yield text
    text.flush()
    text.detach()
    stream.close()  # the gzip trailer / the zstandard frame's end; raw stays open


@contextlib.contextmanager
def atomic_binary_output(path: PathArg, field: str = "output") -> Iterator[BinaryIO]:
    """:func:`atomic_output` for bytes (a Parquet file): the same temporary file renamed into place at the end.
    ``-`` is refused (a binary file is no output for a terminal or a line reader)."""
    if is_stdio(path):
        raise OutputFileError("must be a file for binary output, not - (stdout)", field=field)
    with _replaced(path, field, binary=True) as f:
        yield f


@contextlib.contextmanager
def _replaced(path: PathArg, field: str, *, binary: bool) -> Iterator[Any]:
    target = os.path.realpath(os.fspath(path))
    try:
        st: os.stat_result | None = os.stat(target)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputFileError(f"{os.fspath(path)} is a directory", field=field)
    text: dict[str, Any] = {} if binary else {"encoding": "utf-8", "errors": _ERRORS, "newline": "\n"}
    mode = "wb" if binary else "w"
    if st is not None and not stat.S_ISREG(st.st_mode):
        with open(target, mode, **text) as f:
            yield f
        return
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise OutputFileError(f"the folder of {os.fspath(path)} does not exist", field=field)
    remove_stale_partials(target)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=_partial_prefix(target), suffix=".partial")
    try:
        os.fchmod(fd, stat.S_IMODE(st.st_mode) if st is not None else 0o666 & ~_umask())
        with os.fdopen(fd, mode, **text) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


def _host() -> str:
    import socket

    return re.sub(r"[^A-Za-z0-9_-]", "_", socket.gethostname()) or "host"


def _partial_prefix(target: str) -> str:
    # host and pid in the name say whose file it is, so a later run can tell a dead writer's from a live one's
    return f".{os.path.basename(target)}.{_host()}-{os.getpid()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # exists (another user's) or cannot be asked: keep its file
    return True


def remove_stale_partials(target: str) -> list[str]:
    """Remove the temporary files of ``target`` left by writers on this host that no longer run (a kill -9,
    a power cut); return their paths. Files of live processes, of other hosts (a shared folder) and of the
    old naming (no host and pid) are left alone."""
    folder, base = os.path.split(target)
    pattern = re.compile(rf"\.{re.escape(base)}\.(?P<host>[A-Za-z0-9_-]+)-(?P<pid>\d+)\.[^.]+\.partial")
    removed: list[str] = []
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return removed
    host = _host()
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or m["host"] != host or _pid_alive(int(m["pid"])):
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


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
