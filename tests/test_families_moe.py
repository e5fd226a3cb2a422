"""The mixtures of experts added from the reference set, each against a hand derivation.

As in tests/test_families.py, every expected total is derived here from the sizes in the family's
config.json (read from the file by the test) through a formula written out by hand; none is copied from
the facts under test. Where a formula relies on a setting (biases, a tied or untied head, which blocks
are mixtures), the test asserts that setting in the file first.
"""

from __future__ import annotations

from tests.conftest import released_config


def model_total(facts):
    return facts["accounting"]["model"]["total"]


def model_parameters(facts):
    return facts["accounting"]["model"]["parameters"]


def stored(facts):
    return facts["checkpoint_check"]["predicted"]


def attention(d, heads, kv_heads, head_dim, qkv_bias=False, o_bias=False):
    """q, k, v, o projections of grouped-query attention, with the biases the family has."""
    weights = d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d
    biases = (heads * head_dim + 2 * kv_heads * head_dim if qkv_bias else 0) + (d if o_bias else 0)
    return weights + biases


def swiglu(d, ffn):
    return 3 * d * ffn  # gate, up, down


def sizes(c):
    d, H = c["hidden_size"], c["num_attention_heads"]
    return c["vocab_size"], d, c["num_hidden_layers"], H, c["num_key_value_heads"], c.get("head_dim") or d // H


def kinds(facts):
    return {k["label"]: k["indices"] for k in facts["block_kinds"]}


# --- GLM-4.5 Air ----------------------------------------------------------------------------------


def test_glm4_moe(collected):
    f, c = collected("glm4_moe").facts, released_config("glm4_moe")
    V, d, L, H, KV, hd = sizes(c)
    E, K, S, Fe, F = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    dense = c["first_k_dense_replace"]
    # q, k, v carry biases (attention_bias), o_proj none; no q/k norm; an untied head.
    assert c["attention_bias"] and not c["use_qk_norm"] and not c["tie_word_embeddings"]
    attn = attention(d, H, KV, hd, qkv_bias=True)
    dense_block = attn + swiglu(d, F) + 2 * d
    moe_block = attn + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d  # router, routed, shared expert
    parameters = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    assert model_parameters(f) == parameters
    # The router's selection bias is a buffer the files store, one value per routed expert a mixture block.
    assert f["accounting"]["model"]["stored_buffers"] == (L - dense) * E
    assert model_total(f) == parameters + (L - dense) * E
    assert f["accounting"]["model"]["active"] == model_total(f) - (L - dense) * (E - K) * swiglu(d, Fe)
    # The files add the multi-token-prediction block: one more mixture block (with its bias), two norms,
    # eh_proj from 2d to d, the shared head's norm and matrix, and its own embedding.
    mtp = c["num_nextn_predict_layers"]
    assert mtp == 1
    assert stored(f)["weight_parameters"] == model_total(f) + moe_block + E + 2 * d + 2 * d * d + d + 2 * V * d
    assert kinds(f) == {"dense block": list(range(dense)), "MoE block": list(range(dense, L))}
