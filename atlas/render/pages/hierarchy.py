"""The component hierarchy: model › blocks › block kind › component › sub-component › tensor, one
page each, with breadcrumbs, a description, the constructor call, equations, inputs and outputs,
the accounting table and the evidence."""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.render.pages.evidence import called, evidence, holding, item, tensor_evidence, uses
from atlas.render.pages.roles import anatomy, fact, role, slug
from atlas.render.pages.shapes import io, named_dims
from atlas.render.pages.sizes import Sizes
from atlas.render.pages.titles import title_of
from atlas.render.pages.words import describe


def _kind_title(kind: dict[str, Any]) -> str:
    label = kind["label"]
    return label[:1].upper() + label[1:]


def _plural(n: int, label: str) -> str:
    return f"{n} {label}" + ("s" if n != 1 else "")


def _calc(node: dict[str, Any]) -> str:
    return "sum of its components" if (node["children"] or len(node["tensors"]) > 1) else (node["tensors"][0]["calculation"] if node["tensors"] else "no parameters")


def proven(facts: dict[str, Any], nid: str) -> dict[str, Any] | None:
    """A component's equations as the proof ran them (atlas.proof): its steps, summary and how closely
    they reproduced the module; for a module the forward never calls, why it has none."""
    eq = facts["equations"]["components"].get(nid)
    if eq is None:
        why = facts["equations"]["not_called"].get(nid)
        return {"not_called": why} if why else None
    # a summary step that folds a step it leaves out prints the folded expression (atlas.proof.summaries)
    summary = [{**st, "tex": st.get("summary_tex") or st["tex"]} for st in eq["steps"] if st["summary"]]
    return {**eq, "summary": summary or eq["steps"]}


