"""The output JSONL: append-only, one row per prompt, safe against a crash or a kill at any moment.

Guarantees, and how they are kept:

* **Single writer.** The file is opened once, by one thread, with an exclusive ``flock``; a second run
  on the same file fails at once instead of interleaving rows. The OS drops the lock when the process
  dies, however it dies.
* **Whole rows.** Each row is one ``os.write`` of a complete line (looped until every byte is out) on an
  ``O_APPEND`` descriptor, then ``fsync``-ed, so a finished row survives a kill and a power cut.
* **Torn tails.** A kill can still land inside a write. On open, bytes after the last newline are
  checked: a complete row just missing its newline gets the newline; anything else is cut off, because
  it is not a row and its prompt was therefore never done.
* **No prompt twice.** The ids already in the file are read after the lock is taken, and the run skips
  them; rows are written only by the lock holder. The one exception is a retry (``--retry-errors``): a
  prompt whose last row is an error may get another row; a prompt's outcome is its last row.
* **Every row writable.** A row is always written (:func:`encode_row`), so a paid-for response is never
  requested again: lone UTF-16 surrogates are written as ``\\udXXX`` JSON escapes (the same string when
  read back) and the row is flagged; a row that cannot be serialised at all becomes an error row.
* **No key on disk.** The serialised row is searched for the API key and for every 8-character piece of
  its secret part (a server may echo the key cut short). A row that holds any is scrubbed text by text
  (``[REDACTED]``); since the rebuilt ids of such a turn would still encode the key, they are dropped and
  the row is recorded as an ``api_key_in_response`` error (the scrubbed response is kept).
* **Only regular files.** A device (``/dev/full``), a FIFO or a directory is refused: the file is read
  back to resume, and a device never ends.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import stat
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from .._base.arguments import bool_argument, instance_argument, path_argument
from .._base.files import SURROGATE, read_lines
from .._base.files import to_json_line as to_json_line  # the one JSON-lines writer; importable here as before
from ..errors import InvalidInputError, OutputFileError
from ..flags import Flag, FlagCode, flags_to_json
from .errors import MIN_SECRET_LENGTH, OutputNotOpenError, holds_secret, holds_secret_spelled, redact, secret_spellings
from .errors import OutputLockedError as OutputLockedError  # defined with the adapter's errors; importable here as before
from .parse import join_surrogate_pairs
from .rows import cost_of

try:  # flock is POSIX; elsewhere the single-writer rule is the user's to keep
    import fcntl
except ImportError:  # pragma: no cover - not exercised on Linux
    fcntl = None  # type: ignore[assignment]


#: Row fields holding token ids; a turn whose text held the API key would carry it in these.
_ID_FIELDS = ("output_ids", "output_source", "prompt_ids", "sample")


def _flagged(row: Mapping[str, Any], code: FlagCode, message: str) -> dict[str, Any]:
    flags = row.get("flags")
    flags = list(flags) if isinstance(flags, list) else []  # already serialised: add one more the same way
    return {**row, "flags": [*flags, *flags_to_json([Flag(code, message)])]}


def _holds_secret(line: str, secret: str | None) -> bool:
    """True when the serialised ``line`` holds the key or a ``MIN_FRAGMENT``-character piece of its secret part,
    as written or JSON-escaped (a key with a ``"`` or ``\\`` would be escaped in the line)."""
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return False
    escaped = to_json_line(secret)[1:-1]
    if holds_secret_spelled(line, secret) or (escaped != secret and holds_secret(line, escaped)):
        return True
    # a spelling with a backslash (``\\u0073...`` as text) is escaped in the line: searched as it is written there
    return any(json_spelled in line for json_spelled in _json_spellings(secret))


@functools.lru_cache(maxsize=4)
def _json_spellings(secret: str) -> tuple[str, ...]:
    """The :func:`~kimi_recon.openrouter.errors.secret_spellings` that JSON writes otherwise, as it writes them."""
    return tuple(written for spelled in secret_spellings(secret) if (written := to_json_line(spelled)[1:-1]) != spelled)


def without_secret(row: Mapping[str, Any]) -> dict[str, Any]:
    """The row of a response that held the key: no ids (they would encode it), recorded as an error."""
    kept = {k: v for k, v in row.items() if k not in _ID_FIELDS}
    if kept.get("status") == "ok":
        kept["status"] = "error"
        kept["error"] = {
            "type": "api_key_in_response",
            "code": None,
            "message": "the response holds the API key or a piece of it: it is redacted in the text, and the "
            "rebuilt ids, which would encode it, were not written",
        }
    return _flagged(kept, FlagCode.API_KEY_IN_TEXT, "the API key (or a piece of it) appeared in this row's text and was redacted")


def _redacted(row: Mapping[str, Any], secret: str) -> tuple[dict[str, Any], str]:
    """The row with every text scrubbed of the key and its pieces (keys of objects too), and its line.

    When the line still holds a piece (one formed across two texts, or a key that JSON escapes), the
    response goes too: no row may carry any of the key."""
    scrubbed = without_secret(redact(dict(row), secret, fragments=True))
    line = to_json_line(scrubbed)
    if _holds_secret(line, secret):
        scrubbed = {k: v for k, v in scrubbed.items() if k not in ("response", "usage", "provider")}
        scrubbed["response"] = None
        error = scrubbed.get("error")
        scrubbed["error"] = {
            "type": "api_key_in_response",
            "code": error.get("code") if isinstance(error, Mapping) and isinstance(error.get("code"), (int, str)) else None,
            "message": "the response holds pieces of the API key that could not be scrubbed apart; it was not written",
        }
        line = to_json_line(scrubbed)
    return scrubbed, line


def _unwritable(row: Mapping[str, Any], err: BaseException) -> dict[str, Any]:
    rid = row.get("id")
    return {
        "id": rid if isinstance(rid, str) else repr(rid),
        "status": "error",
        "line": row.get("line") if isinstance(row.get("line"), int) else None,
        "model": row.get("model") if isinstance(row.get("model"), str) else None,
        "error": {"type": "unwritable_row", "code": None, "message": f"the row could not be written as JSON: {type(err).__name__}"},
        "response": None,
    }


def encode_row(row: Mapping[str, Any], secret: str | None = None) -> bytes:
    """``row`` as the bytes of one line (newline included). Never fails, never holds ``secret``.

    The serialised line is searched for the secret once (no walk over every value). Lone surrogates,
    which have no UTF-8 form, are written as ``\\udXXX`` JSON escapes and flagged.
    """
    instance_argument(row, "row", Mapping, "a mapping")
    instance_argument(secret, "secret", str, "a str", none=True)
    return _encode(row, secret)[1]


def _is_strict_json(row: Mapping[str, Any]) -> bool:
    try:
        json.dumps(row, allow_nan=False)
    except ValueError:
        return False
    return True


def _finite(value: Any) -> Any:
    """``value`` with each NaN or infinity (which a server's body may hold: Python reads them) as the string
    JSON's non-standard form spells it: a strict reader (``jq``, JavaScript, Arrow) fails on the bare word."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _encode(row: Mapping[str, Any], secret: str | None) -> tuple[Mapping[str, Any], bytes]:
    """The row as written (it may have become an error row) and its bytes."""
    try:
        line = to_json_line(row)
    except (TypeError, ValueError, RecursionError) as err:
        row = _unwritable(row, err)
        line = to_json_line(row)
    if ("NaN" in line or "Infinity" in line) and not _is_strict_json(row):
        row = _finite(row)
        line = to_json_line(row)
    if secret is not None and _holds_secret(line, secret):
        row, line = _redacted(row, secret)
    try:
        return row, (line + "\n").encode("utf-8")
    except UnicodeEncodeError:
        pass
    joined = join_surrogate_pairs(line)  # a pair split in two code points is one character: write it as one
    if SURROGATE.search(joined) is None:
        return row, (joined + "\n").encode("utf-8")
    flagged = _flagged(
        row,
        FlagCode.LONE_SURROGATE,
        "the response text holds a lone UTF-16 surrogate, written here as a \\udXXX escape; it has no "
        "UTF-8 form, so the rebuilt ids cannot be the model's for that character",
    )
    line = to_json_line(flagged)  # already scrubbed above: a flag adds no text from the response
    # Inside JSON strings (the only place a surrogate can be) this is the standard \uXXXX escape.
    return flagged, (join_surrogate_pairs(line) + "\n").encode("utf-8", "backslashreplace")


@dataclass(frozen=True)
class ResumeState:
    """What an existing output file already holds: one outcome per prompt id, the last row of it."""

    done: frozenset[str]
    ok: int
    errors: int
    cost: float
    repaired_tail: str | None  # None, "newline_added" or "truncated"
    #: The ids in ``done`` whose last row is an error (``generate --retry-errors`` sends them again).
    failed: frozenset[str] = frozenset()


#: What every row generate writes says it is (``status``); a JSON object without it is some other file's line.
_ROW_STATUSES = ("ok", "error")


def _is_row(record: object) -> bool:
    return isinstance(record, Mapping) and isinstance(record.get("id"), str) and record.get("status") in _ROW_STATUSES


def is_complete_row(text: str) -> bool:
    """True when ``text`` is one whole row: a JSON object with a string ``id`` and a ``status`` of ``ok`` or
    ``error`` (a torn write is not, nor a line of a prompts file or a dataset)."""
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return False
    return _is_row(record)


def scan_rows(lines: Iterable[str | bytes], path: str = "<output>") -> ResumeState:
    """The ids, outcome counts and spend in complete row lines (each ending in a newline).

    A prompt's outcome is its last row. Only an error row may be followed by another row of the same id
    (a retry: ``generate --retry-errors``); a second row after an ``ok`` one means two writers or a
    hand-edited file, and resuming into it is refused."""
    instance_argument(lines, "lines", Iterable, "an iterable of lines")
    instance_argument(path, "path", str, "a str")
    last_ok: dict[str, bool] = {}  # id -> whether its last row so far is ok
    cost = 0.0
    for line_no, line in enumerate(lines, 1):
        instance_argument(line, f"lines[{line_no - 1}]", (str, bytes), "a str line")
        if not line.strip():
            continue
        try:
            # UTF-8 and nothing else: json.loads would take the bytes of a UTF-16 or UTF-32 line as a row
            record = json.loads(line.decode("utf-8") if isinstance(line, bytes) else line)
            if not _is_row(record):
                raise ValueError("not a JSON object with a string 'id' and a 'status' of 'ok' or 'error'")
        except UnicodeDecodeError as err:
            raise InvalidInputError(
                f"{path}:{line_no} is not UTF-8 text ({err.reason} at byte {err.start}); refusing to resume into a damaged file",
                field="output",
            ) from None
        except (ValueError, RecursionError) as err:
            raise InvalidInputError(
                f"{path}:{line_no} is not an output row ({err}); refusing to resume into a damaged file",
                field="output",
            ) from None
        rid = str(record["id"])
        if last_ok.get(rid):
            raise InvalidInputError(f"{path}:{line_no}: prompt {rid!r} is already in the file with an ok row; refusing to resume")
        last_ok[rid] = record.get("status") == "ok"
        cost += cost_of({"cost": record.get("cost")})[0] or 0.0  # a NaN an older version wrote is no figure
    failed = frozenset(rid for rid, ok in last_ok.items() if not ok)
    return ResumeState(frozenset(last_ok), len(last_ok) - len(failed), len(failed), cost, None, failed)


class OutputFile:
    """The locked, append-only output. Use as a context manager; :meth:`append` one row per prompt.

    ``secret`` (the API key) never reaches the file (see :func:`encode_row`): rows hold server text,
    and nothing a server echoes back should put the key on disk.
    """

    def __init__(self, path: str | Path, *, fsync: bool = True, secret: str | None = None) -> None:
        self.path = Path(path_argument(path, "path"))
        self.fsync = bool_argument(fsync, "fsync")
        instance_argument(secret, "secret", str, "a str", none=True)
        self._secret = secret
        self._fd: int | None = None
        self.state: ResumeState | None = None

    def __enter__(self) -> OutputFile:
        self.open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def lock_existing(self) -> None:
        """Lock the file now if it already exists, changing nothing in it; :meth:`open` goes on from there.

        A run checks everything (its tokenizer takes a second to load) before it creates or repairs the
        output, so a bad setting leaves no file, or the old one as it was; locking first still refuses a
        rival run on the same file at once. A file that does not exist yet is created by :meth:`open`.
        """
        self._refuse_stdout()
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            return
        self._fd = self._locked(fd)

    def open(self) -> ResumeState:
        """Lock the file (unless :meth:`lock_existing` did), repair a torn tail, and read what is already done."""
        if self._fd is None:
            self._refuse_stdout()
            self._fd = self._locked(os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644))
        try:
            # What the file is, read first and changed by nothing: only a generate log, whose last write may
            # have been cut, gets its tail repaired; any other file is refused as it is.
            state = scan_rows(_log_lines(self.path), str(self.path))
            repaired = _repair_tail(self._fd)
        except BaseException:
            self.close()
            raise
        self.state = replace(state, repaired_tail=repaired)
        return self.state

    def _refuse_stdout(self) -> None:
        if os.fspath(self.path) == "-":
            raise OutputFileError(
                "the output is an append-only log read back to resume, so it must be a file, not - (stdout)",
                field="output",
            )

    def _locked(self, fd: int) -> int:
        """``fd``, checked to be a regular file and exclusively locked (closed on failure)."""
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OutputFileError(
                    f"{self.path} is not a regular file; the output is read back to resume, so it must be one",
                    field="output",
                )
            if fcntl is not None:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise OutputLockedError(
                        f"{self.path} is being written by another run; wait for it or choose another output"
                    ) from None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def append(self, row: Mapping[str, Any]) -> str:
        """Write one row as one line, durably; return the status written (see :func:`encode_row`)."""
        if self._fd is None:
            raise OutputNotOpenError(f"{self.path} is not open: append inside `with OutputFile(path) as out:`", field="output")
        final, data = _encode(row, self._secret)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)
        return str(final.get("status"))

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


#: How every row starts on disk (``to_json_line`` of a row whose first keys are ``id`` and ``status``): a torn last
#: write is a prefix of a row, so it starts with this head (or is a prefix of it).
_ROW_START = b'{"id": "'
_ID_STRING = re.compile(rb'\{"id": "(?:[^"\\]|\\.)*"')
_STATUS_HEADS = tuple(b', "status": "%s"' % status.encode() for status in _ROW_STATUSES)


def _is_row_cut_short(tail: bytes) -> bool:
    """True when ``tail`` (a last line without its newline) can be the start of a row a kill cut short; a line of
    any other file (a dataset record with a string ``id`` but no ``status`` after it) cannot."""
    if len(tail) <= len(_ROW_START):
        return _ROW_START.startswith(tail)
    if not tail.startswith(_ROW_START):
        return False
    m = _ID_STRING.match(tail)
    if m is None:  # cut inside the id
        return True
    rest = tail[m.end() :]
    return any(rest.startswith(head) or head.startswith(rest) for head in _STATUS_HEADS)


def _log_lines(path: Path) -> Iterator[bytes]:
    """The lines of a generate log, read as every input is (:func:`~kimi_recon._base.files.read_lines`: bounded
    lines, damaged bytes a named error). A last line without its newline is yielded when it is a whole row (the
    repair adds the newline) and left out when it is a row cut short (the repair drops it); anything else
    there is no log's: refused before the file is touched."""
    previous: bytes | None = None
    for line in read_lines(path, "output"):
        if previous is not None:
            yield previous
        previous = line
    if previous is None:
        return
    if previous.endswith(b"\n"):
        yield previous
        return
    try:
        whole = is_complete_row(previous.decode("utf-8"))
    except UnicodeDecodeError:
        whole = False
    if whole:
        yield previous
    elif not _is_row_cut_short(previous):
        raise InvalidInputError(
            f"{path} ends with a line that is not a generate row (nor one cut short); it is not a generate log, "
            "so it was left as it is: choose another -o",
            field="output",
        )


def _repair_tail(fd: int) -> str | None:
    """Fix bytes after the last newline left by a killed write; say what was done."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    if os.pread(fd, 1, size - 1) == b"\n":
        return None
    # Rows can be large; read backwards in blocks until the previous newline.
    block = 1 << 16
    end = size
    tail = b""
    while end > 0:
        start = max(0, end - block)
        chunk = os.pread(fd, end - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            tail = chunk[cut + 1 :] + tail
            keep = start + cut + 1
            break
        tail = chunk + tail
        end = start
    else:
        keep = 0
    try:
        complete = is_complete_row(tail.decode("utf-8"))
    except UnicodeDecodeError:
        complete = False
    if not complete:
        os.ftruncate(fd, keep)
        return "truncated"
    os.write(fd, b"\n")
    return "newline_added"
