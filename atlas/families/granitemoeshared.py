"""GraniteMoeShared (model_type granitemoeshared): GraniteMoE's block with a shared SwiGLU expert beside the mixture.

The block is GraniteMoE's: an RMSNorm, attention, the residual add, a second RMSNorm and a mixture of
experts, every sublayer's output multiplied by residual_multiplier before it is added back, the
embeddings multiplied by embedding_multiplier, the attention scores by attention_multiplier and the
logits divided by logits_scaling. The router keeps the top num_experts_per_tok logits and softmaxes
only those; each expert is a SwiGLU, all experts' gate and up matrices one fused tensor and their down
matrices another. What this model type adds is a shared expert: a SwiGLU of width
shared_intermediate_size, the block's own child beside the mixture, that runs on every token and whose
output the block adds to the mixture's before the residual add. The pinned configuration is the
configuration class's defaults (see the checkpoint's provenance), not a released file.
"""

from atlas.inputs.family import Family

_SHARED_BESIDE = (
    "the shared expert is the block's own child beside the mixture: the block adds its output to the "
    "mixture's, so mlp_output, the mixture's output, leaves out the shared expert's share of what the block adds"
)

FAMILY = Family(
    title="GraniteMoeShared",
    vendor="IBM",
    released="2025-01",
    summary=(
        "GraniteMoE's multipliers and top-k routed SwiGLU experts, with a shared SwiGLU expert on every "
        "token beside the mixture; the sizes are the configuration class's defaults."
    ),
    tags=("Shared expert", "Residual scaling", "Top-k routing"),
    checkpoint="ibm-research/moe-7b-1b-active-shared-experts",
    model_class="GraniteMoeSharedForCausalLM",
    config_class="GraniteMoeSharedConfig",
    not_applicable={
        "block_sum": _SHARED_BESIDE,
        "mixture_sum": _SHARED_BESIDE,
    },
)
