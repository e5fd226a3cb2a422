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


# --- Phi-3.5-MoE ----------------------------------------------------------------------------------


def test_phimoe(collected):
    f, c = collected("phimoe").facts, released_config("phimoe")
    V, d, L, H, KV, hd = sizes(c)
    E, K, F = c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"]
    # All four attention projections biased, the head biased, LayerNorms (gain and bias), untied head.
    assert c["attention_bias"] and c["lm_head_bias"] and not c["tie_word_embeddings"]
    block = attention(d, H, KV, hd, qkv_bias=True, o_bias=True) + E * d + E * swiglu(d, F) + 2 * 2 * d
    total = V * d + (V * d + V) + 2 * d + L * block  # embedding, head with its bias, final LayerNorm
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, F)
    # The files under the released names: one tensor per expert and projection (w1, w2, w3).
    assert stored(f)["tensors"] == 3 + 2 + L * (4 + 8 + 1 + 3 * E)
    names = {t["name"] for t in f["checkpoint_check"]["sample"]}
    assert {"model.layers.0.block_sparse_moe.experts.0.w1.weight", "lm_head.bias", "model.norm.bias"} <= names
    # The router's rule was measured, and only SparseMixer reproduces it.
    router = f["equations"]["components"]["transformer_block.mlp.router"]["facts"]
    assert router["kind"]["value"] == "router" and router["routing"]["value"] == "sparsemixer"
    assert router["routing"]["how"].startswith("measured: the only variant")


# --- OLMoE ----------------------------------------------------------------------------------------


def test_olmoe(collected):
    f, c = collected("olmoe").facts, released_config("olmoe")
    V, d, L, H, KV, hd = sizes(c)
    E, K, Fe = c["num_experts"], c["num_experts_per_tok"], c["intermediate_size"]  # intermediate_size: one expert
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and not c["norm_topk_prob"]
    # q_norm and k_norm span the whole projected width (all heads), router without bias, no shared expert.
    block = attention(d, H, KV, hd) + H * hd + KV * hd + E * d + E * swiglu(d, Fe) + 2 * d
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, Fe)
    assert stored(f)["tensors"] == 3 + L * (4 + 2 + 2 + 1 + 3 * E)
    # 2 × expert width equals the width here: the fused expert tensor is square, and the proof still
    # reads it the right way round (its steps reproduce the module).
    assert 2 * Fe == d
    assert f["equations"]["components"]["transformer_block.mlp.experts"]["facts"]["experts"]["value"] == "gated_halves"


# --- Qwen1.5-MoE ----------------------------------------------------------------------------------


def test_qwen2_moe(collected):
    f, c = collected("qwen2_moe").facts, released_config("qwen2_moe")
    V, d, L, H, KV, hd = sizes(c)
    E, K, Fe, Fs = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    # Every block a mixture; Qwen2's attention has q, k, v biases and no o bias; untied head.
    assert c["decoder_sparse_step"] == 1 and not c.get("mlp_only_layers") and not c["tie_word_embeddings"]
    block = attention(d, H, KV, hd, qkv_bias=True) + E * d + E * swiglu(d, Fe) + swiglu(d, Fs) + d + 2 * d  # + shared gate row
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, Fe)
    assert stored(f)["tensors"] == 3 + L * (7 + 2 + 1 + 3 * E + 3 + 1)
    mixture = f["equations"]["components"]["transformer_block.mlp"]["facts"]
    assert mixture["shared_expert_gate"]["value"] == "shared_expert_gate"
    # The plain sum identity is declared not to hold (the gate scales the shared path) and is not measured.
    assert "mixture_sum" in str(f["preview"]["not_applicable"])
    assert "mixture_sum" not in [x["id"] for x in f["preview"]["identities"]]


# --- ERNIE 4.5 21B-A3B ----------------------------------------------------------------------------


