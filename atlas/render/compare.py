"""Two families side by side: a static page for each pair of near relatives, and one page that
assembles any pair in the browser from a compact summary of every family's facts.

Relatives are derived, never listed: two families are near relatives when they are built from the
same transformers model class (Kimi K2 and DeepSeek-V3), or when one family's modeling code is written
from the other's (transformers' modular file of the one imports the other's modeling module:
Mistral's from Llama's). The page lists the config values that differ, the block patterns, the
parameters per component, the standard values one produces and the other does not, and the proven
equation steps one has and the other lacks or computes differently.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from atlas.check import visible_text
from atlas.facts import cache
from atlas.render.environment import environment

SUMMARY_SCRIPT = "compare/data.js"  # every family's summary, for the page that assembles any pair
FAMILIES_SCRIPT = "compare/families.js"  # the families and the static pairs, for the pickers


# --- the summary of one family ------------------------------------------------------------------------

NUMBER = re.compile(r"\d+(?:\{,\}\d+)*(?:\.\d+)?")


def normalized_step(tex: str) -> str:
    """A step's TeX with its sizes taken out, so that two families' steps compare by what they compute."""
    return NUMBER.sub("n", tex)


def _fact_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def summary(facts: dict[str, Any]) -> dict[str, Any]:
    """What the compare view needs of one family's facts, compact."""
    acc = facts["accounting"]
    cost = facts["cost"]
    return {
        "name": facts["family"]["name"],
        "title": facts["family"]["title"],
        "released": facts["family"]["released"],
        "class": facts["model"]["class"],
        "lineage": facts["lineage"],
        "standardized": facts["config"]["standardized"],
        "config": {k: _fact_value(v) for k, v in facts["config"]["raw"].items()},
        "kinds": [{"id": k["id"], "label": k["label"], "count": k["count"], "ranges": k["ranges"]} for k in facts["block_kinds"]],
        "blocks": [next(i for i, k in enumerate(facts["block_kinds"]) if k["id"] == b) for b in facts["blocks"]],
        "parameters": {
            "total": acc["model"]["total"],
            "active": acc["model"]["active"],
            "rows": [[r["path"], r["parameters"] + r["stored_buffers"]] for r in acc["model"]["rows"]]
                    + [[f"{k['label']}s, all", k["total"]] for k in acc["block_kinds"]]
                    + [[f"{k['label']}s, how many", k["instances"]] for k in acc["block_kinds"]],
            "kinds": {k["label"]: [[c["name"], c["parameters"] + c["stored_buffers"]] for c in k["tree"]["children"]]
                      + [[t["name"], t["elements"]] for t in k["tree"]["tensors"]] for k in acc["block_kinds"]},
        },
        "support": {f"{h['host']}.{v['name']}": v["condition"] or "" for h in facts["support"]["hosts"] for v in h["values"]
                    if v["read_at"] is not None and v["blocks"] != []},
        "equations": {cid: {"kind": c["facts"].get("kind", {}).get("value", ""),
                            "facts": {k: _fact_value(f["value"]) for k, f in c["facts"].items() if k != "kind"},
                            "steps": [normalized_step(s["tex"]) for s in c["steps"]]}
                      for cid, c in facts["equations"]["components"].items()},
        "cache_values_per_token": sum(k["count"] * k["values"] for k in cost["cache"]["kinds"]),
    }


# --- two summaries side by side -----------------------------------------------------------------------


