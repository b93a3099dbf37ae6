"""Every exception and warning kimi-recon raises (the OpenRouter adapter's own: :mod:`kimi_recon.openrouter.errors`).

Every error a user can trigger with bad input derives from :class:`KimiReconError`, so a pipeline can
catch one type. Errors about input data say which field (and, when known, which sample) was wrong::

    KimiReconError
    ├── TokenizerLoadError            a tokenizer directory, file or object cannot be used
    ├── BundledDataError              a shipped data file is missing or changed
    ├── UnknownSpecialTokenError      (also KeyError) a special-token text or id not in the registry
    ├── FastTokenizerError            tokenizer.json cannot be built or exported
    ├── ServerReportedError           the server sent an error instead of a turn
    │   ├── GenerationFailedError     ... as finish_reason "error"
    │   └── openrouter.OpenRouterError   ... or the exchange with OpenRouter failed (adds retryable, retries)
    └── InvalidInputError             (also ValueError) malformed input: .field, .sample
        ├── InvalidInputTypeError     (also TypeError) a value of the wrong Python type
        ├── InputFileError            (also OSError) an input file is missing or unreadable
        │   └── InputFileNotFoundError    ... missing (also FileNotFoundError, so ``except OSError`` works)
        ├── OutputFileError           an output cannot be written without destroying data
        ├── openrouter.OutputLockedError  another process writes the same output
        ├── openrouter.OutputNotOpenError (also RuntimeError) a row appended to an OutputFile not open
        ├── InvalidRecordError        a dataset record is malformed: .line
        ├── LogprobsError             a logprobs entry maps to no single token id
        └── InvalidTurnError          a malformed assistant turn
            └── InvalidResponseError  a response that is not one readable turn

    UserWarning
    └── ReasoningDroppedWarning       reasoning the profile or thinking=False does not render
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def preview(value: object, limit: int = 40) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages; never raises (a value nested too
    deeply to repr, or whose repr fails, is named by its type)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - never raises, by contract: RecursionError or any failing __repr__
        return f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "…"


def as_text(value: object) -> str:
    """``str(value)`` for a message or an id; a value nested too deeply to print (or whose ``str`` fails)
    gives its :func:`preview` instead."""
    if isinstance(value, str):
        return value
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - never raises, by contract: RecursionError or any failing __str__
        return preview(value)


class KimiReconError(Exception):
    """Base class of every error kimi-recon raises on purpose."""


class TokenizerLoadError(KimiReconError):
    """A tokenizer directory, file or object could not be loaded, or is not a known Kimi tokenizer."""


class BundledDataError(KimiReconError):
    """A data file shipped in the package is missing or is not the file that was shipped (its sha256 differs)."""


class FastTokenizerError(KimiReconError):
    """The fast tokenizer (tokenizer.json) cannot be built or exported: ``tokenizers`` is missing, a
    vocab token is not reachable by BPE, or the output folder is refused."""


class UnknownSpecialTokenError(KimiReconError, KeyError):
    """A special-token text or id is not in the registry."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else ""


