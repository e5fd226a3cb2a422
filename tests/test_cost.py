"""What it costs to run: the cost figures against hand derivations from config.json, and the build
failing when a cost rule is broken on purpose."""

from __future__ import annotations

import pytest

from atlas.cost import figures as cost
from atlas.cost import weights
from atlas.build import publish
from tests.conftest import ROOT, released_config, run_build


def bf16(facts, context, batch=1):
    return cost.figures(facts["cost"], context, batch, "BF16")


@pytest.mark.parametrize("name", ["kimi_k2", "deepseek_v3"])
def test_latent_cache_is_the_latent_without_a_factor_of_two(collected, name):
    c = released_config(name)
    facts = collected(name).facts
    # 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 bytes = 70,272 bytes per position
    per_position = c["num_hidden_layers"] * (c["kv_lora_rank"] + c["qk_rope_head_dim"]) * 2
    assert per_position == 70_272
    assert bf16(facts, 4096)["per_token"] == per_position
    assert bf16(facts, 4096, batch=3)["cache"] == per_position * 4096 * 3
    # what a cache of expanded heads would hold instead: per-head keys (nope + rope) and values
    heads = c["num_attention_heads"]
    expanded = c["num_hidden_layers"] * heads * (c["qk_nope_head_dim"] + c["qk_rope_head_dim"] + c["v_head_dim"]) * 2
    assert bf16(facts, 4096)["expanded_per_token"] == expanded
    assert facts["cost"]["cache"]["latent"] is True


