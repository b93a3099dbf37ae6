"""Does the chat profile fit the data? The model id a response names, and the ids a record says the model
generated, both tell the format; a rebuild in another format gives wrong ids without a word unless it is flagged.

Every flag here is :attr:`~kimi_recon.flags.FlagCode.PROFILE_MISMATCH` and its message ends with the profile to
use (``…; use --profile kimi-k3``), which :func:`suggested_profile` reads back for the audit summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .flags import Flag, FlagCode
from .profiles import DEFAULT_PROFILE, PROFILES, ChatProfile, other_model, profile_for_model, renders_turns_alike

#: Ids only one format's output holds. K3 ends every tag with ``<|sep|>`` (163589, a reserved slot in K2.5);
#: K2.x writes ``</think>``, ``<think>`` and the tool-call markers, reserved slots in K3.
_K3_ONLY_IDS = frozenset({163589})
_K2_ONLY_IDS = frozenset({163595, 163596, 163597, 163598, 163599, 163601, 163606, 163607})
_SUGGESTION = re.compile(r"; use --profile (\S+)$")


def model_mismatch(profile: ChatProfile, model: object) -> Flag | None:
    """A flag when the ``model`` id names a profile that renders turns differently from ``profile``, or a model of
    another maker or kind (:func:`~kimi_recon.profiles.other_model`)."""
    if not isinstance(model, str):
        return None
    other = other_model(model)
    if other is not None:  # (with no profile named such an id is refused: kimi_recon.profiles.profile_or_model)
        return Flag(
            FlagCode.PROFILE_MISMATCH,
            f"the response's model {model!r} names {other}, not a Kimi model, but the ids were rebuilt as {profile.name} "
            "because that profile was named: they are not the ids that model generated unless a Kimi model answered "
            "under that name",
            "profile",
        )
    named = profile_for_model(model, default="")
    if not named or named == profile.name or renders_turns_alike(PROFILES[named], profile):
        return None
    return Flag(
        FlagCode.PROFILE_MISMATCH,
        f"the response's model {model!r} is {named}, but the ids were rebuilt as {profile.name}; use --profile {named}",
        "profile",
    )


def assumed_profile(model: object) -> Flag | None:
    """A flag when no profile was named and the ``model`` id names no Kimi model kimi-recon knows
    (``openai/gpt-4o``, a served-model-name of a local server), so the default format was assumed. No model id
    at all (a stored message) is not flagged: nothing says it is another format."""
    if not isinstance(model, str) or not model.strip() or profile_for_model(model, default=""):
        return None
    return Flag(
        FlagCode.PROFILE_ASSUMED,
        f"the response's model {model!r} names no Kimi model kimi-recon knows, so the ids were rebuilt as "
        f"{DEFAULT_PROFILE}, the default; name the format (profile=, --profile) if the model wrote another",
        "profile",
    )


def ids_mismatch(profile: ChatProfile, ids: Iterable[int], field: str) -> Flag | None:
    """A flag when ``ids`` (what the model generated) hold a marker of the other format than ``profile``'s."""
    foreign = _K2_ONLY_IDS if profile.format == "k3" else _K3_ONLY_IDS
    ids = ids if isinstance(ids, (list, tuple)) else list(ids)  # read twice below
    if foreign.isdisjoint(ids):  # the usual answer, without a Python step per id
        return None
    found = next(i for i in ids if i in foreign)
    other = "kimi-k2.5" if profile.format == "k3" else "kimi-k3"
    what = "a K2.x marker" if profile.format == "k3" else "K3's <|sep|>"
    return Flag(
        FlagCode.PROFILE_MISMATCH,
        f"{field} hold id {found} ({what}), so the model wrote the {other} format, but the ids were rebuilt as "
        f"{profile.name}; use --profile {other}",
        field,
    )


def suggested_profile(flag: Flag) -> str | None:
    """The profile a :data:`~kimi_recon.flags.FlagCode.PROFILE_MISMATCH` flag says to use."""
    if flag.code != FlagCode.PROFILE_MISMATCH:
        return None
    found = _SUGGESTION.search(flag.message)
    return found.group(1) if found else None
