"""Zamba2 (model_type zamba2): Zyphra's Mamba-2 stack with one transformer block shared across depth,
reused every sixth block with adapters of its own at each use.

Most blocks are a Mamba-2 mixer between an RMSNorm and the residual add, with no feed-forward. At the
blocks config.hybrid_layer_ids names, the one shared transformer block runs first: it reads the current
stream concatenated with the original token embeddings (twice the width), runs attention over that and
then a gated feed-forward, and a linear projection of that block's own brings the result back to the
width and adds it to the stream before the block's Mamba-2 mixer runs. The shared block's weights are
stored once; each use adds only low-rank (LoRA) adapters to the shared query, key and value projections
and to the feed-forward's gate-and-up projection, indexed by the block that uses it, so every reuse
computes a slightly different function at the cost of a few matrices. The head is tied to the embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Zamba2",
    vendor="Zyphra",
    released="2024-08",
    summary=(
        "Mamba-2 blocks with one shared attention-and-feed-forward block reused across depth, each use "
        "with its own low-rank adapters and projection."
    ),
    tags=("Mamba-2", "Hybrid", "Shared block", "LoRA adapters"),
    checkpoint="Zyphra/Zamba2-1.2B",
    model_class="Zamba2ForCausalLM",
    config_class="Zamba2Config",
)
