"""LFM2 (model_type lfm2): Liquid AI's hybrid of gated short convolutions and a few attention layers.

Each block normalises the stream, runs one operator and adds it back, then normalises again and runs a
SwiGLU feed-forward (w2(silu(w1 x) * w3 x)). Most operators are gated short convolutions: one projection
makes three streams B, C and x of the full width; B·x is convolved along the positions with a depthwise
kernel that sees only the current token and the two before it; C gates the result, and an output
projection mixes the channels. Such a layer remembers nothing but its last few inputs, so its state is a
handful of positions whatever the context. The other operators (config.full_attn_idxs lists them) are
grouped-query attention with rotary positions and an RMSNorm on every head's query and key. The
feed-forward's width is derived from block_ff_dim: two thirds of it, rounded up to a multiple of
block_multiple_of. No biases, and the head is tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="LFM2",
    vendor="Liquid AI",
    released="2025-07",
    summary=(
        "Gated short convolutions in most blocks and grouped-query attention in a few, each followed by "
        "a SwiGLU feed-forward; a tiny fixed state for the convolution blocks."
    ),
    tags=("Short convolution", "Hybrid", "SwiGLU", "Dense"),
    checkpoint="LiquidAI/LFM2-1.2B",
    model_class="Lfm2ForCausalLM",
    config_class="Lfm2Config",
    config_defaults={
        "intermediate_size": "config.json gives it as block_ff_dim (12,288), which Lfm2Config reads into intermediate_size; "
                             "the value happens to equal the class's default, so the check for silent defaults cannot tell them apart",
    },
)
