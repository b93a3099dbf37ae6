"""Exceptions raised by kimi-recon.

Every error a user can trigger with bad input derives from :class:`KimiReconError`, so a pipeline can
catch one type. Errors about input data say which field (and, when known, which sample) was wrong.
"""

from __future__ import annotations


class KimiReconError(Exception):
    """Base class of every error kimi-recon raises on purpose."""


class TokenizerLoadError(KimiReconError):
    """A tokenizer directory, file or object could not be loaded, or is not a known Kimi tokenizer."""


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
            where.append(f"sample {sample!r}")
        if field is not None:
            where.append(f"field {field!r}")
        prefix = f"{', '.join(where)}: " if where else ""
        super().__init__(prefix + message)
        self.message = message

    def with_sample(self, sample: object) -> InvalidInputError:
        """The same error, now naming ``sample`` (used by batch code that knows the record)."""
        if self.sample is not None:
            return self
        err = type(self).__new__(type(self))
        InvalidInputError.__init__(err, self.message, field=self.field, sample=sample)
        return err


class InvalidTurnError(InvalidInputError):
    """An assistant turn (reasoning, content, tool calls, finish reason) is malformed."""
