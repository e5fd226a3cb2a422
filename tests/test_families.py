"""The eleven families beyond DeepSeek-V3 (and Qwen3's small sibling), each against a hand derivation.

Every expected figure below is derived here from the sizes in the family's config.json, read from the
file by the test and put through a formula written out by hand (embeddings, each block's attention, MLP
or experts and norms, the head tied or not); none is copied from the facts under test. Where the formula
relies on a setting (no biases, untied head, every block a mixture), the test asserts that setting in
the file first, so a config that changes it fails here instead of passing a formula that no longer
applies. The registry tests at the end hold the rule that adding a family touches exactly its module,
its notes and its checkpoint folder.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from atlas import families
from atlas.errors import AtlasError
from tests.conftest import ROOT, released_config, run_build, tree_rows

BYTES = {"bfloat16": 2, "float32": 4}  # torch_dtype in config.json -> bytes an element


def model_total(facts):
    return facts["accounting"]["model"]["total"]


def stored(facts):
    return facts["checkpoint_check"]["predicted"]


def gqa_attention(d, heads, kv_heads, head_dim, bias=False):
    """q, k, v, o projections of grouped-query attention (+ their biases where the family has them)."""
    weights = d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d
    biases = heads * head_dim + 2 * kv_heads * head_dim + d if bias else 0
    return weights + biases


def swiglu(d, ffn):
    return 3 * d * ffn  # gate, up, down


def sizes(c):
    """The sizes every Llama-like config.json names the same way; head_dim defaults to hidden / heads."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    return c["vocab_size"], d, c["num_hidden_layers"], H, c["num_key_value_heads"], c.get("head_dim", d // H), c["intermediate_size"]


def vocabulary_matrices(c, tied_default=False):
    """1 when the head is the embedding (tied), 2 when the files and the model hold both."""
    return 1 if c.get("tie_word_embeddings", tied_default) else 2


# --- Llama 3.1 8B ---------------------------------------------------------------------------------


def test_llama(collected):
    f, c = collected("llama").facts, released_config("llama")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["mlp_bias"] and not c["tie_word_embeddings"]
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d  # attention, SwiGLU, two RMSNorms
    total = 2 * V * d + d + L * block  # untied head: embedding and lm_head both stored; final norm
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 2 + 1 + L * 9  # 4 attention + 3 MLP + 2 norm matrices a block
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    assert [k["label"] for k in f["block_kinds"]] == ["transformer block"]
    assert f["config"]["standardized"]["num_kv_heads"] == KV


# --- Mistral 7B -----------------------------------------------------------------------------------


def test_mistral(collected):
    f, c = collected("mistral").facts, released_config("mistral")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["tie_word_embeddings"] and "attention_bias" not in c  # MistralConfig has no biases
    total = 2 * V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    # The public index's total_size (shared/reference/HEADERS.md: 14,483,464,192 bytes) is the BF16 payload.
    assert BYTES[c["torch_dtype"]] * total == 14_483_464_192
    # The sliding window is a mask, not a tensor, and it bounds every layer: one kind, sliding.
    assert c["sliding_window"]
    assert [(k["attention_type"], k["count"]) for k in f["block_kinds"]] == [("sliding_attention", L)]


def test_families_without_a_window_have_no_attention_type(collected):
    for name in ("llama", "mixtral", "olmo2"):
        assert not released_config(name).get("sliding_window")
        assert [k["attention_type"] for k in collected(name).facts["block_kinds"]] == [None]


# --- Mixtral 8x7B ---------------------------------------------------------------------------------


def test_mixtral(collected):
    f, c = collected("mixtral").facts, released_config("mixtral")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K = c["num_local_experts"], c["num_experts_per_tok"]
    assert not c["tie_word_embeddings"]
    experts = E * swiglu(d, F)
    block = gqa_attention(d, H, KV, hd) + experts + E * d + 2 * d  # + the router, no bias, no shared expert
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, F)
    # One tensor per expert and projection under Mixtral's own names.
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 2 + 1 + E * 3)
    names = {t["name"] for t in f["checkpoint_check"]["sample"]}
    assert "model.layers.0.block_sparse_moe.experts.0.w1.weight" in names
    assert "model.layers.0.block_sparse_moe.gate.weight" in names


