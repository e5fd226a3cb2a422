"""Decoder-only families added by the fam3 task, each against a hand derivation.

As in tests/test_families_more2.py, every expected figure is derived here from the sizes in the family's
config.json, read from the file by the test and put through a formula written out by hand; none is
copied from the facts under test. Each formula first asserts the settings it relies on (biases, a tied
head, the expert layout), so a config that changes one fails here rather than passing a formula that no
longer applies. Where the vendor's checkpoint name gives a parameter count, the test compares it at the
vendor's rounding.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import BYTES, gqa_attention, model_total, sizes, stored, swiglu, vocabulary_matrices


def accounting(f):
    return f["accounting"]["model"]


# --- GraniteMoeShared (the configuration class's defaults) ----------------------------------------


def test_granitemoeshared_a_shared_swiglu_beside_fused_experts(collected):
    f, c = collected("granitemoeshared").facts, released_config("granitemoeshared")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K, S = c["num_local_experts"], c["num_experts_per_tok"], c["shared_intermediate_size"]
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and S > 0
    # router (a bias-free linear to E logits), E SwiGLU experts of width F, the shared SwiGLU of width S, two RMSNorms
    block = gqa_attention(d, H, KV, hd) + E * d + E * swiglu(d, F) + swiglu(d, S) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    # embedding, final norm, head; per block q/k/v/o, two norms, the router, the two fused expert
    # tensors and the shared expert's two (gate and up fused in input_linear)
    assert stored(f)["tensors"] == 3 + L * (4 + 2 + 1 + 2 + 2)
    # The class's sizes are not IBM's 7B-1B: they come to 37.4 B in all, 11.5 B active.
    assert round(total / 1e9, 1) == 37.4 and round(accounting(f)["active"] / 1e9, 1) == 11.5


# --- AFM-4.5B (Arcee) -----------------------------------------------------------------------------


def test_arcee_an_ungated_squared_relu_mlp_of_two_matrices(collected):
    f, c = collected("arcee").facts, released_config("arcee")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["hidden_act"] == "relu2" and not c["mlp_bias"] and not c["attention_bias"] and not c["tie_word_embeddings"]
    block = gqa_attention(d, H, KV, hd) + 2 * d * F + 2 * d  # up and down, no gate; two RMSNorms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 3 + L * (4 + 2 + 2)
    # Arcee calls it a 4.5B model and the Hub lists 4.6B for the repository: ours is 4.62 B.
    assert round(total / 1e9, 1) == 4.6


# --- GLM-4-9B-Chat (model_type glm) ---------------------------------------------------------------


def test_glm_two_norms_a_block_qkv_biases_and_a_fused_swiglu(collected):
    f, c = collected("glm").facts, released_config("glm")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["attention_bias"] and not c["tie_word_embeddings"] and "partial_rotary_factor" not in c
    # biases on q, k and v only: the output projection has none
    attention = gqa_attention(d, H, KV, hd) + H * hd + 2 * KV * hd
    block = attention + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    # per block q/k/v weights and biases, o, the fused gate_up and down, two norms
    assert stored(f)["tensors"] == 3 + L * (7 + 2 + 2)
    # Zhipu calls it a 9B model: 9.40 B, rounded.
    assert round(total / 1e9) == 9


# --- Granite SWA (the configuration class's defaults) ---------------------------------------------


def kinds(facts):
    return sorted((k["attention_type"], k["count"]) for k in facts["block_kinds"])


def test_granite_swa_windowed_blocks_a_sink_per_head_and_a_tied_head(collected):
    f, c = collected("granite_swa").facts, released_config("granite_swa")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["tie_word_embeddings"] and not c["attention_bias"] and not c["mlp_bias"]
    block = gqa_attention(d, H, KV, hd) + H + swiglu(d, F) + 2 * d  # one sink logit a head, two RMSNorms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + L * (4 + 1 + 3 + 2)
    # every fourth block (0, 4, ...) global, the others windowed
    assert kinds(f) == [("full_attention", L // 4), ("sliding_attention", L - L // 4)]
    # the class's sizes come to 2.14 B, the "2b" of the checkpoint's name
    assert round(total / 1e9) == 2


def test_granite_swa_sink_is_proven_as_a_scale_on_the_heads_outputs(collected):
    components = collected("granite_swa").facts["equations"]["components"]
    attention = {k: c for k, c in components.items() if k.endswith("self_attn")}
    assert sorted(attention) == ["global_block.self_attn", "sliding_window_block.self_attn"]
    for c in attention.values():
        assert c["facts"]["sink_placement"]["value"] == "output_scale" and c["facts"]["sinks"]["value"] is True
        assert c["proof"]["error"] <= c["proof"]["tolerance"]


def test_a_sink_in_the_softmax_does_not_reproduce_granite_swa(project_copy):
    """The declared placement matters: without it the steps put the sink in the softmax, and the first
    step that reads the module's returned weights diverges, so the build stops naming it."""
    from tests.conftest import run_build

    module = project_copy / "atlas/families/granite_swa.py"
    text = module.read_text()
    module.write_text(text.replace('equations={"*.self_attn": {"sink_placement": "output_scale"}},', ""))
    result = run_build(project_copy, "--family", "granite_swa", "--out", str(project_copy / "site"))
    assert result.returncode == 1
    assert "a learned sink logit per head, dropped after the softmax" in result.stderr and "does not reproduce" in result.stderr


