"""Mixtral 8x7B (model_type mixtral): Mistral's attention with a sparse mixture of SwiGLU experts.

Attention is Mistral's grouped-query attention with rotary positions. In place of the dense MLP each
block has a router, a bias-free linear map from the residual width to one logit per expert, and a set
of SwiGLU experts. A token takes the softmax of its router logits, keeps the num_experts_per_tok
largest, renormalises those to sum to one, and adds the chosen experts' outputs weighted by them.
There is no shared expert that every token passes through, so the parameters a token uses are the
attention, the norms and its chosen experts only.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Mixtral 8x7B",
    vendor="Mistral AI",
    released="2023-12",
    summary=(
        "Mistral's attention followed by a sparse mixture of SwiGLU experts: softmax routing picks a few "
        "experts per token, with no shared expert."
    ),
    tags=("Softmax top-k routing", "SwiGLU"),
    checkpoint="mistralai/Mixtral-8x7B-v0.1",
    sizes=("mistralai/Mixtral-8x22B-v0.1",),
    model_class="MixtralForCausalLM",
    config_class="MixtralConfig",
)
