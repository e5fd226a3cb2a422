"""Kimi K2's facts against the reference truth (SPEC §10, checkpoint.json) and against derivations
written here by hand from the sizes in the released config.json."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import ROOT, released_config, tree_rows

CHECKPOINT = json.loads((ROOT / "atlas/checkpoints/moonshotai/Kimi-K2-Instruct/checkpoint.json").read_text())
PINNED = CHECKPOINT["safetensors"]


def mla_deepseek_sizes(c):
    """A DeepSeek-V3-style config.json's sizes, each block's parts derived by hand:
    latent attention, a dense SwiGLU block, a mixture block (routed + shared experts, a router whose
    selection bias is a stored buffer of one entry per expert), two RMSNorms a block."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    q_lora, kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v_head = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    assert not c["attention_bias"] and c["topk_method"] == "noaux_tc" and c["moe_layer_freq"] == 1
    attention = (
        d * q_lora + q_lora  # q_a_proj, q_a_layernorm
        + q_lora * H * (nope + rope)  # q_b_proj
        + d * (kv_lora + rope) + kv_lora  # kv_a_proj_with_mqa, kv_a_layernorm
        + kv_lora * H * (nope + v_head)  # kv_b_proj
        + H * v_head * d  # o_proj
    )
    expert = 3 * d * c["moe_intermediate_size"]  # gate, up, down of one expert
    E = c["n_routed_experts"]
    mixture = E * expert + c["n_shared_experts"] * expert + E * d + E  # + router weight, router bias (buffer)
    return {
        "attention": attention,
        "dense_block": attention + 2 * d + 3 * d * c["intermediate_size"],
        "moe_block": attention + 2 * d + mixture,
        "expert": expert,
        "embedding": c["vocab_size"] * d,
        "dense_blocks": c["first_k_dense_replace"],
        "moe_blocks": c["num_hidden_layers"] - c["first_k_dense_replace"],
    }


def mla_deepseek_total(c, s):
    assert not c["tie_word_embeddings"]
    return 2 * s["embedding"] + c["hidden_size"] + s["dense_blocks"] * s["dense_block"] + s["moe_blocks"] * s["moe_block"]


RELEASED = released_config("kimi_k2")
d, V = RELEASED["hidden_size"], RELEASED["vocab_size"]
H = RELEASED["num_attention_heads"]
NOPE, ROPE, V_HEAD = RELEASED["qk_nope_head_dim"], RELEASED["qk_rope_head_dim"], RELEASED["v_head_dim"]
DENSE_FFN, EXPERT_FFN = RELEASED["intermediate_size"], RELEASED["moe_intermediate_size"]
EXPERTS, TOP_K = RELEASED["n_routed_experts"], RELEASED["num_experts_per_tok"]
LAYERS = RELEASED["num_hidden_layers"]
SIZES = mla_deepseek_sizes(RELEASED)
ATTENTION, DENSE_BLOCK, MOE_BLOCK = SIZES["attention"], SIZES["dense_block"], SIZES["moe_block"]
DENSE_BLOCKS, MOE_BLOCKS = SIZES["dense_blocks"], SIZES["moe_blocks"]
TOTAL = mla_deepseek_total(RELEASED, SIZES)


def test_total_weight_parameters(kimi):
    model = kimi["accounting"]["model"]
    # The derivation from config.json, the pinned header total and SPEC §10's figure are three sources.
    assert model["total"] == TOTAL == PINNED["weight_parameters"] == 1_026_408_232_448
    # The router bias is a persistent buffer: counted, but never merged silently into parameters.
    assert model["stored_buffers"] == MOE_BLOCKS * EXPERTS
    assert model["parameters"] == TOTAL - MOE_BLOCKS * EXPERTS


def test_active_parameters(kimi):
    # A token runs through num_experts_per_tok of the routed experts in each MoE block.
    idle_experts_per_block = (EXPERTS - TOP_K) * SIZES["expert"]
    assert kimi["accounting"]["model"]["active"] == TOTAL - MOE_BLOCKS * idle_experts_per_block


def test_block_kinds(kimi):
    kinds = {k["label"]: k for k in kimi["block_kinds"]}
    assert set(kinds) == {"dense block", "MoE block"}
    assert kinds["dense block"]["indices"] == list(range(DENSE_BLOCKS))
    assert kinds["MoE block"]["indices"] == list(range(DENSE_BLOCKS, LAYERS))
    assert kimi["blocks"][0] != kimi["blocks"][1] == kimi["blocks"][60]


