"""Chat-format profiles: where generation starts, which special-token names, and how text becomes ids.

Everything that differs between the Kimi chat formats is data here: the K2.x formats (one encode of the
rendered text is exact) and K3 (XTML tags, encoded segment by segment: one encode is wrong there). The
code that differs is reached by the profile's data, from the modules above this one: its ``format`` picks
the renderers (the dispatch in :mod:`kimi_recon._render.formats`), its ``encoding`` the encoder
(:func:`kimi_recon.segments.encode_segments`), and its ``special_tokens`` names the table
(:func:`special_tokens_for`; the profile's token ids are read from it) and the bundled tokenizer
(``tokenizer_for_profile``). A profile imports no renderer: it is data at the bottom.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from ._base.arguments import bool_argument, instance_argument
from .errors import InvalidInputError, preview
from .special_tokens import registry_named

if TYPE_CHECKING:
    from .special_tokens import SpecialTokenRegistry

#: How a profile handles thinking: the generation prompt opens ``<think>`` (K2.5, K2.6), the model
#: writes ``<think>`` itself (K2-Thinking), or there is no thinking at all (K2-Instruct).
ThinkingStyle = Literal["prompt_opens", "model_opens", "none"]

#: How rendered text becomes ids. ``one_encode``: the official tokenizer encodes the rendered text once
#: with special tokens allowed (K2.x). ``per_segment``: the official tokenizer encodes every rendered
#: segment on its own, control markers as special ids and every text piece as ordinary text (K3).
EncodingStyle = Literal["one_encode", "per_segment"]

#: The rendering family: ``k2`` (``<|im_…|>`` headers, ``<think>``, tool-call section markers) or ``k3`` (XTML).
ChatFormat = Literal["k2", "k3"]


@dataclass(frozen=True)
class ChatProfile:
    """One Kimi chat format.

    ``template`` names the chat template the profile renders prompts with: ``None`` means the
    tokenizer directory's own template (the bundled K2.5 one by default), anything else a template
    bundled under ``kimi_recon/data/templates``.

    ``stop_token_id`` ends a finished turn (the id of ``stop_token``: ``<|im_end|>`` in K2.x); ``eos_token_id``
    is the ``[EOS]`` some servers count after it (None when the turn stops on ``[EOS]`` itself);
    ``think_end_token_id`` closes the reasoning (``</think>``), None when the table has no such token. They
    are read from the special-token table the profile names (``special_tokens``), so they cannot disagree
    with the texts; the usage check (:mod:`kimi_recon.usage_check`) reads them.
    """

    name: str
    thinking_style: ThinkingStyle
    template: str | None
    description: str
    #: the rendering family and how its rendered segments become ids
    format: ChatFormat = "k2"
    encoding: EncodingStyle = "one_encode"
    #: the special-token table's name (:attr:`ChatProfile.special_token_table`, :func:`special_tokens_for`)
    special_tokens: str = "kimi-k2.5"
    #: the token a finished turn ends with, and what some deployments are reported to end with instead
    stop_token: str = "<|im_end|>"
    stop_alternatives: tuple[str, ...] = ("[EOS]",)
    #: whether the model writes a tool-call id (K2.x ``functions.NAME:IDX``; K3 writes none, so a
    #: server-issued id is irrelevant there)
    writes_tool_call_ids: bool = True
    #: the variables its chat template reads besides messages and tools: ``tools_ts_str`` (the tools declared
    #: in TypeScript, :mod:`kimi_recon.tool_declaration`) and ``thinking`` (both K2.5's)
    template_reads: frozenset[str] = frozenset()
    #: the generation prompt: ``prompt_head`` then ``thinking_on`` / ``thinking_off``
    prompt_head: str = "<|im_assistant|>assistant<|im_middle|>"
    thinking_on: str = ""
    thinking_off: str = ""
    #: template variables the profile's model is run with unless the caller sets them (a tuple of pairs, so the
    #: profile stays hashable): K2.7-Code keeps every turn's reasoning, ``preserve_thinking`` true
    template_defaults: tuple[tuple[str, Any], ...] = ()
    #: the model has no non-thinking mode (K2.7-Code): ``thinking=False`` is refused, not rendered
    thinking_required: bool = False
    #: the bundled template that renders this format keeping every earlier turn's reasoning (``preserve_thinking``),
    #: for a request that asked for it (Moonshot's ``thinking: {"keep": "all"}``) when ``template`` cannot
    kept_reasoning_template: str | None = None

    def generation_prompt(self, thinking: bool = True) -> str:
        """The text the chat template appends with ``add_generation_prompt=True``."""
        return self.prompt_head + (self.thinking_on if bool_argument(thinking, "thinking") else self.thinking_off)

    def template_source(self) -> str | None:
        """The bundled template text, or None when the tokenizer's own template is meant."""
        return None if self.template is None else _bundled_template(self.template)

    def kept_reasoning_template_source(self) -> str | None:
        """The text of :attr:`kept_reasoning_template` (None when the profile has none)."""
        return None if self.kept_reasoning_template is None else _bundled_template(self.kept_reasoning_template)

    @property
    def fields_always_ordinary(self) -> bool:
        """True when the official encode reads special-token text inside a field as ordinary text whatever
        the caller asks (``per_segment``: every text piece is encoded on its own, without special tokens)."""
        return self.encoding == "per_segment"

    @functools.cached_property
    def stop_token_id(self) -> int:
        """The id of ``stop_token`` in the profile's special-token table."""
        return registry_named(self.special_tokens).id(self.stop_token)

    @functools.cached_property
    def eos_token_id(self) -> int | None:
        """The id of ``[EOS]``, which some servers count after the stop token; None when the turn stops on it."""
        eos = registry_named(self.special_tokens).entry("EOS")
        return None if eos.text == self.stop_token else eos.id

    @functools.cached_property
    def think_end_token_id(self) -> int | None:
        """The id of ``</think>``; None when the table has none (K3 closes thinking with ``<|close|>think<|sep|>``,
        three tokens)."""
        entry = registry_named(self.special_tokens).get("</think>")
        return None if entry is None else entry.id

    @property
    def special_token_table(self) -> SpecialTokenRegistry:
        """The special-token table of this profile (K3's names for ``kimi-k3``, K2.5's for the K2.x profiles)."""
        return registry_named(self.special_tokens)


