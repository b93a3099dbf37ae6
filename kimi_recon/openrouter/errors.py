"""Errors of the OpenRouter adapter (the core's: :mod:`kimi_recon.errors`)::

    kimi_recon.errors.KimiReconError
    ├── kimi_recon.errors.ServerReportedError
    │   └── OpenRouterError          OpenRouter reported an error, or the exchange failed: .retryable, .retries
    └── kimi_recon.errors.InvalidInputError
        ├── OutputLockedError        another process is writing the same output file
        ├── OutputNotOpenError       (also RuntimeError) a row appended to an OutputFile not open
        └── ... InvalidResponseError a response that is not one readable turn (re-exported here)

:class:`OpenRouterError` is what OpenRouter (or the transport to it) reported: an HTTP error status, an
``error`` object in a 200 body or in a stream chunk, a timeout; it is a
:class:`~kimi_recon.errors.ServerReportedError`, the core's type for an error carried in a response.
:class:`InvalidResponseError` (defined in :mod:`kimi_recon.errors`, re-exported here) is a response that
arrived but cannot be read as one assistant turn (no choices, nothing generated, arguments that are not
text). Both derive from :class:`~kimi_recon.errors.KimiReconError`.

Neither ever holds the API key: the code that owns the key scrubs every message with :func:`redact`
before it builds an error, and :meth:`OpenRouterError.redacted` re-scrubs one that came from elsewhere.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .._base.arguments import bool_argument, instance_argument
from ..errors import GenerationFailedError, InvalidInputError, ServerReportedError
from ..errors import InvalidResponseError as InvalidResponseError  # re-exported: it used to live here

REDACTED = "[REDACTED]"

#: Shorter "secrets" are not scrubbed: a real OpenRouter key is ~70 characters, while scrubbing a
#: one-letter string would rewrite every word of every row that contains that letter.
MIN_SECRET_LENGTH = 8

#: In error text, any piece of the key this long is scrubbed too: a message cut to a length (by this
#: package, the SDK or a server) can end inside the key, leaving a prefix that a plain search misses.
MIN_FRAGMENT = 8


#: Prefixes that name a key's kind, not its secret: an 8-character piece of ``sk-or-v1-`` is no secret, and
#: scrubbing it would rewrite every row that mentions OpenRouter's key format. Longest first.
KEY_PREFIXES = ("sk-or-v1-", "sk-or-", "sk-proj-", "sk-")


def key_prefix(secret: str) -> str:
    """The known prefix of ``secret`` (``sk-or-v1-`` for an OpenRouter key), or ``""``."""
    return next((prefix for prefix in KEY_PREFIXES if secret.startswith(prefix)), "")


def redact(value: Any, secret: str | None, *, fragments: bool = False) -> Any:
    """``value`` with every occurrence of ``secret`` replaced, recursing into JSON-like containers.

    With ``fragments``, every run of text made of ``MIN_FRAGMENT``-character pieces of the secret is
    replaced as well (for error text, which may have been cut; see :func:`redact_text`).
    """
    instance_argument(secret, "secret", str, "a str", none=True)
    bool_argument(fragments, "fragments")
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return value
    try:
        return _redact(value, secret, fragments)
    except RecursionError:
        raise InvalidInputError("is nested too deeply to scrub", field="value") from None


def _redact(value: Any, secret: str, fragments: bool) -> Any:
    if isinstance(value, str):
        return redact_text(value, secret) if fragments else value.replace(secret, REDACTED)
    if isinstance(value, Mapping):
        return {_redact(k, secret, fragments): _redact(v, secret, fragments) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v, secret, fragments) for v in value]
    return value


@functools.lru_cache(maxsize=4)
def secret_pieces(secret: str) -> frozenset[str]:
    """Every ``MIN_FRAGMENT``-character piece of the key's secret part (what follows :func:`key_prefix`)."""
    if len(secret) < MIN_SECRET_LENGTH:
        return frozenset()
    part = secret[len(key_prefix(secret)) :]
    return frozenset(part[i : i + MIN_FRAGMENT] for i in range(len(part) - MIN_FRAGMENT + 1))


#: Anchors of :func:`holds_secret`: blocks of this many characters of the secret part, one every
#: ``_ANCHOR_STEP``. Every ``MIN_FRAGMENT``-window of the part holds a whole block (4 + 5 - 1 <= 8).
_ANCHOR_SIZE, _ANCHOR_STEP = 4, 5


@functools.lru_cache(maxsize=4)
def _anchors(secret: str) -> tuple[tuple[str, int], ...]:
    """The blocks of the secret part with their offsets in it (see ``_ANCHOR_SIZE``)."""
    part = secret[len(key_prefix(secret)) :]
    if len(part) < MIN_FRAGMENT:
        return ()
    starts = range(0, len(part) - _ANCHOR_SIZE + 1, _ANCHOR_STEP)
    return tuple((part[i : i + _ANCHOR_SIZE], i) for i in starts)


