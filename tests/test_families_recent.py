"""Recent decoder-only families that fit kinds the atlas already proves, each against a hand derivation.

As in tests/test_families_dense.py, every expected figure is derived here from the sizes in the
family's config.json, read from the file by the test and put through a formula written out by hand;
none is copied from the facts under test. Each formula first asserts the settings it relies on (biases,
a tied head, fused projections), so a config that changes one fails here rather than passing a formula
that no longer applies. Where the vendor publishes a parameter count, the test compares it at the
vendor's rounding.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import BYTES, gqa_attention, model_total, sizes, stored, swiglu, vocabulary_matrices


def kinds(facts):
    return [(k["attention_type"], k["count"]) for k in facts["block_kinds"]]


def children(facts, kind=0):
    return {c["name"]: c["parameters"] for c in facts["accounting"]["block_kinds"][kind]["tree"]["children"]}


# --- GLM-4 9B (0414) ------------------------------------------------------------------------------


def test_glm4_four_norms_qkv_biases_and_a_fused_gate_up(collected):
    f, c = collected("glm4").facts, released_config("glm4")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["attention_bias"] and not c["tie_word_embeddings"] and c["partial_rotary_factor"] == 0.5
    attention = gqa_attention(d, H, KV, hd) + H * hd + 2 * KV * hd  # biases on q, k, v; none on o_proj
    block = attention + swiglu(d, F) + 4 * d  # gate_up_proj (2F x d) + down_proj, and four RMSNorms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 3 + 2 + 4)
    assert children(f) == {"self_attn": attention, "mlp": swiglu(d, F), "input_layernorm": d,
                           "post_self_attn_layernorm": d, "post_attention_layernorm": d, "post_mlp_layernorm": d}
    # The vendor calls it a 9B model; the count rounds to 9 at one figure.
    assert round(total / 1e9) == 9


# --- InternLM3 8B ---------------------------------------------------------------------------------


def test_internlm3_is_llama_read_through_its_own_names(collected):
    f, c = collected("internlm3").facts, released_config("internlm3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["qkv_bias"] and not c["bias"] and not c["tie_word_embeddings"] and H == 16 * KV
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 3 + 2)
    # The vendor names it an 8B model: 8.8 billion cut, not rounded, to whole billions (the untied head's
    # 0.53 B is what takes it past 8.5).
    assert int(total / 1e9) == 8 and round(total / 1e9, 1) == 8.8


# --- Hunyuan 7B (dense) ---------------------------------------------------------------------------


def test_hunyuan_dense_qk_norms_after_the_rotation_and_a_tied_head(collected):
    f, c = collected("hunyuan_v1_dense").facts, released_config("hunyuan_v1_dense")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["use_qk_norm"] and not c["use_cla"] and not c["attention_bias"] and not c["mlp_bias"]
    assert c["tie_word_embeddings"] and c["rope_scaling"]["alpha"] == 1000
    attention = gqa_attention(d, H, KV, hd) + 2 * hd  # query_layernorm and key_layernorm, one head wide
    block = attention + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 2 + 3 + 2)
    assert children(f)["self_attn"] == attention
    # The vendor names it a 7B model: 7.5 billion, cut to whole billions.
    assert int(total / 1e9) == 7 and round(total / 1e9, 1) == 7.5


# --- ERNIE 4.5 0.3B -------------------------------------------------------------------------------


def test_ernie4_5_dense_wide_heads_and_a_tied_head(collected):
    f, c = collected("ernie4_5").facts, released_config("ernie4_5")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["use_bias"] and c["tie_word_embeddings"] and H * hd > d  # queries wider than the stream
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 3 + 2)
    # Baidu's model card gives 0.36B parameters; ours agrees at that rounding.
    assert round(total / 1e9, 2) == 0.36


# --- Helium 1 preview 2B --------------------------------------------------------------------------


def test_helium_multi_head_attention_and_an_untied_head(collected):
    f, c = collected("helium").facts, released_config("helium")
    V, d, L, H, KV, hd, F = sizes(c)
    assert KV == H and not c["attention_bias"] and not c["mlp_bias"] and not c["tie_word_embeddings"]
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 3 + 2)
    embeddings = next(i for i in f["preview"]["identities"] if i["id"] == "embeddings")
    assert embeddings["holds"] and embeddings["statement"] == "token_embeddings == layers[0].input"
    # Kyutai calls it a 2B model; the count rounds to 2 at one figure.
    assert round(total / 1e9) == 2


# --- VaultGemma 1B --------------------------------------------------------------------------------


def test_vaultgemma_two_norms_a_block_alternating_windows_and_a_tied_head(collected):
    f, c = collected("vaultgemma").facts, released_config("vaultgemma")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["tie_word_embeddings"] and not c["attention_bias"] and KV == H
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d  # GeGLU has SwiGLU's three matrices
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 3 + 2)
    assert set(children(f)) == {"self_attn", "mlp", "input_layernorm", "pre_feedforward_layernorm"}
    # The configuration class alternates: even layers windowed, odd layers global.
    assert sorted(kinds(f)) == [("full_attention", L // 2), ("sliding_attention", L - L // 2)]
    # Google names it a 1B model; the count rounds to 1 at one figure.
    assert round(total / 1e9) == 1


# --- Nemotron (Minitron-4B) -----------------------------------------------------------------------


def test_nemotron_layernorm_one_plus_gain_and_an_ungated_squared_relu(collected):
    f, c = collected("nemotron").facts, released_config("nemotron")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["hidden_act"] == "relu2" and not c["tie_word_embeddings"] and H * hd > d
    assert "attention_bias" not in c and "mlp_bias" not in c  # NemotronConfig's defaults: no biases
    norm = 2 * d  # a LayerNorm's gain and bias
    block = gqa_attention(d, H, KV, hd) + 2 * d * F + 2 * norm  # up and down, no gate
    total = vocabulary_matrices(c) * V * d + norm + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 2 + L * (4 + 2 + 4)
    # The proof measured the LayerNorm whose gain is one plus the stored weight, not a plain one.
    eq = f["equations"]["components"]
    assert eq["transformer_block.input_layernorm"]["facts"]["norm"]["value"] == "layer_offset"
    assert any(r"(1+g)" in s["tex"] for s in eq["transformer_block.input_layernorm"]["steps"])
    # NVIDIA names it a 4B model; the count rounds to 4 at one figure.
    assert round(total / 1e9) == 4


# --- GraniteMoE 3.0 1B-A400M ----------------------------------------------------------------------


def test_granitemoe_fused_experts_granite_scales_and_a_tied_head(collected):
    f, c = collected("granitemoe").facts, released_config("granitemoe")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K = c["num_local_experts"], c["num_experts_per_tok"]
    assert c["tie_word_embeddings"] and not c["attention_bias"]
    experts = E * swiglu(d, F)  # input_linear [E, 2F, d] and output_linear [E, d, F]
    block = gqa_attention(d, H, KV, hd) + E * d + experts + 2 * d  # router.layer [E, d]
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 1 + L * (4 + 1 + 2 + 2)
    measured = {i["id"]: i for i in f["preview"]["identities"]}
    assert f"residual_multiplier ({c['residual_multiplier']:g}) *" in measured["block_sum"]["statement"]
    assert all(i["holds"] for i in measured.values())
    # IBM names it 1B total, 400M active (a400m); ours agree at that rounding (1.3 B and 0.43 B).
    assert round(total / 1e9) == 1 and round(f["accounting"]["model"]["active"] / 1e8) == 4


# --- EXAONE 3.0 7.8B ------------------------------------------------------------------------------


def test_exaone3_is_llama_under_gpt2_key_names(collected):
    f, c = collected("exaone").facts, released_config("exaone")
    # The file's own names: num_layers, not num_hidden_layers; head width hidden / heads.
    V, d, L, H, KV, F = c["vocab_size"], c["hidden_size"], c["num_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"]
    hd = d // H
    assert "num_hidden_layers" not in c and c["activation_function"] == "silu" and not c["tie_word_embeddings"]
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 3 + 2)
    # LG names it a 7.8B model; ours agrees at that rounding.
    assert round(total / 1e9, 1) == 7.8


# --- FlexOlmo 7x7B --------------------------------------------------------------------------------


def test_flex_olmo_post_normed_mixture_of_full_width_experts(collected):
    f, c = collected("flex_olmo").facts, released_config("flex_olmo")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K = c["num_experts"], c["num_experts_per_tok"]
    assert not c["attention_bias"] and not c["tie_word_embeddings"] and not c["norm_topk_prob"]
    attention = gqa_attention(d, H, KV, hd) + H * hd + KV * hd  # q_norm and k_norm over the whole projections
    block = attention + E * d + E * swiglu(d, F) + 2 * d  # router, experts, two post-norms
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, F)
    assert stored(f)["bytes_by_dtype"] == {"F32": 4 * total}  # no dtype named: transformers' float32
    # The mixture's plain sum does not hold by design (the block post-norms it), and the page says why.
    skipped = {i["id"]: i["why"] for i in f["preview"]["not_applicable"]}
    assert "post_feedforward_layernorm" in skipped["mixture_sum"]
    # Ai2 gives 33B parameters in all for the seven experts; ours agrees at that rounding.
    assert round(total / 1e9) == 33


# --- CWM 32B --------------------------------------------------------------------------------------


def test_cwm_one_global_layer_in_four(collected):
    f, c = collected("cwm").facts, released_config("cwm")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["mlp_bias"] and not c["tie_word_embeddings"] and "attention_bias" not in c
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d
    total = vocabulary_matrices(c) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    # No layer_types in the file: the class makes layers 0, 4, 8, ... global, counted here by hand.
    assert "layer_types" not in c
    globals_ = len(range(0, L, 4))
    assert sorted(kinds(f)) == [("full_attention", globals_), ("sliding_attention", L - globals_)]
    # Meta names it a 32B model: 32.6 billion, cut to whole billions.
    assert int(total / 1e9) == 32


# --- Solar Open 100B ------------------------------------------------------------------------------


def test_solar_open_a_mixture_with_a_shared_expert_in_every_block(collected):
    f, c = collected("solar_open").facts, released_config("solar_open")
    V, d, L, H, KV, hd, _ = sizes(c)
    E, K, S, Fe = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"], c["moe_intermediate_size"]
    assert c["first_k_dense_replace"] == 0 and not c["tie_word_embeddings"] and c["partial_rotary_factor"] == 1.0
    # Llama's attention (no q/k norms, no biases), router, routed experts, one shared expert, two norms.
    block = gqa_attention(d, H, KV, hd) + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d
    parameters = vocabulary_matrices(c) * V * d + d + L * block
    assert f["accounting"]["model"]["parameters"] == parameters
    # The router's selection bias is a buffer the files store, one value per routed expert a block.
    assert f["accounting"]["model"]["stored_buffers"] == L * E
    total = parameters + L * E
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, Fe)
    assert kinds(f) == [(None, L)]
    # Upstage names it a 100B model with 12B active: 102.7 billion in all, to two figures 100 (the name), and
    # 12.05 billion active, 12 at whole billions.
    assert round(total / 1e10) == 10
    assert round(f["accounting"]["model"]["active"] / 1e9) == 12


def test_mimo_v2_flash_total_and_active_by_hand(collected):
    """MiMo-V2-Flash: windowed blocks build twice the key/value heads and a sink per head; values are
    narrower than queries and keys; block 0 is dense, the rest mixtures of 256 experts, 8 per token."""
    f, c = collected("mimo_v2_flash").facts, released_config("mimo_v2_flash")
    V, d, L, H, KV = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
    qk, v, E, k, Fe, F = c["head_dim"], c["v_head_dim"], c["n_routed_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["intermediate_size"]
    global_blocks = [i for i in range(L) if i == 0 or (i + 1) % 6 == 0]  # the class's pattern: block 0 and every sixth

    def attention(kv_heads, sinks):
        return d * H * qk + d * kv_heads * qk + d * kv_heads * v + H * v * d + (H if sinks else 0)

    def block_attention(i):
        return attention(KV, False) if i in global_blocks else attention(2 * KV, True)

    expert = 3 * d * Fe
    router = E * d + E  # the gate's weight and its selection bias
    total = 2 * V * d + d + sum(block_attention(i) + 2 * d for i in range(L)) + 3 * d * F + (L - 1) * (E * expert + router)
    active = total - (L - 1) * (E - k) * expert
    model = f["accounting"]["model"]
    # the selection bias is a stored buffer (e_score_correction_bias), not a parameter: in the total, not the parameters
    assert model["total"] == total and model["stored_buffers"] == (L - 1) * E and model["parameters"] == total - (L - 1) * E
    assert model["active"] == active
    assert round(total / 1e9) == 309 and round(active / 1e9) == 15  # Xiaomi's card: 309B total, 15B active
    # the cache a token adds: keys 192 wide and values 128 wide per key/value head, 8 heads in windowed blocks
    per_token = sum((KV if i in global_blocks else 2 * KV) * (qk + v) * 2 for i in range(L))
    assert f["cost"]["summary"]["kv_cache_bytes_per_position"] == per_token


def test_ministral_total_and_its_interleaved_windows(collected):
    """Ministral 8B: Mistral's block at 36 layers, one full-attention block then three windowed ones."""
    f, c = collected("ministral").facts, released_config("ministral")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["tie_word_embeddings"]
    total = 2 * V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == total == 8_019_808_256
    kinds = c["layer_types"]
    assert kinds == (["full_attention"] + ["sliding_attention"] * 3) * (L // 4)
    attention = {a["attention"]: a for a in f["sheet"]["attention"]}
    assert attention["full"]["count"] == kinds.count("full_attention") == 9
    assert attention["sliding"]["count"] == 27 and attention["sliding"]["window"] == c["sliding_window"]