def test_ernie4_5_moe(collected):
    f, c = collected("ernie4_5_moe").facts, released_config("ernie4_5_moe")
    V, d, L, H, KV, hd = sizes(c)
    E, K, Fe, F, S = c["moe_num_experts"], c["moe_k"], c["moe_intermediate_size"], c["intermediate_size"], c["moe_num_shared_experts"]
    start, end, step = c["moe_layer_start_index"], c["moe_layer_end_index"], c["moe_layer_interval"]
    assert not c["use_bias"] and c["tie_word_embeddings"] and step == 1 and end == L - 1
    mixtures = list(range(start, end + 1))
    attn = attention(d, H, KV, hd)
    dense_block = attn + swiglu(d, F) + 2 * d
    # router weight, its selection bias (a parameter of [1, experts]), routed experts, shared experts
    moe_block = attn + E * d + E + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d
    total = V * d + d + (L - len(mixtures)) * dense_block + len(mixtures) * moe_block  # tied head
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - len(mixtures) * (E - K) * swiglu(d, Fe)
    assert kinds(f) == {"dense block": [i for i in range(L) if i not in mixtures], "MoE block": mixtures}
    assert stored(f)["tensors"] == 2 + (L - len(mixtures)) * 9 + len(mixtures) * (4 + 2 + 2 + 3 + 3 * E)
    # The proof found the selection bias in the router's child and the pairwise rotary by measuring.
    components = f["equations"]["components"]
    assert components["MoE_block.mlp.gate"]["facts"]["selection_bias"]["value"] is True
    assert components["MoE_block.self_attn"]["facts"]["rotary_layout"]["value"] == "pairs_in_place"
    assert f["equations"]["kinds"]["MoE_block.mlp.gate.moe_statics"] == "offset"


# --- dots.llm1 ------------------------------------------------------------------------------------


def test_dots1(collected):
    f, c = collected("dots1").facts, released_config("dots1")
    V, d, L, H, KV, hd = sizes(c)
    E, K, S, Fe, F = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    dense = c["first_k_dense_replace"]
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and c["moe_layer_freq"] == 1
    # The released file gives the groups no value; the family declares one group, with its reasons.
    assert c["n_group"] is None and c["topk_group"] is None
    from atlas import families

    family = families.load("dots1")
    assert family.config_overrides == {"n_group": 1, "topk_group": 1} and set(family.override_reasons) == {"n_group", "topk_group"}
    attn = attention(d, H, KV, hd) + 2 * hd  # + per-head q_norm, k_norm
    dense_block = attn + swiglu(d, F) + 2 * d
    moe_block = attn + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d
    parameters = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    assert model_parameters(f) == parameters
    assert f["accounting"]["model"]["stored_buffers"] == (L - dense) * E  # the selection bias
    assert model_total(f) == stored(f)["weight_parameters"] == parameters + (L - dense) * E
    assert f["accounting"]["model"]["active"] == model_total(f) - (L - dense) * (E - K) * swiglu(d, Fe)
    assert kinds(f) == {"dense block": list(range(dense)), "MoE block": list(range(dense, L))}


# --- MiniMax-M2 -----------------------------------------------------------------------------------


