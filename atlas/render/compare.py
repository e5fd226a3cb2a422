"""Two families side by side: a static page for each family and its nearest relatives, and one page
that assembles any pair in the browser from a compact summary of every family's facts.

Relatives are ranked by what the architectures share (atlas.render.relatives: the kinds of attention
and of component, routing, positions, norms), not by whose modeling code transformers reuses. The
page leads with the figures a reader compares first (the standardized sizes, parameters, cost), then
the block patterns, config.json aligned by common key names (GPT-2's ``n_layer`` beside Llama's
``num_hidden_layers``), the parameters per component aligned by the standard value each module
produces (``wte`` beside ``embed_tokens``: both give token_embeddings), the standard values one
produces and the other does not, and the proven equation steps one takes and the other does not.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from atlas.check import visible_text
from atlas.cost import figures as cost_figures
from atlas.facts import cache
from atlas.numbers import binary_size, grouped
from atlas.render import relatives as near
from atlas.render.environment import environment

SUMMARY_SCRIPT = "compare/data.js"  # every family's summary, for the page that assembles any pair
FAMILIES_SCRIPT = "compare/families.js"  # the families and the static pairs, for the pickers on every family page
RELATIVES_SCRIPT = "compare/relatives.js"  # each family's nearest, for the page that compares any pair


# --- the summary of one family ------------------------------------------------------------------------

NUMBER = re.compile(r"\d+(?:\{,\}\d+)*(?:\.\d+)?")


def normalized_step(tex: str) -> str:
    """A step's TeX with its sizes taken out, so that two families' steps compare by what they compute.
    Only the comparison uses it: the page shows each family's own step, sizes and all."""
    return NUMBER.sub("n", tex)


def _fact_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"  # 0.130861, not 0.13086079996295005: six figures tell two scalings apart
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def cost_rows(facts: dict[str, Any], context: int = cost_figures.DEFAULT_CONTEXT) -> list[list[Any]]:
    """The cost figures every compare shows, [label, number, words], from the facts' cost section
    through atlas.cost.figures, the module the family page's cost section reads too."""
    cost = facts["cost"]
    at = cost_figures.figures(cost, context)
    stored = cost["weights"][0]
    return [
        ["KV cache per token (BF16)", at["per_token"], f"{binary_size(at['per_token'])}: {at['per_token_formula']}"],
        [f"KV cache at {grouped(context)} tokens", at["cache"], binary_size(at["cache"])],
        ["weights as stored", stored["bytes"], f"{binary_size(stored['bytes'])}, {stored['name']}"],
        [f"FLOPs per token at {grouped(context)} tokens, the model", at["model_flops"], at["model_flops_formula"]],
        # every family has this row, so that the rows of two families line up one for one (compare.js)
        [f"FLOPs per token at {grouped(context)} tokens, the model with weight absorption",
         at.get("absorbed_flops", at["model_flops"]),
         at["absorbed_flops_formula"] if "absorbed_flops" in at else "no latent attention to absorb: the model's figure"],
        [f"FLOPs per token at {grouped(context)} tokens, eager transformers code", at["flops"], at["flops_formula"]],
    ]


def module_roles(facts: dict[str, Any]) -> list[tuple[re.Pattern[str], str]]:
    """Module paths (block index as any number) -> the standard name of what the module produces
    (support(): transformer.wte and model.embed_tokens both give token_embeddings)."""
    found: dict[str, str] = {}
    for h in facts["support"]["hosts"]:
        for v in h["values"]:
            if (v["read"] or {}).get("kind") == "output" and v["module"] and v["module"] != h["path"]:
                found.setdefault(v["module"], v["name"].removesuffix("_output"))
    for h in facts["support"]["hosts"]:
        if "." in h["host"]:
            found.setdefault(h["path"], h["host"].rsplit(".", 1)[1])
    return [(re.compile(re.escape(path).replace(re.escape("{i}"), r"\d+") + "$"), role) for path, role in found.items()]


def _role(roles: list[tuple[re.Pattern[str], str]], path: str, name: str) -> str:
    return next((role for pattern, role in roles if pattern.match(path)), name)


def _aligned(pairs: list[tuple[str, str, Any]]) -> list[list[Any]]:
    """[key, value, own name or None], a key met twice keeping its own name to stay apart."""
    seen: set[str] = set()
    out = []
    for key, own, value in pairs:
        if key in seen:
            key = own
        seen.add(key)
        out.append([key, value, own if own != key else None])
    return out


def _parameters(facts: dict[str, Any]) -> dict[str, Any]:
    acc = facts["accounting"]
    roles = module_roles(facts)
    rows = _aligned([(_role(roles, r["path"], r["path"]), r["path"], r["parameters"] + r["stored_buffers"]) for r in acc["model"]["rows"]])
    rows += [[f"{k['label']}s, all", k["total"], None] for k in acc["block_kinds"]]
    rows += [[f"{k['label']}s, how many", k["instances"], None] for k in acc["block_kinds"]]
    kinds = {k["label"]: _aligned([(_role(roles, c["path"], c["name"]), c["name"], c["parameters"] + c["stored_buffers"]) for c in k["tree"]["children"]]
                                  + [(t["name"], t["name"], t["elements"]) for t in k["tree"]["tensors"]]) for k in acc["block_kinds"]}
    return {"total": acc["model"]["total"], "active": acc["model"]["active"], "rows": rows, "kinds": kinds}


