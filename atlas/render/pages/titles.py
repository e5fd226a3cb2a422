"""The names a page gives a component: its title, and what each linear map of a known kind is used
for (the words of atlas/render/pages/words.py, which says what the component computes)."""

from __future__ import annotations

from typing import Any

from atlas.render.pages.roles import fact, norm_word, role


TITLES = {
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
    "qk_norm": "Query and key norm (no gain)",
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


# A norm without tensors, by the form its proof measured (atlas.proof.library.weightless_norm).
WEIGHTLESS_WORDS = {"rms": "RMS norm without a gain", "layer": "LayerNorm without gain or bias", "l2": "L2 norm without a gain"}


ROLE_TITLES = {
    "mamba2": "Mamba-2 state-space mixer",
    "mamba1": "Mamba state-space mixer (selective scan)",
    "gated_norm": "Gated RMSNorm",
    "depthwise_conv": "Depthwise causal convolution",
    "short_conv": "Gated short convolution",
    "weightless_norm": "Norm without a gain",
    "recurrent_block": "Recurrent block (RG-LRU)",
    "rg_lru": "RG-LRU (real-gated linear recurrent unit)",
    "time_mixing": "Time mixing (token shift and WKV recurrence)",
    "channel_mixing": "Channel mixing (squared ReLU, receptance gate)",
    "token_shift": "Token shift",
    "shared_block": "Shared block (attention and MLP beside the embeddings)",
    "carried_block": "State-space block (handed the shared block's output)",
    "low_rank_adapter": "Low-rank adapter",
    "latent_attention": "Latent attention",
    "indexer": "Lightning indexer",
    "attention": "Attention",
    "linear_attention": "Linear attention (gated delta rule)",
    "lightning_attention": "Lightning attention (linear attention with a fixed decay)",
    "decay_gate": "Forget gate (decay per channel)",
    "moe": "Mixture of experts",
    "gated_mlp": "Gated MLP",
    "router": "Router",
    "experts": "Routed experts",
    "stacked_experts": "Routed experts (stacked)",
    "expert_glu": "Expert gated MLP",
    "norm_attention_norm": "Norm, attention, norm",
    "identity": "Identity",
    "list": "List of sublayers",
    "hyper_connection": "Hyper-connection",
    "stream_collapse": "Collapse of the residual streams",
    "grouped_linear": "Grouped projection",
    "shared_kv_attention": "Shared-KV attention",
    "window_compressor": "Key compressor",
    "compressed_indexer": "Lightning indexer (pooled keys)",
    "index_scorer": "Indexer scores",
    "rotary_table": "Rotary angles",
}


SLOT_TITLES = {"pre_mixer": "Pre-mixer {norm}", "pre_attn": "Attention {norm}", "post_attn": "Post-attention {norm}", "pre_ffn": "{mlp} {norm}", "post_ffn": "Post-{mlp} {norm}"}


def title_of(node: dict[str, Any], parent_role: str | None = None, slot: str | None = None) -> str:
    r = role(node)
    name = node["name"]
    norm = norm_word(node) if r in ("rmsnorm", "layernorm") else None
    if slot in SLOT_TITLES and norm:
        return SLOT_TITLES[slot].format(norm=norm, mlp="MoE" if parent_role == "moe_block" else "MLP")
    if r == "router" and fact(node, "hash_routing"):  # its choice is a table by token id, not the scores (DeepSeek-V4's first blocks)
        return "Hash router"
    if name in ("self_attn", "mlp") and r in ROLE_TITLES:
        return ROLE_TITLES[r]
    if name == "mlp" and r == "gated_mlp":
        return "Dense MLP"
    used = USED_AS_TITLES.get((node["used_as"] or {}).get("as")) if (node["used_as"] or {}).get("by_kind") == "model" else None
    by_model = (node["used_as"] or {}).get("by") == "model"
    if r == "weightless_norm" and (by_model or "RMSNorm" in TITLES.get(name, "")):
        # a block's or the model's norm that holds nothing (OLMo's LayerNorms): named by what it measured to compute
        plain = WEIGHTLESS_WORDS.get(fact(node, "norm"), "Norm without a gain")
        if not by_model:
            return TITLES[name].replace("RMSNorm", plain)
        where = "Embedding and final" if node["used_as"].get("again") else "Final"  # one norm run twice (nanochat's)
        return f"{where} {plain[0].lower()}{plain[1:]}" if plain.startswith("Norm") else f"{where} {plain}"
    if norm:
        if by_model:
            return f"Final {norm}"
        return TITLES[name].replace("RMSNorm", norm) if name in TITLES else norm
    if r == "linear" and linear_use(node):
        return linear_use(node)[0]
    if r == "mlp" and fact(node, "mlp") == "two-layer" and not (used or name in TITLES):
        return "MLP"  # a two-layer MLP by what it is, whatever its name (CTRL's ffn, a Sequential)
    return used or TITLES.get(name) or ROLE_TITLES.get(r) or name


# What a module is, named by the step of the model's own chain that runs it (atlas.proof's "used as"):
# a symbol names a value only in the chain that defines it (a Mamba mixer's chain calls its input projection's output p too).
USED_AS_TITLES = {"e": "Token embedding", "p": "Position embedding", "z": "Language-model head"}

# A linear map by the kind of its parent and the name the parent's step gives its result: (title, what it does).
LINEAR_USES = {
    ("attention", "Q"): ("Query projection", "Projects the stream into the queries of every head"),
    ("attention", "K"): ("Key projection", "Projects the stream into the keys of the key–value heads"),
    ("attention", "V"): ("Value projection", "Projects the stream into the values of the key–value heads"),
    ("attention", "QKV"): ("Query, key and value projection", "Projects the stream into the queries, keys and values of every head at once"),
    ("attention", "y"): ("Output projection", "Mixes the heads' outputs, side by side, back into the residual width"),
    ("attention", "delta"): ("Value-scoring projection", "Projects each position's values of every key-value head to one number a "
                             "key-value head, from which the mask's score of that key comes"),
    ("latent_attention", "y"): ("Output projection", "Mixes the heads' outputs, side by side, back into the residual width"),
    ("dense_mlp", "g"): ("Gate projection", "Projects the stream into the gate that the activation opens"),
    ("dense_mlp", "u"): ("Up projection", "Projects the stream into the features the gate multiplies"),
    ("dense_mlp", "gu"): ("Gate and up projection", "Projects the stream into the gate and the features it multiplies, side by side"),
    ("dense_mlp", "f"): ("Up projection", "Projects the stream into the MLP's hidden features"),
    ("dense_mlp", "y"): ("Down projection", "Projects the hidden features back into the residual width"),
    ("model", "z"): ("Language-model head", "Scores every vocabulary entry from the final normed stream"),
    ("lightning_attention", "p"): ("Query, key and value projection", "Projects the stream into the queries, keys and values of every head at once, before their activation"),
    ("lightning_attention", "y"): ("Output projection", "Mixes the heads' gated, normalized read-outs back into the residual width"),
    ("linear_attention", "p"): ("Query, key, value and gate projection", "Projects the stream into the queries, keys, values and output gates of every head at once, grouped by key head"),
    ("linear_attention", "ba"): ("Write-strength and decay projection", "Projects the stream into each value head's write strength and decay, before their sigmoid and softplus"),
    ("linear_attention", "y"): ("Output projection", "Mixes the value heads' gated, normalized read-outs back into the residual width"),
    ("linear_attention", "q"): ("Query projection", "Projects the stream into the queries of every head, before the short convolution"),
    ("linear_attention", "k"): ("Key projection", "Projects the stream into the keys of every head, before the short convolution"),
    ("linear_attention", "v"): ("Value projection", "Projects the stream into the values of every head, before the short convolution"),
    ("linear_attention", "beta"): ("Write-strength projection", "Projects the stream to one number per head whose sigmoid is how far the state moves towards the new value"),
    ("linear_attention", "za"): ("Output-gate down projection", "Projects the stream into the narrow first half of the low-rank output gate"),
    ("linear_attention", "z"): ("Output-gate up projection", "Expands the low-rank output gate to one value per channel of every head"),
    ("decay_gate", "a"): ("Decay down projection", "Projects the stream into the narrow first half of the low-rank decay"),
    ("decay_gate", "f"): ("Decay up projection", "Expands the low-rank decay to one value per key channel of every head"),
    ("recurrent_block", "gy"): ("Gate-branch projection", "Projects the stream into the branch whose activation multiplies the recurrence's output"),
    ("recurrent_block", "u"): ("Recurrence-branch projection", "Projects the stream into the channels the short convolution and the RG-LRU run on"),
    ("recurrent_block", "out"): ("Output projection", "Mixes the gated recurrence's channels back into the residual width"),
    ("indexer", "q"): ("Indexer query projection", "Expands the normed query latent into the queries of every indexer head"),
    ("indexer", "k"): ("Indexer key projection", "Projects the stream into the indexer's one key per position, shared by its heads"),
    ("indexer", "w"): ("Indexer head weights", "Projects the stream to one weight per indexer head, which mixes the heads' scores into one"),
    ("mamba2", "p"): ("Input projection", "Projects the stream into the mixer's parts side by side: the gate z, the convolution's inputs x, B and C, and a time step per head"),
    ("mamba2", "out"): ("Output projection", "Mixes the gated, normed heads back into the residual width"),
    ("mamba1", "p"): ("Input projection", "Projects the stream into the scan's input and its gate z, side by side"),
    ("mamba1", "q_dt,B,C"): ("Time-step, B and C projection", "Projects the convolved input into each position's low-rank time step and its B and C, side by side"),
    ("mamba1", "out"): ("Output projection", "Mixes the gated scan's channels back into the residual width"),
    ("short_conv", "p"): ("Input projection", "Projects the stream into B, C and x, side by side"),
    ("short_conv", "out"): ("Output projection", "Mixes the gated, convolved channels back into the residual width"),
    ("time_mixing", "k"): ("Key projection", "Projects the token-shifted stream into the keys that weigh each value in the recurrence"),
    ("time_mixing", "v"): ("Value projection", "Projects the token-shifted stream into the values the recurrence averages"),
    ("time_mixing", "r"): ("Receptance projection", "Projects the token-shifted stream into the receptance, whose sigmoid gates the recurrence's read-out"),
    ("time_mixing", "out"): ("Output projection", "Mixes the gated read-out back into the residual width"),
    ("channel_mixing", "k"): ("Key projection", "Projects the token-shifted stream into the wide key, before its squared ReLU"),
    ("channel_mixing", "r"): ("Receptance projection", "Projects the token-shifted stream into the receptance, whose sigmoid gates the output"),
    ("channel_mixing", "out"): ("Value projection", "Projects the squared-ReLU key back to the residual width"),
    ("mixture", "gamma"): ("Shared-expert gate", "Projects the stream to one number per token whose sigmoid scales the shared expert's output"),
}


def linear_use(node: dict[str, Any]) -> tuple[str, str] | None:
    used = node["used_as"] or {}
    return LINEAR_USES.get((used.get("by_kind"), used.get("as")))


def lowercase_title(title: str) -> str:
    """'Latent attention' -> 'latent attention'; 'Gated MLP' -> 'gated MLP'."""
    return " ".join(w if w.isupper() or any(ch.isupper() for ch in w[1:]) else w.lower() for w in title.split())


LINEAR_ROLES = {
    "q_a_proj": "Compresses the normed stream into the query latent",
    "q_b_proj": "Expands the normed query latent into every head's query: its content part and the part matched with the shared key",
    "kv_a_proj_with_mqa": "Compresses the stream into the key–value latent plus one more key part, shared by all heads",
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


def weighted_block_words(parts: list[str], where: str, vectors: dict[str, str]) -> str:
    """A block that weighs its stream per channel at each add (Doge), in words: its sublayers, their norms, the vectors."""
    first, second = vectors.get("attention's add"), vectors.get("MLP's add")
    return (f"Applies {' then '.join(parts)}, {where}; each output is added to the residual stream times a vector of the block's "
            f"own, one weight a channel ({first}, then {second}).")


def value_mask_words(keep: int | None) -> str:
    """An attention's mask scored from its values (Doge's dynamic mask), in words, with its keep window."""
    words = ("each key's values scored, one number a key-value head (exp(A softplus(·)) of a projection), and the score added to "
             "every query's scores of that key")
    return words + (f"; past {keep:,} keys each query sees only the {keep:,} earlier keys of highest score" if isinstance(keep, int) else "")
