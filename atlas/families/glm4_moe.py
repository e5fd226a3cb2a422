"""GLM-4.5 MoE (model_type glm4_moe): grouped-query attention with half-width rotary, then a sigmoid-routed mixture with a shared expert.

Attention keeps many query heads over few key-value heads, with biases on the query, key and value
projections. Only the first half of each head's dimensions is rotated (partial_rotary_factor); the
rest carries no position at all. After the first first_k_dense_replace blocks, which keep a plain
SwiGLU MLP, every block is a mixture: the router scores each routed expert with a sigmoid of its
logit, adds a learned selection bias only to decide which experts win, keeps the num_experts_per_tok
best, and weights them by their unbiased scores renormalised to one and scaled by
routed_scaling_factor. One shared expert, narrow like the routed ones, sees every token and is added
to the weighted sum. The routing is DeepSeek-V3's; the attention is ordinary grouped-query attention
rather than latent attention.

The released files also hold a multi-token-prediction block after the last layer, which transformers
does not build; the atlas counts it only where it predicts the files.
"""

from atlas.families.deepseek_v3 import multi_token_prediction_tensors
from atlas.inputs.family import Family

FAMILY = Family(
    title="GLM-4.5 Air",
    vendor="Zhipu AI (Z.ai)",
    released="2025-07",
    summary=(
        "Grouped-query attention with biased projections and rotary on half of each head, then a "
        "sigmoid-routed mixture of narrow experts plus a shared expert after a dense first block."
    ),
    tags=("Sigmoid routing", "Shared expert", "Partial rotary"),
    checkpoint="zai-org/GLM-4.5-Air",
    model_class="Glm4MoeForCausalLM",
    config_class="Glm4MoeConfig",
    stored_extras=multi_token_prediction_tensors,
)
