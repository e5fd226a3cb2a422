"""GLM (model_type glm): the first GLM-4 release in transformers' own layout, two norms to a block and half-width rotary.

Each block is pre-norm: an RMSNorm, grouped-query attention, the residual add, a second RMSNorm and the
MLP. Attention has biases on the query, key and value projections and none on the output; very few key
and value heads serve all the query heads, and rotary positions turn only the first half of each head,
pair by pair. The MLP is SwiGLU with its gate and up projections stored as one fused matrix. The output
head is a separate matrix. The later GLM-4 release (model_type glm4) adds a norm after each sublayer;
this one has none.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GLM-4 (first release)",
    vendor="Zhipu AI (THUDM)",
    released="2024-06",
    summary=(
        "A pre-norm grouped-query decoder with two key/value heads, q/k/v biases, rotary positions on half "
        "of each head and a fused SwiGLU; an untied head."
    ),
    tags=("QKV bias", "Partial rotary", "Fused gate/up", "SwiGLU", "Dense"),
    checkpoint="THUDM/glm-4-9b-chat-hf",
    model_class="GlmForCausalLM",
    config_class="GlmConfig",
)
