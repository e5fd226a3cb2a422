"""Hunyuan dense (model_type hunyuan_v1_dense): Tencent's dense decoder, Hunyuan-A13B's attention over a plain SwiGLU MLP.

Every block is the pre-norm arrangement: an RMSNorm, grouped-query attention, the residual add, a
second RMSNorm and a SwiGLU MLP. The attention is the one of its mixture-of-experts sibling: queries and
keys are rotated first and only then pass, head by head, through an RMSNorm of their own
(query_layernorm, key_layernorm). The rotary base is stretched by NTK-aware scaling with a fixed alpha,
so the angles do not depend on the length of the input, which gives the long trained context. No
projection has a bias, and the output head reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Hunyuan dense",
    vendor="Tencent",
    released="2025-07",
    summary=(
        "A grouped-query decoder whose per-head q/k norms follow the rotation, with NTK-alpha rotary "
        "scaling for a long context, a SwiGLU MLP and tied embeddings."
    ),
    tags=("Q/K norm", "NTK-alpha rotary", "SwiGLU", "Dense"),
    checkpoint="tencent/Hunyuan-7B-Instruct",
    model_class="HunYuanDenseV1ForCausalLM",
    config_class="HunYuanDenseV1Config",
)
