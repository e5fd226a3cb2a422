"""What a family costs to run: the KV cache, the weights in memory, the FLOPs of a token, the active
parameters; each figure with the formula that made it and the check that proved it.

The figures that depend on the reader's context length are kept as coefficients per block kind, so
that the build and the page's script evaluate one and the same expression:

    cache values at context C  = Σ_kinds blocks × values per position × min(C, positions held at most)
    FLOPs of a token at C      = head + Σ_kinds blocks × (fixed + per attended key × min(C, keys at most))

The coefficients come from the model's own modules (its matrices, heads and widths) and its config
(the window of each block). The same rules, applied to the tiny preview model, must give what a real
run of that model measures: the values transformers' cache holds after the prompt, block by block,
and the FLOPs ``torch.utils.flop_counter`` counts for one more token, block by block and at the head.
A rule that disagrees fails the build (``atlas.check.claims.check_cost``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from atlas.errors import AtlasError
from atlas.numbers import grouped
from atlas.model.introspect import num_blocks
from atlas.model.sizes import experts_per_token

DEFAULT_CONTEXT = 4096  # the context the page shows before the reader moves the slider
CACHE_DTYPES = {"BF16": 2, "FP8": 1}  # bytes per cached value the page offers
FP8_BLOCK = 128  # one F32 scale per 128 × 128 block of a matrix (DeepSeek-V3's FP8 layout)
FOUR_BIT_GROUP = 32  # one 8-bit power-of-two scale per 32 values (MXFP4, as gpt-oss stores its experts)
SLIDING_TYPES = ("sliding_attention",)
# chunked attention (Llama 4): a query reads only the earlier positions of its own chunk; transformers' cache
# holds such a block as a sliding window of the chunk's length, so its cache and FLOPs follow the sliding rule
CHUNKED_TYPES = ("chunked_attention",)
FULL_TYPES = (None, "full_attention")
INDEXED_TYPES = ("indexed_attention",)  # every earlier position cached; a lightning indexer chooses the ones attended
FIXED_STATES = ("state", "linear", "recurrent")  # block kinds whose cache is a state of fixed size, not values per position
# A block kind whose cache is both: keys and values per position, and beside them a state of fixed size
# (Falcon-H1's attention and Mamba-2 side by side); its kind's "state" holds the fixed part.
GROWING_AND_FIXED = ("full_and_state",)
# a sliding window plus keys pooled from windows of positions (DeepSeek-V4), by 4 with an indexer or by 128
COMPRESSED_TYPES = ("compressed_sparse_attention", "heavily_compressed_attention")


@dataclass
class BlockTerms:
    """One block's cost coefficients, with the words and numbers that made them."""

    attention: str  # "full", "sliding", "chunked", "latent", ... (what the cache holds for the block)
    window: int | None  # the sliding window, or a chunked block's chunk (the window transformers' cache holds it as)
    cache_values: int  # values transformers' cache holds per position, keys and values together
    cache_cap: int | None  # positions the cache holds at most (None: every position)
    cache_formula: str
    expanded_values: int | None  # latent attention: per-head keys and values, which transformers' cache does not hold
    expanded_formula: str | None
    flops_fixed: int  # FLOPs of the block's matrices for one token
    flops_per_key: int  # FLOPs per key the token attends to
    keys_cap: int | None  # keys a token attends to at most (None: every earlier position and itself)
    flops_formula: str
    matrices: int  # matrix values one token is multiplied by (routed experts: the top-k share)
    routed: tuple[int, int] | None  # (top_k, experts) of a mixture block
    state_values: int = 0  # values of a fixed-size state held beside the per-position cache (GROWING_AND_FIXED)
    # keys pooled from windows of positions (DeepSeek-V4's compressed blocks): per series {"every": m, "entry": values
    # of one pooled key, "open": values held per position of the window not yet closed, "overlap": values kept
    # from the last closed window once one has closed}; and the FLOPs per pooled key a token attends to or scores
    compressed: list | None = None
    compressed_keys: dict | None = None


def _sizes(config) -> dict[str, Any]:
    from atlas.model.sizes import checkpoint_sizes

    return checkpoint_sizes(config)


def _latent(config) -> bool:
    return getattr(config, "kv_lora_rank", None) is not None


def _takes_alibi(attention, config) -> bool:
    """An attention handed an ALiBi bias by its model: its forward takes an alibi argument, and the config
    does not switch ALiBi off (Falcon's attention takes the argument, and its config's alibi is false)."""
    import inspect

    return (attention is not None and "alibi" in inspect.signature(attention.forward).parameters
            and getattr(config, "alibi", True) is not False)


