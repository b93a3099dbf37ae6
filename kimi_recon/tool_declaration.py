"""The Kimi-K2.5 tool declaration: the text after ``<|im_system|>tool_declare<|im_middle|>``.

Moonshot's K2.5 ``apply_chat_template`` first deep-sorts every dict in the tool list by key, then
renders the tools as a TypeScript namespace (``tool_declaration_ts.encode_tools_to_typescript_style``).
If that raises, or yields nothing (no ``"type": "function"`` tool), the chat template writes the
sorted tools as compact JSON instead (``tools | tojson(separators=(',', ':'))``, which Hugging Face
implements as ``json.dumps(..., ensure_ascii=False)``).

This module reproduces both paths. The official encoder is lenient in odd ways (unknown types are
printed verbatim, ``oneOf`` and ``#/definitions/...`` are not understood and trigger the JSON
fallback, ...); those quirks are kept on purpose because the model saw exactly that text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import InvalidInputError, preview

__all__ = ["render_tools_declaration"]

_INDENT = "  "
_FIELD_SEPARATOR = ",\n"
_HEADER = "# Tools\n\n## functions\nnamespace functions {\n"
_FOOTER = "\n}\n"

# Members of a ``"type": [...]`` list. Any other member makes the official encoder raise (KeyError).
_UNION_MEMBER_TEXT = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "{}",
    "array": "Array<any>",
}
_ARRAY_CONSTRAINT_KEYS = ("minItems", "maxItems")


class _Unrenderable(Exception):
    """The official encoder raises at this point, so the template falls back to JSON."""


# ---------------------------------------------------------------------------------------------
# Public entry point
# ---------------------------------------------------------------------------------------------


def render_tools_declaration(tools: Sequence[Mapping[str, Any]]) -> str:
    """The tool declaration the official Kimi-K2.5 chat template writes for ``tools``.

    ``tools`` is an OpenAI-style tool list (``{"type": "function", "function": {...}}``). Returns the
    TypeScript-namespace text, or the compact JSON of the key-sorted tools where the official code
    falls back to JSON. Raises :class:`~kimi_recon.errors.InvalidInputError` if ``tools`` is not a
    non-empty list, if a rendered function has no name, or if the JSON fallback cannot serialise it.
    """
    if isinstance(tools, (str, bytes, bytearray)) or not isinstance(tools, Sequence):
        raise InvalidInputError(f"must be a list of tool definitions, got {type(tools).__name__}", field="tools")
    if not tools:
        # The template writes no tool_declare message at all then, so there is no text to return.
        raise InvalidInputError("is empty; the chat template declares no tools for an empty list", field="tools")
    sorted_tools = _sorted_tools(tools)
    try:
        declaration = _typescript_declaration(sorted_tools)
    except (_Unrenderable, RecursionError):
        # The official code catches every exception here; RecursionError stands in for its
        # failure on absurdly deep schemas.
        declaration = ""
    if not declaration:
        return _compact_json(sorted_tools)
    # Checked only now: where the official code falls back to JSON, a missing name does not matter.
    _check_function_names(sorted_tools)
    return declaration


def _sorted_tools(tools: Sequence[Any]) -> list[Any]:
    try:
        return [_deep_sort(tool) for tool in tools]
    except RecursionError as exc:
        raise InvalidInputError("is nested too deeply or contains a cycle", field="tools") from exc


def _deep_sort(value: object) -> Any:
    """Every mapping becomes a dict in key order, recursively; list order is kept.

    Tuples are treated as lists, as JSON would; the official code only ever sees JSON-like data.
    """
    if isinstance(value, Mapping):
        try:
            items = sorted(value.items(), key=lambda item: item[0])
        except TypeError as exc:
            raise InvalidInputError(f"has dictionary keys that cannot be sorted: {exc}", field="tools") from exc
        return {key: _deep_sort(item) for key, item in items}
    if isinstance(value, (list, tuple)):
        return [_deep_sort(item) for item in value]
    return value


def _compact_json(tools: list[Any]) -> str:
    try:
        return json.dumps(tools, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"cannot be serialised to JSON: {exc}", field="tools") from exc


def _check_function_names(tools: list[Any]) -> None:
    for index, tool in enumerate(tools):
        function = _declared_function(tool)
        if function is None:
            continue
        name = function.get("name")
        if not isinstance(name, str) or not name:
            # The official code would print ``type function = ...`` (or the value's str());
            # a nameless tool is not a usable declaration, so it is refused instead.
            raise InvalidInputError(f"must be a non-empty string, got {preview(name)}", field=f"tools[{index}].function.name")


def _declared_function(tool: object) -> dict[str, Any] | None:
    """The function dict the official encoder renders for ``tool``, or None if it skips the tool."""
    if not isinstance(tool, dict):
        raise _Unrenderable("a tool is not an object")
    if tool.get("type") != "function":
        return None  # other tool types (e.g. "_plugin") are skipped, not declared
    function = tool.get("function", {})
    if not function:
        return None
    if not isinstance(function, dict):
        raise _Unrenderable("tool.function is not an object")
    return function


# ---------------------------------------------------------------------------------------------
# Schema tree
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Node:
    # Kept raw: the official code fails on a non-string description only if it actually prints it.
    description: object
    # (keyword, value) pairs in key order, printed as ``// key: value`` above a field.
    constraints: tuple[tuple[str, object], ...]


@dataclass(frozen=True)
class _Scalar(_Node):
    # Usually a string, but printed verbatim whatever it is ("uuid", or even null -> "None").
    type_value: object


@dataclass(frozen=True)
class _Enum(_Node):
    values: tuple[object, ...]


@dataclass(frozen=True)
class _AnyOf(_Node):
    members: tuple[_Node, ...]


@dataclass(frozen=True)
class _Union(_Node):
    member_texts: tuple[str, ...]


@dataclass(frozen=True)
class _Ref(_Node):
    name: str


@dataclass(frozen=True)
class _Array(_Node):
    item: _Node


@dataclass(frozen=True)
class _Property:
    name: object
    node: _Node
    optional: bool
    default: object


@dataclass(frozen=True)
class _Object(_Node):
    properties: tuple[_Property, ...]
    # None (absent), True, False, a parsed _Node, or any other raw value, which only fails when printed.
    additional: object


_ANY = _Scalar(description="", constraints=(), type_value="any")


@dataclass
class _Registry:
    """The ``$defs`` seen so far while parsing one function's parameters."""

    definitions: dict[Any, Any] = field(default_factory=dict)
    has_self_ref: bool = False

    def register(self, defs: object) -> None:
        if not defs:
            return
        if not isinstance(defs, dict):
            raise _Unrenderable("$defs is not an object")
        # A later $defs with the same name replaces the schema but keeps the first position.
        self.definitions.update(defs)

    def resolve(self, ref: object) -> str:
        """The name a ``$ref`` is printed as. Only ``#`` and ``#/$defs/NAME`` are understood."""
        if ref == "#":
            self.has_self_ref = True
            return "parameters"
        if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
            raise _Unrenderable(f"unsupported $ref {preview(ref)}")
        name = ref.split("/")[-1]
        # A $defs must be registered before the $ref is met, in key order; there is no second pass.
        if name not in self.definitions:
            raise _Unrenderable(f"$ref {preview(ref)} not found")
        return name


