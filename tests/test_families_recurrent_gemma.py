"""RecurrentGemma (recurrentgemma-2b) against a hand derivation from its config.json, and the RG-LRU's steps.

The total below is derived here from the sizes config.json names, through formulas written out by hand
for each kind of block (Griffin's recurrent block: three linear maps with biases, a depthwise
convolution with a bias, the RG-LRU's decay vector and two block-diagonal gates with biases; local
multi-query attention with a biased output projection; a gated MLP with biases whose projections are
each half of intermediate_size), none copied from the facts under test. The settings the formula relies
on are asserted first. The RG-LRU's chain is then run on a module of its own, and wrong recurrences must
fail it.
"""

from __future__ import annotations

import pytest

from tests.conftest import released_config
from tests.test_families import BYTES, model_total, stored


def recurrent_mixer(d, width, heads, kernel):
    """linear_x, linear_y (d -> width) and linear_out (width -> d), each with a bias; the depthwise
    convolution over width channels, kernel taps and a bias each; the RG-LRU: its decay vector (width),
    the input and recurrence gates' block-diagonal weights (heads blocks of (width/heads)²) and biases."""
    block = width // heads
    linears = 2 * (d * width + width) + (width * d + d)
    conv = width * kernel + width
    rg_lru = width + 2 * (heads * block * block + heads * block)
    return linears + conv + rg_lru


def local_mqa(d, heads, kv_heads, head_dim):
    """q, k, v without biases; o with its bias (RecurrentGemmaAttention builds o_proj with bias=True)."""
    return d * heads * head_dim + 2 * d * kv_heads * head_dim + heads * head_dim * d + d


def gated_mlp_with_biases(d, inner):
    return 2 * (d * inner + inner) + (inner * d + d)


def test_recurrent_gemma(collected):
    f, c = collected("recurrent_gemma").facts, released_config("recurrent_gemma")
    d, V, L = c["hidden_size"], c["vocab_size"], c["num_hidden_layers"]
    H, KV, hd, W, K = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], c["lru_width"], c["conv1d_width"]
    # the settings the formula relies on
    assert "tie_word_embeddings" not in c  # RecurrentGemmaConfig ties the head by default: only the embedding is counted
    assert not c["attention_bias"] and hd * H == d and W % H == 0 and KV == 1
    pattern = c["_block_types"]
    assert pattern == ["recurrent", "recurrent", "attention"]
    kinds = [pattern[i % len(pattern)] for i in range(L)]
    recurrent, attention = kinds.count("recurrent"), kinds.count("attention")
    assert (recurrent, attention) == (18, 8)
    inner = c["intermediate_size"] // 2  # the gate and up projections are each half of intermediate_size
    norms = 2 * d  # temporal_pre_norm and channel_pre_norm
    mlp = gated_mlp_with_biases(d, inner)
    total = (V * d  # the embedding (the head is tied to it)
             + recurrent * (recurrent_mixer(d, W, H, K) + mlp + norms)
             + attention * (local_mqa(d, H, KV, hd) + mlp + norms)
             + d)  # the final norm
    assert total == 2_682_862_080  # the same sum, worked out by hand: 0.655 B of embedding, 2.03 B in the blocks
    assert f["accounting"]["model"]["parameters"] == model_total(f) == stored(f)["weight_parameters"] == total
    assert stored(f)["payload_bytes"] == total * BYTES[c["torch_dtype"]]
    labels = {k["label"]: k["indices"] for k in f["block_kinds"]}
    assert labels == {"recurrent block": [i for i, k in enumerate(kinds) if k == "recurrent"],
                      "attention block": [i for i, k in enumerate(kinds) if k == "attention"]}
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]