def block_terms(block, config, attention_type: str | None, family: str = "") -> BlockTerms:
    """The cost coefficients of one block of a model built from ``config``."""
    from atlas.model.roles import block_roles

    roles = block_roles(block)
    sizes = _sizes(config)
    heads, kv_heads = sizes["num_heads"], sizes["num_kv_heads"]
    qk, v = sizes["qk_head_dim"], sizes["head_dim"]
    if roles.linear_attention:
        return linear_block_terms(block, roles, config, family)
    if roles.attention is not None and roles.ssm is not None:  # both side by side: a cache per position and a fixed state
        return attention_and_state_terms(block, roles, config, family)
    if roles.attention is None:  # a block without attention: a state-space mixer or an MLP alone
        return _no_attention_terms(block, roles, config)
    if attention_type in COMPRESSED_TYPES:
        from atlas.cost.compressed import compressed_block_terms

        return compressed_block_terms(block, roles, config, attention_type, family)
    if attention_type not in SLIDING_TYPES + FULL_TYPES + CHUNKED_TYPES and not (attention_type in INDEXED_TYPES and roles.indexer):
        raise AtlasError(family, "cost figures", f"blocks of attention type {attention_type!r}: no cache or FLOPs rule covers them")
    window = getattr(config, "sliding_window", None) if attention_type in SLIDING_TYPES else None
    chunk = getattr(config, "attention_chunk_size", None) if attention_type in CHUNKED_TYPES else None
    if attention_type in CHUNKED_TYPES and not chunk:
        raise AtlasError(family, "cost figures", "a chunked-attention block without an attention_chunk_size in the config")
    window = window or chunk
    if attention_type in SLIDING_TYPES and not window:
        raise AtlasError(family, "cost figures", "a sliding-attention block without a sliding_window in the config")
    attention = block.get_submodule(roles.attention) if roles.attention else None
    expand = None
    if _latent(config):
        kind = "latent"
        expand = getattr(attention, "kv_b_proj", None)
        if expand is None:
            raise AtlasError(family, "cost figures", "latent attention (kv_lora_rank in the config) without a kv_b_proj to expand the latent")
        rank, rope = config.kv_lora_rank, config.qk_rope_head_dim
        cache_values = latent_cache_values(rank, rope)
        cache_formula = (f"kv_lora_rank {grouped(rank)} + qk_rope_head_dim {grouped(rope)} = {grouped(cache_values)} values: the latent "
                         "and the rotary key part every head shares; one latent serves keys and values, so there is no factor of two")
        nope = config.qk_nope_head_dim
        expanded = heads * (nope + rope) + heads * v
        expanded_formula = (f"{heads} heads × ({grouped(nope)} + {grouped(rope)}) key dims + {heads} heads × {grouped(v)} value dims "
                            f"= {grouped(expanded)} values, {expanded / cache_values:.1f} times the latent")
    else:
        kind = "chunked" if chunk else "sliding" if window else "full"
        cache_values = standard_cache_values(kv_heads, qk, v)
        same = "" if qk == v else f" (keys {grouped(qk)}, values {grouped(v)})"
        cache_formula = (f"{kv_heads} key-value heads × (keys {grouped(qk)} + values {grouped(v)}) = {grouped(cache_values)} values{same}"
                         if qk != v else f"2 × {kv_heads} key-value heads × head_dim {grouped(v)} = {grouped(cache_values)} values")
        expanded, expanded_formula = None, None
    cache_cap = window - 1 if window else None
    if chunk:
        cache_formula += (f"; at most {grouped(cache_cap)} positions: a chunked block (chunks of {grouped(chunk)}), which "
                          "transformers' cache holds as a window of the chunk's length less the token being added")
    elif window:
        cache_formula += f"; at most {grouped(cache_cap)} positions (the window {grouped(window)} less the token being added)"

    top_k = experts_per_token(config)
    # a block that runs its attentions from a list (LongCat-Flash: two) caches and attends once per attention
    attentions = len(block.get_submodule(roles.attention.rpartition(".")[0])) if roles.sublayer_lists and "." in roles.attention else 1
    expands = [block.get_submodule(f"{roles.attention.rpartition('.')[0]}.{i}").kv_b_proj for i in range(attentions)] if attentions > 1 and expand is not None else expand
    matrices, routed = _matrix_values(block, roles, top_k, exclude=expands)
    per_key = attention_flops_per_key(heads, qk, v)
    key_words = f"2 × {heads} heads × ({grouped(qk)} + {grouped(v)}) = {grouped(per_key)} per key"
    if expand is not None:
        expand_values = expand.weight.numel()
        per_key += 2 * expand_values
        key_words += f", + 2 × {grouped(expand_values)} for kv_b_proj, which transformers applies to every cached latent at every step"
    indexer = getattr(attention, roles.indexer) if attention is not None and roles.indexer else None
    if indexer is not None:
        cache_values, cache_formula, per_key, key_words = _indexer_terms(indexer, cache_values, cache_formula, per_key, key_words)
    if attentions > 1:
        per_key *= attentions
        key_words = f"{attentions} attentions × ({key_words}) = {grouped(per_key)} per key"
        cache_values *= attentions
        cache_formula = f"{attentions} attentions per block × ({cache_formula}) = {grouped(cache_values)} values"
        if expanded is not None:
            expanded *= attentions
            expanded_formula = f"{attentions} attentions per block × ({expanded_formula})"
    fixed = 2 * matrices
    flops_formula = f"2 × {grouped(matrices)} matrix values = {grouped(fixed)}; attention: {key_words}"
    from atlas.cost.compressed import stream_mixing

    mixing, mixing_words = stream_mixing(block)  # several residual streams mixed at each sublayer (DeepSeek-V4)
    if mixing:
        fixed += mixing
        flops_formula = f"2 × {grouped(matrices)} matrix values = {grouped(2 * matrices)}{mixing_words}; attention: {key_words}"
    if chunk:
        flops_formula += (f", at most {grouped(window)} keys (transformers scores the cached window; the mask keeps only "
                          "the token's own chunk)")
    elif window:
        flops_formula += f", at most {grouped(window)} keys"
    if roles.dense_dispatch and routed:
        flops_formula += (f"; every one of the {routed[1]} routed experts is counted whole: transformers runs each expert on "
                          "every token, the experts not chosen on a zero row")
    if _takes_alibi(attention, config):  # ALiBi (BLOOM): a bias added to the scores, nothing cached, no product
        cache_formula += "; ALiBi adds nothing to the cache: each score's bias is rebuilt from the key's position"
        flops_formula += ("; ALiBi's bias is one addition per score, which counts of multiply-adds leave out, "
                          "as torch.utils.flop_counter does")
    return BlockTerms(kind, window, cache_values, cache_cap, cache_formula, expanded, expanded_formula,
                      fixed, per_key, window, flops_formula, matrices, routed)


def _indexer_terms(indexer, cache_values: int, cache_formula: str, per_key: int, key_words: str) -> tuple[int, str, int, str]:
    """A sparse attention's lightning indexer (DeepSeek Sparse Attention), added to its attention's terms:
    its key per position joins the cache, and scoring every cached key joins the FLOPs per key. Its
    sizes are read from its matrices: the key projection's rows and the head weights' rows."""
    dim, heads = indexer.wk.weight.shape[0], indexer.weights_proj.weight.shape[0]
    cache_values += dim
    cache_formula += f"; + {grouped(dim)} for the indexer's key (index_head_dim), one per position"
    per_key += indexer_flops_per_key(heads, dim)
    key_words += (f", + 2 × {heads} indexer heads × {grouped(dim)} + 2 × {heads} for the indexer's scores and their weighted sum; "
                  "transformers' eager and sdpa attention still multiply every key and mask those the indexer drops")
    return cache_values, cache_formula, per_key, key_words


def indexer_flops_per_key(heads: int, dim: int) -> int:
    """FLOPs per key of a lightning indexer: each head's dot product with the key, then the heads' weighted sum."""
    return 2 * heads * dim + 2 * heads


def linear_block_terms(block, roles, config, family: str = "") -> BlockTerms:
    """A block whose token mixer is linear attention with a recurrent state: what it caches is one
    key × value matrix per value head and its short convolution's last inputs, the same at any context
    (one "position" of that size, never more), and a token's FLOPs do not grow with the context."""
    import torch

    mixer = block.get_submodule(roles.attention)
    conv = next(c for c in mixer.children() if isinstance(c, torch.nn.Conv1d))
    sizes = _sizes(config)
    heads, key_dim, value_dim = sizes["linear_value_heads"], sizes["linear_key_head_dim"], sizes["linear_value_head_dim"]
    if not (heads and key_dim and value_dim):
        raise AtlasError(family, "cost figures", "a linear-attention block without linear head sizes in the config")
    channels, kernel = conv.weight.shape[0], conv.weight.shape[-1]
    state = linear_state_values(heads, key_dim, value_dim)
    cache_values = state + channels * kernel
    cache_formula = (f"{heads} value heads × {grouped(key_dim)} key dims × {grouped(value_dim)} value dims = {grouped(state)} values of "
                     f"recurrent state, + {grouped(channels)} convolution channels × {kernel} inputs = {grouped(channels * kernel)}: "
                     f"{grouped(cache_values)} values per sequence, whatever the context (held as one position)")
    top_k = experts_per_token(config)
    matrices, routed = _matrix_values(block, roles, top_k, exclude=conv)
    # a per-head vector stored with extra unit axes (Kimi's A_log, 1 × 1 × heads × 1) multiplies nothing
    matrices -= sum(p.numel() for p in mixer.parameters() if p.dim() >= 2 and sum(n > 1 for n in p.shape) <= 1
                    and p is not conv.weight)
    conv_flops = 2 * conv.weight.numel() * 2
    fixed = 2 * matrices + conv_flops
    flops_formula = (f"2 × {grouped(matrices)} matrix values = {grouped(2 * matrices)}; + 2 × {grouped(conv.weight.numel())} convolution "
                     f"weights × 2 outputs = {grouped(conv_flops)} (transformers' decoding step convolves the {kernel} kept inputs and the new "
                     "one, two outputs, and keeps the last); the state's decay, update and read-out are elementwise products and "
                     "sums, which torch's flop counter does not count, and do not grow with the context")
    return BlockTerms("linear", None, cache_values, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)


