"""Text from data made safe to print on a terminal: the one escape every command's output goes through.

Provider names, record ids and response text come from files and servers. Printed raw, an ESC or OSC
sequence in them can recolour the screen, set the window title or hide lines; a lone surrogate cannot
be written to a UTF-8 stream at all. So every character that is not printable text (C0 and C1 controls
except newline and tab, DEL, bidirectional overrides, surrogates) is shown as its Python escape.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """``text`` with every control, bidi-override and surrogate character written as ``\\xNN`` / ``\\uNNNN``;
    newlines and tabs are kept (the text is a multi-line report)."""
    return _UNSAFE.sub(_escape, text)