def relatives(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Why two families are near relatives, in words; None when they are not."""
    if a["class"] == b["class"]:
        return f"both are built as {a['class']}"
    ta, tb = a["lineage"]["model_type"], b["lineage"]["model_type"]
    if tb in a["lineage"]["written_from"]:
        return f"{a['title']}'s modeling code ({a['lineage']['source']}) is written from {tb}'s"
    if ta in b["lineage"]["written_from"]:
        return f"{b['title']}'s modeling code ({b['lineage']['source']}) is written from {ta}'s"
    return None


def ordered(a: dict[str, Any], b: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pair in page order: the family written from the other first; under one class, the later release."""
    if a["lineage"]["model_type"] in b["lineage"]["written_from"]:
        return b, a
    if b["lineage"]["model_type"] in a["lineage"]["written_from"]:
        return a, b
    return tuple(sorted((a, b), key=lambda s: (s["released"], s["name"]), reverse=True))  # type: ignore[return-value]


def pair_file(a: dict[str, Any], b: dict[str, Any]) -> str:
    return f"{a['name']}--{b['name']}.html"


def diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The compare view of two summaries. static/compare.js builds the same view in the browser."""
    def rows(x: dict, y: dict) -> list[dict[str, Any]]:
        keys = list(x) + [k for k in y if k not in x]
        return [{"key": k, "a": x.get(k), "b": y.get(k), "differs": x.get(k) != y.get(k)} for k in keys]

    support = sorted(set(a["support"]) | set(b["support"]))
    equations = []
    for cid in list(a["equations"]) + [c for c in b["equations"] if c not in a["equations"]]:
        ea, eb = a["equations"].get(cid), b["equations"].get(cid)
        if ea is None or eb is None:
            equations.append({"id": cid, "kind": (ea or eb)["kind"], "only": "a" if eb is None else "b", "facts": [], "steps_a": [], "steps_b": []})
            continue
        facts = [r for r in rows(ea["facts"], eb["facts"]) if r["differs"]]
        steps_a = [s for s in ea["steps"] if s not in eb["steps"]]
        steps_b = [s for s in eb["steps"] if s not in ea["steps"]]
        if facts or steps_a or steps_b:
            equations.append({"id": cid, "kind": ea["kind"], "only": None, "facts": facts, "steps_a": steps_a, "steps_b": steps_b})
    return {
        "a": a["name"], "b": b["name"],
        "title_a": a["title"], "title_b": b["title"],
        "relation": relatives(a, b),
        "standardized": rows(a["standardized"], b["standardized"]),
        "config": rows(a["config"], b["config"]),
        "kinds": [a["kinds"], b["kinds"]],
        "blocks": [a["blocks"], b["blocks"]],
        "parameters": {
            "totals": rows({"total": a["parameters"]["total"], "active per token": a["parameters"]["active"]},
                           {"total": b["parameters"]["total"], "active per token": b["parameters"]["active"]}),
            "rows": rows(dict(a["parameters"]["rows"]), dict(b["parameters"]["rows"])),
            "kinds": [{"kind": k, "rows": rows(dict(a["parameters"]["kinds"].get(k, [])), dict(b["parameters"]["kinds"].get(k, [])))}
                      for k in list(a["parameters"]["kinds"]) + [k for k in b["parameters"]["kinds"] if k not in a["parameters"]["kinds"]]],
        },
        "support": [{"key": k, "a": a["support"].get(k), "b": b["support"].get(k)} for k in support
                    if a["support"].get(k) != b["support"].get(k)],
        "equations": equations,
    }


# --- the pages ----------------------------------------------------------------------------------------


def render(present: list[dict[str, Any]]) -> dict[str, str]:
    """The compare pages of the site's families (their ``summary``), by path relative to the site root:
    one per pair of near relatives, the page that assembles any pair, and the scripts holding their data."""
    summaries = sorted(present, key=lambda s: s["name"])
    pairs = []
    for i, x in enumerate(summaries):
        for y in summaries[i + 1:]:
            if relatives(x, y):
                pairs.append(ordered(x, y))
    env = environment()
    page = env.get_template("compare.html")
    files = {}
    for a, b in pairs:
        files[f"compare/{pair_file(a, b)}"] = page.render(d=diff(a, b), root="../", static=True)
    families = [{"name": s["name"], "title": s["title"]} for s in summaries]
    files["compare/index.html"] = env.get_template("compare.html").render(d=None, root="../", static=False, families=families,
                                                                          pairs=[[a["name"], b["name"], relatives(a, b)] for a, b in pairs])
    files[FAMILIES_SCRIPT] = _script("ATLAS_FAMILIES", {"families": families, "pairs": [[a["name"], b["name"]] for a, b in pairs]})
    files[SUMMARY_SCRIPT] = _script("ATLAS_COMPARE", {s["name"]: s for s in summaries})
    return files


def _script(name: str, data: Any) -> str:
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
