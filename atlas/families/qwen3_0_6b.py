"""Qwen3-0.6B: the qwen3 architecture at its smallest size, with the output head tied to the embedding.

Everything about the block is qwen3's (per-head q/k RMSNorm, grouped-query attention, SwiGLU). The
config sets tie_word_embeddings, so the model computes logits with the token-embedding matrix itself
and has one such matrix, not two. This module reuses qwen3's declaration and changes only the
checkpoint and the words about it; the checkpoint folder says how the released file stores the head.
"""

from atlas.families.qwen3 import FAMILY as QWEN3

FAMILY = QWEN3.but(
    title="Qwen3-0.6B",
    summary=(
        "Qwen3's block at its smallest size, with the output head tied to the token embedding in the model."
    ),
    tags=("Q/K norm", "Tied embeddings", "Dense"),
    checkpoint="Qwen/Qwen3-0.6B",
)