@functools.cache
def _bundled_template(name: str) -> str:
    return (resources.files("kimi_recon") / "data" / "templates" / name).read_text(encoding="utf-8")


PROFILES: dict[str, ChatProfile] = {
    p.name: p
    for p in (
        ChatProfile(
            "kimi-k2.5",
            "prompt_opens",
            None,
            "Kimi-K2.5 and K2.6: the prompt ends with <think> (or <think></think>)",
            thinking_on="<think>",
            thinking_off="<think></think>",
            template_reads=frozenset({"tools_ts_str", "thinking"}),
            # K2.6's thinking.keep "all": the K2.7-Code template, checked on the official dev set
            kept_reasoning_template="kimi-k2.5-preserve-thinking.jinja",
        ),
        ChatProfile(
            "kimi-k2.7-code",
            "prompt_opens",
            "kimi-k2.5-preserve-thinking.jinja",
            "Kimi-K2.7-Code: the K2.5/K2.6 format, always thinking, reasoning of earlier turns kept (preserve_thinking)",
            thinking_on="<think>",
            thinking_off="<think></think>",
            template_reads=frozenset({"tools_ts_str", "thinking", "preserve_thinking"}),
            template_defaults=(("preserve_thinking", True),),
            thinking_required=True,
        ),
        ChatProfile("kimi-k2-thinking", "model_opens", "kimi-k2-thinking.jinja", "Kimi-K2-Thinking: the model writes <think>"),
        ChatProfile("kimi-k2-instruct", "none", "kimi-k2-instruct.jinja", "Kimi-K2-Instruct: no thinking"),
        ChatProfile(
            "kimi-k3",
            "prompt_opens",
            None,
            "Kimi-K3: XTML tags on the same vocabulary, each rendered segment encoded on its own",
            format="k3",
            encoding="per_segment",
            special_tokens="kimi-k3",
            stop_token="<|end_of_msg|>",
            stop_alternatives=("[EOS]", "<|close|>tools<|sep|>"),
            writes_tool_call_ids=False,
            prompt_head='<|open|>message role="assistant"<|sep|>',
            thinking_on="<|open|>think<|sep|>",
            thinking_off="<|open|>response<|sep|>",
        ),
    )
}
_ALIASES = {
    "kimi-k2.6": "kimi-k2.5",
    "k2.5": "kimi-k2.5",
    "k2.6": "kimi-k2.5",
    "k2-thinking": "kimi-k2-thinking",
    "k2-instruct": "kimi-k2-instruct",
    "k3": "kimi-k3",
    "moonshotai/kimi-k3": "kimi-k3",
    "moonshotai/kimi-k2.5": "kimi-k2.5",
    "moonshotai/kimi-k2.6": "kimi-k2.5",
    "moonshotai/kimi-k2-thinking": "kimi-k2-thinking",
    # OpenRouter's slugs of Kimi-K2-Instruct (the July release) and its September update (the same turn format)
    "kimi-k2": "kimi-k2-instruct",
    "moonshotai/kimi-k2": "kimi-k2-instruct",
    "kimi-k2-0711": "kimi-k2-instruct",
    "kimi-k2-0905": "kimi-k2-instruct",
    "kimi-k2-instruct-0905": "kimi-k2-instruct",
    "k2.7-code": "kimi-k2.7-code",
    "moonshotai/kimi-k2.7-code": "kimi-k2.7-code",
    # the same model served faster (Moonshot's platform docs)
    "kimi-k2.7-code-highspeed": "kimi-k2.7-code",
}