# --- Qwen3-8B and Qwen3-0.6B ----------------------------------------------------------------------


def qwen3_block(d, H, KV, hd, F):
    return gqa_attention(d, H, KV, hd) + 2 * hd + swiglu(d, F) + 2 * d  # + q_norm, k_norm over head_dim


def test_qwen3_8b(collected):
    f, c = collected("qwen3").facts, released_config("qwen3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["tie_word_embeddings"]
    total = 2 * V * d + d + L * qwen3_block(d, H, KV, hd, F)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    # The public index's total_size (shared/reference/HEADERS.md: 16,381,470,720 bytes) is the BF16 payload.
    assert BYTES[c["torch_dtype"]] * total == 16_381_470_720
    attention = next(c for c in f["accounting"]["block_kinds"][0]["tree"]["children"] if c["name"] == "self_attn")
    norms = {c["name"]: c["parameters"] for c in attention["children"] if c["name"] in ("q_norm", "k_norm")}
    assert norms == {"q_norm": hd, "k_norm": hd}


def test_qwen3_0_6b_ties_the_head_in_the_model_and_stores_it_in_the_file(collected):
    f, c = collected("qwen3_0_6b").facts, released_config("qwen3_0_6b")
    V, d, L, H, KV, hd, F = sizes(c)
    assert c["tie_word_embeddings"] and not c["attention_bias"]
    model = vocabulary_matrices(c) * V * d + d + L * qwen3_block(d, H, KV, hd, F)  # tied: one vocabulary matrix
    assert model_total(f) == model
    rows = {r["path"]: r for r in f["accounting"]["model"]["rows"]}
    assert rows["lm_head"]["parameters"] == 0
    assert (rows["lm_head"]["tied_parameters"], rows["lm_head"]["tied_to"]) == (V * d, "model.embed_tokens")
    # checkpoint.json's tied_stored: the released file writes the head a second time.
    assert stored(f)["weight_parameters"] == model + V * d
    assert stored(f)["tensors"] == 2 + 1 + L * 11
    # shared/reference/HEADERS.md: one file of 311 tensors, payload 1,503,264,768 bytes, the head written twice.
    assert (stored(f)["tensors"], BYTES[c["torch_dtype"]] * (model + V * d)) == (311, 1_503_264_768)


def test_qwen3_siblings_share_one_declaration():
    big, small = families.load("qwen3"), families.load("qwen3_0_6b")
    assert (big.model_class, big.config_class) == (small.model_class, small.config_class)
    assert big.checkpoint != small.checkpoint


# --- Qwen3-30B-A3B --------------------------------------------------------------------------------


def test_qwen3_moe(collected):
    f, c = collected("qwen3_moe").facts, released_config("qwen3_moe")
    V, d, L, H, KV, hd, _ = sizes(c)
    E, K, Fe = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"]
    # Every block a mixture: sparse step 1, no MLP-only layer; the dense intermediate_size is then unused.
    assert c["decoder_sparse_step"] == 1 and c["mlp_only_layers"] == [] and not c["tie_word_embeddings"]
    block = gqa_attention(d, H, KV, hd) + 2 * hd + E * swiglu(d, Fe) + E * d + 2 * d
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    # The public index's total_size (shared/reference/HEADERS.md: 61,064,245,248 bytes; 18,867 tensors).
    assert BYTES[c["torch_dtype"]] * total == 61_064_245_248
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * swiglu(d, Fe)
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 2 + 2 + 1 + E * 3) == 18_867


# --- Gemma 2 9B and Gemma 3 1B --------------------------------------------------------------------


def test_gemma2_alternates_sliding_and_global_blocks(collected):
    f, c = collected("gemma2").facts, released_config("gemma2")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and "layer_types" not in c
    block = gqa_attention(d, H, KV, hd) + swiglu(d, F) + 4 * d  # sandwich: four norms a block
    total = vocabulary_matrices(c, tied_default=True) * V * d + d + L * block  # Gemma2Config ties by default
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"F32": BYTES[c["torch_dtype"]] * total}
    # Without layer_types, Gemma 2 alternates: even blocks sliding, odd blocks global.
    kinds = {k["attention_type"]: k["indices"] for k in f["block_kinds"]}
    assert kinds == {"sliding_attention": list(range(0, L, 2)), "full_attention": list(range(1, L, 2))}
    assert [r["per_instance"] for r in f["accounting"]["block_kinds"]] == [block, block]