def attention_and_state_terms(block, roles, config, family: str = "") -> BlockTerms:
    """A block that runs softmax attention and a Mamba-2 mixer side by side (Falcon-H1): its cache holds
    the attention's keys and values at every position and, beside them, the mixer's fixed-size state
    (the convolution's last inputs and each head's recurrent state); a token's FLOPs are both mixers'
    matrices, the convolution and the state's read-out, plus the attention over every earlier key."""
    import torch

    sizes = _sizes(config)
    heads, kv_heads, qk, v = sizes["num_heads"], sizes["num_kv_heads"], sizes["qk_head_dim"], sizes["head_dim"]
    mixer = getattr(block, roles.ssm)
    conv = next(m for m in mixer.children() if isinstance(m, torch.nn.Conv1d))
    channels, kernel = conv.weight.shape[0], conv.kernel_size[0]
    if getattr(mixer, "A_log", None) is None or mixer.A_log.dim() != 1:
        raise AtlasError(family, "cost figures", "attention beside a state-space mixer other than Mamba-2: no cache or FLOPs rule covers it")
    state_heads = mixer.A_log.shape[0]
    inner = getattr(mixer, roles.ssm_out_proj).weight.shape[1]
    head_dim = inner // state_heads
    state = (channels - inner) // (2 * mixer.n_groups)
    state_values = ssm_state_values(channels, kernel, state_heads, head_dim, state)
    cache_values = standard_cache_values(kv_heads, qk, v)
    cache_formula = (f"attention: {kv_heads} key-value heads × (keys {grouped(qk)} + values {grouped(v)}) = {grouped(cache_values)} values per position; "
                     f"beside it the Mamba-2 state, the same at every context: {grouped(channels)} convolution channels × {kernel} positions "
                     f"+ {state_heads} heads × {grouped(head_dim)} × state {grouped(state)} = {grouped(state_values)} values per sequence")
    matrices, routed = _matrix_values(block, roles, getattr(config, "num_experts_per_tok", None))
    matrices -= conv.weight.numel()  # the convolution's kernels are counted as a convolution, not as a matrix
    conv_flops = 2 * 2 * channels * kernel
    read_flops = 2 * state_heads * head_dim * state
    fixed = 2 * matrices + conv_flops + read_flops
    per_key = attention_flops_per_key(heads, qk, v)
    flops_formula = (f"2 × {grouped(matrices)} matrix values (both mixers and the MLP) + the convolution 2 × 2 × {grouped(channels)} × {kernel} "
                     f"+ reading the state 2 × {state_heads} × {grouped(head_dim)} × {grouped(state)} = {grouped(fixed)}; "
                     f"attention: 2 × {heads} heads × ({grouped(qk)} + {grouped(v)}) = {grouped(per_key)} per key")
    return BlockTerms("full_and_state", None, cache_values, None, cache_formula, None, None, fixed, per_key, None, flops_formula,
                      matrices, routed, state_values)


def linear_state_values(value_heads: int, key_dim: int, value_dim: int) -> int:
    """Values of a linear-attention layer's recurrent state: one key × value matrix per value head."""
    return value_heads * key_dim * value_dim


def ssm_state_values(conv_channels: int, kernel: int, heads: int, head_dim: int, state_size: int) -> int:
    """Values a Mamba-2 layer's cache holds for one sequence, whatever its length: the convolution's
    last ``kernel`` inputs of every channel and each head's head_dim × state_size recurrent state."""
    return conv_channels * kernel + heads * head_dim * state_size


def _no_attention_terms(block, roles, config) -> BlockTerms:
    """A block with no attention: nothing grows with the context. A state-space mixer keeps a state of
    fixed size (held as one "position" that never grows: cap 1); an MLP block keeps nothing."""
    matrices, routed = _matrix_values(block, roles, experts_per_token(config))
    fixed = 2 * matrices
    flops_formula = f"2 × {grouped(matrices)} matrix values = {grouped(fixed)}"
    if roles.ssm is None:
        return BlockTerms("none", None, 0, None, "no cache: the block has no attention and no state", None, None,
                          fixed, 0, None, flops_formula + "; nothing grows with the context", matrices, routed)
    import torch

    from atlas.model.structure import is_recurrent_block

    mixer = block.get_submodule(roles.ssm)
    if is_recurrent_block(mixer):
        return recurrent_block_terms(mixer, matrices, routed)
    conv = next(m for m in mixer.children() if isinstance(m, torch.nn.Conv1d))
    channels, kernel = conv.weight.shape[0], conv.kernel_size[0]
    matrices -= conv.weight.numel()  # the convolution's kernels are counted as a convolution below, not as a matrix
    fixed = 2 * matrices
    if getattr(mixer, "A_log", None) is None:  # a gated short convolution: its state is the kernel's last inputs
        values = channels * kernel
        conv_flops = 2 * 2 * channels * kernel
        fixed += conv_flops
        cache_formula = (f"a state of fixed size, the same at every context: {grouped(channels)} channels × {kernel} positions "
                         f"(the convolution's last inputs) = {grouped(values)} values per sequence")
        flops_formula = (f"2 × {grouped(matrices)} matrix values + the convolution 2 × 2 × {grouped(channels)} × {kernel} (transformers' "
                         f"one-token update convolves the {kernel} held inputs and the new one, giving two outputs, and keeps the last) "
                         f"= {grouped(fixed)}; nothing grows with the context")
        return BlockTerms("state", None, values, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)
    if mixer.A_log.dim() == 2:  # the first Mamba (Jamba's): a state of state_size numbers per channel
        inner, state = mixer.A_log.shape
        values = channels * kernel + inner * state
        conv_flops = 2 * 2 * channels * kernel
        fixed += conv_flops
        cache_formula = (f"a state of fixed size, the same at every context: {grouped(channels)} convolution channels × {kernel} positions "
                         f"+ {grouped(inner)} channels × state {grouped(state)} = {grouped(values)} values per sequence")
        flops_formula = (f"2 × {grouped(matrices)} matrix values + the convolution 2 × 2 × {grouped(channels)} × {kernel} (transformers' "
                         f"one-token update convolves the {kernel} held inputs and the new one, giving two outputs, and keeps the last) "
                         f"= {grouped(fixed)}; the state's update and read-out are element-wise products and sums, which "
                         "torch.utils.flop_counter leaves out as it leaves out norms; nothing grows with the context")
        return BlockTerms("state", None, values, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)
    heads = mixer.A_log.shape[0]
    inner = getattr(mixer, roles.ssm_out_proj).weight.shape[1]
    head_dim = inner // heads
    state = (channels - inner) // (2 * mixer.n_groups)
    values = ssm_state_values(channels, kernel, heads, head_dim, state)
    cache_formula = (f"a state of fixed size, the same at every context: {grouped(channels)} convolution channels × {kernel} positions "
                     f"+ {heads} heads × {grouped(head_dim)} × state {grouped(state)} = {grouped(values)} values per sequence")
    conv_flops = 2 * 2 * channels * kernel
    read_flops = 2 * heads * head_dim * state
    fixed += conv_flops + read_flops
    flops_formula = (f"2 × {grouped(matrices)} matrix values + the convolution 2 × 2 × {grouped(channels)} × {kernel} (transformers' "
                     f"one-token update convolves the {kernel} held inputs and the new one, giving two outputs, and keeps the last) "
                     f"+ reading the state 2 × {heads} × {grouped(head_dim)} × {grouped(state)} = {grouped(fixed)}; nothing grows with the context")
    return BlockTerms("state", None, values, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)


