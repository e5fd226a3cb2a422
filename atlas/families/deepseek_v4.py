"""DeepSeek-V4-Flash (model_type deepseek_v4): hyper-connected residual streams, attention over a sliding window plus pooled keys, hash-routed first mixtures.

The residual is not one stream but hc_mult of them. Before each sublayer a hyper-connection reads the
streams, flattened and normalized without a gain, and computes with one small linear map three things:
a sigmoid weight per stream that collapses them into the vector the sublayer reads, a weight per stream
(twice a sigmoid) that spreads the sublayer's output back over them, and a square mixing matrix, a
softmax per row driven towards doubly stochastic by hc_sinkhorn_iters rounds of Sinkhorn normalization,
that carries the old streams into the new. After the last block a collapse of the same kind gives the
one vector the final norm and the head read.

Every attention is multi-query with a single head that serves as both key and value: queries come from a
low-rank latent (q_lora_rank) through a per-head norm without a gain, the shared head from the block's
input through an RMSNorm, and the last qk_rope_head_dim dims of each head are rotated in adjacent pairs.
Each head has a learned sink logit in its softmax. Keys come from a sliding window of recent positions
and, on most blocks, from keys pooled from windows of positions; compress_ratios gives each block's
rate: none (the window alone), a light one or a heavy one. A pooled key is a softmax over its window's
gate values (plus a learned bias per slot) weighting the window's values, then an RMSNorm and a rotation
at the window's first position, with angles of their own (compress_rope_theta, YaRN). At the light rate
the windows overlap (each position feeds its own window and the next) and a lightning indexer, with a
pooling of its own at index_head_dim and index_n_heads heads whose queries come from the query latent,
keeps only the index_topk best pooled keys per query. Because the value is the rotated key, the rotation
is undone on each head's output at the query's position; the heads are then projected in o_groups groups
to o_lora_rank values each and mixed to the width.

Every block is a mixture of experts with one shared expert, both SwiGLU with their gate and up
projections clamped at swiglu_limit. The router scores experts by the square root of softplus of their
logits (scoring_func sqrtsoftplus), renormalizes the chosen ones and multiplies by routed_scaling_factor.
On the first num_hash_layers blocks the choice itself is a frozen table indexed by the token's id (the
scores only weight it); later blocks pick the best scores plus a selection bias.

The released files also hold a multi-token-prediction block (num_nextn_predict_layers, the last entry of
compress_ratios); transformers never builds it.
"""

from __future__ import annotations

from atlas.inputs.family import Family

TINY_HEAD_DIM = 16
TINY_ROTATED = 4  # two pairs, so turning adjacent pairs differs from turning halves
TINY_HEADS_PER_GROUP = 2
TINY_O_LORA_RANK = 8
TINY_HEAVY_RATE = 8
TINY_INDEX_TOPK = 4
TINY_SWIGLU_LIMIT = 2.0


def tiny(config) -> dict:
    """The preview's sizes where DeepSeek-V4 ties them together.

    The generic rule sees qk_rope_head_dim (which DeepseekV4Config derives as head_dim x
    partial_rotary_factor) and, taking it for latent attention, leaves head_dim at 512: the rotated
    width stays 64 while the indexer's heads shrink to 16 dims, and the indexer's rotation of its last
    64 dims fails on the first compressed block (the crash a first attempt met). Here the heads shrink
    to 16 dims with 4 of them rotated (two pairs, in the main and the compressed angles alike), which
    the indexer's 16-dim heads hold. The output groups keep two heads each (the checkpoint: 8), each
    group's rank a quarter of its input as in the checkpoint (1024 of 4096). The heavy compression rate
    128 would compress nothing on a 31-token prompt: it becomes 8 (three closed windows); the light rate
    4 stays, and the indexer keeps 4 of up to 7 compressed keys, so its choice drops some. The SwiGLU
    clamp of 10 never acts on the tiny pre-activations (at most about 6): 2 does. The stack is the
    shortest start of the checkpoint's that has each of its kinds of block (five).
    """
    heads = 4  # atlas.model.tiny's tiny head count
    groups = heads // TINY_HEADS_PER_GROUP
    # every kind of block the checkpoint has: the first four blocks hold the window-only, hash-routed and
    # heavily compressed kinds, the fifth the first block compressing by 4 with a scored mixture
    layers = next(n for n in range(1, config.num_hidden_layers + 1)
                  if set(zip(config.layer_types[:n], config.mlp_layer_types[:n])) == set(zip(config.layer_types, config.mlp_layer_types)))
    return {
        "num_hidden_layers": layers,
        "layer_types": list(config.layer_types[:layers]),
        "mlp_layer_types": list(config.mlp_layer_types[:layers]),
        "head_dim": TINY_HEAD_DIM,
        "partial_rotary_factor": TINY_ROTATED / TINY_HEAD_DIM,
        "rope_parameters": {kind: {**params, "partial_rotary_factor": TINY_ROTATED / TINY_HEAD_DIM}
                            for kind, params in config.rope_parameters.items()},
        "o_groups": groups,
        "o_lora_rank": TINY_O_LORA_RANK,
        "compress_rates": {**config.compress_rates, "heavily_compressed_attention": TINY_HEAVY_RATE},
        "index_topk": TINY_INDEX_TOPK,
        "swiglu_limit": TINY_SWIGLU_LIMIT,
    }


FAMILY = Family(
    title="DeepSeek-V4-Flash",
    vendor="DeepSeek",
    released="2026-04",
    summary=(
        "Several hyper-connected residual streams; one shared key-value head reading a sliding window plus keys "
        "pooled from windows of positions, lightly with an indexer or heavily; a mixture of experts routed by "
        "token id on its first blocks."
    ),
    tags=("Hyper-connections", "Compressed attention", "Sparse attention", "Attention sinks", "Shared expert"),
    checkpoint="deepseek-ai/DeepSeek-V4-Flash",
    model_class="DeepseekV4ForCausalLM",
    config_class="DeepseekV4Config",
    preview=tiny,
    not_applicable={
        "block_sum": ("a block's input and output are hc_mult residual streams, not one: each sublayer's output is spread over "
                      "the streams and the old streams are mixed, as the block's proven steps write out"),
        "attention_add": ("the attention's output is added to every residual stream with its own weight, after the streams are "
                          "mixed, not to one stream"),
        "attention_rows": "each head's learned sink logit joins the softmax and takes part of every row's probability mass",
        "attention_softmax": "the softmax runs over the scores and the head's sink logit together; the sink's column is dropped after it",
        "embeddings": "the first block reads hc_mult copies of the token embeddings, one per residual stream",
    },
    config_overrides={"num_nextn_predict_layers": 0},
    override_reasons={"num_nextn_predict_layers": (
        "transformers builds no multi-token-prediction block, so the model is built without one; the released "
        "files' block is not predicted either (its layout there is not transformers' and no header figure is known)."
    )},
)
