"""Standard values: what the diagram's parts produce, and a page per value. support() (when the
facts carry it) is the source; until then a small vocabulary names the values of the parts the
diagram draws."""

from __future__ import annotations

from typing import Any

from atlas.pages.roles import anatomy, slug
from atlas.pages.sizes import Sizes, routing


LAYOUT_DIMS = {
    "Tokens": ["batch", "seq"],
    "Residual": ["batch", "seq", "hidden_size"],
    "Logits": ["batch", "seq", "vocab_size"],
    "RouterLogits": ["batch", "seq", "num_experts"],
    "ExpertWeights": ["batch", "seq", "top_k"],
    "ExpertIndices": ["batch", "seq", "top_k"],
}

# name: (host, layout, description, read at)
VALUES = {
    "token_embeddings": ("model", "Residual", "One learned vector per token: the residual stream as block 0 receives it", "the output of the child module embed_tokens"),
    "final_norm_output": ("model", "Residual", "The last block's output after the final norm: what the head reads", "the output of the child module norm"),
    "lm_head_output": ("model", "Logits", "The head's score for every vocabulary entry at every position", "the output of the child module lm_head"),
    "logits": ("model", "Logits", "What the model returns; with no softcap or scale past the head, the head's scores", "the model's own output"),
    "layer_input": ("layers[i]", "Residual", "The residual stream entering the block", "the block's own input"),
    "attention_norm_output": ("layers[i]", "Residual", "The stream normalized for the attention", "the output of the child module input_layernorm"),
    "attention_output": ("layers[i].self_attn", "Residual", "What the attention adds to the residual stream", "the attention module's own output"),
    "layer_mid": ("layers[i]", "Residual", "The residual stream after the attention's add, before the MLP's", "the input of the child module post_attention_layernorm"),
    "mlp_norm_output": ("layers[i]", "Residual", "The stream normalized for the MLP", "the output of the child module post_attention_layernorm"),
    "mlp_output": ("layers[i].mlp", "Residual", "What the MLP adds to the residual stream", "the MLP module's own output"),
    "layer_output": ("layers[i]", "Residual", "The residual stream leaving the block", "the block's own output"),
    "router_logits": ("layers[i].mlp", "RouterLogits", "The router's score for every expert, before the scoring function", "inside the router's forward: its linear map's output"),
    "expert_weights": ("layers[i].mlp", "ExpertWeights", "The weight each chosen expert's output is multiplied by", "the router's output, as the experts receive it"),
    "routed_output": ("layers[i].mlp", "Residual", "The chosen experts' outputs, weighted and summed", "the output of the child module experts"),
    "shared_expert_output": ("layers[i].mlp", "Residual", "The shared expert's output, which every token gets", "the output of the child module shared_experts"),
}

# The module each value is read from, relative to its host (for the diagram's cards).
VALUE_MODULES = {
    "token_embeddings": "model.embed_tokens",
    "final_norm_output": "model.norm",
    "lm_head_output": "lm_head",
    "logits": "",
    "layer_input": "model.layers.{i}",
    "attention_norm_output": "model.layers.{i}.input_layernorm",
    "attention_output": "model.layers.{i}.self_attn",
    "layer_mid": "model.layers.{i}",
    "mlp_norm_output": "model.layers.{i}.post_attention_layernorm",
    "mlp_output": "model.layers.{i}.mlp",
    "layer_output": "model.layers.{i}",
    "router_logits": "model.layers.{i}.mlp.gate",
    "expert_weights": "model.layers.{i}.mlp.gate",
    "routed_output": "model.layers.{i}.mlp.experts",
    "shared_expert_output": "model.layers.{i}.mlp.shared_experts",
}


def _resolve(dims: list[str], s: Sizes) -> list[Any]:
    rt = routing(s, None)
    sizes = {
        "hidden_size": s.get("hidden_size"),
        "vocab_size": s.get("vocab_size"),
        "num_experts": rt["n"],
        "top_k": rt["k"],
        "num_heads": s.get("num_heads"),
        "num_kv_heads": s.get("num_kv_heads"),
        "head_dim": s.get("head_dim"),
        "qk_head_dim": s.get("qk_head_dim"),
        "intermediate_size": s.get("intermediate_size"),
    }
    return [sizes.get(d) if sizes.get(d) is not None else d for d in dims]


