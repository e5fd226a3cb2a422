"""Youtu-LLM (model_type youtu): Tencent's small dense decoder with DeepSeek's latent attention.

Every block is pre-norm: an RMSNorm, multi-head latent attention, the residual add, a second RMSNorm
and a SwiGLU MLP. The queries pass through a low-rank bottleneck (q_a_proj, an RMSNorm, q_b_proj); the
keys and values of every head are rebuilt from one latent per token (kv_a_proj_with_mqa, an RMSNorm,
kv_b_proj), beside one rotary key part shared by all heads, so a cache keeps only the latent and that
part. Only the rotary part of each query and key carries positions, its dimensions paired up in the
stored projections. Unlike DeepSeek's models no block holds a mixture of experts, and the output head
reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Youtu-LLM",
    vendor="Tencent",
    released="2025-12",
    summary=(
        "A small dense decoder with latent attention (low-rank queries, keys and values rebuilt from one "
        "cached latent and a shared rotary key) and a SwiGLU MLP; tied embeddings."
    ),
    tags=("Latent attention", "SwiGLU", "Dense"),
    checkpoint="tencent/Youtu-LLM-2B",
    model_class="YoutuForCausalLM",
    config_class="YoutuConfig",
)
