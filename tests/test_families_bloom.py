"""BLOOM: ALiBi in place of position embeddings, a norm on the embeddings, sublayers that add the stream.

The total is derived here by hand from the sizes BLOOM's config.json names (read from the file by the
test, through a formula written out below); no expected figure is copied from the facts under test.
The settings the formula relies on are asserted in the file first. The ALiBi slopes are checked against
numbers worked out here and against transformers' own helper, and declaring the wrong form of the bias,
or the wrong stream for the sublayers to add, fails the build naming the step.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from atlas.proof.positions import alibi_slopes
from tests.conftest import released_config, run_build


def layernorm(d):
    return 2 * d  # gain and bias


def test_bloom_total_by_hand(collected):
    f, c = collected("bloom").facts, released_config("bloom")
    # BLOOM's raw file names the width n_embed and the depth n_layer (BloomConfig maps them).
    V, d, L, H = c["vocab_size"], c["n_embed"], c["n_layer"], c["num_attention_heads"]
    assert d % H == 0 and "tie_word_embeddings" not in c  # BloomConfig ties the head by default
    # BloomConfig has no MLP width: BloomMLP is four times the width, by its code.
    assert not any(k in c for k in ("intermediate_size", "n_inner", "ffn_hidden_size"))
    attention = d * 3 * d + 3 * d + d * d + d  # fused query_key_value and dense, both with biases
    mlp = d * 4 * d + 4 * d + 4 * d * d + d  # dense_h_to_4h and dense_4h_to_h, both with biases
    block = layernorm(d) + attention + layernorm(d) + mlp  # input_layernorm, post_attention_layernorm
    # word_embeddings (also the head), word_embeddings_layernorm, the blocks, ln_f
    total = V * d + layernorm(d) + L * block + layernorm(d)
    assert f["accounting"]["model"]["parameters"] == total
    assert f["accounting"]["model"]["total"] == total
    # The model card's "559M parameters": 559,214,592 rounds to it.
    assert round(total / 1e6) == 559
    stored = f["checkpoint_check"]["predicted"]
    assert stored["weight_parameters"] == total  # the tied head is stored once, no buffers
    assert stored["bytes_by_dtype"] == {"F16": 2 * total}
    # embedding, its norm, final norm; per block 2 norms, 2 + 2 attention tensors, 2 + 2 MLP tensors
    assert stored["tensors"] == 1 + 2 + 2 + L * (4 + 4 + 4)
    # the cache: keys and values of every head, nothing for ALiBi's bias
    cache = f["cost"]["cache"]["kinds"][0]
    assert cache["values"] == 2 * H * (d // H) and cache["count"] == L and "ALiBi" in cache["formula"]


def test_alibi_slopes_by_hand():
    # 16 heads, BLOOM-560m's: 2^(-8h/16) = 2^(-h/2)
    assert alibi_slopes(16) == pytest.approx([2 ** (-h / 2) for h in range(1, 17)])
    assert alibi_slopes(8) == pytest.approx([2 ** -h for h in range(1, 9)])
    # 12 heads: the 8-head sequence, then the odd steps of the 16-head one
    assert alibi_slopes(12) == pytest.approx([2 ** -h for h in range(1, 9)] + [2 ** -0.5, 2 ** -1.5, 2 ** -2.5, 2 ** -3.5])


@pytest.mark.parametrize("heads", [1, 2, 3, 4, 5, 6, 7, 12, 16, 24, 32, 40, 112])
def test_alibi_slopes_agree_with_transformers(heads):
    import torch
    from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

    expected = _get_alibi_slopes(heads, torch.device("cpu")).tolist()
    assert alibi_slopes(heads) == pytest.approx(expected, rel=1e-6)


def test_bloom_attention_is_proven_with_alibi(collected):
    f, c = collected("bloom").facts, released_config("bloom")
    H = c["num_attention_heads"]
    eq = f["equations"]["components"]
    attention = eq["transformer_block.self_attention"]
    facts = {k: v["value"] for k, v in attention["facts"].items()}
    assert facts["positions"].startswith("ALiBi")
    assert facts["alibi_bias"] == "key_position" and attention["facts"]["alibi_bias"]["how"].startswith("measured")
    assert facts["alibi_slopes"] == pytest.approx([2 ** (-8 * h / H) for h in range(1, H + 1)])
    assert facts["qkv_layout"] == "per_head" and facts["adds_residual"] is True
    bias = [s for s in attention["steps"] if "m_h" in s["tex"]]
    assert len(bias) == 1 and "2^{-h/2}" in bias[0]["tex"] and "h=1..16" in bias[0]["tex"]
    # the scores the run recorded (bias and mask included) are among what the proof compared
    assert any("attention_scores" in s["values"] for s in attention["steps"])
    assert attention["proof"]["error"] <= attention["proof"]["tolerance"]
    # the sublayers add the stream: the attention's and the MLP's last step adds the residual r
    assert attention["steps"][-1]["tex"].startswith("y=r+")
    assert eq["transformer_block.mlp"]["steps"][-1]["tex"].startswith("y=r+")
    block = {k: v["value"] for k, v in eq["transformer_block"]["facts"].items()}
    assert block["residual"] == "handed_input"  # apply_residual_connection_post_layernorm is false
    assert c["apply_residual_connection_post_layernorm"] is False
    # the embedding norm sits between the lookup and block 0
    model_steps = [s["tex"] for s in eq["model"]["steps"]]
    assert any(r"\operatorname{Norm}_{\mathrm{emb}}" in t for t in model_steps)
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]


def test_bloom_standard_values(collected):
    f = collected("bloom").facts
    values = {v["name"]: v for h in f["support"]["hosts"] for v in h["values"]}
    # the contributions are read at the last projections, not at the sublayers' outputs (the stream)
    assert "dense" in values["attention_output"]["read_at"]
    assert "dense_4h_to_h" in values["mlp_output"]["read_at"]
    assert "word_embeddings_layernorm" in values["embedding_norm_output"]["read_at"]
    identities = {i["id"]: i for i in f["preview"]["identities"]}
    assert identities["block_sum"]["holds"] and identities["attention_add"]["holds"]
    assert identities["embeddings"]["statement"] == "embedding_norm_output == layers[0].input"
    assert identities["embeddings"]["holds"] and identities["attention_softmax"]["holds"]


@pytest.mark.parametrize("equations, component, step", [
    # the paper's form of the bias gives the same softmax but not the scores BLOOM computes: the step
    # that fails is the one the recorded scores are compared at
    ({"*.self_attention": {"alibi_bias": "minus_distance"}}, "transformer_block.self_attention", "alibi_bias = minus_distance"),
    # the normed stream handed to the sublayers (apply_residual_connection_post_layernorm) is not BLOOM-560m's
    ({"transformer_block": {"residual": "handed_normed"}}, "transformer_block", "residual = handed_normed"),
])
def test_a_wrong_alibi_or_residual_fails_the_build(project_copy, equations, component, step):
    (project_copy / "atlas/families/scratch.py").write_text(textwrap.dedent(f'''\
        """A scratch copy of BLOOM that declares some of its steps."""

        from atlas.families.bloom import FAMILY as SIBLING

        FAMILY = SIBLING.but(title="Scratch BLOOM", equations={json.loads(json.dumps(equations))!r})
        '''))
    (project_copy / "atlas/families/scratch.md").write_text("Notes of a scratch family.\n")
    result = run_build(project_copy, "--family", "scratch", "--out", str(project_copy / "site"))
    assert result.returncode == 1, result.stderr
    error = result.stderr.strip().splitlines()[0]
    assert error.startswith("error: family scratch: component "), result.stderr
    assert f"component {component}:" in error
    assert "does not reproduce the module on the preview run" in error
    assert step in error, error


def test_the_gelu_is_cited_through_the_autograd_function_it_applies(collected):
    """BloomGelu's forward runs GeLUFunction.apply(x), whose forward calls bloom_gelu_forward, where the
    tanh is: each link of that chain is a pinned excerpt, cited for the call it makes."""
    from atlas.render import pages

    f = collected("bloom").facts
    assert {"forward", "GeLUFunction_forward", "bloom_gelu_forward"} <= set(f["excerpts"]["BloomGelu"])
    node = pages.site(f)["nodes"]["transformer_block.mlp.gelu_impl"]
    direct = {e["part"]: e["contains"] for e in node["evidence"] if e["direct"] and e["part"] != "__init__"}
    assert "GeLUFunction.apply(" in direct["forward"]
    assert "bloom_gelu_forward(" in direct["GeLUFunction_forward"]
    assert "tanh" in direct["bloom_gelu_forward"]
    for e in node["evidence"]:
        code = [line.split("#")[0] for line in e["text"].splitlines()]
        assert all(any(t in line for line in code) for t in e["contains"]), (e["part"], e["contains"])