def test_minimax_m2(collected):
    f, c = collected("minimax_m2").facts, released_config("minimax_m2")
    V, d, L, H, KV, hd = sizes(c)
    E, K, Fe = c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"]  # intermediate_size: one expert
    assert not c["tie_word_embeddings"] and c["use_qk_norm"] and c["qk_norm_type"] == "per_layer"
    assert c["shared_intermediate_size"] == 0 and set(c["attn_type_list"]) == {1}
    # q_norm over all query heads' width, k_norm over the key heads' width; router, experts, two norms.
    block = attention(d, H, KV, hd) + H * hd + KV * hd + E * d + E * swiglu(d, Fe) + 2 * d
    parameters = 2 * V * d + d + L * block
    assert model_parameters(f) == parameters
    assert f["accounting"]["model"]["stored_buffers"] == L * E  # the mixture's selection bias
    assert model_total(f) == stored(f)["weight_parameters"] == parameters + L * E
    assert f["accounting"]["model"]["active"] == model_total(f) - L * (E - K) * swiglu(d, Fe)
    # FP8 with 128 x 128 blocks: the attention projections and the expert matrices, each with its scale.
    q = c["quantization_config"]
    assert q["quant_method"] == "fp8" and q["weight_block_size"] == [128, 128]
    blocks = lambda rows, cols: -(-rows // 128) * -(-cols // 128)  # noqa: E731
    attention_scales = blocks(H * hd, d) + 2 * blocks(KV * hd, d) + blocks(d, H * hd)
    expert_scales = 2 * blocks(Fe, d) + blocks(d, Fe)
    assert stored(f)["scale_elements"] == L * (attention_scales + E * expert_scales)
    quantized = L * (attention(d, H, KV, hd) + E * swiglu(d, Fe))
    assert stored(f)["bytes_by_dtype"]["F8_E4M3"] == quantized
    assert stored(f)["bytes_by_dtype"]["F32"] == 4 * stored(f)["scale_elements"]
    assert stored(f)["bytes_by_dtype"]["BF16"] == 2 * (parameters - quantized + L * E)  # the bias in the weights' dtype
    names = {t["name"] for t in f["checkpoint_check"]["sample"]}
    assert "model.layers.0.block_sparse_moe.experts.0.w1.weight_scale_inv" in names
    router = f["equations"]["components"]["transformer_block.mlp.gate"]["facts"]
    assert router["selection_bias"]["value"] is True and router["routing"]["value"] == "sigmoid_renormalized"


# --- Hunyuan-A13B ---------------------------------------------------------------------------------


def test_hunyuan(collected):
    f, c = collected("hunyuan").facts, released_config("hunyuan")
    V, d, L, H, KV = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, E, F = c["attention_head_dim"], c["num_experts"], c["intermediate_size"]
    # The per-layer lists of the training copy: the same values at every layer.
    assert set(c["moe_topk"]) == {8} and set(c["moe_intermediate_size"]) == {F} and set(c["num_shared_expert"]) == {1}
    assert len(c["moe_topk"]) == len(c["moe_intermediate_size"]) == L
    assert not c["attention_bias"] and not c["mlp_bias"] and c["tie_word_embeddings"] and "head_dim" not in c
    K = c["moe_topk"][0]
    # attention + per-head q/k norms; router (wg), routed experts and the shared MLP, all of width F; two norms
    block = attention(d, H, KV, hd) + 2 * hd + E * d + E * swiglu(d, F) + swiglu(d, F) + 2 * d
    total = V * d + d + L * block  # tied head
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["tensors"] == 2 + L * (4 + 2 + 2 + 1 + 3 * E + 3)
    assert f["equations"]["components"]["transformer_block.self_attn"]["facts"]["rotary_layout"]["value"] == "halves_then_head_norms"


def test_a_per_layer_width_list_must_have_one_size_per_layer():
    from atlas.errors import AtlasError
    from atlas.inputs.preflight import _check_per_layer

    _check_per_layer("config.json", "moe_intermediate_size", [8, 8], 2)
    for bad, words in (([8, 8, 8], "lists 3 sizes, one per layer, but the model has 2 layers"), ([8, -1], "a list of them"), ([8, "8"], "a list of them"), ([], "a list of them")):
        try:
            _check_per_layer("config.json", "moe_intermediate_size", bad, 2)
        except AtlasError as e:
            assert str(e).startswith("config.json: moe_intermediate_size: ") and words in str(e)
        else:
            raise AssertionError(f"{bad!r} passed")


# --- the preview stays tiny -----------------------------------------------------------------------


def test_a_tiny_config_that_is_not_tiny_is_one_error_before_any_weight_is_made():
    """DBRX's probe was killed for memory: its expert sizes sit in a sub-config the generic tiny rule does
    not reach. The preview now counts the tiny model on the meta device first."""
    from types import SimpleNamespace

    import pytest
    from transformers import LlamaConfig, LlamaForCausalLM

    from atlas.errors import AtlasError
    from atlas.model.preview import MAX_PREVIEW_PARAMETERS, _check_tiny

    family = SimpleNamespace(name="example")
    small = LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1, vocab_size=256)
    _check_tiny(family, LlamaForCausalLM, small)
    wide = LlamaConfig(hidden_size=64, intermediate_size=MAX_PREVIEW_PARAMETERS // (3 * 64 * 2) + 1, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=1, vocab_size=256)
    with pytest.raises(AtlasError, match=r"^atlas/families/example.py: preview: the tiny config still builds [\d,]+ parameters"):
        _check_tiny(family, LlamaForCausalLM, wide)
