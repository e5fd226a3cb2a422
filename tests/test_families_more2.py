"""More recent decoder-only families that fit kinds the atlas already proves, each against a hand derivation.

As in tests/test_families_recent.py, every expected figure is derived here from the sizes in the family's
config.json, read from the file by the test and put through a formula written out by hand; none is
copied from the facts under test. Each formula first asserts the settings it relies on (biases, a tied
head, the layer pattern), so a config that changes one fails here rather than passing a formula that no
longer applies. Where the vendor's checkpoint name gives a parameter count, the test compares it at the
vendor's rounding.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import BYTES, gqa_attention, model_total, sizes, stored, swiglu, vocabulary_matrices


def accounting(f):
    return f["accounting"]["model"]


def kinds(facts):
    return sorted((k["attention_type"], k["count"]) for k in facts["block_kinds"])


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


# --- GLM-4.7 Flash --------------------------------------------------------------------------------


def test_glm4_moe_lite_latent_attention_a_dense_first_block_and_the_files_mtp_block(collected):
    f, c = collected("glm4_moe_lite").facts, released_config("glm4_moe_lite")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    E, K, S = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"]
    F, Fe, dense = c["intermediate_size"], c["moe_intermediate_size"], c["first_k_dense_replace"]
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and c["num_nextn_predict_layers"] == 1 and dense == 1
    attention = latent_attention(c)
    dense_block = attention + swiglu(d, F) + 2 * d
    moe_block = attention + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d  # router, routed, shared, norms
    parameters = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    buffers = (L - dense) * E  # the router's selection bias on every mixture block
    assert accounting(f)["parameters"] == parameters and accounting(f)["total"] == parameters + buffers
    assert accounting(f)["active"] == parameters + buffers - (L - dense) * (E - K) * swiglu(d, Fe)
    # the files' multi-token-prediction block: one more mixture block with its bias, enorm and hnorm,
    # eh_proj from 2d to d, the shared head's norm and matrix, and its own embedding
    mtp = moe_block + E + 2 * d + 2 * d * d + d + 2 * V * d
    assert stored(f)["weight_parameters"] == parameters + buffers + mtp
    # the selection biases (every mixture block's, the MTP block's too) are kept in float32, as transformers holds them
    biases = buffers + E
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * (parameters + buffers + mtp - biases), "F32": 4 * biases}
    assert {k["label"]: k["count"] for k in f["block_kinds"]} == {"dense block": dense, "MoE block": L - dense}
    # Z.ai calls it a 30B-A3B model: 29.9 B in all; 3.9 B active, of which the embedding and the head are
    # 0.63 B, and the A3B matches the 3.3 B without them.
    assert round((parameters + buffers) / 1e9) == 30 and round(accounting(f)["active"] / 1e9, 1) == 3.9
    assert round((accounting(f)["active"] - 2 * V * d) / 1e9) == 3


# --- Mellum 2 12B-A2.5B ---------------------------------------------------------------------------


def test_mellum_windowed_and_global_blocks_over_a_mixture_in_every_block(collected):
    f, c = collected("mellum").facts, released_config("mellum")
    V, d, L, H, KV, hd, _ = sizes(c)
    E, K, Fe = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"]
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and c["mlp_layer_types"] == ["sparse"] * L
    attention = gqa_attention(d, H, KV, hd) + 2 * hd  # q_norm and k_norm, one head wide
    block = attention + E * d + E * swiglu(d, Fe) + 2 * d  # router, fused experts, two norms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - L * (E - K) * swiglu(d, Fe)
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 2 + 1 + 3 * E + 2)  # the files hold one tensor per expert and projection
    # every fourth block global, the others windowed
    assert kinds(f) == [("full_attention", L // 4), ("sliding_attention", L - L // 4)]
    # JetBrains names it 12B total, 2.5B active (A2.5B): ours are 12.1 B and 2.44 B, the active count
    # rounded up to the nearest half billion in the name.
    assert round(total / 1e9) == 12 and 2.4e9 < accounting(f)["active"] < 2.5e9


# --- Youtu-LLM 2B ---------------------------------------------------------------------------------


def test_youtu_latent_attention_in_a_dense_model_with_a_tied_head(collected):
    f, c = collected("youtu").facts, released_config("youtu")
    V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    assert not c["attention_bias"] and c["tie_word_embeddings"] and c["qk_head_dim"] == c["qk_nope_head_dim"] + c["qk_rope_head_dim"]
    block = latent_attention(c) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (7 + 3 + 2)
    # Tencent names it a 2B model: 1.96 B, rounded.
    assert round(total / 1e9) == 2


# --- Jais 2 8B ------------------------------------------------------------------------------------


def test_jais2_layernorms_biases_and_an_ungated_squared_relu(collected):
    f, c = collected("jais2").facts, released_config("jais2")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["attention_bias"] and c["mlp_bias"] and c["hidden_act"] == "relu2" and not c["tie_word_embeddings"]
    norm = 2 * d  # a LayerNorm's gain and bias
    block = gqa_attention(d, H, KV, hd, bias=True) + 2 * d * F + F + d + 2 * norm  # up and down with biases
    total = vocabulary_matrices(c) * V * d + norm + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 2 + L * (8 + 4 + 4)
    # Inception names it an 8B model: 8.1 B, rounded.
    assert round(total / 1e9) == 8


# --- Hunyuan A13B ---------------------------------------------------------------------------------


def test_hunyuan_moe_routed_experts_beside_a_shared_mlp_and_a_tied_head(collected):
    f, c = collected("hunyuan_v1_moe").facts, released_config("hunyuan_v1_moe")
    V, d, L, H, KV, hd, F = sizes(c)
    E = c["num_experts"]
    assert set(c["moe_topk"]) == {8} and set(c["moe_intermediate_size"]) == {F} and set(c["num_shared_expert"]) == {1}
    assert c["use_qk_norm"] and not c["use_cla"] and not c["attention_bias"] and c["tie_word_embeddings"]
    K = 8
    attention = gqa_attention(d, H, KV, hd) + 2 * hd  # query_layernorm and key_layernorm, one head wide
    block = attention + E * d + E * swiglu(d, F) + swiglu(d, F) + 2 * d  # router, routed, shared MLP, norms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 2 + 1 + 3 * E + 3 + 2)  # one tensor per expert and projection
    # The page lists the one edit: the per-layer top-k read as its single value.
    edits = {e["key"]: e for e in f["checkpoint"]["overrides"]}
    assert set(edits) == {"moe_topk", "head_dim"}
    assert edits["moe_topk"]["in_file"] == c["moe_topk"] and edits["moe_topk"]["value"] == K
    assert not edits["head_dim"]["in_file_present"] and edits["head_dim"]["value"] == c["attention_head_dim"] == d // H
    # Tencent names it 80B total, 13B active (A13B); ours agree at that rounding (80.4 B and 12.7 B).
    assert round(total / 1e9) == 80 and round(accounting(f)["active"] / 1e9) == 13


# --- Ministral 3 8B -------------------------------------------------------------------------------


def test_ministral3_is_mistral_inside_a_vision_language_wrapper(collected):
    f, c = collected("ministral3").facts, released_config("ministral3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["tie_word_embeddings"] and c["sliding_window"] is None and c["rope_parameters"]["rope_type"] == "yarn"
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == total
    assert [k["count"] for k in f["block_kinds"]] == [L]  # one kind of block: no window anywhere
    outside = f["model"]["outside_text_model"]
    assert outside["text_model_path"] == "model.language_model"
    assert sorted(p["path"] for p in outside["parts"]) == ["model.multi_modal_projector", "model.vision_tower"]
    # Mistral gives 8.4B for the language model and 0.4B for the vision encoder: ours are 8.49 B, cut
    # (not rounded) to a tenth, and 0.43 B.
    assert int(total / 1e8) == 84 and round(outside["parameters"] / 1e9, 1) == 0.4


# --- Cohere2 MoE (Command A+ defaults) ------------------------------------------------------------


def test_cohere2_moe_one_bias_free_layernorm_a_block_and_a_tied_head(collected):
    f, c = collected("cohere2_moe").facts, released_config("cohere2_moe")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K = c["num_experts"], c["num_experts_per_tok"]
    assert c["rms_norm_eps"] is None and not c["attention_bias"] and c["tie_word_embeddings"]
    assert c["num_shared_experts"] == 0 and c["mlp_layer_types"] == ["sparse"] * L
    block = gqa_attention(d, H, KV, hd) + E * d + E * swiglu(d, F) + d  # router, experts, one LayerNorm gain
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 1 + 3 * E + 1)
    assert kinds(f) == [("full_attention", L // 4), ("sliding_attention", L - L // 4)]
