"""LFM2-MoE (model_type lfm2_moe): LFM2's mix of gated short convolutions and a few attention layers,
with a mixture of experts in place of the feed-forward after the first blocks.

The operators are LFM2's: most blocks run a gated short convolution (one projection makes B, C and x;
B·x is convolved along the positions by a depthwise kernel of conv_L_cache taps; C gates the result and
an output projection mixes the channels), and the blocks config.layer_types names full_attention run
grouped-query attention with rotary positions and an RMSNorm on every head's query and key. The first
num_dense_layers blocks close with a SwiGLU feed-forward of width intermediate_size; every later block
closes with a mixture of narrow SwiGLU experts instead. Its router scores each expert with a sigmoid,
adds a per-expert bias (a buffer, not trained by gradient) to choose the top experts, then weighs the
chosen ones by their unbiased sigmoid scores, divided by their sum plus a small constant its forward
writes in (so they sum to a little under one). No biases anywhere else, and the head is tied to the
embedding.
"""

from atlas.inputs.family import Family


def preview(config):
    """Every kind of block the checkpoint has: its first num_dense_layers dense blocks, then blocks up to
    the first convolution after the first attention, so a convolution and an attention each close with
    the mixture (the generic rule keeps three blocks and knows first_k_dense_replace, not num_dense_layers)."""
    kinds = list(config.layer_types)
    first_attention = kinds.index("full_attention", config.num_dense_layers)
    first_conv = kinds.index("conv", max(config.num_dense_layers, first_attention))
    blocks = max(first_attention, first_conv) + 1
    return {"num_hidden_layers": blocks, "layer_types": kinds[:blocks]}


FAMILY = Family(
    title="LFM2-MoE",
    vendor="Liquid AI",
    released="2025-10",
    summary=(
        "LFM2's gated short convolutions and few attention blocks, with a mixture of narrow experts chosen by "
        "biased sigmoid scores after the first dense blocks."
    ),
    tags=("Short convolution", "Hybrid", "SwiGLU"),
    checkpoint="LiquidAI/LFM2-8B-A1B",
    model_class="Lfm2MoeForCausalLM",
    config_class="Lfm2MoeConfig",
    preview=preview,
    not_applicable={
        "expert_weights_sum": "the router divides the chosen weights by their sum plus 10⁻⁶, a constant its forward writes in, "
                              "so they sum to a little under one (the routing step on the router's page shows the division)",
    },
)
