"""What a family costs to run: the KV cache, the weights in memory, the FLOPs of a token, the active
parameters; each figure with the formula that made it and the check that proved it.

The figures that depend on the reader's context length are kept as coefficients per block kind
(atlas.cost.coefficients), so that the build and the page's script evaluate one and the same
expression. The coefficients come from the model's own modules (atlas.cost.blocks); the same rules,
applied to the tiny preview model, must give what a real run of that model measures
(atlas.cost.measured). This module gathers them into facts["cost"] (cost_facts) and gives the page
its figures at the reader's context, batch and cache dtype (figures), with the words of the checks.
"""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.model.introspect import num_blocks
from atlas.cost.active import active_breakdown
from atlas.cost.blocks import block_terms
from atlas.cost.coefficients import FIXED_STATES, cache_values_at, flops_at, pooled_key_flops, pooled_values
from atlas.cost.compressed import stream_collapse_flops
from atlas.cost.measured import measured_checks
from atlas.cost.model_figure import keys_seen, model_flops_at, model_terms, terms_flops
from atlas.cost.weights import weight_figures

DEFAULT_CONTEXT = 4096  # the context the page shows before the reader moves the slider
CACHE_DTYPES = {"BF16": 2, "FP8": 1}  # bytes per cached value the page offers


# --- the facts ---------------------------------------------------------------------------------------


def cost_facts(family: str, model, config, facts: dict[str, Any], layout: list, run) -> dict[str, Any]:
    """facts["cost"]: the coefficients per block kind at the checkpoint's sizes, the weights in memory,
    the active parameters, and the measurements of the preview run that check the rules."""
    from atlas.model.introspect import find_block_list
    from atlas.inputs.layers import layer_config  # a block built with sizes of its own (Gemma 4's global blocks)

    from atlas.model.roles import block_roles

    _, blocks = find_block_list(model, num_blocks(config))
    kinds = []
    for k in facts["block_kinds"]:
        block, block_config = blocks[k["indices"][0]], layer_config(config, k["indices"][0])
        t = block_terms(block, block_config, k["attention_type"], family)
        kinds.append({
            "kind": k["id"], "label": k["label"], "count": k["count"], "attention": t.attention, "window": t.window,
            "cache": {"values": t.cache_values, "cap": t.cache_cap, "formula": t.cache_formula,
                      "expanded": t.expanded_values, "expanded_formula": t.expanded_formula,
                      **({"state": t.state_values} if t.state_values else {}),
                      **({"compressed": t.compressed} if t.compressed else {})},
            "flops": {"fixed": t.flops_fixed, "per_key": t.flops_per_key, "keys_cap": t.keys_cap, "formula": t.flops_formula,
                      **({"compressed_keys": t.compressed_keys} if t.compressed_keys else {})},
            "routed": list(t.routed) if t.routed else None,
            "model": model_terms(block, block_roles(block), block_config, t),
        })
    head = model.get_output_embeddings()
    head_values = head.weight.numel()
    hidden = config.hidden_size
    # a state-space stack states no length at all; the controls still need a last stop
    stated_context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)
    max_context = stated_context or DEFAULT_CONTEXT
    collapse, _ = stream_collapse_flops(model)
    flops = {
        "head": {"flops": 2 * head_values + collapse,
                 "formula": f"2 × {grouped(head_values)} values of the output head ({grouped(config.vocab_size)} × {grouped(hidden)}), "
                            "multiplied whether or not it is tied to the embedding"
                            + (f"; + {grouped(collapse)} for the map that collapses the residual streams before the final norm" if collapse else "")},
        "kinds": [{"kind": k["kind"], "label": k["label"], "count": k["count"], **k["flops"]} for k in kinds],
    }
    # the model's own figure (atlas.cost.model_figure); the kinds above are transformers' eager execution
    flops["model"] = {"head": flops["head"], "kinds": [{"kind": k["kind"], "label": k["label"], "count": k["count"], **k["model"]} for k in kinds]}
    checks = measured_checks(family, run, facts["model"]["block_path"])
    latent = any(k["attention"] == "latent" for k in kinds)
    active = active_breakdown(model, blocks, facts, config)
    checks.append({"figure": "active parameters", "formula": active["total"], "measured": facts["accounting"]["model"]["active"],
                   "how": "the parts summed, against the model's own count: every value less the routed experts a token is not sent to"})
    from atlas.families import load

    published = dict(load(family).published_active)
    if published:
        active["published"] = published
    out = {
        "context": {"default": min(DEFAULT_CONTEXT, max_context), "max": max_context, "stated": bool(stated_context)},
        "cache": {
            "dtypes": CACHE_DTYPES,
            "latent": latent,
            "kinds": [{"kind": k["kind"], "label": k["label"], "count": k["count"], "attention": k["attention"],
                       "window": k["window"], **k["cache"]} for k in kinds],
            "words": _cache_words(kinds),
        },
        "flops": flops,
        "weights": weight_figures(model, blocks, facts, layout),
        "active": active,
        "checks": checks,
    }
    out["summary"] = summary(out)
    return out