# ---------------------------------------------------------------------------------------------
# Parsing (mirrors the official precedence: $ref, anyOf, enum, type, {})
# ---------------------------------------------------------------------------------------------


def _parse(schema: object, registry: _Registry) -> _Node:
    if isinstance(schema, bool):
        return _Scalar(description="", constraints=(), type_value="any" if schema else "null")
    if not isinstance(schema, dict):
        raise _Unrenderable(f"not a JSON schema: {preview(schema)}")
    if "$ref" in schema:
        return _Ref(description=schema.get("description", ""), constraints=(), name=registry.resolve(schema["$ref"]))
    if "anyOf" in schema:
        members = tuple(_parse(member, registry) for member in _members(schema["anyOf"]))
        return _AnyOf(description=schema.get("description", ""), constraints=(), members=members)
    if "enum" in schema:
        return _parse_enum(schema)
    if "type" in schema:
        declared = schema["type"]
        if isinstance(declared, list):
            return _parse_union(schema, declared)
        if declared == "object":
            return _parse_object(schema, registry)
        if declared == "array":
            return _parse_array(schema, registry)
        return _parse_scalar(schema, declared)
    if not schema:
        return _ANY
    # e.g. a bare {"description": ...} or {"oneOf": [...]}: the official encoder gives up.
    raise _Unrenderable(f"schema without type: {preview(schema)}")


def _members(value: object) -> list[Any]:
    """``value`` iterated the way Python iterates it (a string yields characters, a dict its keys)."""
    if isinstance(value, (list, str, dict)):
        return list(value)
    raise _Unrenderable(f"not iterable: {preview(value)}")