def summary(facts: dict[str, Any]) -> dict[str, Any]:
    """What the compare view needs of one family's facts, compact."""
    renamed = facts["config"].get("standard_names", {})  # absent in facts collected before it was added
    return {
        "name": facts["family"]["name"],
        "title": facts["family"]["title"],
        "released": facts["family"]["released"],
        "class": facts["model"]["class"],
        "lineage": facts["lineage"],
        "standardized": list(map(list, facts["config"]["standardized"].items())),  # pairs: data.js sorts an object's keys
        "config": {renamed.get(k, k): _fact_value(v) for k, v in facts["config"]["raw"].items()},
        "config_names": {renamed[k]: k for k in facts["config"]["raw"] if k in renamed},
        "kinds": [{"id": k["id"], "label": k["label"], "count": k["count"], "ranges": k["ranges"]} for k in facts["block_kinds"]],
        "blocks": [next(i for i, k in enumerate(facts["block_kinds"]) if k["id"] == b) for b in facts["blocks"]],
        "parameters": _parameters(facts),
        "cost": cost_rows(facts),
        "traits": near.traits(facts),
        "support": {f"{h['host']}.{v['name']}": v["condition"] or "" for h in facts["support"]["hosts"] for v in h["values"]
                    if v["read_at"] is not None and v["blocks"] != []},
        "equations": {cid: {"kind": c["facts"].get("kind", {}).get("value", ""),
                            "facts": {k: _fact_value(f["value"]) for k, f in c["facts"].items() if k != "kind"},
                            "steps": [s["tex"] for s in c["steps"]]}
                      for cid, c in facts["equations"]["components"].items()},
    }


# --- two summaries side by side -----------------------------------------------------------------------


