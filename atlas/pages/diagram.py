"""The residual-stream diagram: SVG geometry per block kind, and the model's flow."""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.pages.roles import anatomy, gated_inner, role, slug, norm_word
from atlas.pages.sizes import Sizes, routing
from atlas.pages.words import title_of


SPINE = 22
WIDTH = 440


def _box(x, y, w, h, label, sub, part, link, cls):
    return {"x": x, "y": y, "w": w, "h": h, "label": label, "sub": sub, "part": part, "link": link, "cls": cls}


# The standard value each part of a block produces, by the part's role in the block.
PART_VALUES = {"pre_attn": "attention_norm_output", "attn": "attention_output", "pre_ffn": "mlp_norm_output", "ffn": "mlp_output"}


ATTENTION_TYPES = {"sliding_attention": "sliding window", "full_attention": "global", "linear_attention": "linear", "chunked_attention": "chunked"}


def block_diagram(kind_id: str, tree: dict[str, Any], s: Sizes, known: set[str], by_module: dict[str, str], attention_type: str | None = None) -> dict[str, Any]:
    """One block kind's residual stream: each part a box on a branch off the stream, each branch
    ending in an add. ``known``: the page ids that exist; ``by_module``: standard value by module name."""
    kids = {c["name"]: c for c in tree["children"]}
    kid = slug(kind_id)
    a = anatomy(tree)
    boxes, lines, adds = [], [], []
    terminals = [{"x": SPINE, "y": 14, "part": "layer_input", "text": "layers[i] input"}]

    def part_of(slot: str, name: str) -> str | None:
        return by_module.get(name) or PART_VALUES.get(slot)

    def link(*names: str) -> str | None:
        nid = ".".join((kid,) + names)
        return nid if nid in known else None

    def norm_box(x, y, name, slot):
        node = kids[name]
        return _box(x, y, 186, 40, name, norm_word(node), part_of(slot, name), link(name), "norm")

    y = 44
    lines.append((SPINE, 24, SPINE, 340))
    for pre, main, post, add_part in (("pre_attn", "attn", "post_attn", "layer_mid"), ("pre_ffn", "ffn", "post_ffn", "layer_output")):
        row = y
        x = 52
        lines.append((SPINE, row + 20, x, row + 20))
        if a[pre]:
            boxes.append(norm_box(x, row, a[pre], pre))
            lines.append((x + 186, row + 20, 256, row + 20))
        else:
            lines.append((x, row + 20, 256, row + 20))
        bottom = row + 40
        name = a[main]
        if name is None:
            boxes.append(_box(256, row, 176, 40, "—", "no module", None, None, "mlp"))
        elif main == "ffn" and role(kids[name]) == "moe":
            mlp = kids[name]
            mk = {c["name"]: c for c in mlp["children"]}
            router = next((n for n in ("gate", "router") if n in mk), None)
            rt = routing(s, mk.get(router) if router else None)
            inner = []
            if router:
                inner.append((router, f"router: top-{rt['k']} of {rt['n']}", by_module.get(f"{name}.{router}") or "expert_weights", "router"))
            if "experts" in mk:
                inner.append(("experts", f"{rt['n']} experts, {rt['k']} per token", "routed_output", "experts"))
            for shared in ("shared_experts", "shared_expert"):
                if shared in mk:
                    inner.append((shared, "shared: every token runs it", "shared_expert_output", "shared"))
            boxes.append(_box(256, row, 176, 34 + 40 * len(inner), name, title_of(mlp), part_of(main, name), link(name), "mlp moe"))
            for n, (sub_name, sub, part, cls) in enumerate(inner):
                boxes.append(_box(264, row + 30 + 40 * n, 160, 34, sub_name, sub, part, link(name, sub_name), cls))
            bottom = row + 34 + 40 * len(inner)
        else:
            node = kids[name]
            sub = title_of(node)
            if role(node) == "gated_mlp":
                sub = f"{sub} · {grouped(gated_inner(node))} wide"
            if main == "attn" and attention_type:
                sub = f"{sub} · {ATTENTION_TYPES.get(attention_type, attention_type.replace('_', ' '))}"
            boxes.append(_box(256, row, 176, 40, name, sub, part_of(main, name), link(name), "attn" if main == "attn" else "mlp"))
        if a[post]:
            # a norm after the part: drawn under it, on the way back to the stream
            node = kids[a[post]]
            kind = norm_word(node)
            boxes.append(_box(246, bottom + 14, 186, 40, a[post], kind, part_of(post, a[post]), link(a[post]), "norm"))
            lines.append((344, bottom, 344, bottom + 14))
            bottom += 54
        y_add = bottom + 28
        lines += [(344, bottom, 344, y_add), (344, y_add, SPINE + 10, y_add)]
        adds.append({"x": SPINE, "y": y_add, "part": add_part})
        y = y_add + 28
    height = y + 16
    lines[0] = (SPINE, 24, SPINE, height - 10)
    terminals.append({"x": SPINE, "y": height - 10, "part": "layer_output", "text": "layers[i] output → next block"})
    return {
        "kind": kind_id,
        "id": kid,
        "mixture": any("moe" in b["cls"] for b in boxes),
        "width": WIDTH,
        "height": height,
        "boxes": boxes,
        "lines": [{"x1": p, "y1": q, "x2": r, "y2": t, "arrow": p != r} for p, q, r, t in lines],
        "adds": adds,
        "terminals": terminals,
    }


