"""Qwen3 MoE (model_type qwen3_moe): Qwen3's attention with a fine-grained mixture of many small experts.

Attention is Qwen3's: grouped-query attention with an RMSNorm on each query and key head before the
rotary embedding. Every block's MLP is a mixture: a bias-free router gives one logit per expert, the
softmax over all of them is taken, the num_experts_per_tok largest are kept and (norm_topk_prob)
renormalised to sum to one, and the chosen SwiGLU experts' outputs are added with those weights. The
experts are narrow (moe_intermediate_size) and numerous, and there is no shared expert.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Qwen3 MoE",
    vendor="Qwen (Alibaba)",
    released="2025-04",
    summary=(
        "Qwen3's q/k-normed attention followed by a mixture of many narrow SwiGLU experts, a handful "
        "chosen per token by softmax routing, with no shared expert."
    ),
    tags=("Softmax top-k routing", "Q/K norm"),
    checkpoint="Qwen/Qwen3-30B-A3B",
    sizes=("Qwen/Qwen3-235B-A22B",),
    model_class="Qwen3MoeForCausalLM",
    config_class="Qwen3MoeConfig",
)
