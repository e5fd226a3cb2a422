"""Mellum 2 (model_type mellum): JetBrains' code mixture, windowed and global attention with their own rotary settings.

Every block is pre-norm: an RMSNorm, grouped-query attention, the residual add, a second RMSNorm and a
mixture of experts. Queries and keys pass through an RMSNorm one head wide before they are rotated.
Three blocks in four see only a sliding window of recent tokens; every fourth sees the whole context,
and the two kinds take their rotary frequencies from separate settings: the windowed blocks plain
rotary, the global blocks a YaRN stretch of the trained context. The mixture's router takes a softmax
over all experts, keeps the top num_experts_per_tok and renormalises their weights to one; each expert
is a small SwiGLU and no expert is shared. The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Mellum 2",
    vendor="JetBrains",
    released="2026-04",
    summary=(
        "A code model: windowed and global grouped-query attention blocks with their own rotary settings "
        "and per-head q/k norms, over a softmax-routed mixture of small SwiGLU experts."
    ),
    tags=("Q/K norm", "YaRN", "Top-k routing", "Code"),
    checkpoint="JetBrains/Mellum2-12B-A2.5B-Base",
    model_class="MellumForCausalLM",
    config_class="MellumConfig",
)
