"""ERNIE 4.5 MoE (model_type ernie4_5_moe): grouped-query attention with pairwise rotary, then routed experts chosen with a selection bias plus always-on shared experts.

A pre-norm block with RMSNorms. Attention is grouped-query attention without biases, and its rotary
embedding turns adjacent pairs of dimensions (0 with 1, 2 with 3, ...) and leaves the result in
place, rather than pairing the first half of a head with the second. The first moe_layer_start_index
blocks keep a dense SwiGLU MLP; from there every moe_layer_interval-th block up to
moe_layer_end_index is a mixture. The router takes a softmax over all routed experts' logits, adds a
learned per-expert bias (held in a small child module, moe_statics) only to decide which experts are
chosen, and renormalises the chosen experts' unbiased probabilities to sum to one. The shared experts
are one SwiGLU MLP of moe_num_shared_experts times an expert's width, run on every token and added
to the routed sum. The output head reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="ERNIE 4.5 MoE",
    vendor="Baidu",
    released="2025-06",
    summary=(
        "Grouped-query attention with pairwise rotary, then a softmax-routed mixture whose choice is steered "
        "by a learned per-expert bias, plus shared experts on every token; tied embeddings."
    ),
    tags=("Shared expert", "Selection bias", "Dense first blocks"),
    checkpoint="baidu/ERNIE-4.5-21B-A3B-PT",
    model_class="Ernie4_5_MoeForCausalLM",
    config_class="Ernie4_5_MoeConfig",
)
