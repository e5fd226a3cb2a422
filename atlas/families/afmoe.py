"""AFMoE (model_type afmoe): Arcee's Trinity models, gated attention in sandwich norms over a sigmoid-routed mixture.

Each block normalises the stream before attention and again after it (input_layernorm,
post_attention_layernorm), and before and after the MLP (pre_mlp_layernorm, post_mlp_layernorm); only the
normalised outputs join the stream. Attention is grouped-query attention with per-head q/k norms and an
output gate: a sigmoid of another projection of the block's input multiplies the heads' output before
o_proj. Three blocks in four attend within a sliding window with rotary positions, the fourth attends
to the whole context without positions. The first num_dense_layers blocks have a dense SwiGLU MLP; the
others a mixture whose router scores experts with a sigmoid, adds a learned selection bias for the
choice only, renormalises the kept scores and multiplies them by route_scale, beside a shared expert.
With muP enabled the embeddings are multiplied by the square root of the width.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Trinity (AFMoE)",
    vendor="Arcee AI",
    released="2025-11",
    summary=(
        "Sandwich-normed blocks with gated grouped-query attention, windowed and global, over a "
        "sigmoid-routed mixture of small SwiGLU experts with a shared expert, after two dense blocks."
    ),
    tags=("Gated attention", "Shared expert", "Dense first blocks"),
    checkpoint="arcee-ai/Trinity-Nano-Preview",
    model_class="AfmoeForCausalLM",
    config_class="AfmoeConfig",
    not_applicable={
        "mixture_sum": (
            "the block normalises the mixture's output (post_mlp_layernorm) before the add, so mlp_output, the "
            "block's addition to the stream, is the RMSNorm of the routed and shared experts' sum, not the sum"
        ),
        "embeddings": (
            "with mup_enabled the model multiplies the embedding rows by the square root of hidden_size before "
            "block 0 reads them, so the first block's input is that multiple of token_embeddings"
        ),
    },
)
