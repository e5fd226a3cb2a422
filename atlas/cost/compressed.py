"""The cost of a block that reads a sliding window plus keys pooled from windows of positions (DeepSeek-V4).

The cache holds the window's keys, one tensor that serves as keys and values, and beside it, for each
compressor (the attention's, and on the blocks compressing by 4 the indexer's): one pooled key per closed
window, the values and gates of the positions of the window not yet closed, and, where windows overlap,
the last closed window's first series (its values and gates), which the next pooled key reads. A token
attends to the window's keys and to every pooled key so far (the indexer's choice is a mask: transformers'
eager attention still multiplies every key), and the indexer scores every one of its pooled keys.

The sizes are read from the block's modules: the compressors' rates, their projections' widths, the
indexer's heads and head width.
"""

from __future__ import annotations

from atlas.errors import AtlasError
from atlas.numbers import grouped
from atlas.cost.coefficients import BlockTerms, attention_flops_per_key, indexer_flops_per_key, matrix_values


def _own_2d(module) -> int:
    """Values of 2-D tensors a module holds itself that are added, not multiplied (a compressor's slot bias)."""
    return sum(p.numel() for _, p in module.named_parameters(recurse=False) if p.dim() == 2)


def _series(compressor, width: int, name: str) -> tuple[dict, str]:
    rate = compressor.compress_rate
    projected = compressor.kv_proj.weight.shape[0]
    overlap = projected == 2 * width
    series = {"every": rate, "entry": width, "open": 2 * projected, "overlap": 2 * rate * width if overlap else 0}
    words = (f"{name}: {grouped(width)} values a pooled key every {grouped(rate)} positions, {grouped(2 * projected)} values (values and "
             f"gates) a position of the open window" + (f", {grouped(2 * rate * width)} for the last window's first series" if overlap else ""))
    return series, words


def compressed_block_terms(block, roles, config, attention_type: str, family: str = ""):
    from atlas.model.sizes import experts_per_token

    attention = block.get_submodule(roles.attention)
    compressor = getattr(attention, "compressor", None)
    window = getattr(config, "sliding_window", None)
    if compressor is None or not window:
        raise AtlasError(family, "cost figures", f"blocks of attention type {attention_type!r} without a compressor or a sliding window")
    heads, width = attention.num_heads, attention.head_dim
    if attention.kv_proj.weight.shape[0] != width:
        raise AtlasError(family, "cost figures", "a compressed block whose key-value projection is not one head wide")
    series, words = [], []
    s, w = _series(compressor, width, "the attention's compressor")
    series.append(s)
    words.append(w)
    indexer = getattr(compressor, "indexer", None)
    if indexer is not None:
        s, w = _series(indexer, indexer.head_dim, "its indexer's compressor")
        series.append(s)
        words.append(w)
    cache_values = width
    cache_formula = (f"one head of {grouped(width)} values serving as key and value, at most {grouped(window - 1)} positions (the window "
                     f"{grouped(window)} less the token being added); " + "; ".join(words))
    top_k = experts_per_token(config)
    matrices, routed = matrix_values(block, roles, top_k)
    matrices -= _own_2d(compressor) + (_own_2d(indexer) if indexer is not None else 0)  # slot biases are added, not multiplied
    per_key = attention_flops_per_key(heads, width, width)
    pooled = per_key
    pooled_words = f"{grouped(per_key)} per pooled key attended"
    if indexer is not None:
        scored = indexer_flops_per_key(indexer.num_heads, indexer.head_dim) - 2 * indexer.num_heads  # the heads' weighted sum is no matrix product
        pooled += scored
        pooled_words += f" + 2 × {indexer.num_heads} indexer heads × {grouped(indexer.head_dim)} = {grouped(scored)} to score it"
    mixing, mixing_words = stream_mixing(block)
    fixed = 2 * matrices + mixing
    flops_formula = (f"2 × {grouped(matrices)} matrix values = {grouped(2 * matrices)}{mixing_words}; attention: 2 × {heads} heads × ({grouped(width)} + "
                     f"{grouped(width)}) = {grouped(per_key)} per key, at most {grouped(window)} keys of the window; and {pooled_words}, one "
                     f"every {grouped(compressor.compress_rate)} positions"
                     + (" (the indexer's choice masks keys; the product still runs on all of them)" if indexer is not None else ""))
    return BlockTerms("compressed", window, cache_values, window - 1, cache_formula, None, None, fixed, per_key, window,
                      flops_formula, matrices, routed, compressed=series,
                      compressed_keys={"every": compressor.compress_rate, "per_key": pooled})


def stream_mixing(block) -> tuple[int, str]:
    """FLOPs of a block's hyper-connections mixing its residual streams, a matrix product per sublayer
    (n × n times n × width for each token), and their words; (0, "") for a block of one stream."""
    from atlas.proof.hyper import is_hyper_connection

    found = [m for m in block.children() if is_hyper_connection(m)]
    if not found:
        return 0, ""
    map_ = next(p for p in found[0].parameters(recurse=False) if p.dim() == 2)
    rows, cols = map_.shape
    n = next(k for k in range(1, 65) if (2 + k) * k == rows)
    width = cols // n
    flops = len(found) * 2 * n * n * width
    return flops, f"; + {len(found)} × 2 × {n} × {n} × {grouped(width)} = {grouped(flops)} to mix the {n} residual streams"


def stream_collapse_flops(model) -> tuple[int, str | None]:
    """FLOPs of the map that collapses the residual streams after the last block (DeepSeek-V4's hc_head),
    which runs with the head; its module path."""
    from atlas.proof.hyper import is_stream_collapse

    for name, module in model.named_modules():
        if name and is_stream_collapse(module):
            values = next(p for p in module.parameters(recurse=False) if p.dim() == 2).numel()
            return 2 * values, name
    return 0, None
