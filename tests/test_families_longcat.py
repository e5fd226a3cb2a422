"""LongCat-Flash against a hand derivation, and the rules added for it.

The expected totals come from config.json's sizes (read from the file by the test) through formulas
written out here; none is copied from the facts under test. Where a formula relies on a setting (no
attention bias, an untied head, the zero experts' count), the test asserts the setting first.
"""

from __future__ import annotations

import pytest

from tests.conftest import released_config


def mla(d, heads, q_rank, kv_rank, nope, rope, v):
    """One LongCat-Flash latent attention: q_a (+ its norm), q_b, kv_a (latent + shared rotary key, + the
    latent's norm), kv_b, o; no biases."""
    return (d * q_rank + q_rank + q_rank * heads * (nope + rope)
            + d * (kv_rank + rope) + kv_rank + kv_rank * heads * (nope + v)
            + heads * v * d)


def test_longcat_flash_total_from_the_files(collected):
    f, c = collected("longcat_flash").facts, released_config("longcat_flash")
    V, d, L, H = c["vocab_size"], c["hidden_size"], c["num_layers"], c["num_attention_heads"]
    E, Z, F, Fe = c["n_routed_experts"], c["zero_expert_num"], c["ffn_hidden_size"], c["expert_ffn_hidden_size"]
    # settings the formula relies on: no attention bias, no router bias, an untied head (all absent from
    # the file: the class defaults are false), and latent queries
    assert not c.get("attention_bias", False) and not c.get("router_bias", False) and not c.get("tie_word_embeddings", False)
    assert c["q_lora_rank"] and c["kv_lora_rank"]
    attention = mla(d, H, c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"])
    dense = 3 * d * F
    norms = 4 * d                     # input_layernorm and post_attention_layernorm, two of each
    router = (E + Z) * d              # the classifier: one row per routing choice, zero experts included
    experts = E * 3 * d * Fe          # gate, up and down for each REAL expert: what the files hold
    block = 2 * attention + 2 * dense + norms + router + experts
    parameters = V * d + L * block + d + V * d    # embeddings, blocks, final norm, head
    assert f["accounting"]["model"]["parameters"] == parameters
    # the router's selection bias: a persistent buffer per block, one entry per routing choice
    assert f["accounting"]["model"]["total"] == parameters + L * (E + Z)
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == parameters + L * (E + Z)
    # the published size: 560 B total
    assert round(parameters / 1e9) in (560, 561)


def test_longcat_flash_allocation_difference_is_stated(collected):
    f, c = collected("longcat_flash").facts, released_config("longcat_flash")
    d, L, E, Z, Fe = c["hidden_size"], c["num_layers"], c["n_routed_experts"], c["zero_expert_num"], c["expert_ffn_hidden_size"]
    (cut,) = f["checkpoint"]["not_stored"]
    # transformers allocates the fused gate and up projection for every routing choice; the files hold the real experts'
    assert cut["allocated"] == [E + Z, 2 * Fe, d] and cut["stored"] == [E, 2 * Fe, d]
    assert cut["instances"] == L and cut["not_counted"] == L * Z * 2 * Fe * d
    assert cut["config_key"] == "n_routed_experts" and cut["why"]
    # the predicted files hold one gate, up and down projection per real expert and block, none for a zero expert
    names = [t["name"] for t in f["checkpoint_check"]["tensors"]["model.layers.0.mlp.experts.gate_up_proj"]["stored"]]
    assert names and all(f"{{0…{E - 1}}}" in n for n in names), names


def test_longcat_flash_head_dim_override_is_the_rotary_width(collected):
    from atlas import families

    family, c = families.load("longcat_flash"), released_config("longcat_flash")
    assert "head_dim" not in c and family.config_overrides["head_dim"] == c["qk_rope_head_dim"]
    f = collected("longcat_flash").facts
    (override,) = f["checkpoint"]["overrides"]
    assert override["key"] == "head_dim" and not override["in_file_present"] and override["why"]


def test_longcat_flash_active_is_the_top_k_bound(collected):
    f, c = collected("longcat_flash").facts, released_config("longcat_flash")
    V, d, L, E, Fe, K = c["vocab_size"], c["hidden_size"], c["num_layers"], c["n_routed_experts"], c["expert_ffn_hidden_size"], c["moe_topk"]
    # every slot on a real expert: the most a token can run through; all real experts' but K's are idle
    idle = L * (E - K) * 3 * d * Fe
    assert f["accounting"]["model"]["active"] == f["accounting"]["model"]["total"] - idle
    # Meituan: up to about 31.3 B activated, counted without the embedding table
    assert round((f["accounting"]["model"]["active"] - V * d) / 1e8) == 314


def test_longcat_flash_proof_finds_the_zero_experts_and_the_shortcut(collected):
    f = collected("longcat_flash").facts
    comps = f["equations"]["components"]
    experts = next(v for k, v in comps.items() if k.endswith("mlp.experts"))
    assert experts["facts"]["zero_experts"]["value"] == "identity"
    block = next(v for k, v in comps.items() if f["equations"]["kinds"].get(k) == "block")
    assert block["facts"]["sublayers"]["value"]["pairs"] == 2
    assert any("the shortcut" in s["tex"] for s in block["steps"])
    attention = next(v for k, v in comps.items() if k.endswith("self_attn.0"))
    scales = attention["facts"]["latent_scales"]["value"]
    c = released_config("longcat_flash")
    assert scales["queries"] == pytest.approx((c["hidden_size"] / c["q_lora_rank"]) ** 0.5)
    assert scales["keys_values"] == pytest.approx((c["hidden_size"] / c["kv_lora_rank"]) ** 0.5)


def test_zero_expert_rule_is_measured_not_assumed():
    """The experts' chain offers both rules for a zero expert; the wrong one must fail on a run where a
    slot lands on one."""
    import torch

    from atlas.proof.experts import _with_zero_experts
    from atlas.proof.steps import Chain, Step

    base = Chain([Step("e", "e_out", lambda e: e["x"][:, None, :].expand(-1, 2, -1) * 0 + 5.0)], [], "e_out")
    x = torch.randn(3, 4)
    E = torch.tensor([[0, 2], [1, 3], [2, 2]])  # 2 real experts: choices 2 and 3 are zero experts
    env = {"x": x, "E": E}
    for rule, expected in (("identity", x[:, None, :]), ("nothing", torch.zeros(1, 1, 4))):
        chain = _with_zero_experts(base, 2, 2, rule)
        env["e_out"] = chain.steps[0].fn(env)
        out = chain.steps[1].fn(env)
        zero = E >= 2
        assert torch.equal(out[zero], expected.expand(3, 2, 4)[zero])
        assert torch.equal(out[~zero], torch.full_like(out[~zero], 5.0))


def test_num_blocks_follows_the_block_list_not_the_attention_count():
    from transformers import LlamaConfig, LongcatFlashConfig

    from atlas.model.introspect import num_blocks

    longcat = LongcatFlashConfig(num_layers=3)
    assert longcat.num_hidden_layers == 6 and num_blocks(longcat) == 3  # two attentions (cache layers) a block
    assert num_blocks(LlamaConfig(num_hidden_layers=5)) == 5


def test_list_block_roles_name_the_first_entries():
    import torch
    from transformers import LongcatFlashConfig
    from transformers.models.longcat_flash.modeling_longcat_flash import LongcatFlashDecoderLayer

    from atlas.model.roles import block_roles

    config = LongcatFlashConfig(hidden_size=32, num_attention_heads=2, q_lora_rank=8, kv_lora_rank=8, qk_nope_head_dim=4,
                                qk_rope_head_dim=4, v_head_dim=4, ffn_hidden_size=16, expert_ffn_hidden_size=8,
                                n_routed_experts=4, zero_expert_num=2, moe_topk=2, num_layers=1)
    with torch.device("meta"):
        block = LongcatFlashDecoderLayer(config, 0)
    r = block_roles(block)
    assert (r.attention, r.attention_norm, r.mlp_norm, r.mlp) == ("self_attn.0", "input_layernorm.0", "post_attention_layernorm.0", "mlp")
    assert set(r.sublayer_lists) == {"self_attn", "mlps", "input_layernorm", "post_attention_layernorm"}
    assert (r.router, r.experts) == ("router", "experts")
