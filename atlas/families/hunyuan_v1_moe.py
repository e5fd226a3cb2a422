"""Hunyuan MoE (model_type hunyuan_v1_moe): Tencent's A13B, Hunyuan's dense attention over a softmax-routed mixture with a shared MLP.

The attention is the dense Hunyuan's: grouped-query, rotary positions with a fixed NTK-alpha
stretch of the base for a long context, and an RMSNorm one head wide on queries and keys applied
after the rotation. In place of the MLP every block holds a mixture: a router (in float32) takes a
softmax over all experts, keeps the top moe_topk and renormalises their weights to one; each expert
is a SwiGLU, and a shared SwiGLU of the same width runs on every token and is added to the routed
sum. The output head reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Hunyuan MoE",
    vendor="Tencent",
    released="2025-06",
    summary=(
        "Hunyuan's grouped-query attention with q/k norms after the rotation and NTK-alpha rotary, over a "
        "softmax-routed mixture of SwiGLU experts beside a shared MLP; tied embeddings."
    ),
    tags=("Q/K norm", "NTK-alpha rotary", "Shared expert", "Top-k routing"),
    checkpoint="tencent/Hunyuan-A13B-Instruct",
    model_class="HunYuanMoEV1ForCausalLM",
    config_class="HunYuanMoEV1Config",
    config_overrides={"moe_topk": 8, "head_dim": 128},
    override_reasons={
        "head_dim": (
            "the copy names the head width attention_head_dim, the key Tencent's own code reads; transformers' class "
            "reads head_dim and derives no default, so the width (hidden_size over num_attention_heads) is given "
            "under its name"
        ),
        "moe_topk": (
            "the file gives one top-k per layer, every entry 8; transformers takes an integer or a list alike "
            "(each gate reads its own entry), and the atlas's tiny preview config needs the single number to "
            "keep the share of experts per token"
        ),
    },
)
