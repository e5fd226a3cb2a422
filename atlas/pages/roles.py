"""What a node of the module tree is: its role, a block's anatomy, a linear map's widths."""

from __future__ import annotations

import re
from typing import Any


def role(node: dict[str, Any]) -> str:
    """The kind of component a tree node is, from its class and its children's names."""
    cls = node["class"]
    names = {c["name"] for c in node["children"]}
    if cls.endswith("DecoderLayer") or cls.endswith("Block"):
        return "block"
    if "RMSNorm" in cls:
        return "rmsnorm"
    if "LayerNorm" in cls:
        return "layernorm"
    if cls == "Embedding" or cls.endswith("Embedding") and "Rotary" not in cls:
        return "embedding"
    if cls in ("Linear", "Conv1D"):  # GPT-2's Conv1D is a linear map whose weight is stored [in, out]
        return "linear"
    if "Dropout" in cls:
        return "dropout"
    if "Attention" in cls:
        return "latent_attention" if "kv_a_proj_with_mqa" in names else "attention"
    if "Router" in cls or (node["name"] == "gate" and cls != "Linear"):
        return "router"
    if cls.endswith("Experts"):
        return "experts"
    if "MoE" in cls or "SparseMoe" in cls or ("experts" in names and ("gate" in names or "router" in names)):
        return "moe"
    if "MLP" in cls and {"gate_proj", "up_proj", "down_proj"} <= names:
        return "gated_mlp"
    if "MLP" in cls:
        return "mlp"
    if "Activation" in cls or cls in {"SiLU", "GELU", "GELUActivation", "PytorchGELUTanh"}:
        return "activation"
    return "module"


def anatomy(block: dict[str, Any]) -> dict[str, str | None]:
    """Which child of a block does what: the attention, the feed-forward part, and the norms around
    each (before it, after it, or both), by the names and classes transformers gives them."""
    kids = block["children"]
    names = [c["name"] for c in kids]
    by_role = {}
    for c in kids:
        by_role.setdefault(role(c), c["name"])
    attn = by_role.get("latent_attention") or by_role.get("attention")
    ffn = next((c["name"] for c in kids if role(c) in ("moe", "gated_mlp", "mlp", "experts")), None)
    norms = [c["name"] for c in kids if role(c) in ("rmsnorm", "layernorm")]
    a = {"attn": attn, "ffn": ffn, "pre_attn": None, "post_attn": None, "pre_ffn": None, "post_ffn": None}
    if "pre_feedforward_layernorm" in names:  # norms on both sides of each part
        a.update(pre_attn="input_layernorm" if "input_layernorm" in names else None, post_attn="post_attention_layernorm",
                 pre_ffn="pre_feedforward_layernorm", post_ffn="post_feedforward_layernorm" if "post_feedforward_layernorm" in names else None)
    elif "input_layernorm" not in names and "post_feedforward_layernorm" in names:  # norms after each part only
        a.update(post_attn="post_attention_layernorm", post_ffn="post_feedforward_layernorm")
    elif len(norms) >= 2:  # a norm before each part
        a.update(pre_attn=norms[0], pre_ffn=norms[1])
    elif len(norms) == 1:
        a.update(pre_attn=norms[0])
    return {k: (v if v in names else None) for k, v in a.items()}


def in_out(node: dict[str, Any]) -> tuple[int, int] | None:
    """A linear map's (in, out) features: Linear stores its weight [out, in], Conv1D [in, out]."""
    w = next((t for t in node["tensors"] if t["name"] == "weight"), None)
    if w is None or len(w["shape"]) != 2:
        return None
    return tuple(w["shape"]) if node["class"] == "Conv1D" else (w["shape"][1], w["shape"][0])


def gated_inner(node: dict[str, Any]) -> int | None:
    """A gated MLP's inner width, from its gate or up projection."""
    for c in node["children"]:
        if c["name"] in ("gate_proj", "up_proj") and c["tensors"]:
            return c["tensors"][0]["shape"][0]
    return None


def slug(text: str) -> str:
    """A name made safe for a page id and file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")
