"""Standard values: a page per value the family produces, from support() in the facts (the one
vocabulary is atlas/model/vocabulary.py). A value support() lists with no place to read it here (GPT-2's
router_logits, say) has no page, and no card, search entry or link names it."""

from __future__ import annotations

from typing import Any

from atlas.model.architecture import profile
from atlas.render.pages.evidence import item
from atlas.render.pages.inputs import input_id, producers, reads_input
from atlas.render.pages.roles import anatomy, slug


def values(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every standard value the family produces, by name: layout, dims, shape at the checkpoint's
    sizes, description, where it is read, the condition under which it exists, the blocks that have it."""
    return {
        v["name"]: {
            "name": v["name"],
            "host": host["host"],
            "layout": v["layout"],
            "dims": list(v["dims"]),
            "shape": list(v["shape"]),
            "description": v["description"],
            "read_at": v["read_at"],
            "read": v["read"],
            "module": v["module"],
            "condition": v["condition"],
            "blocks": v["blocks"],
        }
        for host in facts["support"]["hosts"]
        for v in host["values"]
        if produced(v)
    }


def produced(value: dict[str, Any]) -> bool:
    """A support() row the family has somewhere: read at a place, and (for a block's value) in some block."""
    return value["read_at"] is not None and value["blocks"] != []


def value_pages(facts: dict[str, Any], vals: dict[str, dict[str, Any]], nodes: dict[str, dict[str, Any]]) -> None:
    """A page per standard value: layout, shape, what produces it, where it is read.

    A value read at a module's output (or inside its forward) is produced by that module. One read at a
    module's input (the experts' top_k_weights) was computed before it got there: its producer is what
    feeds that input, as the proof's chains hand it over (the router, whose forward returns it), and the
    module that receives it is named apart."""
    model_title = nodes["model"]["title"]
    preview = facts["preview"]["tensors"]
    first_anatomy = anatomy(facts["accounting"]["block_kinds"][0]["tree"])
    kinds = [slug(k["kind"]) for k in facts["accounting"]["block_kinds"]]
    shared = bool(profile(facts)["shared_expert"])
    for name, v in vals.items():
        nid = f"value.{name}"
        in_block = v["host"].startswith("layers")
        crumbs = [{"id": "model", "title": model_title}]
        if in_block:
            crumbs.append({"id": "blocks", "title": f"{facts['model']['num_blocks']} transformer blocks"})
        module = v["module"].replace("{i}", "i")
        at = _producer_page(module, nodes, facts)
        if at == "blocks" and (v.get("read") or {}).get("kind") == "input":
            at = kinds[0]  # a block's own input: the first kind's page receives it like every kind's
        handed = _input_page(facts, nodes, v, at)
        if handed is not None:
            made = producers(facts, nodes[handed]["feeder"], kinds)
        else:
            made = [{"id": at, "note": None}] if at else []
        related = PREVIEW_TOGETHER.get(name, (name,))
        shown = [k for k in sorted(preview, key=_preview_order) if k.split(".")[-1] in related] if name in {k.split(".")[-1] for k in preview} else []
        nodes[nid] = {
            "id": nid, "type": "value", "title": name, "name": name, "class": v["layout"], "constructor": "",
            "path": module, "where": f"{v['host']}.{name}" if v["host"] != "model" else f"model.{name}", "role": "value",
            "parameters": 0, "stored_buffers": 0, "instances": 1, "instances_label": "", "crumbs": crumbs,
            "description": v["description"] + ".", "layout": v["layout"], "dims": v["dims"], "shape": v["shape"],
            "read_at": v["read_at"], "condition": v["condition"], "producers": made, "previews": shown,
            "producer_id": made[0]["id"] if made else None,
            "receiver_id": at if handed is not None else None, "input_id": handed,
            "consumers": consumers(name, _anatomy_of(facts, v) or first_anatomy, shared), "blocks": v["blocks"],
            "equations": None, "io": None, "children": [], "tensors": [], "accounting": [], "evidence": [],
        }
        # the producers' code is the direct evidence of where the value comes from; where it is read at
        # an input, the lines handing it over are evidence too
        cited = set()
        for p in made:
            for ev in nodes.get(p["id"], {}).get("evidence", []):
                key = (ev["class"], ev["part"], tuple(ev["contains"]))
                if ev["direct"] and ev["part"] != "__init__" and key not in cited:
                    cited.add(key)
                    where = "" if ev["part"] == "forward" else ", which its forward calls"
                    who = nodes[p["id"]]["title"] + (f": {p['note']}" if p["note"] else "")
                    claim = f"{ev['class']}.{ev['part']}{where}: where {name} is computed ({who})."
                    returned = p.get("element") is not None and ev["part"] == "forward"
                    if returned:  # one of the results the forward returns: its return line too
                        claim = claim[:-1] + f", and returned as element {p['element']} of its results."
                    nodes[nid]["evidence"].append(item(facts, True, claim, ev["class"], ev["part"], ev["contains"] + (["return"] if returned else [])))
        if handed is not None:
            nodes[nid]["evidence"] += [{**ev, "direct": False, "claim": ev["claim"].replace(" hands over ", f" hands over {name} as ", 1)} for ev in nodes[handed]["evidence"]]


def _input_page(facts: dict[str, Any], nodes: dict[str, dict[str, Any]], v: dict[str, Any], at: str | None) -> str | None:
    """The input page of the module a value is read at, where it is read at that module's input."""
    if at is None or not v.get("read") or v["read"]["kind"] != "input" or at not in nodes:
        return None
    proof = facts["equations"]["components"].get(at)
    if proof is None:
        return None
    inp = next((i for i in proof["inputs"] if reads_input(facts, v, nodes[at], i)), None)
    page = input_id(at, inp["argument"]) if inp else None
    return page if page in nodes else None


def _anatomy_of(facts: dict[str, Any], v: dict[str, Any]) -> dict[str, Any] | None:
    """The anatomy of the first block kind that has the value (a hybrid's kinds differ)."""
    if not v.get("blocks"):
        return None
    kind = facts["blocks"][v["blocks"][0]]
    tree = next((k["tree"] for k in facts["accounting"]["block_kinds"] if k["kind"] == kind), None)
    return anatomy(tree) if tree else None


def consumers(name: str, a: dict[str, str | None], shared: bool = True) -> list[str]:
    """Where a value goes next, in the block as its anatomy has it (norms before, after or around each part);
    ``shared`` says the model has a shared expert, whose output the routed experts' is added to."""
    if name == "routed_output" and not shared:
        return ["the mixture's output, as it is: no shared expert is added"]
    if a.get("single"):  # a block of one mixer
        one = {
            "layer_input": [f"{a['pre_mixer'] or a['mixer']} (the mixer's branch)", "the add (the residual path)"],
            "attention_norm_output": [str(a["mixer"])], "mlp_norm_output": [str(a["mixer"])], "ssm_norm_output": [str(a["mixer"])],
            "attention_output": ["the add"], "mlp_output": ["the add"], "ssm_output": ["the add"],
        }
        return one.get(name) or CONSUMERS.get(name, [])
    block = {
        "layer_input": [f"{a['pre_attn'] or a['attn']} ({'the state-space branch' if a.get('ssm') else 'the attention branch'})", "the first add (the residual path)"],
        "ssm_norm_output": [str(a["attn"])],
        "ssm_output": [a["post_attn"] or "the first add"],
        "attention_norm_output": [str(a["attn"])],
        "attention_output": [a["post_attn"] or "the first add"],
        "layer_mid": [f"{a['pre_ffn'] or a['ffn']} (the MLP branch)", "the second add (the residual path)"],
        "mlp_norm_output": [str(a["ffn"])],
        "mlp_output": [a["post_ffn"] or "the second add"],
    }
    if a.get("parallel"):  # both sublayers read the block's input; one add takes both contributions
        block.update({
            "layer_input": [f"{a['pre_attn'] or a['attn']} (the attention branch)", f"{a['pre_ffn'] or a['pre_attn'] or a['ffn']} (the MLP branch)",
                            "the add (the residual path)"],
            "attention_norm_output": [str(a["attn"])] + ([str(a["ffn"])] if not a["pre_ffn"] else []),
            "attention_output": [a["post_attn"] or "the add, beside the MLP's output"],
            "mlp_output": [a["post_ffn"] or "the add, beside the attention's output"],
        })
    if a.get("dense"):  # the mixture reads the first dense MLP's input and is added at the block's end (LongCat-Flash)
        block.update({
            "layer_mid": [f"{a['pre_ffn']} (the MLP branch and the mixture's)", "the second add (the residual path)"],
            "mlp_norm_output": [f"{a['ffn']} (the mixture, added at the block's end)", f"{a['dense']} (the dense MLP)"],
            "mlp_output": ["the block's last add, after the second attention and dense MLP"],
        })
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
    "ssm_input": ["the mixer's input projection"],
    "ssm_projections": ["the split into the gate, the convolution's inputs and the time steps"],
    "ssm_scan_output": ["the gated norm"],
    "ssm_gate": ["the gated norm, through a SiLU"],
    "ssm_premix": ["the mixer's output projection"],
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


def weight_previews(facts: dict[str, Any], nodes: dict[str, dict[str, Any]]) -> None:
    """Each tensor page gets the histogram of the same tensor in the preview model: a block's tensor is
    read in the tiny model's block at the same index where it has one (the tiny model keeps the
    checkpoint's pattern of block kinds), else in the first tiny block that has it."""
    histograms = facts["preview"]["weight_histograms"]
    block_path = facts["model"]["block_path"]
    tiny_blocks = facts["preview"]["config"]["num_hidden_layers"]
    for node in nodes.values():
        if node["type"] != "tensor":
            continue
        path, block = node["path"], None
        if path.startswith(block_path + "."):
            index, _, rest = path[len(block_path) + 1:].partition(".")
            candidates = ([int(index)] if int(index) < tiny_blocks else []) + list(range(tiny_blocks))
            block = next((j for j in candidates if f"{block_path}.{j}.{rest}" in histograms), None)
            path = f"{block_path}.{block}.{rest}"
        found = histograms.get(path)
        if found is not None:
            node["histogram"] = {**found, "name": path, "block": block}


def missing_words(facts: dict[str, Any]) -> dict[str, list[dict[str, str]]]:
    """Where each support() value is missing, by reason, with its blocks as ranges in numeric order:
    {name: [{"blocks": "1–60", "count": 60, "why": ...}]}."""
    from atlas.model.block_kinds import index_ranges

    out = {}
    for host in facts["support"]["hosts"]:
        for v in host["values"]:
            if not v["missing"]:
                continue
            by_reason: dict[str, list[int]] = {}
            for block, why in v["missing"].items():
                # the same reason in every block it names ("block 60's MLP ..."): one line for them all
                general = why.replace(f"block {block}'s ", "the block's ").replace(f"block {block} ", "the block ")
                by_reason.setdefault(general, []).append(int(block))
            groups = [{"blocks": index_ranges(sorted(b)), "count": len(b), "why": why} for why, b in by_reason.items()]
            out[v["name"]] = sorted(groups, key=lambda g: int(g["blocks"].split("–")[0].split(",")[0]))
    return out