def _parse_scalar(schema: dict[str, Any], declared: object) -> _Scalar:
    if declared == "string":
        keys: tuple[str, ...] = ("maxLength", "minLength", "pattern")
    elif declared in ("number", "integer"):
        keys = ("maximum", "minimum")
    else:
        keys = ()
    return _Scalar(description=schema.get("description", ""), constraints=_constraints(schema, keys), type_value=declared)


def _constraints(schema: dict[str, Any], keys: tuple[str, ...]) -> tuple[tuple[str, object], ...]:
    return tuple(sorted((key, value) for key, value in schema.items() if key in keys))


def _parse_union(schema: dict[str, Any], declared: list[Any]) -> _Union:
    texts = []
    for member in declared:
        if not isinstance(member, str) or member not in _UNION_MEMBER_TEXT:
            raise _Unrenderable(f"unsupported type {preview(member)} in a type list")
        texts.append(_UNION_MEMBER_TEXT[member])
    return _Union(description=schema.get("description", ""), constraints=(), member_texts=tuple(texts))


def _parse_enum(schema: dict[str, Any]) -> _Enum:
    values = _members(schema["enum"])
    if "type" in schema:
        _check_enum_values(values, _enum_value_type(schema["type"]))
    return _Enum(description=schema.get("description", ""), constraints=(), values=tuple(values))


def _enum_value_type(declared: object) -> object:
    """The single type an enum's values must have; a list may only add ``"null"`` to one type."""
    if not isinstance(declared, list):
        return declared
    if len(declared) == 1:
        return declared[0]
    if len(declared) == 2 and "null" in declared:
        return declared[0] if declared[0] != "null" else declared[1]
    raise _Unrenderable(f"enum type {preview(declared)} is not supported")


def _check_enum_values(values: list[Any], value_type: object) -> None:
    # bool passes as number/integer because it is an int in Python, as in the official check.
    accepted: dict[str, type | tuple[type, ...]] = {
        "string": str,
        "number": (int, float),
        "integer": int,
        "boolean": bool,
    }
    if not isinstance(value_type, str) or value_type not in accepted:
        return
    for value in values:
        if value is not None and not isinstance(value, accepted[value_type]):
            raise _Unrenderable(f"enum value {preview(value)} is not a {value_type}")


def _parse_array(schema: dict[str, Any], registry: _Registry) -> _Array:
    items = schema.get("items")
    # Falsy items ({} , [], null, false) mean "any", matching the official truthiness test.
    item = _parse(items, registry) if items else _ANY
    return _Array(
        description=schema.get("description", ""),
        constraints=_constraints(schema, _ARRAY_CONSTRAINT_KEYS),
        item=item,
    )


def _parse_object(schema: dict[str, Any], registry: _Registry) -> _Object:
    description = schema.get("description", "")
    if "$defs" in schema:
        registry.register(schema["$defs"])
    additional = schema.get("additionalProperties")
    if isinstance(additional, dict):
        additional = _parse(additional, registry)
    if "properties" not in schema:
        return _Object(description=description, constraints=(), properties=(), additional=additional)
    properties = schema["properties"]
    if not isinstance(properties, dict):
        raise _Unrenderable("properties is not an object")
    required = _required_names(schema.get("required", []))
    parsed = tuple(
        _Property(
            name=name,
            node=_parse(prop, registry),
            optional=name not in required,
            default=prop.get("default") if isinstance(prop, dict) else None,
        )
        for name, prop in properties.items()
    )
    return _Object(description=description, constraints=(), properties=parsed, additional=additional)


def _required_names(required: object) -> set[Any]:
    try:
        return set(_members(required))
    except TypeError as exc:  # unhashable entries
        raise _Unrenderable(f"bad required list: {preview(required)}") from exc


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------


def _typescript_declaration(tools: list[Any]) -> str:
    blocks = []
    for tool in tools:
        function = _declared_function(tool)
        if function is not None:
            blocks.append(_function_text(function))
    if not blocks:
        return ""
    return _HEADER + "\n".join(blocks) + _FOOTER


def _function_text(function: dict[str, Any]) -> str:
    registry = _Registry()
    parameters = function.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise _Unrenderable("parameters is not an object")
    root = _parse_object(parameters, registry)

    interfaces = []
    # Decided before the $defs are parsed: a "#" reference inside a $defs does not make the
    # parameters an interface.
    self_referencing = registry.has_self_ref
    if self_referencing:
        # Unlike a nested object, this keeps key order (no required-first) and drops
        # additionalProperties, as the official code does.
        body = _FIELD_SEPARATOR.join(_property_text(prop, _INDENT) for prop in root.properties)
        interfaces.append("interface parameters {" + (f"\n{body}\n" if body else "") + "}")
    for name, schema in list(registry.definitions.items()):
        interfaces.append(_interface_text(name, schema, registry))

    argument = "parameters" if self_referencing else _type_text(root, "")
    type_def = f"type {function.get('name', 'function')} = (_: {argument}) => any;"
    description = function.get("description")
    description_text = _comment_block(description, "") if description else ""
    return "\n".join(part for part in ("\n".join(interfaces), description_text, type_def) if part)


