"""GLM-4.7 Flash (model_type glm4_moe_lite): Zhipu's small mixture, DeepSeek-V3's latent attention over GLM-4.5's sigmoid router.

Attention is multi-head latent attention: the queries pass through a low-rank bottleneck
(q_a_proj, an RMSNorm, q_b_proj), and the keys and values are rebuilt per head from one shared
latent (kv_a_proj_with_mqa, an RMSNorm, kv_b_proj) plus a single rotary key part shared by every
head, so only the latent and that rotary part need caching. The first block keeps a dense SwiGLU MLP;
every later block is a mixture whose router scores each routed expert with a sigmoid, adds a learned
selection bias only to choose the top num_experts_per_tok, and weights the chosen experts by their
unbiased scores renormalised and scaled by routed_scaling_factor. One shared expert runs on every
token. The output head is a separate matrix.

The released files also hold a multi-token-prediction block after the last layer, which transformers
does not build; the atlas counts it only where it predicts the files.
"""

from atlas.families.deepseek_v3 import multi_token_prediction_tensors
from atlas.inputs.family import Family

FAMILY = Family(
    title="GLM-4.7 Flash",
    vendor="Zhipu AI (Z.ai)",
    released="2026-01",
    summary=(
        "Latent attention with a low-rank query and a shared rotary key, then a sigmoid-routed mixture "
        "with a selection bias and one shared expert after a dense first block."
    ),
    tags=("Latent attention", "Shared expert", "Selection bias", "Dense first blocks"),
    checkpoint="zai-org/GLM-4.7-Flash",
    model_class="Glm4MoeLiteForCausalLM",
    config_class="Glm4MoeLiteConfig",
    stored_extras=multi_token_prediction_tensors,
)