@functools.lru_cache(maxsize=4)
def _run_table(secret: str) -> bytes | None:
    """A ``bytes.translate`` table marking (``\\x00``) the bytes of the secret part's characters and blanking
    every other byte, or None when the part is not ASCII (then no byte stands for one character)."""
    part = secret[len(key_prefix(secret)) :]
    if not part.isascii():
        return None
    alphabet = set(part.encode())
    return bytes(0 if b in alphabet else 32 for b in range(256))


_RUN = b"\x00" * MIN_FRAGMENT


@functools.lru_cache(maxsize=4)
def secret_spellings(secret: str) -> tuple[str, ...]:
    """Other spellings of the key's secret part that a response could carry and a text search for the key
    misses: reversed, spaced or dash-joined characters, ``\\uXXXX``-escaped characters, its UTF-8 in hex (lower
    and upper case) and percent-encoded (``%XX``, either case), and its base64 (standard and URL-safe; the middle
    of each of the three alignments, which
    stays the same whatever surrounds it). Fragments are searched only in the plain spelling
    (:func:`holds_secret`); these are searched whole."""
    import base64

    part = secret[len(key_prefix(secret)) :]
    if len(part) < MIN_FRAGMENT:
        return ()
    raw = part.encode("utf-8")
    spellings = [part[::-1], " ".join(part), "-".join(part), "".join(f"\\u{ord(c):04x}" for c in part), raw.hex(), raw.hex().upper()]
    # percent-encoded, every byte (a URL's query string): quote() leaves letters and digits, which the plain search finds
    spellings += ["".join(f"%{b:02X}" for b in raw), "".join(f"%{b:02x}" for b in raw)]
    for shift in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            coded = encode(b"\0" * shift + raw).decode("ascii")
            spellings.append(coded[4 : len(coded) - 4])  # (the ends depend on the neighbouring bytes)
    return tuple(s for s in dict.fromkeys(spellings) if len(s) >= MIN_FRAGMENT)


def holds_secret_spelled(text: str, secret: str | None) -> bool:
    """:func:`holds_secret`, or one of :func:`secret_spellings` whole in ``text``."""
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return False
    return holds_secret(text, secret) or any(spelled in text for spelled in secret_spellings(secret))


def holds_secret(text: str, secret: str | None) -> bool:
    """True when ``text`` holds the key or any ``MIN_FRAGMENT`` consecutive characters of its secret part.

    Fast over a whole serialised row (it runs on every row written): a piece needs ``MIN_FRAGMENT``
    characters in a row from the secret part's alphabet, which one ``translate`` and one search rule out
    for almost every row (an id list has at most 6 digits in a row); only a text with such a run is
    searched, one search per anchor block (~13), each hit checked against the pieces around it.
    """
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return False
    pieces = secret_pieces(secret)
    if not pieces:  # a secret part too short for pieces: only the whole key is known to be secret
        return secret in text
    table = _run_table(secret)
    if table is not None and _RUN not in text.encode("utf-8", "surrogatepass").translate(table):
        return False
    for block, _ in _anchors(secret):
        at = text.find(block)
        while at >= 0:
            # A piece holding this block starts at most MIN_FRAGMENT - _ANCHOR_SIZE characters before it.
            for start in range(max(0, at - (MIN_FRAGMENT - _ANCHOR_SIZE)), at + 1):
                if text[start : start + MIN_FRAGMENT] in pieces:
                    return True
            at = text.find(block, at + 1)
    return False


def redact_text(text: str, secret: str | None) -> str:
    """``text`` with ``secret`` and every stretch covered by ``MIN_FRAGMENT``-character pieces of its secret
    part replaced (with the key's prefix, when it stands right before the stretch).

    So a key cut anywhere (``text[:500]`` ending inside it, or starting inside it, or a server quoting
    only its first 20 characters) leaves at most ``MIN_FRAGMENT - 1`` characters of its secret part.
    Linear in ``len(text)``; meant for single texts, not whole rows (:func:`holds_secret` finds those).
    """
    if not secret or len(secret) < MIN_SECRET_LENGTH:
        return text
    text = text.replace(secret, REDACTED)
    pieces = secret_pieces(secret)
    if not any(piece in text for piece in pieces):
        return text
    prefix = key_prefix(secret)
    out: list[str] = []
    kept = 0  # text[:kept] is already in out
    start = end = -1  # the current run of covered characters

    def close_run() -> None:
        nonlocal kept
        begin = start - len(prefix) if prefix and text[max(kept, start - len(prefix)) : start] == prefix else start
        out.extend((text[kept:begin], REDACTED))
        kept = end

    for i in range(len(text) - MIN_FRAGMENT + 1):
        if text[i : i + MIN_FRAGMENT] in pieces:
            if i > end:  # a new run
                if end >= 0:
                    close_run()
                start = i
            end = i + MIN_FRAGMENT
    close_run()
    out.append(text[kept:])
    return "".join(out)