def recurrent_state_values(channels: int, kernel: int) -> int:
    """Values a recurrent block with an RG-LRU (RecurrentGemma's) holds for one sequence, whatever its length:
    the convolution's last kernel - 1 inputs of every channel, and the RG-LRU's state, one number a channel."""
    return channels * (kernel - 1) + channels


def recurrent_block_terms(mixer, matrices: int, routed) -> BlockTerms:
    """A recurrent block (Griffin's): a state of fixed size, held by the block's modules between tokens; a
    token's FLOPs are its matrices', the RG-LRU's block-diagonal gate weights among them (one product per
    head), and do not grow with the context."""
    import torch

    from atlas.model.structure import is_rg_lru

    conv = next(m for m in mixer.children() if isinstance(m, torch.nn.Conv1d))
    unit = next(m for m in mixer.children() if is_rg_lru(m))
    channels, kernel = conv.weight.shape[0], conv.kernel_size[0]
    values = recurrent_state_values(channels, kernel)
    # neither the convolution's kernels nor the gates' per-head biases are matrices a token is multiplied by
    biases = sum(p.numel() for p in unit.parameters(recurse=False) if p.dim() == 2)
    matrices -= conv.weight.numel() + biases
    gates = sum(p.numel() for p in unit.parameters(recurse=False) if p.dim() == 3)
    fixed = 2 * matrices
    cache_formula = (f"a state of fixed size, the same at every context: {grouped(channels)} convolution channels × {kernel - 1} "
                     f"last inputs + the RG-LRU's state, {grouped(channels)} numbers = {grouped(values)} values per sequence "
                     "(transformers keeps both on the block's modules, the RG-LRU's state in float32)")
    flops_formula = (f"2 × {grouped(matrices)} matrix values ({grouped(gates)} of them the RG-LRU's two block-diagonal gate weights, "
                     f"one product per head) = {grouped(fixed)}; transformers' one-token update convolves the {kernel - 1} held inputs "
                     "and the new one by multiplying and summing element by element, which torch.utils.flop_counter does not count, "
                     "like the recurrence's own update; nothing grows with the context")
    return BlockTerms("recurrent", None, values, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)


def held_on_modules(block) -> int:
    """Values a block's modules keep as plain tensor attributes between calls (not parameters or buffers):
    the states RecurrentGemma's recurrent block holds itself instead of in transformers' cache."""
    import torch

    total = 0
    for m in block.modules():
        own = {id(t) for t in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False))}
        total += sum(v.numel() for v in vars(m).values() if isinstance(v, torch.Tensor) and id(v) not in own)
    return total


def latent_cache_values(kv_lora_rank: int, qk_rope_head_dim: int) -> int:
    """Values a latent-attention layer caches per position."""
    return kv_lora_rank + qk_rope_head_dim


def standard_cache_values(kv_heads: int, key_dim: int, value_dim: int) -> int:
    """Values a key-value-head attention layer caches per position: its keys and its values."""
    return kv_heads * (key_dim + value_dim)


def attention_flops_per_key(heads: int, key_dim: int, value_dim: int) -> int:
    """A token's scores against one key (a dot product per head) and that key's value added to its output."""
    return 2 * heads * (key_dim + value_dim)


def _experts_module(block, roles):
    mlp = block.get_submodule(roles.mlp) if roles.mlp else None
    if mlp is not None and roles.experts:
        return getattr(mlp, roles.experts)
    from atlas.proof.stack import side_mixture

    side = side_mixture(block)  # routed experts the block holds beside its MLP (Gemma 4's 26B-A4B)
    return getattr(block, side["experts"]) if side else None


def _matrix_values(block, roles, top_k: int | None, exclude=None) -> tuple[int, tuple[int, int] | None]:
    """Matrix values one token is multiplied by in ``block`` (a routed expert's matrices in the top-k
    share), leaving out ``exclude``; and (top_k, experts) where the block routes."""
    experts = _experts_module(block, roles)
    expert_ids = {id(p) for p in experts.parameters()} if experts is not None else set()
    n_experts = _expert_count(experts) if experts is not None else None
    total = 0
    from atlas.proof.kinds import is_offset

    for module in block.modules():
        if exclude is not None and any(module is m for m in (exclude if isinstance(exclude, list) else [exclude])):
            continue
        if is_offset(module):  # a vector added, not a matrix multiplied (ERNIE 4.5's [1, E] selection bias)
            continue
        for _, p in module.named_parameters(recurse=False):
            if id(p) in expert_ids and "Experts" in type(module).__name__ and p.dim() >= 3 and p.shape[0] > n_experts:
                # rows for zero-computation experts too (LongCat-Flash as transformers allocates it): one expert's slice, top_k times
                total += p.numel() // p.shape[0] * top_k
            elif id(p) in expert_ids:
                per_expert_dims = p.dim() - 1 if p.shape[0] == n_experts and "Experts" in type(module).__name__ else p.dim()
                if per_expert_dims >= 2:
                    # dense dispatch (Llama 4): every expert multiplies every token's (scaled) row
                    total += p.numel() if roles.dense_dispatch else p.numel() * top_k // n_experts
            elif p.dim() >= 2:
                total += p.numel()
    return total, ((top_k, n_experts) if experts is not None else None)


def _expert_count(experts) -> int:
    # num_routed_experts: the experts with weights where zero-computation experts are routed to as well (LongCat-Flash)
    return getattr(experts, "num_experts", None) or getattr(experts, "num_routed_experts", None) or len(list(experts.children()))


def _quantizable(block, roles) -> list[tuple[tuple[int, ...], int]]:
    """The matrices of a block an FP8 or 4-bit checkpoint would quantize: every matrix but the router's,
    as (matrix shape, how many such matrices)."""
    mlp = block.get_submodule(roles.mlp) if roles.mlp else None
    router = getattr(mlp, roles.router) if mlp is not None and roles.router else None
    router_ids = {id(p) for p in router.parameters()} if router is not None else set()
    experts = _experts_module(block, roles)
    n_experts = _expert_count(experts) if experts is not None else None
    found = []
    for module in block.modules():
        for _, p in module.named_parameters(recurse=False):
            if id(p) in router_ids:
                continue
            if "Experts" in type(module).__name__ and p.dim() >= 3 and p.shape[0] == n_experts:
                found.append((tuple(p.shape[1:]), n_experts))
            elif p.dim() >= 2:
                found.append((tuple(p.shape), 1))
    return found


def fp8_matrix_bytes(shape: tuple[int, ...]) -> int:
    """A matrix in F8_E4M3 with one F32 scale per FP8_BLOCK × FP8_BLOCK block (edge blocks partial)."""
    rows, cols = shape[0], math.prod(shape[1:])
    return rows * cols + 4 * math.ceil(rows / FP8_BLOCK) * math.ceil(cols / FP8_BLOCK)


def four_bit_matrix_bytes(shape: tuple[int, ...]) -> int:
    """A matrix at 4 bits a value with one 8-bit scale per FOUR_BIT_GROUP values of a row."""
    values = math.prod(shape)
    return math.ceil(values / 2) + math.ceil(values / FOUR_BIT_GROUP)


# --- evaluating the coefficients ---------------------------------------------------------------------


