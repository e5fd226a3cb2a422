"""DeepSeek Sparse Attention families (DeepSeek-V3.2-Exp, GLM-5), each against a hand derivation, and the
lightning indexer's proof steps, standard values and cost rules.

As in tests/test_families_moe.py, every expected total is derived here from the sizes in the family's
config.json (read from the file by the test) through a formula written out by hand; none is copied
from the facts under test. Where a formula relies on a setting (biases, an untied head, which blocks
are mixtures), the test asserts that setting in the file first.
"""

from __future__ import annotations

import pytest

from tests.conftest import released_config


def swiglu(d, ffn):
    return 3 * d * ffn  # gate, up, down


def latent_attention(c):
    """Multi-head latent attention with a query latent, no biases: the two down projections, their two
    RMSNorms, the two up projections and the output projection."""
    d, H = c["hidden_size"], c["num_attention_heads"]
    rq, rkv = c["q_lora_rank"], c["kv_lora_rank"]
    nope, rope, v = c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"]
    return (d * rq + rq + rq * H * (nope + rope)     # q_a_proj, q_a_layernorm, q_b_proj
            + d * (rkv + rope) + rkv                 # kv_a_proj_with_mqa, kv_a_layernorm
            + rkv * H * (nope + v)                   # kv_b_proj
            + H * v * d)                             # o_proj


def indexer(c):
    """The lightning indexer: wq_b from the query latent to every indexer head, wk from the stream to one
    key, k_norm a LayerNorm (gain and bias) over that key, weights_proj from the stream to one weight a head."""
    d, rq, iH, iD = c["hidden_size"], c["q_lora_rank"], c["index_n_heads"], c["index_head_dim"]
    return rq * iH * iD + d * iD + 2 * iD + d * iH


def dsa_totals(c):
    """(parameters, buffers, routed parameters a token skips, the files' extra MTP parameters)."""
    V, d, L = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"]
    E, K, S = c["n_routed_experts"], c["num_experts_per_tok"], c["n_shared_experts"]
    F, Fe, dense = c["intermediate_size"], c["moe_intermediate_size"], c["first_k_dense_replace"]
    attn = latent_attention(c) + indexer(c)
    dense_block = attn + swiglu(d, F) + 2 * d
    moe_block = attn + E * d + E * swiglu(d, Fe) + swiglu(d, S * Fe) + 2 * d  # router, routed, shared expert, norms
    parameters = 2 * V * d + d + dense * dense_block + (L - dense) * moe_block
    buffers = (L - dense) * E  # the router's selection bias on every mixture block
    skipped = (L - dense) * (E - K) * swiglu(d, Fe)
    # the files' multi-token-prediction block: one more mixture block (its bias too), enorm and hnorm,
    # eh_proj from 2d to d, the shared head's norm and matrix, and its own embedding
    mtp = moe_block + E + 2 * d + 2 * d * d + d + V * d + V * d
    return parameters, buffers, skipped, mtp


def check_settings(c):
    assert not c["attention_bias"] and not c["tie_word_embeddings"]
    assert c["moe_layer_freq"] == 1 and c["num_nextn_predict_layers"] == 1
    assert c["q_lora_rank"] is not None and c["index_head_dim"] > c["qk_rope_head_dim"]


def accounting(f):
    return f["accounting"]["model"]


def test_deepseek_v32_total(collected):
    f, c = collected("deepseek_v32").facts, released_config("deepseek_v32")
    check_settings(c)
    parameters, buffers, skipped, mtp = dsa_totals(c)
    assert accounting(f)["parameters"] == parameters
    assert accounting(f)["stored_buffers"] == buffers
    assert accounting(f)["total"] == parameters + buffers
    assert accounting(f)["active"] == parameters + buffers - skipped
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == parameters + buffers + mtp
    # DeepSeek-V3's 671 B plus the indexers; with the MTP block about 685 B, the model card's figure
    assert 671e9 < parameters < 672e9 and 685e9 < parameters + buffers + mtp < 686e9
    L, dense = c["num_hidden_layers"], c["first_k_dense_replace"]
    assert {k["label"]: k["indices"] for k in f["block_kinds"]} == {"dense block": list(range(dense)), "MoE block": list(range(dense, L))}


def test_glm_moe_dsa_total(collected):
    f, c = collected("glm_moe_dsa").facts, released_config("glm_moe_dsa")
    check_settings(c)
    parameters, buffers, skipped, mtp = dsa_totals(c)
    assert accounting(f)["parameters"] == parameters
    assert accounting(f)["total"] == parameters + buffers
    assert accounting(f)["active"] == parameters + buffers - skipped
    assert f["checkpoint_check"]["predicted"]["weight_parameters"] == parameters + buffers + mtp
    # published: about 744 B in all and 40 B active, both without the MTP block; the active figure also
    # leaves out the embedding and the head (with them it is about 41.8 B)
    V, d = c["vocab_size"], c["hidden_size"]
    assert 743e9 < parameters + buffers < 745e9
    assert 39.5e9 < parameters + buffers - skipped - 2 * V * d < 40.5e9


