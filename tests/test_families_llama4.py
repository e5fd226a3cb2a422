"""Llama 4 Scout: its parameter count derived by hand from config.json, and the steps added for it (the
dense-dispatch mixture, the weightless q/k norm, the NoPE blocks' query temperature, chunked attention)
each shown to refuse a wrong formula on the preview run.

Every expected count is written out here from the sizes in the pinned config.json (read from the file by
the test); none is copied from the facts under test. The settings the formula relies on are asserted in
the file first.
"""

from __future__ import annotations

import copy
import json

import pytest

from tests.conftest import ROOT, released_config

NAME = "llama4"


def whole_config() -> dict:
    from atlas import families

    return json.loads((ROOT / "atlas/checkpoints" / families.load(NAME).checkpoint / "config.json").read_text())


def test_llama4_text_model_total_by_hand(collected):
    f, c = collected(NAME).facts, released_config(NAME)
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    H, KV, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    E, K, F = c["num_local_experts"], c["num_experts_per_tok"], c["intermediate_size"]
    # The settings the formula relies on: no attention biases; every block a mixture (so
    # intermediate_size_mlp, the dense MLP's width, is used by no block); an untied head (the wrapper's
    # key); the q/k norm holds no weights (use_qk_norm adds no parameters).
    assert c["attention_bias"] is False
    assert c["interleave_moe_layer_step"] == 1 and c["moe_layers"] == list(range(L))
    assert whole_config()["tie_word_embeddings"] is False
    assert c["use_qk_norm"] is True and c["hidden_act"] == "silu"
    attention = d * H * hd + 2 * d * KV * hd + H * hd * d  # q, k, v, o
    router = E * d
    routed = E * 3 * d * F  # each expert's fused gate/up (d × 2F) and down (F × d)
    shared = 3 * d * F  # the shared expert: a SwiGLU of the same width
    norms = 2 * d
    block = attention + router + routed + shared + norms
    parameters = V * d + L * block + d + d * V  # embedding, blocks, final norm, head
    assert f["accounting"]["model"]["parameters"] == parameters == 107_769_861_120
    assert f["accounting"]["model"]["total"] == parameters  # no stored buffers
    # one expert a token: the other experts' weights are not active
    assert f["accounting"]["model"]["active"] == parameters - L * (E - K) * 3 * d * F