def values(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every standard value the pages name, by name: layout, dims, shape at the checkpoint's sizes,
    description, where it is read, the condition under which it exists."""
    s = Sizes(facts)
    out: dict[str, dict[str, Any]] = {}
    support = facts.get("support")
    if support:
        for host in support.get("hosts", []):
            for v in host.get("values", []):
                out.setdefault(
                    v["name"],
                    {
                        "name": v["name"],
                        "host": host.get("host", ""),
                        "layout": v.get("layout", ""),
                        "dims": list(v.get("dims") or []),
                        "shape": list(v.get("shape") or _resolve(list(v.get("dims") or []), s)),
                        "description": v.get("description", ""),
                        "read_at": v.get("read_at", ""),
                        "module": v.get("module") or "",
                        "condition": v.get("condition"),
                        "blocks": v.get("blocks"),
                        "source": "support",
                    },
                )
    block_path = facts["model"]["block_path"]
    rows = facts["accounting"]["model"]["rows"]
    at = {
        "token_embeddings": next((r["path"] for r in rows if "Embed" in r["class"]), None),
        "final_norm_output": next((r["path"] for r in rows if "Norm" in r["class"]), None),
        "lm_head_output": next((r["path"] for r in rows if r["path"].split(".")[-1] == "lm_head"), None),
    }
    for name, (host, layout, description, read_at) in VALUES.items():
        if name in out:
            continue
        dims = LAYOUT_DIMS[layout]
        module = at.get(name) or VALUE_MODULES[name].replace("model.layers", block_path)
        if name == "token_embeddings":
            read_at = read_at.replace("embed_tokens", module.split(".")[-1])
            if sum("Embed" in r["class"] for r in rows) > 1:
                description = "One learned vector per token; block 0 receives it with the position embeddings added"
        read_at = read_at.replace("child module norm", f"child module {module.split('.')[-1]}") if name == "final_norm_output" else read_at
        out[name] = {
            "name": name,
            "host": host,
            "layout": layout,
            "dims": dims,
            "shape": _resolve(dims, s),
            "description": description,
            "read_at": read_at,
            "module": module,
            "condition": None,
            "blocks": None,
            "source": "diagram",
        }
    return out


def value_pages(facts: dict[str, Any], vals: dict[str, dict[str, Any]], nodes: dict[str, dict[str, Any]]) -> None:
    """A page per standard value: layout, shape, what produces it, where it is read."""
    model_title = nodes["model"]["title"]
    preview = (facts.get("preview") or {}).get("tensors") or {}
    first_anatomy = anatomy(facts["accounting"]["block_kinds"][0]["tree"])
    for name, v in vals.items():
        nid = f"value.{name}"
        in_block = v["host"].startswith("layers")
        crumbs = [{"id": "model", "title": model_title}]
        if in_block:
            crumbs.append({"id": "blocks", "title": f"{facts['model']['num_blocks']} transformer blocks"})
        module = (v.get("module") or "").replace("{i}", "i")
        producer = _producer_page(module, nodes, facts)
        related = PREVIEW_TOGETHER.get(name, (name,))
        shown = [k for k in sorted(preview, key=_preview_order) if k.split(".")[-1] in related] if name in {k.split(".")[-1] for k in preview} else []
        nodes[nid] = {
            "id": nid, "type": "value", "title": name, "name": name, "class": v["layout"], "constructor": "",
            "path": module, "where": f"{v['host']}.{name}" if v["host"] != "model" else f"model.{name}", "role": "value",
            "parameters": 0, "stored_buffers": 0, "instances": 1, "instances_label": "", "crumbs": crumbs,
            "description": v["description"] + ".", "layout": v["layout"], "dims": v["dims"], "shape": v["shape"],
            "read_at": v["read_at"], "condition": v.get("condition"), "producer_id": producer, "previews": shown,
            "consumers": consumers(name, first_anatomy), "blocks": v.get("blocks"),
            "producer_label": "read from" if "input" in (v.get("read_at") or "") and "output" not in (v.get("read_at") or "") else "producer",
            "equations": None, "io": None, "children": [], "tensors": [], "accounting": [], "evidence": [],
        }
        # the producer's forward is the direct evidence of where the value comes from
        for ev in nodes.get(producer, {}).get("evidence", []):
            if ev["direct"] and ev["part"] == "forward":
                nodes[nid]["evidence"].append({**ev, "claim": f"{ev['class']}.forward, where {name} is computed."})


def consumers(name: str, a: dict[str, str | None]) -> list[str]:
    """Where a value goes next, in the block as its anatomy has it (norms before, after or around each part)."""
    block = {
        "layer_input": [f"{a['pre_attn'] or a['attn']} (the attention branch)", "the first add (the residual path)"],
        "attention_norm_output": [str(a["attn"])],
        "attention_output": [a["post_attn"] or "the first add"],
        "layer_mid": [f"{a['pre_ffn'] or a['ffn']} (the MLP branch)", "the second add (the residual path)"],
        "mlp_norm_output": [str(a["ffn"])],
        "mlp_output": [a["post_ffn"] or "the second add"],
    }
    return block.get(name) or CONSUMERS.get(name, [])


# Where the other values go next.
CONSUMERS = {
    "token_embeddings": ["the first block, as its input"],
    "layer_output": ["the next block, or the final norm after the last block"],
    "final_norm_output": ["the language-model head"],
    "lm_head_output": ["the logits the model returns"],
    "router_logits": ["the router's scoring and top-k choice"],
    "expert_weights": ["the experts, which scale their outputs by it"],
    "expert_indices": ["the experts, which run only the chosen ones"],
    "routed_output": ["the mixture's sum with the shared expert"],
    "shared_expert_output": ["the mixture's sum with the routed experts"],
    "attention_probabilities": ["the mix of the values"],
    "attention_scores": ["the softmax"],
}


# Values drawn together: the router's choice is its indices and their weights.
PREVIEW_TOGETHER = {
    "expert_weights": ("expert_weights", "expert_indices"),
    "expert_indices": ("expert_weights", "expert_indices"),
}


def _preview_order(key: str) -> tuple:
    """layers.10 after layers.9: numeric parts compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("."))


def _producer_page(module: str, nodes: dict[str, dict[str, Any]], facts: dict[str, Any]) -> str | None:
    """The component page of the module a value is read at, for block modules the first kind that has it."""
    if not module:
        return "model"
    parts = module.split(".")
    depth = len(facts["model"]["block_path"].split("."))
    if ".".join(parts[:depth]) == facts["model"]["block_path"] and len(parts) > depth:
        rest = ".".join(parts[depth + 1:])
        if not rest:
            return "blocks"  # the block itself: every kind
        for k in facts["accounting"]["block_kinds"]:
            nid = slug(k["kind"]) + ("." + rest if rest else "")
            if nid in nodes:
                return nid
        return "blocks"
    nid = slug(parts[-1])
    return nid if nid in nodes else "model"
