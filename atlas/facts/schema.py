"""The facts' schema (atlas/facts/facts.schema.json), checked when facts are written and when they are read back.

A small validator for the subset of JSON Schema (draft 2020-12) the schema uses: type (a name or a list
of names), const, enum, minimum, minItems, pattern, properties, required, additionalProperties (false or
a schema), propertyNames, items, anyOf, oneOf and local $ref into $defs. A schema using any other keyword
is refused when it is loaded, so the file never states a rule nobody checks. The first violation is
reported as one line: "<file>: facts field <json.path>: <what is wrong>".
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from atlas.errors import AtlasError

FACTS_SCHEMA = Path(__file__).with_name("facts.schema.json")

KEYWORDS = ("type", "const", "enum", "minimum", "minItems", "pattern", "properties", "required",
            "additionalProperties", "propertyNames", "items", "anyOf", "oneOf", "$ref")
ANNOTATIONS = ("$schema", "$id", "$defs", "$comment", "title", "description")
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
ARTICLE = {"object": "an object", "array": "an array", "string": "a string", "integer": "an integer",
           "number": "a number", "boolean": "a boolean", "null": "null"}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Violation:
    """The first thing wrong: where (collected innermost first) and what."""

    def __init__(self, problem: str, expected_types: tuple[str, ...] = ()):
        self.reversed_path: list[str | int] = []
        self.problem = problem
        self.expected_types = expected_types  # set for a wrong type, so that anyOf can merge them

    def at(self, key: str | int) -> Violation:
        self.reversed_path.append(key)
        return self

    @property
    def path(self) -> str:
        return json_path(reversed(self.reversed_path))


def json_path(keys) -> str:
    """('equations', 'components', 'MoE_block.mlp', 'steps', 0) -> 'equations.components["MoE_block.mlp"].steps[0]'."""
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        elif IDENTIFIER.fullmatch(key):
            out += f".{key}" if out else key
        else:
            out += f"[{json.dumps(key, ensure_ascii=False)}]"
    return out


KINDS = {type(None): "null", bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}
PYTHON_TYPES = {"null": (type(None),), "boolean": (bool,), "integer": (int,), "number": (int, float), "string": (str,)}


def _kind(value: Any) -> str:
    kind = KINDS.get(type(value), "foreign")
    return "non-finite" if kind == "number" and not math.isfinite(value) else kind


def _show(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(value: Any, kind: str) -> str:
    if kind == "non-finite":
        return f"{value}, which JSON cannot hold"
    if kind == "foreign":
        return f"a Python {type(value).__name__}, which JSON cannot hold"
    if kind in ("object", "array", "null"):
        return ARTICLE[kind]
    return f"{ARTICLE[kind]} ({_show(value)})"


def _expected(types) -> str:
    names = [ARTICLE[t] for t in types]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


class Schema:
    def __init__(self, document: dict[str, Any], where: str):
        self.root, self.where = document, str(where)
        self._refuse_unknown(document, "")
        self._scalars: dict[int, frozenset | None] = {}

    def _scalar_types(self, schema: dict[str, Any]) -> frozenset | None:
        """The Python types a scalar may have to match ``schema``, where its type is all it says about
        scalars (so that long arrays of numbers are checked without a call per number); else None."""
        key = id(schema)
        if key not in self._scalars:
            plain = "type" in schema and not {"const", "enum", "minimum", "pattern", "anyOf", "oneOf", "$ref"} & schema.keys()
            types = schema["type"] if isinstance(schema.get("type"), list) else [schema.get("type")]
            self._scalars[key] = frozenset(t for name in types for t in PYTHON_TYPES.get(name, ())) if plain else None
        return self._scalars[key]

    def first_violation(self, value: Any) -> Violation | None:
        return self._check(value, self.root)

    def _resolve(self, ref: str) -> dict[str, Any]:
        return self.root["$defs"][ref.removeprefix("#/$defs/")]

    def _refuse_unknown(self, schema: Any, at: str) -> None:
        """Every keyword is one this module checks; every $ref and type name resolves."""
        if not isinstance(schema, dict):
            raise AtlasError(self.where, at or "(top level)", "a schema must be an object")
        for key, sub in schema.items():
            here = f"{at}.{key}" if at else key
            if key not in KEYWORDS and key not in ANNOTATIONS:
                raise AtlasError(self.where, here, f"keyword {key!r} is not supported by atlas/facts/schema.py ({', '.join(KEYWORDS)})")
            if key in ("properties", "$defs"):
                for name, child in sub.items():
                    self._refuse_unknown(child, f"{here}.{name}")
            elif key in ("items", "propertyNames") or (key == "additionalProperties" and not isinstance(sub, bool)):
                self._refuse_unknown(sub, here)
            elif key in ("anyOf", "oneOf"):
                for i, child in enumerate(sub):
                    self._refuse_unknown(child, f"{here}[{i}]")
            elif key == "type" and any(t not in TYPES for t in (sub if isinstance(sub, list) else [sub])):
                raise AtlasError(self.where, here, f"{sub!r} names a type that is not one of {', '.join(TYPES)}")
            elif key == "$ref" and not (sub.startswith("#/$defs/") and sub.removeprefix("#/$defs/") in self.root.get("$defs", {})):
                raise AtlasError(self.where, here, f"{sub!r} is not a definition under #/$defs/")

    def _check(self, value: Any, schema: dict[str, Any]) -> Violation | None:
        kind = _kind(value)
        if kind in ("non-finite", "foreign"):
            return Violation(f"is {_describe(value, kind)}")
        if "$ref" in schema and (found := self._check(value, self._resolve(schema["$ref"]))):
            return found
        if "type" in schema:
            allowed = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
            if kind not in allowed and not (kind == "integer" and "number" in allowed):
                return Violation(f"is {_describe(value, kind)}, expected {_expected(allowed)}", tuple(allowed))
        if "const" in schema and not _equal(value, schema["const"]):
            return Violation(f"is {_show(value)}, expected {_show(schema['const'])}")
        if "enum" in schema and not any(_equal(value, e) for e in schema["enum"]):
            return Violation(f"is {_show(value)}, expected one of {', '.join(_show(e) for e in schema['enum'])}")
        if "minimum" in schema and kind in ("integer", "number") and value < schema["minimum"]:
            return Violation(f"is {_show(value)}, expected at least {schema['minimum']}")
        if "pattern" in schema and kind == "string" and not re.search(schema["pattern"], value):
            return Violation(f"is {_show(value)}, which does not match the pattern {schema['pattern']}")
        if kind == "object" and (found := self._check_object(value, schema)):
            return found
        if kind == "array":
            if len(value) < schema.get("minItems", 0):
                return Violation(f"has {len(value)} items, expected at least {schema['minItems']}")
            if "items" in schema:
                items = schema["items"]
                items = self._resolve(items["$ref"]) if set(items) == {"$ref"} else items
                scalar = self._scalar_types(items)
                for i, item in enumerate(value):
                    if scalar is not None and type(item) in scalar and (type(item) is not float or math.isfinite(item)):
                        continue
                    if found := self._check(item, items):
                        return found.at(i)
        for keyword in ("anyOf", "oneOf"):
            if keyword in schema and (found := self._check_options(value, schema[keyword], keyword)):
                return found
        return None

    def _check_object(self, value: dict[str, Any], schema: dict[str, Any]) -> Violation | None:
        properties, required = schema.get("properties", {}), schema.get("required", [])
        for key, sub in properties.items():  # in the schema's order, so the first violation is stable
            if key in value:
                if found := self._check(value[key], sub):
                    return found.at(key)
            elif key in required:
                return Violation("is missing").at(key)
        for key in required:
            if key not in value and key not in properties:
                return Violation("is missing").at(key)
        names, extra = schema.get("propertyNames"), schema.get("additionalProperties", True)
        for key, item in value.items():
            if type(key) is not str:
                return Violation(f"is a key of Python type {type(key).__name__}: JSON keys are strings").at(str(key))
            if names is not None and (found := self._check(key, names)):
                return Violation(f"its name {found.problem}").at(key)
            if key in properties:
                continue
            if extra is False:
                return Violation(f"is not a known field (known: {', '.join(properties)})").at(key)
            if isinstance(extra, dict) and (found := self._check(item, extra)):
                return found.at(key)
        return None

    def _check_options(self, value: Any, options: list[dict[str, Any]], keyword: str) -> Violation | None:
        found, matched = [], 0
        for option in options:
            violation = self._check(value, option)
            if violation is None:
                matched += 1
                if keyword == "anyOf":
                    return None
            else:
                found.append(violation)
        if matched > 1:
            return Violation(f"matches {matched} of the oneOf shapes, expected exactly one")
        if matched == 1:
            return None
        if all(v.expected_types and not v.reversed_path for v in found):  # a wrong type for every option
            types = [t for v in found for t in v.expected_types]
            return Violation(f"is {_describe(value, _kind(value))}, expected {_expected(list(dict.fromkeys(types)))}", tuple(types))
        # else the option that got furthest: the deepest violation, one that is not about the type first
        return max(found, key=lambda v: (len(v.reversed_path), not v.expected_types))


@lru_cache(maxsize=1)
def facts_schema() -> Schema:
    return Schema(json.loads(FACTS_SCHEMA.read_text(encoding="utf-8")), "atlas/facts/facts.schema.json")


def check_facts(facts: Any, where: str | Path) -> None:
    """Raise AtlasError naming ``where`` and the first facts field that does not match the schema.

    Only JSON's own values pass (dicts with string keys, lists, strings, ints, finite floats, booleans,
    None): facts that pass are written to facts.json exactly, and read back as the same dict."""
    violation = facts_schema().first_violation(facts)
    if violation is not None:
        path = violation.path
        raise AtlasError(where, f"facts field {path}" if path else "facts", violation.problem)


def read_facts(path: Path, shown: str | Path, checked: bool = True) -> dict[str, Any]:
    """A facts.json already in a site, read and (unless this build wrote it: ``checked`` false) checked;
    ``shown`` is the path the user knows it by."""
    from atlas.facts import cache

    text = path.read_bytes()
    try:
        facts = json.loads(text.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AtlasError(shown, None, f"is not JSON ({e})") from None
    # every build reads back every family in the site: bytes that passed this schema before pass again
    if checked:
        cache.schema_passed(path.parent.name, text, lambda: check_facts(facts, shown))
    return facts


def read_site_facts(folder: Path, names: list[str], shown: Path, fresh: set[str]) -> list[dict[str, Any]]:
    """The facts.json of every family in ``names`` that ``folder`` holds, each checked against the schema.

    One that does not match (written by another version of the atlas, or edited) fails the build with its
    file and field and the command that rebuilds it. Families written by this build (``fresh``) are only
    parsed: their facts passed this schema before they were rendered, and facts that pass are written
    exactly (``check_facts``)."""
    present, stale = [], []
    for name in names:
        path = folder / name / "facts.json"
        if not path.is_file():
            continue
        try:
            present.append(read_facts(path, Path(shown) / name / "facts.json", checked=name not in fresh))
        except AtlasError as e:
            if name in fresh:
                raise
            stale.append((name, e))
    if stale:
        first = stale[0][1]
        if len(stale) <= 3:
            them = "it" if len(stale) == 1 else "them"
            how = f"rebuild {them}: python build.py {' '.join(f'--family {name}' for name, _ in stale)} --out {shown}"
        else:
            how = f"{len(stale)} families' facts.json do not match; rebuild every family: python build.py --out {shown}"
        raise AtlasError(first.where, first.field, f"{first.problem}; {how}")
    return present
