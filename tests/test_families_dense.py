"""The dense oddities and the sparse-attention families, each against a hand derivation.

As in tests/test_families.py, every expected figure is derived here from the sizes in the family's
config.json, read from the file by the test and put through a formula written out by hand; none is
copied from the facts under test. Each formula first asserts the settings it relies on (biases, a tied
head, which layers slide), so a config that changes one fails here rather than passing a formula that
no longer applies.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import BYTES, gqa_attention, model_total, sizes, stored, swiglu, vocabulary_matrices


def kinds(facts):
    return [(k["attention_type"], k["count"]) for k in facts["block_kinds"]]


# --- EXAONE 4.0 1.2B ------------------------------------------------------------------------------


def test_exaone4_post_norms_per_head_qk_norms_and_a_tied_head(collected):
    f, c = collected("exaone4").facts, released_config("exaone4")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["tie_word_embeddings"] and c["hidden_act"] == "silu"
    assert "attention_bias" not in c and "mlp_bias" not in c  # Exaone4's projections take no bias
    # attention, per-head q_norm and k_norm (head_dim each), SwiGLU, two post-norms
    block = gqa_attention(d, H, KV, hd) + 2 * hd + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 2 + 3 + 2)
    # No window configured: every layer is full attention.
    assert c["sliding_window"] is None and set(c["layer_types"]) == {"full_attention"}
    assert kinds(f) == [("full_attention", L)]
    children = {c["name"]: c["parameters"] for c in f["accounting"]["block_kinds"][0]["tree"]["children"]}
    assert children == {"self_attn": gqa_attention(d, H, KV, hd) + 2 * hd, "mlp": swiglu(d, F),
                        "post_attention_layernorm": d, "post_feedforward_layernorm": d}  # no input norm


# --- OLMo 3 7B ------------------------------------------------------------------------------------


def test_olmo3_three_windowed_layers_to_one_global_and_full_width_qk_norms(collected):
    f, c = collected("olmo3").facts, released_config("olmo3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and KV == H
    # attention, q_norm and k_norm over the whole projections (H*hd and KV*hd), SwiGLU, two post-norms
    block = gqa_attention(d, H, KV, hd) + H * hd + KV * hd + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 2 + 3 + 2)
    # Every fourth layer global, the rest windowed: counted here from the file's own list.
    globals_ = [i for i, kind in enumerate(c["layer_types"]) if kind == "full_attention"]
    assert globals_ == list(range(3, L, 4)) and c["sliding_window"]
    assert sorted(kinds(f)) == [("full_attention", len(globals_)), ("sliding_attention", L - len(globals_))]
    assert c["rope_scaling"]["rope_type"] == "yarn"


# --- Seed-OSS 36B ---------------------------------------------------------------------------------


def test_seed_oss_biases_on_qkv_only(collected):
    f, c = collected("seed_oss").facts, released_config("seed_oss")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["attention_bias"] and not c["attention_out_bias"] and not c["mlp_bias"] and not c["tie_word_embeddings"]
    qkv_biases = H * hd + 2 * KV * hd  # no o_proj bias: gqa_attention(bias=True) would add d too much
    block = gqa_attention(d, H, KV, hd) + qkv_biases + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert gqa_attention(d, H, KV, hd, bias=True) - d == gqa_attention(d, H, KV, hd) + qkv_biases
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 3 + 3 + 2)
    assert kinds(f) == [(None, L)]


# --- Phi-4-mini -----------------------------------------------------------------------------------


def test_phi4_mini_fused_projections_grouped_heads_tied_head_and_partial_rotary(collected):
    f, c = collected("phi4_mini").facts, released_config("phi4_mini")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["mlp_bias"] and c["tie_word_embeddings"] and KV < H
    block = d * (H + 2 * KV) * hd + H * hd * d + d * 2 * F + F * d + 2 * d  # qkv_proj, o_proj, gate_up_proj, down_proj, norms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 1 + 1 + L * 6
    sample = {t["name"]: t["shape"] for t in f["checkpoint_check"]["sample"]}
    assert sample["model.layers.0.self_attn.qkv_proj.weight"] == [(H + 2 * KV) * hd, d]
    # The rotation step says how much of a head it turns, at the checkpoint's sizes.
    rotated = int(hd * c["partial_rotary_factor"])
    assert rotated < hd and len(c["rope_scaling"]["long_factor"]) == rotated // 2
    steps = [s["tex"] for s in f["equations"]["components"]["transformer_block.self_attn"]["steps"]]
    assert sum(rf"\text{{on the first }}{rotated}\text{{ of }}{hd}\text{{ dims" in tex for tex in steps) == 1


def test_whole_head_rotary_says_nothing_about_a_share(collected):
    steps = [s["tex"] for s in collected("phi3").facts["equations"]["components"]["transformer_block.self_attn"]["steps"]]
    assert not any("unrotated" in tex for tex in steps)


# --- Granite 3.3 8B -------------------------------------------------------------------------------


def test_granite_scales_every_stage_and_the_identities_say_so(collected):
    f, c = collected("granite").facts, released_config("granite")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["mlp_bias"] and c["tie_word_embeddings"]
    total = vocabulary_matrices(c) * V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total  # the scales are numbers, not tensors
    assert stored(f)["tensors"] == 1 + 1 + L * 9
    # The preview's identities carry the config's scales, and hold.
    measured = {i["id"]: i for i in f["preview"]["identities"]}
    r, e, s = c["residual_multiplier"], c["embedding_multiplier"], c["logits_scaling"]
    assert f"residual_multiplier ({r:g}) *" in measured["block_sum"]["statement"]
    assert f"residual_multiplier ({r:g}) *" in measured["attention_add"]["statement"]
    assert measured["embeddings"]["statement"].startswith(f"embedding_multiplier ({e:g}) *")
    assert f"logits_scaling ({s:g})" in measured["logits"]["statement"]
    assert all(i["holds"] for i in measured.values())


def test_unscaled_families_keep_the_plain_identities(collected):
    measured = {i["id"]: i["statement"] for i in collected("llama").facts["preview"]["identities"]}
    assert measured["block_sum"] == "layers[i].input + self_attn.attention_output + mlp.mlp_output == layer_output"
    assert measured["embeddings"] == "token_embeddings == layers[0].input"
    assert measured["logits"] == "logits == lm_head_output"


# --- MiniCPM3 4B ----------------------------------------------------------------------------------


def test_minicpm3_latent_attention_tied_head_and_depth_scaled_adds(collected):
    import math

    f, c = collected("minicpm3").facts, released_config("minicpm3")
    V, d, L, H = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    F, nope, rope, rq, rkv = c["intermediate_size"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["q_lora_rank"], c["kv_lora_rank"]
    # Settings the formula relies on: no biases and the head tied (both the class defaults the file leaves
    # in place), and no v_head_dim given, so values are hidden / heads wide.
    assert "attention_bias" not in c and "tie_word_embeddings" not in c and "v_head_dim" not in c
    dv = d // H
    attention = (d * rq + rq + rq * H * (nope + rope)  # q_a_proj, q_a_layernorm, q_b_proj
                 + d * (rkv + rope) + rkv + rkv * H * (nope + dv)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
                 + H * dv * d)  # o_proj
    total = V * d + d + L * (attention + swiglu(d, F) + 2 * d)  # one vocabulary matrix: tied by default
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 1 + 1 + L * (7 + 3 + 2)
    eq = f["equations"]["components"]
    # The residual factor at the checkpoint's depth, the embedding scale and where the logits are divided.
    last = eq["transformer_block"]["steps"][-1]["tex"]
    assert rf"\tfrac{{{c['scale_depth']}}}{{\sqrt{{{L}}}}}" in last
    assert eq["transformer_block"]["facts"]["residual_scale"]["value"] == "config_scale_depth"
    assert eq["embed_tokens"]["facts"]["embedding_scale"]["value"] == {"config_key": "scale_emb", "value": c["scale_emb"]}
    assert eq["model"]["facts"]["logits_scale_place"]["value"] == "before_head"
    assert eq["model"]["facts"]["logits_scaling"]["value"] == d / c["dim_model_base"]
    block_sum = next(i for i in f["preview"]["identities"] if i["id"] == "block_sum")
    assert block_sum["holds"] and "scale_depth / sqrt(num_hidden_layers)" in block_sum["statement"]
    assert not math.isclose(c["scale_depth"] / math.sqrt(L), c["scale_depth"] / math.sqrt(3))


def test_granite_divides_what_the_head_returns(collected):
    facts = collected("granite").facts["equations"]["components"]["model"]["facts"]
    assert facts["logits_scale_place"]["value"] == "after_head"
    assert facts["embedding_scale"]["value"] == "config_embedding_multiplier"


# --- Apertus 8B -----------------------------------------------------------------------------------


def test_apertus_ungated_mlp_and_a_learned_activation(collected):
    f, c = collected("apertus").facts, released_config("apertus")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["mlp_bias"] and not c["tie_word_embeddings"] and c["qk_norm"]
    assert c["hidden_act"] == "xielu" and not c["post_norm"]
    mlp = 2 * d * F  # up and down, no gate
    activation = 2 + 2  # alpha_p, alpha_n (parameters) and beta, eps (persistent one-number buffers)
    block = gqa_attention(d, H, KV, hd) + 2 * hd + mlp + activation + 2 * d
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 2 + 2 + 4 + 2)
    eq = f["equations"]["components"]
    assert eq["transformer_block.mlp.act_fn"]["facts"]["activation"]["value"] == "xielu"
    assert eq["transformer_block.mlp"]["facts"]["mlp"]["value"] == "two-layer"
    # No biases, so the steps write none.
    assert not any("b_1" in s["tex"] or "b_2" in s["tex"] for s in eq["transformer_block.mlp"]["steps"])


# --- DeepSeek-V2-Lite -----------------------------------------------------------------------------


def test_deepseek_v2_lite_direct_queries_complex_rotary_and_softmax_experts(collected):
    f, c = collected("deepseek_v2").facts, released_config("deepseek_v2")
    V, d, L, H = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    nope, rope, dv, rkv = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"], c["kv_lora_rank"]
    E, K, S, Fm, F = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    dense = c["first_k_dense_replace"]
    # Settings the formula relies on: no query latent, no biases, untied head, a mixture in every block
    # after the dense ones, no per-expert selection bias (softmax scores, greedy top-k).
    assert c["q_lora_rank"] is None and not c["attention_bias"] and not c["tie_word_embeddings"] and c["moe_layer_freq"] == 1
    assert c["scoring_func"] == "softmax" and not c["norm_topk_prob"]
    attention = (d * H * (nope + rope)  # q_proj
                 + d * (rkv + rope) + rkv + rkv * H * (nope + dv)  # kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj
                 + H * dv * d)  # o_proj
    mixture = E * swiglu(d, Fm) + E * d + swiglu(d, S * Fm)  # routed experts, router, the shared experts as one MLP
    total = 2 * V * d + d + dense * (attention + swiglu(d, F) + 2 * d) + (L - dense) * (attention + mixture + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - (L - dense) * (E - K) * swiglu(d, Fm)
    assert sorted((k["label"], k["count"]) for k in f["block_kinds"]) == [("MoE block", L - dense), ("dense block", dense)]
    eq = f["equations"]["components"]
    assert eq["MoE_block.self_attn"]["facts"]["rotary_layout"]["value"] == "interleaved_pairs_complex"
    assert eq["MoE_block.self_attn"]["facts"]["latent"]["value"]["q_lora_rank"] is None
    assert eq["MoE_block.mlp.gate"]["facts"]["routing"]["value"] == "softmax"
    assert "complex" in next(i["what"] for i in eq["MoE_block.self_attn"]["inputs"] if i["argument"] == "position_embeddings")


def test_cos_sin_rotary_keeps_its_words(collected):
    inputs = collected("deepseek_v3").facts["equations"]["components"]
    attention = next(v for k, v in inputs.items() if k.endswith("self_attn"))
    assert next(i["what"] for i in attention["inputs"] if i["argument"] == "position_embeddings") == "cos and sin of each position's rotary angles"


# --- the preview of a stack that lists each block's MLP kind (DeepSeek-V3.2, GLM-5) ---------------


def test_mlp_layer_types_are_cut_to_the_tiny_stack():
    """transformers refuses a config whose mlp_layer_types list is longer than its stack; the preview keeps
    the first entries, so the tiny model has the pinned model's dense blocks and then its sparse ones."""
    from types import SimpleNamespace

    from transformers import DeepseekV32Config

    from atlas.model.tiny import tiny_config, tiny_values

    pinned = DeepseekV32Config(num_hidden_layers=61, first_k_dense_replace=3, head_dim=64)
    assert len(pinned.mlp_layer_types) == 61
    values = tiny_values(pinned)
    assert values["mlp_layer_types"] == ["dense"] * 3 + ["sparse"] * (values["num_hidden_layers"] - 3)
    tiny = tiny_config(SimpleNamespace(preview=None), pinned)  # built without transformers' length check failing
    assert tiny.mlp_layer_types == values["mlp_layer_types"] and tiny.num_hidden_layers == len(tiny.mlp_layer_types)
