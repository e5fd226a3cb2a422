"""The words a page says about a component: its title and its one-line description, with the
checkpoint's numbers."""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.pages.roles import anatomy, gated_inner, in_out, role
from atlas.pages.sizes import Sizes, routing


TITLES = {
    "embed_tokens": "Token embedding",
    "norm": "Final RMSNorm",
    "lm_head": "Language-model head",
    "input_layernorm": "Attention RMSNorm",
    "post_attention_layernorm": "MLP RMSNorm",
    "self_attn": "Attention",
    "mlp": "MLP",
    "q_a_proj": "Query down-projection",
    "q_a_layernorm": "Query latent RMSNorm",
    "q_b_proj": "Query up-projection",
    "kv_a_proj_with_mqa": "Key–value down-projection",
    "kv_a_layernorm": "Key–value latent RMSNorm",
    "kv_b_proj": "Key–value up-projection",
    "q_proj": "Query projection",
    "k_proj": "Key projection",
    "v_proj": "Value projection",
    "o_proj": "Output projection",
    "q_norm": "Query RMSNorm",
    "k_norm": "Key RMSNorm",
    "gate_proj": "Gate projection",
    "up_proj": "Up projection",
    "down_proj": "Down projection",
    "act_fn": "Activation",
    "gate": "Router",
    "router": "Router",
    "experts": "Routed experts",
    "shared_experts": "Shared expert",
    "shared_expert": "Shared expert",
    "rotary_emb": "Rotary embedding",
}


ROLE_TITLES = {
    "latent_attention": "Latent attention",
    "attention": "Attention",
    "moe": "Mixture of experts",
    "gated_mlp": "Gated MLP",
    "router": "Router",
    "experts": "Routed experts",
}


SLOT_TITLES = {"pre_attn": "Attention {norm}", "post_attn": "Post-attention {norm}", "pre_ffn": "{mlp} {norm}", "post_ffn": "Post-{mlp} {norm}"}


def title_of(node: dict[str, Any], parent_role: str | None = None, slot: str | None = None) -> str:
    r = role(node)
    name = node["name"]
    if slot in SLOT_TITLES and r in ("rmsnorm", "layernorm"):
        return SLOT_TITLES[slot].format(norm="LayerNorm" if r == "layernorm" else "RMSNorm", mlp="MoE" if parent_role == "moe_block" else "MLP")
    if name in ("self_attn", "mlp") and r in ROLE_TITLES:
        return ROLE_TITLES[r]
    if name == "post_attention_layernorm" and parent_role == "moe_block":
        return "MoE RMSNorm"
    if name == "mlp" and r == "gated_mlp":
        return "Dense MLP"
    return TITLES.get(name) or ROLE_TITLES.get(r) or name


def lowercase_title(title: str) -> str:
    """'Latent attention' -> 'latent attention'; 'Gated MLP' -> 'gated MLP'."""
    return " ".join(w if w.isupper() or any(ch.isupper() for ch in w[1:]) else w.lower() for w in title.split())


LINEAR_ROLES = {
    "q_a_proj": "Compresses the normed stream into the query latent",
    "q_b_proj": "Expands the normed query latent into every head's query, content and rotary parts",
    "kv_a_proj_with_mqa": "Compresses the stream into the key–value latent plus one rotary key shared by all heads",
    "kv_b_proj": "Expands the normed key–value latent into every head's content key and value",
    "q_proj": "Projects the stream into the queries of every head",
    "k_proj": "Projects the stream into the keys of the key–value heads",
    "v_proj": "Projects the stream into the values of the key–value heads",
    "o_proj": "Mixes the heads' outputs, side by side, back into the residual width",
    "gate_proj": "Projects the stream into the gate that the activation opens",
    "up_proj": "Projects the stream into the features the gate multiplies",
    "down_proj": "Projects the gated features back into the residual width",
    "lm_head": "Scores every vocabulary entry from the final normed stream",
    "c_attn": "Projects the stream into the queries, keys and values of every head at once",
    "c_fc": "Projects the stream into the MLP's hidden features",
    "gate_up_proj": "Projects the stream into the gate and the features it multiplies, side by side",
    "qkv_proj": "Projects the stream into the queries, keys and values of every head at once",
}


