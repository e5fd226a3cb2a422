"""The residual-stream diagram: SVG geometry per block kind, and the model's flow."""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.render.pages.roles import anatomy, fact, gated_inner, kids_of, role, slug, norm_word
from atlas.render.pages.sizes import Sizes, routing
from atlas.render.pages.streams import branch_label, focus_order, terminal
from atlas.render.pages.flow import flow
from atlas.render.pages.titles import title_of
from atlas.render.pages.shared_diagram import is_shared_hybrid, shared_hybrid_diagram


SPINE = 22
WIDTH = 500
MAIN_X, MAIN_W = 256, 236  # the attention and MLP column
MID = MAIN_X + MAIN_W // 2  # where a part's output leaves it, back to the stream


def _box(x, y, w, h, label, sub, part, link, cls):
    return {"x": x, "y": y, "w": w, "h": h, "label": label, "sub": sub, "part": part, "link": link, "cls": cls}


# The standard value each part of a block produces, by the part's role in the block.
PART_VALUES = {"pre_attn": "attention_norm_output", "attn": "attention_output", "pre_ffn": "mlp_norm_output", "ffn": "mlp_output"}


# A block of one mixer: the values its norm and its mixer produce, by the mixer's role.
SINGLE_VALUES = {
    "ssm": {"pre_mixer": "ssm_norm_output", "mixer": "ssm_output"},
    "attention": {"pre_mixer": "attention_norm_output", "mixer": "attention_output"},
    "mlp": {"pre_mixer": "mlp_norm_output", "mixer": "mlp_output"},
}


ATTENTION_TYPES = {"sliding_attention": "sliding window", "full_attention": "global", "linear_attention": "linear", "chunked_attention": "chunked",
                   "indexed_attention": "sparse"}


def _unrotated(facts: dict[str, Any]) -> set[str]:
    """The page ids of attentions the proof found leaving their rotary angles unused (NoPE blocks)."""
    return {pid for pid, c in facts["equations"]["components"].items() if c.get("facts", {}).get("rotary_layout", {}).get("value") == "not_applied"}


def _alibi(facts: dict[str, Any]) -> set[str]:
    """The page ids of attentions the proof found adding ALiBi's linear bias to their scores (BLOOM)."""
    return {pid for pid, c in facts["equations"]["components"].items() if "alibi_bias" in c.get("facts", {})}


