"""config.json in words: hybrid stacks. Where each kind of block sits (the patterns, lists and periods
that say which blocks attend, which run a state-space or recurrent mixer, which are mixtures), and
the other mixers' own keys: linear-attention, convolution (LFM2) and recurrent (RecurrentGemma) blocks.
"""

from __future__ import annotations

from typing import Any

from atlas.model.config_words.registry import (
    _Config,
    _built_as,
    _ordinal,
    _plural,
    _same_as,
    _switch,
    _value_words,
    explains,
)
from atlas.numbers import grouped


# --- where each kind of block sits ----------------------------------------------------------------

LAYER_CHARS = {"M": "state-space", "*": "attention", "-": "MLP", "E": "mixture-of-experts"}


@explains("hybrid_override_pattern")
def _hybrid_pattern(key, v, c):
    pattern = c.text("hybrid_override_pattern")
    counts = {ch: pattern.count(ch) for ch in dict.fromkeys(pattern)}
    parts = [f"{n} {LAYER_CHARS[ch]} ({ch})" if ch in LAYER_CHARS else f'{n} of a kind the atlas has no words for ("{ch}")'
             for ch, n in counts.items()]
    words = (f"One character per block, {_plural(len(pattern), 'block')} in all: M a state-space block, * an "
             f"attention block, - an MLP block, E a mixture-of-experts block; here {', '.join(parts)}")
    layers = c.get_count("num_hidden_layers")
    if layers is not None and layers != len(pattern):
        words += f"; num_hidden_layers says {layers}, and the pattern decides"
    return words