def describe(node: dict[str, Any], s: Sizes) -> str:
    r = role(node)
    d = s.get("hidden_size")
    kids = {c["name"]: c for c in node["children"]}
    if r in ("rmsnorm", "layernorm"):
        width = node["tensors"][0]["shape"][0] if node["tensors"] else d
        what = "root-mean-square" if r == "rmsnorm" else "zero mean and unit variance"
        return f"Rescales each {grouped(width)}-wide vector to unit {what}, then multiplies it by a learned gain per feature."
    if r == "embedding":
        if not node["tensors"] or len(node["tensors"][0]["shape"]) != 2:
            return "A learned lookup table."
        vocab, width = node["tensors"][0]["shape"]
        if node["name"] in ("wpe", "embed_positions", "position_embeddings"):
            return f"Looks up a learned {grouped(width)}-wide vector for each position, up to {grouped(vocab)} positions; added to the token embeddings."
        return f"Looks up a learned {grouped(width)}-wide vector for each token id, one row per entry of a {grouped(vocab)}-token vocabulary."
    if r == "linear" and node.get("tied_to"):
        return f"{LINEAR_ROLES.get(node['name'], 'A linear map')}, with the weight of {node['tied_to']} (tied): counted there, not here."
    if r == "dropout":
        return "Dropout: zeroes random features while training; at inference it passes its input through unchanged."
    if r == "linear":
        dims = in_out(node)
        base = LINEAR_ROLES.get(node["name"], "A learned linear map")
        if dims is None:
            return base + "."
        bias = "with a bias" if any(t["name"] == "bias" for t in node["tensors"]) else "no bias"
        stored = " (a Conv1D: the weight is stored in × out)" if node["class"] == "Conv1D" else ""
        return f"{base}: {grouped(dims[0])} → {grouped(dims[1])} features, {bias}{stored}."
    if r == "activation":
        act = (s.act or "silu").upper().replace("SILU", "SiLU")
        return f"{act}, applied to each feature on its own; it has no parameters."
    if r == "latent_attention":
        return (
            f"{s.get('num_heads')} heads whose keys and values are rebuilt from a {grouped(s.get('kv_lora_rank'))}-wide latent, "
            f"each query and key carrying a {s.get('qk_rope_head_dim')}-wide rotary part; scores scaled by {s.attention.get('scaling_rounded')}."
        )
    if r == "attention":
        heads, kv = s.get("num_heads"), s.get("num_kv_heads") or s.get("num_heads")
        share = f"{heads} query heads sharing {kv} key–value heads" if kv != heads else f"{heads} heads, each with its own keys and values"
        return f"Causal self-attention: {share}, {s.get('head_dim')} wide."
    if r == "router":
        rt = routing(s, node)
        scale = f", then scaled by {rt['scale']}" if rt["scale"] not in (None, 1, 1.0) else ""
        bias = " A stored bias per expert (b) steers which experts are kept, not how much they weigh." if rt["bias"] else ""
        return f"Scores the {rt['n']} experts for each token and keeps the top {rt['k']}; the kept scores are normalized{scale}.{bias}"
    if r == "experts":
        rt = routing(s, None)
        inner = node["tensors"][-1]["shape"][-1] if node["tensors"] else None
        return f"{rt['n']} gated MLPs of inner width {grouped(inner)}, stored as fused 3-D tensors; each token runs only the {rt['k']} its router picked."
    if r == "moe":
        rt = routing(s, kids.get("gate") or kids.get("router"))
        shared = " and adds a shared expert that every token runs" if ("shared_experts" in kids or "shared_expert" in kids) else ""
        return f"Sends each token to {rt['k']} of {rt['n']} routed experts, weights their outputs by the router{shared}."
    if r == "gated_mlp":
        inner = gated_inner(node)
        return f"A gated MLP: two projections {grouped(d)} → {grouped(inner)}, one through the activation, multiplied, then projected back to {grouped(d)}."
    if r == "mlp":
        act = (s.act or "silu").upper().replace("SILU", "SiLU").replace("GELU_NEW", "GELU (tanh)").replace("GELU_PYTORCH_TANH", "GELU (tanh)")
        if "gate_up_proj" in kids and in_out(kids["gate_up_proj"]):
            inner = in_out(kids["gate_up_proj"])[1] // 2
            return f"A gated MLP whose gate and up projections are one fused matrix: {grouped(d)} → 2 × {grouped(inner)}, the {act} gate times the rest, back to {grouped(d)}."
        up = next((kids[n] for n in ("c_fc", "fc1", "up_proj") if n in kids and in_out(kids[n])), None)
        if up is not None:
            inner = in_out(up)[1]
            return f"A two-layer MLP: {grouped(d)} → {grouped(inner)} through {act}, then back to {grouped(d)}."
    if r == "block":
        a = anatomy(node)
        attn, mlp = kids.get(a["attn"] or ""), kids.get(a["ffn"] or "")
        parts = [lowercase_title(title_of(x)) for x in (attn, mlp) if x is not None]
        norm = "LayerNorm" if any(role(c) == "layernorm" for c in node["children"]) else "RMSNorm"
        article = "a" if norm == "LayerNorm" else "an"
        if a["post_attn"] and (a["pre_attn"] or a["pre_ffn"]):
            where = f"each between two {norm}s"
        elif a["post_attn"] or a["post_ffn"]:
            where = f"each followed by {article} {norm}"
        else:
            where = f"each after {article} {norm}"
        return f"Applies {' then '.join(parts)}, {where} and each added back to the residual stream."
    return f"A {node['class']} module."
