"""MiniMax-M2 (model_type minimax_m2): full-attention blocks with width-wide q/k norms and partial rotary, then a wide mixture of sigmoid-routed experts with a selection bias.

Every block is the same: RMSNorm, grouped-query attention, residual add; RMSNorm, mixture of experts,
residual add. Before the heads are split, the projected queries and keys each pass one RMSNorm over
their whole width (qk_norm_type per_layer), and the rotary embedding turns only the first rotary_dim
dimensions of each head. The mixture has many narrow SwiGLU experts and no shared expert. Its router
scores each expert with the sigmoid of its logit; a per-expert bias, which the mixture module holds
and hands to the router, is added to the scores only to choose the num_experts_per_tok experts, whose
unbiased scores are then renormalised to sum to one.

The released weights are FP8 with a scale per 128 x 128 block for the attention projections and the
experts; the router, the selection bias, the norms, the embeddings and the head are not quantized.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="MiniMax-M2",
    vendor="MiniMax",
    released="2025-10",
    summary=(
        "Grouped-query attention with width-wide q/k norms and partial rotary, then many narrow experts chosen "
        "by sigmoid scores and a selection bias, with no shared expert; FP8 weights."
    ),
    tags=("Sigmoid routing", "Selection bias", "Q/K norm", "Partial rotary"),
    checkpoint="MiniMaxAI/MiniMax-M2",
    model_class="MiniMaxM2ForCausalLM",
    config_class="MiniMaxM2Config",
)