def test_gpt2_cache_flops_and_weights_by_hand(collected):
    c = released_config("gpt2")
    facts = collected("gpt2").facts
    layers, width, vocab, inner = c["n_layer"], c["n_embd"], c["vocab_size"], 4 * c["n_embd"]
    head_dim = width // c["n_head"]
    assert bf16(facts, 1024)["per_token"] == layers * 2 * width * 2 == 36_864
    # the matrices a token meets in a block: c_attn (width → 3 width), c_proj, c_fc (width → 4 width), c_proj back
    block_matrices = width * 3 * width + width * width + 2 * width * inner
    context = 700
    attention = 2 * c["n_head"] * context * (head_dim + head_dim)  # scores against each key, and its value back
    expected = layers * (2 * block_matrices + attention) + 2 * vocab * width
    assert bf16(facts, context)["flops"] == expected
    total = facts["accounting"]["model"]["total"]
    assert facts["cost"]["weights"][1]["bytes"] == 2 * total  # BF16
    # FP8: the block matrices at one byte with an F32 scale per 128 × 128 block, the rest at two bytes
    shapes = [(width, 3 * width), (width, width), (width, inner), (inner, width)]
    fp8 = layers * sum(r * k + 4 * -(-r // 128) * -(-k // 128) for r, k in shapes)
    matrices = layers * sum(r * k for r, k in shapes)
    assert facts["cost"]["weights"][2]["bytes"] == fp8 + 2 * (total - matrices)


def test_sliding_window_layers_hold_at_most_their_window(collected):
    c = released_config("mistral")
    facts = collected("mistral").facts
    window = c["sliding_window"]
    per_position = c["num_hidden_layers"] * 2 * c["num_key_value_heads"] * (c["hidden_size"] // c["num_attention_heads"]) * 2
    assert bf16(facts, 1024)["cache"] == per_position * 1024
    # transformers keeps the window less the token being added between steps
    assert bf16(facts, 32768)["cache"] == per_position * (window - 1)
    flops_long, flops_longer = bf16(facts, 32768)["flops"], bf16(facts, 65536)["flops"]
    assert flops_long == flops_longer  # attention stops growing past the window


def test_gemma3_mixes_capped_and_full_layers(collected):
    c = released_config("gemma3")
    facts = collected("gemma3").facts
    kinds = {k["attention"]: k for k in facts["cost"]["cache"]["kinds"]}
    # every sliding_window_pattern-th layer attends globally, the others within the window
    full = sum(1 for i in range(c["num_hidden_layers"]) if (i + 1) % c["sliding_window_pattern"] == 0)
    sliding = c["num_hidden_layers"] - full
    per_layer = 2 * c["num_key_value_heads"] * c["head_dim"]  # head_dim from the config, not hidden / heads
    assert c["head_dim"] != c["hidden_size"] // c["num_attention_heads"]
    assert kinds["sliding"]["count"] == sliding and kinds["full"]["count"] == full
    context = 8192
    expected = (sliding * per_layer * (c["sliding_window"] - 1) + full * per_layer * context) * 2
    assert bf16(facts, context)["cache"] == expected


@pytest.mark.parametrize("name", ["gpt2", "kimi_k2", "gpt_oss"])
def test_every_rule_equals_the_preview_run(collected, name):
    checks = collected(name).facts["cost"]["checks"]
    assert {c["figure"] for c in checks} >= {"KV cache of block 0", "FLOPs of block 0", "FLOPs of the head", "active parameters"}
    for c in checks:
        assert c["formula"] == c["measured"], c


def test_active_parameters_of_kimi_k2_by_hand(kimi):
    c = released_config("kimi_k2")
    active = kimi["cost"]["active"]
    moe_blocks = c["num_hidden_layers"] - c["first_k_dense_replace"]
    routed_per_expert = 3 * c["hidden_size"] * c["moe_intermediate_size"]
    assert active["routed_all"] == moe_blocks * c["n_routed_experts"] * routed_per_expert
    routed = next(r["values"] for r in active["rows"] if r["part"] == "routed experts (top-k share)")
    assert routed == moe_blocks * c["num_experts_per_tok"] * routed_per_expert
    assert active["total"] - active["without_embeddings"] == c["vocab_size"] * c["hidden_size"]


def test_the_fp8_formula_gives_the_bytes_kimi_k2_files_store(collected):
    """The FP8 rule, applied to every matrix the pinned FP8 files store, gives their bytes with scales."""
    got = collected("kimi_k2")
    pairs = weights.stored_pairs(got.layout, "F8_E4M3")
    assert len(pairs) > 60_000
    assert weights.scale_mismatches(got.layout) == []


def test_a_broken_cache_rule_fails_the_build(project_copy, tmp_path):
    """A factor of two slipped into the cache rule: the preview run's cache disagrees, the build stops
    with one line naming the family and the figure, and the site is untouched."""
    path = project_copy / "atlas" / "cost" / "coefficients.py"
    text = path.read_text()
    broken = text.replace("return kv_heads * (key_dim + value_dim)", "return 2 * kv_heads * (key_dim + value_dim)")
    assert broken != text
    path.write_text(broken)
    out = tmp_path / "site"
    out.mkdir()
    (out / "keep.txt").write_text("previous site")
    (out / publish.MARKER).write_text(publish.MARKER_TEXT)  # a site, so the build may replace it
    result = run_build(project_copy, "--family", "gpt2", "--out", str(out))
    assert result.returncode == 1
    lines = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert lines == [lines[0]] and "gpt2: cost figure KV cache of block 0" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert sorted(p.name for p in out.iterdir()) == [publish.MARKER, "keep.txt"]


def test_a_broken_flops_rule_fails_the_build(project_copy, tmp_path):
    path = project_copy / "atlas" / "cost" / "coefficients.py"
    text = path.read_text()
    broken = text.replace("return 2 * heads * (key_dim + value_dim)", "return 2 * heads * key_dim")
    assert broken != text
    path.write_text(broken)
    result = run_build(project_copy, "--family", "gpt2", "--out", str(tmp_path / "site"))
    assert result.returncode == 1
    assert "gpt2: cost figure FLOPs of block 0" in result.stderr and "Traceback" not in result.stderr


def test_bytes_are_written_in_the_binary_unit_they_reach():
    """Worked by hand: under 1 KiB no unit; 2,498,560 / 1024² = 2.3828 MiB; 70,272 / 1024 = 68.625 KiB,
    a half, rounded up (as static/cost.js rounds it); 5 × 1024³ = 5.00 GiB."""
    from atlas.numbers import binary_size

    assert binary_size(1023) == ""
    assert binary_size(1024) == "1.00 KiB"
    assert binary_size(2_498_560) == "2.38 MiB"
    assert binary_size(70_272) == "68.63 KiB"
    assert binary_size(5 * 1024 ** 3) == "5.00 GiB"