# --- K-EXAONE 236B-A23B ---------------------------------------------------------------------------


def test_exaone_moe_a_dense_first_block_then_sigmoid_routed_experts_beside_a_shared_one(collected):
    f, c = collected("exaone_moe").facts, released_config("exaone_moe")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K, S, Fe = c["num_experts"], c["num_experts_per_tok"], c["num_shared_experts"], c["moe_intermediate_size"]
    dense = c["first_k_dense_replace"]
    assert dense == 1 and not c["tie_word_embeddings"] and S == 1
    attention = gqa_attention(d, H, KV, hd) + 2 * hd  # q_norm and k_norm, one head wide
    dense_block = attention + swiglu(d, F) + 2 * d
    moe_block = attention + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d  # router, routed, shared, norms
    parameters = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    buffers = (L - dense) * E  # the router's selection bias on every mixture block
    assert accounting(f)["parameters"] == parameters and model_total(f) == parameters + buffers
    assert accounting(f)["active"] == parameters + buffers - (L - dense) * (E - K) * swiglu(d, Fe)
    assert stored(f)["weight_parameters"] == parameters + buffers
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * (parameters + buffers)}
    # per block q/k/v/o, q/k norms and two norms; the dense MLP's three; a mixture's router, its bias,
    # one tensor per expert and projection and the shared expert's three
    assert stored(f)["tensors"] == 3 + dense * (8 + 3) + (L - dense) * (8 + 2 + 3 * E + 3)
    # every fourth block global: the windowed ones are the dense block and three in four mixtures
    assert kinds(f) == [("full_attention", L // 4), ("sliding_attention", 1), ("sliding_attention", L - L // 4 - 1)]
    # LG names it 236B total, 23B active (A23B): ours are 236.6 B and 23.7 B, cut (not rounded) to the billion.
    assert int(model_total(f) / 1e9) == 236
    assert int(accounting(f)["active"] / 1e9) == 23


# --- GraniteMoE SWA (the configuration class's defaults) ------------------------------------------


def test_granitemoe_swa_sinks_windows_and_fused_experts_without_a_shared_one(collected):
    f, c = collected("granitemoe_swa").facts, released_config("granitemoe_swa")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K = c["num_local_experts"], c["num_experts_per_tok"]
    assert c["shared_intermediate_size"] == 0 and not c["tie_word_embeddings"] and not c["attention_bias"]
    # attention with one sink a head, the router, E fused SwiGLU experts, two RMSNorms
    block = gqa_attention(d, H, KV, hd) + H + E * d + E * swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert accounting(f)["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 3 + L * (4 + 1 + 2 + 1 + 2)
    assert kinds(f) == [("full_attention", L // 4), ("sliding_attention", L - L // 4)]
    components = f["equations"]["components"]
    assert {k: v["facts"]["sink_placement"]["value"] for k, v in components.items() if k.endswith("self_attn")} == {
        "global_block.self_attn": "output_scale", "sliding_window_block.self_attn": "output_scale"}
    # the class's sizes are not IBM's 3B-A600M: 37.0 B in all, 11.1 B active
    assert round(total / 1e9, 1) == 37.0 and round(accounting(f)["active"] / 1e9, 1) == 11.1
