"""Render: a family's pages from its facts alone (the family page, a page per component, tensor and
standard value, and facts.json), its index card and compare summary, and the index page.

Writing them into the site is the build's (atlas/build/site.py).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from atlas.check import prose, visible_text
from atlas.check.pages import check_pages, check_sheet
from atlas.model.sizes import routed_experts
from atlas.render import compare, pages, search
from atlas.render.environment import environment, page_href
from atlas.render.math import deferred, fill


def facts_json(facts: dict[str, Any]) -> str:
    """facts.json: stable key order (the order facts are collected in), UTF-8, newline-terminated;
    indented for reading, except arrays of numbers (shapes, preview data), each kept on one line."""
    return _dumps(facts, 0) + "\n"


def _dumps(value: Any, depth: int) -> str:
    kind = type(value)
    if kind is str:  # the commonest leaf, quoted as json.dumps(ensure_ascii=False) quotes it, without its setup
        return _quoted(value)
    if kind is int or (kind is float and math.isfinite(value)):  # json.dumps writes their repr
        return repr(value)
    if kind is list and _finite_numbers(value):  # shapes and preview data: written without an encoder each
        return "[" + ",".join(map(repr, value)) + "]"
    if _numeric(value) or not isinstance(value, (dict, list)) or not value:
        return _compact(value)
    inner, outer = "\n" + " " * (depth + 1), "\n" + " " * depth
    if isinstance(value, dict):
        items = [f"{_quoted(k)}: {_dumps(v, depth + 1)}" for k, v in value.items()]
        return "{" + inner + ("," + inner).join(items) + outer + "}"
    return "[" + inner + ("," + inner).join(_dumps(v, depth + 1) for v in value) + outer + "]"


_quoted = json.encoder.encode_basestring  # a str as JSON, non-ASCII kept (what ensure_ascii=False uses)
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # json.dumps with these, made once


def _finite_numbers(values: list) -> bool:
    """A flat list of whole numbers and finite floats (the commonest list of numbers)."""
    kinds = set(map(type, values))
    return kinds <= _INT_FLOAT and (float not in kinds or all(map(math.isfinite, values)))


def _numeric(value: Any) -> bool:
    """A number, or a (nested) list holding only numbers."""
    if type(value) is list:  # exact types: facts are plain JSON values, and a bool is not a number here
        kinds = set(map(type, value))  # preview data is long lists: their elements' types, taken at C speed
        return kinds <= _NUMBER_TYPES or (kinds <= _NUMBERS_OR_LISTS and all(_numeric(v) for v in value if type(v) is list))
    return type(value) in _NUMBER_TYPES


_NUMBER_TYPES = frozenset({int, float, type(None)})
_NUMBERS_OR_LISTS = _NUMBER_TYPES | {list}
_INT_FLOAT = frozenset({int, float})


def _view(facts: dict[str, Any]) -> dict[str, Any]:
    """``pages.site(facts)``, computed once for a family's pages and its site entry (the last family's kept)."""
    if _last_view[0] is not facts:
        _last_view[:] = [facts, pages.site(facts)]
    return _last_view[1]


_last_view: list[Any] = [None, None]


def render_family(facts: dict[str, Any]) -> dict[str, str]:
    """The files of one family's folder, by path relative to the site root: the family page, one page
    per component, tensor and standard value, and the facts."""
    name = facts["family"]["name"]
    env = environment()
    view = _view(facts)
    check_pages(view, name)
    check_sheet(facts["sheet"], view["nodes"], name)
    with deferred():  # the pages' equations are rendered together, after the pages
        files = {
            f"{name}/index.html": env.get_template("family.html").render(f=facts, v=view, root="../", data=page_data(view)),
            f"{name}/facts.json": facts_json(facts),
        }
        page = env.get_template("component.html")
        for node_id, node in view["nodes"].items():
            preview = preview_payload(facts, node.get("previews") or [])
            files[f"{name}/{page_href(node_id)}"] = page.render(f=facts, v=view, n=node, root="../../", fam="../", preview=preview)
    files = fill(files)
    visible_text.check_pages(files)  # no page says None
    # no page claims what the model does not have; each component's own words hold for that component
    components = facts["equations"]["components"]
    prose.check_pages(facts, files, {nid: f"{node['title']}. {node['description']}" for nid, node in view["nodes"].items()
                                     if node.get("type") == "component" and nid in components})
    return files


def preview_payload(facts: dict[str, Any], keys: list[str]) -> dict[str, Any] | None:
    """The preview tensors a value page draws, with the run's token labels."""
    if not keys:
        return None
    pv = facts["preview"]
    config = pv["config"]
    experts = routed_experts(config)
    return {"labels": pv["token_labels"], "experts": experts, "tensors": {k: pv["tensors"][k] for k in keys}}


