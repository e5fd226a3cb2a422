"""Zamba2 (Zyphra/Zamba2-2.7B), against a hand derivation from its config.

Every expected figure is derived here from config.json's sizes through formulas written out by hand, as
Zamba2's blocks lay out their weights; none is copied from the facts under test. A shared block's tensors are
one set however many hybrid blocks run it, so they are counted once.
"""

from __future__ import annotations

from tests.conftest import released_config


def mamba_block(c: dict) -> int:
    """One Mamba-2 block: its RMSNorm and the mixer (no linear biases; the convolution keeps one)."""
    d = c["hidden_size"]
    inner = c["mamba_expand"] * d
    heads, groups, state, kernel = c["n_mamba_heads"], c["mamba_ngroups"], c["mamba_d_state"], c["mamba_d_conv"]
    conv_channels = inner + 2 * groups * state          # x, B and C go through the convolution
    projection = 2 * inner + 2 * groups * state + heads  # z, x, B, C and one time step per head
    return (d                                           # the block's input norm
            + d * projection                            # in_proj
            + conv_channels * kernel + conv_channels    # the depthwise convolution and its bias
            + 3 * heads                                 # dt_bias, A_log, D
            + inner                                     # the gated norm before out_proj
            + inner * d)                                # out_proj


def shared_block(c: dict, uses: int) -> int:
    """One shared block with the adapters of its ``uses`` (its weights once, however often it runs)."""
    d, wide, ffn, rank = c["hidden_size"], 2 * c["hidden_size"], c["intermediate_size"], c["adapter_rank"]
    heads, kv_heads = c["num_attention_heads"], c["num_key_value_heads"]
    head_dim = wide // heads
    attention = wide * heads * head_dim + 2 * wide * kv_heads * head_dim + heads * head_dim * d
    mlp = d * 2 * ffn + ffn * d
    adapters = uses * (d * rank + rank * 2 * ffn)       # each use: down to the rank, up to the fused gate-up width
    assert not c["use_shared_attention_adapter"]
    return wide + attention + d + mlp + adapters        # the norm over the doubled width, the norm before the MLP


def zamba2_total(c: dict) -> int:
    d, V = c["hidden_size"], c["vocab_size"]
    hybrid = [i for i, kind in enumerate(c["layers_block_type"]) if kind == "hybrid"]
    shared = c["num_mem_blocks"]
    uses = [len(hybrid[j::shared]) for j in range(shared)]  # the shared blocks are taken in turn
    assert c["tie_word_embeddings"]
    return (V * d                                        # the embeddings, which the head reuses
            + c["num_hidden_layers"] * mamba_block(c)    # every block's own Mamba-2 block
            + len(hybrid) * d * d                        # each hybrid block's linear map into the stream
            + sum(shared_block(c, n) for n in uses)
            + d)                                         # the final norm


def test_zamba2_total_counts_each_shared_tensor_once(collected):
    f, c = collected("zamba2").facts, released_config("zamba2")
    total = zamba2_total(c)
    assert total == 2_662_214_560
    model = f["accounting"]["model"]
    assert model["parameters"] == model["total"] == model["active"] == total
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == total
    [figure] = f["checkpoint"]["published"]["figures"]
    assert figure["figure"] == "2.7B" and figure["agrees"]
    # each hybrid kind: its own tensors per block times its blocks, and its shared block once
    kinds = {k["kind"]: k for k in f["accounting"]["block_kinds"]}
    own = mamba_block(c) + c["hidden_size"] ** 2
    assert kinds["hybrid_block_1"]["total"] == 5 * own + shared_block(c, 5)
    assert kinds["hybrid_block_2"]["total"] == 4 * own + shared_block(c, 4)
    assert kinds["hybrid_block_1"]["shared_parameters"] == shared_block(c, 5)
    assert kinds["state_space_block"]["total"] == 45 * mamba_block(c)


def test_zamba2_block_kinds_follow_the_shared_block_each_runs(collected):
    f, c = collected("zamba2").facts, released_config("zamba2")
    hybrid = [i for i, kind in enumerate(c["layers_block_type"]) if kind == "hybrid"]
    kinds = {k["id"]: k for k in f["block_kinds"]}
    assert kinds["hybrid_block_1"]["indices"] == hybrid[0::2] and kinds["hybrid_block_2"]["indices"] == hybrid[1::2]


