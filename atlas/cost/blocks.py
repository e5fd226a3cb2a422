"""The cost rules per kind of block: from a block's own modules (its matrices, heads and widths) and its
config (the window of each block), the coefficients of its cache and of a token's FLOPs (block_terms).
The kinds: softmax attention (full, sliding, chunked, latent, with a lightning indexer), linear
attention, attention beside a Mamba-2 mixer, state-space and short-convolution mixers, recurrent
blocks, blocks with no mixer; compressed attention's rule is atlas.cost.compressed's.
"""

from __future__ import annotations

from typing import Any

from atlas.errors import AtlasError
from atlas.numbers import grouped
from atlas.model.sizes import experts_per_token
from atlas.model.structure import built_kv_heads
from atlas.model.structure import shared_hybrid_roles, value_scored_mask
from atlas.cost.coefficients import (BlockTerms, attention_flops_per_key, indexer_flops_per_key, latent_cache_values, linear_state_values,
                                     matrix_values, recurrent_state_values, ssm_state_values, standard_cache_values)
from atlas.cost.compressed import compressed_block_terms, stream_mixing

SLIDING_TYPES = ("sliding_attention",)
# chunked attention (Llama 4): a query reads only the earlier positions of its own chunk; transformers' cache
# holds such a block as a sliding window of the chunk's length, so its cache and FLOPs follow the sliding rule
CHUNKED_TYPES = ("chunked_attention",)
FULL_TYPES = (None, "full_attention")
INDEXED_TYPES = ("indexed_attention",)  # every earlier position cached; a lightning indexer chooses the ones attended
# a sliding window plus keys pooled from windows of positions (DeepSeek-V4), by 4 with an indexer or by 128
COMPRESSED_TYPES = ("compressed_sparse_attention", "heavily_compressed_attention")


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
    if roles.lightning_attention:
        return lightning_block_terms(block, roles, config)
    if shared_hybrid_roles(block):  # a shared block's attention, then a Mamba-2 mixer (Zamba2's hybrid blocks)
        return shared_hybrid_terms(block, config, family)
    if roles.attention is not None and roles.ssm is not None:  # both side by side: a cache per position and a fixed state
        return attention_and_state_terms(block, roles, config, family)
    if roles.attention is None:  # a block without attention: a state-space mixer or an MLP alone
        return _no_attention_terms(block, roles, config)
    if attention_type in COMPRESSED_TYPES:
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
    kv_heads = built_kv_heads(attention, heads) or kv_heads  # the module's own count (MiMo-V2-Flash's windowed blocks)
    expand = None
    if _latent(config):
        kind = "latent"
        expand = getattr(attention, "kv_b_proj", None)
        if expand is None:
            raise AtlasError(family, "cost figures", "latent attention (kv_lora_rank in the config) without a kv_b_proj to expand the latent")
        rank, rope = config.kv_lora_rank, config.qk_rope_head_dim
        cache_values = latent_cache_values(rank, rope)
        cache_formula = (f"kv_lora_rank {grouped(rank)} + qk_rope_head_dim {grouped(rope)} = {grouped(cache_values)} values: the latent "
                         "and the one key part every head shares (qk_rope_head_dim wide); one latent serves keys and values, so there is no factor of two")
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
    scored = value_scored_mask(attention) if attention is not None and attentions == 1 else None
    scorer = attention.get_submodule(scored[0]) if scored else None  # the values' scoring projection (Doge's dt_proj)
    excluded = expands if scorer is None else [*(expands if isinstance(expands, list) else [expands] if expands is not None else []), scorer]
    matrices, routed = matrix_values(block, roles, top_k, exclude=excluded)
    per_key = attention_flops_per_key(heads, qk, v)
    key_words = f"2 × {heads} heads × ({grouped(qk)} + {grouped(v)}) = {grouped(per_key)} per key"
    if scorer is not None:  # the mask scored from the values: transformers scores every cached key's values at every step
        per_key += 2 * scorer.weight.numel()
        key_words += (f", + 2 × {grouped(scorer.weight.numel())} for {scored[0]}, which transformers applies to every cached key's "
                      "values at every step to score the mask")
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
    matrices, routed = matrix_values(block, roles, top_k, exclude=conv)
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



