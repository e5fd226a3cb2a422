"""The index's search entries: what each family is found by, and the page each finding opens.

Every entry is {term, kind, target}: ``term`` is lowercase text the search box matches; ``kind`` is
"family" (its name, title, vendor and tags), "feature" (an abbreviation derived in atlas.model.features,
and its name), "value" (a standard value the checkpoint has, with a page of its own) or "tool" (that
value's name in nnterp or TransformerLens, where the library reaches it: its page too); ``target``
is the page the entry leads to, relative to the site root. ``check_targets`` runs when the index is
written: an entry whose page the site lacks fails the build, so the box never offers a dead link.
"""

from __future__ import annotations

from typing import Any, Callable

from atlas.errors import AtlasError


def entries(facts: dict[str, Any], values: dict[str, Any]) -> list[dict[str, str]]:
    """The search entries of one family; ``values`` are the standard values its pages show."""
    family = facts["family"]
    name = family["name"]
    home = f"{name}/index.html"
    found: dict[tuple[str, str], dict[str, str]] = {}

    def add(term: str, kind: str, target: str) -> None:
        term = term.lower()
        found.setdefault((term, kind), {"term": term, "kind": kind, "target": target})

    for term in (name, family["title"], family["vendor"], *family["tags"]):
        add(term, "family", home)
    for feature in facts["features"]:
        add(feature["abbreviation"], "feature", home)
        add(feature["name"], "feature", home)
    # A value the checkpoint has nowhere (a dense model's expert_weights) keeps its page, which says
    # why, but does not make the family a search result for it.
    absent = {v["name"] for host in facts["support"]["hosts"] for v in host["values"]
              if v["blocks"] == [] or (v["blocks"] is None and v.get("missing"))}
    for value in values:
        if value not in absent:
            add(value, "value", f"{name}/c/value.{value}.html")
            for term in tool_names(facts, value):
                add(term, "tool", f"{name}/c/value.{value}.html")
    return sorted(found.values(), key=lambda e: (e["kind"] != "family", e["kind"], e["term"]))


def tool_names(facts: dict[str, Any], value: str) -> list[str]:
    """A value's names in nnterp and TransformerLens where their access reaches it on this family (checked
    on the run): nnterp's accessor ("layers_output"), the bridge's hook without the block ("hook_resid_pre")."""
    found = facts.get("tools", {}).get("values", {}).get(value, {})
    names = []
    for access in found.get("nnterp", {}).get("accesses", []):
        names.append(access["text"].removeprefix("model.").replace("[i]", ""))
    for access in found.get("transformer_lens", {}).get("accesses", []):
        hook = access["text"].split('"')[1]  # cache[f"blocks.{i}.hook_resid_pre"] -> blocks.{i}.hook_resid_pre
        names.append(hook.removeprefix("blocks.{i}."))
    return names


def check_targets(family: str, search: list[dict[str, str]], exists: Callable[[str], bool]) -> None:
    """Every entry leads to a page the site holds; the first that does not is the error."""
    for entry in search:
        if not exists(entry["target"]):
            raise AtlasError(f"family {family}", "search", f"{entry['term']!r} leads to {entry['target']}, which is not a page of the site")
