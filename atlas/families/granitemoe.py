"""GraniteMoE (model_type granitemoe): IBM's Granite 3 block with its four multipliers, a mixture of small experts in place of the MLP.

Each block is pre-norm: an RMSNorm, grouped-query attention, the residual add, a second RMSNorm and a
mixture of experts, every sublayer's output scaled by residual_multiplier before it is added back. As
in dense Granite, the embeddings are multiplied by embedding_multiplier, attention scores use
attention_multiplier in place of one over the square root of the head width, and the logits are
divided by logits_scaling. The mixture's router is a linear map whose top num_experts_per_tok logits
are softmaxed into the chosen experts' weights; each expert is a small SwiGLU, all experts' gate and
up matrices stored as one fused tensor and their down matrices as another. There is no shared expert,
and the output head reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="GraniteMoE",
    vendor="IBM",
    released="2024-10",
    summary=(
        "Granite's scaled embeddings, attention, residual adds and logits around a mixture of many small "
        "SwiGLU experts, top-k routed; tied embeddings."
    ),
    tags=("Residual scaling", "Scaled logits", "Top-k routing"),
    checkpoint="ibm-granite/granite-3.0-1b-a400m-base",
    model_class="GraniteMoeForCausalLM",
    config_class="GraniteMoeConfig",
)
