"""config.json in words: the model's sizes and its stack. The residual stream's width, the number of
blocks and the kind of each, the vocabulary, the embedding table and whether the output head shares
it, and the multi-token-prediction blocks a checkpoint may store.
"""

from __future__ import annotations

import json

from atlas.model.config_words.registry import (
    EXPLAIN,
    _alias,
    _built_as,
    _plural,
    _same_as,
    _switch,
    _value_words,
    explains,
)
from atlas.numbers import grouped


# --- the residual stream's width and the depth ----------------------------------------------------

@explains("hidden_size", "n_embd")
def _hidden_size(key, v, c):
    return f"The residual stream is {grouped(c.count(key))} wide"


EXPLAIN["n_embed"] = _hidden_size  # BLOOM's spelling of the width (GPT-2's is n_embd)
# DBRX spells two of the common keys its own way; its configuration class maps them onto the usual names.
_alias("d_model", "hidden_size")
_alias("n_layers", "num_hidden_layers")


@explains("num_hidden_layers", "n_layer")
def _layers(key, v, c):
    return f"{_plural(c.count(key), 'decoder block')}"


@explains("num_layers")
def _num_layers(key, v, c):
    n = c.count(key)
    words = f"The number of blocks: {grouped(n)}"
    if _built_as(c, "LongcatFlashForCausalLM"):
        words += (f"; each runs two attentions, so transformers' LongcatFlashConfig reports num_hidden_layers as "
                  f"{grouped(2 * n)}, the count of attentions, not of blocks")
    return words


@explains("block_dim")
def _block_dim(key, v, c):
    n = c.count("block_dim")
    return f"The blocks' width as the original code records it, {grouped(n)}{_same_as(c, n, 'hidden_size')}"


# --- the kind of each layer -----------------------------------------------------------------------

@explains("layer_types")
def _layer_types(key, v, c):
    if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
        c.fail("layer_types", "must be a list of attention kinds, one per block")
    counts = {t: v.count(t) for t in dict.fromkeys(v)}
    period = next(p for p in range(1, len(v) + 1) if all(x == v[i % p] for i, x in enumerate(v)))
    words = f"The attention kind of each of the {len(v)} blocks: " + ", ".join(f"{n} {t}" for t, n in counts.items())
    if 1 < period < len(v):
        words += f", repeating every {period} blocks ({', '.join(v[:period])})"
    return words


@explains("attn_type_list")
def _attn_type_list(key, v, c):
    if not isinstance(v, list) or not v:
        c.fail(key, f"must be a list of attention types, one per layer, not {json.dumps(v)}")
    counts = {t: v.count(t) for t in dict.fromkeys(v)}
    return "One attention type per layer, as the checkpoint's own code numbers them: " + ", ".join(
        f"type {_value_words(t)} at {_plural(n, 'layer')}" for t, n in counts.items())


@explains("order_of_interleaved_layers")
def _interleave_order(key, v, c):
    order = c.text("order_of_interleaved_layers")
    words = {
        "local_attn_first": "in each repeating group of blocks, the sliding-window blocks come first and the full-attention block last",
        "global_attn_first": "in each repeating group of blocks, the full-attention block comes first and the sliding-window blocks after it",
    }.get(order, "an order the atlas has no words for")
    return f'The order of the interleaved attention kinds, "{order}": {words}'


# --- the vocabulary, the embedding table and the output head --------------------------------------

@explains("vocab_size")
def _vocab(key, v, c):
    n = grouped(c.count("vocab_size"))
    return f"{n} rows in the embedding table, and {n} scores out of the head"


@explains("word_embed_proj_dim")
def _word_embed_proj(key, v, c):
    d = c.count("word_embed_proj_dim")
    width = c.get_count("hidden_size")
    words = f"The embedding table's width: {grouped(d)}"
    if width is None:
        return words
    if d == width:
        return words + ", the same as hidden_size, so nothing is projected in or out"
    return words + f"; the embeddings are projected to {grouped(width)} before the first block and back before the head"


_switch("tie_word_embeddings", "The output head reuses the embedding table's weights: one tensor serves both",
        "The output head has its own weights, separate from the embedding table")

_switch("use_embedding_sharing", "The original code's switch for sharing the embedding table with the output head: on",
        "The original code's switch for sharing the embedding table with the output head: off")
_switch("use_parallel_embedding",
        "The original code splits the embedding table across tensor-parallel devices; it changes no shape",
        "The original code keeps the embedding table whole on each device; it changes no shape")


# --- multi-token-prediction blocks, which transformers does not build -----------------------------

@explains("num_nextn_predict_layers")
def _mtp(key, v, c):
    n = c.count("num_nextn_predict_layers")
    if n == 0:
        return "No multi-token-prediction block is stored"
    return f"{_plural(n, 'multi-token-prediction block')} stored after the last decoder block; transformers builds none"


_switch("use_mtp", "Multi-token-prediction modules are attached in training (transformers builds none)", "No multi-token-prediction modules")


@explains("num_mtp_modules")
def _mtp_modules(key, v, c):
    return f"{_plural(c.count(key), 'multi-token-prediction module')} in training; transformers builds none"


@explains("mtp_transformer_layers")
def _mtp_transformer_layers(key, v, c):
    return f"{_plural(c.count(key), 'decoder layer')} inside each multi-token-prediction module; transformers builds none"


@explains("mtp_num_hidden_layers")
def _mtp_layers(key, v, c):
    n = c.count("mtp_num_hidden_layers")
    if n == 0:
        return "No multi-token-prediction block"
    return f"{_plural(n, 'multi-token-prediction block')} of the original model, for guessing tokens further ahead; transformers builds none"


_switch("mtp_use_dedicated_embeddings", "The multi-token-prediction blocks have an embedding table of their own",
        "The multi-token-prediction blocks share the main embedding table")