class InvalidInputError(KimiReconError, ValueError):
    """Input data is malformed. ``field`` names the offending field, ``sample`` the record, when known."""

    def __init__(self, message: str, *, field: str | None = None, sample: object = None) -> None:
        self.field = field
        self.sample = sample
        where = []
        if sample is not None:
            where.append(f"sample {preview(sample, 1000)}")
        if field is not None:
            where.append(f"field {preview(field, 1000)}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(prefix + message)
        self.message = message

    def with_sample(self, sample: object) -> InvalidInputError:
        """The same error, now naming ``sample`` (used by batch code that knows the record)."""
        if self.sample is not None:
            return self
        err = copy.copy(self)  # (type(self).__new__ would be ValueError's, refused for the OSError subclasses)
        InvalidInputError.__init__(err, self.message, field=self.field, sample=sample)
        return err


class InvalidInputTypeError(InvalidInputError, TypeError):
    """A value of the wrong Python type (a float where an int belongs, a set where a list does, an object
    JSON cannot write). Also a ``TypeError``, so ``except TypeError`` code written before it keeps working."""


class InputFileError(InvalidInputError, OSError):
    """An input file is missing, unreadable, or not a file. ``field`` names the option. Also an :class:`OSError`,
    which is what ``open`` raises for the same causes."""


class InputFileNotFoundError(InputFileError, FileNotFoundError):
    """An input file that does not exist; also a :class:`FileNotFoundError`, so code catching that keeps working."""


class OutputFileError(InvalidInputError):
    """An output cannot be written without destroying data: it is the input (also through a link), a
    directory, or, for an append-only log, not a regular file. ``field`` names the option."""


class InvalidRecordError(InvalidInputError):
    """A dataset record is malformed. ``line`` is its 1-based line in a JSONL file, when it came from one."""

    def __init__(self, message: str, *, field: str | None = None, sample: object = None, line: int | None = None) -> None:
        super().__init__(message, field=field, sample=sample)
        self.line = line
        if line is not None:  # the 1-based line leads, as in every CLI message
            self.args = (f"line {line}{', ' if sample is not None or field is not None else ': '}{self.args[0]}",)


class LogprobsError(InvalidInputError):
    """A logprobs entry cannot be mapped to exactly one token id."""


class InvalidTurnError(InvalidInputError):
    """An assistant turn (reasoning, content, tool calls, finish reason) is malformed."""


class InvalidResponseError(InvalidTurnError):
    """A response arrived but is not one readable assistant turn (no choices, nothing generated, arguments
    that are not text). ``field`` names the offending field, ``sample`` the prompt or record."""


class ServerReportedError(KimiReconError):
    """An error reported inside a response instead of a turn: an ``error`` object in the body or in a
    choice (or :class:`GenerationFailedError`, ``finish_reason: "error"``).

    ``code`` is the error's code (an HTTP-like int such as 429 or 502, or a name such as
    ``"server_error"``); ``message`` the human text; ``kind`` where it came from (``body`` for a response
    body, ``stream`` for a stream; transports add more); ``prompt_id`` the prompt or record, when known;
    ``metadata`` the error object's ``metadata``; ``response`` what had arrived. Whether trying again may
    help is a transport's question: :class:`kimi_recon.openrouter.OpenRouterError` adds ``retryable`` and
    ``retries``.
    """

    #: Who reported the error, as the message names it.
    reporter = "server"

    def __init__(
        self,
        message: str,
        *,
        code: int | str | None = None,
        kind: str = "body",
        prompt_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        response: Mapping[str, Any] | None = None,
    ) -> None:
        self.message = message
        self.code = code
        self.kind = kind
        self.prompt_id = prompt_id
        self.metadata: Mapping[str, Any] = dict(metadata or {})
        self.response = response
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"prompt {preview(self.prompt_id, 1000)}: " if self.prompt_id is not None else ""
        code = f" {preview(self.code, 1000)[1:-1] if isinstance(self.code, str) else preview(self.code, 1000)}" if self.code is not None else ""
        return f"{where}{self.reporter} {as_text(self.kind)} error{code}: {as_text(self.message)}"

    def fields(self) -> dict[str, Any]:
        """The constructor's arguments: ``type(err)(**err.fields())`` is an equal error."""
        return {
            "message": self.message,
            "code": self.code,
            "kind": self.kind,
            "prompt_id": self.prompt_id,
            "metadata": self.metadata,
            "response": self.response,
        }


class GenerationFailedError(ServerReportedError):
    """The generation ended with ``finish_reason: "error"`` (OpenRouter's way to end a failed generation;
    the provider's code, when any, is ``code``). A passing failure: trying again may help."""


class ReasoningDroppedWarning(UserWarning):
    """The turn had reasoning that this profile or ``thinking=False`` does not render."""


#: The name before issue 12 (it sounded like InvalidResponseError, which means "cannot be read"); kept for old code.
ResponseError = ServerReportedError
