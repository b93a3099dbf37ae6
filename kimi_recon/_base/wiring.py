"""Two references from a lower module to an upper one, set by the package root (``kimi_recon/__init__.py``), which
loads every module by name on first use. Each keeps an API where it was documented without an upward import:
``SpecialTokenRegistry.for_profile`` reads a profile name (profiles are above the table: their ids are read from
it), and the deprecated ``ChatProfile.render_turn``/``prompt_segments`` reach the dispatch by format (above the
renderers, which are above the profiles)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

    from ..profiles import ChatProfile

#: ``kimi_recon.profiles.get_profile``, loaded on first use
profile_lookup: Callable[[Any], ChatProfile]
#: loads ``kimi_recon._render.formats``
load_dispatch: Callable[[], ModuleType]