def flow(facts: dict[str, Any], known: set[str], vals: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The model from input to output: embeddings, the blocks, what follows them, the logits."""
    n = facts["model"]["num_blocks"]
    at = {v["module"]: v["name"] for v in vals.values() if "output" in v["read_at"]}

    def listed(name: str) -> str | None:
        return name if name in vals else None

    before, after = [], []
    kinds = facts["equations"]["kinds"]  # what each module is, as the proof read it
    for row in facts["accounting"]["model"]["rows"]:
        name = row["path"].split(".")[-1]
        nid = slug(name)
        embedding = kinds.get(nid) == "embedding"
        if embedding:
            part = at.get(row["path"]) or (listed("token_embeddings") if not before else None)
        elif kinds.get(nid) == "norm":
            part = listed("final_norm_output")
        else:
            part = listed("lm_head_output") if kinds.get(nid) == "linear" else None
        step = {"label": name, "sub": part or row["class"], "part": part, "link": nid if nid in known else None}
        (before if embedding else after).append(step)
    return before + [{"label": f"layers × {n}", "sub": "layer_output", "part": listed("layer_output"), "link": "blocks"}] + after + [
        {"label": "logits", "sub": "the output", "part": listed("logits"), "link": "model"}
    ]


def diagram(facts: dict[str, Any], known: set[str], vals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The flow and every block kind's drawing; a part names a value only where ``vals`` (the values
    the family produces) has it, so no card describes a value the model never computes."""
    s = Sizes(facts)
    # a value read at the output of a block's child module names that child's part
    by_module = {}
    for v in vals.values():
        module = v["module"]
        if ".{i}." in module and v["read_at"].startswith("the child module") and "'s output" in v["read_at"]:
            by_module.setdefault(module.split(".{i}.", 1)[1], v["name"])
    types = {k["id"]: k["attention_type"] for k in facts["block_kinds"]}
    kinds = [block_diagram(k["kind"], k["tree"], s, known, by_module, types[k["kind"]]) for k in facts["accounting"]["block_kinds"]]
    for d in kinds:
        for piece in d["boxes"] + d["adds"] + d["terminals"]:
            if piece["part"] not in vals:
                piece["part"] = None
    # One height for every kind: moving the slider then repaints the drawing without moving the page.
    height = max(d["height"] for d in kinds)
    for d in kinds:
        d["height"] = height
        d["lines"][0]["y2"] = height - 10
        d["terminals"][-1]["y"] = height - 10
    return {"flow": flow(facts, known, vals), "kinds": kinds}
