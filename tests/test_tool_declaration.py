"""Tests for the Kimi-K2.5 tool declaration (TypeScript namespace, with the official JSON fallback)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kimi_recon.errors import InvalidInputError, KimiReconError
from kimi_recon.tool_declaration import render_tools_declaration

DATA = Path(__file__).parent / "data" / "golden"
GOLDEN = DATA / "k25_tool_declaration_ts"
OFFICIAL_DEV = DATA / "official-k2.5-dev"
GOLDEN_NAMES = sorted(path.stem for path in (GOLDEN / "schemas").glob("*.json"))

TOOL_DECLARE = "<|im_system|>tool_declare<|im_middle|>"


def _read_text(path: Path) -> str:
    # Bytes, not read_text(): universal-newline decoding would hide a stray "\r".
    return path.read_bytes().decode("utf-8")


def _function_tool(parameters: Any, name: str = "f", description: str | None = None) -> list[dict[str, Any]]:
    function: dict[str, Any] = {"name": name, "parameters": parameters}
    if description is not None:
        function["description"] = description
    return [{"type": "function", "function": function}]


def _one_property(schema: Any) -> list[dict[str, Any]]:
    return _function_tool({"type": "object", "properties": {"x": schema}, "required": ["x"]})


def _reverse_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reverse_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reverse_keys(item) for item in value]
    return value


def _wrap(body: str) -> str:
    return "# Tools\n\n## functions\nnamespace functions {\n" + body + "\n}\n"


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# Golden data produced by the official code
# ---------------------------------------------------------------------------------------------


def test_golden_set_is_complete() -> None:
    assert len(GOLDEN_NAMES) == 13
    assert "10" not in {name[:2] for name in GOLDEN_NAMES}


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_golden(name: str) -> None:
    tools = json.loads(_read_text(GOLDEN / "schemas" / f"{name}.json"))
    expected = _read_text(GOLDEN / "expected" / f"{name}.txt")
    assert render_tools_declaration(tools) == expected


def _official_dev_cases() -> list[tuple[Any, str]]:
    cases: dict[str, tuple[Any, str]] = {}
    for file_name in ("turns.jsonl", "turns_adversarial.jsonl"):
        path = OFFICIAL_DEV / file_name
        if not path.exists():
            continue
        for line in _read_text(path).splitlines():
            record = json.loads(line)
            if not record.get("tools"):
                continue
            prompt = record["prompt"]
            assert prompt.startswith(TOOL_DECLARE)
            declaration = prompt[len(TOOL_DECLARE) : prompt.index("<|im_end|>")]
            cases[json.dumps(record["tools"], sort_keys=True)] = (record["tools"], declaration)
    return list(cases.values())


@pytest.mark.parametrize(("tools", "expected"), _official_dev_cases())
def test_official_dev_prompts(tools: Any, expected: str) -> None:
    # The tool_declare block of whole prompts the official apply_chat_template rendered.
    assert render_tools_declaration(tools) == expected


# ---------------------------------------------------------------------------------------------
# Deep sort
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_input_key_order_does_not_matter(name: str) -> None:
    tools = json.loads(_read_text(GOLDEN / "schemas" / f"{name}.json"))
    assert render_tools_declaration(_reverse_keys(tools)) == render_tools_declaration(tools)


def test_properties_and_defs_come_out_sorted() -> None:
    tools = _function_tool(
        {
            "type": "object",
            "properties": {"zeta": {"$ref": "#/$defs/B"}, "alpha": {"$ref": "#/$defs/A"}, "mid": {"type": "string"}},
            "$defs": {"B": {"type": "object"}, "A": {"type": "object"}},
            "required": ["zeta", "alpha"],
        }
    )
    expected = _wrap(
        "interface A {}\ninterface B {}\ntype f = (_: {\n  alpha: A,\n  zeta: B,\n  mid?: string\n}) => any;"
    )
    assert render_tools_declaration(tools) == expected


def test_fallback_json_is_key_sorted_regardless_of_input_order() -> None:
    tools = [{"function": {"parameters": {"type": "object"}, "name": "f"}, "type": "_plugin"}]
    expected = '[{"function":{"name":"f","parameters":{"type":"object"}},"type":"_plugin"}]'
    assert render_tools_declaration(tools) == expected
    assert render_tools_declaration(_reverse_keys(tools)) == expected


def test_input_is_not_mutated() -> None:
    tools = _function_tool({"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "string"}}})
    snapshot = json.dumps(tools)
    render_tools_declaration(tools)
    assert json.dumps(tools) == snapshot


# ---------------------------------------------------------------------------------------------
# Behaviour of the official encoder beyond the golden pairs
# ---------------------------------------------------------------------------------------------


def test_constraints_and_defaults() -> None:
    tools = _function_tool(
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "Query", "minLength": 1, "maxLength": 200},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                "safe": {"type": "boolean", "default": True},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
            },
            "required": ["query"],
        },
        name="search",
    )
    expected = _wrap(
        "type search = (_: {\n"
        "  // Query\n"
        "  // maxLength: 200, minLength: 1\n"
        "  query: string,\n"
        "  // maximum: 50, minimum: 1\n"
        "  // Default: 10\n"
        "  limit?: number,\n"
        '  // Default: "a"\n'
        '  mode?: "a" | "b",\n'
        "  // Default: True\n"
        "  safe?: boolean\n"
        "}) => any;"
    )
    assert render_tools_declaration(tools) == expected


def test_additional_properties_and_commented_array_items() -> None:
    tools = _function_tool(
        {
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "string", "description": "A tag", "maxLength": 10}, "maxItems": 3},
                "meta": {"type": "object", "additionalProperties": {"type": "string"}},
                "strict": {"type": "object", "properties": {"a": {"type": "number"}}, "additionalProperties": False},
            },
            "required": ["tags", "meta", "strict"],
        }
    )
    expected = _wrap(
        "type f = (_: {\n"
        "  meta: {\n"
        "    [k: string]: string\n"
        "  },\n"
        "  strict: {\n"
        "    a?: number,\n"
        "    [k: string]: never\n"
        "  },\n"
        "  // maxItems: 3\n"
        "  tags: Array<\n"
        "    // A tag\n"
        "    // maxLength: 10\n"
        "    string\n"
        "  >\n"
        "}) => any;"
    )
    assert render_tools_declaration(tools) == expected


def test_self_reference_and_described_defs() -> None:
    tools = _function_tool(
        {
            "type": "object",
            "$defs": {"Leaf": {"type": "object", "description": "A leaf.", "properties": {"v": {"type": "integer"}}}},
            "properties": {
                "children": {"type": "array", "items": {"$ref": "#"}},
                "leaf": {"$ref": "#/$defs/Leaf"},
                "name": {"type": "string"},
            },
            "required": ["name"],
        },
        name="tree",
    )
    # The root interface keeps key order (no required-first), unlike nested objects.
    expected = _wrap(
        "interface parameters {\n"
        "  children?: Array<parameters>,\n"
        "  leaf?: Leaf,\n"
        "  name: string\n"
        "}\n"
        "// A leaf.\n"
        "interface Leaf {\n"
        "  v?: number\n"
        "}\n"
        "type tree = (_: parameters) => any;"
    )
    assert render_tools_declaration(tools) == expected


def test_loose_schemas_blank_description_lines_and_non_string_enums() -> None:
    tools = _function_tool(
        {
            "type": "object",
            "properties": {
                "x": {"enum": [1, 2.5, None, True]},
                "y": True,
                "z": False,
                "w": {},
                "rows": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "any": {"type": "array"},
            },
        },
        name="g",
        description="First.\n\nSecond.",
    )
    expected = _wrap(
        "// First.\n"
        "\n"
        "// Second.\n"
        "type g = (_: {\n"
        "  any?: Array<any>,\n"
        "  rows?: Array<{\n"
        "    a?: string\n"
        "  }>,\n"
        "  w?: any,\n"
        "  x?: 1 | 2.5 | None | True,\n"
        "  y?: any,\n"
        "  z?: null\n"
        "}) => any;"
    )
    assert render_tools_declaration(tools) == expected


def test_non_function_tools_are_skipped_when_a_function_is_declared() -> None:
    tools = [{"type": "_plugin", "_plugin": {"name": "web"}}, *_function_tool({"type": "object", "properties": {}}, "ping")]
    assert render_tools_declaration(tools) == _wrap("type ping = (_: {}) => any;")


def test_missing_or_null_parameters_mean_no_arguments() -> None:
    tools = [
        {"type": "function", "function": {"name": "a"}},
        {"type": "function", "function": {"name": "b", "parameters": None}},
    ]
    assert render_tools_declaration(tools) == _wrap("type a = (_: {}) => any;\ntype b = (_: {}) => any;")


# ---------------------------------------------------------------------------------------------
# JSON fallback (where the official encoder raises or declares nothing)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({"oneOf": [{"type": "string"}, {"type": "integer"}]}, id="oneOf"),
        pytest.param({"description": "untyped"}, id="no-type"),
        pytest.param({"$ref": "#/definitions/Node"}, id="ref-definitions"),
        pytest.param({"$ref": "#/$defs/Missing"}, id="ref-missing"),
        pytest.param({"type": ["string", "uuid"]}, id="type-list-unknown"),
        pytest.param({"type": "string", "enum": ["a", 1]}, id="enum-type-mismatch"),
        pytest.param({"type": ["string", "integer"], "enum": ["a"]}, id="enum-two-types"),
        pytest.param({"type": "string", "description": 5}, id="description-not-string"),
        pytest.param({"type": "object", "additionalProperties": "yes"}, id="additional-properties-bad"),
        pytest.param({"type": "array", "items": [{"type": "string"}]}, id="tuple-items"),
        pytest.param({"type": "object", "properties": []}, id="properties-not-object"),
        pytest.param("string", id="schema-not-object"),
    ],
)
def test_unrenderable_schema_falls_back_to_compact_json(schema: Any) -> None:
    tools = _one_property(schema)
    sorted_tools = json.loads(json.dumps(tools, sort_keys=True))
    assert render_tools_declaration(tools) == _compact(sorted_tools)


def test_fallback_keeps_non_ascii_and_compact_separators() -> None:
    tools = _function_tool({"type": "object", "properties": {"x": {"oneOf": []}}}, name="翻译", description="中文 text")
    expected = (
        '[{"function":{"description":"中文 text","name":"翻译",'
        '"parameters":{"properties":{"x":{"oneOf":[]}},"type":"object"}},"type":"function"}]'
    )
    assert render_tools_declaration(tools) == expected


def test_only_non_function_tools_fall_back_to_json() -> None:
    tools = [{"type": "function", "function": {}}, {"type": "_plugin", "_plugin": {"name": "web"}}]
    expected = '[{"function":{},"type":"function"},{"_plugin":{"name":"web"},"type":"_plugin"}]'
    assert render_tools_declaration(tools) == expected


def test_tool_that_is_not_an_object_falls_back_to_json() -> None:
    tools: list[Any] = [*_function_tool({"type": "object", "properties": {}}), "oops"]
    assert render_tools_declaration(tools) == _compact(json.loads(json.dumps(tools, sort_keys=True)))


def test_one_bad_tool_makes_the_whole_list_json() -> None:
    good = _function_tool({"type": "object", "properties": {"a": {"type": "string"}}}, "good")
    bad = _function_tool({"type": "object", "properties": {"b": {"oneOf": []}}}, "bad")
    tools = good + bad
    assert render_tools_declaration(tools) == _compact(json.loads(json.dumps(tools, sort_keys=True)))


def test_nameless_tool_with_unrenderable_schema_still_falls_back() -> None:
    tools = [{"type": "function", "function": {"parameters": {"type": "object", "properties": {"x": {"oneOf": []}}}}}]
    assert render_tools_declaration(tools) == _compact(json.loads(json.dumps(tools, sort_keys=True)))


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("tools", [None, "tools", b"tools", {"type": "function"}, 3], ids=repr)
def test_tools_must_be_a_list(tools: Any) -> None:
    with pytest.raises(InvalidInputError) as info:
        render_tools_declaration(tools)
    assert info.value.field == "tools"


def test_empty_tool_list_is_refused() -> None:
    with pytest.raises(InvalidInputError) as info:
        render_tools_declaration([])
    assert info.value.field == "tools"


@pytest.mark.parametrize("function", [{"parameters": {"type": "object"}}, {"name": ""}, {"name": 5}], ids=repr)
def test_declared_function_needs_a_name(function: dict[str, Any]) -> None:
    tools = [*_function_tool({"type": "object", "properties": {}}, "ok"), {"type": "function", "function": function}]
    with pytest.raises(InvalidInputError) as info:
        render_tools_declaration(tools)
    assert info.value.field == "tools[1].function.name"


def test_unserialisable_value_on_the_json_path() -> None:
    tools = [{"type": "_plugin", "_plugin": {"options": {1, 2}}}]
    with pytest.raises(InvalidInputError) as info:
        render_tools_declaration(tools)
    assert info.value.field == "tools"


def test_unsortable_keys() -> None:
    tools = [{"type": "function", 1: "x"}]
    with pytest.raises(InvalidInputError) as info:
        render_tools_declaration(tools)  # type: ignore[arg-type]
    assert info.value.field == "tools"


def test_errors_share_the_library_base_class() -> None:
    with pytest.raises(KimiReconError):
        render_tools_declaration("nope")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        render_tools_declaration([])
