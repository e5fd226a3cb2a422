"""The drawing of a block that runs a shared block before its own mixer (Zamba2's hybrid blocks)."""

from __future__ import annotations

from typing import Any

from atlas.render.pages.roles import fact, kids_of, norm_word, slug
from atlas.render.pages.streams import focus_order
from atlas.render.pages.titles import title_of

SPINE, WIDTH, MAIN_X, MAIN_W = 22, 500, 256, 236
MID = MAIN_X + MAIN_W // 2


def is_shared_hybrid(tree: dict[str, Any]) -> bool:
    return "shared block" in (fact(tree, "sublayers") or {})


def shared_hybrid_diagram(kind_id: str, tree: dict[str, Any], known: set[str]) -> dict[str, Any]:
    """The stream and the embeddings into the shared block, its output through the block's linear map, added to
    the stream only as the mixer's input (before its norm); the mixer's output added to the stream."""
    kid = slug(kind_id)
    parts = fact(tree, "sublayers")
    shared, linear, mixer_block = parts["shared block"], parts["linear map"], parts["state-space block"]
    kids = kids_of(tree)
    inner = fact(kids[mixer_block], "sublayers") or {}
    norm, mixer = f"{mixer_block}.{inner.get('norm')}", f"{mixer_block}.{inner.get('ssm')}"
    block_kids = {c["name"]: c for c in kids[mixer_block]["children"]}

    def link(name: str) -> str | None:
        nid = f"{kid}.{name}"
        return nid if nid in known else None

    def box(x, y, w, h, label, sub, part, name, cls):
        return {"x": x, "y": y, "w": w, "h": h, "label": label, "sub": sub, "part": part, "link": link(name), "cls": cls}

    boxes = [
        box(MAIN_X, 44, MAIN_W, 48, shared, "[x; e]: attention, MLP, an adapter a use", None, shared, "attn"),
        box(MAIN_X, 120, MAIN_W, 40, linear, "its own linear map into the stream", None, linear, "mlp"),
        box(52, 188, 186, 40, norm, f"{norm_word(block_kids[inner.get('norm')])} of x + v", None, norm, "norm"),
        box(MAIN_X, 188, MAIN_W, 40, mixer, title_of(block_kids[inner.get("ssm")]), None, mixer, "ssm"),
    ]
    lines = [(SPINE, 24, SPINE, 300), (SPINE, 64, MAIN_X, 64), (MAIN_X + 14, 26, MAIN_X + 14, 44),
             (MID, 92, MID, 120), (MID, 160, MID, 174), (MID, 174, 145, 174), (145, 174, 145, 188),
             (SPINE, 208, 52, 208), (238, 208, MAIN_X, 208), (MID, 228, MID, 256), (MID, 256, SPINE + 10, 256)]
    terminals = [{"x": SPINE, "y": 14, "part": "layer_input", "text": "layers[i] input"},
                 {"x": MAIN_X + 14, "y": 20, "part": "token_embeddings", "text": "e: the embeddings block 0 was handed"},
                 {"x": SPINE, "y": 290, "part": "layer_output", "text": "layers[i] output → next block"}]
    adds = [{"x": SPINE, "y": 256, "part": "layer_output"}]
    return {
        "kind": kind_id, "id": kid, "mixture": False, "width": WIDTH, "height": 306, "boxes": boxes,
        "lines": [{"x1": p, "y1": q, "x2": r, "y2": t, "arrow": p != r} for p, q, r, t in lines],
        "inner_lines": [], "adds": adds, "sums": [], "terminals": terminals,
        "order": focus_order(terminals, boxes, adds),
    }
