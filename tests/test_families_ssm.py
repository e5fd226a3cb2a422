"""State-space (Mamba-2) hybrids, each against a hand derivation from its config.json.

The totals below are derived here from the sizes config.json names, through formulas written out by
hand for each kind of block (a Mamba-2 mixer's projections, convolution, per-head vectors and gated
norm; grouped-query attention; an ungated MLP); none is copied from the facts under test. The settings
a formula relies on (no biases but the convolution's, an untied head) are asserted first.
"""

from __future__ import annotations

from tests.conftest import released_config
from tests.test_families import BYTES, gqa_attention, model_total, stored


def mamba2_mixer(d, heads, head_dim, groups, state, kernel, conv_bias=True, bias=False):
    """in_proj (gate, x, B, C, one time step per head), the depthwise convolution over x, B and C,
    dt_bias, A_log and D per head, the gated norm's gain over the inner width, out_proj."""
    inner = heads * head_dim
    conv_channels = inner + 2 * groups * state
    projection = 2 * inner + 2 * groups * state + heads
    in_proj = d * projection + (projection if bias else 0)
    conv = conv_channels * kernel + (conv_channels if conv_bias else 0)
    out_proj = inner * d + (d if bias else 0)
    return in_proj + conv + 3 * heads + inner + out_proj


# --- Nemotron-H (NVIDIA-Nemotron-Nano-9B-v2) -------------------------------------------------------


def test_nemotron_h(collected):
    f, c = collected("nemotron_h").facts, released_config("nemotron_h")
    d, V = c["hidden_size"], c["vocab_size"]
    assert not c["tie_word_embeddings"] and not c["use_bias"] and not c["mlp_bias"] and not c["attention_bias"]
    assert c["use_conv_bias"]
    pattern = c["hybrid_override_pattern"]
    counts = {ch: pattern.count(ch) for ch in "M*-"}
    assert sum(counts.values()) == len(pattern) == c["num_hidden_layers"]
    mamba = mamba2_mixer(d, c["mamba_num_heads"], c["mamba_head_dim"], c["n_groups"], c["ssm_state_size"], c["conv_kernel"]) + d
    attention = gqa_attention(d, c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) + d
    mlp = 2 * d * c["intermediate_size"] + d  # up and down, no gate (relu2), and the block's norm
    total = 2 * V * d + d + counts["M"] * mamba + counts["*"] * attention + counts["-"] * mlp
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["bytes_by_dtype"] == {"BF16": BYTES[c["torch_dtype"]] * total}
    # one kind of block per mixer, at the places the pattern puts them
    kinds = {k["label"]: k["indices"] for k in f["block_kinds"]}
    assert kinds == {
        "state-space block": [i for i, ch in enumerate(pattern) if ch == "M"],
        "attention block": [i for i, ch in enumerate(pattern) if ch == "*"],
        "MLP block": [i for i, ch in enumerate(pattern) if ch == "-"],
    }
    # the state a Mamba-2 block holds is the same at every context: convolution inputs and per-head states
    inner = c["mamba_num_heads"] * c["mamba_head_dim"]
    state = (inner + 2 * c["n_groups"] * c["ssm_state_size"]) * c["conv_kernel"] + inner * c["ssm_state_size"]
    by_kind = {k["label"]: k for k in f["cost"]["cache"]["kinds"]}
    assert by_kind["state-space block"]["values"] == state and by_kind["state-space block"]["cap"] == 1
    assert by_kind["MLP block"]["values"] == 0
    assert by_kind["attention block"]["values"] == 2 * c["num_key_value_heads"] * c["head_dim"]
    # per position only the attention blocks' keys and values grow; at a context the states are added once
    from atlas.cost.figures import figures

    per_position = counts["*"] * 2 * c["num_key_value_heads"] * c["head_dim"]
    at = figures(f["cost"], 4096, dtype="BF16")
    assert at["per_token"] == per_position * 2
    assert at["cache"] == (per_position * 4096 + counts["M"] * state) * 2
    # every step proven, the scan among them
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]
    assert "mamba2" in f["equations"]["kinds"].values()
    hosts = {h["host"]: [v["name"] for v in h["values"]] for h in f["support"]["hosts"]}
    assert {"ssm_output", "ssm_scan_output", "ssm_gate"} <= set(hosts["layers[i].ssm"])
    ids = {i["id"]: i for i in f["preview"]["identities"]}
    assert ids["ssm_block_sum"]["holds"] and ids["mlp_block_sum"]["holds"] and ids["attention_block_sum"]["holds"]


# --- Granite 4.0-H (granite-4.0-h-tiny) ----------------------------------------------------------


