"""gpt-oss (model_type gpt_oss): attention sinks, alternating banded/full attention and biased experts.

Blocks alternate between attention over a short sliding window and attention over the whole prefix,
as config.layer_types lists. Every attention has a learned sink per head: an extra logit that joins the
softmax's denominator but has no value, so a head can put weight on "nothing". The projections carry
biases, and so do the router and the experts. The MLP is a mixture of experts: the router picks the
num_experts_per_tok largest logits and softmaxes only those; each expert computes a clamped SwiGLU
variant, (up + 1) * gate * sigmoid(alpha * gate), after capping gate from above and clipping up on both
sides at swiglu_limit.

The released files store the experts' weight matrices in MXFP4 (four-bit values in blocks of 32 with
one shared power-of-two scale); everything else is stored in bfloat16.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="gpt-oss",
    vendor="OpenAI",
    released="2025-08",
    summary=(
        "Alternating sliding-window and full attention with learned sinks, then a mixture of biased, "
        "clamped-SwiGLU experts whose weights ship in MXFP4."
    ),
    tags=("Attention sinks", "Sliding/full alternation"),
    checkpoint="openai/gpt-oss-20b",
    model_class="GptOssForCausalLM",
    config_class="GptOssConfig",
    not_applicable={
        "attention_rows": "each head's learned sink logit joins the softmax and takes part of every row's probability mass",
        "attention_softmax": "the softmax runs over the scores and the head's sink logit together; the sink's column is dropped after it",
    },
)
