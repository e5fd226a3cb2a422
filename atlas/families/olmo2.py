"""OLMo 2 (model_type olmo2): norms after the sublayers instead of before, and q/k norms over all heads.

Each block feeds the residual stream straight into attention and into the MLP; the RMSNorm comes after,
on the sublayer's output, before it is added back (post_attention_layernorm, post_feedforward_layernorm).
There is no input norm. Queries and keys are normalised by an RMSNorm across the whole projection,
all heads together, before being split into heads and rotated. The MLP is SwiGLU, there are no biases,
and the output head is separate from the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="OLMo 2",
    vendor="Allen Institute for AI",
    released="2024-11",
    summary=(
        "A decoder that normalises each sublayer's output rather than its input, with RMSNorm on the full "
        "query and key projections."
    ),
    tags=("Post-norm sublayers", "Q/K norm", "SwiGLU", "Dense"),
    checkpoint="allenai/OLMo-2-1124-7B",
    model_class="Olmo2ForCausalLM",
    config_class="Olmo2Config",
)
