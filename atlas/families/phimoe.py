"""Phi-3.5-MoE (model_type phimoe): biased grouped-query attention and LayerNorms, then sixteen experts picked two at a time by SparseMixer routing.

Each block normalises the stream with a LayerNorm (a gain and a bias, not RMSNorm) before attention
and before the mixture. Attention is grouped-query attention whose four projections all carry biases.
Every block's MLP is a mixture of SwiGLU experts without a shared expert. The router's rule is not a
softmax over a top-k: SparseMixer picks the best expert, then masks out every logit that lies too far
below it (relative to the spread of the logits) and takes the chosen expert's weight as a softmax over
the logits that survive; the second expert is picked the same way with the first one masked out. At
inference this makes each weight a softmax over a token-dependent subset of the logits, so the two
weights need not sum to one. The output head carries a bias too.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Phi-3.5-MoE",
    vendor="Microsoft",
    released="2024-08",
    summary=(
        "Grouped-query attention with biased projections and LayerNorms, then a mixture of SwiGLU experts "
        "chosen two per token by SparseMixer's masked-softmax routing."
    ),
    tags=("SparseMixer routing", "LayerNorm"),
    checkpoint="microsoft/Phi-3.5-MoE-instruct",
    model_class="PhimoeForCausalLM",
    config_class="PhimoeConfig",
    config_overrides={"architectures": ["PhimoeForCausalLM"]},
    override_reasons={
        "architectures": (
            "the released config names PhiMoEForCausalLM, the class of the checkpoint's own remote code; "
            "transformers ships the same architecture natively as PhimoeForCausalLM, which is what the atlas builds"
        ),
    },
)
