"""Seed-OSS (model_type seed_oss): ByteDance's long-context decoder, a Llama block with biased query, key and value projections.

Each block is the familiar pre-norm arrangement: an RMSNorm, grouped-query attention with rotary
positions, the residual add, a second RMSNorm and a SwiGLU MLP. Two details set it apart. The query,
key and value projections carry biases while the output projection and the MLP do not, a split the
configuration states with separate switches (attention_bias, attention_out_bias, mlp_bias). And the
attention is strongly grouped: many query heads share each key/value head, so the KV cache stays
small for a model of this width, which matters at the very long context the rotary base is set for.
Dropout after attention and after the MLP is configured for training and does nothing at inference.
The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Seed-OSS",
    vendor="ByteDance Seed",
    released="2025-08",
    summary=(
        "A pre-norm grouped-query decoder whose query, key and value projections carry biases, with a "
        "large rotary base for very long contexts."
    ),
    tags=("QKV bias", "SwiGLU", "Dense"),
    checkpoint="ByteDance-Seed/Seed-OSS-36B-Instruct",
    model_class="SeedOssForCausalLM",
    config_class="SeedOssConfig",
)
