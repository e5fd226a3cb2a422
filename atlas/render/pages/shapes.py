"""A component's inputs and outputs, each with named dims."""

from __future__ import annotations

from typing import Any

from atlas.model.architecture import rotary_pairs
from atlas.notation import stream
from atlas.numbers import grouped
from atlas.render.pages.roles import fact, in_out, role
from atlas.render.pages.sizes import Sizes, routing


def named_dims(*pairs: tuple[Any, str]) -> str:
    return "[" + ", ".join(f"{grouped(a) if isinstance(a, int) else a} {b}" for a, b in pairs) + "]"


def io(node: dict[str, Any], s: Sizes) -> dict[str, list[dict[str, str]]]:
    r = role(node)
    d = s.get("hidden_size")
    B, T = ("B", "batch"), ("T", "positions")
    res = named_dims(B, T, (d, "d"))
    if r in ("rmsnorm", "layernorm"):
        width = node["tensors"][0]["shape"][0] if node["tensors"] else d
        dims = named_dims(B, T, (width, "d" if width == d else "latent"))
        return {"in": [{"symbol": "x", "dims": dims}], "out": [{"symbol": "y", "dims": dims}]}
    if r == "embedding":
        if not node["tensors"] or len(node["tensors"][0]["shape"]) != 2:
            return {"in": [], "out": []}
        vocab, width = node["tensors"][0]["shape"]
        return {"in": [{"symbol": "I", "dims": named_dims(B, T)}], "out": [{"symbol": "x_0", "dims": named_dims(B, T, (width, "d"))}]}
    if r == "linear":
        dims = in_out(node)
        if dims is None:
            return {"in": [], "out": []}
        out_name = "vocab" if node["name"] == "lm_head" else "out"
        return {
            "in": [{"symbol": "x", "dims": named_dims(B, T, (dims[0], "in"))}],
            "out": [{"symbol": "z" if node["name"] == "lm_head" else "y", "dims": named_dims(B, T, (dims[1], out_name))}],
        }
    if r in ("latent_attention", "attention"):
        if fact(node, "adds_residual"):  # handed the stream, it returns the stream with its output added (BLOOM)
            return {"in": [{"symbol": "x", "dims": res}, {"symbol": "r", "dims": res}] + _context(node, s), "out": [{"symbol": "y", "dims": res}]}
        return {"in": [{"symbol": "x", "dims": res}] + _context(node, s), "out": [{"symbol": r"\Delta_{\mathrm{attn}}", "dims": res}]}
    if r == "router":
        rt = routing(s, node)
        tok = ("B·T", "tokens")
        return {
            "in": [{"symbol": "x", "dims": named_dims(tok, (d, "d"))}],
            "out": [
                {"symbol": r"\mathcal{E}", "dims": named_dims(tok, (rt["k"], "top_k"))},
                {"symbol": "G", "dims": named_dims(tok, (rt["k"], "top_k"))},
            ],
        }
    if r == "experts":
        rt = routing(s, None)
        tok = ("B·T", "tokens")
        return {
            "in": [
                {"symbol": "x", "dims": named_dims(tok, (d, "d"))},
                {"symbol": r"\mathcal{E}", "dims": named_dims(tok, (rt["k"], "top_k"))},
                {"symbol": "G", "dims": named_dims(tok, (rt["k"], "top_k"))},
            ],
            "out": [{"symbol": r"y^{\mathrm{routed}}", "dims": named_dims(tok, (d, "d"))}],
        }
    if r in ("moe", "gated_mlp", "mlp"):
        if fact(node, "adds_residual"):  # handed the stream, it returns the stream with its output added (BLOOM)
            return {"in": [{"symbol": "x", "dims": res}, {"symbol": "r", "dims": res}], "out": [{"symbol": "y", "dims": res}]}
        return {"in": [{"symbol": "x", "dims": res}], "out": [{"symbol": r"\Delta_{\mathrm{ffn}}", "dims": res}]}
    if r == "block":
        # the block is handed what its attention needs besides the stream (the rotary angles, the
        # mask) and passes it on: the same named dims as on the attention's page
        attention = next((c for c in node["children"] if role(c) in ("latent_attention", "attention")), None)
        context = _context(attention, s) if attention is not None else []
        return {"in": [{"symbol": "x_n", "dims": res}] + context, "out": [{"symbol": "x_{n+1}", "dims": res}]}
    if r == "activation":
        return {"in": [{"symbol": "g", "dims": named_dims(B, T, ("…", "features"))}], "out": [{"symbol": "a", "dims": named_dims(B, T, ("…", "features"))}]}
    return {"in": [], "out": []}


def _context(attention: dict[str, Any], s: Sizes) -> list[dict[str, str]]:
    """What an attention takes besides the stream: the rotary angles R (where its proof found rotary
    positions; learned positions are added to the stream before the blocks) and the mask M."""
    T = ("T", "positions")
    out = []
    positions = fact(attention, "positions")
    if fact(attention, "rotary_inside"):  # it computes its angles itself (RecurrentGemma): it is handed the positions
        out.append({"symbol": "p", "dims": named_dims(T)})
    elif not (isinstance(positions, str) and positions.startswith(("none", "ALiBi"))):  # ALiBi's bias is built from positions, not handed angles
        # the pairs the rotation turns at the checkpoint's sizes: a partial rotary turns only part of the head (Phi-2's 16 of 40)
        turned = fact(attention, "rotated_pairs") or {}  # the pairs a proportional rotary turns, as its proof found (Gemma 4's global blocks)
        pairs = turned.get("turning") or rotary_pairs({"config": {"raw": s.raw, "standardized": s.std}}, latent=role(attention) == "latent_attention")
        out.append({"symbol": stream("c", "R"), "dims": named_dims(T, (pairs or "d/2", "pairs"))})
    out.append({"symbol": stream("c", "M"), "dims": named_dims(("T", "queries"), ("T", "keys"))})
    return out
