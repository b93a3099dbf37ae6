"""Short reprs for objects that hold long id lists and texts: a notebook or a log shows what they are, not 55 KB."""

from __future__ import annotations

from collections.abc import Sequence

#: how many ids (at each end) and characters a repr shows
IDS_SHOWN = 3
TEXT_SHOWN = 40


def ids_repr(ids: Sequence[int]) -> str:
    """``[163607, 11, 42, …5,012 ids…, 7, 9, 163586]``: the ends of a long list and its length."""
    if len(ids) <= 2 * IDS_SHOWN + 1:
        return repr(list(ids))
    head = ", ".join(map(str, ids[:IDS_SHOWN]))
    tail = ", ".join(map(str, ids[-IDS_SHOWN:]))
    return f"[{head}, …{len(ids):,} ids…, {tail}]"


def text_repr(text: str | None) -> str:
    """The text's repr, cut to :data:`TEXT_SHOWN` characters with its length when longer."""
    if text is None or len(text) <= TEXT_SHOWN:
        return repr(text)
    return f"{text[:TEXT_SHOWN]!r}…({len(text):,} chars)"
