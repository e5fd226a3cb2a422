"""DBRX against a hand derivation from its config.json, and the steps added for it.

The expected total is derived here from the sizes config.json holds (its attention and expert sizes
sit in the nested attn_config and ffn_config) through a formula written out by hand; none is copied
from the facts under test. The settings the formula relies on are asserted first.
"""

from __future__ import annotations

import pytest

from tests.conftest import released_config


def _dbrx_sizes(c):
    attn, ffn = c["attn_config"], c["ffn_config"]
    d, H = c["d_model"], c["n_heads"]
    return (c["vocab_size"], d, c["n_layers"], H, attn["kv_n_heads"], d // H,
            ffn["moe_num_experts"], ffn["moe_top_k"], ffn["ffn_hidden_size"])


def test_dbrx_total_and_active_parameters_by_hand(collected):
    f, c = collected("dbrx").facts, released_config("dbrx")
    V, d, L, H, KV, hd, E, K, F = _dbrx_sizes(c)
    # the formula relies on: an untied head, no bias on any linear map or LayerNorm, one kind of block
    assert c["tie_word_embeddings"] is False
    assert [k["label"] for k in f["block_kinds"]] == ["transformer block"] and len(f["block_kinds"][0]["indices"]) == L

    def names(tree):
        yield from (t["name"] for t in tree["tensors"])
        for child in tree["children"]:
            yield from names(child)

    assert "bias" not in set(names(f["accounting"]["block_kinds"][0]["tree"]))
    wqkv = d * (H * hd + 2 * KV * hd)  # one fused map: all query heads, then the key and value heads
    out_proj = H * hd * d
    norms = 2 * d  # norm_1 and norm_2: a gain each, no bias
    router = d * E
    experts = 3 * E * F * d  # w1, v1, w2: each every expert's F rows of width d, stacked
    block = norms + wqkv + out_proj + router + experts
    total = V * d + L * block + d + V * d  # embedding, the blocks, norm_f, the untied head
    assert f["accounting"]["model"]["parameters"] == total
    assert f["accounting"]["model"]["total"] == total  # no stored buffers
    # written out: 40 × (12,288 + 50,331,648 + 37,748,736 + 98,304 + 3,170,893,824) + 2 × 616,562,688 + 6,144,
    # to read against the model card's 132B total and 36B active
    assert total == 131_596_523_520
    # a token uses K of the E experts in every block: the other E - K experts' rows are idle
    active = total - L * (E - K) * 3 * F * d
    assert f["accounting"]["model"]["active"] == active
    assert active == 36_469_708_800


def test_dbrx_proof_facts(collected):
    f = collected("dbrx").facts
    comps = f["equations"]["components"]
    attn = comps["transformer_block.norm_attn_norm.attn"]
    assert attn["facts"]["qkv_clip"]["value"] == released_config("dbrx")["attn_config"]["clip_qkv"]
    assert any(r"\operatorname{clamp}" in s["tex"] for s in attn["steps"])
    assert attn["facts"]["heads"]["value"] == {"query": 48, "key_value": 8, "head_dim": 128}
    kinds = f["equations"]["kinds"]
    assert kinds["transformer_block.norm_attn_norm"] == "norm_attention_norm"
    assert kinds["transformer_block.ffn.experts"] == "stacked_experts"
    assert kinds["transformer_block.ffn.experts.mlp"] == "expert_glu"
    # the gate is the first stacked matrix (w1), measured: the other order does not reproduce the module
    glu = comps["transformer_block.ffn.experts.mlp"]["facts"]["gated_map"]
    assert glu["value"] == "first_gated" and glu["how"].startswith("measured: the only variant")
    routing = comps["transformer_block.ffn"]["facts"]
    assert routing["routing"]["value"] == "softmax, top-k, divided by their p-norm"
    assert routing["expert_weight_norm"]["value"] == 1.0
    # p = 1: the p-norm of positive weights is their sum, and the page says both rules agree here
    assert "renormalised to sum to 1 also does" in routing["routing"]["how"]
    assert f["equations"]["total"]["steps"] == f["equations"]["total"]["reproduced"]


def test_dbrx_standard_names_are_read_inside_the_wrapper(collected):
    f = collected("dbrx").facts
    where = {}
    for host in f["support"]["hosts"]:
        for v in host["values"]:
            where[v["name"]] = v
    assert where["layer_mid"]["module"] == "transformer.blocks.{i}.norm_attn_norm.norm_2"
    assert where["attention_norm_output"]["module"] == "transformer.blocks.{i}.norm_attn_norm.norm_1"
    assert where["attention_output"]["module"].endswith("norm_attn_norm.attn")
    assert where["router_logits"]["module"] == "transformer.blocks.{i}.ffn.router"
    # the experts run their own loop, outside transformers' experts switch: each slot is captured on every run
    assert where["expert_outputs"]["condition"] is None
    assert "expert_outputs" not in f["preview"]["conditions"]


@pytest.fixture(scope="module")
def dbrx_inputs(collected):
    from atlas.model import preview
    from atlas.inputs.checkpoint import build_on_meta, load_pinned, transformers_config
    from atlas.families import load

    family = load("dbrx")
    config = transformers_config(family, load_pinned(family.checkpoint))
    return family, build_on_meta(family, config), config, preview.preview_run("dbrx"), collected("dbrx").facts


def test_dbrx_attention_without_its_clamp_is_refused(dbrx_inputs, monkeypatch):
    """The preview's clip is low enough that the clamp acts: steps that leave it out do not reproduce
    the attention, and the build names the component."""
    from atlas import proof
    from atlas.errors import AtlasError
    from atlas.proof import attention

    family, model, config, run, facts = dbrx_inputs
    monkeypatch.setattr(attention, "_qkv_clip", lambda module: None)
    with pytest.raises(AtlasError, match=r"component transformer_block\.norm_attn_norm\.attn: step .* does not reproduce"):
        proof.equations(family, model, config, run, facts)


def test_dbrx_routing_by_plain_top_k_is_refused(dbrx_inputs, monkeypatch):
    """Weights left as the softmax gave them (no renormalisation) do not reproduce the mixture."""
    from atlas import proof
    from atlas.errors import AtlasError
    from atlas.proof import mixture

    family, model, config, run, facts = dbrx_inputs
    monkeypatch.setattr(mixture, "_routes_like", lambda part, trial: len(trial.steps) == 4)  # only "none" (pick, no norm)
    with pytest.raises(AtlasError, match=r"component transformer_block\.ffn: step .* does not reproduce"):
        proof.equations(family, model, config, run, facts)


def test_dbrx_tiny_config_shrinks_the_sub_configs():
    from atlas.inputs.checkpoint import load_pinned, transformers_config
    from atlas.families import load
    from atlas.model.tiny import tiny_config

    family = load("dbrx")
    pinned = transformers_config(family, load_pinned(family.checkpoint))
    tiny = tiny_config(family, pinned)
    assert tiny.d_model == tiny.ffn_config.hidden_size == 64
    assert (tiny.ffn_config.moe_num_experts, tiny.ffn_config.moe_top_k) == (8, 2)  # the checkpoint's share, 4 of 16
    assert (tiny.num_local_experts, tiny.num_experts_per_tok) == (8, 2)  # the top-level copies agree
    assert tiny.attn_config.kv_n_heads == tiny.num_key_value_heads == 1
    assert tiny.attn_config.clip_qkv < pinned.attn_config.clip_qkv
    assert tiny.rope_parameters["rope_theta"] == pinned.attn_config.rope_theta == 500000