def cache_values_at(kinds: list[dict[str, Any]], context: int) -> int:
    """Values all blocks' caches hold after ``context`` positions (one sequence): facts["cost"]["cache"]["kinds"]."""
    return sum(k["count"] * (k["values"] * (min(context, k["cap"]) if k["cap"] else context) + k.get("state", 0)
                             + pooled_values(k.get("compressed"), context)) for k in kinds)


def pooled_values(series: list | None, context: int) -> int:
    """Values a block's compressors hold after ``context`` positions: a pooled key per closed window, the
    not yet closed window's positions, and what the last closed window leaves for the next (overlap)."""
    return sum(s["entry"] * (context // s["every"]) + s["open"] * (context % s["every"]) + (s["overlap"] if context >= s["every"] else 0)
               for s in series or [])


def _pooled_words(series: list | None, context: int) -> str:
    """The pooled terms of a cache formula, as static/cost.js writes them."""
    return "".join(f" + {grouped(s['entry'])} × {grouped(context // s['every'])} pooled keys + {grouped(s['open'])} × {grouped(context % s['every'])}"
                   + (f" + {grouped(s['overlap'])}" if context >= s["every"] and s["overlap"] else "") for s in series or [])


def pooled_key_flops(keys: dict | None, context: int) -> int:
    """FLOPs a token at ``context`` spends on the pooled keys of its block: each pooled key so far."""
    return keys["per_key"] * (context // keys["every"]) if keys else 0


def flops_at(flops: dict[str, Any], context: int) -> int:
    """FLOPs of one token whose position is ``context`` (it attends to ``context`` keys, itself included)."""
    total = flops["head"]["flops"]
    for k in flops["kinds"]:
        keys = min(context, k["keys_cap"]) if k["keys_cap"] else context
        total += k["count"] * (k["fixed"] + k["per_key"] * keys + pooled_key_flops(k.get("compressed_keys"), context))
    return total


# --- the facts ---------------------------------------------------------------------------------------


def cost_facts(family: str, model, config, facts: dict[str, Any], layout: list, run) -> dict[str, Any]:
    """facts["cost"]: the coefficients per block kind at the checkpoint's sizes, the weights in memory,
    the active parameters, and the measurements of the preview run that check the rules."""
    from atlas.model.introspect import find_block_list
    from atlas.inputs.layers import layer_config  # a block built with sizes of its own (Gemma 4's global blocks)

    _, blocks = find_block_list(model, num_blocks(config))
    kinds = []
    for k in facts["block_kinds"]:
        t = block_terms(blocks[k["indices"][0]], layer_config(config, k["indices"][0]), k["attention_type"], family)
        kinds.append({
            "kind": k["id"], "label": k["label"], "count": k["count"], "attention": t.attention, "window": t.window,
            "cache": {"values": t.cache_values, "cap": t.cache_cap, "formula": t.cache_formula,
                      "expanded": t.expanded_values, "expanded_formula": t.expanded_formula,
                      **({"state": t.state_values} if t.state_values else {}),
                      **({"compressed": t.compressed} if t.compressed else {})},
            "flops": {"fixed": t.flops_fixed, "per_key": t.flops_per_key, "keys_cap": t.keys_cap, "formula": t.flops_formula,
                      **({"compressed_keys": t.compressed_keys} if t.compressed_keys else {})},
            "routed": list(t.routed) if t.routed else None,
        })
    head = model.get_output_embeddings()
    head_values = head.weight.numel()
    hidden = config.hidden_size
    max_context = getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None) or DEFAULT_CONTEXT
    from atlas.cost.compressed import stream_collapse_flops

    collapse, _ = stream_collapse_flops(model)
    flops = {
        "head": {"flops": 2 * head_values + collapse,
                 "formula": f"2 × {grouped(head_values)} values of the output head ({grouped(config.vocab_size)} × {grouped(hidden)}), "
                            "multiplied whether or not it is tied to the embedding"
                            + (f"; + {grouped(collapse)} for the map that collapses the residual streams before the final norm" if collapse else "")},
        "kinds": [{"kind": k["kind"], "label": k["label"], "count": k["count"], **k["flops"]} for k in kinds],
    }
    checks = measured_checks(family, run, facts["model"]["block_path"])
    latent = any(k["attention"] == "latent" for k in kinds)
    active = active_breakdown(model, blocks, facts, config)
    checks.append({"figure": "active parameters", "formula": active["total"], "measured": facts["accounting"]["model"]["active"],
                   "how": "the parts summed, against the model's own count: every value less the routed experts a token is not sent to"})
    return {
        "context": {"default": min(DEFAULT_CONTEXT, max_context), "max": max_context},
        "cache": {
            "dtypes": CACHE_DTYPES,
            "latent": latent,
            "kinds": [{"kind": k["kind"], "label": k["label"], "count": k["count"], "attention": k["attention"],
                       "window": k["window"], **k["cache"]} for k in kinds],
            "words": _cache_words(kinds),
        },
        "flops": flops,
        "weights": weight_figures(model, blocks, facts, layout),
        "active": active,
        "checks": checks,
    }


def _cache_words(kinds: list[dict[str, Any]]) -> str:
    """What each kind of block keeps between steps, in words."""
    attention = {k["attention"] for k in kinds}
    parts = []
    if "latent" in attention:
        parts.append("transformers' cache holds each latent-attention block's latent (keys: the normalized latent; "
                     "values: the shared rotary key part) and expands it with kv_b_proj at every step; the per-head keys "
                     "and values a cache of expanded heads would hold are shown beside it")
    if "sliding" in attention:
        parts.append("a sliding-window block keeps only its most recent positions: between steps, one fewer than its window")
    if "chunked" in attention:
        parts.append("a chunked-attention block reads only the earlier positions of its own chunk, and transformers' cache "
                     "holds it as a window of the chunk's length: between steps, one fewer than the chunk's length")
    if "linear" in attention:
        parts.append("a linear-attention block holds a fixed-size recurrent state and its convolution's last inputs, "
                     "the same at any context (counted as one position of that size)")
    if "recurrent" in attention:
        parts.append("a recurrent block keeps its convolution's last inputs and its RG-LRU's state, one number a channel, "
                     "however long the context (transformers holds both on the block's modules)")
    if "state" in attention:
        parts.append("a state-space block keeps a state of fixed size, its convolution's last inputs and each head's "
                     "recurrent state, however long the context")
    if "full_and_state" in attention:
        parts.append("a block that runs attention and a state-space mixer side by side keeps both: the attention's keys and "
                     "values at every position, and the mixer's fixed-size state beside them")
    if "none" in attention:
        parts.append("a block with neither attention nor state keeps nothing")
    if "full" in attention:
        other = "every other attention block" if attention & {"state", "none", "recurrent"} else "every other block"
        parts.append(f"{other} keeps every position" if parts else "every block keeps every position")
    return "; ".join(parts) + "."


def measured_checks(family: str, run, block_path: str) -> list[dict[str, Any]]:
    """The rules applied to the tiny preview model, beside what a real run of it measures: the values
    its cache holds after the prompt, and the FLOPs of one more token, block by block and at the head."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from atlas.model.block_kinds import layer_types
    from atlas.model.introspect import find_block_list

    model, config = run.model, run.config
    _, blocks = find_block_list(model, num_blocks(config))
    types = layer_types(config) or [None] * len(blocks)
    from atlas.inputs.layers import layer_config

    terms = [block_terms(b, layer_config(config, i), types[i], family) for i, b in enumerate(blocks)]
    prompt = run.ids.shape[1]
    # Parameters that need no gradient while counting: a module handed slices of its parent's parameters
    # (DBRX's experts.mlp gets views of w1, v1, w2 made under no_grad) would otherwise stop torch's
    # module tracker, which looks for a gradient function on every input that asks for one.
    needing = [p for p in model.parameters() if p.requires_grad]
    for p in needing:
        p.requires_grad_(False)
    zero_slots = _zero_expert_slots(blocks)  # block -> [routing choices of the extra token], where zero experts exist
    try:
        with torch.no_grad():
            out = model(run.ids, use_cache=True)
            cache = getattr(out, "cache", None)
            if cache is None:  # a model that keeps its cache to itself (RecurrentGemma) is handed one to fill
                from transformers import DynamicCache

                cache = DynamicCache(config=config)
                model(run.ids, use_cache=True, cache=cache)
            held = [cache_layer_values(layer) // run.ids.shape[0] for layer in cache.layers]
            zero_slots.start()
            with FlopCounterMode(display=False) as counter:
                model(run.ids[:, -1:], cache=cache, use_cache=True)
            zero_slots.stop()
    finally:
        for p in needing:
            p.requires_grad_(True)
    counts = {name: sum(by_op.values()) for name, by_op in counter.get_flop_counts().items()}
    root = type(model).__name__
    head_path = next(name for name, m in model.named_modules() if m is model.get_output_embeddings())
    checks = []
    if len(held) != len(blocks) and len(held) % len(blocks) == 0:
        # a cache layer per attention, several attentions a block (LongCat-Flash: layer 2i and 2i+1 are block i's)
        per = len(held) // len(blocks)
        held = [sum(held[i * per:(i + 1) * per]) for i in range(len(blocks))]
    if len(held) != len(blocks):
        raise AtlasError(family, "cost figure KV cache", f"the preview run's cache has {len(held)} layers for {len(blocks)} blocks")
    # a recurrent block's state is held by its own modules, not by the cache (RecurrentGemma)
    held = [held_on_modules(blocks[i]) // run.ids.shape[0] if t.attention == "recurrent" else n for i, (t, n) in enumerate(zip(terms, held))]
    for i, t in enumerate(terms):
        positions = min(prompt, t.cache_cap) if t.cache_cap else prompt
        how = (f"{grouped(t.cache_values)} values × {positions} positions after the {prompt}-token prompt; "
               "measured: the keys and values transformers' cache holds for the block")
        if t.state_values:
            how = (f"{grouped(t.cache_values)} values × {positions} positions after the {prompt}-token prompt + {grouped(t.state_values)} "
                   "values of fixed state; measured: the keys, values and states transformers' cache holds for the block")
        if t.attention == "recurrent":
            how = (f"{grouped(t.cache_values)} values, the convolution's last inputs and the RG-LRU's state, after the "
                   f"{prompt}-token prompt as after any other; measured: the tensors the block's modules hold between tokens")
        if t.attention == "linear":
            how = (f"{grouped(t.cache_values)} values, the recurrent state and the convolution's last inputs, after the "
                   f"{prompt}-token prompt as after any other; measured: the states transformers' cache holds for the block")
        if t.compressed:
            how = (f"{grouped(t.cache_values)} values × {positions} positions of the window + the pooled keys, the open window and the "
                   f"overlap of {len(t.compressed)} compressor{'s' if len(t.compressed) > 1 else ''} after the {prompt}-token prompt; "
                   "measured: every tensor transformers' cache holds for the block, the window's shared key-value tensor once")
        checks.append({"figure": f"KV cache of block {i}", "formula": t.cache_values * positions + t.state_values + pooled_values(t.compressed, prompt),
                       "measured": held[i], "how": how})
    for i, t in enumerate(terms):
        keys = prompt + 1
        keys = min(keys, t.keys_cap) if t.keys_cap else keys
        idle, idle_words = zero_slots.idle_flops(i)
        pooled = pooled_key_flops(t.compressed_keys, prompt + 1)
        if pooled:
            idle_words += f" + {grouped(pooled)} for {(prompt + 1) // t.compressed_keys['every']} pooled keys"
        checks.append({
            "figure": f"FLOPs of block {i}",
            "formula": t.flops_fixed + t.flops_per_key * keys - idle + pooled,
            "measured": int(counts.get(f"{root}.{block_path}.{i}", 0)),
            "how": f"{grouped(t.flops_fixed)} + {grouped(t.flops_per_key)} × {keys} keys for token {prompt + 1}{idle_words}; "
                   "measured: torch.utils.flop_counter on the block",
        })
    head_flops = 2 * model.get_output_embeddings().weight.numel()
    from atlas.cost.compressed import stream_collapse_flops

    collapse, collapse_path = stream_collapse_flops(model)  # the streams collapsed before the final norm (DeepSeek-V4)
    head_measured = int(counts.get(f"{root}.{head_path}", 0)) + (int(counts.get(f"{root}.{collapse_path}", 0)) if collapse_path else 0)
    checks.append({"figure": "FLOPs of the head", "formula": head_flops + collapse, "measured": head_measured,
                   "how": "2 × the head's values" + (f" + 2 × the values of the map collapsing the streams ({collapse_path})" if collapse_path else "")
                          + "; measured: torch.utils.flop_counter on the head" + (" and on that map" if collapse_path else "")})
    explained = sum(c["measured"] for c in checks if c["figure"].startswith("FLOPs"))
    checks.append({"figure": "FLOPs of the whole token", "formula": explained, "measured": int(counts.get("Global", 0)),
                   "how": "the blocks and the head account for every FLOP counted in the forward pass"})
    return checks


class _ZeroSlots:
    """The routing choices of one token at each block whose experts include zero-computation ones
    (LongCat-Flash): a slot routed to such an expert multiplies no matrix, so the top-k rule, which
    counts every slot as a real expert, is that many experts' FLOPs above the token's own."""

    def __init__(self, experts_by_block):
        self.experts = experts_by_block  # block index -> (experts module, real experts, FLOPs of one expert)
        self.chosen: dict[int, Any] = {}
        self.handles: list = []

    def start(self):
        for i, (module, _, _) in self.experts.items():
            self.handles.append(module.register_forward_hook(lambda m, args, out, i=i: self.chosen.__setitem__(i, args[1])))

    def stop(self):
        for h in self.handles:
            h.remove()

    def idle_flops(self, block: int) -> tuple[int, str]:
        if block not in self.experts or block not in self.chosen:
            return 0, ""
        _, real, per_expert = self.experts[block]
        zero = int((self.chosen[block] >= real).sum())
        if not zero:
            return 0, "; every routing slot chose a real expert"
        return zero * per_expert, (f" − {zero} routing slot{'s' if zero != 1 else ''} sent to a zero-computation expert × "
                                   f"{grouped(per_expert)} (one expert's matrices, which such a slot never multiplies)")


def _zero_expert_slots(blocks) -> _ZeroSlots:
    """The blocks whose experts module allocates more gate rows than it has down projections: the rest
    are zero-computation experts, chosen by the router like the others."""
    from atlas.model.roles import block_roles

    found = {}
    for i, block in enumerate(blocks):
        roles = block_roles(block)
        experts = _experts_module(block, roles)
        down = getattr(experts, "down_proj", None) if experts is not None else None
        gate_up = getattr(experts, "gate_up_proj", None) if experts is not None else None
        if down is None or gate_up is None or gate_up.shape[0] <= down.shape[0]:
            continue
        per_expert = 2 * sum(p.numel() // p.shape[0] for p in (gate_up, down))
        found[i] = (experts, down.shape[0], per_expert)
    return _ZeroSlots(found)


def cache_layer_values(layer) -> int:
    """Values one layer of transformers' cache holds: keys and values, or a state-space layer's
    convolution and recurrent states, or nothing (a layer without attention or state)."""
    def listed(held):
        return list(held.values()) if isinstance(held, dict) else list(held or [])

    states = listed(getattr(layer, "conv_states", None)) + listed(getattr(layer, "recurrent_states", None))
    held = int(sum(s.numel() for s in states if s is not None))  # a layer holding both (Falcon-H1's) counts both
    for attr in ("compressed_kv", "buffer_kv", "buffer_gate", "overlap_kv", "overlap_gate"):  # pooled keys and their windows (DeepSeek-V4)
        held += int(sum(t.numel() for t in (getattr(layer, attr, None) or {}).values() if t is not None))
    if getattr(layer, "keys", None) is not None and getattr(layer, "values", None) is layer.keys:
        return int(layer.keys.numel()) + held  # one tensor serves as keys and values (DeepSeek-V4's compressed blocks)
    if getattr(layer, "keys", None) is not None:
        indexer_keys = getattr(layer, "indexer_keys", None)  # a sparse attention's indexer keys, one per position
        return int(layer.keys.numel() + layer.values.numel() + (indexer_keys.numel() if indexer_keys is not None else 0)) + held
    return held


def weight_figures(model, blocks, facts: dict[str, Any], layout: list) -> list[dict[str, Any]]:
    """The weights in memory: as the checkpoint stores them, and in BF16, FP8 and 4-bit alternatives."""
    from atlas.model.roles import block_roles

    predicted = facts["checkpoint_check"]["predicted"]
    total = facts["accounting"]["model"]["total"]
    quantizable = [m for b in blocks for m in _quantizable(b, block_roles(b))]
    q_values = sum(math.prod(shape) * n for shape, n in quantizable)
    rest = total - q_values
    fp8 = sum(fp8_matrix_bytes(shape) * n for shape, n in quantizable)
    four = sum(four_bit_matrix_bytes(shape) * n for shape, n in quantizable)
    fp8_scales = fp8 - q_values
    four_scales = four - math.ceil(q_values / 2)
    stored = " + ".join(f"{dtype} {grouped(b)}" for dtype, b in predicted["bytes_by_dtype"].items())
    return [
        {"name": "as the checkpoint stores them", "bytes": predicted["payload_bytes"],
         "formula": f"{stored} bytes", "check": "the predicted files' bytes by dtype, checked against the pinned headers where they are pinned"},
        {"name": "BF16", "bytes": 2 * total, "formula": f"{grouped(total)} values × 2 bytes",
         "check": "the weight parameters, checked against the checkpoint's headers"},
        {"name": "FP8, 128 × 128 block scales", "bytes": fp8 + 2 * rest,
         "formula": f"{grouped(q_values)} block-matrix values × 1 byte + {grouped(fp8_scales)} bytes of F32 scales (one per 128 × 128 block) "
                    f"+ {grouped(rest)} other values (embeddings, head, norms, biases, routers) × 2 bytes",
         "check": _scale_check(layout, "F8_E4M3")},
        {"name": "4-bit, a scale per 32 values", "bytes": four + 2 * rest,
         "formula": f"{grouped(q_values)} block-matrix values × ½ byte + {grouped(four_scales)} bytes of 8-bit scales (one per 32 values) "
                    f"+ {grouped(rest)} other values × 2 bytes",
         "check": _scale_check(layout, "U8")},
    ]


def stored_pairs(layout: list, dtype: str) -> list[tuple[Any, Any]]:
    """(quantized tensor, its scale) of a predicted layout: FP8 weights with their ``_scale_inv``, or
    MXFP4's ``_blocks`` with their ``_scales``."""
    if _last_pairs[0] is not layout:  # the cost's words and the check each ask of the same layout, per dtype
        _last_pairs[:] = [layout, _pairs_of(layout)]
    return _last_pairs[1].get(dtype, [])


_last_pairs: list[Any] = [None, None]


def _pairs_of(layout: list) -> dict[str, list[tuple[Any, Any]]]:
    """The pairs of every dtype, in one pass over the layout (a large one holds a hundred thousand tensors)."""
    by_name = {t.name: t for t in layout if t.role == "scale"}  # the predicted layout gives every scale this role
    pairs: dict[str, list[tuple[Any, Any]]] = {}
    if not by_name:
        return pairs
    for t in layout:
        if t.role != "parameter":
            continue
        if t.dtype == "F8_E4M3" and f"{t.name}_scale_inv" in by_name:
            pairs.setdefault(t.dtype, []).append((t, by_name[f"{t.name}_scale_inv"]))
        elif t.name.endswith("_blocks") and t.name[: -len("_blocks")] + "_scales" in by_name:
            pairs.setdefault(t.dtype, []).append((t, by_name[t.name[: -len("_blocks")] + "_scales"]))
    return pairs


def _scale_check(layout: list, dtype: str) -> str:
    pairs = stored_pairs(layout, dtype)
    if not pairs:
        return "the checkpoint stores no matrix this way, so the formula is not checked against its files"
    return (f"the same formula gives the bytes the checkpoint's files store for each of its {grouped(len(pairs))} "
            "quantized matrices with their scales (checked)")


def scale_mismatches(layout: list) -> list[str]:
    """Quantized matrices of the predicted layout whose stored bytes (values and scales) differ from the
    formulas' bytes for a matrix of that shape."""
    from atlas.inputs.dtypes import DTYPE_BYTES

    wrong = []
    for t, scale in stored_pairs(layout, "F8_E4M3"):
        stored = t.elements * DTYPE_BYTES[t.dtype] + scale.elements * DTYPE_BYTES[scale.dtype]
        if fp8_matrix_bytes(tuple(t.shape)) != stored:
            wrong.append(f"{t.name}: {grouped(stored)} bytes stored, the FP8 formula gives {grouped(fp8_matrix_bytes(tuple(t.shape)))}")
    for t, scale in stored_pairs(layout, "U8"):
        stored = t.elements * DTYPE_BYTES[t.dtype] + scale.elements * DTYPE_BYTES[scale.dtype]
        formula = four_bit_matrix_bytes((t.values,))
        if formula != stored:
            wrong.append(f"{t.name}: {grouped(stored)} bytes stored, the 4-bit formula gives {grouped(formula)}")
    return wrong


def active_breakdown(model, blocks, facts: dict[str, Any], config) -> dict[str, Any]:
    """The values one token runs through, by part: embeddings, attention, dense MLPs, routers, shared
    experts, the routed experts' top-k share, norms, the head."""
    from atlas.model.introspect import own_tensors
    from atlas.model.roles import block_roles

    top_k = experts_per_token(config)
    parts = {name: 0 for name in ACTIVE_PARTS}
    routed_all = 0
    for block in blocks:
        roles = block_roles(block)
        mlp = block.get_submodule(roles.mlp) if roles.mlp else None
        owner = {}
        for role, module in (("attention", block.get_submodule(roles.attention) if roles.attention else None),
                             # a state-space, short-convolution or recurrent mixer in the attention's place
                             ("state-space and recurrent mixers", block.get_submodule(roles.ssm) if roles.ssm else None),
                             ("dense MLPs", mlp),
                             ("routers", getattr(mlp, roles.router) if mlp is not None and roles.router else None),
                             ("shared experts", getattr(mlp, roles.shared_expert) if mlp is not None and roles.shared_expert else None),
                             ("routed experts (top-k share)", _experts_module(block, roles))):
            if module is not None:
                for m in module.modules():
                    owner[id(m)] = role  # later roles are inside the MLP: they override it
        for name in roles.sublayer_lists:  # sublayers run from lists (LongCat-Flash): every attention, every dense MLP
            listed = block.get_submodule(name)
            role = ("attention" if roles.attention and roles.attention.startswith(name + ".") else
                    None if (roles.attention_norm or "").startswith(name + ".") or (roles.mlp_norm or "").startswith(name + ".") else "dense MLPs")
            if role:
                owner.update({id(m): role for m in listed.modules()})
        n_experts = None
        experts = _experts_module(block, roles)
        if experts is not None:
            n_experts = _expert_count(experts)
        for m in block.modules():
            for _, t, _role in own_tensors(m):
                part = owner.get(id(m), "norms")
                if part == "routed experts (top-k share)":
                    routed_all += t.numel()
                    parts[part] += t.numel() * top_k // n_experts
                else:
                    parts[part] += t.numel()
    seen = set()
    embeddings = [m for m in model.modules() if type(m).__name__.endswith("Embedding") and hasattr(m, "weight") and m.weight.dim() == 2]
    head = model.get_output_embeddings()
    block_ids = {id(p) for b in blocks for p in b.parameters()}
    for m in embeddings:
        if id(m.weight) not in seen:
            parts["embeddings"] += m.weight.numel()
            seen.add(id(m.weight))
    if head is not None and id(head.weight) not in seen:
        parts["head"] += sum(p.numel() for p in head.parameters() if id(p) not in seen)
        seen.update(id(p) for p in head.parameters())
    block_tensors = {id(t) for b in blocks for m in b.modules() for _, t, _ in own_tensors(m)}
    for m in model.modules():
        for _, t, _ in own_tensors(m):
            if id(t) not in block_tensors and id(t) not in block_ids and id(t) not in seen:
                parts["norms"] += t.numel()
                seen.add(id(t))
    total = sum(parts.values())
    return {
        "rows": [{"part": name, "values": n} for name, n in parts.items() if n or name in ("embeddings", "attention")],
        "total": total,
        "without_embeddings": total - parts["embeddings"],
        "routed_all": routed_all,
        "top_k": top_k,
        "words": ("Active here means every value a token's forward pass reads: the embedding row it looks up is counted as the "
                  "whole table, as the model total counts it, and the routed experts count only the top-k share of each "
                  "mixture block. Figures vendors publish differ on the embeddings; both totals are given."),
    }


ACTIVE_PARTS = ("embeddings", "attention", "state-space and recurrent mixers", "dense MLPs", "routers", "shared experts", "routed experts (top-k share)", "norms", "head")


# --- the page's figures ------------------------------------------------------------------------------


def contexts(cost: dict[str, Any]) -> list[int]:
    """The slider's stops: powers of two from 128 up to the longest context, and that context itself."""
    top = cost["context"]["max"]
    stops = [c for c in (2 ** p for p in range(7, 25)) if c < top]
    return stops + [top]


def figures(cost: dict[str, Any], context: int, batch: int = 1, dtype: str = "BF16") -> dict[str, Any]:
    """Every figure of the cost section at one context, batch and cache dtype, each with its formula.
    static/cost.js computes the same figures in the browser when the reader moves the controls."""
    size = cost["cache"]["dtypes"][dtype]
    kinds = cost["cache"]["kinds"]
    growing = [k for k in kinds if k["attention"] not in FIXED_STATES]  # a fixed state does not grow per position
    per_token = sum(k["count"] * k["values"] for k in growing) * size
    held = cache_values_at(kinds, context) * size * batch
    rows = []
    for k, f in zip(kinds, cost["flops"]["kinds"]):
        positions = min(context, k["cap"]) if k["cap"] else context
        keys = min(context, f["keys_cap"]) if f["keys_cap"] else context
        rows.append({"kind": k["label"], "count": k["count"], "attention": k["attention"], "positions": positions,
                     "cache_bytes": k["count"] * (k["values"] * positions + k.get("state", 0) + pooled_values(k.get("compressed"), context)) * size * batch,
                     "flops": k["count"] * (f["fixed"] + f["per_key"] * keys + pooled_key_flops(f.get("compressed_keys"), context))})
    out = {
        "per_token": per_token,
        "per_token_formula": " + ".join(f"{k['count']} × {grouped(k['values'])}" for k in growing) + f" values × {size} bytes ({dtype})",
        "cache": held,
        "cache_formula": " + ".join(
            f"{k['count']} × {'(' if k.get('state') or k.get('compressed') else ''}{grouped(k['values'])} × {'min(' + grouped(context) + ', ' + grouped(k['cap']) + ')' if k['cap'] else grouped(context)}"
            + (f" + {grouped(k['state'])}" if k.get("state") else "") + _pooled_words(k.get("compressed"), context)
            + (")" if k.get("state") or k.get("compressed") else "")
            for k in kinds) + f" values × {size} bytes × batch {batch}",
        "flops": flops_at(cost["flops"], context),
        "flops_formula": f"head {grouped(cost['flops']['head']['flops'])} + " + " + ".join(
            f"{f['count']} × ({grouped(f['fixed'])} + {grouped(f['per_key'])} × {'min(' + grouped(context) + ', ' + grouped(f['keys_cap']) + ')' if f['keys_cap'] else grouped(context)}"
            + (f" + {grouped(f['compressed_keys']['per_key'])} × {grouped(context // f['compressed_keys']['every'])} pooled keys" if f.get("compressed_keys") else "") + ")"
            for f in cost["flops"]["kinds"]),
        "rows": rows,
        "weights": [{"name": w["name"], "bytes": w["bytes"], "total": w["bytes"] + held} for w in cost["weights"]],
    }
    if cost["cache"]["latent"]:
        expanded = sum(k["count"] * (k["expanded"] or k["values"]) for k in kinds) * size
        out["expanded_per_token"] = expanded
        out["expanded_formula"] = " + ".join(f"{k['count']} × {grouped(k['expanded'] or k['values'])}" for k in kinds) + f" values × {size} bytes"
    return out


def check_words(cost: dict[str, Any]) -> dict[str, str]:
    """What proved each kind of figure, in words, from the checks the build ran."""
    checks = cost["checks"]
    cache = [c for c in checks if c["figure"].startswith("KV cache")]
    flops = [c for c in checks if c["figure"].startswith("FLOPs")]
    return {
        "cache": (f"Checked: the same rule at the preview's tiny sizes gave exactly the values transformers' cache held after the "
                  f"prompt, in each of the {len(cache)} blocks ({grouped(sum(c['measured'] for c in cache))} values in all)."),
        "flops": (f"Checked: the same rule at the preview's tiny sizes gave exactly the FLOPs torch.utils.flop_counter counted for one "
                  f"more token, block by block and at the head ({grouped(flops[-1]['measured'])} in all)."),
        "active": next(f"Checked: {c['how']}." for c in checks if c["figure"] == "active parameters"),
    }
