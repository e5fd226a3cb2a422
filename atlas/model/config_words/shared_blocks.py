"""config.json in words: Zamba2's own keys. The shared blocks the hybrid blocks take in turn, the adapters each use
holds, the block pattern and the switches of the shared attention (its Mamba-2 heads, head width and groups, named
n_mamba_heads, mamba_headdim and mamba_ngroups, are worded with every state-space block's in state_space).
"""

from __future__ import annotations

from atlas.model.config_words.registry import _switch, explains
from atlas.numbers import grouped


def _hybrid_blocks(c) -> list[int]:
    kinds = c.raw.get("layers_block_type")
    return [i for i, kind in enumerate(kinds) if kind == "hybrid"] if isinstance(kinds, list) else []


@explains("num_mem_blocks")
def _shared_blocks(key, v, c):
    n, uses = c.count(key), len(_hybrid_blocks(c))
    words = (f"How many shared blocks the model holds: {grouped(n)}, each one set of weights (an attention and an MLP over "
             "the stream beside the embeddings)")
    if uses:
        words += f"; the {grouped(uses)} hybrid blocks take them in turn, so each runs {uses // n} or {-(-uses // n)} times"
    return words


@explains("layers_block_type")
def _pattern(key, v, c):
    hybrid = _hybrid_blocks(c)
    if not isinstance(v, list):
        c.fail(key, "must be a list of block kinds")
    return (f"The kind of each of the {grouped(len(v))} blocks: a Mamba-2 block alone, or a hybrid block that first runs a "
            f"shared block and its own linear map, then its Mamba-2 block ({grouped(len(hybrid))} of them, blocks "
            f"{', '.join(str(i) for i in hybrid)})")


@explains("adapter_rank")
def _rank(key, v, c):
    rank = c.count(key)
    attention = " and to the attention's query, key and value projections" if c.raw.get("use_shared_attention_adapter") else ""
    return (f"The rank of the low-rank adapters each use of a shared block holds: a map down to {grouped(rank)} values and "
            f"back up, added to the MLP's fused gate-up projection{attention}")


_switch("use_shared_attention_adapter",
        "Each use of a shared block adds its own low-rank adapters to the attention's query, key and value projections",
        "The shared blocks' attention projections have no per-use adapters: every use runs the same query, key and value maps")


_switch("use_mem_rope",
        "The shared blocks' attention turns its queries and keys by rotary angles of each position",
        "The shared blocks' attention is handed no positions: no rotary embedding, the order comes from the Mamba-2 blocks")


_switch("use_long_context",
        "The long-context variant: transformers raises the rotary base and the context to 16,384 positions",
        "Not the long-context variant: the rotary base and the context stay as configured")


@explains("use_mem_eff_path")
def _fused_path(key, v, c):
    return ("Whether the Mamba-2 blocks run their convolution and scan as one fused kernel (when the kernels are installed); "
            "it changes how the result is computed, not the result")


_switch("add_bias_linear", "The shared blocks' MLP projections carry biases", "No bias in the shared blocks' MLP projections")