def _cache_words(kinds: list[dict[str, Any]]) -> str:
    """What each kind of block keeps between steps, in words."""
    attention = {k["attention"] for k in kinds}
    parts = []
    if "latent" in attention:
        parts.append("transformers' cache holds each latent-attention block's latent (keys: the normalized latent; "
                     "values: the key part every head shares) and expands it with kv_b_proj at every step; the per-head keys "
                     "and values a cache of expanded heads would hold are shown beside it")
    if "sliding" in attention:
        parts.append("a sliding-window block keeps only its most recent positions: between steps, one fewer than its window")
    if "chunked" in attention:
        parts.append("a chunked-attention block reads only the earlier positions of its own chunk, and transformers' cache "
                     "holds it as a window of the chunk's length: between steps, one fewer than the chunk's length")
    if "compressed" in attention:
        parts.append("a compressed block keeps its window's most recent positions (one fewer than the window) and, beside "
                     "them, one pooled key for every closed window of positions, so its cache still grows, by a key every few positions")
    if "linear" in attention:
        parts.append("a linear-attention block holds a fixed-size recurrent state and its convolution's last inputs, "
                     "the same at any context (counted as one position of that size)")
    if "recurrent" in attention:
        parts.append("a recurrent block keeps its convolution's last inputs and its RG-LRU's state, one number a channel, "
                     "however long the context (transformers holds both on the block's modules)")
    if "state" in attention:
        parts.append("a state-space block keeps a state of fixed size, its convolution's last inputs and its scan's "
                     "recurrent state, however long the context")
    if "full_and_state" in attention:
        parts.append("a block that runs attention and a state-space mixer side by side keeps both: the attention's keys and "
                     "values at every position, and the mixer's fixed-size state beside them")
    if "none" in attention:
        parts.append("a block with neither attention nor state keeps nothing")
    if "full" in attention:
        other = "every other attention block" if attention & {"state", "none", "recurrent"} else "every other block"
        parts.append(f"{other} keeps every position" if parts else "every block keeps every position")
    return "; ".join(parts) + "."



# --- the page's figures ------------------------------------------------------------------------------


def contexts(cost: dict[str, Any]) -> list[int]:
    """The slider's stops: powers of two from 128 up to the longest context, and that context itself."""
    top = cost["context"]["max"]
    stops = [c for c in (2 ** p for p in range(7, 25)) if c < top]
    return stops + [top]



def figures(cost: dict[str, Any], context: int, batch: int = 1, dtype: str = "BF16") -> dict[str, Any]:
    """Every figure of the cost section at one context, batch and cache dtype, each with its formula.
    static/cost.js computes the same figures in the browser when the reader moves the controls."""
    size = cost["cache"]["dtypes"][dtype]
    kinds = cost["cache"]["kinds"]
    growing = [k for k in kinds if k["attention"] not in FIXED_STATES]  # a fixed state does not grow per position
    per_token = sum(k["count"] * k["values"] for k in growing) * size
    held = cache_values_at(kinds, context) * size * batch
    rows = []
    model = cost["flops"]["model"]
    for k, f, m in zip(kinds, cost["flops"]["kinds"], model["kinds"]):
        positions = min(context, k["cap"]) if k["cap"] else context
        keys = min(context, f["keys_cap"]) if f["keys_cap"] else context
        rows.append({"kind": k["label"], "count": k["count"], "attention": k["attention"], "positions": positions,
                     "cache_bytes": k["count"] * (k["values"] * positions + k.get("state", 0) + pooled_values(k.get("compressed"), context)) * size * batch,
                     "flops": k["count"] * (f["fixed"] + f["per_key"] * keys + pooled_key_flops(f.get("compressed_keys"), context)),
                     "model_flops": k["count"] * (m["fixed"] + terms_flops(m["terms"], context)),
                     **({"absorbed_flops": k["count"] * (m["fixed"] + terms_flops(m["absorbed"]["terms"], context))} if m.get("absorbed") else {})})
    out = {
        "per_token": per_token,
        "per_token_formula": " + ".join(f"{k['count']} × {grouped(k['values'])}" for k in growing) + f" values × {size} bytes ({dtype})",
        "cache": held,
        "cache_formula": " + ".join(
            f"{k['count']} × {'(' if k.get('state') or k.get('compressed') else ''}{grouped(k['values'])} × {'min(' + grouped(context) + ', ' + grouped(k['cap']) + ')' if k['cap'] else grouped(context)}"
            + (f" + {grouped(k['state'])}" if k.get("state") else "") + _pooled_words(k.get("compressed"), context)
            + (")" if k.get("state") or k.get("compressed") else "")
            for k in kinds) + f" values × {size} bytes × batch {batch}",
        "flops": flops_at(cost["flops"], context),
        "flops_formula": f"head {grouped(cost['flops']['head']['flops'])} + " + " + ".join(
            f"{f['count']} × ({grouped(f['fixed'])} + {grouped(f['per_key'])} × {'min(' + grouped(context) + ', ' + grouped(f['keys_cap']) + ')' if f['keys_cap'] else grouped(context)}"
            + (f" + {grouped(f['compressed_keys']['per_key'])} × {grouped(context // f['compressed_keys']['every'])} pooled keys" if f.get("compressed_keys") else "") + ")"
            for f in cost["flops"]["kinds"]),
        "model_flops": model_flops_at(model, context),
        "model_flops_formula": _model_formula(model, context, absorbed=False),
        "rows": rows,
        "weights": [{"name": w["name"], "bytes": w["bytes"], "total": w["bytes"] + held} for w in cost["weights"]],
    }
    if cost["cache"]["latent"]:
        expanded = sum(k["count"] * (k["expanded"] or k["values"]) for k in kinds) * size
        out["expanded_per_token"] = expanded
        out["expanded_per_token_formula"] = " + ".join(f"{k['count']} × {grouped(k['expanded'] or k['values'])}" for k in kinds) + f" values × {size} bytes"
    if any(k["cap"] or k.get("compressed") for k in growing):  # windows: the first positions' bytes are not every position's
        out["per_position_here"] = held // (context * batch)
        out["per_position_here_formula"] = f"{grouped(held)} bytes ÷ ({grouped(context)} positions × batch {batch}), rounded down"
    if any(m.get("absorbed") for m in model["kinds"]):
        out["absorbed_flops"] = model_flops_at(model, context, absorbed=True)
        out["absorbed_flops_formula"] = _model_formula(model, context, absorbed=True)
    return out