def test_llama4_vision_tower_by_hand(collected):
    """The wrapper's vision encoder and projector, counted apart: 109 B published for the whole model."""
    f, whole = collected(NAME).facts, whole_config()
    v, text = whole["vision_config"], whole["text_config"]
    dv, Iv, Lv, patch = v["hidden_size"], v["intermediate_size"], v["num_hidden_layers"], v["patch_size"]
    patches = (v["image_size"] // patch) ** 2 + 1  # the class position included
    assert v["multi_modal_projector_bias"] is False
    layer = 4 * (dv * dv + dv) + (dv * Iv + Iv) + (Iv * dv + dv) + 2 * 2 * dv  # biased attention and MLP, two LayerNorms
    adapter = Iv * v["projector_input_dim"] + v["projector_output_dim"] ** 2  # pixel-shuffle MLP, no biases
    vision = v["num_channels"] * patch * patch * dv + dv + patches * dv + 2 * 2 * dv + Lv * layer + adapter
    projector = v["vision_output_dim"] * text["hidden_size"]
    outside = {p["path"]: p["parameters"] for p in f["model"]["outside_text_model"]["parts"]}
    assert outside == {"vision_model": vision, "multi_modal_projector": projector}
    whole_model = f["accounting"]["model"]["total"] + vision + projector
    assert round(whole_model / 1e9) == 109  # the model card's "109B total parameters"
    assert round(f["accounting"]["model"]["active"] / 1e9) == 17  # "17B active"


def test_llama4_block_pattern_and_proof_facts(collected):
    f, c = collected(NAME).facts, released_config(NAME)
    flags = c["no_rope_layers"]
    kinds = {k["label"]: k["indices"] for k in f["block_kinds"]}
    assert kinds == {"rotary chunked attention block": [i for i, x in enumerate(flags) if x],
                     "no-position global block": [i for i, x in enumerate(flags) if not x]}
    comps = f["equations"]["components"]
    rotary, nope = "rotary_chunked_attention_block", "no_position_global_block"
    assert comps[f"{rotary}.self_attn"]["facts"]["rotary_layout"]["value"] == "interleaved_pairs_complex"
    assert comps[f"{rotary}.self_attn"]["facts"]["chunk"]["value"] == c["attention_chunk_size"]
    assert comps[f"{rotary}.self_attn.qk_norm"]["facts"]["norm"]["value"] == "rms"
    assert f"{nope}.self_attn.qk_norm" not in comps
    assert comps[f"{nope}.self_attn"]["facts"]["query_temperature"]["value"] == {"attn_scale": c["attn_scale"], "floor_scale": c["floor_scale"]}
    assert "query_temperature" not in comps[f"{rotary}.self_attn"]["facts"]
    assert comps[f"{rotary}.feed_forward.router"]["facts"]["routing"]["value"] == "sigmoid_top_k_dense"
    assert comps[f"{rotary}.feed_forward.experts"]["facts"]["experts"]["value"] == "gated_halves_every_expert"
    assert f["equations"]["total"]["steps"] == f["equations"]["total"]["reproduced"]
    # the preview says what it shrank: the chunks and the temperature's step
    differences = {d["what"]: d for d in f["preview"]["differences"]}
    assert differences["chunks"]["checkpoint"] == f"attention chunks of {c['attention_chunk_size']:,} positions"
    assert "query temperature" in differences


def test_llama4_cache_names_chunks_not_sliding_windows(collected):
    """The chunked blocks' cache follows the sliding rule (transformers holds them as a window of the
    chunk's length), and the words say chunk, not sliding window: Llama 4 has no sliding window."""
    f, c = collected(NAME).facts, released_config(NAME)
    cache = f["cost"]["cache"]
    chunked = [k for k in cache["kinds"] if k["kind"] == "rotary_chunked_attention_block"]
    assert [(k["attention"], k["window"], k["cap"]) for k in chunked] == [("chunked", c["attention_chunk_size"], c["attention_chunk_size"] - 1)]
    assert "chunked-attention block" in cache["words"] and "sliding" not in cache["words"]
    assert {k["attention"] for k in cache["kinds"]} == {"chunked", "full"}


def test_llama4_standard_values_of_the_dense_mixture(collected):
    f = collected(NAME).facts
    mlp = next(h for h in f["support"]["hosts"] if h["host"] == "layers[i].mlp")
    values = {v["name"]: v for v in mlp["values"]}
    assert values["router_scores"]["blocks"] == list(range(48))
    assert values["router_logits"]["read"] == {"kind": "output", "element": 1}
    assert "summed over the experts" in values["routed_output"]["read_at"]
    for name in ("expert_weights", "expert_indices", "expert_outputs"):
        assert values[name]["blocks"] == [], name
    identities = {i["id"]: i for i in f["preview"]["identities"]}
    assert identities["router_scores"]["holds"] and identities["mixture_sum"]["holds"]


# --- the new steps refuse a wrong formula --------------------------------------------------------------


@pytest.fixture(scope="module")
def parts():
    """Parts of the tiny model's first rotary block and its NoPE block, on the preview run."""
    from atlas import families
    from atlas.model.preview import preview_run
    from atlas.proof.core import Context, Part
    from atlas.proof.prove import capture_calls

    run = preview_run(NAME)
    cfg = run.config
    ctx = Context(families.load(NAME), cfg, cfg, capture_calls(run.model, run.ids), run.eager, run.eager.resolution)
    nope = list(cfg.no_rope_layers).index(0)

    def part(path, block, attention_type):
        module = run.model.get_submodule(path)
        return Part(path, path, module, module, ctx, block, attention_type)

    return {
        "mixture": part("model.layers.0.feed_forward", 0, "chunked_attention"),
        "rotary": part("model.layers.0.self_attn", 0, "chunked_attention"),
        "nope": part(f"model.layers.{nope}.self_attn", nope, "full_attention"),
    }


def _swap(chain, out, fn):
    """The chain with the step defining ``out`` computing ``fn`` instead."""
    wrong = copy.copy(chain)
    wrong.steps = [copy.copy(s) for s in chain.steps]
    step = next(s for s in wrong.steps if s.out == out)
    step.fn = fn
    return wrong


def test_dense_mixture_refuses_scaling_the_output(parts):
    from atlas.proof import mixture
    from atlas.proof.core import reproduce

    part = parts["mixture"]
    chain = mixture.mixture(part)
    assert reproduce(part, chain)["reproduced"]
    # every expert's rows unscaled, then the output scaled by the score: the usual mixture's rule
    unscaled = _swap(chain, "X", lambda e: e["xt"].repeat(e["S"].shape[1], 1))
    scaled_out = _swap(unscaled, "yr", lambda e: (e["S"].t()[:, :, None] * e["Y"].reshape(e["S"].shape[1], -1, e["Y"].shape[-1])).sum(0))
    result = reproduce(part, scaled_out)
    assert not result["reproduced"] and "routed" in result["step"]
    assert result["why"].startswith("largest error")  # it ran, and gave other numbers


def test_nope_block_refuses_queries_without_temperature(parts):
    from atlas.proof import attention
    from atlas.proof.core import reproduce

    part = parts["nope"]
    chain = attention.attention(part)
    assert reproduce(part, chain)["reproduced"]
    steps = [s for s in chain.steps if "temperature" in s.tex]
    assert len(steps) == 1
    wrong = copy.copy(chain)
    wrong.steps = [s for s in chain.steps if s is not steps[0]]
    result = reproduce(part, wrong)
    assert not result["reproduced"] and result["why"].startswith("largest error")


def test_rotary_block_refuses_a_causal_mask_without_chunks(parts):
    import torch

    from atlas.proof import attention
    from atlas.proof.core import reproduce

    part = parts["rotary"]
    chain = attention.attention(part)
    assert reproduce(part, chain)["reproduced"]
    mask = next(s for s in chain.steps if s.value == "attention_scores")
    assert "lfloor" in mask.tex
    causal = lambda e: e["S"] + torch.full(e["S"].shape[-2:], float("-inf"), dtype=torch.float64).triu(1)  # noqa: E731
    wrong = copy.copy(chain)
    wrong.steps = [s if s is not mask else type(s)(s.tex, s.out, causal, s.value) for s in chain.steps]
    result = reproduce(part, wrong)
    assert not result["reproduced"] and result["why"].startswith("largest error")


def test_weightless_norm_is_not_the_l2_norm(parts):
    from atlas.proof.core import reproduce
    from atlas.proof.kinds import kind_of
    from atlas.proof.library import weightless_norm

    part = parts["rotary"].child("qk_norm")
    assert kind_of(part) == "weightless_norm"
    chain = weightless_norm(part)
    assert part.facts["norm"]["value"] == "rms"
    assert reproduce(part, chain)["reproduced"]
    length = _swap(chain, "rho", lambda e: (e["x"] ** 2).sum(-1, keepdim=True))
    result = reproduce(part, length)
    assert not result["reproduced"] and result["why"].startswith("largest error")