def block_diagram(kind_id: str, tree: dict[str, Any], s: Sizes, known: set[str], by_module: dict[str, str], attention_type: str | None = None,
                  unrotated: set[str] = frozenset(), alibi: set[str] = frozenset()) -> dict[str, Any]:
    """One block kind's residual stream: each part a box on a branch off the stream, each branch
    ending in an add. ``known``: the page ids that exist; ``by_module``: standard value by module name."""
    if is_shared_hybrid(tree):  # a shared block, a linear map, then the block's own mixer (Zamba2's hybrid blocks)
        return shared_hybrid_diagram(kind_id, tree, known)
    kids = kids_of(tree)
    kid = slug(kind_id)
    a = anatomy(tree)
    if a.get("dense"):  # sublayers run from lists, a mixture added at the block's end (LongCat-Flash)
        return list_block_diagram(kind_id, tree, s, known, by_module, attention_type)
    boxes, lines, adds, sums = [], [], [], []
    inner_lines = []  # wires inside a mixture's box, drawn over it
    terminals = [{"x": SPINE, "y": 14, "part": "layer_input", "text": terminal(tree, "layers[i] input")}]

    def part_of(slot: str, name: str) -> str | None:
        return by_module.get(name) or PART_VALUES.get(slot)

    def link(*names: str) -> str | None:
        nid = ".".join((kid,) + names)
        return nid if nid in known else None

    def norm_box(x, y, name, slot):
        return _box(x, y, 186, 40, *branch_label(tree, slot, name, norm_word(kids[name])), part_of(slot, name), link(name), "norm")

    y = 44
    lines.append((SPINE, 24, SPINE, 340))
    held = fact(tree, "embedding_norm")
    if held in kids:  # the block normalises its input first (RWKV's block 0 and its pre_ln): the stream runs through that norm
        boxes.append(_box(4, y - 10, 186, 40, held, f"{norm_word(kids[held])} of the embeddings", "embedding_norm_output", link(held), "norm"))
        y += 50
    # A parallel block (measured by its proof): the attention's output skips the first add and runs
    # down the right edge to the one add both sublayers meet at; where the MLP shares the attention's
    # norm, its input leaves that norm's output instead of the stream.
    parallel = fact(tree, "residual") == "parallel"
    shared_norm = fact(tree, "shared_norm") if parallel else None
    attn_row = attn_out = None
    rows = (("pre_attn", "attn", "post_attn", "layer_mid"), ("pre_ffn", "ffn", "post_ffn", "layer_output"))
    if a.get("single"):  # a block of one mixer: one branch, one add
        rows = (("pre_mixer", "mixer", "post_mixer", "layer_output"),)
        a = {**a, "post_mixer": None}
        slot_values = SINGLE_VALUES[a["single"]]

        def part_of(slot: str, name: str) -> str | None:  # noqa: F811 (the block's one norm hosts the mixer's own value)
            return slot_values.get(slot)
    elif a.get("two"):  # attention and a state-space mixer side by side: each part keeps its own value
        pass
    elif a.get("ssm"):  # a state-space mixer in the attention's place: its norm and output are its own values

        def part_of(slot: str, name: str) -> str | None:  # noqa: F811
            own = {"pre_attn": "ssm_norm_output", "attn": "ssm_output"}.get(slot)
            return own or by_module.get(name) or PART_VALUES.get(slot)
    for pre, main, post, add_part in rows:
        row = y
        x = 52
        if main == "ffn" and shared_norm and attn_row is not None:
            lines += [(x + 186 + 9, attn_row + 20, x + 186 + 9, row + 20), (x + 186 + 9, row + 20, MAIN_X, row + 20)]
        else:
            lines.append((SPINE, row + 20, x, row + 20))
        if main == "ffn" and shared_norm:
            pass
        elif a[pre]:
            boxes.append(norm_box(x, row, a[pre], pre))
            lines.append((x + 186, row + 20, MAIN_X, row + 20))
        else:
            lines.append((x, row + 20, MAIN_X, row + 20))
        bottom = row + 40
        name = a[main]
        if name is None:
            boxes.append(_box(MAIN_X, row, MAIN_W, 40, "—", "no module", None, None, "mlp"))
        elif main == "attn" and a.get("two"):
            bottom = _two_mixers(tree, a, row, boxes, lines, sums, link)
        elif main == "ffn" and role(kids[name]) == "moe":
            # The router on top; under it the routed experts and the shared expert side by side (they
            # run on the same input, in parallel), their outputs summed into the mixture's output.
            mlp = kids[name]
            mk = {c["name"]: c for c in mlp["children"]}
            router = next((n for n in ("gate", "router") if n in mk), None)
            rt = routing(s, mk.get(router) if router else None)
            shared = next((n for n in ("shared_experts", "shared_expert") if n in mk), None)
            inner_x, inner_w = MAIN_X + 8, MAIN_W - 16
            boxes.append(_box(MAIN_X, row, MAIN_W, 0, name, title_of(mlp), part_of(main, name), link(name), "mlp moe"))
            outer = boxes[-1]
            y_in = row + 28
            if router:
                boxes.append(_box(inner_x, y_in, inner_w, 34, router, f"router: top-{rt['k']} of {rt['n']}",
                                  by_module.get(f"{name}.{router}") or "expert_weights", link(name, router), "router"))
                inner_lines.append((MID, y_in + 34, MID, y_in + 46))
                y_in += 46
            parallel = [n for n in ("experts", shared) if n and n in mk]
            gap = 6
            w = (inner_w - gap * (len(parallel) - 1)) // max(1, len(parallel))
            words = {"experts": (f"top-{rt['k']} of {rt['n']}", "routed_output"), shared: ("every token", "shared_expert_output")}
            if fact(mlp, "dispatch") == "dense":  # every expert runs on every token, its input scaled by the score (Llama 4)
                words["experts"] = (f"all {rt['n']} run", "routed_output")
            centers = []
            for n_, sub_name in enumerate(parallel):
                x = inner_x + n_ * (w + gap)
                sub, part = words[sub_name]
                boxes.append(_box(x, y_in, w, 40, sub_name, sub, part, link(name, sub_name), "shared" if sub_name == shared else "experts"))
                centers.append(x + w // 2)
            y_in += 40
            if len(centers) > 1:
                # both outputs meet in a sum inside the mixture: routed_output + shared_expert_output
                y_sum = y_in + 16
                for c in centers:
                    inner_lines.append((c, y_in, c, y_sum))
                inner_lines.append((centers[0], y_sum, MID - 7, y_sum))
                inner_lines.append((centers[-1], y_sum, MID + 7, y_sum))
                sums.append({"x": MID, "y": y_sum, "r": 7, "part": part_of(main, name)})
                y_in = y_sum + 7
            outer["h"] = y_in + 8 - row
            bottom = row + outer["h"]
        else:
            node = kids[name]
            sub = title_of(node)
            if role(node) == "gated_mlp":
                sub = f"{sub} · {grouped(gated_inner(node))} wide"
            kind_word = ATTENTION_TYPES.get(attention_type, (attention_type or "").replace("_", " "))
            if (main in ("attn", "mixer") and attention_type and a.get("single") in (None, "attention") and not a.get("ssm")
                    and kind_word.lower() not in sub.lower()):  # "Linear attention · linear" says it twice
                sub = f"{sub} · {kind_word}"
            if main == "attn" and f"{kind_id}.{name}" in unrotated:
                sub = f"{sub} · no positions"
            if main == "attn" and f"{kind_id}.{name}" in alibi:
                sub = f"{sub} · ALiBi"
            label = name
            inline = fact(tree, "inline_mlp") if main == "ffn" else None
            if inline:  # an MLP whose layers are the block's own (OPT): named by its layers, linked to the first
                label = " → ".join(n for n in (inline.get("up"), inline.get("activation"), inline.get("down")) if n)
                sub = "MLP: layers of the block itself"
            cls = ("ssm" if a.get("single") == "ssm" or (main == "attn" and a.get("ssm")) else
                   "attn" if main == "attn" or a.get("single") == "attention" else "mlp")
            indexer = next((c for c in node["children"] if role(c) == "indexer"), None) if main == "attn" else None
            if indexer is not None:
                # a sparse attention: its lightning indexer on top, reading the same normed stream, and the
                # positions it keeps handed down to the attention, which reads only those
                keeps = (fact(indexer, "indexer") or {}).get("keeps")
                ix = f"{name}.{indexer['name']}"
                boxes.append(_box(MAIN_X, row, MAIN_W, 40, ix, f"indexer · top {grouped(keeps)} positions" if keeps else "indexer",
                                  by_module.get(ix) or "indexer_positions", link(name, indexer["name"]), "attn"))
                lines += [(MAIN_X - 9, row + 20, MAIN_X - 9, row + 74), (MAIN_X - 9, row + 74, MAIN_X, row + 74)]
                inner_lines.append((MID, row + 40, MID, row + 54))
                row += 54
                bottom = row + 40
            boxes.append(_box(MAIN_X, row, MAIN_W, 40, label, sub, part_of(main, name), link(name), cls))
            side = fact(tree, "side_mixture") if main == "ffn" else None
            if side:  # a router and experts the block holds beside its MLP (Gemma 4's 26B-A4B): drawn under it
                r_node = kids.get(side["router"], {"proof": {}})
                k, n = fact(r_node, "top_k"), fact(r_node, "count")
                choice = f"top-{k} of {n}" if k and n else "routed"
                for offset, (child, words, value, kind) in enumerate((
                        (side["router"], f"{choice} · reads the stream", "expert_weights", "router"),
                        (side["experts"], f"{choice} · beside the MLP", "routed_output", "experts"))):
                    y_box = row + 46 + 46 * offset
                    lines.append((MID, y_box - 6, MID, y_box))
                    boxes.append(_box(MAIN_X, y_box, MAIN_W, 40, child, words, by_module.get(child) or (value if value in by_module.values() else None),
                                      link(child), kind))
                bottom = row + 46 + 46 + 40
        if a[post]:
            # a norm after the part: drawn under it, on the way back to the stream
            node = kids[a[post]]
            kind = norm_word(node)
            boxes.append(_box(MAIN_X + MAIN_W - 186, bottom + 14, 186, 40, a[post], kind, part_of(post, a[post]), link(a[post]), "norm"))
            lines.append((MID, bottom, MID, bottom + 14))
            bottom += 54
        if parallel and main == "attn":
            attn_row, attn_out = row, bottom
            y = bottom + 28
            continue
        y_add = bottom + 28
        lines += [(MID, bottom, MID, y_add), (MID, y_add, SPINE + 10, y_add)]
        if attn_out is not None:
            edge = WIDTH - 4
            lines += [(MID, attn_out, MID, attn_out + 12), (MID, attn_out + 12, edge, attn_out + 12), (edge, attn_out + 12, edge, y_add),
                      (edge, y_add, MID, y_add)]
        stream_norm = a.get("add_attn" if main == "attn" else "add_ffn")
        adds.append({"x": SPINE, "y": y_add, "part": None if stream_norm else add_part})
        y = y_add + 28
        if stream_norm:  # the sum itself normalised (a post-LN block): the stream runs through the norm, which gives the value
            boxes.append(_box(4, y - 10, 186, 40, stream_norm, f"{norm_word(kids[stream_norm])} of the sum", add_part, link(stream_norm), "norm"))
            y += 50
    height = y + 16
    lines[0] = (SPINE, 24, SPINE, height - 10)
    scale = fact(tree, "output_scale")  # the block's stored number times its output (Gemma 4's layer_scalar)
    out_text = terminal(tree, f"× {scale} → layers[i] output → next block" if scale else "layers[i] output → next block", end=True)
    terminals.append({"x": SPINE, "y": height - 10, "part": "layer_output", "text": out_text})
    return {
        "kind": kind_id,
        "id": kid,
        "mixture": any("moe" in b["cls"] for b in boxes),
        "width": WIDTH,
        "height": height,
        "boxes": boxes,
        "lines": [{"x1": p, "y1": q, "x2": r, "y2": t, "arrow": p != r} for p, q, r, t in lines],
        "inner_lines": [{"x1": p, "y1": q, "x2": r, "y2": t, "arrow": q != t} for p, q, r, t in inner_lines],
        "adds": adds,
        "sums": sums,
        "terminals": terminals,
        "order": focus_order(terminals, boxes, adds),
    }


def _two_mixers(tree: dict[str, Any], a: dict[str, Any], row: int, boxes: list, lines: list, sums: list, link) -> int:
    """Attention and a state-space mixer side by side on one row (Falcon-H1): the normed stream enters
    the attention from the left and reaches the state-space mixer over the top; each output, times its
    constant, runs down into one sum, which joins the stream at the add below. Returns the row's bottom."""
    gap = 6
    w = (MAIN_W - gap) // 2
    scales = fact(tree, "mixer_multipliers", {})
    halves = ((a["attn"], "attn", "attention_output", scales.get("attention_out")), (a["ssm"], "ssm", "ssm_output", scales.get("ssm_out")))
    centers = []
    for n, (name, cls, value, scale) in enumerate(halves):
        x = MAIN_X + n * (w + gap)
        sub = f"out × {scale:.4g}" if scale not in (None, 1, 1.0) else ("attention" if cls == "attn" else "state space")
        boxes.append(_box(x, row, w, 40, name, sub, value, link(name), cls))
        centers.append(x + w // 2)
    # the normed stream over the top into the second mixer
    lines += [(MAIN_X - 8, row + 20, MAIN_X - 8, row - 8), (MAIN_X - 8, row - 8, centers[1], row - 8), (centers[1], row - 8, centers[1], row)]
    y_sum = row + 40 + 16
    for c in centers:
        lines.append((c, row + 40, c, y_sum - 7 if c == MID else y_sum))
    lines += [(centers[0], y_sum, MID - 7, y_sum), (centers[1], y_sum, MID + 7, y_sum)]
    sums.append({"x": MID, "y": y_sum, "r": 7, "part": None})
    return y_sum + 7


def list_block_diagram(kind_id: str, tree: dict[str, Any], s: Sizes, known: set[str], by_module: dict[str, str],
                       attention_type: str | None = None) -> dict[str, Any]:
    """A block that runs its sublayers from lists (LongCat-Flash): for each entry i, norm → attention → add,
    then norm → dense MLP → add; the mixture of experts reads the first MLP's normed input, beside the
    dense MLP, and its output runs down the right edge to the block's last add (the shortcut)."""
    kid = slug(kind_id)
    kids = {c["name"]: c for c in tree["children"]}
    for c in tree["children"]:  # the entries of each list, by their dotted names (self_attn.0)
        if role(c) == "list":
            kids.update({f"{c['name']}.{g['name']}": g for g in c["children"]})
    a = anatomy(tree)
    pairs = fact(tree, "sublayers")["pairs"]
    base = lambda name: name.rpartition(".")[0]  # noqa: E731
    boxes, lines, adds = [], [], []
    terminals = [{"x": SPINE, "y": 14, "part": "layer_input", "text": "layers[i] input"}]

    def link(name: str) -> str | None:
        nid = f"{kid}.{name}"
        return nid if nid in known else None

    def norm_row(y, name, part):
        lines.append((SPINE, y + 20, 52, y + 20))
        boxes.append(_box(52, y, 186, 40, name, norm_word(kids[name]), part, link(name), "norm"))

    def add_at(y_from, y, part):
        lines.extend([(MID, y_from, MID, y), (MID, y, SPINE + 10, y)])
        adds.append({"x": SPINE, "y": y, "part": part})

    kind_word = ATTENTION_TYPES.get(attention_type, (attention_type or "").replace("_", " "))
    y, moe_out = 44, None
    for i in range(pairs):
        first = i == 0
        attn, norm_a = f"{base(a['attn'])}.{i}", f"{base(a['pre_attn'])}.{i}"
        norm_m, dense = f"{base(a['pre_ffn'])}.{i}", f"{base(a['dense'])}.{i}"
        norm_row(y, norm_a, "attention_norm_output" if first else None)
        lines.append((238, y + 20, MAIN_X, y + 20))
        sub = title_of(kids[attn]) + (f" · {kind_word}" if kind_word and kind_word.lower() not in title_of(kids[attn]).lower() else "")
        boxes.append(_box(MAIN_X, y, MAIN_W, 40, attn, sub, "attention_output" if first else None, link(attn), "attn"))
        add_at(y + 40, y + 68, "layer_mid" if first else None)
        y += 96
        norm_row(y, norm_m, "mlp_norm_output" if first else None)
        if first:  # the mixture beside the dense MLP, on the same normed input
            moe = kids[a["ffn"]]
            mk = {c["name"]: c for c in moe["children"]}
            router = next((n for n in ("gate", "router") if n in mk), None)
            rt = routing(s, mk.get(router) if router else None)
            lines.append((238, y + 20, MAIN_X, y + 20))
            boxes.append(_box(MAIN_X, y, MAIN_W, 128, a["ffn"], "MoE · shortcut to the end", "mlp_output", link(a["ffn"]), "mlp moe"))
            if router:
                boxes.append(_box(MAIN_X + 8, y + 28, MAIN_W - 16, 34, router, f"router: top-{rt['k']} of {rt['n']}",
                                  by_module.get(f"{a['ffn']}.{router}") or "expert_weights", link(f"{a['ffn']}.{router}"), "router"))
            boxes.append(_box(MAIN_X + 8, y + 74, MAIN_W - 16, 40, "experts", f"top-{rt['k']} of {rt['n']}", "routed_output", link(f"{a['ffn']}.experts"), "experts"))
            moe_out = y + 128
            lines.extend([(MID, moe_out, MID, moe_out + 12), (MID, moe_out + 12, WIDTH - 4, moe_out + 12)])
            lines.append((238 + 9, y + 20, 238 + 9, y + 176))  # the same normed input, down to the dense MLP
            lines.append((238 + 9, y + 176, MAIN_X, y + 176))
            y += 156
        else:
            lines.append((238, y + 20, MAIN_X, y + 20))
        boxes.append(_box(MAIN_X, y, MAIN_W, 40, dense, f"{title_of(kids[dense])} · {grouped(gated_inner(kids[dense]))} wide", None, link(dense), "mlp"))
        last = i == pairs - 1
        y_add = y + 68
        if last and moe_out is not None:  # the shortcut joins the last add
            lines.extend([(WIDTH - 4, moe_out + 12, WIDTH - 4, y_add), (WIDTH - 4, y_add, MID, y_add)])
        add_at(y + 40, y_add, "layer_output" if last else None)
        y = y_add + 28
    height = y + 16
    lines.insert(0, (SPINE, 24, SPINE, height - 10))
    terminals.append({"x": SPINE, "y": height - 10, "part": "layer_output", "text": "layers[i] output → next block"})
    return {
        "kind": kind_id, "id": kid, "mixture": True, "width": WIDTH, "height": height, "boxes": boxes,
        "lines": [{"x1": p, "y1": q, "x2": r, "y2": t, "arrow": p != r} for p, q, r, t in lines],
        "inner_lines": [], "adds": adds, "sums": [], "terminals": terminals,
        "order": focus_order(terminals, boxes, adds),
    }


def diagram(facts: dict[str, Any], known: set[str], vals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The flow and every block kind's drawing; a part names a value only where ``vals`` (the values
    the family produces) has it, so no card describes a value the model never computes."""
    s = Sizes(facts)
    # a value read at the output of a block's child module names that child's part
    by_module = {}
    for v in vals.values():
        module = v["module"] or ""  # a value the model does not compute has no module
        if ".{i}." in module and v["read_at"].startswith("the child module") and "'s output" in v["read_at"]:
            by_module.setdefault(module.split(".{i}.", 1)[1], v["name"])
    types = {k["id"]: k["attention_type"] for k in facts["block_kinds"]}
    unrotated = _unrotated(facts)
    alibi = _alibi(facts)
    kinds = [block_diagram(k["kind"], k["tree"], s, known, by_module, types[k["kind"]], unrotated, alibi) for k in facts["accounting"]["block_kinds"]]
    for d in kinds:
        for piece in d["boxes"] + d["adds"] + d["sums"] + d["terminals"]:
            if piece["part"] not in vals:
                piece["part"] = None
    # Each kind keeps its own height: a dense block draws no empty band. The slider sits above the
    # drawing, so a change of height moves only what follows it.
    return {"flow": flow(facts, known, vals), "kinds": kinds}
