"""What both command lines share (``kimi-recon`` in :mod:`kimi_recon.cli`, ``generate``/``export`` in
:mod:`kimi_recon.openrouter.cli`): it lives below both, so neither imports the other for it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C while a command runs, so temporary outputs are removed and old ones stay."""
    import signal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: The exit status of a command whose reader went away (``| head``): what a shell reports for a tool that
#: SIGPIPE ended, 128 + 13.
BROKEN_PIPE_STATUS = 141


def quiet_broken_pipe() -> int:
    """After a ``BrokenPipeError`` on stdout: point stdout at /dev/null so the interpreter's final flush does not
    fail again and print a traceback, and give the status the shell tools give (nothing is printed: the reader
    asked for no more, as with ``cat FILE | head``)."""
    import os
    import sys

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a file descriptor (captured): nothing to flush there
        pass
    return BROKEN_PIPE_STATUS


def shell_status(command: Callable[[], int]) -> int:
    """Run ``command`` (argument parsing included) and return its exit status, ending as the shell tools do when
    the reader of stdout goes away (``| head``, ``| true``): quietly, with :data:`BROKEN_PIPE_STATUS`.

    The pipe can break anywhere: in a command's own writes, in argparse's ``--help``/``--version`` (which print and
    exit inside ``parse_args``), or only when the interpreter flushes stdout at exit, where Python prints
    "Exception ignored ... BrokenPipeError" and exits 120. So stdout is flushed here, before returning or exiting,
    where a broken pipe is still ours to end quietly.
    """
    import sys

    try:
        try:
            code = command()
        except SystemExit:  # argparse printed help, a version or a usage error: its text must reach the reader now
            _flush(sys.stdout)
            raise
        _flush(sys.stdout)
        return code
    except BrokenPipeError:
        return quiet_broken_pipe()


def _flush(stream: object) -> None:
    flush = getattr(stream, "flush", None)  # sys.stdout is None when the command started with stdout closed
    if flush is not None:
        flush()
