"""OLMoE (model_type olmoe): OLMo's query/key-normed attention and a mixture of many small experts in every block.

A pre-norm block in Llama's arrangement: RMSNorm, attention, residual add; RMSNorm, mixture, residual
add. The attention is full multi-head attention (as many key-value heads as query heads) whose
projected queries and keys each pass an RMSNorm over their whole width, all heads together, before
the rotary embedding. Every block's MLP is a mixture of narrow SwiGLU experts with no shared expert:
the router takes a softmax over all expert logits and keeps the num_experts_per_tok largest
probabilities as they are, without renormalising them (norm_topk_prob is off), so a token's expert
weights sum to less than one.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="OLMoE",
    vendor="Allen Institute for AI (Ai2)",
    released="2024-09",
    summary=(
        "Fully open mixture of experts: normed queries and keys in multi-head attention, then many small "
        "SwiGLU experts per block, the top few weighted by their softmax probabilities without renormalising."
    ),
    tags=("Softmax top-k routing", "Q/K norm", "Open data"),
    checkpoint="allenai/OLMoE-1B-7B-0924",
    model_class="OlmoeForCausalLM",
    config_class="OlmoeConfig",
)
