"""GLM-4 (model_type glm4): Zhipu's dense decoder with four norms to a block and half-width rotary.

A block keeps the pre-norm arrangement (an RMSNorm before attention and another before the MLP) and
adds a second RMSNorm after each sublayer, on its output, before the residual add: four norms to a
block (input_layernorm, post_self_attn_layernorm, post_attention_layernorm, post_mlp_layernorm; the
third is the norm in front of the MLP, despite its name). Attention is grouped-query with biases on the
query, key and value projections and none on the output; rotary positions turn only the first half of
each head, pair by pair. The MLP is SwiGLU with its gate and up projections stored as one fused matrix.
The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GLM-4",
    vendor="Zhipu AI (Z.ai)",
    released="2025-04",
    summary=(
        "A grouped-query decoder with four RMSNorms to a block (before and after each sublayer), q/k/v "
        "biases, rotary positions on half of each head and a fused SwiGLU."
    ),
    tags=("Sandwich norms", "QKV bias", "Partial rotary", "Fused gate/up", "SwiGLU", "Dense"),
    checkpoint="zai-org/GLM-4-9B-0414",
    model_class="Glm4ForCausalLM",
    config_class="Glm4Config",
)
