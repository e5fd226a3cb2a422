"""Kimi K2's facts against the reference truth (SPEC §10) and against derivations written here by hand."""

from __future__ import annotations

import math

import pytest

from tests.conftest import tree_rows

# The released configuration's sizes, as Kimi-K2-Instruct's config.json gives them.
d, V = 7168, 163840  # hidden_size, vocab_size
H = 64  # num_attention_heads
Q_LORA, KV_LORA = 1536, 512
NOPE, ROPE, V_HEAD = 128, 64, 128
DENSE_FFN, EXPERT_FFN = 18432, 2048
EXPERTS, SHARED = 384, 1
LAYERS, DENSE_BLOCKS = 61, 1

ATTENTION = (
    d * Q_LORA + Q_LORA  # q_a_proj, q_a_layernorm
    + Q_LORA * H * (NOPE + ROPE)  # q_b_proj
    + d * (KV_LORA + ROPE) + KV_LORA  # kv_a_proj_with_mqa, kv_a_layernorm
    + KV_LORA * H * (NOPE + V_HEAD)  # kv_b_proj
    + H * V_HEAD * d  # o_proj
)
NORMS = 2 * d
DENSE_BLOCK = ATTENTION + NORMS + 3 * d * DENSE_FFN
MIXTURE = EXPERTS * 3 * d * EXPERT_FFN + SHARED * 3 * d * EXPERT_FFN + EXPERTS * d + EXPERTS  # + router weight, router bias
MOE_BLOCK = ATTENTION + NORMS + MIXTURE


def test_hand_derivation_agrees_with_the_reference_truth():
    # The derivation above is the independent source for the figures below; check it first.
    assert ATTENTION == 101_124_096
    assert DENSE_BLOCK == 497_500_160
    assert MOE_BLOCK == 17_059_365_248
    assert V * d == 1_174_405_120


def test_total_weight_parameters(kimi):
    model = kimi["accounting"]["model"]
    expected = 2 * V * d + d + DENSE_BLOCKS * DENSE_BLOCK + (LAYERS - DENSE_BLOCKS) * MOE_BLOCK
    assert model["total"] == expected == 1_026_408_232_448
    # The router bias is a persistent buffer: counted, but never merged silently into parameters.
    assert model["stored_buffers"] == (LAYERS - DENSE_BLOCKS) * EXPERTS
    assert model["parameters"] == expected - model["stored_buffers"]


def test_active_parameters(kimi):
    # A token runs through 8 of the 384 routed experts in each of the 60 MoE blocks.
    idle_experts_per_block = (EXPERTS - 8) * 3 * d * EXPERT_FFN
    assert kimi["accounting"]["model"]["active"] == 1_026_408_232_448 - 60 * idle_experts_per_block


def test_block_kinds(kimi):
    kinds = {k["label"]: k for k in kimi["block_kinds"]}
    assert set(kinds) == {"dense block", "MoE block"}
    assert kinds["dense block"]["indices"] == [0]
    assert kinds["MoE block"]["indices"] == list(range(1, LAYERS))
    assert kimi["blocks"][0] != kimi["blocks"][1] == kimi["blocks"][60]


def test_block_accounting(kimi):
    rows = {r["label"]: r for r in kimi["accounting"]["block_kinds"]}
    moe, dense = rows["MoE block"], rows["dense block"]
    assert (moe["per_instance"], moe["instances"], moe["total"]) == (MOE_BLOCK, 60, 1_023_561_914_880)
    assert moe["calculation"] == "17,059,365,248 × 60 = 1,023,561,914,880"
    assert dense["per_instance"] == DENSE_BLOCK
    for row in (moe, dense):
        attention = next(c for c in row["tree"]["children"] if c["name"] == "self_attn")
        assert attention["parameters"] == ATTENTION


def test_embedding_and_head(kimi):
    rows = {r["path"]: r for r in kimi["accounting"]["model"]["rows"]}
    assert rows["model.embed_tokens"]["parameters"] == rows["lm_head"]["parameters"] == 1_174_405_120
    embedding = next(r for r in kimi["accounting"]["block_kinds"][0]["tree"]["children"] if r["name"] == "input_layernorm")
    assert embedding["tensors"][0]["calculation"] == "7,168"


def test_tensor_calculations_are_exact(kimi):
    for row in kimi["accounting"]["block_kinds"]:
        for node in tree_rows(row["tree"]):
            for t in node["tensors"]:
                assert t["elements"] == math.prod(t["shape"])
                assert t["calculation"].endswith(f"{t['elements']:,}")
    experts = [n for n in tree_rows(kimi["accounting"]["block_kinds"][1]["tree"]) if n["name"] == "experts"][0]
    calculations = {t["name"]: t["calculation"] for t in experts["tensors"]}
    assert calculations["gate_up_proj"] == "384 × 4,096 × 7,168 = 11,274,289,152"


def test_router_bias_is_shown_as_a_buffer(kimi):
    moe = kimi["accounting"]["block_kinds"][1]
    assert moe["per_instance_stored_buffers"] == EXPERTS
    gate = [n for n in tree_rows(moe["tree"]) if n["name"] == "gate"][0]
    roles = {t["name"]: t["role"] for t in gate["tensors"]}
    assert roles == {"weight": "parameter", "e_score_correction_bias": "buffer"}


def test_checkpoint_prediction_equals_header_totals(kimi):
    predicted = kimi["checkpoint_check"]["predicted"]
    assert predicted["tensors"] == 139_644
    assert predicted["bytes_by_dtype"] == {"BF16": 5_029_941_936, "F32": 250_072_928, "F8_E4M3": 1_023_893_241_856}
    assert predicted["payload_bytes"] == 1_029_173_256_720
    assert predicted["weight_parameters"] == 1_026_408_232_448


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
    mscale = 0.1 * 1.0 * math.log(32.0) + 1.0
    expected = (NOPE + ROPE) ** -0.5 * mscale * mscale
    assert kimi["attention"]["scaling"] == pytest.approx(expected, rel=1e-12)
    assert kimi["attention"]["scaling_rounded"] == 0.1309


def test_standardized_sizes(kimi):
    assert kimi["config"]["standardized"] == {
        "num_layers": LAYERS, "hidden_size": d, "num_heads": H, "num_kv_heads": H, "head_dim": V_HEAD,
        "qk_head_dim": NOPE + ROPE, "vocab_size": V, "intermediate_size": DENSE_FFN,
    }


def test_printout_collapses_repeats_and_completes_shapes(kimi):
    lines = [line["text"] for line in kimi["printout"]]
    assert "(1-60): 60 x DeepseekV3DecoderLayer(" in lines
    assert "(gate_up_proj): Parameter[384, 4096, 7168]" in lines
    assert "(e_score_correction_bias): Buffer[384]" in lines
    assert lines[0] == "DeepseekV3ForCausalLM(" and lines[-1] == ")"


def test_deepseek_v3_also_matches_its_checkpoint(collected):
    facts = collected("deepseek_v3").facts
    predicted = facts["checkpoint_check"]["predicted"]
    assert predicted["tensors"] == 91_991
    assert predicted["tensors_by_dtype"] == {"BF16": 316, "F32": 45_867, "F8_E4M3": 45_808}
    assert predicted["payload_bytes"] == 688_574_839_360
    # transformers builds no MTP block; the checkpoint's extra weights are that block.
    assert predicted["weight_parameters"] - facts["accounting"]["model"]["total"] == 13_463_426_304
    kinds = {k["label"]: k["indices"] for k in facts["block_kinds"]}
    assert kinds == {"dense block": [0, 1, 2], "MoE block": list(range(3, 61))}