def test_zamba2_cache_is_the_shared_attention_per_use_and_a_fixed_state(collected):
    f, c = collected("zamba2").facts, released_config("zamba2")
    hybrid = sum(1 for kind in c["layers_block_type"] if kind == "hybrid")
    head_dim = 2 * c["hidden_size"] // c["num_attention_heads"]
    per_position = hybrid * 2 * c["num_key_value_heads"] * head_dim  # keys and values of every use, at BF16 below
    assert f["cost"]["summary"]["kv_cache_bytes_per_position"] == 2 * per_position
    inner = c["mamba_expand"] * c["hidden_size"]
    conv = inner + 2 * c["mamba_ngroups"] * c["mamba_d_state"]
    state = conv * c["mamba_d_conv"] + inner * c["mamba_d_state"]  # heads × head width × state = inner × state
    context = f["cost"]["summary"]["context"]
    assert f["cost"]["summary"]["kv_cache_bytes"] == 2 * (per_position * context + c["num_hidden_layers"] * state)
    for check in f["cost"]["checks"]:
        assert check["formula"] == check["measured"], check


def test_zamba2_steps_print_the_shared_block_and_the_adapter_they_run(collected):
    f = collected("zamba2").facts
    kinds = f["equations"]["kinds"]
    assert {"shared_block", "carried_block", "low_rank_adapter"} <= set(kinds.values())
    components = f["equations"]["components"]
    shared = next(v for k, v in components.items() if kinds.get(k) == "shared_block")
    tex = " ".join(step["tex"] for step in shared["steps"])
    assert r"[x;\,e]" in tex and r"\operatorname{FFN}_k" in tex
    mlp = components["hybrid_block_1.shared_transformer.feed_forward"]
    tex = " ".join(step["tex"] for step in mlp["steps"])
    assert "A_k" in tex and "B_k" in tex
    block = components["hybrid_block_1"]
    assert all(s["expression"] for s in block["steps"] + shared["steps"] + mlp["steps"][:3])
    assert f["equations"]["total"]["reproduced"] == f["equations"]["total"]["steps"]


def test_zamba2_lists_its_7b_size_exact_beside_the_vendors_name(collected):
    import json

    from tests.conftest import ROOT

    rows = {r["repo"]: r for r in collected("zamba2").facts["sizes"]}
    assert sorted(rows) == ["Zyphra/Zamba2-2.7B", "Zyphra/Zamba2-7B"]
    c = json.loads((ROOT / "atlas/checkpoints/Zyphra/Zamba2-7B/config.json").read_text())
    total = zamba2_total(c)
    assert total == 7_356_749_648
    assert rows["Zyphra/Zamba2-7B"]["total"] == rows["Zyphra/Zamba2-7B"]["active"] == total
    assert round(total / 1e9) == 7  # the vendor's "7B"
    hybrid = sum(1 for kind in c["layers_block_type"] if kind == "hybrid")
    head_dim = 2 * c["hidden_size"] // c["num_attention_heads"]
    assert rows["Zyphra/Zamba2-7B"]["kv_cache_per_token"] == 2 * hybrid * 2 * c["num_key_value_heads"] * head_dim


def test_zamba2_config_words_speak_of_the_shared_blocks():
    import json

    from atlas.model import config_words
    from tests.conftest import ROOT

    path = ROOT / "atlas/checkpoints/Zyphra/Zamba2-2.7B/config.json"
    raw = json.loads(path.read_text())
    words = config_words.explain_config(raw, str(path))
    assert "2 shared blocks" not in words["num_mem_blocks"] and "the 9 hybrid blocks take them in turn" in words["num_mem_blocks"]
    assert "5 or 5" not in words["num_mem_blocks"] and "4 or 5 times" in words["num_mem_blocks"]
    assert "blocks 6, 12, 18" in words["layers_block_type"]
    assert "down to 128 values" in words["adapter_rank"] and "query" not in words["adapter_rank"]
    assert "no rotary embedding" in words["use_mem_rope"]
    assert "80" in words["n_mamba_heads"]


def test_zamba2_support_reads_the_shared_attention_at_the_hybrid_blocks_alone(collected):
    f, c = collected("zamba2").facts, released_config("zamba2")
    hybrid = [i for i, kind in enumerate(c["layers_block_type"]) if kind == "hybrid"]
    values = {v["name"]: v for h in f["support"]["hosts"] for v in h["values"]}
    for name in ("attention_queries", "attention_probabilities", "attention_output", "mlp_neurons", "mlp_output"):
        assert values[name]["blocks"] == hybrid, name
        assert ".shared_transformer." in values[name]["module"] + ".", name
    assert values["ssm_output"]["blocks"] == list(range(c["num_hidden_layers"]))
    assert values["layer_mid"]["blocks"] == [] and values["attention_norm_output"]["blocks"] == []
    identities = {i["id"]: i for i in f["preview"]["identities"]}
    assert identities["hybrid_block_sum"]["holds"] and identities["hybrid_block_sum"]["blocks"] == [1, 2, 4, 5]
    assert "two_mixers_block_sum" not in identities
