"""Gemma (model_type gemma): multi-head attention with wide heads, a GeGLU MLP and a scaled, tied embedding.

The token embedding is multiplied by sqrt(hidden_size) before the first block, and the output head reuses
the embedding matrix. Every block is pre-norm with Gemma's RMSNorm, which scales by (1 + weight) so a zero
weight leaves the input unchanged. The 7B model gives every query head its own key and value head (plain
multi-head attention) and makes each head wider than the hidden size divided by the heads, so the
attention's inner width exceeds the residual width. The MLP is gated with a tanh-approximated GELU
(GeGLU), and its hidden layer is eight times the residual width.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Gemma",
    vendor="Google",
    released="2024-02",
    summary=(
        "Pre-norm blocks of multi-head attention with wide heads and a GeGLU MLP, RMSNorm scaling by one "
        "plus its weight, and a scaled embedding tied to the head."
    ),
    tags=("Multi-head attention", "GeGLU", "Tied embeddings", "Dense"),
    checkpoint="google/gemma-7b",
    sizes=("google/gemma-2b",),
    model_class="GemmaForCausalLM",
    config_class="GemmaConfig",
)
