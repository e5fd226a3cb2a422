"""Cohere2 MoE (model_type cohere2_moe): Command A's parallel block with a mixture of experts in place of the MLP.

Each block normalises the stream once, with a LayerNorm that has a gain and no bias, and hands that
one tensor to both its attention and its mixture; their outputs are added to the stream together. As
in Command A, three blocks in four attend within a sliding window with rotary positions, and every
fourth attends to the whole context with no positions at all. The mixture's router keeps the top
num_experts_per_tok logits and softmaxes only those; each expert is a SwiGLU, and this checkpoint
holds no shared expert. The logits are multiplied by logit_scale, and the output head reuses the
embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Cohere2 MoE",
    vendor="Cohere",
    released="2026-05",
    summary=(
        "Command A's parallel block, one bias-free LayerNorm feeding attention and a top-k routed mixture "
        "of SwiGLU experts, windowed rotary blocks and position-free global ones; a scaled tied head."
    ),
    tags=("Parallel attention and MLP", "LayerNorm", "Scaled logits", "Top-k routing"),
    checkpoint="CohereLabs/command-a-plus-05-2026",
    model_class="Cohere2MoeForCausalLM",
    config_class="Cohere2MoeConfig",
)