def page_data(view: dict[str, Any]) -> dict[str, Any]:
    """What the family page's script needs: block kinds, the standard values' cards, the links."""
    return {
        "blocks": view["blocks"],
        "kinds": view["kinds"],
        "values": {
            k: {**{f: v[f] for f in ("name", "host", "layout", "dims", "shape", "description", "read_at", "module", "condition", "blocks")},
                "previewed": k in view["preview_values"]}
            for k, v in view["values"].items()
        },
    }


def render_index(entries: list[dict[str, Any]], page_exists: Callable[[str], bool] | None = None) -> str:
    """The index page from the families' site entries; with ``page_exists`` (a path relative to the site
    root -> whether the site has that page), every search entry is first checked to lead to a page."""
    cards = [e["card"] for e in entries]
    if page_exists is not None:
        for card in cards:
            search.check_targets(card["f"]["family"]["name"], card["v"]["search"], page_exists)
    return environment().get_template("index.html").render(cards=cards, root="", search_script=SEARCH_SCRIPT)


SEARCH_SCRIPT = "search-data.js"  # every card's standard names and libraries' names, beside the index


def render_search_data(entries: list[dict[str, Any]]) -> str:
    """What the index's search box finds beyond a card's text, as a script the index loads: for each
    family, its search words (features spelled out, vendor, checkpoint names), its standard values' names
    and its libraries' names for them ("hook_resid_pre=layer_input"), each leading to that value's page. Carried apart from index.html, so that the index's weight grows
    by a card's words, not by a hundred families' vocabularies."""
    data = {}
    for entry in entries:
        card = entry["card"]
        found = card["v"]["search"]
        words = " ".join(e["term"] for e in found if e["kind"] not in ("value", "tool"))
        names = [e["term"] for e in found if e["kind"] == "value"]
        tools = [f"{e['term']}={e['target'].rsplit('value.', 1)[1][:-len('.html')]}" for e in found if e["kind"] == "tool"]
        data[card["f"]["family"]["name"]] = {"words": words, "names": names, "tools": tools}
    return compare.script("ATLAS_SEARCH", data)


def site_entry(facts: dict[str, Any]) -> dict[str, Any]:
    """What the pages made from every family in the site need of one family: its index card (the facts
    the card shows, its block kinds, blocks and search entries) and its compare summary. A build
    computes it where it renders the family, and reads back only the facts.json of families it kept."""
    view = _view(facts)
    shown = {
        "family": facts["family"],
        "checkpoint": {"repo": facts["checkpoint"]["repo"]},
        "model": {"num_blocks": facts["model"]["num_blocks"]},
        "accounting": {"model": {k: facts["accounting"]["model"][k] for k in ("total", "active")}},
        **({"features": facts["features"]} if "features" in facts else {}),
        "sheet": facts["sheet"],
    }
    return {"card": {"f": shown, "v": {"kinds": view["kinds"], "runs": block_runs(view["blocks"]), "search": view["search"]}},
            "compare": compare.summary(facts)}


def block_runs(blocks: list[int]) -> list[list[int]]:
    """[0, 1, 1, 1, 0] -> [[0, 1], [1, 3], [0, 1]]: the card's strip draws each run of one kind as one bar,
    its blocks marked off by the stylesheet, so that a deep stack costs the index a few elements."""
    runs: list[list[int]] = []
    for kind in blocks:
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
        else:
            runs.append([kind, 1])
    return runs
