"""The classics: parallel residual blocks, LayerNorm with biases, learned or ALiBi positions, partial rotary.

Each family's total is derived here by hand from the sizes its config.json names (read from the file by
the test, put through a formula written out below); no expected figure is copied from the facts under
test. Where a formula relies on a setting (biases, a tied head, a parallel block), the test asserts that
setting in the file first, so a config that changes it fails here instead of passing a stale formula.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import BYTES, gqa_attention, model_total, stored


def layernorm(d):
    return 2 * d  # gain and bias


def two_layer_mlp(d, inner, bias=True):
    return 2 * d * inner + ((inner + d) if bias else 0)


def block_kinds(f):
    return [(k["label"], k["attention_type"], k["count"]) for k in f["block_kinds"]]


def identity(f, ident):
    return next(i for i in f["preview"]["identities"] if i["id"] == ident)


# --- StarCoder2 7B --------------------------------------------------------------------------------


def test_starcoder2(collected):
    f, c = collected("starcoder2").facts, released_config("starcoder2")
    V, d, L, H, KV, F = (c[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                         "num_key_value_heads", "intermediate_size"))
    hd = d // H
    # Biases in every projection; the head left to Starcoder2Config's default, which ties it.
    assert c["use_bias"] and "tie_word_embeddings" not in c and c["norm_type"] == "layer_norm"
    block = gqa_attention(d, H, KV, hd, bias=True) + two_layer_mlp(d, F) + 2 * layernorm(d)
    total = V * d + layernorm(d) + L * block  # embedding (also the head), final LayerNorm, blocks
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert stored(f)["tensors"] == 1 + 2 + L * (8 + 4 + 4)  # embedding, final norm; q/k/v/o, fc, proj, 2 norms
    assert block_kinds(f) == [("transformer block", "sliding_attention", L)]


# --- Pythia 6.9B (GPT-NeoX) -----------------------------------------------------------------------


def test_pythia_parallel_blocks(collected):
    f, c = collected("pythia").facts, released_config("pythia")
    V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    assert c["use_parallel_residual"] and not c["tie_word_embeddings"]
    attention = d * 3 * d + 3 * d + d * d + d  # fused query_key_value and dense, both with biases
    block = 2 * layernorm(d) + attention + two_layer_mlp(d, F)
    total = 2 * V * d + layernorm(d) + L * block  # embed_in, embed_out (no bias), final LayerNorm
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"F16": 2 * total}
    proof = f["equations"]["components"]["transformer_block"]["facts"]
    assert proof["residual"]["value"] == "parallel"
    assert f["equations"]["components"]["transformer_block.attention"]["facts"]["qkv_layout"]["value"] == "per_head"
    # No stream between the sublayers: the identity that needs one is listed as not applicable.
    assert "attention_add" in {i["id"] for i in f["preview"]["not_applicable"]}
    assert identity(f, "block_sum")["holds"]


# --- Phi-2 ----------------------------------------------------------------------------------------


def test_phi2_one_norm_feeds_both_branches(collected):
    f, c = collected("phi2").facts, released_config("phi2")
    V, d, L, H, F = (c[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"))
    assert c["num_key_value_heads"] == H and not c["tie_word_embeddings"] and not c["qk_layernorm"]
    # PhiAttention: q, k, v and dense with biases; PhiMLP fc1, fc2 with biases; one LayerNorm a block.
    block = gqa_attention(d, H, H, d // H, bias=True) + two_layer_mlp(d, F) + layernorm(d)
    total = V * d + layernorm(d) + L * block + V * d + V  # embedding, final LayerNorm, blocks, head with its bias
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 1 + 2 + L * (8 + 4 + 2) + 2
    facts = f["equations"]["components"]["transformer_block"]["facts"]
    assert (facts["residual"]["value"], facts["shared_norm"]["value"]) == ("parallel", "input_layernorm")
    attention = f["equations"]["components"]["transformer_block.self_attn"]["facts"]
    assert attention["positions"]["value"].startswith("rotary on the first")  # partial rotary


# --- Command R7B (Cohere 2) -----------------------------------------------------------------------


def test_cohere2_local_and_global_parallel_blocks(collected):
    f, c = collected("cohere2").facts, released_config("cohere2")
    V, d, L, H, KV, F, hd = (c[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                                            "num_key_value_heads", "intermediate_size", "head_dim"))
    # No attention bias; the head is the embedding (Cohere2Config ties by default, and config.json shares it).
    assert not c["attention_bias"] and c["use_embedding_sharing"] and "tie_word_embeddings" not in c
    block = gqa_attention(d, H, KV, hd) + 3 * d * F + d  # q/k/v/o, SwiGLU, one LayerNorm with a gain only
    total = V * d + d + L * block  # embedding (also the head), final norm (gain only), blocks
    assert model_total(f) == stored(f)["weight_parameters"] == total
    every = c["sliding_window_pattern"]
    full = [i for i in range(L) if i % every == every - 1]
    kinds = {k["attention_type"]: k["indices"] for k in f["block_kinds"]}
    assert kinds == {"sliding_attention": [i for i in range(L) if i not in full], "full_attention": full}
    components = f["equations"]["components"]
    rotary = {cid.split(".")[0]: comp["facts"]["rotary_layout"]["value"] for cid, comp in components.items() if cid.endswith(".self_attn")}
    assert rotary == {"sliding_window_block": "interleaved", "global_block": "not_applied"}
    assert all(components[k]["facts"]["residual"]["value"] == "parallel" for k in ("sliding_window_block", "global_block"))
    assert components["model"]["facts"]["logit_scale"]["value"] == c["logit_scale"]
    assert "NoPE" in {x["abbreviation"] for x in f["features"]}


# --- GPT-J 6B -------------------------------------------------------------------------------------


def test_gptj_parallel_block_and_head_bias(collected):
    f, c = collected("gptj").facts, released_config("gptj")
    V, d, L, H = c["vocab_size"], c["n_embd"], c["n_layer"], c["n_head"]
    inner = c["n_inner"] or 4 * d  # GPTJConfig: n_inner None means four times the width
    assert not c["tie_word_embeddings"] and c["rotary"] and "torch_dtype" not in c
    # q, k, v, out_proj without biases; fc_in, fc_out with; one LayerNorm (ln_1) a block.
    block = layernorm(d) + 4 * d * d + two_layer_mlp(d, inner)
    total = V * d + L * block + layernorm(d) + V * d + V  # wte, blocks, ln_f, lm_head with its bias
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"F32": 4 * total}
    components = f["equations"]["components"]
    assert components["transformer_block"]["facts"]["shared_norm"]["value"] == "ln_1"
    attention = components["transformer_block.attn"]["facts"]
    assert attention["rotary_layout"]["value"] == "interleaved_sin_first_angle_per_pair"
    # The tiny run keeps the checkpoint's share of each head rotated.
    head, tiny = d // H, f["preview"]["config"]["head_dim"]
    assert attention["positions"]["value"] == f"rotary on the first {tiny * c['rotary_dim'] // head} of {tiny} dims (tiny)"


# --- Falcon 7B ------------------------------------------------------------------------------------


def test_falcon_multi_query_parallel_block(collected):
    f, c = collected("falcon").facts, released_config("falcon")
    V, d, L, H = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"]
    hd = d // H
    # One key and one value head, no biases, the old (not grouped) layout, a parallel block; the head
    # left to FalconConfig's default, which ties it.
    assert c["multi_query"] and not c["bias"] and not c["new_decoder_architecture"] and c["parallel_attn"]
    assert "tie_word_embeddings" not in c and not c["alibi"]
    attention = d * (H + 2) * hd + d * d  # fused query_key_value, dense
    block = layernorm(d) + attention + 2 * d * 4 * d  # one LayerNorm; the MLP four times the width, no biases
    total = V * d + L * block + layernorm(d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert f["config"]["standardized"]["num_kv_heads"] == 1
    assert "MQA" in {x["abbreviation"] for x in f["features"]}
    assert f["equations"]["components"]["transformer_block"]["facts"]["residual"]["value"] == "parallel"
    # The attention is computed inside the module: its queries are out of reach, its pattern is not.
    support = {v["name"]: v for h in f["support"]["hosts"] for v in h["values"]}
    assert support["attention_queries"]["blocks"] == [] and support["attention_probabilities"]["blocks"] == list(range(L))


# --- OPT 1.3B -------------------------------------------------------------------------------------


def test_opt_learned_positions_and_inline_mlp(collected):
    f, c = collected("opt").facts, released_config("opt")
    V, d, L, F, P = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["ffn_dim"], c["max_position_embeddings"]
    # Pre-norm, embeddings as wide as the stream (no projection in or out), the head tied by default.
    assert c["do_layer_norm_before"] and c["word_embed_proj_dim"] == d and "tie_word_embeddings" not in c
    block = layernorm(d) + 4 * (d * d + d) + layernorm(d) + two_layer_mlp(d, F)  # q/k/v/out_proj with biases
    table = (P + 2) * d  # OPT's position table has two rows more than the context
    total = V * d + table + L * block + layernorm(d)  # embeddings, blocks, the decoder's final LayerNorm
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"F16": 2 * total}
    components = f["equations"]["components"]
    assert components["embed_positions"]["facts"]["embedding"]["value"] == "positions_from_mask_offset"
    assert components["transformer_block.self_attn"]["facts"]["score_scale"]["value"] == "on_queries"
    assert components["transformer_block"]["facts"]["inline_mlp"]["value"] == {"up": "fc1", "down": "fc2", "activation": "activation_fn"}
    support = {v["name"]: v for h in f["support"]["hosts"] for v in h["values"]}
    assert support["mlp_output"]["blocks"] == list(range(L)) and support["mlp_output"]["module"].endswith(".fc2")
    assert identity(f, "embeddings")["holds"] and identity(f, "attention_add")["holds"]


def test_olmo_total_is_a_llama_block_with_weightless_layernorms_and_a_tied_head(collected):
    """OLMo 1B: no norm stores a tensor, so a block is the attention and the SwiGLU MLP alone."""
    f, c = collected("olmo").facts, released_config("olmo")
    V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
    assert c["num_key_value_heads"] == c["num_attention_heads"] and not c["attention_bias"] and c["tie_word_embeddings"]
    block = 4 * d * d + 3 * d * F  # q, k, v, o at full width; gate, up, down
    total = V * d + L * block  # the embedding (the head shares it); the final norm holds nothing either
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == model["active"] == total == 1_176_764_416
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    assert round(total / 1e9) == 1  # the model's name: OLMo-1B


def test_olmo_norms_are_layernorms_without_tensors_whose_epsilon_is_measured(collected):
    f = collected("olmo").facts
    components = f["equations"]["components"]
    for norm in ("transformer_block.input_layernorm", "transformer_block.post_attention_layernorm", "norm"):
        facts = components[norm]["facts"]
        assert facts["kind"]["value"] == f["equations"]["kinds"][norm] == "weightless_norm", norm
        assert facts["norm"]["value"] == "layer" and facts["eps"]["value"] == 1e-5, (norm, facts)
        assert "measured on a probe input" in facts["eps"]["how"], norm
    # the final norm has a row, and a page, though it holds nothing
    rows = {r["path"]: r for r in f["accounting"]["model"]["rows"]}
    assert rows["model.norm"]["parameters"] == 0 and rows["model.norm"]["class"] == "OlmoLayerNorm"


def test_olmo_lists_7b_beside_1b_its_head_untied(collected):
    import json

    from tests.conftest import ROOT

    rows = collected("olmo").facts["sizes"]
    assert [r["repo"] for r in rows] == ["allenai/OLMo-1B-hf", "allenai/OLMo-7B-hf"]
    for r in rows:
        c = json.loads((ROOT / "atlas/checkpoints" / r["repo"] / "config.json").read_text())
        V, d, L, F = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["intermediate_size"]
        matrices = 1 if c["tie_word_embeddings"] else 2
        assert r["total"] == matrices * V * d + L * (4 * d * d + 3 * d * F), r["repo"]  # no norm holds a tensor
    assert round(rows[1]["total"] / 1e9) == 7 and rows[1]["published"]["figures"][0]["agrees"]  # the name's 7B
