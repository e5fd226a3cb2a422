"""Zamba2 (model_type zamba2): Zyphra's stack of Mamba-2 blocks, with a few shared attention blocks run again and
again along the depth.

Every block runs a Mamba-2 state-space mixer after an RMSNorm and adds its output to the stream. Every sixth or so
is a hybrid block, which first runs one of num_mem_blocks shared blocks, taken in turn. A shared block reads the
block's input set beside the token embeddings, twice the width: an RMSNorm over that doubled width, an attention
whose projections read it (the scores scaled by the inverse square root of half a head's width) and whose output
map returns to the width, then an RMSNorm and a gated GELU MLP, without an add of its own. Its weights are one set
of tensors wherever it runs; each use holds its own low-rank adapter, added to the MLP's fused gate-up projection
(and to the attention's query, key and value projections where use_shared_attention_adapter asks). The hybrid
block maps the shared block's output with a square matrix of its own, adds it to its input before its Mamba
block's norm, and adds the mixer's output to the input alone. A final RMSNorm precedes a head tied to the
embeddings. The positions reach the attention through rotary angles only where use_mem_rope is set.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Zamba2",
    vendor="Zyphra",
    released="2024-07",
    summary=(
        "Selective state-space blocks of Mamba's second design, with shared attention blocks run again at several "
        "depths, each use with its own low-rank adapters and fed the stream beside the original embeddings."
    ),
    tags=("Mamba-2", "Hybrid", "Shared blocks", "Adapters"),
    checkpoint="Zyphra/Zamba2-2.7B",
    sizes=("Zyphra/Zamba2-7B",),
    model_class="Zamba2ForCausalLM",
    config_class="Zamba2Config",
    preview=lambda config: _preview(config),
)


def _preview(config) -> dict:
    # six blocks, four of them hybrid: with two shared blocks, each runs twice, each time with an adapter of its
    # own, so the preview shows both the sharing and the per-use adapters of every shared block
    kinds = ["mamba", "hybrid", "hybrid", "mamba", "hybrid", "hybrid"]
    width, heads = 64, 4  # the generic rule's tiny width and heads
    # Zamba2Config derives these from the sizes when it is built, and a value the file's config carries in (the
    # pinned hybrid_layer_ids, attention_head_dim) would win over the derivation: each is derived again here
    return {"num_hidden_layers": len(kinds), "layer_types": kinds, "layers_block_type": kinds, "adapter_rank": 8,
            "hybrid_layer_ids": [i for i, kind in enumerate(kinds) if kind == "hybrid"],
            "attention_hidden_size": 2 * width, "attention_head_dim": 2 * width // heads,
            "kv_channels": width // heads, "num_query_groups": heads}