# --- the indexer as a layer kind ------------------------------------------------------------------------


@pytest.mark.parametrize("name, layout", [("deepseek_v32", "halves"), ("glm_moe_dsa", "interleaved_pairs")])
def test_indexer_proven_and_captured(collected, name, layout):
    f = collected(name).facts
    eq = f["equations"]
    indexers = [k for k, kind in eq["kinds"].items() if kind == "indexer"]
    assert indexers, "the indexer is a part kind of its own"
    for pid in indexers:
        component = eq["components"][pid]
        rotary = component["facts"]["rotary_layout"]
        # the other rotation was run and refused: only one variant reproduces the module
        assert rotary["value"] == layout and rotary["how"].startswith("measured: the only variant")
        assert {"indexer_scores", "indexer_positions"} <= {v for s in component["steps"] for v in s["values"]}
        assert component["proof"]["compared"] >= 3  # scores, positions, output
    attention = eq["components"][indexers[0].rpartition(".")[0]]
    assert attention["facts"]["selection"]["value"] == "the indexer's kept positions"
    shapes = f["preview"]["shapes"]
    seq, keep = f["preview"]["sizes"]["seq"], f["preview"]["config"]["index_topk"]
    assert keep < seq  # the preview drops positions
    assert all(s == [1, seq, seq] for s in shapes["indexer_scores"].values())
    assert all(s == [1, seq, keep] for s in shapes["indexer_positions"].values())
    features = {x["abbreviation"]: x["evidence"] for x in f["features"]}
    assert f"{released_config(name)['index_topk']:,} best" in features["DSA"] and "MLA" in features


def test_top_k_check_refuses_a_wrong_selection():
    import torch

    from atlas.proof.core import difference

    scores = torch.tensor([[[0.5, 0.1, 0.9, float("-inf")], [0.3, 0.3, 0.2, 0.7]]], dtype=torch.float64)
    assert difference(scores, torch.tensor([[[2, 0], [3, 1]]]), "top_k") == 0  # a tie taken either way
    assert difference(scores, torch.tensor([[[2, 0], [3, 0]]]), "top_k") == 0
    assert difference(scores, torch.tensor([[[2, 1], [3, 0]]]), "top_k") > 0  # 0.1 is not among the best two
    assert difference(scores, torch.tensor([[[2, 2], [3, 0]]]), "top_k") == float("inf")  # a position twice
    # a query that sees fewer positions than it keeps must keep every one it sees
    few = torch.tensor([[[0.2, float("-inf"), float("-inf")]]], dtype=torch.float64)
    assert difference(few, torch.tensor([[[0, 1]]]), "top_k") == 0
    assert difference(few, torch.tensor([[[1, 2]]]), "top_k") == float("inf")


def test_traced_attention_keeps_the_selection():
    """Under atlas.model.trace the model hands the chosen positions to the traced attention function as
    ``indices``; it must mask the others as transformers' eager and sdpa paths do."""
    import torch

    from atlas.model.trace import _selected_positions_mask

    q = torch.zeros(1, 2, 3, 4)
    mask = torch.zeros(1, 1, 3, 3)
    kept = torch.tensor([[[0, 0], [0, 1], [2, 1]]], dtype=torch.int32)
    out = _selected_positions_mask(None, q, q, mask, {"indices": kept}, "eager")
    assert (out[0, 0] < -1e30).tolist() == [[False, True, True], [False, False, True], [True, False, False]]
    kwargs = {"indices": kept}
    assert _selected_positions_mask(None, q, q, mask.bool(), kwargs, "sdpa").dtype == torch.bool and "indices" not in kwargs
    assert _selected_positions_mask(None, q, q, mask, {}, "eager") is mask


def test_indexer_cost_rules(collected):
    c = released_config("deepseek_v32")
    cost = collected("deepseek_v32").facts["cost"]
    for kind in cost["cache"]["kinds"]:  # the latent, the shared rotary key, and the indexer's key
        assert kind["values"] == c["kv_lora_rank"] + c["qk_rope_head_dim"] + c["index_head_dim"]
    checks = [x for x in cost["checks"] if x["figure"].startswith(("KV cache", "FLOPs"))]
    assert checks and all(x["formula"] == x["measured"] for x in checks)
