"""FlexOlmo (model_type flex_olmo): Ai2's mixture of separately trained experts in OLMo 2's post-norm block.

The block is OLMo 2's: the residual stream goes straight into attention and into the mixture, and each
sublayer's output passes through an RMSNorm before it is added back (post_attention_layernorm,
post_feedforward_layernorm). Queries and keys pass through an RMSNorm as wide as the whole projection
before they are rotated, and every head has its own keys and values. In place of the MLP is a
mixture of experts, each a SwiGLU as wide as OLMo 2's MLP: FlexOlmo's experts were trained apart, each
on its own data, around a shared public expert, and merged, so a data owner's expert can be left out
at inference. The router takes a softmax over all experts and keeps the top num_experts_per_tok
without renormalising their weights. The output head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="FlexOlmo",
    vendor="Allen Institute for AI",
    released="2025-07",
    summary=(
        "The post-norm OLMo block with full-width q/k norms around a mixture of separately trained, "
        "full-width SwiGLU experts, softmax top-k routed without renormalising."
    ),
    tags=("Post-norm sublayers", "Q/K norm", "Top-k routing"),
    checkpoint="allenai/FlexOlmo-7x7B-1T",
    model_class="FlexOlmoForCausalLM",
    config_class="FlexOlmoConfig",
    not_applicable={
        "mixture_sum": ("the block normalises the mixture's output (post_feedforward_layernorm) before the add, so "
                        "mlp_output is the norm's output, not the routed sum; the notes check the norm of the routed "
                        "sum against it instead"),
    },
)
