"""K-EXAONE (model_type exaone_moe): LG AI Research's mixture, windowed and global attention over routed and shared experts.

Each block is pre-norm: an RMSNorm, grouped-query attention with an RMSNorm one head wide on the
queries and keys, the residual add, a second RMSNorm and the feed-forward part. Three blocks in four
see only a sliding window of recent tokens with rotary positions; every fourth sees the whole context
without positions. The first block has a dense SwiGLU MLP; every later block has a mixture: a sigmoid
router with a selection bias picks num_experts_per_tok of many small SwiGLU experts, whose weights are
renormalised and scaled by routed_scaling_factor, and a shared SwiGLU expert runs on every token beside
them. The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="K-EXAONE",
    vendor="LG AI Research",
    released="2025-12",
    summary=(
        "Windowed and global grouped-query attention with per-head q/k norms over a sigmoid-routed mixture "
        "of small SwiGLU experts and a shared expert, after one dense block."
    ),
    tags=("Q/K norm", "Shared expert", "Top-k routing"),
    checkpoint="LGAI-EXAONE/K-EXAONE-236B-A23B",
    model_class="ExaoneMoeForCausalLM",
    config_class="ExaoneMoeConfig",
)