def test_block_accounting(kimi):
    rows = {r["label"]: r for r in kimi["accounting"]["block_kinds"]}
    moe, dense = rows["MoE block"], rows["dense block"]
    # SPEC §10: MoE block 17,059,365,248 × 60 = 1,023,561,914,880; dense block 497,500,160; attention 101,124,096.
    assert (MOE_BLOCK, DENSE_BLOCK, ATTENTION) == (17_059_365_248, 497_500_160, 101_124_096)
    assert (moe["per_instance"], moe["instances"], moe["total"]) == (MOE_BLOCK, MOE_BLOCKS, MOE_BLOCK * MOE_BLOCKS)
    assert moe["calculation"] == f"{MOE_BLOCK:,} × {MOE_BLOCKS} = {MOE_BLOCK * MOE_BLOCKS:,}" == "17,059,365,248 × 60 = 1,023,561,914,880"
    assert (dense["per_instance"], dense["instances"]) == (DENSE_BLOCK, DENSE_BLOCKS)
    for row in (moe, dense):
        attention = next(c for c in row["tree"]["children"] if c["name"] == "self_attn")
        assert attention["parameters"] == ATTENTION


def test_embedding_and_head(kimi):
    rows = {r["path"]: r for r in kimi["accounting"]["model"]["rows"]}
    assert rows["model.embed_tokens"]["parameters"] == rows["lm_head"]["parameters"] == V * d == 1_174_405_120  # SPEC §10
    norm = next(r for r in kimi["accounting"]["block_kinds"][0]["tree"]["children"] if r["name"] == "input_layernorm")
    assert norm["tensors"][0]["calculation"] == f"{d:,}"


def test_tensor_calculations_are_exact(kimi):
    for row in kimi["accounting"]["block_kinds"]:
        for node in tree_rows(row["tree"]):
            for t in node["tensors"]:
                assert t["elements"] == math.prod(t["shape"])
                assert t["calculation"].endswith(f"{t['elements']:,}")
    experts = [n for n in tree_rows(kimi["accounting"]["block_kinds"][1]["tree"]) if n["name"] == "experts"][0]
    calculations = {t["name"]: t["calculation"] for t in experts["tensors"]}
    assert calculations["gate_up_proj"] == f"{EXPERTS} × {2 * EXPERT_FFN:,} × {d:,} = {EXPERTS * 2 * EXPERT_FFN * d:,}"


def test_router_bias_is_shown_as_a_buffer(kimi):
    moe = kimi["accounting"]["block_kinds"][1]
    assert moe["per_instance_stored_buffers"] == EXPERTS
    gate = [n for n in tree_rows(moe["tree"]) if n["name"] == "gate"][0]
    roles = {t["name"]: t["role"] for t in gate["tensors"]}
    assert roles == {"weight": "parameter", "e_score_correction_bias": "buffer"}


def test_checkpoint_prediction_equals_header_totals(kimi):
    predicted = kimi["checkpoint_check"]["predicted"]
    # checkpoint.json's header totals, which SPEC §10 quotes as well
    assert predicted["tensors"] == PINNED["tensors"] == 139_644
    assert predicted["bytes_by_dtype"] == PINNED["bytes_by_dtype"] == {"BF16": 5_029_941_936, "F32": 250_072_928, "F8_E4M3": 1_023_893_241_856}
    assert predicted["payload_bytes"] == PINNED["payload_bytes"] == 1_029_173_256_720
    assert predicted["weight_parameters"] == PINNED["weight_parameters"]


def test_checkpoint_bytes_by_dtype_by_hand(kimi):
    """FP8 releases store every projection inside the blocks as F8_E4M3 with one F32 scale per 128 × 128
    tile; embeddings, head, norms and the router stay BF16, the router's bias F32; each block's file
    also holds a BF16 rotary inv_freq entry of the size checkpoint.json's stored_buffers gives."""
    q = RELEASED["quantization_config"]
    assert (q["quant_method"], q["fmt"], q["weight_block_size"]) == ("fp8", "e4m3", [128, 128])
    tile = 128
    q_lora, kv_lora = RELEASED["q_lora_rank"], RELEASED["kv_lora_rank"]
    attention = [(q_lora, d), (H * (NOPE + ROPE), q_lora), (kv_lora + ROPE, d), (H * (NOPE + V_HEAD), kv_lora), (d, H * V_HEAD)]
    dense_mlp = [(DENSE_FFN, d), (DENSE_FFN, d), (d, DENSE_FFN)]
    expert = [(EXPERT_FFN, d), (EXPERT_FFN, d), (d, EXPERT_FFN)]
    moe_mlp = expert * (EXPERTS + RELEASED["n_shared_experts"])
    matrices = DENSE_BLOCKS * (attention + dense_mlp) + MOE_BLOCKS * (attention + moe_mlp)
    fp8 = sum(r * c for r, c in matrices)
    scales = sum(math.ceil(r / tile) * math.ceil(c / tile) for r, c in matrices)
    norms = LAYERS * (2 * d + q_lora + kv_lora) + d
    (rotary,) = [b for b in CHECKPOINT["stored_buffers"] if b["role"] == "rotary"]
    assert rotary["dtype"] == "BF16"
    bf16 = 2 * (2 * V * d + norms + MOE_BLOCKS * EXPERTS * d + LAYERS * math.prod(rotary["shape"]))
    f32 = 4 * (scales + MOE_BLOCKS * EXPERTS)
    assert kimi["checkpoint_check"]["predicted"]["bytes_by_dtype"] == {"BF16": bf16, "F32": f32, "F8_E4M3": fp8}
    assert {"BF16": bf16, "F32": f32, "F8_E4M3": fp8} == PINNED["bytes_by_dtype"]


