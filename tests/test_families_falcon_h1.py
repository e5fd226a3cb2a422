"""Falcon-H1 (attention and a Mamba-2 mixer side by side in every block), against hand derivations.

The expected total is derived here from the sizes in the family's config.json through a formula written
out by hand; the settings the formula relies on (no projection biases, no gated norm in the mixer, an
untied head, every block alike) are asserted in the file first. The proof's new steps (the two mixers'
sum, the per-part constants of the mixer's input projection) are shown to refuse a wrong formula.
"""

from __future__ import annotations

import dataclasses

import pytest

from tests.conftest import released_config


def test_falcon_h1_total_by_hand(collected):
    f, c = collected("falcon_h1").facts, released_config("falcon_h1")
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    H, KV, hd, F = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["intermediate_size"]
    mh, mp, N, G, K = c["mamba_n_heads"], c["mamba_d_head"], c["mamba_d_state"], c["mamba_n_groups"], c["mamba_d_conv"]
    di = c["mamba_d_ssm"]
    # what the formula relies on: no biases but the convolution's, no gated norm, an untied head, one block kind
    assert not c["attention_bias"] and not c["mlp_bias"] and not c["mamba_proj_bias"] and not c["projectors_bias"]
    assert c["mamba_conv_bias"] and not c["mamba_rms_norm"] and not c["tie_word_embeddings"]
    assert c["attn_layer_indices"] is None and di == mh * mp
    attention = d * H * hd + 2 * d * KV * hd + H * hd * d  # q, k, v, o
    conv_channels = di + 2 * G * N  # x, B and C are convolved
    mamba = (d * (di + conv_channels + mh)  # in_proj: gate z, x, B, C, one time step per head
             + conv_channels * K + conv_channels  # depthwise kernel and its bias
             + 3 * mh  # dt_bias, A_log, D
             + di * d)  # out_proj
    mlp = 3 * d * F  # gate, up, down
    block = attention + mamba + mlp + 2 * d  # input_layernorm, pre_ff_layernorm
    parameters = V * d + L * block + d + V * d  # embeddings, blocks, final norm, head
    assert block == 1_310_720 + 5_014_344 + 6_291_456 + 2_048  # the parts, worked out on paper beside the formula
    assert f["accounting"]["model"]["parameters"] == parameters == 521_411_104
    assert f["accounting"]["model"]["total"] == parameters  # no persistent buffer: mup_vector is not saved
    assert [k["count"] for k in f["block_kinds"]] == [L]
    # published as 0.5B
    assert 0.45e9 < parameters < 0.55e9


def test_falcon_h1_proof_takes_every_multiplier_from_structure(collected):
    f, c = collected("falcon_h1").facts, released_config("falcon_h1")
    eq = f["equations"]
    assert eq["total"]["reproduced"] == eq["total"]["steps"]
    comps = eq["components"]
    kind = f["block_kinds"][0]["id"]
    block = comps[kind]["facts"]
    assert block["sublayers"]["value"] == {"attention": "self_attn", "ssm": "mamba", "mlp": "feed_forward"}
    assert block["mixer_multipliers"]["value"] == {"attention_in": c["attention_in_multiplier"], "attention_out": c["attention_out_multiplier"],
                                                   "ssm_out": c["ssm_out_multiplier"]}
    mamba = comps[f"{kind}.mamba"]["facts"]
    assert mamba["kind"]["value"] == "mamba2" and mamba["input_multiplier"]["value"] == c["ssm_in_multiplier"]
    assert list(mamba["part_multipliers"]["value"]["parts"].values()) == c["ssm_multipliers"]
    assert mamba["part_multipliers"]["value"]["widths"] == {"z": 1536, "x": 1536, "B": 128, "C": 128, "dt": 24}
    assert comps[f"{kind}.self_attn"]["facts"]["key_multiplier"]["value"] == c["key_multiplier"]
    assert comps[f"{kind}.feed_forward"]["facts"]["multipliers"]["value"] == dict(zip(("gate", "down"), c["mlp_multipliers"]))
    model = comps["model"]["facts"]
    assert model["lm_head_multiplier"]["value"] == c["lm_head_multiplier"]
    assert model["embedding_scale"]["value"] == "config_embedding_multiplier"
    ids = {i["id"]: i for i in f["preview"]["identities"]}
    assert ids["two_mixers_block_sum"]["holds"] and ids["two_mixers_block_sum"]["blocks"] == [0, 1, 2]
    assert f"{c['lm_head_multiplier']:g}" in ids["logits"]["statement"] and ids["logits"]["holds"]


def test_falcon_h1_standard_names_of_both_mixers(collected):
    f = collected("falcon_h1").facts
    hosts = {h["host"]: {v["name"]: v for v in h["values"]} for h in f["support"]["hosts"]}
    assert hosts["layers[i].self_attn"]["attention_output"]["module"] == "model.layers.{i}.self_attn"
    assert hosts["layers[i].ssm"]["ssm_output"]["module"] == "model.layers.{i}.mamba"
    assert hosts["layers[i].ssm"]["ssm_premix"]["module"] == "model.layers.{i}.mamba.out_proj"
    assert hosts["layers[i]"]["layer_mid"]["module"] == "model.layers.{i}.pre_ff_layernorm"
    for name in ("attention_output", "ssm_output", "layer_mid"):
        host = next(h for h in hosts.values() if name in h)
        assert host[name]["blocks"] == list(range(36)), name
    # no gated norm in this mixer: the scan's output and the gate are not read apart
    assert "ssm_scan_output" not in hosts["layers[i].ssm"] and "ssm_gate" not in hosts["layers[i].ssm"]