#: The profile used when neither the caller nor the data names one.
DEFAULT_PROFILE = "kimi-k2.5"


def get_profile(profile: str | ChatProfile) -> ChatProfile:
    """A profile by name (``kimi-k2.5``, ``kimi-k2.6``, ``kimi-k2.7-code``, ``kimi-k2-thinking``, ``kimi-k2-instruct``,
    ``kimi-k3``; an OpenRouter model id such as ``moonshotai/kimi-k3`` works too) or itself."""
    if isinstance(profile, ChatProfile):
        return profile
    if not isinstance(profile, str):
        raise InvalidInputError(f"must be a profile name, got {type(profile).__name__}", field="profile")
    name = _ALIASES.get(profile.lower(), profile.lower())
    try:
        return PROFILES[name]
    except KeyError:
        known = sorted(PROFILES) + sorted(_ALIASES)
        close = difflib.get_close_matches(profile.lower(), known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise InvalidInputError(f"unknown profile {preview(profile)}{hint}; known: {', '.join(known)}", field="profile") from None


def special_tokens_for(profile: str | ChatProfile) -> SpecialTokenRegistry:
    """The special-token table of a chat profile (a name, a model id or the profile): ``kimi-k3`` gets K3's
    names, the K2.x profiles K2.5's. (It was ``SpecialTokenRegistry.for_profile``, which had to reach up to the
    profiles through a slot the package root filled.)

    >>> special_tokens_for("moonshotai/kimi-k3").name, special_tokens_for("kimi-k2-thinking").name
    ('kimi-k3', 'kimi-k2.5')
    """
    return get_profile(profile).special_token_table


def profile_or_model(profile: str | ChatProfile | None, model: object = None) -> ChatProfile:
    """``profile`` when one is given, else the profile the ``model`` id names (``moonshotai/kimi-k3``), else
    :data:`DEFAULT_PROFILE`. What every ``profile=None`` of the API means.

    With no profile given, an id of another maker's or kind's model (``openai/gpt-4o``, ``moonshot-v1-8k``: see
    :func:`other_model`) raises :class:`~kimi_recon.errors.InvalidInputError` naming ``model``; an id that names
    nothing known (a local server's own name) gives the default, which the callers flag ``profile_assumed``."""
    if profile is not None:
        return get_profile(profile)
    if not isinstance(model, str):
        return PROFILES[DEFAULT_PROFILE]
    other = other_model(model)
    if other is not None:
        # Rebuilding another maker's answer as Kimi ids is never right; a flag would still let the row through a
        # loss filter's "risk" band, so with nothing named the call is refused (a named profile is the caller's word).
        raise InvalidInputError(
            f"{preview(model)} names {other}, not a Kimi model, so its answers are not Kimi token ids; if a server "
            f"serves a Kimi model under that name, name the format (profile=, --profile {DEFAULT_PROFILE})",
            field="model",
        )
    return PROFILES[profile_for_model(model)]


def renders_turns_alike(a: ChatProfile, b: ChatProfile) -> bool:
    """True when the two profiles turn an assistant turn into the same ids (K2.5 and K2.7-Code do: they differ
    only in how the prompt is rendered)."""
    def key(p: ChatProfile) -> tuple[object, ...]:
        return (p.format, p.encoding, p.thinking_style, p.special_tokens, p.stop_token, p.writes_tool_call_ids,
                p.prompt_head, p.thinking_on, p.thinking_off)

    return key(a) == key(b)


#: The model families, by the id's last path segment once its variant tags are gone (:data:`_VARIANT_TAGS`):
#: how Moonshot's API, OpenRouter, Kimi Code, Fireworks (``k2p5``) and self-hosted servers (Hub repository ids,
#: quantised builds) name them (tests/test_profile_from_model.py). The first pattern that matches wins.
_MODEL_FAMILIES: tuple[tuple[re.Pattern[str], str], ...] = (
    # K3 (``-cot`` and ``-thinking`` are names of the same model thinking, its only mode by default)
    (re.compile(r"(?:kimi-)?k3(?:-(?:thinking|cot|instruct|chat))?"), "kimi-k3"),
    (re.compile(r"kimi-for-coding|(?:kimi-)?k2[.p]7(?:-code)?"), "kimi-k2.7-code"),
    (re.compile(r"(?:kimi-)?k2-thinking"), "kimi-k2-thinking"),
    # K2.5 and K2.6 think or not by a request setting, in one format: ``-thinking`` names the mode, not a model
    (re.compile(r"(?:kimi-)?k2[.p][56](?:-(?:thinking|instruct|chat))?"), "kimi-k2.5"),
    (re.compile(r"(?:kimi-)?k2(?:-instruct|-chat)?"), "kimi-k2-instruct"),
)
#: What a model id may carry after its family: a date (``-20260115``, ``-0905``, ``-2026-01-15``), a serving
#: variant (``-preview``, ``-turbo``, ``-highspeed``, ``-latest``, ``-free``), a context size (``-256k``,
#: ``-1m``), a version (``-v2``), an effort (``-high``) or a quantised build's tag (``-fp8``, ``-int4``,
#: ``-awq``, ``-gguf``, ``-nvfp4``, ``-w4a16``, ``-mlx``, llama.cpp's ``-Q4_K_M``): none changes the chat format.
_VARIANT_TAGS = re.compile(
    r"(?:[-_](?:\d{4}-\d{2}-\d{2}|\d{4}|\d{6}|\d{8}|preview|turbo|highspeed|fast|latest|free|exp|experimental|\d+[km]"
    r"|v\d+(?:\.\d+)*|low|medium|high|max|fp8|fp4|fp16|bf16|int4|int8|nvfp4|mxfp4|awq|gptq|gguf|mlx|w\d+a\d+"
    r"|quantized(?:\.w\d+a\d+)?|\d+bit|[a-z]*quant|ud|i?q\d+|k|[sml]|xl|xxs|xs|gguf))+$"
)
#: Ids that name a model of another kind or maker (the first match names it): a Kimi rebuild of their answers is
#: not the ids that model generated. Moonshot's own older models use another tokenizer or no chat format.
_OTHER_MODELS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"moonshot-v1.*|kimi-k1(?:\.5)?.*|kimi-thinking-preview.*|kimi-vl.*|kimi-dev.*|kimi-audio.*|moonlight.*"),
     "an older or other Moonshot model (not the K2/K3 chat formats)"),
    (re.compile(r"(?:kimi-)?k\d.*-base(?:-.*)?"), "a Kimi base model (no chat format)"),
    (re.compile(r"(?:chat)?gpt-.*|o[1-9](?:-.*)?|text-davinci.*|davinci.*|codex.*"), "an OpenAI model"),
    (re.compile(r"claude.*"), "an Anthropic model"),
    (re.compile(r"gemini.*|gemma.*|palm.*"), "a Google model"),
    (re.compile(r"(?:meta-)?llama.*|codellama.*"), "a Meta Llama model"),
    (re.compile(r"qwen.*|qwq.*"), "a Qwen model"),
    (re.compile(r"deepseek.*"), "a DeepSeek model"),
    (re.compile(r"mistral.*|mixtral.*|codestral.*|ministral.*|magistral.*|devstral.*|pixtral.*"), "a Mistral model"),
    (re.compile(r"(?:chat)?glm.*"), "a Zhipu GLM model"),
    (re.compile(r"grok.*"), "an xAI Grok model"),
    (re.compile(r"minimax.*|abab.*"), "a MiniMax model"),
    (re.compile(r"phi-.*|command.*|yi-.*|ernie.*|hunyuan.*|doubao.*|baichuan.*|internlm.*|olmo.*|granite.*|nemotron.*|jamba.*|sonar.*"),
     "another maker's model"),
)
#: The makers' prefixes of OpenRouter-style ids (``openai/…``): an id under one of them that names no Kimi family is theirs.
_OTHER_MAKERS = frozenset(
    {"openai", "anthropic", "google", "meta-llama", "meta", "qwen", "deepseek", "deepseek-ai", "mistralai", "mistral",
     "x-ai", "xai", "z-ai", "zai-org", "thudm", "minimax", "minimaxai", "cohere", "microsoft", "nvidia", "ai21",
     "perplexity", "01-ai", "baidu", "tencent", "bytedance", "bytedance-seed", "amazon", "ibm-granite", "allenai"}
)