def test_fp8_scales_per_block_of_128(kimi):
    sample = {t["name"]: t for t in kimi["checkpoint_check"]["sample"]}
    # kv_a_proj_with_mqa is [576, 7168]: ceil(576 / 128) = 5 row blocks, 7168 / 128 = 56 column blocks.
    assert sample["model.layers.0.self_attn.kv_a_proj_with_mqa.weight"]["dtype"] == "F8_E4M3"
    assert sample["model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv"] == {
        "name": "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", "dtype": "F32", "shape": [5, 56], "role": "scale",
    }
    assert sample["model.layers.1.mlp.experts.0.gate_proj.weight"]["shape"] == [EXPERT_FFN, d]
    assert sample["model.layers.1.mlp.gate.weight"]["dtype"] == "BF16"
    assert sample["model.layers.1.mlp.gate.e_score_correction_bias"]["dtype"] == "F32"


def test_attention_scaling_from_yarn(kimi):
    # Softmax scale qk_head_dim^-1/2, times YaRN's mscale squared: (0.1 · mscale_all_dim · ln(factor) + 1)^2.
    yarn = RELEASED["rope_scaling"]
    mscale = 0.1 * yarn["mscale_all_dim"] * math.log(yarn["factor"]) + 1.0
    expected = (NOPE + ROPE) ** -0.5 * mscale * mscale
    assert kimi["attention"]["scaling"] == pytest.approx(expected, rel=1e-12)
    assert kimi["attention"]["scaling_rounded"] == round(expected, 4) == 0.1309  # SPEC §10


def test_standardized_sizes(kimi):
    assert kimi["config"]["standardized"] == {
        "num_layers": LAYERS, "hidden_size": d, "num_heads": H, "num_kv_heads": RELEASED["num_key_value_heads"], "head_dim": V_HEAD,
        "qk_head_dim": NOPE + ROPE, "vocab_size": V, "intermediate_size": DENSE_FFN,
    }


def test_printout_collapses_repeats_and_completes_shapes(kimi):
    lines = [line["text"] for line in kimi["printout"]]
    assert f"({DENSE_BLOCKS}-{LAYERS - 1}): {MOE_BLOCKS} x DeepseekV3DecoderLayer(" in lines
    assert f"(gate_up_proj): Parameter[{EXPERTS}, {2 * EXPERT_FFN}, {d}]" in lines
    assert f"(e_score_correction_bias): Buffer[{EXPERTS}]" in lines
    assert lines[0] == "DeepseekV3ForCausalLM(" and lines[-1] == ")"


def test_deepseek_v3_also_matches_its_checkpoint(collected):
    facts = collected("deepseek_v3").facts
    c = released_config("deepseek_v3")
    pinned = json.loads((ROOT / "atlas/checkpoints/deepseek-ai/DeepSeek-V3/checkpoint.json").read_text())["safetensors"]
    s = mla_deepseek_sizes(c)
    total = mla_deepseek_total(c, s)
    assert facts["accounting"]["model"]["total"] == total
    # transformers builds no MTP block; the files store num_nextn_predict_layers of them after the last
    # layer: a mixture block plus enorm, hnorm, eh_proj [d, 2d], shared_head.norm, its own head and embedding.
    d = c["hidden_size"]
    mtp = c["num_nextn_predict_layers"] * (s["moe_block"] + 3 * d + 2 * d * d + 2 * s["embedding"])
    predicted = facts["checkpoint_check"]["predicted"]
    assert predicted["weight_parameters"] == total + mtp == pinned["weight_parameters"]
    for figure in ("tensors", "tensors_by_dtype", "payload_bytes", "bytes_by_dtype"):
        assert predicted[figure] == pinned[figure], figure
    assert predicted["tensors"] == 91_991
    kinds = {k["label"]: k["indices"] for k in facts["block_kinds"]}
    assert kinds == {"dense block": list(range(s["dense_blocks"])), "MoE block": list(range(s["dense_blocks"], c["num_hidden_layers"]))}
