"""The preview run in float64 throughout (atlas.model.precision), and the proofs held near float64's error.

Under float32, transformers' norms, softmaxes and rotary angles rounded to about 1e-7 of each value, so
the proofs' tolerance sat at 2e-5 of the largest magnitude: a constant off by a factor of ten in a norm's
epsilon, or a router's 1e-6 in its renormalization, passed under it. These tests show that the run is
float64 to the last cast, and that such differences now stop the build.
"""

from __future__ import annotations

import pytest

from atlas.model.precision import casts_as_written, float64_run


def test_every_request_for_float32_is_answered_in_float64():
    import torch

    whole = torch.arange(3)
    with float64_run():
        assert torch.zeros(2, dtype=torch.float32).dtype == torch.float64
        assert torch.ones(2).dtype == torch.float64  # made without a dtype
        assert whole.dtype == torch.int64 and torch.arange(3).dtype == torch.int64  # integers stay integers
        assert whole.float().dtype == torch.float64
        assert whole.to(torch.float32).dtype == torch.float64
        assert whole.to(dtype=torch.float32).dtype == torch.float64
        assert whole.type(torch.float32).dtype == torch.float64
        assert torch.softmax(torch.ones(3), -1, dtype=torch.float32).dtype == torch.float64
        # a narrower dtype is a rounding a model means (RecurrentGemma's bfloat16 scale): kept
        assert whole.to(torch.bfloat16).dtype == torch.bfloat16
        with casts_as_written():  # the model's own casts, as a note measures them
            assert whole.float().dtype == torch.float32
        assert whole.float().dtype == torch.float64
    assert torch.ones(2).dtype == torch.float32 and whole.float().dtype == torch.float32  # all as it was after


def test_a_grouped_product_in_float64_is_each_experts_rows_times_its_own_matrix():
    """torch's grouped product has no float64 kernel; the run's own is each expert's rows (sorted by
    expert, ``offs`` where each expert's rows end) times that expert's matrix."""
    import torch

    g = torch.Generator().manual_seed(0)
    rows = torch.randn(6, 3, generator=g, dtype=torch.float64)
    weights = torch.randn(3, 3, 4, generator=g, dtype=torch.float64)
    ends = torch.tensor([2, 2, 6], dtype=torch.int32)  # expert 1 gets no rows
    with float64_run():
        got = torch._grouped_mm(rows, weights, offs=ends)
    by_hand = torch.cat([rows[0:2] @ weights[0], rows[2:6] @ weights[2]])
    assert got.dtype == torch.float64 and torch.allclose(got, by_hand, rtol=0, atol=1e-15)


def test_the_preview_model_is_float64_with_the_seeded_float32_weights_and_float64_frequencies():
    import torch

    from atlas.model import preview

    run = preview.preview_run("qwen3_0_6b")
    parameters = list(run.model.parameters())
    assert {p.dtype for p in parameters} == {torch.float64}
    # the weights were drawn at float32 and widened exactly: each is a float32 number
    assert all(torch.equal(p, p.float().double()) for p in parameters)
    # the rotary frequencies were computed in float64, not widened from their float32 rounding
    rotary = run.model.model.rotary_emb
    config = run.config
    head_dim = config.head_dim
    exact = 1.0 / config.rope_parameters["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    assert rotary.inv_freq.dtype == torch.float64
    assert torch.allclose(rotary.inv_freq, exact, rtol=1e-15, atol=0)
    assert not torch.equal(exact.float().double(), exact)  # so float32 would have shown here
    # what the run captured is float64, the attention's softmax (dtype=torch.float32 in its code) included
    probabilities = run.eager.layers[0].self_attn.attention_probabilities
    assert probabilities.dtype == torch.float64
    assert float((probabilities.sum(-1) - 1).abs().max()) < 1e-14


@pytest.mark.parametrize("name", ["qwen3_0_6b", "gpt_oss", "mamba2", "deepseek_v4"])
def test_every_proof_and_identity_is_held_near_float64s_error(collected, name):
    facts = collected(name).facts
    for pid, component in facts["equations"]["components"].items():
        proof = component["proof"]
        # 1e-9 of the largest magnitude compared, or of 1 where every value is smaller (0: integers, compared exactly)
        assert proof["tolerance"] == 0 or 1e-9 <= proof["tolerance"] < 1e-5, (pid, proof)
        assert proof["error"] <= proof["tolerance"], (pid, proof)
    identities = [i for i in facts["preview"]["identities"] if i.get("max_abs_residual") is not None]
    assert identities and all(i["tolerance"] == 1e-9 and i["max_abs_residual"] < 1e-12 for i in identities)
    assert "It runs in float64 throughout" in facts["preview"]["description"]


def test_a_norms_epsilon_off_by_ten_now_stops_the_build(monkeypatch):
    """Qwen3's RMSNorm divides by sqrt(mean(x^2) + 1e-6). Printed and run with 1e-5 instead, the query norm's
    output (largest magnitude about 2.9) moves by 2.6e-5: under the 5.8e-5 that the float32 tolerance (2e-5 of
    the largest magnitude) allowed, ten thousand times the float64 one."""
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import library

    right = library._eps
    monkeypatch.setattr(library, "_eps", lambda module: right(module) * 10)
    # the first norm the proof meets is the query's per-head norm
    with pytest.raises(AtlasError, match=r"component transformer_block\.self_attn\.q_norm: step .* does not reproduce .*"
                                         r"norm: no variant reproduces the module"):
        collect("qwen3_0_6b")


def test_lfm2_moes_router_divides_by_its_sum_plus_its_epsilon(collected):
    """LFM2-MoE's router writes `sum + 1e-6` into its forward. In float32 the plain sum reproduced it and the
    page said the weights sum to one; in float64 only the division that adds 10^-6 does."""
    facts = collected("lfm2_moe").facts
    eq = facts["equations"]
    routers = [pid for pid, kind in eq["kinds"].items() if kind == "router" and pid in eq["components"]]
    assert routers
    for pid in routers:
        router = eq["components"][pid]
        routing = router["facts"]["routing"]
        assert routing["value"] == "sigmoid_renormalized_epsilon"
        assert "sigmoid_renormalized," in routing["how"]  # the plain renormalization was run and diverged
        assert r"G\leftarrow G/(\textstyle\sum_{j}G_{j}+10^{-6})" in [s["tex"] for s in router["steps"]]
    skipped = {i["id"]: i["why"] for i in facts["preview"]["not_applicable"]}
    assert "sum plus 10⁻⁶" in skipped["expert_weights_sum"]


def test_a_renormalization_epsilon_of_another_size_is_no_variant_and_stops_the_build(monkeypatch):
    from atlas.errors import AtlasError
    from atlas.facts.collect import collect
    from atlas.proof import router

    monkeypatch.setattr(router, "RENORMALIZATION_EPSILON", 3e-6)
    with pytest.raises(AtlasError, match=r"gate.*no variant|no variant.*gate|does not reproduce"):
        collect("lfm2_moe")