def _interface_text(name: object, schema: object, registry: _Registry) -> str:
    body = _type_text(_parse(schema, registry), "")
    if not isinstance(schema, dict):
        raise _Unrenderable(f"$defs entry {preview(name)} is not an object")
    description = schema.get("description", "")
    prefix = _comment_block(description, "") + "\n" if description else ""
    return f"{prefix}interface {name} {body}"


def _comment_block(text: object, indent: str) -> str:
    if not isinstance(text, str):
        raise _Unrenderable(f"description is not a string: {preview(text)}")
    # Blank lines stay fully empty (no indent, no "//").
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n"))


def _docstring(node: _Node, indent: str) -> str:
    lines = []
    if node.description:
        lines.append(_comment_block(node.description, indent))
    if node.constraints:
        # Values print with Python's str(): True, 1.5, a pattern without quotes.
        lines.append(f"{indent}// " + ", ".join(f"{key}: {value}" for key, value in node.constraints))
    return "".join(line + "\n" for line in lines)


def _property_text(prop: _Property, indent: str) -> str:
    comments = _docstring(prop.node, indent)
    if prop.default is not None:
        comments += f"{indent}// Default: {_default_text(prop.default)}\n"
    marker = "?" if prop.optional else ""
    return f"{comments}{indent}{prop.name}{marker}: {_type_text(prop.node, indent)}"


def _default_text(value: object) -> str:
    # Numbers and booleans use Python repr (True, 0.5); everything else JSON.
    if isinstance(value, (int, float, bool)):
        return repr(value)
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise _Unrenderable(f"default not serialisable: {exc}") from exc


def _type_text(node: _Node, indent: str) -> str:
    if isinstance(node, _Scalar):
        return "number" if node.type_value == "integer" else f"{node.type_value}"
    if isinstance(node, _Enum):
        return " | ".join(f'"{value}"' if isinstance(value, str) else str(value) for value in node.values)
    if isinstance(node, _AnyOf):
        return " | ".join(_joinable_type_text(member, indent) for member in node.members)
    if isinstance(node, _Union):
        return " | ".join(node.member_texts)
    if isinstance(node, _Ref):
        return node.name
    if isinstance(node, _Array):
        return _array_text(node, indent)
    if isinstance(node, _Object):
        return _object_text(node, indent)
    raise AssertionError(f"unknown schema node {node!r}")


def _joinable_type_text(node: _Node, indent: str) -> str:
    """Type text where the official code concatenates instead of formatting.

    There a scalar whose ``type`` is not a string (e.g. 5) raises TypeError, so fall back.
    """
    if isinstance(node, _Scalar) and not isinstance(node.type_value, str):
        raise _Unrenderable(f"type {preview(node.type_value)} is not a string")
    return _type_text(node, indent)


def _array_text(node: _Array, indent: str) -> str:
    inner = indent + _INDENT
    item_docstring = _docstring(node.item, inner)
    if item_docstring:
        return f"Array<\n{item_docstring}{inner}{_joinable_type_text(node.item, inner)}\n{indent}>"
    # Without comments the item keeps the array's own indent.
    return f"Array<{_type_text(node.item, indent)}>"


def _object_text(node: _Object, indent: str) -> str:
    inner = indent + _INDENT
    # Required fields first, then optional ones, each group by name; deep sort already put the
    # keys in name order, so a stable partition is enough.
    ordered = [prop for prop in node.properties if not prop.optional]
    ordered += [prop for prop in node.properties if prop.optional]
    fields = [_property_text(prop, inner) for prop in ordered]
    if node.additional is not None:
        fields.append(f"{inner}[k: string]: {_additional_text(node.additional, inner)}")
    if not fields:
        return "{}"
    return "{\n" + _FIELD_SEPARATOR.join(fields) + f"\n{indent}}}"


def _additional_text(additional: object, indent: str) -> str:
    if additional is True:
        return "any"
    if additional is False:
        return "never"
    if isinstance(additional, _Node):
        return _type_text(additional, indent)
    raise _Unrenderable(f"unknown additionalProperties {preview(additional)}")