def test_falcon_h1_cost_counts_both_caches(collected):
    f, c = collected("falcon_h1").facts, released_config("falcon_h1")
    cost = f["cost"]
    (kind,) = cost["cache"]["kinds"]
    conv_channels = c["mamba_d_ssm"] + 2 * c["mamba_n_groups"] * c["mamba_d_state"]
    state = conv_channels * c["mamba_d_conv"] + c["mamba_n_heads"] * c["mamba_d_head"] * c["mamba_d_state"]
    assert kind["attention"] == "full_and_state" and kind["cap"] is None
    assert kind["values"] == 2 * c["num_key_value_heads"] * c["head_dim"] == 256
    assert kind["state"] == state == 203_776
    for check in cost["checks"]:
        assert check["formula"] == check["measured"], check
    from atlas.cost.figures import figures

    at = figures(cost, 4096)
    assert at["cache"] == c["num_hidden_layers"] * (256 * 4096 + state) * 2
    assert at["per_token"] == c["num_hidden_layers"] * 256 * 2  # the state does not grow with the context


@pytest.fixture(scope="module")
def tiny_block():
    """The preview run's block 1 as a proof part (the tiny module stands for both sizes)."""
    from atlas import families
    from atlas.model.preview import preview_run
    from atlas.proof.core import Context, Part
    from atlas.proof.prove import capture_calls

    run = preview_run("falcon_h1")
    ctx = Context(families.load("falcon_h1"), run.config, run.config, capture_calls(run.model, run.ids), run.eager, run.eager.resolution)
    ctx.block_ids["blk"] = 1
    module = run.model.model.layers[1]
    return Part("blk", "model.layers.1", module, module, ctx, 1, "hybrid")


def _with_step(chain, marker, fn):
    """The chain with the step whose TeX holds ``marker`` computing ``fn`` instead: an edit of the code under
    the same TeX (the step is no longer one expression, so its printed TeX stays as it was)."""
    steps = [dataclasses.replace(s, fn=fn, expr=None) if marker in s.tex else s for s in chain.steps]
    assert steps != chain.steps, marker
    return dataclasses.replace(chain, steps=steps)


def test_falcon_h1_wrong_block_sum_is_refused(tiny_block):
    from atlas.proof.core import reproduce
    from atlas.proof.library import chain_of

    chain = chain_of(tiny_block)
    assert reproduce(tiny_block, chain)["reproduced"]
    plain = _with_step(chain, "both mixers added at once", lambda e: e["x"] + e["ds"] + e["da"])  # multipliers left out
    result = reproduce(tiny_block, plain)
    assert not result["reproduced"] and "both mixers added at once" in result["step"]


def test_falcon_h1_wrong_part_multipliers_are_refused(tiny_block):
    from atlas.proof.core import reproduce
    from atlas.proof.library import chain_of

    mamba = tiny_block.child("mamba")
    chain = chain_of(mamba)
    assert reproduce(mamba, chain)["reproduced"]
    result = reproduce(mamba, _with_step(chain, "one constant per part", lambda e: e["p"]))  # no per-part constants
    assert not result["reproduced"]
    swapped = _with_step(chain, "one constant per part", lambda e: e["p"] * e.w("mup_vector").flatten().flip(0))  # right constants, wrong parts
    assert not reproduce(mamba, swapped)["reproduced"]


def test_falcon_h1_active_parameters_by_part(collected):
    f, c = collected("falcon_h1").facts, released_config("falcon_h1")
    rows = {r["part"]: r["values"] for r in f["cost"]["active"]["rows"]}
    d, L = c["hidden_size"], c["num_hidden_layers"]
    conv_channels = c["mamba_d_ssm"] + 2 * c["mamba_n_groups"] * c["mamba_d_state"]
    mixer = d * (c["mamba_d_ssm"] + conv_channels + c["mamba_n_heads"]) + 5 * conv_channels + 3 * c["mamba_n_heads"] + c["mamba_d_ssm"] * d
    assert rows["state-space and recurrent mixers"] == L * mixer  # the Mamba mixers are their own part, not counted as norms
    assert rows["norms"] == (2 * L + 1) * d


def test_falcon_h1_attention_in_multiplier_becomes_a_step_where_it_is_not_one():
    """The checkpoint's attention_in_multiplier is 1, so its step is left out; a model where it is 1.7
    gets the step, reproduces with it, and is refused without it."""
    import copy

    from atlas import families
    from atlas.model.preview import build_preview_model, preview_run, run_model
    from atlas.proof.core import Context, Part, reproduce
    from atlas.proof.library import chain_of
    from atlas.proof.prove import capture_calls

    family = families.load("falcon_h1")
    config = copy.deepcopy(preview_run("falcon_h1").config)
    config.attention_in_multiplier = 1.7
    run = run_model(family, build_preview_model(family, config))
    ctx = Context(family, run.config, run.config, capture_calls(run.model, run.ids), run.eager, run.eager.resolution)
    ctx.block_ids["blk"] = 0
    module = run.model.model.layers[0]
    part = Part("blk", "model.layers.0", module, module, ctx, 0, "hybrid")
    chain = chain_of(part)
    assert part.facts["mixer_multipliers"]["value"]["attention_in"] == 1.7
    assert any("attention\\_in\\_multiplier" in s.tex for s in chain.steps)
    assert reproduce(part, chain)["reproduced"]
    assert not reproduce(part, _with_step(chain, "attention\\_in\\_multiplier", lambda e: e["h"]))["reproduced"]
