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
