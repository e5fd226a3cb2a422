"""The facts' schema (atlas/facts/facts.schema.json) and its validator (atlas/facts/schema.py): every family's facts
match it, a facts dict that does not is one exact line naming the field, a site holding a facts.json
that does not match fails the build with one line, and the validator itself on small schemas."""

from __future__ import annotations

import copy
import json
import math
import shutil
from pathlib import Path

import pytest

from atlas import families
from atlas.build import publish
from atlas.errors import AtlasError
from atlas.facts.collect import SCHEMA
from atlas.facts.schema import FACTS_SCHEMA, Schema, check_facts, json_path
from tests.conftest import ROOT, run_build, snapshot

SCHEMA_JSON = json.loads(FACTS_SCHEMA.read_text(encoding="utf-8"))


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
        "refused: t.json: properties.n.maximum: keyword 'maximum' is not supported by atlas/facts/schema.py "
        "(type, const, enum, minimum, minItems, pattern, properties, required, additionalProperties, propertyNames, items, anyOf, oneOf, $ref)"
    )
    assert first({"items": {"$ref": "#/$defs/missing"}}, []) == "refused: t.json: items.$ref: '#/$defs/missing' is not a definition under #/$defs/"
    assert first({"anyOf": [{"type": "int"}]}, 1) == "refused: t.json: anyOf[0].type: 'int' names a type that is not one of object, array, string, integer, number, boolean, null"


# --- the facts schema itself ---------------------------------------------------------------------


def test_the_schema_file_loads_and_pins_the_facts_version():
    from atlas.facts.schema import facts_schema

    assert facts_schema().root == SCHEMA_JSON
    assert SCHEMA_JSON["properties"]["schema"]["const"] == SCHEMA


def test_the_schema_enums_are_the_code_s_own_sets():
    from atlas.inputs.dtypes import DTYPE_BYTES
    from atlas.model.pinned_figures import COMPARED_FIGURES, DESCRIPTIVE_FIGURES, INDEX_COUNTS
    from atlas.model.preview_facts import TINY_RAW_KEYS
    from atlas.proof.kinds import BUILDERS
    from atlas.model.sizes import LINEAR_ATTENTION_SIZES, SSM_SIZE_KEYS, STREAM_SIZE_KEYS
    from atlas.model.vocabulary import HOSTS

    defs, top = SCHEMA_JSON["$defs"], SCHEMA_JSON["properties"]
    assert defs["dtype"]["enum"] == list(DTYPE_BYTES)
    pinned = top["checkpoint_check"]["properties"]["pinned"]["properties"]
    assert list(pinned) == [*COMPARED_FIGURES, *DESCRIPTIVE_FIGURES]
    assert pinned["index_total_size_counts"]["enum"] == list(INDEX_COUNTS)
    assert top["support"]["properties"]["hosts"]["items"]["properties"]["host"]["enum"] == list(HOSTS)
    assert defs["part_kind"]["enum"] == [*BUILDERS, "blocks", "model"]
    tiny = top["preview"]["properties"]["config"]
    # the sizes of a linear-attention or state-space mixer are there only where the config has one
    assert set(tiny["properties"]) == {*tiny["required"], *TINY_RAW_KEYS, *LINEAR_ATTENTION_SIZES, *SSM_SIZE_KEYS, *STREAM_SIZE_KEYS}


@pytest.mark.parametrize("name", families.names())
def test_every_family_s_facts_match_the_schema(collected, name):
    facts = collected(name).facts
    check_facts(facts, f"{name}/facts.json")
    assert list(facts) == list(SCHEMA_JSON["properties"])  # facts.json keeps the schema's order


def broken(kimi, change) -> str:
    facts = copy.deepcopy(kimi)
    change(facts)
    with pytest.raises(AtlasError) as e:
        check_facts(facts, "site/kimi_k2/facts.json")
    return str(e.value)


def test_a_field_removed_is_one_line_naming_it(kimi):
    assert broken(kimi, lambda f: f["model"].pop("num_blocks")) == "site/kimi_k2/facts.json: facts field model.num_blocks: is missing"
    assert broken(kimi, lambda f: f.pop("equations")) == "site/kimi_k2/facts.json: facts field equations: is missing"
    assert broken(kimi, lambda f: f["equations"]["components"]["MoE_block.mlp.gate"]["proof"].pop("tolerance")) == (
        'site/kimi_k2/facts.json: facts field equations.components["MoE_block.mlp.gate"].proof.tolerance: is missing'
    )


def test_a_field_of_the_wrong_type_is_one_line_naming_it(kimi):
    def num_blocks_as_text(f):
        f["model"]["num_blocks"] = "61"

    def fractional_parameters(f):
        f["accounting"]["block_kinds"][1]["tree"]["children"][0]["parameters"] = 1.5

    def nan_error(f):
        f["equations"]["components"]["MoE_block.mlp.gate"]["proof"]["error"] = math.nan

    assert broken(kimi, num_blocks_as_text) == 'site/kimi_k2/facts.json: facts field model.num_blocks: is a string ("61"), expected an integer'
    assert broken(kimi, fractional_parameters) == (
        "site/kimi_k2/facts.json: facts field accounting.block_kinds[1].tree.children[0].parameters: is a number (1.5), expected an integer"
    )
    assert broken(kimi, nan_error) == (
        'site/kimi_k2/facts.json: facts field equations.components["MoE_block.mlp.gate"].proof.error: is nan, which JSON cannot hold'
    )


