"""Hunyuan-A13B (model_type hunyuan_v1_moe): grouped-query attention with q/k norms after the rotation, then routed experts plus a shared MLP in every block.

Every block is alike: RMSNorm, grouped-query attention, residual add; RMSNorm, mixture, residual add.
The attention rotates queries and keys first and only then passes each head through an RMSNorm
(query_layernorm, key_layernorm), the reverse of the order Qwen3 uses. Its rotary base is stretched
by NTK-aware scaling with a fixed alpha, so the angles do not depend on the length of the input.
Each mixture runs a shared SwiGLU MLP on every token and adds to it the routed experts' weighted sum:
the router (a float32 linear map, gate.wg) takes a softmax over all experts, keeps the largest
moe_topk and renormalises their probabilities to sum to one. The experts and the shared MLP all have
the width intermediate_size, and the output head reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Hunyuan-A13B",
    vendor="Tencent",
    released="2025-06",
    summary=(
        "Grouped-query attention whose per-head q/k norms follow the rotation, then a softmax-routed mixture "
        "of experts added to a shared MLP in every block; tied embeddings."
    ),
    tags=("Shared expert", "Q/K norm", "NTK-alpha rotary"),
    checkpoint="tencent/Hunyuan-A13B-Instruct",
    model_class="HunYuanMoEV1ForCausalLM",
    config_class="HunYuanMoEV1Config",
    config_overrides={"head_dim": 128, "moe_topk": 8},
    override_reasons={
        "head_dim": (
            "the training copy gives the head width as attention_head_dim (128), a key transformers does not read; "
            "transformers' rotary scaling needs head_dim itself"
        ),
        "moe_topk": (
            "the copy lists 8 once per layer; the value is the same at every layer, and the atlas's per-token counts "
            "(active parameters, FLOPs, the preview's share of experts) need the one number, which the configuration "
            "class also accepts"
        ),
    },
)