def lightning_block_terms(block, roles, config) -> BlockTerms:
    """A block whose token mixer is lightning attention (MiniMax-Text-01): what it caches is one
    head_dim × head_dim key-value state per head, the same at any context (one "position" of that
    size, never more); a token's FLOPs are its matrices and, at each decoding step, two products with
    each head's state (the key-value update and the query's read-out), neither growing with the context."""
    mixer = block.get_submodule(roles.attention)
    heads, head_dim = mixer.num_attention_heads, mixer.head_dim
    state = linear_state_values(heads, head_dim, head_dim)
    cache_formula = (f"{heads} heads × {grouped(head_dim)} key dims × {grouped(head_dim)} value dims = {grouped(state)} values of "
                     "decaying key-value state per sequence, whatever the context (held as one position)")
    matrices, routed = matrix_values(block, roles, experts_per_token(config))
    reads = 2 * 2 * state
    fixed = 2 * matrices + reads
    flops_formula = (f"2 × {grouped(matrices)} matrix values = {grouped(2 * matrices)}; + 2 × 2 × {grouped(state)} = {grouped(reads)} "
                     "for the decoding step's two products with each head's state (the new key times its value, added to the "
                     "decayed state; the query times the state), which do not grow with the context")
    return BlockTerms("linear", None, state, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)


