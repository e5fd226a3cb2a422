"""Families added by fam4 (Mistral Small 4, A.X K1, Trinity Nano), each total against a hand derivation.

As in tests/test_families_more2.py, every expected figure is derived here from the sizes in the family's
config.json, read from the file by the test and put through a formula written out by hand; none is
copied from the facts under test. Each formula first asserts the settings it relies on (biases, a tied
head, the layer pattern), so a config that changes one fails here rather than passing a formula that no
longer applies. Where the vendor names a parameter count, the test compares it at the vendor's rounding.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import gqa_attention, sizes, stored, swiglu


def accounting(f):
    return f["accounting"]["model"]


def latent_attention(c):
    """Multi-head latent attention with a query latent and no biases: the two down projections, their two
    RMSNorms, the two up projections and the output projection."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    rq, rkv = c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    return (d * rq + rq + rq * H * (nope + rope)     # q_a_proj, q_a_layernorm, q_b_proj
            + d * (rkv + rope) + rkv                 # kv_a_proj_with_mqa, kv_a_layernorm
            + rkv * H * (nope + v)                   # kv_b_proj
            + H * v * d)                             # o_proj


# --- Mistral Small 4 ------------------------------------------------------------------------------


def test_mistral4_latent_attention_over_a_mixture_in_every_block(collected):
    f, c = collected("mistral4").facts, released_config("mistral4")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    E, K, S, Fe = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"], c["moe_intermediate_size"]
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and c["first_k_dense_replace"] == 0
    # router (no selection bias), routed experts, the shared expert, two RMSNorms
    block = latent_attention(c) + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d
    total = 2 * V * d + d + L * block
    assert accounting(f)["parameters"] == accounting(f)["total"] == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - L * (E - K) * swiglu(d, Fe)
    assert [k["count"] for k in f["block_kinds"]] == [L]  # one kind of block: every one a mixture
    # Mistral calls it a 119B model; the text model alone is 118.9 B (the vision encoder is not counted here)
    assert round(total / 1e9) == 119


# --- A.X K1 -----------------------------------------------------------------------------------------


def test_axk1_deepseek_v3_layout_with_a_norm_after_each_mixture(collected):
    f, c = collected("axk1").facts, released_config("axk1")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    E, K, S = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"]
    F, Fe = c["intermediate_size"], c["moe_intermediate_size"]
    dense = c["mlp_layer_types"].count("dense")
    assert not c["attention_bias"] and not c["tie_word_embeddings"]
    assert c["mlp_layer_types"] == ["dense"] * dense + ["sparse"] * (L - dense) and dense == 1
    attention = latent_attention(c)
    dense_block = attention + swiglu(d, F) + 2 * d
    # router, routed experts, shared expert, the mixture's own output norm, the block's two norms
    moe_block = attention + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + d + 2 * d
    parameters = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    buffers = (L - dense) * E  # the router's selection bias on every mixture block
    assert accounting(f)["parameters"] == parameters and accounting(f)["total"] == parameters + buffers
    assert accounting(f)["active"] == parameters + buffers - (L - dense) * (E - K) * swiglu(d, Fe)
    assert {k["label"]: k["count"] for k in f["block_kinds"]} == {"dense block": dense, "MoE block": L - dense}


# --- Trinity Nano (AFMoE) ---------------------------------------------------------------------------


def test_afmoe_sandwich_norms_gated_attention_and_two_dense_blocks(collected):
    f, c = collected("afmoe").facts, released_config("afmoe")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K, S, Fe = c["num_experts"], c["num_experts_per_tok"], c["num_shared_experts"], c["moe_intermediate_size"]
    dense = c["num_dense_layers"]
    assert not c["tie_word_embeddings"] and "attention_bias" not in c and dense == 2
    assert c["layer_types"] == [("full_attention" if (i + 1) % 4 == 0 else "sliding_attention") for i in range(L)]
    # q, k, v, o; the output gate (as wide as the heads); q_norm and k_norm one head wide
    attention = gqa_attention(d, H, KV, hd) + d * H * hd + 2 * hd
    norms = 4 * d  # input, post-attention, pre-MLP and post-MLP RMSNorms
    dense_block = attention + swiglu(d, F) + norms
    # router, its selection bias (a parameter of the mixture), routed experts, the shared expert
    moe_block = attention + E * d + E + E * swiglu(d, Fe) + swiglu(d, S * Fe) + norms
    total = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    assert accounting(f)["total"] == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - (L - dense) * (E - K) * swiglu(d, Fe)
    kinds = {(k["attention_type"], k["label"]): k["count"] for k in f["block_kinds"]}
    assert sum(kinds.values()) == L and sum(n for (kind, _), n in kinds.items() if kind == "sliding_attention") == L - L // 4
    # Arcee's technical report: Trinity Nano has 6B parameters, 1B active per token
    assert round(total / 1e9) == 6 and round(accounting(f)["active"] / 1e9) == 1