def profile_for_model(model: str, default: str = DEFAULT_PROFILE) -> str:
    """The profile of a model id as users have it (``moonshotai/kimi-k3``, ``moonshotai/kimi-k2.5:nitro``,
    ``moonshotai/kimi-k3-20260115``, ``Kimi-K3-Preview``, ``k3[1m]``, ``kimi-for-coding``), or ``default`` when the
    id names no Kimi model kimi-recon knows (``openai/gpt-4o``).

    >>> profile_for_model("moonshotai/kimi-k3-20260115"), profile_for_model("kimi-for-coding-highspeed")
    ('kimi-k3', 'kimi-k2.7-code')
    >>> profile_for_model("openai/gpt-4o", default="")
    ''
    """
    instance_argument(model, "model", str, "a model id string")
    instance_argument(default, "default", str, "a profile name")
    return _family_of_model(model) or default


def other_model(model: object) -> str | None:
    """What ``model`` names when it is a model of another kind or maker (``openai/gpt-4o``: ``"an OpenAI model"``),
    else None (a Kimi model, or an id that names nothing kimi-recon knows, such as a local server's own name).

    >>> other_model("openai/gpt-4o"), other_model("moonshotai/kimi-k3"), other_model("my-server")
    ('an OpenAI model', None, None)
    """
    if not isinstance(model, str):
        return None
    return _other_of_model(model) or None