def test_granite_moe_hybrid(collected):
    f, c = collected("granite_moe_hybrid").facts, released_config("granite_moe_hybrid")
    d, V = c["hidden_size"], c["vocab_size"]
    assert c["tie_word_embeddings"] and not c["attention_bias"] and not c["mamba_proj_bias"] and c["mamba_conv_bias"]
    assert c["mamba_n_heads"] * c["mamba_d_head"] == c["mamba_expand"] * d
    types = c["layer_types"]
    E, k, F, S = c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"], c["shared_intermediate_size"]
    experts = E * (d * 2 * F + F * d)  # each expert: a fused gate-and-up matrix and a down matrix
    router = d * E
    shared = d * 2 * S + S * d  # the shared expert beside the mixture: fused gate-and-up, down
    ffn = router + experts + shared + 2 * d  # and the block's two RMSNorms
    mamba = mamba2_mixer(d, c["mamba_n_heads"], c["mamba_d_head"], c["mamba_n_groups"], c["mamba_d_state"], c["mamba_d_conv"])
    head_dim = d // c["num_attention_heads"]
    attention = gqa_attention(d, c["num_attention_heads"], c["num_key_value_heads"], head_dim)
    total = V * d + d + types.count("mamba") * (mamba + ffn) + types.count("attention") * (attention + ffn)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    # a token runs k of the E experts: the others' matrices are not active
    active = total - len(types) * (E - k) * (d * 2 * F + F * d)
    assert f["accounting"]["model"]["active"] == active
    kinds = {kd["label"]: kd["indices"] for kd in f["block_kinds"]}
    assert kinds == {"state-space block": [i for i, t in enumerate(types) if t == "mamba"],
                     "attention block": [i for i, t in enumerate(types) if t == "attention"]}
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]
    # the block runs the shared expert beside the mixture and adds the two
    block = f["equations"]["components"]["state_space_block"]
    assert any("Shared" in s["tex"] for s in block["steps"])
    assert "shared_expert_output" in {v for s in block["steps"] for v in s["values"]}


# --- LFM2 (LFM2-1.2B) ------------------------------------------------------------------------------


def test_lfm2(collected):
    f, c = collected("lfm2").facts, released_config("lfm2")
    d, V, L, H, KV = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"]
    assert "tie_word_embeddings" not in c and not c["conv_bias"]  # the class ties the head by default
    assert c["block_auto_adjust_ff_dim"] and c["block_ffn_dim_multiplier"] == 1.0
    inner = int(2 * c["block_ff_dim"] / 3)
    inner = c["block_multiple_of"] * -(-inner // c["block_multiple_of"])  # rounded up to the multiple
    assert inner == 8192
    attention_blocks = c["full_attn_idxs"]
    K = c["conv_L_cache"]
    conv = d * 3 * d + d * K + d * d  # in_proj to B, C and x; the depthwise kernel; out_proj
    hd = d // H
    attention = gqa_attention(d, H, KV, hd) + 2 * hd  # q, k, v, out and the per-head query and key norms
    ffn = 3 * d * inner + 2 * d  # w1, w3, w2 and the block's two norms
    total = V * d + d + len(attention_blocks) * (attention + ffn) + (L - len(attention_blocks)) * (conv + ffn)
    assert model_total(f) == stored(f)["weight_parameters"] == total
    kinds = {k["label"]: k["indices"] for k in f["block_kinds"]}
    assert kinds == {"short-convolution block": [i for i in range(L) if i not in attention_blocks], "attention block": attention_blocks}
    by_kind = {k["label"]: k for k in f["cost"]["cache"]["kinds"]}
    assert by_kind["short-convolution block"]["values"] == d * K and by_kind["short-convolution block"]["cap"] == 1
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]
    assert "short_conv" in f["equations"]["kinds"].values()


# --- Jamba 1.5 Mini ---------------------------------------------------------------------------------


def test_jamba(collected):
    f, c = collected("jamba").facts, released_config("jamba")
    d, V, L, H, KV, F = (c[k] for k in ("hidden_size", "vocab_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size"))
    assert not c["tie_word_embeddings"] and not c["mamba_proj_bias"] and c["mamba_conv_bias"]
    inner, N, K, R = c["mamba_expand"] * d, c["mamba_d_state"], c["mamba_d_conv"], c["mamba_dt_rank"]
    # the first Mamba: in_proj to x and the gate; the convolution; x_proj to the time step, B and C; dt_proj
    # with its bias; A_log per channel and state entry; D; out_proj; the time-step, B and C norms
    mamba = d * 2 * inner + (inner * K + inner) + inner * (R + 2 * N) + (R * inner + inner) + inner * N + inner + inner * d + R + 2 * N
    attention = gqa_attention(d, H, KV, d // H)
    E, k = c["num_experts"], c["num_experts_per_tok"]
    mlp, moe = 3 * d * F, d * E + E * 3 * d * F
    attention_at = [i for i in range(L) if i % c["attn_layer_period"] == c["attn_layer_offset"]]
    experts_at = [i for i in range(L) if i % c["expert_layer_period"] == c["expert_layer_offset"]]
    total = 2 * V * d + d + sum((attention if i in attention_at else mamba) + (moe if i in experts_at else mlp) + 2 * d for i in range(L))
    assert model_total(f) == stored(f)["weight_parameters"] == total
    assert f["accounting"]["model"]["active"] == total - len(experts_at) * (E - k) * 3 * d * F
    kinds = {kd["label"]: kd["indices"] for kd in f["block_kinds"]}
    assert kinds == {"state-space block": [i for i in range(L) if i not in attention_at and i not in experts_at],
                     "state-space MoE block": experts_at, "attention block": attention_at}
    assert not set(attention_at) & set(experts_at)  # the attention blocks are dense
    assert "mamba1" in f["equations"]["kinds"].values()
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]
    by_kind = {kd["label"]: kd for kd in f["cost"]["cache"]["kinds"]}
    assert by_kind["state-space block"]["values"] == inner * K + inner * N and by_kind["state-space block"]["cap"] == 1
