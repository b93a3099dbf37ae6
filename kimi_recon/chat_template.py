"""Render chat templates the way Hugging Face transformers does, without needing transformers."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from importlib import resources
from typing import Any, NoReturn

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import InvalidInputError, preview


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False) -> str:
    # transformers overrides jinja's tojson: no HTML escaping, non-ASCII kept, options passed through.
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


#: Names under which messages carry reasoning; transformers copies the first one set to ``reasoning_content``.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def alias_reasoning_fields(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` whose reasoning is also under ``reasoning_content``, as transformers 5 renders it."""
    reasoning = next((message[k] for k in REASONING_FIELDS if message.get(k) is not None), None)
    if reasoning is None:
        return dict(message)
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


def _configured(env: jinja2.Environment) -> jinja2.Environment:
    """``env`` with transformers' chat-template filters and globals."""
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    return env


@functools.lru_cache(maxsize=2)
def _environment(sandboxed: bool) -> jinja2.Environment:
    """transformers' chat-template environment (trim and lstrip blocks, loop controls, its filters and
    globals); ``sandboxed=False`` is the same without the sandbox's checks on every attribute and call."""
    options: dict[str, Any] = {"trim_blocks": True, "lstrip_blocks": True, "extensions": [loopcontrols]}
    return _configured(ImmutableSandboxedEnvironment(**options) if sandboxed else jinja2.Environment(**options))


@functools.lru_cache(maxsize=1)
def bundled_k25_template() -> str:
    """The text of the K2.5 chat template this package ships (the bundled tokenizer's)."""
    return (resources.files("kimi_recon") / "data" / "k2.5" / "chat_template.jinja").read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def bundled_template_sources() -> frozenset[str]:
    """The texts of the chat templates this package ships (its own data, not a caller's)."""
    templates = resources.files("kimi_recon") / "data" / "templates"
    texts = {f.read_text(encoding="utf-8") for f in templates.iterdir() if f.name.endswith(".jinja")}
    return frozenset({*texts, bundled_k25_template()})


@functools.lru_cache(maxsize=16)
def compile_template(source: str, *, sandboxed: bool | None = None) -> jinja2.Template:
    """A compiled template in an environment set up like transformers' chat-template renderer.

    ``sandboxed`` None: a template this package ships (:func:`bundled_template_sources`, trusted code
    whose renders tests/test_chat_template_trusted.py checks equal the sandbox's) runs without the
    sandbox, which costs ~half of a prompt's render; any other text runs sandboxed, as transformers
    runs it."""
    if sandboxed is None:
        sandboxed = source not in bundled_template_sources()
    return _environment(sandboxed).from_string(source)


def render_chat_template(
    source: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    **kwargs: Any,
) -> str:
    """Render ``messages`` with the chat template ``source`` (extra keyword arguments reach the template)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInputError(f"must be a list of message objects, got {type(messages).__name__}", field="messages")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise InvalidInputError("must be an object with a string 'role'", field=f"messages[{i}]")
        content = message.get("content")
        if not (content is None or isinstance(content, str) or (isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)))):
            raise InvalidInputError(
                f"must be a string, a list of content parts or null, got {type(content).__name__}", field=f"messages[{i}].content"
            )
        if isinstance(content, Sequence) and not isinstance(content, str):
            for j, part in enumerate(content):
                if not isinstance(part, Mapping):  # a template reads part['type']: a number would render as nothing
                    raise InvalidInputError(f"must be a content part object, got {type(part).__name__}", field=f"messages[{i}].content[{j}]")
    try:
        return compile_template(source).render(
            messages=[alias_reasoning_fields(m) for m in messages], tools=tools, add_generation_prompt=add_generation_prompt, **kwargs
        )
    except jinja2.exceptions.TemplateError as err:
        raise InvalidInputError(f"the chat template failed: {err}", field="messages") from None
    except RecursionError:
        raise InvalidInputError("the chat template failed: the messages are nested too deeply", field="messages") from None
    except Exception as err:  # noqa: BLE001 - the template is the caller's code, run on the caller's data
        # It indexed or iterated a value of the wrong type (a number where it expects a list, say), or
        # failed on its own (a division by zero): the official apply_chat_template fails the same way.
        raise InvalidInputError(f"the chat template failed on these messages: {preview(err, 200)}", field="messages") from None
