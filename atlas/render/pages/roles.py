"""What a node of the module tree is: its role, a block's anatomy, a linear map's widths."""

from __future__ import annotations

import re
from typing import Any


def annotated(tree: dict[str, Any], nid: str, equations: dict[str, Any]) -> dict[str, Any]:
    """A module tree whose every node carries its page id, its kind and what its proof found
    (atlas.proof): the words and drawings read those, never the class name."""
    proof = equations["components"].get(nid)
    return {
        **tree,
        "page_id": nid,
        "kind": equations["kinds"].get(nid, "module"),
        "proof": proof["facts"] if proof else {},
        "used_as": proof.get("used_as") if proof else None,
        "children": [annotated(c, f"{nid}.{c['name']}", equations) for c in tree["children"]],
    }


def fact(node: dict[str, Any], name: str, default: Any = None) -> Any:
    """One thing the proof found about the node's module (its value), or ``default``."""
    return node["proof"].get(name, {}).get("value", default)


def role(node: dict[str, Any]) -> str:
    """The kind of component a node is, as the proof's reading of its module says."""
    kind = node["kind"]
    if kind == "norm":
        return "layernorm" if fact(node, "norm") in ("layer", "layer_offset") else "rmsnorm"
    if kind == "mixture":
        return "moe"
    if kind == "dense_mlp":
        names = {c["name"] for c in node["children"]}
        return "gated_mlp" if fact(node, "mlp") == "gated" and "gate_proj" in names else "mlp"
    return kind


def norm_word(node: dict[str, Any]) -> str:
    """What a norm is called on the page: LayerNorm, RMSNorm, or RMSNorm with a (1 + g) gain."""
    return {"layer": "LayerNorm", "rms": "RMSNorm", "rms_offset": "RMSNorm (1 + g)", "layer_offset": "LayerNorm (1 + g)"}.get(fact(node, "norm"), "norm")


def anatomy(block: dict[str, Any]) -> dict[str, str | None]:
    """Which child of a block does what: the attention, the feed-forward part, and the norms around
    each (before it, after it, or both), as the block's proof ran them."""
    norms = fact(block, "norms", {})
    parts = fact(block, "sublayers", {})
    if "before the mixer" in norms:  # a block of one mixer (a hybrid's state-space, attention or MLP block)
        which = next(k for k in ("ssm", "attention", "mlp") if parts.get(k))
        return {"attn": None, "ffn": None, "pre_attn": None, "post_attn": None, "pre_ffn": None, "post_ffn": None,
                "mixer": parts[which], "pre_mixer": norms["before the mixer"], "single": which}
    inline = fact(block, "inline_mlp") or {}  # an MLP whose layers are the block's own: its up projection stands for it
    return {
        "attn": parts.get("attention") or parts.get("ssm"), "ffn": parts.get("mlp") or inline.get("up"), "ssm": parts.get("ssm"),
        "pre_attn": norms.get("before attention"), "post_attn": norms.get("after attention"),
        "pre_ffn": norms.get("before MLP"), "post_ffn": norms.get("after MLP"),
        # norms of the stream itself after each add (GPT-1's post-LN block)
        "add_attn": norms.get("after the attention's add"), "add_ffn": norms.get("after the MLP's add"),
        # a parallel block (both sublayers read the block's input and are added at once), as measured
        "parallel": "parallel" if fact(block, "residual") == "parallel" else None,
        # attention and a state-space mixer side by side on one normed stream (Falcon-H1), as the proof ran them
        "two": bool(parts.get("attention") and parts.get("ssm") and fact(block, "mixer_multipliers")),
        # a block that runs its sublayers from lists (LongCat-Flash): the first dense MLP beside the mixture
        "dense": parts.get("dense_mlp"),
    }


def kids_of(node: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A node's children by name, and its grandchildren by dotted path ("norm_attn_norm.attn"): a block
    whose attention and norms sit in one child (DBRX) names them so in its facts."""
    kids = {c["name"]: c for c in node["children"]}
    for c in node["children"]:
        for g in c["children"]:
            kids.setdefault(f"{c['name']}.{g['name']}", g)
    return kids


def in_out(node: dict[str, Any]) -> tuple[int, int] | None:
    """A linear map's (in, out) features: Linear stores its weight [out, in], Conv1D [in, out]."""
    w = next((t for t in node["tensors"] if t["name"] == "weight"), None)
    if w is None or len(w["shape"]) != 2:
        return None
    return tuple(w["shape"]) if fact(node, "stored") == "in × out" else (w["shape"][1], w["shape"][0])


def gated_inner(node: dict[str, Any]) -> int | None:
    """A gated MLP's inner width, from its gate or up projection."""
    for c in node["children"]:
        if c["name"] in ("gate_proj", "up_proj") and c["tensors"]:
            return c["tensors"][0]["shape"][0]
    return None


def slug(text: str) -> str:
    """A name made safe for a page id and file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
