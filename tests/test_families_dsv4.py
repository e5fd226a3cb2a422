"""DeepSeek-V4-Flash against a hand derivation of its parameter count.

The expected total is derived here from the sizes in the family's config.json (read from the file by the
test) through a formula written out by hand; none is copied from the facts under test. The settings the
formula relies on (no biases, an untied head, which blocks compress their keys and by how much, every
block a mixture) are asserted on the file first.
"""

from __future__ import annotations

from tests.conftest import released_config

LIGHT, HEAVY = 4, 128  # the compression rates compress_ratios uses: 0 (sliding window only), 4 and 128


def attention(c):
    """One block's attention, whatever it compresses: the query latent and its gain, the query heads (their
    per-head norm has no gain), one shared key-and-value head with its gain, the grouped low-rank output
    projection (o_groups blocks of heads x head_dim / o_groups -> o_lora_rank, then all of them -> width)
    and one sink logit per head."""
    d, H, hd = c["hidden_size"], c["num_attention_heads"], c["head_dim"]
    ql, g, rank = c["q_lora_rank"], c["o_groups"], c["o_lora_rank"]
    return d * ql + ql + ql * H * hd + d * hd + hd + g * (H * hd // g) * rank + g * rank * d + H


def light_compressor(c):
    """Compression by 4 with overlapping windows: values and gates for two series of head_dim each, a
    position bias per slot of the window, a gain; its lightning indexer runs the same compressor at
    index_head_dim, projects its queries from the query latent and weights its heads from the input."""
    d, hd, ql = c["hidden_size"], c["head_dim"], c["q_lora_rank"]
    ih, idim = c["index_n_heads"], c["index_head_dim"]
    own = 2 * d * 2 * hd + LIGHT * 2 * hd + hd
    indexer = 2 * d * 2 * idim + LIGHT * 2 * idim + idim + ql * ih * idim + d * ih
    return own + indexer


def heavy_compressor(c):
    """Compression by 128: values and gates of head_dim, a position bias per slot of the window, a gain."""
    d, hd = c["hidden_size"], c["head_dim"]
    return 2 * d * hd + HEAVY * hd + hd


def mixture(c):
    """The router's weight, the routed experts (gate, up, down) and the one shared expert."""
    d, E, F = c["hidden_size"], c["n_routed_experts"], c["moe_intermediate_size"]
    return E * d + E * 3 * d * F + c["n_shared_experts"] * 3 * d * F


def hyper_connection(c):
    """One hyper-connection: a map from the hc_mult streams (flattened) to the pre, post and mixing
    coefficients (hc_mult + hc_mult + hc_mult^2 of them), their biases, and three scales."""
    n, d = c["hc_mult"], c["hidden_size"]
    outputs = (2 + n) * n
    return outputs * n * d + outputs + 3


def total(c):
    V, d, L, n = c["vocab_size"], c["hidden_size"], c["num_hidden_layers"], c["hc_mult"]
    ratios = c["compress_ratios"][:L]  # the list also covers the multi-token-prediction block
    block = attention(c) + mixture(c) + 2 * d + 2 * hyper_connection(c)  # two RMSNorm gains, two hyper-connections
    compressors = ratios.count(LIGHT) * light_compressor(c) + ratios.count(HEAVY) * heavy_compressor(c)
    head_collapse = n * n * d + n + 1  # the last collapse of the streams: weights, biases, one scale
    return 2 * V * d + L * block + compressors + head_collapse + d  # untied embeddings and head, final norm


def assert_settings(c):
    assert not c["attention_bias"] and not c["tie_word_embeddings"]
    assert c["num_key_value_heads"] == 1  # one head serves as key and value
    L = c["num_hidden_layers"]
    assert len(c["compress_ratios"]) == L + c["num_nextn_predict_layers"]
    assert set(c["compress_ratios"]) == {0, LIGHT, HEAVY}
    assert c["n_shared_experts"] == 1 and "first_k_dense_replace" not in c  # every block is a mixture


def test_deepseek_v4_total_by_hand():
    """The hand formula against transformers' own model built on the meta device (no weights)."""
    import torch
    import transformers

    c = released_config("deepseek_v4")
    assert_settings(c)
    built = transformers.DeepseekV4Config(**{**c, "num_nextn_predict_layers": 0})
    with torch.device("meta"):
        model = transformers.DeepseekV4ForCausalLM(built)
    assert sum(p.numel() for p in model.parameters()) == total(c)
    # the published size: about 284 B parameters in all
    assert 283e9 < total(c) < 285e9


def test_deepseek_v4_accounting(collected):
    f, c = collected("deepseek_v4").facts, released_config("deepseek_v4")
    assert_settings(c)
    assert f["accounting"]["model"]["parameters"] == total(c)
    # the stored buffers beside the parameters: each hash-routed block's token-id table (a row of experts per
    # vocabulary entry) and each scored block's per-expert selection bias
    L, hashed = c["num_hidden_layers"], c["num_hash_layers"]
    buffers = hashed * c["vocab_size"] * c["num_experts_per_tok"] + (L - hashed) * c["n_routed_experts"]
    assert f["accounting"]["model"]["total"] == total(c) + buffers


# --- the proof kinds DeepSeek-V4 adds (atlas/proof/hyper.py), on its preview run -------------------


def _parts():
    """Parts of the preview model, each beside its module at the checkpoint's sizes (meta device)."""
    import torch
    import transformers

    from atlas import families
    from atlas.model import preview
    from atlas.inputs.checkpoint import load_pinned, transformers_config
    from atlas.proof.core import Context, Part
    from atlas.proof.prove import capture_calls

    family = families.load("deepseek_v4")
    run = preview.preview_run("deepseek_v4")
    full_config = transformers_config(family, load_pinned(family.checkpoint))
    with torch.device("meta"):
        full = transformers.DeepseekV4ForCausalLM(full_config)
    ctx = Context(family, full_config, run.config, capture_calls(run.model, run.ids), run.eager, run.eager.resolution)

    def part(path):
        block = int(path.split(".")[2]) if path.startswith("model.layers.") else None
        return Part(path.replace(".", "_"), path, full.get_submodule(path), run.model.get_submodule(path), ctx, block)

    return part


def test_hyper_connection_steps_reproduce_the_modules():
    from atlas.proof.core import reproduce
    from atlas.proof.kinds import kind_of
    from atlas.proof.library import chain_of

    part = _parts()
    expected = {"model.layers.0.attn_hc": "hyper_connection", "model.layers.3.ffn_hc": "hyper_connection",
                "model.hc_head": "stream_collapse", "model.layers.2.self_attn.o_a_proj": "grouped_linear"}
    for path, kind in expected.items():
        p = part(path)
        assert kind_of(p) == kind, path
        result = reproduce(p, chain_of(p))
        assert result["reproduced"] and result["compared"] >= 1, (path, result)


def test_hyper_connection_with_too_few_sinkhorn_rounds_is_refused():
    from atlas.proof import hyper
    from atlas.proof.core import reproduce

    p = _parts()("model.layers.1.attn_hc")
    rounds = p.tiny.hc_sinkhorn_iters
    try:
        p.tiny.hc_sinkhorn_iters = 2  # the chain reads the count from the module; the recorded call ran all of them
        result = reproduce(p, hyper.hyper_connection(p))
    finally:
        p.tiny.hc_sinkhorn_iters = rounds
    assert not result["reproduced"] and result["error"] > result["tolerance"]


def test_grouped_projection_is_not_a_plain_linear_map():
    from atlas.proof import library
    from atlas.proof.core import reproduce

    p = _parts()("model.layers.0.self_attn.o_a_proj")
    assert not reproduce(p, library.linear(p))["reproduced"]


def test_mixture_steps_reproduce_the_hash_and_scored_blocks():
    from atlas.proof.core import reproduce
    from atlas.proof.library import chain_of

    part = _parts()
    for path, hashed in (("model.layers.0.mlp", True), ("model.layers.3.mlp", False)):
        p = part(path)
        result = reproduce(p, chain_of(p))
        assert result["reproduced"], (path, result)
        gate = p.ctx.parts[f"{p.id}.gate"]
        assert gate.facts["routing"]["value"] == "score_fn_renormalized"
        assert ("hash_routing" in gate.facts) == hashed
    assert p.ctx.parts[f"{p.id}.gate.score_fn"].facts["activation"]["value"] == "sqrtsoftplus"


def test_hash_routing_is_not_a_top_k_of_the_scores():
    """On the preview run the table's choice differs from the best scores for some token, so a router
    chain that chose by score could not reproduce the hash blocks."""
    p = _parts()("model.layers.0.mlp.gate")
    logits, _, chosen = p.call.output
    best = logits.topk(chosen.shape[-1], dim=-1).indices
    assert (best.sort(-1).values != chosen.sort(-1).values).any()


def test_the_swiglu_clamp_acts_on_the_preview_and_is_a_step():
    from atlas.proof.core import reproduce
    from atlas.proof.library import dense_mlp

    p = _parts()("model.layers.2.mlp.shared_experts")
    limit = p.tiny.limit
    assert reproduce(p, dense_mlp(p))["reproduced"]
    try:
        p.tiny.limit = 1e9  # steps built without a bound that acts: the recorded call was clamped
        p.ctx.chains.clear()
        result = reproduce(p, dense_mlp(p))
    finally:
        p.tiny.limit = limit
    assert not result["reproduced"]


def test_attention_compressors_and_indexer_reproduce_their_modules():
    from atlas.proof.core import reproduce
    from atlas.proof.kinds import kind_of
    from atlas.proof.library import chain_of

    part = _parts()
    expected = {"model.layers.0.self_attn": "shared_kv_attention", "model.layers.3.self_attn": "shared_kv_attention",
                "model.layers.4.self_attn": "shared_kv_attention", "model.layers.3.self_attn.compressor": "window_compressor",
                "model.layers.4.self_attn.compressor": "window_compressor",
                "model.layers.4.self_attn.compressor.indexer": "compressed_indexer",
                "model.layers.4.self_attn.compressor.indexer.scorer": "index_scorer",
                "model.layers.3.self_attn.compressor.rotary_emb": "rotary_table"}
    for path, kind in expected.items():
        p = part(path)
        assert kind_of(p) == kind, path
        result = reproduce(p, chain_of(p))
        assert result["reproduced"], (path, result)


def test_a_compressor_without_its_slot_bias_is_refused():
    """The preview moves every slot bias off zero, so pooling by the gates alone gives other keys."""
    from atlas.proof import compressed
    from atlas.proof.core import reproduce

    p = _parts()("model.layers.3.self_attn.compressor")
    bias = p.tiny.position_bias.detach().clone()
    assert bias.abs().max() > 0
    try:
        p.tiny.position_bias.data.zero_()
        result = reproduce(p, compressed.compressor(p))  # compared with the call recorded with the bias
    finally:
        p.tiny.position_bias.data.copy_(bias)
    assert not result["reproduced"]


def test_streams_and_attended_keys_have_layouts_of_their_own():
    from atlas.model.vocabulary import layout_of, resolve_dims

    sizes = {"hidden_size": 4096, "residual_streams": 4, "compressed_blocks": 41, "num_kv_heads": 1, "qk_head_dim": 512, "head_dim": 512}
    assert resolve_dims(layout_of("layer_input", sizes), sizes) == ["batch", "seq", 4, 4096]
    assert resolve_dims(layout_of("attention_keys", sizes), sizes) == ["batch", 1, "key", 512]
    assert layout_of("layer_input", {"hidden_size": 4096}) == "Residual"  # one stream: the usual layout


def test_cache_terms_by_hand(collected):
    """The cache coefficients of each kind, derived from config.json: the window holds one head of head_dim
    (key and value are one tensor); a compressor holds head_dim values per pooled key, its projections' width
    twice (values and gates) per position of the open window, and where windows overlap (rate 4: two series of
    head_dim) the last window's first series, values and gates; the indexer likewise at index_head_dim."""
    f, c = collected("deepseek_v4").facts, released_config("deepseek_v4")
    D, d, w = c["head_dim"], c["index_head_dim"], c["sliding_window"]
    light = {"every": 4, "entry": D, "open": 2 * 2 * D, "overlap": 2 * 4 * D}
    indexer = {"every": 4, "entry": d, "open": 2 * 2 * d, "overlap": 2 * 4 * d}
    heavy = {"every": 128, "entry": D, "open": 2 * D, "overlap": 0}
    kinds = {k["label"]: k for k in f["cost"]["cache"]["kinds"]}
    window_only = kinds["sliding-window block"]
    assert (window_only["values"], window_only["cap"]) == (2 * D, w - 1)  # keys and values stored apart there
    assert kinds["heavily compressed attention block"]["compressed"] == [heavy]
    assert kinds["compressed sparse attention block"]["compressed"] == [light, indexer]
    assert all(k["values"] == D for label, k in kinds.items() if label != "sliding-window block")
    assert sum(k["count"] for k in kinds.values()) == c["num_hidden_layers"]