#: Error codes by name that describe a passing condition (trying again may help).
_RETRYABLE_CODE_NAMES = frozenset({"server_error", "timeout", "rate_limit_exceeded", "overloaded", "incomplete_stream"})


def is_retryable_code(code: object) -> bool:
    """True for codes that describe a passing condition: 408, 429, 5xx, or a known transient name."""
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool):
        return code in (408, 429) or code >= 500
    return isinstance(code, str) and code in _RETRYABLE_CODE_NAMES


class OutputLockedError(InvalidInputError):
    """Another process is writing the same output file."""


class OutputNotOpenError(InvalidInputError, RuntimeError):
    """A row was appended to an :class:`~kimi_recon.openrouter.output.OutputFile` that is not open (open it with
    ``with OutputFile(path) as out``); a ``RuntimeError`` as this error was before it had a name."""


class OpenRouterError(ServerReportedError):
    """An error OpenRouter reported, or a failed exchange with it.

    A :class:`~kimi_recon.errors.ServerReportedError` (same fields) that may also come from the transport:
    ``code`` is the HTTP status or OpenRouter's ``error.code`` (an int such as 429 or 502, or a string
    such as ``"server_error"`` or ``"timeout"``); ``message`` is the human text; ``kind`` says where it
    came from (``http``, ``body``, ``stream``, ``timeout``, ``connection``); ``response`` what had arrived
    before the error (a partial stream), when anything had. The network fields are this class's own:
    ``retryable`` whether trying again may help; ``retries`` how many times the SDK had already retried the
    request, when known.
    """

    reporter = "OpenRouter"

    # The parent's keywords spelled out again, not **kwargs: a typed signature for mypy, IDEs and help().
    def __init__(
        self,
        message: str,
        *,
        code: int | str | None = None,
        kind: str = "body",
        prompt_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        response: Mapping[str, Any] | None = None,
        retryable: bool = False,
        retries: int | None = None,
    ) -> None:
        self.retryable = retryable
        self.retries = retries
        super().__init__(message, code=code, kind=kind, prompt_id=prompt_id, metadata=metadata, response=response)

    def fields(self) -> dict[str, Any]:
        """The constructor's arguments: ``type(err)(**err.fields())`` is an equal error."""
        return super().fields() | {"retryable": self.retryable, "retries": self.retries}

    @classmethod
    def from_response_error(cls, err: ServerReportedError) -> OpenRouterError:
        """``err`` as an :class:`OpenRouterError` (itself when it already is one). A failed generation
        (``finish_reason: "error"``) and a code such as 429 or 502 are retryable."""
        if isinstance(err, OpenRouterError):
            return err
        retryable = isinstance(err, GenerationFailedError) or is_retryable_code(err.code)
        return cls(**err.fields(), retryable=retryable)

    def _copy(self, **changes: Any) -> OpenRouterError:
        return type(self)(**(self.fields() | changes))

    def with_prompt_id(self, prompt_id: str) -> OpenRouterError:
        """The same error, naming the prompt it happened on."""
        return self._copy(prompt_id=prompt_id)

    def redacted(self, secret: str | None) -> OpenRouterError:
        """The same error with ``secret`` scrubbed from every text it carries."""
        return self._copy(
            message=redact_text(self.message, secret),
            metadata=redact(self.metadata, secret, fragments=True),
            response=redact(self.response, secret) if self.response is not None else None,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form written into an output row."""
        out: dict[str, Any] = {"type": self.kind, "code": self.code, "message": self.message}
        if self.metadata:
            out["metadata"] = dict(self.metadata)
        return out


#: HTTP statuses that refuse the key or the account, not one prompt: 401 (a wrong, disabled or expired key),
#: 402 (no credit left), 403 (forbidden, e.g. the key's own spend limit). Every later request would get the same.
ACCOUNT_STATUSES = frozenset({401, 402, 403})

#: OpenRouter also answers 403 when a model's moderation flags one input; that error's metadata names why
#: (``reasons``, ``flagged_input``) and it is about that prompt only.
_MODERATION_KEYS = ("reasons", "flagged_input")


def refuses_the_account(err: OpenRouterError) -> bool:
    """True when ``err`` is an HTTP error that refuses the key or the account rather than the prompt.

    A run stops at such an error and records no row for it: an error row would count as done, so a rerun
    with a fixed key or new credit would send nothing. 429 and 5xx are passing conditions (retried), and a
    moderation 403 or a 400 belongs to its prompt; those stay error rows.
    """
    if err.kind != "http" or err.code not in ACCOUNT_STATUSES:
        return False
    return not (err.code == 403 and any(key in err.metadata for key in _MODERATION_KEYS))
