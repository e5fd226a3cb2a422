"""Gemma 2 (model_type gemma2): sandwich norms, soft-capped logits and alternating local/global attention.

The token embedding is multiplied by sqrt(hidden_size) before the first block, so the residual stream
does not start equal to the embedding rows. Each block wraps both sublayers in a "sandwich": an RMSNorm
before attention and another on its output before the add, then the same pair around the MLP
(pre_feedforward_layernorm, post_feedforward_layernorm). Gemma's RMSNorm scales by (1 + weight), so a
zero weight is the identity. Attention logits are soft-capped, cap * tanh(logits / cap), and so are
the final vocabulary logits. Blocks alternate between sliding-window attention and attention over the
whole prefix; the two are the same modules with different masks. The MLP is a GeGLU (tanh-approximated
GELU gate), and the output head is tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Gemma 2",
    vendor="Google",
    released="2024-06",
    summary=(
        "Sandwich-normed blocks alternating sliding-window and global attention, with soft-capped "
        "attention and output logits and scaled, tied embeddings."
    ),
    tags=("Sliding/global alternation", "Sandwich norms", "Logit softcap", "Tied embeddings"),
    checkpoint="google/gemma-2-9b",
    sizes=("google/gemma-2-2b", "google/gemma-2-27b"),
    model_class="Gemma2ForCausalLM",
    config_class="Gemma2Config",
)
