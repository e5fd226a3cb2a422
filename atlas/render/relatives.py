"""Near relatives by what the architectures share, not by whose code they reuse.

A family's traits are read from its facts: the kinds of attention its cache holds (full, sliding,
latent, linear, state), the kinds of component its proven equations name (latent attention, a
mixture, a state-space mixer, hyper-connections), how its router scores and picks experts, its
positions, norms, MLPs, activations and residual wiring. Two families are as near as the weighted
share of their traits they hold in common (shared over all either holds), so a family with many
traits is not everyone's relative. Weights say what a reader weighs first: the attention and the
components over a norm's flavour.
"""

from __future__ import annotations

from typing import Any

# aspect -> weight in the score; the order is the order the shared traits are named in
WEIGHTS = {"attention": 3, "component": 2, "routing": 2, "positions": 2, "mlp": 1, "norm": 1, "activation": 1, "residual": 1}
# components every family has, or whose kind says nothing of the architecture
PLAIN = {None, "", "linear", "activation", "dropout", "norm", "embedding", "block", "dense_mlp", "attention", "rotary_table"}
FEATURE_ASPECTS = {"RoPE": "positions", "NoPE": "positions", "ALiBi": "positions", "MoE": "routing"}
STORAGE = {"FP8", "MXFP4"}  # features of how the weights are stored, not of the architecture
CACHE_WORDS = {"full": "full causal attention", "sliding": "sliding-window attention", "latent": "latent attention cache",
               "linear": "linear-attention state", "state": "state-space state", "compressed": "compressed attention cache"}
TOP = 8  # relatives named on the page that compares any pair
STATIC = 3  # relatives of each family that get a page of their own


def traits(facts: dict[str, Any]) -> list[list[str]]:
    """The family's architecture as [aspect, trait] pairs, sorted, each once."""
    found: set[tuple[str, str]] = set()
    for k in facts["cost"]["cache"]["kinds"]:
        found.add(("attention", CACHE_WORDS.get(k["attention"], str(k["attention"]).replace("_", " "))))
    for f in facts["features"]:
        if f["abbreviation"] not in STORAGE:
            found.add((FEATURE_ASPECTS.get(f["abbreviation"], "attention"), f"{f['name']} ({f['abbreviation']})"))
    components = facts["equations"]["components"]
    kind_of = {cid: c["facts"].get("kind", {}).get("value") for cid, c in components.items()}
    for cid, c in components.items():
        kind = kind_of[cid]
        values = {k: f["value"] for k, f in c["facts"].items() if k != "kind"}
        if kind not in PLAIN:
            found.add(("component", str(kind).replace("_", " ")))
        found.update(_component_traits(kind, values))
        if kind == "norm" and "attention" in str(kind_of.get(cid.rsplit(".", 1)[0], "")):
            found.add(("norm", "a norm inside the attention"))
        if kind == "block" and isinstance(values.get("norms"), dict) and any(v for k, v in values["norms"].items() if k.startswith("after")):
            found.add(("norm", "norms after the sublayers too"))
    if any(v["name"] == "position_embeddings" for h in facts["support"]["hosts"] for v in h["values"]):
        found.add(("positions", "a learned position table"))
    return sorted([list(t) for t in found], key=lambda t: (list(WEIGHTS).index(t[0]), t[1]))


def _component_traits(kind: str | None, values: dict[str, Any]) -> set[tuple[str, str]]:
    found = set()
    if kind == "router":
        found.add(("routing", f"{values.get('routing', 'routing').replace('_', ' ')} router"))
        if values.get("selection_bias"):
            found.add(("routing", "a bias that steers the choice of experts"))
        if values.get("hash_routing"):
            found.add(("routing", "hash routing"))
    if kind == "mixture" and values.get("shared_expert"):
        found.add(("routing", "a shared expert"))
    if kind == "dense_mlp" and isinstance(values.get("mlp"), str):
        found.add(("mlp", f"{values['mlp']} MLP"))
    if kind == "experts" and isinstance(values.get("experts"), str):
        found.add(("mlp", f"experts as {values['experts'].replace('_', ' ')}"))
    if kind == "activation" and isinstance(values.get("activation"), str):
        found.add(("activation", values["activation"]))
    if kind in ("norm", "weightless_norm") and isinstance(values.get("norm"), str):
        found.add(("norm", f"{values['norm'].replace('_', ' ')} norm"))
    if kind == "block" and isinstance(values.get("residual"), str):
        found.add(("residual", f"{values['residual']} residual"))
    if kind == "embedding" and values.get("embedding") not in (None, "lookup"):
        found.add(("positions" if "position" in str(values["embedding"]) else "mlp", str(values["embedding"]).replace("_", " ")))
    return found


def nearness(a: list[list[str]], b: list[list[str]]) -> tuple[float, list[list[str]]]:
    """How near two families' traits are (0 to 1: the weighted share they hold in common) and the shared traits."""
    sa, sb = {tuple(t) for t in a}, {tuple(t) for t in b}
    weight = lambda ts: sum(WEIGHTS[t[0]] for t in ts)  # noqa: E731
    union = weight(sa | sb)
    shared = [t for t in a if tuple(t) in sb]
    return (weight(sa & sb) / union if union else 0.0), shared


def ranked(summaries: list[dict[str, Any]], top: int = TOP) -> dict[str, list[dict[str, Any]]]:
    """Each family's nearest ``top`` others: name, title, score in percent, the traits they share."""
    out = {}
    for s in summaries:
        scored = []
        for o in summaries:
            if o["name"] != s["name"]:
                score, shared = nearness(s["traits"], o["traits"])
                scored.append({"name": o["name"], "title": o["title"], "score": round(100 * score), "shared": [t[1] for t in shared]})
        scored.sort(key=lambda r: (-r["score"], r["name"]))
        out[s["name"]] = [r for r in scored[:top] if r["score"] > 0]
    return out


def static_pairs(near: dict[str, list[dict[str, Any]]], per_family: int = STATIC) -> set[frozenset[str]]:
    """The pairs that get a page of their own: each family with its ``per_family`` nearest."""
    return {frozenset((name, r["name"])) for name, rows in near.items() for r in rows[:per_family]}