def test_gemma3_five_local_blocks_to_one_global(collected):
    f, c = collected("gemma3").facts, released_config("gemma3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"]
    block = gqa_attention(d, H, KV, hd) + 2 * hd + swiglu(d, F) + 4 * d  # + q_norm, k_norm; four norms
    total = vocabulary_matrices(c, tied_default=True) * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    every = c["sliding_window_pattern"]
    global_blocks = [i for i in range(L) if i % every == every - 1]
    kinds = {k["attention_type"]: k["indices"] for k in f["block_kinds"]}
    assert kinds["full_attention"] == global_blocks
    assert kinds["sliding_attention"] == [i for i in range(L) if i not in global_blocks]
    assert f["model"]["class"] == "Gemma3ForCausalLM"


# --- GPT-2 ----------------------------------------------------------------------------------------


def test_gpt2(collected):
    f, c = collected("gpt2").facts, released_config("gpt2")
    V, P, d, L = c["vocab_size"], c["n_positions"], c["n_embd"], c["n_layer"]
    inner = c.get("n_inner") or 4 * d  # GPT2Config: n_inner None means 4 × n_embd
    block = (
        2 * d  # ln_1
        + d * 3 * d + 3 * d  # c_attn: fused q, k, v
        + d * d + d  # attn.c_proj
        + 2 * d  # ln_2
        + d * inner + inner  # mlp.c_fc
        + inner * d + d  # mlp.c_proj
    )
    total = V * d + P * d + L * block + 2 * d  # wte, wpe, blocks, ln_f; the head is wte
    assert model_total(f) == total
    masks = L * P * P  # h.N.attn.bias, [1, 1, n_positions, n_positions], stored F32
    assert stored(f)["weight_parameters"] == total + masks
    assert stored(f)["bytes_by_dtype"] == {"F32": 4 * (total + masks)}
    assert stored(f)["tensors"] == 2 + L * 12 + 2 + L
    # shared/reference/HEADERS.md: one file of 160 tensors, payload 548,090,880 bytes.
    assert (stored(f)["tensors"], 4 * (total + masks)) == (160, 548_090_880)
    names = {t["name"] for t in f["checkpoint_check"]["sample"]}
    assert {"wte.weight", "h.0.attn.c_attn.weight", "h.0.attn.bias", "ln_f.weight"} <= names
    assert not any(n.startswith("transformer.") or n.startswith("lm_head") for n in names)
    conv = [n for n in tree_rows(f["accounting"]["block_kinds"][0]["tree"]) if n["name"] == "c_attn"][0]
    assert conv["class"] == "Conv1D" and conv["tensors"][0]["shape"] == [d, 3 * d]


# --- Phi-3 mini -----------------------------------------------------------------------------------