def _model_formula(model: dict[str, Any], context: int, absorbed: bool) -> str:
    """The model figure's sum at ``context``, as static/cost.js writes it: per kind, blocks × (fixed + FLOPs
    per key × keys seen, for each attention term)."""
    parts = []
    for m in model["kinds"]:
        terms = m["absorbed"]["terms"] if absorbed and m.get("absorbed") else m["terms"]
        inner = "".join(f" + {grouped(t['per_key'])} × {grouped(keys_seen(t, context))}" for t in terms)
        parts.append(f"{m['count']} × ({grouped(m['fixed'])}{inner})")
    return f"head {grouped(model['head']['flops'])} + " + " + ".join(parts)



def summary(cost: dict[str, Any]) -> dict[str, Any]:
    """facts["cost"]["summary"]: a few figures at the default context, batch 1, a BF16 cache, for a
    compare page's rows or a fact sheet: each is also on the family page, with its formula and check."""
    context = cost["context"]["default"]
    fig = figures(cost, context)
    stored = cost["weights"][0]
    active = cost["active"]
    return {
        "context": context,
        "kv_cache_bytes_per_position": fig["per_token"],
        "kv_cache_bytes": fig["cache"],
        "weights_bytes": stored["bytes"],
        "flops_per_token": fig["model_flops"],
        "flops_per_token_absorbed": fig.get("absorbed_flops"),
        "flops_per_token_eager": fig["flops"],
        "active_parameters": active["total"],
        "active_parameters_fewest": active.get("fewest"),
    }



def _pooled_words(series: list | None, context: int) -> str:
    """The pooled terms of a cache formula, as static/cost.js writes them."""
    return "".join(f" + {grouped(s['entry'])} × {grouped(context // s['every'])} pooled keys + {grouped(s['open'])} × {grouped(context % s['every'])}"
                   + (f" + {grouped(s['overlap'])}" if context >= s["every"] and s["overlap"] else "") for s in series or [])



def check_words(cost: dict[str, Any]) -> dict[str, str]:
    """What proved each kind of figure, in words, from the checks the build ran."""
    checks = cost["checks"]
    cache = [c for c in checks if c["figure"].startswith("KV cache")]
    flops = [c for c in checks if c["figure"].startswith("FLOPs")]
    model = [c for c in checks if c["figure"].startswith("model FLOPs of block")]
    absorbed = [c for c in checks if c["figure"].startswith("model FLOPs with weight absorption")]
    return {
        "cache": (f"Checked: the same rule at the preview's tiny sizes gave exactly the values transformers' cache held after the "
                  f"prompt, in each of the {len(cache)} blocks ({grouped(sum(c['measured'] for c in cache))} values in all)."),
        "flops": (f"Checked: the same rule at the preview's tiny sizes gave exactly the FLOPs torch.utils.flop_counter counted for one "
                  f"more token, block by block and at the head ({grouped(flops[-1]['measured'])} in all)."),
        "active": next(f"Checked: {c['how']}." for c in checks if c["figure"] == "active parameters"),
        "model": (f"Checked: the same rule at the preview's tiny sizes gave exactly the FLOPs torch.utils.flop_counter counted for one "
                  f"more token in each of the {len(model)} blocks, with hooks charging each expert only for the tokens routed to it"
                  + (", kv_b_proj only for the new token's latent" if absorbed else "")
                  + " and the attention only for the keys the token sees (its weights not zero)."),
        "absorbed": (f"Checked: the absorbed arithmetic on one latent attention of the tiny model, with its own kv_b_proj, counted "
                     f"{grouped(absorbed[0]['measured'])} FLOPs, as the rule gives, and its output equals the expanded heads' output."
                     if absorbed else ""),
        "eager": ("What transformers' eager code runs for the token, as torch.utils.flop_counter counts it; checked block by block "
                  "on the preview run."),
    }