def test_an_unknown_field_is_one_line_naming_it(kimi):
    def colour(f):
        f["model"]["colour"] = "blue"

    def extra(f):
        f["extra"] = {}

    assert broken(kimi, colour) == (
        "site/kimi_k2/facts.json: facts field model.colour: is not a known field "
        "(known: class, config_class, block_path, num_blocks, block_class, attention_class, containers, torch_bases, outside_text_model)"
    )
    assert broken(kimi, extra) == (
        "site/kimi_k2/facts.json: facts field extra: is not a known field (known: schema, family, stack, checkpoint, model, "
        "config, attention, block_kinds, blocks, accounting, checkpoint_check, printout, excerpts, preview, support, equations, notes, tools, features, "
        "cost, lineage, sheet, sizes)"
    )


def test_values_outside_their_set_are_one_line_naming_them(kimi):
    def older(f):
        f["schema"] = 1

    def dtype(f):
        f["checkpoint_check"]["sample"][0]["dtype"] = "F99"

    def broken_identity(f):
        f["preview"]["identities"][0]["holds"] = False

    assert broken(kimi, older) == f"site/kimi_k2/facts.json: facts field schema: is 1, expected {SCHEMA}"
    assert broken(kimi, dtype).startswith(
        'site/kimi_k2/facts.json: facts field checkpoint_check.sample[0].dtype: is "F99", expected one of "BOOL", "U8", '
    )
    assert broken(kimi, broken_identity) == "site/kimi_k2/facts.json: facts field preview.identities[0].holds: is false, expected true"


# --- facts.json read back from a site -----------------------------------------------------------


def site_with(tmp_path: Path, texts: dict[str, str]) -> Path:
    """A site folder holding a facts.json for each family named (no pages: the check comes first)."""
    site = tmp_path / "site"
    for name, text in texts.items():
        (site / name).mkdir(parents=True)
        (site / name / "facts.json").write_text(text, encoding="utf-8")
    return site


def write_fails(site: Path) -> str:
    from atlas.build.site import write_site

    before = snapshot(site)
    with pytest.raises(AtlasError) as e:
        write_site(site, {}, families.names())
    assert snapshot(site) == before
    assert not list(site.parent.glob(".site.*"))  # no staging folder left behind
    return str(e.value)


def test_a_tampered_facts_json_in_the_site_is_one_line_with_the_command_that_rebuilds_it(tmp_path, kimi):
    from atlas.render.site import facts_json

    text = facts_json(kimi).replace('"num_blocks": 61,', '"num_blocks": "61",')
    site = site_with(tmp_path, {"kimi_k2": text})
    assert write_fails(site) == (
        f'{site}/kimi_k2/facts.json: facts field model.num_blocks: is a string ("61"), expected an integer; '
        f"rebuild it: python build.py --family kimi_k2 --out {site}"
    )


def test_a_facts_json_that_is_not_json_is_one_line(tmp_path, kimi):
    site = site_with(tmp_path, {"gpt2": '{"schema": 2,'})
    assert write_fails(site) == (
        f"{site}/gpt2/facts.json: is not JSON (Expecting property name enclosed in double quotes: line 1 column 14 (char 13)); "
        f"rebuild it: python build.py --family gpt2 --out {site}"
    )


def test_facts_of_an_older_atlas_in_many_families_name_the_first_and_ask_for_a_full_build(tmp_path, kimi):
    from atlas.render.site import facts_json

    old = facts_json({**kimi, "schema": 1})
    site = site_with(tmp_path, {name: old for name in ("qwen3", "gpt2", "llama", "mistral")})
    assert write_fails(site) == (
        f"{site}/gpt2/facts.json: facts field schema: is 1, expected {SCHEMA}; "
        f"4 families' facts.json do not match; rebuild every family: python build.py --out {site}"
    )


def test_a_build_beside_a_tampered_family_fails_and_keeps_the_site(built_site, tmp_path):
    """The whole command line: another family's facts.json written by an older atlas (before the schema
    and the equations) stops a one-family build with one line; the site stays as it was."""
    out = tmp_path / "site"
    shutil.copytree(built_site, out)
    path = out / "kimi_k2" / "facts.json"
    facts = json.loads(path.read_text(encoding="utf-8"))
    facts["schema"] = 1
    del facts["equations"]
    path.write_text(json.dumps(facts), encoding="utf-8")
    before = snapshot(out)

    result = run_build(ROOT, "--family", "gpt2", "--out", str(out))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        f"error: {out}/kimi_k2/facts.json: facts field schema: is 1, expected {SCHEMA}; rebuild it: python build.py --family kimi_k2 --out {out}"
        f"; the site in {out} was left as it was",
    ]
    assert snapshot(out) == before


def test_facts_that_do_not_match_fail_the_build_before_anything_is_written(project_copy):
    """An atlas whose collect() puts a value JSON cannot hold into the facts: one line naming the file
    and the field, exit 1, and the site folder as it was."""
    module = project_copy / "atlas" / "facts" / "collect.py"
    source = module.read_text(encoding="utf-8")
    bug = '"attention_class": type(attention) if attention is not None else None,'
    assert '"attention_class": type(attention).__name__ if attention is not None else None,' in source
    module.write_text(source.replace('"attention_class": type(attention).__name__ if attention is not None else None,', bug), encoding="utf-8")
    site = project_copy / "site"
    site.mkdir()
    (site / "index.html").write_text("the previous site\n", encoding="utf-8")
    (site / publish.MARKER).write_text(publish.MARKER_TEXT)  # a site, so the build may replace it

    result = run_build(project_copy, "--family", "gpt2")
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: site/gpt2/facts.json: facts field model.attention_class: is a Python type, which JSON cannot hold"
        "; the site in site was left as it was",
    ]
    assert snapshot(site) == {publish.MARKER: publish.MARKER_TEXT.encode(), "index.html": b"the previous site\n"}
