"""The preview run's description is written from its own values against the checkpoint's."""

from __future__ import annotations

from atlas.model import tiny


def by_what(entries):
    return {e["what"]: e for e in entries}


def test_kimi_k2_routes_top_2_of_its_own_expert_count_against_top_8_of_384(collected):
    facts = collected("kimi_k2").facts
    raw, pv = facts["config"]["raw"], facts["preview"]
    k, experts = raw["num_experts_per_tok"], raw["n_routed_experts"]  # 8 of 384 in Kimi-K2-Instruct's config.json
    # The rule in atlas/model/tiny.py: TINY_TOP_K experts per token, the pinned share of experts kept: 2 × 384 / 8.
    tiny_experts = tiny.TINY_TOP_K * experts // k
    assert tiny_experts * k == tiny.TINY_TOP_K * experts  # the share is exact here, so no rounding is involved
    routed = by_what(pv["differences"])["routed experts"]
    assert routed["tiny"] == f"top-{tiny.TINY_TOP_K} of {tiny_experts} routed experts"
    assert routed["checkpoint"] == f"top-{k} of {experts} routed experts"
    assert f"top-2 of {tiny_experts} routed experts (the checkpoint: top-8 of 384 routed experts)" in pv["description"]
    assert "same routing" not in pv["description"]


def test_kimi_k2_blocks_and_widths_differ_and_its_routing_rules_are_kept(collected):
    facts = collected("kimi_k2").facts
    raw, pv = facts["config"]["raw"], facts["preview"]
    differences, kept = by_what(pv["differences"]), by_what(pv["kept"])
    dense = raw["first_k_dense_replace"]  # the rule keeps the dense first blocks and adds two mixture blocks
    assert differences["blocks"]["tiny"] == f"{dense + 2} blocks: {dense} dense block and 2 MoE blocks"
    assert differences["blocks"]["checkpoint"] == (
        f"{raw['num_hidden_layers']} blocks: {dense} dense block and {raw['num_hidden_layers'] - dense} MoE blocks")
    assert differences["width"]["checkpoint"] == f"a residual width of {raw['hidden_size']:,}"
    assert kept["scaling factor"]["value"] == f"a routed scaling factor of {raw['routed_scaling_factor']:g}"
    assert kept["renormalizing"]["value"] == "the chosen weights renormalized"
    assert not set(differences) & set(kept)
    for d in pv["differences"]:
        assert f"{d['tiny']} (the checkpoint: {d['checkpoint']})" in pv["description"]
    for k in pv["kept"]:
        assert k["value"] in pv["description"].split("The same as the checkpoint: ", 1)[1]


def test_mixtral_keeps_its_routing_because_the_share_rule_gives_the_same_count(collected):
    facts = collected("mixtral").facts
    raw, pv = facts["config"]["raw"], facts["preview"]
    # 2 per token of 8: TINY_TOP_K × 8 / 2 is 8 again when TINY_TOP_K is 2.
    assert tiny.TINY_TOP_K * raw["num_local_experts"] // raw["num_experts_per_tok"] == raw["num_local_experts"]
    assert "routed experts" in by_what(pv["kept"]) and "routed experts" not in by_what(pv["differences"])


def test_gpt_oss_window_and_heads_are_stated_both_ways(collected):
    facts = collected("gpt_oss").facts
    raw, pv = facts["config"]["raw"], facts["preview"]
    differences = by_what(pv["differences"])
    assert differences["window"]["tiny"] == f"a sliding window of {tiny.TINY_SLIDING_WINDOW} positions"
    assert differences["window"]["checkpoint"] == f"a sliding window of {raw['sliding_window']} positions"
    tiny_heads = tiny.TINY["num_attention_heads"]
    # 4 × 8 / 64 rounds to 0: at least 2, so two key-value heads are shared and the run shows which a query head reads
    tiny_kv = max(min(2, raw["num_key_value_heads"]), tiny_heads * raw["num_key_value_heads"] // raw["num_attention_heads"])
    assert tiny_kv == 2
    assert differences["heads"]["tiny"] == f"{tiny_heads} query heads, {tiny_kv} key/value head{'s' if tiny_kv > 1 else ''}"
    assert differences["heads"]["checkpoint"] == f"{raw['num_attention_heads']} query heads, {raw['num_key_value_heads']} key/value heads"
    # the experts' clamp the preview makes act is a difference too
    assert differences["experts clamp"]["tiny"] == f"the experts' gate and up projections clamped at {tiny.TINY_SWIGLU_LIMIT:g}"
    assert differences["experts clamp"]["checkpoint"] == f"the experts' gate and up projections clamped at {raw['swiglu_limit']:g}"
