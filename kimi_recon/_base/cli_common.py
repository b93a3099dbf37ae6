"""What both command lines share (``kimi-recon`` in :mod:`kimi_recon.cli`, ``generate``/``export`` in
:mod:`kimi_recon.openrouter.cli`): it lives below both, so neither imports the other for it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


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
