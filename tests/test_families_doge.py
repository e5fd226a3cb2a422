"""Doge (SmallDoge/Doge-160M), against a hand derivation from its config.

Every expected figure is derived here from config.json's sizes through formulas written out by hand, as Doge's
blocks lay out their weights; none is copied from the facts under test.
"""

from __future__ import annotations

import pytest

from tests.conftest import released_config


def doge_block(c: dict) -> int:
    """One Doge block: two RMSNorms, the attention with its value-scored mask, two residual vectors and a gated MLP."""
    d, h, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd = d // h
    assert not c["attention_bias"] and not c["mlp_bias"] and not c["is_moe"]
    attention = (d * h * hd                 # q_proj
                 + 2 * d * kv * hd          # k_proj and v_proj
                 + h * hd * d               # o_proj
                 + kv * hd * kv             # dt_proj: every key-value head's values to one number a key-value head
                 + kv                       # A: one number a key-value head
                 + 2 * hd)                  # q_norm and k_norm, one head wide
    norms = 2 * d                           # input_layernorm, post_attention_layernorm
    residual = 2 * d                        # input_residual, post_attention_residual
    mlp = 3 * d * c["intermediate_size"]    # gate, up, down
    return attention + norms + residual + mlp


def doge_total(c: dict) -> int:
    assert c["tie_word_embeddings"]
    # the embeddings (the head tied to them), the blocks and the final norm
    return c["vocab_size"] * c["hidden_size"] + c["num_hidden_layers"] * doge_block(c) + c["hidden_size"]


def test_doge_total_is_embeddings_blocks_and_a_tied_head(collected):
    f, c = collected("doge").facts, released_config("doge")
    total = doge_total(c)
    assert total == 152_676_168
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == model["active"] == total
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    [figure] = f["checkpoint"]["published"]["figures"]
    assert figure["figure"] == "160M" and not figure["agrees"]  # the vendor's name is a size class: 152.7M, stated apart
    [kind] = f["accounting"]["block_kinds"]
    assert kind["total"] == c["num_hidden_layers"] * doge_block(c)


def test_doge_steps_print_the_weighted_adds_and_the_value_scored_mask(collected):
    f = collected("doge").facts
    components = f["equations"]["components"]
    block = " ".join(s["tex"] for s in components["transformer_block"]["steps"])
    assert r"x'=w_1\odot x+\Delta_{\mathrm{attn}}" in block and r"y=w_2\odot x'+\Delta_{\mathrm{ffn}}" in block
    steps = components["transformer_block.self_attn"]["steps"]
    attention = " ".join(s["tex"] for s in steps)
    assert r"\delta_t=" in attention and r"W_{\delta}^{\top}\quad 384\to3" in attention
    assert r"m_t=e^{A\odot \operatorname{softplus}(\delta_t)}" in attention
    assert r"\operatorname{top}_{2{,}048}" in attention and r"m_{s,\lceil h/2\rceil}" in attention
    assert all(s["expression"] for s in steps + components["transformer_block"]["steps"])
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]
    identities = {i["id"]: i for i in f["preview"]["identities"]}
    assert identities["weighted_attention_add"]["holds"] and identities["weighted_block_sum"]["holds"]
    assert "block_sum" not in identities


def test_doge_costs_score_every_cached_key_eagerly_and_the_new_one_in_the_model_figure(collected):
    f, c = collected("doge").facts, released_config("doge")
    for check in f["cost"]["checks"]:
        assert check["formula"] == check["measured"], check
    d, h, kv, L = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["num_hidden_layers"]
    hd = d // h
    assert f["cost"]["summary"]["kv_cache_bytes_per_position"] == 2 * L * 2 * kv * hd  # keys and values at BF16
    scorer = kv * hd * kv
    matrices = d * h * hd + 2 * d * kv * hd + h * hd * d + 3 * d * c["intermediate_size"]
    head = 2 * c["vocab_size"] * d
    context = f["cost"]["summary"]["context"]
    per_key = 2 * h * (hd + hd)
    # eager: dt_proj over every cached key at every step; the model: once on the new key, and at most keep_window_size keys
    eager = L * (2 * matrices + context * (per_key + 2 * scorer)) + head
    model = L * (2 * matrices + 2 * scorer + min(context, c["keep_window_size"]) * per_key) + head
    assert f["cost"]["summary"]["flops_per_token_eager"] == eager
    assert f["cost"]["summary"]["flops_per_token"] == model