def test_recurrent_gemma_steps_and_kinds(collected):
    f, c = collected("recurrent_gemma").facts, released_config("recurrent_gemma")
    kinds = f["equations"]["kinds"]
    assert kinds["recurrent_block.temporal_block"] == "recurrent_block"
    assert kinds["recurrent_block.temporal_block.rg_lru"] == "rg_lru"
    assert kinds["attention_block.temporal_block.rotary_emb"] == "rotary"
    eq = f["equations"]["components"]
    unit = eq["recurrent_block.temporal_block.rg_lru"]
    claimed = {v for s in unit["steps"] for v in s["values"]}
    assert claimed == {"rglru_input_gate", "rglru_recurrence_gate", "rglru_state"}
    assert unit["facts"]["decay_constant"]["value"] == 8.0
    assert unit["facts"]["state"]["value"] == {"channels": c["lru_width"], "heads": c["num_attention_heads"],
                                                "block": c["lru_width"] // c["num_attention_heads"]}
    block = eq["recurrent_block.temporal_block"]
    assert {v for s in block["steps"] for v in s["values"]} >= {"rglru_gate_branch", "rglru_input", "rglru_state", "ssm_premix", "ssm_output"}
    model = eq["model"]["facts"]
    # the embedding scale is sqrt(2560) = 50.596 rounded to bfloat16, measured: the exact root does not reproduce the run
    assert model["embedding_scale"]["value"] == "sqrt_width_bfloat16" and model["embedding_scale"]["how"].startswith("measured: the only")
    assert model["embedding_scale_value"]["value"] == 50.5
    assert model["logit_softcap"]["value"] == c["logits_soft_cap"]
    attention = eq["attention_block.temporal_block"]["facts"]
    assert attention["window"]["value"] == c["attention_window_size"]
    assert attention["positions"]["how"] == "the module computes cos and sin from the positions"
    assert eq["attention_block.temporal_block.rotary_emb"]["facts"]["rotary"]["value"] == {
        "base": c["rope_theta"], "rotated_dims": int(c["head_dim"] * c["partial_rotary_factor"])}


def test_recurrent_gemma_standard_names(collected):
    f, c = collected("recurrent_gemma").facts, released_config("recurrent_gemma")
    hosts = {h["host"]: {v["name"]: v for v in h["values"]} for h in f["support"]["hosts"]}
    recurrent = [k["indices"] for k in f["block_kinds"] if k["label"] == "recurrent block"][0]
    for name in ("rglru_input", "rglru_input_gate", "rglru_recurrence_gate", "rglru_state", "rglru_gate_branch", "ssm_output"):
        value = hosts["layers[i].ssm"][name]
        assert value["shape"] == ["batch", "seq", c["lru_width"] if name != "ssm_output" else c["hidden_size"]]
        assert value["blocks"] == recurrent and value["condition"] == "recurrent blocks only"
    assert hosts["layers[i].ssm"]["rglru_input_gate"]["read_at"].endswith("sigmoid number 1 (the input gate)")
    assert hosts["layers[i].ssm"]["rglru_recurrence_gate"]["read_at"].endswith("sigmoid number 2 (the recurrence gate)")
    assert "ssm_projections" not in hosts["layers[i].ssm"]  # no single input projection: not listed
    assert hosts["layers[i].mlp"]["mlp_neurons"]["shape"][-1] == c["intermediate_size"] // 2


def test_rg_lru_values_are_captured_on_the_preview_run():
    import torch

    from atlas.model.preview import preview_run

    run = preview_run("recurrent_gemma")
    t, config = run.eager, run.config
    T = run.ids.shape[1]
    i = config.layers_block_type.index("linear_attention")
    j = config.layers_block_type.index("sliding_attention")
    mixer = t.layers[i].ssm
    for name in ("rglru_input", "rglru_input_gate", "rglru_recurrence_gate", "rglru_state", "rglru_gate_branch"):
        assert tuple(getattr(mixer, name).shape) == (1, T, config.lru_width)
    for gate in (mixer.rglru_input_gate, mixer.rglru_recurrence_gate):
        assert bool(((gate > 0) & (gate < 1)).all())
    assert not torch.allclose(mixer.rglru_input_gate, mixer.rglru_recurrence_gate)  # two different sigmoids, in order
    assert not t.has("rglru_state", j)  # an attention block has no RG-LRU
    assert "no state-space mixer" in t.resolution.at("rglru_state", j).missing


# --- the RG-LRU's chain on a module of its own: it reproduces, and wrong recurrences are refused ------------


@pytest.fixture(scope="module")
def unit_part():
    import torch
    from transformers import RecurrentGemmaConfig
    from transformers.models.recurrent_gemma.modeling_recurrent_gemma import RecurrentGemmaRglru

    from atlas.model.precision import float64_run
    from atlas.proof.core import Call, Context, Part

    config = RecurrentGemmaConfig(hidden_size=24, lru_width=24, num_attention_heads=3, num_hidden_layers=3)
    torch.manual_seed(0)
    with torch.no_grad(), float64_run():  # as the preview run's modules: float64 throughout
        unit = RecurrentGemmaRglru(config).eval()
        for p in unit.parameters():
            p.copy_(torch.randn(p.shape) * (0.5 if p.dim() > 1 else 1.0))
        x = torch.randn(2, 7, 24)
        positions = torch.arange(7)[None].expand(2, 7)
        out = unit(x, positions)

    class Family:
        name = "test"

    ctx = Context(Family(), config, config, {"": Call((x, positions), {}, out)}, None, None)
    return Part("unit", "", unit, unit, ctx)


def test_rg_lru_chain_reproduces_its_module(unit_part):
    from atlas.proof.kinds import kind_of
    from atlas.proof.library import chain_of
    from atlas.proof.core import reproduce

    assert kind_of(unit_part) == "rg_lru"
    chain = chain_of(unit_part)
    result = reproduce(unit_part, chain)
    assert result["reproduced"], result
    assert result["error"] < 1e-5


@pytest.mark.parametrize("wrong", ["no_normalization", "decay_constant_one", "no_reset", "gates_swapped"])
def test_rg_lru_chain_refuses_a_wrong_recurrence(unit_part, wrong):
    import torch

    from atlas.proof.core import reproduce
    from atlas.proof.library import chain_of
    from atlas.proof.steps import Step

    chain = chain_of(unit_part)
    steps = list(chain.steps)
    at = {s.out if isinstance(s.out, str) else s.out[0]: n for n, s in enumerate(steps)}
    if wrong == "no_normalization":  # h_t = a h_(t-1) + i x: without the sqrt(1 - a²) factor
        steps[at["beta"]] = Step("wrong", "beta", lambda e: torch.ones_like(e["a"]))
    elif wrong == "decay_constant_one":  # a = sigmoid(-Λ)^r instead of ^(8 r)
        steps[at["log_a"]] = Step("wrong", ("log_a", "a"), lambda e: (
            -e["r"] * torch.nn.functional.softplus(e.w("recurrent_param")),
            torch.exp(-e["r"] * torch.nn.functional.softplus(e.w("recurrent_param")))))
    elif wrong == "no_reset":  # the first position scaled like the others
        steps[at["beta"]] = Step("wrong", "beta", lambda e: torch.sqrt(1 - e["a"] ** 2))
    else:  # the input gate computed with the recurrence gate's weights
        swapped = steps[at["r"]].fn
        steps[at["i"]] = Step("wrong", "i", swapped)
    broken = type(chain)(steps, chain.inputs, chain.output)
    assert not reproduce(unit_part, broken)["reproduced"]


def test_rg_lru_structure_is_told_apart():
    import torch
    from transformers import RecurrentGemmaConfig
    from transformers.models.recurrent_gemma.modeling_recurrent_gemma import RecurrentGemmaRecurrentBlock, RecurrentGemmaRglru

    from atlas.model.structure import is_linear_attention, is_recurrent_block, is_rg_lru, is_short_conv, is_ssm

    config = RecurrentGemmaConfig(hidden_size=24, lru_width=24, num_attention_heads=3, num_hidden_layers=3)
    unit, block = RecurrentGemmaRglru(config), RecurrentGemmaRecurrentBlock(config, 0)
    assert is_rg_lru(unit) and not is_rg_lru(block) and not is_rg_lru(torch.nn.Linear(4, 4))
    assert is_recurrent_block(block) and not is_recurrent_block(unit)
    assert not is_ssm(block) and not is_short_conv(block)
    assert is_linear_attention(block)  # it holds a convolution too: kinds.py must ask is_recurrent_block first


def test_recurrent_gemma_cost(collected):
    f, c = collected("recurrent_gemma").facts, released_config("recurrent_gemma")
    W, K = c["lru_width"], c["conv1d_width"]
    by_label = {k["label"]: k for k in f["cost"]["cache"]["kinds"]}
    recurrent = by_label["recurrent block"]
    # the convolution's last K - 1 inputs of every channel, and one state number a channel
    assert recurrent["attention"] == "recurrent" and recurrent["cap"] == 1
    assert recurrent["values"] == W * (K - 1) + W == 10_240
    attention = by_label["attention block"]
    assert attention["attention"] == "sliding" and attention["window"] == c["attention_window_size"]
    assert attention["values"] == 2 * c["num_key_value_heads"] * c["head_dim"] and attention["cap"] == c["attention_window_size"] - 1
    flops = {k["label"]: k for k in f["cost"]["flops"]["kinds"]}
    d, H, inner = c["hidden_size"], c["num_attention_heads"], c["intermediate_size"] // 2
    gates = 2 * H * (W // H) ** 2  # the two block-diagonal gate weights, one product per head
    assert flops["recurrent block"]["fixed"] == 2 * (3 * d * W + gates + 3 * d * inner)
    assert flops["recurrent block"]["per_key"] == 0
    for check in f["cost"]["checks"]:
        assert check["formula"] == check["measured"], check
    active = {r["part"]: r["values"] for r in f["cost"]["active"]["rows"]}
    d, L = c["hidden_size"], c["num_hidden_layers"]
    assert active["state-space and recurrent mixers"] == 18 * recurrent_mixer(d, W, H, K)
    assert active["norms"] == 2 * L * d + d  # the blocks' two norms and the final norm, nothing else
    from atlas.cost.figures import figures

    at = figures(f["cost"], 8192)
    # only the attention blocks' keys and values grow with the context
    assert at["per_token"] == 8 * attention["values"] * 2