def _indices(v: Any, c: _Config, key: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        c.fail(key, "must be a list of block numbers")
    return v


@explains("full_attn_idxs", unset=True)
def _full_attn_idxs(key, v, c):
    layers = c.get_count("num_hidden_layers")
    if v is None:
        return "Left unset: every block uses full attention, unless layer_types says otherwise"
    idx = _indices(v, c, key)
    words = f"The blocks that use full attention, counting from 0: {', '.join(map(str, idx))}"
    if layers is not None:
        n = len({i for i in idx if i < layers})
        words += f"; {n} of the {layers} blocks, the other {layers - n} are convolution blocks"
    if isinstance(c.raw.get("layer_types"), list):
        words += "; layer_types is given here, and it decides"
    return words


@explains("attn_layer_indices", unset=True)
def _attn_layer_indices(key, v, c):
    if v is None:
        words = "Left unset: no list singles out attention blocks"
        if _built_as(c, "FalconH1ForCausalLM"):
            words += "; every Falcon-H1 block runs its attention and its state-space mixer side by side, so none needs one"
        return words
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        c.fail(key, "must be a list of block numbers")
    return (f"The blocks that use attention (counting from 0): {', '.join(map(str, v))}; the others are state-space "
            "blocks")


def _periodic(c: _Config, period_key: str, offset_key: str) -> list[int] | None:
    """The block numbers i (from 0) with i modulo the period equal to the offset, where the config has all three."""
    layers, period, offset = (c.get_count(k) for k in ("num_hidden_layers", period_key, offset_key))
    if layers is None or not period or offset is None:
        return None
    return [i for i in range(layers) if i % period == offset]


def _period_words(key: str, c: _Config, kind: str, other: str) -> str:
    period_key, offset_key = (key, key.replace("period", "offset")) if key.endswith("period") else (
        key.replace("offset", "period"), key)
    n = c.count(key)
    if key == period_key:
        words = f"{kind[0].upper() + kind[1:]} recurs every {_plural(n, 'block')}: block i (from 0) is one where i modulo {n} equals {offset_key}"
    else:
        words = f"{kind[0].upper() + kind[1:]} starts at block {n} (from 0) and recurs every {period_key} blocks after it"
    chosen = _periodic(c, period_key, offset_key)
    if chosen is not None:
        layers = c.get_count("num_hidden_layers")
        words += (f"; here blocks {', '.join(map(str, chosen))} ({len(chosen)} of the {layers}), "
                  f"and the other {layers - len(chosen)} {other}")
    return words


@explains("attn_layer_period", "attn_layer_offset")
def _attn_period(key, v, c):
    return _period_words(key, c, "an attention block", "are state-space blocks")


@explains("expert_layer_period", "expert_layer_offset")
def _expert_period(key, v, c):
    return _period_words(key, c, "a mixture-of-experts MLP", "keep a dense MLP")


@explains("full_attention_interval")
def _full_interval(key, v, c):
    n = c.count("full_attention_interval")
    if n <= 1:
        words = "Where layer_types is not given, every block uses full attention"
    else:
        words = (f"Where layer_types is not given, every {_ordinal(n)} block uses full attention and the other "
                 f"{n - 1} of each {n} linear attention")
    types = c.raw.get("layer_types")
    layers = c.get_count("num_hidden_layers")
    if isinstance(types, list):
        pattern = ["linear_attention" if (i + 1) % n else "full_attention" for i in range(len(types))] if n else None
        words += ("; layer_types is given here and follows the same pattern" if pattern == types
                  else "; layer_types is given here, and it decides")
    elif layers and n:
        words += f": {layers // n} of the {layers} blocks"
    return words


@explains("_block_types", "block_types")
def _block_types(key, v, c):
    if not isinstance(v, list) or not v or not all(isinstance(t, str) for t in v):
        c.fail(key, "must be a list of block kinds")
    layers = c.get_count("num_hidden_layers")
    words = f"The block kinds, repeated in this order through the depth: {', '.join(v)}"
    if layers:
        blocks = [v[i % len(v)] for i in range(layers)]
        counts = {t: blocks.count(t) for t in dict.fromkeys(blocks)}
        parts = [f"{n} {t}" for t, n in counts.items()]
        listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
        words += f"; over {_plural(layers, 'block')} that makes {listed} blocks"
    if key == "_block_types" and _built_as(c, "RecurrentGemmaForCausalLM"):
        from transformers import RecurrentGemmaConfig

        default = list(RecurrentGemmaConfig.block_types)
        words += ("; the file saves it under a leading underscore, which transformers' RecurrentGemmaConfig does not "
                  "read: it takes block_types, whose default " + ("is the same list" if default == v else
                                                                  f"differs ({', '.join(default)})"))
    return words


# --- linear-attention blocks ----------------------------------------------------------------------

@explains("linear_conv_kernel_dim")
def _linear_conv(key, v, c):
    return (f"The linear-attention blocks run a causal convolution {grouped(c.count(key))} positions wide over "
            "each channel of their inputs")


@explains("linear_key_head_dim")
def _linear_key_dim(key, v, c):
    return f"Each query and key head of the linear-attention blocks is {grouped(c.count(key))} wide"


@explains("linear_value_head_dim")
def _linear_value_dim(key, v, c):
    return f"Each value head of the linear-attention blocks is {grouped(c.count(key))} wide"


@explains("linear_num_key_heads")
def _linear_key_heads(key, v, c):
    return f"{_plural(c.count(key), 'query and key head', 'query and key heads')} per linear-attention block"


@explains("linear_num_value_heads")
def _linear_value_heads(key, v, c):
    n = c.count("linear_num_value_heads")
    words = f"{_plural(n, 'value head')} per linear-attention block"
    k = c.get_count("linear_num_key_heads")
    if k and n % k == 0 and n > k:
        words += f"; each query and key head serves {n // k} of them"
    elif k == n:
        words += ", one per query and key head"
    return words


@explains("linear_attn_config")
def _linear_attn_config(key, v, c):
    if not isinstance(v, dict):
        c.fail("linear_attn_config", "must be an object of linear-attention settings")
    parts = [f"{k}, a list of {len(x)}" if isinstance(x, list) else f"{k} {_value_words(x)}" for k, x in v.items()]
    return f"The linear-attention settings, {_plural(len(v), 'key')}: " + "; ".join(parts)


# --- convolution blocks (LFM2) --------------------------------------------------------------------

@explains("conv_dim", "conv_dim_out")
def _conv_dim(key, v, c):
    n = c.count(key)
    side = "input" if key == "conv_dim" else "output"
    return (f"The width of the convolution blocks' {side} as the original code records it, "
            f"{grouped(n)}{_same_as(c, n, 'hidden_size')}")


_switch("conv_bias", "The convolution blocks' projections and convolution add a learned bias",
        "The convolution blocks' projections and convolution have no bias")


@explains("conv_L_cache")
def _conv_cache(key, v, c):
    n = c.count("conv_L_cache")
    return (f"The convolution blocks run a causal convolution {grouped(n)} positions wide over each channel; in "
            f"generation each keeps its last {_plural(n, 'input')} in the cache")


# --- recurrent blocks (RecurrentGemma) ------------------------------------------------------------

@explains("lru_width")
def _lru_width(key, v, c):
    w = c.count("lru_width")
    words = (f"The recurrent blocks' inner width: the stream is projected to {grouped(w)} channels twice, one branch "
             "through the convolution and the RG-LRU recurrence, the other through the activation, and their product "
             "is projected back")
    heads = c.get_count("num_attention_heads")
    if heads and w % heads == 0:
        words += (f"; the recurrence's gates are block-diagonal, {heads} blocks of {grouped(w // heads)} "
                  "(one per attention head)")
    return words


@explains("conv1d_width")
def _conv1d_width(key, v, c):
    return (f"The recurrent blocks run a causal convolution {_plural(c.count('conv1d_width'), 'position')} wide over "
            "each channel before the recurrence")