def shared_hybrid_terms(block, config, family: str = "") -> BlockTerms:
    """A block that runs a shared block (attention and MLP over the stream beside the embeddings) and then its own
    Mamba-2 block (Zamba2): the shared attention's keys and values at every position, cached for each use apart, and
    the mixer's fixed-size state; a token multiplies the shared block's matrices with one adapter of each list (its
    use's), the block's own linear map and the mixer's, plus the attention over every earlier key."""
    import torch

    from atlas.model.roles import block_roles
    from atlas.model.structure import is_low_rank_adapter, separate_qkv

    names = shared_hybrid_roles(block)
    shared, mixer_block = block.get_submodule(names["shared"]), block.get_submodule(names["mixer_block"])
    attention = next(m for m in shared.modules() if separate_qkv(m))
    q, k, _ = separate_qkv(attention)
    head_dim = attention.head_dim
    heads, kv_heads = getattr(attention, q).out_features // head_dim, getattr(attention, k).out_features // head_dim
    inner_roles = block_roles(mixer_block)
    mixer = getattr(mixer_block, inner_roles.ssm)
    conv = next(m for m in mixer.children() if isinstance(m, torch.nn.Conv1d))
    channels, kernel = conv.weight.shape[0], conv.kernel_size[0]
    state_heads = mixer.A_log.shape[0]
    inner = getattr(mixer, inner_roles.ssm_out_proj).weight.shape[1]
    state = (channels - inner) // (2 * mixer.n_groups)
    state_values = ssm_state_values(channels, kernel, state_heads, inner // state_heads, state)
    cache_values = standard_cache_values(kv_heads, head_dim, head_dim)
    cache_formula = (f"the shared attention, cached for this use apart: 2 × {kv_heads} key-value heads × head_dim {grouped(head_dim)} = "
                     f"{grouped(cache_values)} values per position; beside it the Mamba-2 state, the same at every context: "
                     f"{grouped(channels)} convolution channels × {kernel} positions + {state_heads} heads × {grouped(inner // state_heads)} "
                     f"× state {grouped(state)} = {grouped(state_values)} values per sequence")
    # the adapters a use does not run: every entry of an adapter list but one
    idle = [part for m in block.modules() if isinstance(m, torch.nn.ModuleList) and any(is_low_rank_adapter(c) for c in m)
            for entry in [c for c in m if is_low_rank_adapter(c)][1:] for part in entry.modules()]
    matrices, routed = matrix_values(block, block_roles(block), None, exclude=idle + [conv])
    conv_flops, read_flops = 2 * 2 * channels * kernel, 2 * state_heads * (inner // state_heads) * state
    fixed = 2 * matrices + conv_flops + read_flops
    per_key = attention_flops_per_key(heads, head_dim, head_dim)
    flops_formula = (f"2 × {grouped(matrices)} matrix values (the shared block with this use's adapters, the linear map, the mixer) "
                     f"+ the convolution 2 × 2 × {grouped(channels)} × {kernel} + reading the state 2 × {state_heads} × "
                     f"{grouped(inner // state_heads)} × {grouped(state)} = {grouped(fixed)}; attention: 2 × {heads} heads × "
                     f"({grouped(head_dim)} + {grouped(head_dim)}) = {grouped(per_key)} per key")
    return BlockTerms("full_and_state", None, cache_values, None, cache_formula, None, None, fixed, per_key, None, flops_formula,
                      matrices, routed, state_values)


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
    matrices, routed = matrix_values(block, roles, getattr(config, "num_experts_per_tok", None))
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



def _no_attention_terms(block, roles, config) -> BlockTerms:
    """A block with no attention: nothing grows with the context. A state-space mixer keeps a state of
    fixed size (held as one "position" that never grows: cap 1); an MLP block keeps nothing."""
    matrices, routed = matrix_values(block, roles, experts_per_token(config))
    fixed = 2 * matrices
    flops_formula = f"2 × {grouped(matrices)} matrix values = {grouped(fixed)}"
    if roles.ssm is None:
        return BlockTerms("none", None, 0, None, "no cache: the block has no attention and no state", None, None,
                          fixed, 0, None, flops_formula + "; nothing grows with the context", matrices, routed)
    import torch

    from atlas.model.structure import is_recurrent_block, is_time_mixing

    mixer = block.get_submodule(roles.ssm)
    if is_recurrent_block(mixer):
        return recurrent_block_terms(mixer, matrices, routed)
    if is_time_mixing(mixer):
        return time_mixing_terms(block, mixer, roles, matrices, routed)
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


def time_mixing_terms(block, mixer, roles, matrices: int, routed) -> BlockTerms:
    """An RWKV block: a state of fixed size per block, the same at every context: the WKV recurrence's
    numerator, denominator and largest exponent for each channel, and the last input each token shift
    holds (the time mixing's and the channel mixing's); a token's FLOPs are its matrices', and the
    recurrence's update is element-wise."""
    channels = mixer.time_decay.shape[0]
    width = mixer.time_mix_key.shape[-1]
    shifts = sum(1 for name in (roles.ssm, roles.mlp) if name is not None) * width
    values = 3 * channels + shifts
    # the per-channel interpolation weights (1 × 1 × width) are stored with unit axes: they multiply nothing as a matrix
    matrices -= sum(p.numel() for p in block.parameters() if p.dim() >= 2 and sum(n > 1 for n in p.shape) <= 1)
    fixed = 2 * matrices
    cache_formula = (f"a state of fixed size, the same at every context: the WKV recurrence's numerator, denominator and largest "
                     f"exponent, 3 × {grouped(channels)} channels, + the last input of the two token shifts, 2 × {grouped(width)} "
                     f"= {grouped(values)} values per sequence (transformers holds them in its state list, the recurrence's three in float32)")
    flops_formula = (f"2 × {grouped(matrices)} matrix values = {grouped(fixed)}; the token shifts' interpolations and the "
                     "recurrence's update are element-wise, which torch.utils.flop_counter does not count; nothing grows with the context")
    return BlockTerms("state", None, values, 1, cache_formula, None, None, fixed, 0, None, flops_formula, matrices, routed)