def relatives(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """How transformers relates the two families' code, in words; None when it does not."""
    if a["class"] == b["class"]:
        return f"both are built as {a['class']}"
    ta, tb = a["lineage"]["model_type"], b["lineage"]["model_type"]
    if tb in a["lineage"]["written_from"]:
        return f"{a['title']}'s modeling code ({a['lineage']['source']}) is written from {tb}'s"
    if ta in b["lineage"]["written_from"]:
        return f"{b['title']}'s modeling code ({b['lineage']['source']}) is written from {ta}'s"
    return None


def ordered(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pair in page order: the family written from the other first; else the later release."""
    if a["lineage"]["model_type"] in b["lineage"]["written_from"]:
        return b, a
    if b["lineage"]["model_type"] in a["lineage"]["written_from"]:
        return a, b
    return tuple(sorted((a, b), key=lambda s: (s["released"], s["name"]), reverse=True))  # type: ignore[return-value]


def pair_file(a: dict[str, Any], b: dict[str, Any]) -> str:
    return f"{a['name']}--{b['name']}.html"


def _rows(x: dict, y: dict, names_x: dict | None = None, names_y: dict | None = None) -> list[dict[str, Any]]:
    keys = list(x) + [k for k in y if k not in x]
    return [{"key": k, "a": x.get(k), "b": y.get(k), "differs": x.get(k) != y.get(k),
             "own_a": (names_x or {}).get(k), "own_b": (names_y or {}).get(k)} for k in keys]


def _named_rows(x: list[list[Any]], y: list[list[Any]]) -> list[dict[str, Any]]:
    """Rows of [key, value, own name] aligned by key."""
    return _rows({r[0]: r[1] for r in x}, {r[0]: r[1] for r in y}, {r[0]: r[2] for r in x if r[2]}, {r[0]: r[2] for r in y if r[2]})


def _equations(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for cid in list(a["equations"]) + [c for c in b["equations"] if c not in a["equations"]]:
        ea, eb = a["equations"].get(cid), b["equations"].get(cid)
        if ea is None or eb is None:
            out.append({"id": cid, "kind": (ea or eb)["kind"], "only": "a" if eb is None else "b", "kind_b": None, "facts": [], "steps_a": [], "steps_b": []})
            continue
        if ea["kind"] != eb["kind"]:  # two kinds of computation: no step is in common, each family's page shows its own
            out.append({"id": cid, "kind": ea["kind"], "kind_b": eb["kind"], "only": None, "facts": [], "steps_a": [], "steps_b": []})
            continue
        facts = [r for r in _rows(ea["facts"], eb["facts"]) if r["differs"]]
        na, nb = {normalized_step(s) for s in ea["steps"]}, {normalized_step(s) for s in eb["steps"]}
        steps_a = [s for s in ea["steps"] if normalized_step(s) not in nb]
        steps_b = [s for s in eb["steps"] if normalized_step(s) not in na]
        if facts or steps_a or steps_b:
            out.append({"id": cid, "kind": ea["kind"], "kind_b": None, "only": None, "facts": facts, "steps_a": steps_a, "steps_b": steps_b})
    return _fold_repeats(out)


def _fold_repeats(equations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A component whose differences are exactly an earlier one's (every norm of two families, say)
    points to that one (``same_as``) instead of printing its steps again: same words, a page a third lighter."""
    first: dict[str, str] = {}
    for e in equations:
        e["same_as"] = None
        if e["only"] or e.get("kind_b"):
            continue
        what = json.dumps([e["kind"], e["facts"], e["steps_a"], e["steps_b"]], sort_keys=True)
        if what in first:
            e.update(same_as=first[what], facts=[], steps_a=[], steps_b=[])
        else:
            first[what] = e["id"]
    return equations


def diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The compare view of two summaries. static/compare.js builds the same view in the browser."""
    support = sorted(set(a["support"]) | set(b["support"]))
    score, shared = near.nearness(a["traits"], b["traits"])
    only = lambda x, y: [t[1] for t in x if t not in y]  # noqa: E731
    return {
        "a": a["name"], "b": b["name"],
        "title_a": a["title"], "title_b": b["title"],
        "relation": relatives(a, b),
        "nearness": {"score": round(100 * score), "shared": [t[1] for t in shared],
                     "only_a": only(a["traits"], b["traits"]), "only_b": only(b["traits"], a["traits"])},
        "standardized": _rows(dict(a["standardized"]), dict(b["standardized"])),
        "cost": [{**r, "note_a": wa, "note_b": wb} for r, wa, wb in zip(
            _rows({c[0]: c[1] for c in a["cost"]}, {c[0]: c[1] for c in b["cost"]}), [c[2] for c in a["cost"]], [c[2] for c in b["cost"]])],
        "config": _rows(a["config"], b["config"], a["config_names"], b["config_names"]),
        "kinds": [a["kinds"], b["kinds"]],
        "blocks": [a["blocks"], b["blocks"]],
        "parameters": {
            "totals": _rows({"total": a["parameters"]["total"], "active per token": a["parameters"]["active"]},
                            {"total": b["parameters"]["total"], "active per token": b["parameters"]["active"]}),
            "rows": _named_rows(a["parameters"]["rows"], b["parameters"]["rows"]),
            "kinds": [{"kind": k, "rows": _named_rows(a["parameters"]["kinds"].get(k, []), b["parameters"]["kinds"].get(k, []))}
                      for k in list(a["parameters"]["kinds"]) + [k for k in b["parameters"]["kinds"] if k not in a["parameters"]["kinds"]]],
        },
        "support": [{"key": k, "a": a["support"].get(k), "b": b["support"].get(k)} for k in support
                    if a["support"].get(k) != b["support"].get(k)],
        "equations": _equations(a, b),
    }


# --- the pages ----------------------------------------------------------------------------------------


def render(present: list[dict[str, Any]]) -> dict[str, str]:
    """The compare pages of the site's families (their ``summary``), by path relative to the site root:
    one per family and each of its nearest relatives, the page that assembles any pair, and the scripts
    holding their data."""
    summaries = sorted(present, key=lambda s: s["name"])
    nearest = near.ranked(summaries)
    chosen = near.static_pairs(nearest)
    pairs = [ordered(x, y) for i, x in enumerate(summaries) for y in summaries[i + 1:] if frozenset((x["name"], y["name"])) in chosen]
    env = environment()
    page = env.get_template("compare.html")
    files = {}
    for a, b in pairs:
        files[f"compare/{pair_file(a, b)}"] = page.render(d=diff(a, b), root="../", static=True)
    families = [{"name": s["name"], "title": s["title"]} for s in summaries]
    files["compare/index.html"] = page.render(d=None, root="../", static=False, families=families,
                                              pairs=[[a["name"], b["name"]] for a, b in pairs], per_family=near.STATIC)
    files[FAMILIES_SCRIPT] = script("ATLAS_FAMILIES", {"families": families, "pairs": [[a["name"], b["name"]] for a, b in pairs]})
    files[RELATIVES_SCRIPT] = script("ATLAS_RELATIVES", nearest)
    files[SUMMARY_SCRIPT] = script("ATLAS_COMPARE", {s["name"]: s for s in summaries})
    return files


def script(name: str, data: Any) -> str:
    """Data as a script that file:// pages can load (a fetch of JSON would be refused there)."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True).replace("</", "<\\/")
    return f"window.{name} = {text};\n"


def write_pages(staging: Path, present: list[dict[str, Any]]) -> None:
    """Render the compare pages of the families present (their ``summary``) and write them into the
    staging site, each page first checked to say no None, undefined, NaN or null."""
    target = staging / "compare"
    if target.exists():
        shutil.rmtree(target)
    for rel, text in cache.site_pages("compare", present, render).items():
        if rel.endswith(".html"):
            visible_text.check_page(rel, text)
        (staging / rel).parent.mkdir(parents=True, exist_ok=True)
        (staging / rel).write_text(text, encoding="utf-8")