def test_phi3_fused_projections(collected):
    f, c = collected("phi3").facts, released_config("phi3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["tie_word_embeddings"]
    block = d * (H + 2 * KV) * hd + H * hd * d + d * 2 * F + F * d + 2 * d  # qkv_proj, o_proj, gate_up_proj, down_proj
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    # The public index's total_size (shared/reference/HEADERS.md: 7,642,159,104 bytes; 195 tensors).
    assert BYTES[c["torch_dtype"]] * total == 7_642_159_104
    assert stored(f)["tensors"] == 2 + 1 + L * 6 == 195
    sample = {t["name"]: t["shape"] for t in f["checkpoint_check"]["sample"]}
    assert sample["model.layers.0.self_attn.qkv_proj.weight"] == [(H + 2 * KV) * hd, d]
    assert sample["model.layers.0.mlp.gate_up_proj.weight"] == [2 * F, d]


# --- OLMo 2 7B ------------------------------------------------------------------------------------


def test_olmo2_post_norms_and_full_width_qk_norms(collected):
    f, c = collected("olmo2").facts, released_config("olmo2")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["attention_bias"] and not c["tie_word_embeddings"]
    block = gqa_attention(d, H, KV, hd) + H * hd + KV * hd + swiglu(d, F) + 2 * d  # q_norm, k_norm over all heads
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    # The public index's total_size (shared/reference/HEADERS.md: 29,194,469,376 bytes, F32; 355 tensors).
    assert BYTES[c["torch_dtype"]] * total == 29_194_469_376
    assert stored(f)["tensors"] == 2 + 1 + L * 11 == 355
    children = [c["name"] for c in f["accounting"]["block_kinds"][0]["tree"]["children"]]
    assert "input_layernorm" not in children
    assert {"post_attention_layernorm", "post_feedforward_layernorm"} <= set(children)


# --- gpt-oss-20b ----------------------------------------------------------------------------------


def test_gpt_oss_accounting_and_mxfp4_layout(collected):
    f, c = collected("gpt_oss").facts, released_config("gpt_oss")
    V, d, L, H, KV, hd, F = sizes(c)
    E, K = c["num_local_experts"], c["num_experts_per_tok"]
    assert c["attention_bias"] and not c["tie_word_embeddings"] and c["quantization_config"]["quant_method"] == "mxfp4"
    attention = gqa_attention(d, H, KV, hd, bias=True) + H  # + one sink per head
    expert = d * 2 * F + 2 * F + F * d + d  # gate_up_proj and down_proj, each with its bias
    block = attention + E * d + E + E * expert + 2 * d  # router weight and bias, experts, two norms
    total = 2 * V * d + d + L * block
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * expert
    # MXFP4: the expert matrices as 4-bit values, two a byte, one U8 scale per block of 32.
    quantized = L * E * (d * 2 * F + F * d)
    payload = 2 * (total - quantized) + quantized // 2 + quantized // 32
    assert stored(f)["bytes_by_dtype"] == {"BF16": 2 * (total - quantized), "U8": quantized // 2 + quantized // 32}
    assert stored(f)["scale_elements"] == quantized // 32
    # The public index's total_size (shared/reference/HEADERS.md, pinned in checkpoint.json too).
    assert payload == 13_761_264_768
    sample = {t["name"]: t for t in f["checkpoint_check"]["sample"]}
    blocks = sample["model.layers.0.mlp.experts.gate_up_proj_blocks"]
    assert (blocks["dtype"], blocks["shape"]) == ("U8", [E, 2 * F, d // 32, 16])
    assert sample["model.layers.0.mlp.experts.down_proj_scales"]["shape"] == [E, d, F // 32]
    assert sample["model.layers.0.mlp.experts.gate_up_proj_bias"]["dtype"] == "BF16"
    assert sample["model.layers.0.self_attn.sinks"]["dtype"] == "BF16"
    # The index's total_size is pinned and checked (tests/test_header_figures.py checks the others).
    checked = {r["key"]: r for r in f["checkpoint_check"]["figures"] if r["checked"]}
    assert checked["index_total_size"]["predicted"] == payload
    kinds = {k["attention_type"]: k["indices"] for k in f["block_kinds"]}
    assert kinds == {t: [i for i, x in enumerate(c["layer_types"]) if x == t] for t in ("sliding_attention", "full_attention")}


def test_a_pinned_figure_that_disagrees_fails_the_check(collected):
    from atlas.check.claims import check_checkpoint_totals

    check = json.loads(json.dumps(collected("gpt_oss").facts["checkpoint_check"]))
    row = next(r for r in check["figures"] if r["key"] == "index_total_size")
    row["pinned"] += 1
    with pytest.raises(AtlasError, match=r"gpt-oss-20b/checkpoint.json: safetensors.index_total_size"):
        check_checkpoint_totals(check)


# --- the checkpoint rules: bad input is one clear error ------------------------------------------


def _rules(pinned):
    from atlas.inputs.checkpoint import PinnedCheckpoint
    from atlas.facts.collect import _stored_rules

    return _stored_rules(PinnedCheckpoint("org/repo", Path("atlas/checkpoints/org/repo"), {}, pinned))


@pytest.mark.parametrize(
    "pinned, field",
    [({"weight_dtype": "bf16"}, "weight_dtype"), ({"tied_stored": "lm_head.weight"}, "tied_stored"), ({"prefix_removed": 1}, "prefix_removed")],
)
def test_bad_stored_rules_name_file_and_field(pinned, field):
    with pytest.raises(AtlasError) as e:
        _rules(pinned)
    assert str(e.value).startswith(f"atlas/checkpoints/org/repo/checkpoint.json: {field}: ")


def test_unknown_or_malformed_figures_are_rejected(collected):
    from atlas.model.pinned_figures import figure_rows

    predicted = collected("llama").facts["checkpoint_check"]["predicted"]
    with pytest.raises(AtlasError, match="safetensors.total_bytes: is not a known figure"):
        figure_rows(predicted, {"total_bytes": 1}, "checkpoint.json")
    with pytest.raises(AtlasError, match="safetensors.tensors: must be a whole number"):
        figure_rows(predicted, {"tensors": "291"}, "checkpoint.json")


def test_a_tied_stored_name_the_model_lacks_fails_the_build(project_copy):
    pinned = project_copy / "atlas/checkpoints/Qwen/Qwen3-0.6B/checkpoint.json"
    data = json.loads(pinned.read_text())
    data["tied_stored"] = ["lm_head.weights"]
    pinned.write_text(json.dumps(data))
    result = run_build(project_copy, "--family", "qwen3_0_6b", "--out", str(project_copy / "site"))
    assert result.returncode == 1
    assert "Qwen3-0.6B/checkpoint.json: tied_stored: 'lm_head.weights' is no tensor of Qwen3ForCausalLM" in result.stderr


# --- Qwen2.5 7B, Gemma 7B, Mistral NeMo ---------------------------------------------------------


def test_qwen2_keeps_biases_on_q_k_v_only(collected):
    f, c = collected("qwen2").facts, released_config("qwen2")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["tie_word_embeddings"] and not c["use_sliding_window"]
    attention = gqa_attention(d, H, KV, hd) + H * hd + 2 * KV * hd  # q, k, v biases; o_proj has none
    total = 2 * V * d + d + L * (attention + swiglu(d, F) + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 2 + 1 + L * (4 + 3 + 3 + 2)  # 4 projections, 3 biases, 3 MLP, 2 norms
    assert [(k["attention_type"], k["count"]) for k in f["block_kinds"]] == [("full_attention", L)]  # the window is off


def test_gemma_7b_is_multi_head_with_wide_heads_and_a_tied_head(collected):
    f, c = collected("gemma").facts, released_config("gemma")
    V, d, L, H, KV, hd, F = sizes(c)
    assert "tie_word_embeddings" not in c and not c["attention_bias"]  # GemmaConfig ties by default
    assert KV == H and H * hd > d  # every head its own key and value; heads wider than d / H
    total = V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["tensors"] == 1 + 1 + L * 9  # no lm_head tensor


def test_mistral_nemo_has_narrow_heads_and_no_window(collected):
    f, c = collected("mistral_nemo").facts, released_config("mistral_nemo")
    V, d, L, H, KV, hd, F = sizes(c)
    assert not c["tie_word_embeddings"] and c["sliding_window"] is None
    assert H * hd < d  # the attention is narrower than the stream
    total = 2 * V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert [k["attention_type"] for k in f["block_kinds"]] == [None]


def test_smollm3_groups_its_no_position_blocks_apart(collected):
    f, c = collected("smollm3").facts, released_config("smollm3")
    V, d, L, H, KV, hd, F = sizes(c)
    assert "tie_word_embeddings" not in c and not c["attention_bias"] and not c["mlp_bias"]  # SmolLM3Config ties by default
    total = V * d + d + L * (gqa_attention(d, H, KV, hd) + swiglu(d, F) + 2 * d)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    unrotated = [i for i, flag in enumerate(c["no_rope_layers"]) if flag == 0]
    assert unrotated == list(range(c["no_rope_layer_interval"] - 1, L, c["no_rope_layer_interval"]))  # every fourth block
    kinds = {k["label"]: k for k in f["block_kinds"]}
    assert kinds["no-position block"]["count"] == len(unrotated) and kinds["rotary block"]["count"] == L - len(unrotated)
    chosen = {k: v for k, v in f["equations"]["components"].items() if k.endswith(".self_attn")}
    assert {k: v["facts"]["rotary_layout"]["value"] for k, v in chosen.items()} == {
        "rotary_block.self_attn": "halves", "no_position_block.self_attn": "not_applied"}


# --- Qwen3.5: a multimodal wrapper's text model ---------------------------------------------------


def test_qwen3_5_counts_its_text_model_and_the_vision_tower_apart(collected):
    import torch
    import transformers

    f = collected("qwen3_5_moe").facts
    whole = json.loads((ROOT / "atlas/checkpoints/Qwen/Qwen3.5-35B-A3B/config.json").read_text())
    c = whole["text_config"]
    d, V, L, H, KV, hd = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    E, K, Fm, Fs = c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    assert not whole["tie_word_embeddings"] and not c["attention_bias"] and c["attn_output_gate"] and c["mlp_only_layers"] == []
    full = L // c["full_attention_interval"]
    assert c["layer_types"].count("full_attention") == full
    key_dim, value_dim = c["linear_num_key_heads"] * c["linear_key_head_dim"], c["linear_num_value_heads"] * c["linear_value_head_dim"]
    mixed = 2 * key_dim + value_dim  # q, k and v of the delta rule, projected and convolved together
    nv = c["linear_num_value_heads"]
    deltanet = (d * mixed + d * value_dim + 2 * d * nv  # in_proj_qkv, in_proj_z (the output gate), in_proj_b, in_proj_a
                + mixed * c["linear_conv_kernel_dim"] + 2 * nv  # the depthwise convolution; dt_bias and A_log per value head
                + c["linear_value_head_dim"] + value_dim * d)  # the gated norm over a head; out_proj
    attention = d * 2 * H * hd + 2 * d * KV * hd + H * hd * d + 2 * hd  # q twice as wide (the gate), k, v, o; q/k norms
    experts = E * 3 * d * Fm
    mixture = E * d + experts + 3 * d * Fs + d  # router, routed experts, shared expert and its one-output gate
    total = 2 * V * d + d + (L - full) * (deltanet + mixture + 2 * d) + full * (attention + mixture + 2 * d)
    assert model_total(f) == total
    assert f["accounting"]["model"]["active"] == total - L * (E - K) * 3 * d * Fm
    # The wrapper built here from the whole file: everything it holds beyond the text model is the vision
    # tower the page counts apart, and none of it is in the total above.
    config = transformers.Qwen3_5MoeConfig(**{k: v for k, v in whole.items() if k != "model_type"})
    with torch.device("meta"):
        wrapper = transformers.Qwen3_5MoeForConditionalGeneration(config)
    outside = f["model"]["outside_text_model"]
    assert outside["parameters"] == sum(p.numel() for p in wrapper.parameters()) - total
    assert [p["path"] for p in outside["parts"]] == ["model.visual"] and outside["text_model_path"] == "model.language_model"
    assert [(k["label"], k["count"]) for k in f["block_kinds"]] == [("linear attention block", L - full), ("global block", full)]


# --- the registry: a family is its module, its notes and its checkpoint folder, nothing else ------

FAMILIES = families.names()
OUTSIDE = [p for p in (ROOT / "atlas").rglob("*") if p.is_file() and "families" not in p.parts and "checkpoints" not in p.parts]
OUTSIDE += [ROOT / "build.py", ROOT / "Makefile", ROOT / "pyproject.toml"]
OUTSIDE += [p for folder in ("templates", "static") for p in (ROOT / folder).rglob("*") if p.is_file()]


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_has_its_module_notes_and_checkpoint_folder(name):
    family = families.load(name)
    assert (ROOT / "atlas/families" / f"{name}.py").is_file()
    notes = ROOT / "atlas/families" / f"{name}.md"
    assert notes.is_file() and notes.read_text().strip(), f"{name} has no notes ({notes.name})"
    folder = ROOT / "atlas/checkpoints" / family.checkpoint
    for part in ("config.json", "checkpoint.json"):
        assert (folder / part).is_file(), f"{name}: {folder / part} is missing"
    pinned = json.loads((folder / "checkpoint.json").read_text())
    assert pinned["repo"] == family.checkpoint and "revision" in pinned and "provenance" in pinned
    assert family.title and family.vendor and family.summary and family.tags
    assert re.fullmatch(r"\d{4}-(0[1-9]|1[0-2])", family.released)
    # No figure typed in the summary (a name such as MXFP4 may hold a digit): the page computes figures.
    assert not re.search(r"(?<![A-Za-z])\d", family.summary), "the summary types a number"


@pytest.mark.parametrize("name", FAMILIES)
def test_no_file_outside_the_family_names_it(name):
    """Nothing registers a family anywhere else: no quoted name, no import, no path outside its own files.
    A family named as a layer kind is (mamba2: the family and its mixer) is looked for by path alone, since
    the kind's name is quoted wherever the proofs and the words handle the kind, for every family with it."""
    from atlas.proof.kinds import BUILDERS

    quoted = "" if name in BUILDERS else rf"""(['"]){re.escape(name)}\1|"""
    pattern = re.compile(rf"""{quoted}families[./]{re.escape(name)}\b""")
    for path in OUTSIDE:
        text = path.read_text(errors="replace")
        assert not pattern.search(text), f"{path.relative_to(ROOT)} names the family {name!r}"


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_collects_and_passes_its_checks(collected, name):
    from atlas.check.claims import check

    family = collected(name)
    check(family)
    facts = family.facts
    assert facts["family"]["name"] == name
    c = released_config(name)
    layers = next(c[k] for k in ("num_hidden_layers", "n_layer", "n_layers", "num_layers") if k in c)  # n_layers: DBRX's name; num_layers: LongCat-Flash's blocks
    assert len(facts["blocks"]) == facts["model"]["num_blocks"] == facts["config"]["standardized"]["num_layers"] == layers
    assert facts["excerpts"], "every family pins the source of its classes"


def test_the_whole_atlas_builds_and_every_family_has_its_page(built_site):
    for name in FAMILIES:
        assert (built_site / name / "index.html").is_file()
        facts = json.loads((built_site / name / "facts.json").read_text())
        assert facts["family"]["name"] == name


def test_a_new_family_needs_only_its_module_notes_and_checkpoint_folder(project_copy, collected):
    """A family the tests never saw, added from the template: three files, and the build takes it."""
    families_dir = project_copy / "atlas/families"
    (families_dir / "llama_twin.py").write_text(
        '"""A twin of Llama under another checkpoint folder."""\n\n'
        "from atlas.families.llama import FAMILY as LLAMA\n\n"
        'FAMILY = LLAMA.but(title="Llama twin", checkpoint="example/llama-twin")\n'
    )
    (families_dir / "llama_twin.md").write_text("# Before you run the twin\n\nNothing new.\n")
    shutil.copytree(project_copy / "atlas/checkpoints/meta-llama/Llama-3.1-8B", project_copy / "atlas/checkpoints/example/llama-twin")
    pinned = project_copy / "atlas/checkpoints/example/llama-twin/checkpoint.json"
    pinned.write_text(pinned.read_text().replace('"meta-llama/Llama-3.1-8B"', '"example/llama-twin"'))
    out = project_copy / "site"
    result = run_build(project_copy, "--family", "llama_twin", "--out", str(out))
    assert result.returncode == 0, result.stderr
    facts = json.loads((out / "llama_twin" / "facts.json").read_text())
    assert facts["checkpoint"]["repo"] == "example/llama-twin"
    assert facts["accounting"]["model"]["total"] == model_total(collected("llama").facts)
    assert "llama_twin" in (out / "index.html").read_text()


# --- a local MXFP4 checkpoint, written here by hand in the released file's layout -----------------


def _tiny_gpt_oss(directory: Path, break_scales: bool = False) -> None:
    """A two-block gpt-oss checkpoint with the released naming: BF16 everywhere, MXFP4 expert matrices."""
    import torch
    from safetensors.torch import save_file

    d, F, E, V, H, KV, hd, L = 64, 64, 4, 128, 2, 1, 32, 2
    raw = json.loads((ROOT / "atlas/checkpoints/openai/gpt-oss-20b/config.json").read_text())
    raw.update(
        hidden_size=d, intermediate_size=F, num_local_experts=E, vocab_size=V, num_attention_heads=H,
        num_key_value_heads=KV, head_dim=hd, num_hidden_layers=L, layer_types=raw["layer_types"][:L],
        num_experts_per_tok=2, experts_per_token=2, torch_dtype="bfloat16", pad_token_id=None,
    )
    bf16 = lambda *shape: torch.zeros(shape, dtype=torch.bfloat16)  # noqa: E731
    u8 = lambda *shape: torch.zeros(shape, dtype=torch.uint8)  # noqa: E731
    tensors = {"model.embed_tokens.weight": bf16(V, d), "model.norm.weight": bf16(d), "lm_head.weight": bf16(V, d)}
    for i in range(L):
        p = f"model.layers.{i}."
        tensors.update({
            p + "input_layernorm.weight": bf16(d), p + "post_attention_layernorm.weight": bf16(d),
            p + "self_attn.sinks": bf16(H),
            p + "self_attn.q_proj.weight": bf16(H * hd, d), p + "self_attn.q_proj.bias": bf16(H * hd),
            p + "self_attn.k_proj.weight": bf16(KV * hd, d), p + "self_attn.k_proj.bias": bf16(KV * hd),
            p + "self_attn.v_proj.weight": bf16(KV * hd, d), p + "self_attn.v_proj.bias": bf16(KV * hd),
            p + "self_attn.o_proj.weight": bf16(d, H * hd), p + "self_attn.o_proj.bias": bf16(d),
            p + "mlp.router.weight": bf16(E, d), p + "mlp.router.bias": bf16(E),
            # [experts, out, in / 32, 16] bytes and [experts, out, in / 32] exponents
            p + "mlp.experts.gate_up_proj_blocks": u8(E, 2 * F, d // 32, 16),
            p + "mlp.experts.gate_up_proj_scales": u8(E, 2 * F, d // 32 + (1 if break_scales else 0)),
            p + "mlp.experts.gate_up_proj_bias": bf16(E, 2 * F),
            p + "mlp.experts.down_proj_blocks": u8(E, d, F // 32, 16),
            p + "mlp.experts.down_proj_scales": u8(E, d, F // 32),
            p + "mlp.experts.down_proj_bias": bf16(E, d),
        })
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(raw))
    save_file(tensors, str(directory / "model.safetensors"))


def test_a_local_mxfp4_checkpoint_matches_tensor_by_tensor(tmp_path):
    _tiny_gpt_oss(tmp_path / "ckpt")
    result = run_build(ROOT, "--family", "gpt_oss", "--weights", str(tmp_path / "ckpt"), "--out", str(tmp_path / "site"))
    assert result.returncode == 0, result.stderr
    local = json.loads((tmp_path / "site/gpt_oss/facts.json").read_text())["checkpoint_check"]["local"]
    assert local["summary"]["tensors"] == 3 + 2 * 19


def test_a_local_mxfp4_checkpoint_with_wrong_scales_fails(tmp_path):
    _tiny_gpt_oss(tmp_path / "ckpt", break_scales=True)
    result = run_build(ROOT, "--family", "gpt_oss", "--weights", str(tmp_path / "ckpt"), "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    assert "model.safetensors: model.layers.0.mlp.experts.gate_up_proj_scales: shape [4, 128, 3], predicted [4, 128, 2]" in result.stderr


def test_a_local_config_the_model_class_rejects_is_one_error(tmp_path):
    _tiny_gpt_oss(tmp_path / "ckpt")
    config = json.loads((tmp_path / "ckpt/config.json").read_text())
    config["pad_token_id"] = config["vocab_size"]  # no such row in the embedding
    (tmp_path / "ckpt/config.json").write_text(json.dumps(config))
    result = run_build(ROOT, "--family", "gpt_oss", "--weights", str(tmp_path / "ckpt"), "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    assert f"error: {tmp_path / 'ckpt/config.json'}: GptOssForCausalLM cannot be built from it" in result.stderr
    assert "Traceback" not in result.stderr


def test_gpt2_learned_positions_are_a_standard_value_and_enter_the_first_block(collected):
    facts = collected("gpt2").facts
    model_values = {v["name"]: v for v in facts["support"]["hosts"][0]["values"]}
    assert model_values["position_embeddings"]["module"] == "transformer.wpe"
    assert model_values["position_embeddings"]["shape"] == ["batch", "seq", released_config("gpt2")["n_embd"]]
    embeddings = next(i for i in facts["preview"]["identities"] if i["id"] == "embeddings")
    assert embeddings["statement"] == "token_embeddings + position_embeddings == layers[0].input"
    # Rotary families have no such table, and their support() does not list one.
    kimi_values = [v["name"] for v in collected("kimi_k2").facts["support"]["hosts"][0]["values"]]
    assert "position_embeddings" not in kimi_values
