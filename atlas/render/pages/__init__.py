"""The pages' view of a family, as plain data computed from its facts.

``site(facts)`` returns everything the templates lay out beyond the facts themselves:

- ``nodes``: the component hierarchy, model › blocks › block kind › component › sub-component ›
  tensor, one page each (``hierarchy``), with breadcrumbs, a description (``words``), the
  constructor call, equations (the proven steps of ``facts["equations"]``, as atlas.proof ran them),
  inputs and outputs with named dims (``shapes``), the accounting table and the evidence
  (``evidence``: pinned excerpts, each with the claim it supports); and a page per standard value
  (``values``);
- ``diagram``: the residual-stream diagram of each block kind (SVG geometry) and the model's flow,
  each part naming the standard value it produces and the card a reader sees on hover (``diagram``);
- ``values``: the standard values the family produces, from support() (``values``);
- ``tools``: each value's access in nnsight, nnterp and TransformerLens, checked on the run (``tools``);
- ``search``: the words the index's search box matches for the family.

What a component is (a LayerNorm or an RMSNorm, a router's rule, a projection's bias) is read from
what its proof found, never guessed from its class name: every module tree is annotated with its
page id and its proof's facts first (``roles.annotated``).
"""

from __future__ import annotations

from typing import Any

from atlas.check.prose import disclaimed_config
from atlas.render import search
from atlas.render.pages.diagram import diagram
from atlas.render.pages.hierarchy import hierarchy
from atlas.render.pages.inputs import input_pages
from atlas.render.pages.roles import annotated, slug
from atlas.render.pages.tools import snippets, tool_cells, unloaded, versions
from atlas.render.pages.values import missing_words, value_pages, values, weight_previews


def site(facts: dict[str, Any]) -> dict[str, Any]:
    """The pages' data for a family (plain, JSON-serialisable)."""
    facts = with_annotated_trees(facts)
    nodes = hierarchy(facts)
    vals = values(facts)
    drawn = diagram(facts, set(nodes), vals)
    input_pages(facts, nodes, vals)
    value_pages(facts, vals, nodes)
    weight_previews(facts, nodes)
    for name, value in vals.items():  # each value page's code in the field's own tools
        nodes[f"value.{name}"]["tools"] = snippets(facts, name, value["condition"])
    kinds = facts["accounting"]["block_kinds"]
    kind_index = {k["kind"]: i for i, k in enumerate(kinds)}
    return {
        "nodes": nodes,
        "values": vals,
        "missing": missing_words(facts),
        "diagram": drawn,
        "blocks": [kind_index[k] for k in facts["blocks"]],
        "kinds": [{"id": slug(k["kind"]), "label": k["label"], "ranges": next(b["ranges"] for b in facts["block_kinds"] if b["id"] == k["kind"]), "instances": k["instances"]} for k in kinds],
        "preview_values": sorted({k.split(".")[-1] for k in facts["preview"]["tensors"]} & set(vals)),
        # config.json's words about a key whose feature this model lacks: shown with the fact beside them
        "disclaimed": disclaimed_config(facts),
        "tools": {"cells": tool_cells(facts), "unloaded": unloaded(facts), "versions": versions(facts)},
        "search": search.entries(facts, vals),  # each entry leads to a page: atlas.render.search
    }


def with_annotated_trees(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts with every module tree annotated by its pages' ids and proofs (the facts themselves
    are left as they are)."""
    eq = facts["equations"]
    acc = facts["accounting"]
    kinds = [{**k, "tree": annotated(k["tree"], slug(k["kind"]), eq)} for k in acc["block_kinds"]]
    outside = {path: annotated(tree, slug(path.split(".")[-1]), eq) for path, tree in acc["outside"].items()}
    return {**facts, "accounting": {**acc, "block_kinds": kinds, "outside": outside}}
