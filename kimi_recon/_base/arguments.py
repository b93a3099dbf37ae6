"""Checks of a public function's plain arguments (an int, a flag, a tokenizer, a choice of words), done once
where the argument enters, so a wrong Python type is an :class:`~kimi_recon.errors.InvalidInputTypeError`
naming it rather than an ``AttributeError`` deep inside."""

from __future__ import annotations

import numbers
import os
from collections.abc import Collection
from typing import Any

from ..errors import InvalidInputError, InvalidInputTypeError, preview


def int_argument(value: object, field: str, *, minimum: int | None = None, none: bool = False) -> Any:
    """``value`` as an int (numpy integers too; bools and floats refused), at least ``minimum``; None when
    ``none`` allows it."""
    if value is None and none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidInputTypeError(f"must be an integer, got {preview(value)}", field=field)
    number = int(value)
    if minimum is not None and number < minimum:
        raise InvalidInputError(f"must be at least {minimum}, got {number}", field=field)
    return number


def number_argument(value: object, field: str) -> float:
    """``value`` as a real number (an int or a float, not a bool, not NaN)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInputTypeError(f"must be a number, got {preview(value)}", field=field)
    if value != value:
        raise InvalidInputError("must be a number, got NaN", field=field)
    return float(value)


def bool_argument(value: object, field: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputTypeError(f"must be True or False, got {preview(value)}", field=field)
    return value


def choice_argument(value: object, field: str, choices: Collection[str]) -> str:
    """``value`` when it is one of ``choices``."""
    if not isinstance(value, str):
        raise InvalidInputTypeError(f"must be one of {', '.join(map(repr, choices))}, got {preview(value)}", field=field)
    if value not in choices:
        raise InvalidInputError(f"must be one of {', '.join(map(repr, choices))}, got {preview(value)}", field=field)
    return value


def instance_argument(value: object, field: str, kind: type | tuple[type, ...], what: str, *, none: bool = False) -> Any:
    """``value`` when it is a ``kind`` (``what`` names it in the message), or None when ``none`` allows it."""
    if (value is None and none) or isinstance(value, kind):
        return value
    raise InvalidInputTypeError(f"must be {what}, got {type(value).__name__}", field=field)


def path_argument(value: object, field: str) -> Any:
    """``value`` when it is a str or ``os.PathLike`` path without a NUL (which ``open`` refuses with a
    ``ValueError``)."""
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidInputTypeError(f"must be a path (str or os.PathLike), got {type(value).__name__}", field=field)
    text = os.fspath(value)
    if not isinstance(text, str):
        raise InvalidInputTypeError(f"must be a text path, got {type(text).__name__}", field=field)
    if "\x00" in text:
        raise InvalidInputError(f"must not hold a NUL character, got {preview(text)}", field=field)
    return value
