"""VaultGemma (model_type vaultgemma): Google's differentially private Gemma, Gemma 2's attention in Gemma 1's block.

VaultGemma was trained with differential privacy; the architecture itself is a small Gemma. Each block
is pre-norm with one RMSNorm before attention and one before the MLP and no norms after the sublayers
(Gemma 2 and 3 add those). Attention keeps Gemma 2's traits: every head has its own keys and values
here, queries are scaled by query_pre_attn_scalar rather than the head width, attention logits are
soft-capped, and layers alternate between a sliding window and the whole context. The MLP is GeGLU
(tanh-approximated GELU on the gate), the embeddings are multiplied by the square root of the width,
the final logits are soft-capped, and the output head reuses the embedding matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="VaultGemma",
    vendor="Google",
    released="2025-09",
    summary=(
        "A small Gemma trained with differential privacy: pre-norm blocks without post-norms, soft-capped "
        "attention alternating windowed and global layers, GeGLU and a tied, soft-capped head."
    ),
    tags=("Sliding/global alternation", "Logit softcap", "Tied embeddings", "GeGLU", "Dense"),
    checkpoint="google/vaultgemma-1b",
    model_class="VaultGemmaForCausalLM",
    config_class="VaultGemmaConfig",
)