def hierarchy(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every component and tensor page, by id, in reading order."""
    s = Sizes(facts)
    acc = facts["accounting"]
    model_acc = acc["model"]
    n_blocks = facts["model"]["num_blocks"]
    block_path = facts["model"]["block_path"]
    nodes: dict[str, dict[str, Any]] = {}
    model_title = "The whole model"
    blocks_title = f"{n_blocks} transformer blocks"

    rows_by_path = {r["path"]: r for r in model_acc["rows"]}
    model_node = {
        "id": "model", "type": "component", "title": model_title, "heading": f"{facts['family']['title']}: the whole model", "name": "model", "class": facts["model"]["class"],
        "constructor": f"{facts['model']['class']}(config)", "path": "", "where": "the whole model",
        "role": "model", "parameters": model_acc["total"], "stored_buffers": model_acc["stored_buffers"],
        "instances": 1, "instances_label": "", "crumbs": [],
        "description": f"{n_blocks} transformer blocks between a token embedding and a language-model head; {grouped(model_acc['total'])} weight parameters.",
        "equations": proven(facts, "model"),
        "io": {"in": [{"symbol": "I", "dims": named_dims(("B", "batch"), ("T", "positions"))}],
               "out": [{"symbol": "z", "dims": named_dims(("B", "batch"), ("T", "positions"), (s.get("vocab_size"), "vocab"))}]},
        "children": [], "tensors": [], "accounting": [], "evidence": [],
    }
    model_node["evidence"] = model_evidence(facts)
    nodes["model"] = model_node
    containers = facts["model"]["containers"]
    list_owner = containers[block_path.rpartition(".")[0]]

    kinds = acc["block_kinds"]
    kind_info = {k["id"]: k for k in facts["block_kinds"]}
    blocks_node = {
        "id": "blocks", "type": "component", "title": blocks_title, "name": "layers", "class": "ModuleList",
        "constructor": f"nn.ModuleList({facts['model']['block_class']}(config, layer_idx) for layer_idx in range({n_blocks}))",
        "path": block_path, "where": f"{block_path}[0–{n_blocks - 1}]", "role": "blocks",
        "parameters": sum(k["total"] for k in kinds), "stored_buffers": sum(k["per_instance_stored_buffers"] * k["instances"] for k in kinds),
        "instances": 1, "instances_label": "", "crumbs": [{"id": "model", "title": model_title}],
        "description": "The stack of blocks, grouped by structure: " + "; ".join(f"{_plural(k['instances'], k['label'])} ({kind_info[k['kind']]['ranges']})" for k in kinds) + ".",
        "equations": proven(facts, "blocks"),
        "io": {"in": [{"symbol": "x_0", "dims": named_dims(("B", "batch"), ("T", "positions"), (s.get("hidden_size"), "d"))}],
               "out": [{"symbol": f"x_{{{n_blocks}}}", "dims": named_dims(("B", "batch"), ("T", "positions"), (s.get("hidden_size"), "d"))}]},
        "children": [], "tensors": [], "accounting": [], "evidence": [],
    }
    list_attr = f"self.{block_path.split('.')[-1]}"
    blocks_node["evidence"] = [e for e in (
        item(facts, False, f"{list_owner} builds its blocks as {list_attr}, one per layer index; the layer index decides each block's kind.", list_owner, "__init__", [list_attr]),
        item(facts, False, f"{list_owner} runs the blocks of {list_attr} in order, each on the previous one's output.", list_owner, holding(facts, list_owner, list_attr), [list_attr]),
    ) if e]
    nodes["blocks"] = blocks_node

    def add_module(node, nid, crumbs, instances, instances_label, parent, where, parent_role=None, crumb_title=None, slot=None):
        r = role(node)
        title = title_of(node, parent_role, slot)
        page = {
            "id": nid, "type": "component", "title": title, "name": node["name"], "class": node["class"],
            "constructor": node["constructor"], "path": node["path"], "where": where, "role": r,
            "parameters": node["parameters"] + node["stored_buffers"], "stored_buffers": node["stored_buffers"],
            "instances": instances, "instances_label": instances_label, "crumbs": crumbs,
            "description": describe(node, s), "equations": proven(facts, nid), "io": io(node, s),
            "children": [], "tensors": [], "accounting": [], "evidence": evidence(facts, node, parent),
        }
        nodes[nid] = page
        here = crumbs + [{"id": nid, "title": crumb_title or title}]
        slots = {}
        children = node["children"]
        if r == "block":
            a = anatomy(node)
            order = ["pre_attn", "attn", "post_attn", "pre_ffn", "ffn", "post_ffn", "pre_mixer", "mixer"]
            slots = {a[k]: k for k in order if a.get(k)}
            rank = {a[k]: i for i, k in enumerate(order) if a.get(k)}
            children = sorted(children, key=lambda c: rank.get(c["name"], len(order)))
        if r == "norm_attention_norm":  # the block's two pre-norms, held by this child (DBRX's norm_attn_norm)
            norms = fact(node, "norms", {})
            slots = {norms.get("before attention"): "pre_attn", norms.get("before MLP"): "pre_ffn"}
        child_role = r
        if r == "block" and any(role(c) == "moe" for c in node["children"]):
            child_role = "moe_block"
        for child in children:
            cid = f"{nid}.{child['name']}"
            add_module(child, cid, here, instances, instances_label, node, f"{where}.{child['name']}", parent_role=child_role, slot=slots.get(child["name"]))
            c = nodes[cid]
            page["children"].append({"id": cid, "title": c["title"], "class": c["class"], "name": child["name"], "parameters": c["parameters"]})
            page["accounting"].append({"id": cid, "title": c["title"], "name": child["name"], "calculation": _calc(child) if child["parameters"] + child["stored_buffers"] else "no parameters", "parameters": c["parameters"]})
        for t in node["tensors"]:
            tid = f"{nid}.{t['name']}"
            nodes[tid] = tensor_page(facts, t, tid, node, here, instances, instances_label, where, title)
            page["tensors"].append({"id": tid, "title": t["name"], "shape": t["shape"], "role": t["role"], "elements": t["elements"]})
            if node.get("tied_to") and t["name"] in node.get("tied_tensors", [t["name"]]):
                page["accounting"].append({"id": tid, "title": t["name"], "name": t["name"], "calculation": f"tied to {node['tied_to']}.{t['name']}, counted there", "parameters": 0})
                continue
            page["accounting"].append({"id": tid, "title": t["name"] + (" (persistent buffer)" if t["role"] == "buffer" else ""), "name": t["name"], "calculation": t["calculation"], "parameters": t["elements"]})
        return page

    # modules outside the blocks, in the order the forward runs them
    top_children = []
    outside = [r["path"] for r in model_acc["rows"]]
    outside_trees = facts["accounting"]["outside"]
    for path in outside:
        row = rows_by_path[path]
        name = path.split(".")[-1]
        tree = outside_trees[path]
        if row.get("tied_to"):
            tree = {**tree, "parameters": row["parameters"], "stored_buffers": row["stored_buffers"], "tied_to": row["tied_to"],
                    **({"tied_tensors": row["tied_tensors"]} if "tied_tensors" in row else {})}
        nid = slug(name)
        owner = containers.get(path.rpartition(".")[0])
        add_module(tree, nid, [{"id": "model", "title": model_title}], 1, "", {"class": owner, "name": "model"} if owner else None, path)
        top_children.append(nid)

    for k in kinds:
        info = kind_info[k["kind"]]
        kid = slug(k["kind"])
        label = f"{_plural(k['instances'], k['label'])}"
        tree = k["tree"]
        page = add_module(
            tree, kid, [{"id": "model", "title": model_title}, {"id": "blocks", "title": blocks_title}],
            k["instances"], label, {"class": list_owner, "name": block_path.split(".")[-1]},
            f"{block_path}[{info['ranges']}]", crumb_title=label,
        )
        page["title"] = _kind_title(info)
        page["name"] = k["kind"]
        page["ranges"] = info["ranges"]
        page["indices"] = info["indices"]
        page["description"] = describe(tree, s)[:-1] + f"; block{'s' if k['instances'] > 1 else ''} {info['ranges']}."
        blocks_node["children"].append({"id": kid, "title": page["title"], "class": tree["class"], "name": k["kind"], "parameters": page["parameters"],
                                        "note": f"block{'s' if k['instances'] > 1 else ''} {info['ranges']}, {grouped(page['parameters'])} each"})
        blocks_node["accounting"].append({"id": kid, "title": f"{page['title']} × {k['instances']}", "name": k["kind"], "calculation": k["calculation"], "parameters": k["total"]})

    # the model's own page lists the outside modules and the blocks in forward order
    order = []
    for nid in top_children:
        if nid == "embed_tokens":
            order.append(nid)
    order.append("blocks")
    order += [n for n in top_children if n != "embed_tokens"]
    for nid in order:
        n = nodes[nid]
        model_node["children"].append({"id": nid, "title": n["title"], "class": n["class"], "name": n["name"], "parameters": n["parameters"]})
        calc = " + ".join(f"{grouped(k['total'])}" for k in kinds) if nid == "blocks" else ("sum of its components" if n["children"] else (n["accounting"][0]["calculation"] if n["accounting"] else ""))
        if nid == "blocks" and len(kinds) > 1:
            calc = " + ".join(k["calculation"].split(" = ")[0] for k in kinds)
        elif nid == "blocks":
            calc = kinds[0]["calculation"].split(" = ")[0]
        model_node["accounting"].append({"id": nid, "title": n["title"], "name": n["name"], "calculation": calc, "parameters": n["parameters"]})
    return nodes


def tensor_page(facts, t, tid, owner, crumbs, instances, instances_label, where, owner_title) -> dict[str, Any]:
    learned = t["role"] == "parameter"
    page = {
        "id": tid, "type": "tensor", "title": t["name"], "owner_title": owner_title, "name": t["name"], "class": "Parameter" if learned else "buffer",
        "constructor": "", "path": f"{owner['path']}.{t['name']}", "where": f"{where}.{t['name']}", "role": t["role"],
        "parameters": t["elements"], "stored_buffers": 0 if learned else t["elements"],
        "instances": instances, "instances_label": instances_label, "crumbs": crumbs,
        "shape": t["shape"], "calculation": t["calculation"],
        "description": (
            f"A learned tensor of shape [{', '.join(grouped(x) for x in t['shape'])}] that {owner['class']} owns."
            if learned
            else f"A persistent buffer of shape [{', '.join(grouped(x) for x in t['shape'])}]: not trained by gradient, yet stored in the checkpoint and counted apart."
        ),
        "producer": f"created by {owner['class']}.__init__" + (" and loaded from the checkpoint" if learned else "; its values are loaded from the checkpoint"),
        "consumers": [f"{owner['class']}.forward"],
        "owner": crumbs[-1]["id"],
        "equations": None, "io": None, "children": [], "tensors": [],
        "accounting": [{"id": None, "title": t["name"], "name": t["name"], "calculation": t["calculation"], "parameters": t["elements"]}],
        "evidence": tensor_evidence(facts, owner, t["name"]),
    }
    page["stored"], page["stored_tied_to"] = stored(facts, page["path"])
    return page


def stored(facts: dict[str, Any], key: str) -> tuple[list[dict[str, Any]], str | None]:
    """What the checkpoint's files hold for a model tensor (facts.checkpoint_check.tensors): each stored
    tensor with its bytes worked out, and a scale with the block it covers and, where the block is a
    rows × columns tile, its shape worked out from the weight's."""
    found = facts["checkpoint_check"].get("tensors", {}).get(key)
    if found is None:
        return [], None
    entries = []
    by_name = {e["name"]: e for e in found["stored"]}
    for e in found["stored"]:
        per = e["bytes"] // e["elements"] if e["elements"] else 0
        calc = f"{grouped(e['elements'])} × {per} byte{'s' if per != 1 else ''} = {grouped(e['bytes'])}"
        if e["count"] > 1:
            calc += f"; × {e['count']} = {grouped(e['total_bytes'])}"
        entry = {**e, "calculation": calc, "packed": e["values_per_element"] > 1}
        scaled = by_name.get(e.get("scales"))
        if scaled is not None and len(e["block"]) == 2 and len(scaled["shape"]) == 2:
            (r, c), (br, bc) = scaled["shape"], e["block"]
            entry["scale_shape"] = f"⌈{grouped(r)} / {br}⌉ × ⌈{grouped(c)} / {bc}⌉ = {grouped(e['shape'][0])} × {grouped(e['shape'][1])}"
        entries.append(entry)
    return entries, found["tied_to"]


def model_evidence(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """The whole model's forward, and the forward of each module on the way to the block list, each
    holding the attributes through which the model's proven steps run its parts."""
    proof = facts["equations"]["components"].get("model")
    if proof is None:
        return []
    out = []
    for path, cls in facts["model"]["containers"].items():
        block_list = facts["model"]["block_path"]
        if not path:
            attrs = proof["reads"]
            what = "the computation the equations above state"
        else:
            attrs = list(dict.fromkeys(r[len(path) + 1:].split(".")[0] for r in proof["runs"] if r.startswith(path + ".")))
            what = "the parts the model's equations run inside it, in that order"
        out += uses(facts, cls, attrs, what, called=called(proof, block_list, path))
    return out