@functools.lru_cache(maxsize=1024)
def _other_of_model(model: str) -> str:
    if _family_of_model(model):
        return ""
    name = _bare_name(model)
    last = name.rsplit("/", 1)[-1]
    for pattern, what in _OTHER_MODELS:
        if pattern.fullmatch(last):
            return what
    segments = name.split("/")
    if len(segments) > 1 and segments[-2] in _OTHER_MAKERS:
        return "another maker's model"
    return ""


def _bare_name(model: str) -> str:
    """``model`` lower-cased, without a routing suffix (``:nitro``, ``@2026-01-15``) or Kimi Code's context tag
    (``k3[1m]``), spaces and underscores as hyphens."""
    name = re.split(r"[:@]", model.strip().lower(), maxsplit=1)[0]
    if name.endswith("]") and "[" in name:  # Kimi Code's context tag: k3[1m]
        name = name[: name.rindex("[")]
    name = re.sub(r"\.(?:gguf|safetensors|bin)$", "", name.strip())  # llama.cpp names the model by its file
    return re.sub(r"[\s_]+", "-", name)


@functools.lru_cache(maxsize=1024)
def _family_of_model(model: str) -> str:
    """:func:`profile_for_model` of a checked id, ``""`` for none (cached: a run reads one id over and over)."""
    name = _bare_name(model)
    last = name.rsplit("/", 1)[-1]
    for candidate in (name, last):
        found = _ALIASES.get(candidate, candidate)
        if found in PROFILES:
            return found
    bare = _VARIANT_TAGS.sub("", last)
    for pattern, profile in _MODEL_FAMILIES:
        if pattern.fullmatch(bare):
            return profile
    return ""
