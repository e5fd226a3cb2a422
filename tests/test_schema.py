"""The validator of the facts' schema (atlas/schema.py), on small schemas."""

from __future__ import annotations

import math

from atlas.errors import AtlasError
from atlas.schema import Schema, json_path


def first(schema: dict, value) -> str | None:
    """The validator's one line for ``value`` under ``schema``, as check_facts words it."""
    try:
        found = Schema(schema, "t.json").first_violation(value)
    except AtlasError as e:
        return f"refused: {e}"
    if found is None:
        return None
    return f"{found.path}: {found.problem}" if found.path else found.problem


# --- the validator on small schemas -------------------------------------------------------------


def test_types_name_what_was_found_and_what_was_expected():
    assert first({"type": "integer"}, 3) is None
    assert first({"type": "integer"}, "3") == 'is a string ("3"), expected an integer'
    assert first({"type": "integer"}, True) == "is a boolean (true), expected an integer"
    assert first({"type": "integer"}, 3.5) == "is a number (3.5), expected an integer"
    assert first({"type": "number"}, 3) is None  # an integer is a number
    assert first({"type": "number"}, False) == "is a boolean (false), expected a number"
    assert first({"type": ["string", "null"]}, None) is None
    assert first({"type": ["string", "null"]}, 1) == "is an integer (1), expected a string or null"
    assert first({"type": "array"}, {}) == "is an object, expected an array"
    assert first({"type": "object"}, None) == "is null, expected an object"


def test_values_json_cannot_hold_are_refused_whatever_the_schema():
    assert first({}, math.nan) == "is nan, which JSON cannot hold"
    assert first({"type": "number"}, math.inf) == "is inf, which JSON cannot hold"
    assert first({}, (1, 2)) == "is a Python tuple, which JSON cannot hold"
    assert first({"type": "array", "items": {"type": "number"}}, [1.0, 2, math.nan]) == "[2]: is nan, which JSON cannot hold"
    assert first({"type": "object"}, {1: "a"}) == '["1"]: is a key of Python type int: JSON keys are strings'


def test_objects_required_known_fields_and_maps():
    point = {
        "type": "object",
        "required": ["x", "y"],
        "additionalProperties": False,
        "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}, "label": {"type": "string"}},
    }
    assert first(point, {"x": 1, "y": 2}) is None
    assert first(point, {"x": 1, "y": 2, "label": "a"}) is None
    assert first(point, {"x": 1}) == "y: is missing"
    assert first(point, {"x": 1, "y": 2, "z": 3}) == "z: is not a known field (known: x, y, label)"
    assert first(point, {"y": "2"}) == "x: is missing"  # the first in the schema's order
    assert first(point, {"x": 1, "y": "2"}) == 'y: is a string ("2"), expected an integer'
    assert first({"required": ["a"]}, {}) == "a: is missing"  # required beyond properties
    counts = {"type": "object", "propertyNames": {"enum": ["BF16", "F32"]}, "additionalProperties": {"type": "integer", "minimum": 0}}
    assert first(counts, {"BF16": 4, "F32": 0}) is None
    assert first(counts, {"BF16": -4}) == "BF16: is -4, expected at least 0"
    assert first(counts, {"F99": 4}) == 'F99: its name is "F99", expected one of "BF16", "F32"'


def test_paths_index_lists_and_quote_keys_that_are_not_names():
    schema = {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "integer"}}}}}
    assert first(schema, {"MoE_block.mlp": [{"n": 1}, {"n": "x"}]}) == '["MoE_block.mlp"][1].n: is a string ("x"), expected an integer'
    assert json_path(["equations", "components", "MoE_block.mlp", "steps", 0, "tex"]) == 'equations.components["MoE_block.mlp"].steps[0].tex'
    assert json_path(["norms", "before MLP"]) == 'norms["before MLP"]'
    assert json_path(["missing", "routed_output", "0"]) == 'missing.routed_output["0"]'


def test_const_enum_minimum_min_items_and_pattern():
    assert first({"const": 2}, 1) == "is 1, expected 2"
    assert first({"const": True}, 1) == "is 1, expected true"  # JSON's true is not 1
    assert first({"const": 1}, True) == "is true, expected 1"
    assert first({"enum": ["parameter", "buffer"]}, "scale") == 'is "scale", expected one of "parameter", "buffer"'
    assert first({"type": "integer", "minimum": 1}, 0) == "is 0, expected at least 1"
    assert first({"type": "array", "minItems": 1}, []) == "has 0 items, expected at least 1"
    assert first({"type": "string", "pattern": "^[0-9a-f]{64}$"}, "abc") == 'is "abc", which does not match the pattern ^[0-9a-f]{64}$'
    assert first({"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"}, "2025-07") is None
    long = "x" * 100
    assert first({"const": "y"}, long) == f'is "{"x" * 58}…, expected "y"'


def test_any_of_and_one_of_report_the_option_that_got_furthest():
    nullable = {"anyOf": [{"type": "null"}, {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}]}
    assert first(nullable, None) is None
    assert first(nullable, {"a": 1}) is None
    assert first(nullable, {"a": "1"}) == 'a: is a string ("1"), expected an integer'
    assert first(nullable, {}) == "a: is missing"
    assert first(nullable, "x") == 'is a string ("x"), expected null or an object'
    one = {"oneOf": [{"type": "integer"}, {"type": "number"}]}
    assert first(one, 1.5) is None
    assert first(one, 1) == "matches 2 of the oneOf shapes, expected exactly one"


def test_refs_resolve_into_defs_and_may_recurse():
    tree = {
        "$ref": "#/$defs/node",
        "$defs": {"node": {"type": "object", "required": ["name", "children"], "additionalProperties": False,
                           "properties": {"name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
    }
    leaf = {"name": "c", "children": []}
    assert first(tree, {"name": "a", "children": [{"name": "b", "children": [leaf]}]}) is None
    assert first(tree, {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}) == "children[0].children[0].children: is missing"
    numbers = {"$ref": "#/$defs/n", "$defs": {"n": {"type": ["number", "array"], "items": {"$ref": "#/$defs/n"}}}}
    assert first(numbers, [[1.5, 2], [3, [4.25]]]) is None
    assert first(numbers, [[1.5, 2], [3, ["4"]]]) == '[1][1][0]: is a string ("4"), expected a number or an array'


def test_a_schema_is_refused_when_it_uses_what_the_validator_does_not_check():
    assert first({"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}}, {}) == (
        "refused: t.json: properties.n.maximum: keyword 'maximum' is not supported by atlas/schema.py "
        "(type, const, enum, minimum, minItems, pattern, properties, required, additionalProperties, propertyNames, items, anyOf, oneOf, $ref)"
    )
    assert first({"items": {"$ref": "#/$defs/missing"}}, []) == "refused: t.json: items.$ref: '#/$defs/missing' is not a definition under #/$defs/"
    assert first({"anyOf": [{"type": "int"}]}, 1) == "refused: t.json: anyOf[0].type: 'int' names a type that is not one of object, array, string, integer, number, boolean, null"
