"""Qwen3-Next (model_type qwen3_next): gated DeltaNet layers with a recurrent state, full attention at a fixed interval, and a wide mixture of experts.

Most blocks mix tokens without attention scores: a gated DeltaNet layer projects queries,
keys, values, a per-head write strength (beta) and a per-head decay from the stream, runs the queries,
keys and values through a short causal depthwise convolution, and then keeps one matrix per value
head that it updates token by token: the matrix is first shrunk by the decay, then corrected towards
the new value along the new key (the delta rule, scaled by beta), and read out with the query. What a
layer carries from one token to the next is that fixed-size matrix and the convolution's last few
inputs, however long the text. The read-out is RMS-normalized per head, gated by a SiLU of a further
projection, and projected back to the width.

Every full_attention_interval-th block uses full attention instead: grouped-query attention with
per-head q/k norms, rotary angles on only a part of each head (partial_rotary_factor), and an output
gate, the query projection giving each head a second half whose sigmoid scales the head's output.

Every block's feed-forward part is a mixture of many narrow SwiGLU experts chosen by softmax top-k
routing (renormalized), plus one shared expert whose contribution a learned sigmoid gate scales per
token. The RMSNorms store their gain as an offset from one.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Qwen3-Next",
    vendor="Qwen (Alibaba)",
    released="2025-09",
    summary=(
        "Gated DeltaNet layers that carry a fixed-size state between tokens, gated full attention at a "
        "fixed interval, and a wide mixture of narrow experts with a gated shared expert."
    ),
    tags=("Linear attention", "Gated DeltaNet", "Hybrid attention", "Shared expert"),
    checkpoint="Qwen/Qwen3-Next-80B-A3B-Instruct",
    model_class="Qwen3NextForCausalLM",
    config_class="Qwen3NextConfig",
    not_applicable={
        "mixture_sum": "the shared expert's output is multiplied by a per-token sigmoid gate (shared_expert_gate) before "
                       "it joins the routed experts' sum, so routed + shared alone is not the MLP's output; the mixture's "
                       "proven steps apply the gate",
    },
)
