"""GLM-5 (model_type glm_moe_dsa): DeepSeek-V3.2's sparse latent attention and sigmoid-routed mixture, at GLM's sizes.

Each block is an RMSNorm before multi-head latent attention and an RMSNorm before the feed-forward
sublayer: dense SwiGLU MLPs on the first first_k_dense_replace blocks, then a mixture of routed experts
under a sigmoid router with a selection bias, in one expert group, plus a shared expert. The attention
carries DeepSeek Sparse Attention's lightning indexer: its own heads score every earlier position from
the attention's query latent and one LayerNorm-ed key per position, a weight per head mixes their ReLU
scores, and the attention reads only the index_topk best positions. Unlike DeepSeek-V3.2, the indexer
rotates its leading dimensions in adjacent pairs, as the attention itself does. transformers' class can
also let a block reuse the previous block's selection instead of running its own indexer
(indexer_types); GLM-5's config asks for none of that, so every block runs its own.

Compared with DeepSeek-V3.2 the heads are fewer and wider (query and key heads of 192 + 64 dims, value
heads of 256), there are more blocks and a larger vocabulary. The released files also store a
multi-token-prediction block after the last layer; transformers never builds it, so the atlas counts
it only where it checks the files.
"""

from __future__ import annotations

from atlas.families.deepseek_v3 import multi_token_prediction_tensors
from atlas.inputs.family import Family

FAMILY = Family(
    title="GLM-5",
    vendor="Zhipu AI (Z.ai)",
    released="2026-02",
    summary=(
        "Sparse latent attention, a lightning indexer choosing the index_topk positions each query reads, then a "
        "sigmoid-routed mixture of experts with a shared expert after three dense blocks."
    ),
    tags=("Sparse attention", "Latent attention", "Shared expert", "Dense first blocks"),
    checkpoint="zai-org/GLM-5",
    model_class="GlmMoeDsaForCausalLM",
    config_class="GlmMoeDsaConfig",
    config_overrides={"num_nextn_predict_layers": 0},
    override_reasons={"num_nextn_predict_layers": (
        "transformers builds no multi-token-prediction block, so the model is built without one; the block's "
        "tensors, which the released files do hold, are added back to the checkpoint check (stored_extras)."
    )},
    stored_extras=multi_token_prediction_tensors,
)