def test_value_scored_mask_matches_transformers_prepare_dynamic_mask():
    import torch
    from transformers import DogeConfig
    from transformers.models.doge.modeling_doge import DogeAttention

    from atlas.proof.value_mask import _scored

    torch.manual_seed(0)
    config = DogeConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, keep_window_size=3)
    attention = DogeAttention(config, 0).double()
    T_ = 7
    m = torch.rand(1, T_, 2, dtype=torch.float64) + 1
    causal = torch.zeros(1, 1, T_, T_, dtype=torch.float64).masked_fill(torch.ones(T_, T_).triu(1).bool(), torch.finfo(torch.float64).min)
    theirs = attention.prepare_dynamic_mask(torch.zeros(1, T_, 32, dtype=torch.float64), m.transpose(1, 2), 3, causal)
    theirs = theirs.repeat_interleave(2, 1)
    ours = _scored(m, 2, T_, 3)
    kept = ours > float("-inf")
    assert torch.equal(kept, theirs > torch.finfo(torch.float64).min) and torch.equal(ours[kept], theirs[kept])
    assert kept.sum(-1).max().item() == 3
    assert not torch.equal(_scored(m, 2, T_, None) > float("-inf"), kept)  # the keep window acts on 7 keys


def test_doge_config_words_say_the_experts_are_switched_off():
    import json

    from atlas.model import config_words
    from tests.conftest import ROOT

    path = ROOT / "atlas/checkpoints/SmallDoge/Doge-160M/config.json"
    words = config_words.explain_config(json.loads(path.read_text()), str(path))
    assert "2,048 keys of highest score" in words["keep_window_size"]
    assert words["num_experts"].startswith("Unused here, since is_moe is false")
    assert "cross-domain mixture" in words["is_moe"]


def test_doge_lists_its_sizes_from_20m_to_320m_each_exact(collected):
    import json

    from tests.conftest import ROOT

    rows = {r["repo"]: r for r in collected("doge").facts["sizes"]}
    expected = {"20M": 13_118_728, "60M": 54_571_552, "160M": 152_676_168, "320M": 335_750_272}
    assert sorted(rows) == sorted(f"SmallDoge/Doge-{n}" for n in expected)
    for name, count in expected.items():
        repo = f"SmallDoge/Doge-{name}"
        c = json.loads((ROOT / "atlas/checkpoints" / repo / "config.json").read_text())
        assert doge_total(c) == count and rows[repo]["total"] == rows[repo]["active"] == count, repo
        head_dim = c["hidden_size"] // c["num_attention_heads"]
        # keys and values of every block, two bytes each at BF16
        assert rows[repo]["kv_cache_per_token"] == 2 * c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * head_dim, repo


@pytest.fixture(scope="module")
def doge_inputs(collected):
    from atlas.families import load
    from atlas.inputs.checkpoint import build_on_meta, load_pinned, transformers_config
    from atlas.model import preview

    family = load("doge")
    config = transformers_config(family, load_pinned(family.checkpoint))
    return family, build_on_meta(family, config), config, preview.preview_run("doge"), collected("doge").facts


def test_doge_mask_without_its_keep_window_is_refused(doge_inputs, monkeypatch):
    """The preview keeps 4 keys a query, fewer than the prompt's: a mask that keeps every earlier key does not reproduce
    the attention, and the build names the step."""
    from atlas import proof
    from atlas.errors import AtlasError
    from atlas.proof import value_mask

    family, model, config, run, facts = doge_inputs
    monkeypatch.setattr(value_mask, "keep_window", lambda part: (2048, None))
    with pytest.raises(AtlasError, match=r"component transformer_block\.self_attn: step .*top.* does not reproduce"):
        proof.equations(family, model, config, run, facts)


def test_doge_residual_vectors_swapped_are_refused(doge_inputs, monkeypatch):
    """The preview seeds both residual vectors off one: each add weighed by the other vector (whichever order the proof
    tries) does not reproduce the block."""
    from atlas import proof
    from atlas.errors import AtlasError
    from atlas.proof import weighted

    family, model, config, run, facts = doge_inputs
    original = weighted._weighted
    monkeypatch.setattr(weighted, "_weighted", lambda part, chain, first, second: original(part, chain, "post_attention_residual", "input_residual"))
    with pytest.raises(AtlasError, match=r"component transformer_block: step .*post.{1,3}attention.{1,3}residual.* does not reproduce"):
        proof.equations(family, model, config, run, facts)
