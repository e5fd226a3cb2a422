"""config.json in words: positions. How long a context is, how positions enter (a learned table, ALiBi,
rotary angles: their base, their extension by rope_scaling, the dims they turn), and which earlier
positions a query reads (sliding windows, chunks), with the query temperature of Llama 4's blocks
that have no rotary angles.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from atlas.model.config_words.registry import (
    _Config,
    EXPLAIN,
    V4,
    _alias,
    _built_as,
    _head_width,
    _num,
    _ordinal,
    _plural,
    _settings,
    _switch,
    explains,
)
from atlas.numbers import grouped


# --- how far a context reaches --------------------------------------------------------------------

@explains("max_position_embeddings")
def _max_positions(key, v, c):
    n = c.count("max_position_embeddings")
    words = f"The longest context the configuration declares: {grouped(n)} positions"
    scaling = c.raw.get("rope_scaling") or {}
    original = scaling.get("original_max_position_embeddings") if isinstance(scaling, dict) else None
    if original:
        words += f", {_num(n / c.count('rope_scaling', original))} times the {grouped(original)} the rotary scaling starts from"
    return words


@explains("n_positions")
def _n_positions(key, v, c):
    return f"Rows of the learned position table: positions 0 to {grouped(c.count('n_positions') - 1)}, the longest context"


@explains("n_ctx")
def _n_ctx(key, v, c):
    n = c.count("n_ctx")
    words = f"The context length in the original code: {grouped(n)} positions"
    if "n_positions" in c.raw:
        same = c.raw["n_positions"] == n
        words += "; the same as n_positions" if same else f"; n_positions says {grouped(c.count('n_positions'))}"
    return words


@explains("original_max_position_embeddings")
def _original_max(key, v, c):
    n = c.count("original_max_position_embeddings")
    words = f"The context length before any extension: {grouped(n)} positions"
    if c.raw.get("rope_scaling") is None:
        words += "; rope_scaling is unset here, so no extension rule uses it"
    return words


@explains("initial_context_length")
def _initial_context(key, v, c):
    n = c.count("initial_context_length")
    words = f"The context length of the original training: {grouped(n)} positions"
    scaling = c.raw.get("rope_scaling")
    if isinstance(scaling, dict) and "original_max_position_embeddings" in scaling:
        same = scaling["original_max_position_embeddings"] == n
        words += "; the same as rope_scaling's original length" if same else "; rope_scaling's original length differs"
    return words


_alias("model_max_length", "max_position_embeddings")
_alias("max_seq_len", "max_position_embeddings")  # DBRX's name; its configuration class maps it onto the usual one


# --- how positions enter: a learned table, ALiBi or rotary angles ---------------------------------

POSITION_KINDS = {
    "rope_gptj": "rotary positions on interleaved pairs: each even dim of a head rotates with the odd dim after it",
    "absolute": "a learned table of absolute positions added to the embeddings",
    "alibi": "ALiBi, a penalty on the attention scores growing linearly with distance",
}


@explains("position_embedding_type")
def _position_kind(key, v, c):
    kind = c.text("position_embedding_type")
    return f'Positions enter the model as "{kind}", ' + POSITION_KINDS.get(kind, "a kind the atlas has no words for")


_switch("alibi", "ALiBi: each head adds a penalty growing linearly with distance to its attention scores",
        "No ALiBi distance penalty is added to the attention scores")


@explains("offset_alibi")
def _offset_alibi(key, v, c):
    return (f"A setting ({grouped(c.count(key))}) of the training code's ALiBi bias; transformers builds the bias from the "
            "heads' slopes and the key positions alone")


_switch("use_pos_enc", "The original code's switch for position encoding: on",
        "The original code's switch for position encoding: off")

_switch("use_rotary_pos_emb", "Positions enter through the rotary embedding", "No rotary embedding")

_switch("rotary", "Queries and keys are rotated by position (rotary embeddings)",
        "No rotary position: queries and keys are not rotated")


# --- the rotary angles: their base, their extension, the dims they turn ---------------------------

# What each rope_type does to the rotary frequencies, by transformers' names for them.
ROPE_TYPES = {
    "default": "plain rotary frequencies with no context extension",
    "linear": "linear scaling: positions are divided by the factor",
    "dynamic": "dynamic NTK scaling: the base grows with the sequence once it passes the original length",
    "yarn": ("YaRN: the low frequencies are divided by the factor and the high ones kept, with a ramp between set by "
             "beta_fast and beta_slow, plus a correction of the attention's temperature"),
    "longrope": "LongRoPE: a separate factor for every frequency, one list for short and one for long contexts",
    "llama3": ("Llama 3 scaling: the low frequencies are divided by the factor and the high ones kept, with a smooth "
               "ramp between set by low_freq_factor and high_freq_factor"),
}


def rope_words(values: Any, c: _Config, key: str) -> str:
    """A rope_scaling or rope_parameters object: its type in words, then every setting it holds."""
    if values is None:
        return "Left unset: the rotary frequencies are used as the base gives them, with no context extension"
    if not isinstance(values, dict):
        c.fail(key, f"must be an object of rotary settings or unset, not {json.dumps(values)}")
    if values and all(isinstance(v, dict) for v in values.values()):
        # One set of settings per attention kind (Gemma 3's sliding and full attention).
        return "Separate rotary settings per attention kind: " + "; ".join(
            f"{kind}: {_rope_one(v, c, f'{key}.{kind}')}" for kind, v in values.items()
        )
    return _rope_one(values, c, key)


def _rope_one(values: Mapping[str, Any], c: _Config, key: str) -> str:
    # Older configs name the rule "type", newer ones "rope_type": the words quote the one the file uses.
    named = "rope_type" if "rope_type" in values else "type"
    kind = values.get(named)
    if not isinstance(kind, str):
        c.fail(key, "names no rope_type (or type): the rule it applies to the rotary frequencies is unknown")
    words = ROPE_TYPES.get(kind, "a rope type the atlas has no words for")
    settings = _settings(values, skip=("rope_type", "type"))
    return f'{words} ({named} "{kind}"' + (f"; {settings})" if settings else ")")


@explains("rope_theta")
def _rope_theta(key, v, c):
    return f"The base of the rotary frequencies: dimension pair j turns by {_num(c.number('rope_theta'))}^(−2j/d) radians per position"


_alias("rotary_emb_base", "rope_theta")


@explains("rope_local_base_freq")
def _rope_local(key, v, c):
    words = f"The base of the rotary frequencies in the sliding-window blocks: {_num(c.number('rope_local_base_freq'))}"
    if "rope_theta" in c.raw:
        words += f" (the other blocks use rope_theta, {_num(c.number('rope_theta', c.raw['rope_theta']))})"
    return words


@explains("compress_rope_theta")
def _compress_rope_theta(key, v, c):
    return (f"The base of the rotary frequencies on the blocks that compress their keys (and of their compressors and "
            f"indexers): {_num(c.number('compress_rope_theta'))}; the sliding-window-only blocks use rope_theta")


@explains("rope_scaling", "rope_parameters", unset=True)
def _rope(key, v, c):
    words = rope_words(v, c, key)
    return words[:1].upper() + words[1:]


@explains("partial_rotary_factor", "rotary_pct")
def _rotary_fraction(key, v, c):
    f = c.number(key)
    d = _head_width(c)
    if f == 1:
        return f"Every dim of each query and key head is rotated by position (a fraction of {_num(f)})"
    words = f"A fraction {_num(f)} of each query and key head's dims is rotated by position"
    if d:
        r = int(d * f)
        words += f": {grouped(r)} of {grouped(d)}, the other {grouped(d - r)} carry no position"
    return words


@explains("rotary_dim", unset=True)
def _rotary_dim(key, v, c):
    if v is None:
        return "Left unset: every dim of each query and key head is rotated by position"
    n = c.count("rotary_dim")
    words = f"{grouped(n)} dims of each query and key head are rotated by position"
    d = _head_width(c)
    if d and n < d:
        words += f", of {grouped(d)}; the other {grouped(d - n)} carry no position"
    elif d and n >= d:
        words += f"; a head is {grouped(d)} wide, so every dim is"
    return words


_switch("rope_interleave", "The rotated dimensions are stored as interleaved pairs and regrouped before rotation",
        "The rotated dimensions are stored as two halves, rotated as they are")
_switch("use_mrope",
        "Multimodal rotary positions: the rotated dims are split into sections turned by time, height and width positions",
        "Plain rotary positions: one sequence index per token, not separate time, height and width indices")
_switch("mla_use_nope", "The latent-attention blocks apply no rotary position: no part of their queries and keys is rotated",
        "The latent-attention blocks rotate part of each query and key by position")


@explains("no_rope_layers")
def _no_rope_layers(key, v, c):
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        c.fail("no_rope_layers", "must be a list of 1 and 0, one per block")
    without = [i for i, x in enumerate(v) if not x]
    words = (f"One flag per block, 1 where the block rotates queries and keys by position and 0 where it uses no "
             f"position encoding: {len(v) - len(without)} of the {len(v)} blocks rotate")
    if without:
        words += f", blocks {', '.join(map(str, without))} (counting from 0) do not"
    return words


@explains("no_rope_layer_interval")
def _no_rope_interval(key, v, c):
    n = c.count("no_rope_layer_interval")
    if n <= 1:
        words = "Where no_rope_layers is not given, no block uses position encoding"
    else:
        words = f"Where no_rope_layers is not given, every {_ordinal(n)} block uses no position encoding"
    given = c.raw.get("no_rope_layers")
    if isinstance(given, list):
        pattern = [int((i + 1) % n != 0) if n else 1 for i in range(len(given))]
        words += ("; no_rope_layers is given here and follows the same pattern" if pattern == given
                  else "; no_rope_layers is given here, and it decides")
    return words


# --- the positions a query reads: sliding windows and chunks --------------------------------------

@explains("sliding_window", "sliding_window_size", unset=True)
def _window(key, v, c):
    if v is None:
        return "Left unset: no block limits how far back it attends"
    w = grouped(c.count(key))
    words = f"A sliding-window block lets each position attend to the {w} positions ending at itself"
    if key == "sliding_window_size" and "sliding_window" in c.raw:
        words += "; the same as sliding_window" if c.raw["sliding_window"] == v else "; sliding_window says otherwise"
    if c.raw.get("use_sliding_window") is False:
        words += "; use_sliding_window is off, so no block uses it"
    types = c.raw.get("layer_types")
    if isinstance(types, list) and types:
        words += f" ({types.count('sliding_attention')} of the {len(types)} blocks in layer_types)"
    return words


@explains("use_sliding_window")
def _use_window(key, v, c):
    if c.flag("use_sliding_window"):
        return "On: the blocks from max_window_layers on attend within sliding_window"
    return "Off: no block attends within a sliding window, whatever sliding_window and max_window_layers say"


@explains("max_window_layers")
def _max_window_layers(key, v, c):
    n = c.count("max_window_layers")
    layers = c.get_count("num_hidden_layers")
    if layers is not None and n >= layers:
        return f"The first {n} blocks never attend within a sliding window; with {layers} blocks, that is every block"
    later = f"Blocks {n}–{layers - 1}" if layers is not None else f"Blocks {n} and later"
    if c.raw.get("use_sliding_window") is True and c.raw.get("sliding_window"):
        return f"{later} attend within the sliding window; the first {n} attend to every earlier position"
    return f"{later} would attend within a sliding window if use_sliding_window were on; it is off"


@explains("sliding_window_pattern")
def _window_pattern(key, v, c):
    p = c.count("sliding_window_pattern")
    if p <= 1:
        return "Every block is a global block (a period of 1)"
    return f"The blocks repeat in a period of {p}: {_plural(p - 1, 'sliding-window block')}, then one global block"


# RecurrentGemma's name for the window of its attention blocks.
_alias("attention_window_size", "sliding_window")


@explains("attention_chunk_size")
def _attention_chunk_size(key, v, c):
    n = c.count("attention_chunk_size")
    words = (f"The blocks that rotate attend in chunks of {grouped(n)} positions: a query sees only the earlier "
             "positions of its own chunk")
    if isinstance(c.raw.get("no_rope_layers"), list) and not all(c.raw["no_rope_layers"]):
        words += "; the blocks without rotary angles attend over every earlier position"
    return words


# --- the query temperature of the blocks without rotary angles (Llama 4) --------------------------

@explains("attn_temperature_tuning")
def _attn_temperature_tuning(key, v, c):
    if isinstance(v, bool):
        state = "on" if v else "off"
    elif isinstance(v, int):
        state = f"given as the number {v}, not a switch"
    else:
        c.fail("attn_temperature_tuning", "must be true or false")
    return (f"Whether the blocks without rotary angles scale their queries up along the context (attn_scale and "
            f"floor_scale say by how much): {state}")


@explains("floor_scale")
def _floor_scale(key, v, c):
    n = c.count("floor_scale")
    return (f"The query temperature of the blocks without rotary angles steps up every {grouped(n)} positions: "
            f"position t's queries are multiplied by 1 + attn_scale · ln(1 + ⌊(t + 1) / {grouped(n)}⌋)")


@explains("attn_scale")
def _attn_scale(key, v, c):
    s = c.number("attn_scale")
    return (f"How fast the query temperature of the blocks without rotary angles grows: the factor is 1 plus {_num(s)} "
            "times the natural log of one more than the number of floor_scale steps passed")


# --- what DeepseekV4ForCausalLM does with the rotary settings and the window ------------------------

def _v4_notes() -> None:
    """Keys other models share, where DeepseekV4ForCausalLM uses them in its own way."""
    plain = {key: EXPLAIN[key] for key in ("rope_scaling", "rope_theta", "sliding_window")}

    def rope_scaling(key, v, c):
        words = plain[key](key, v, c)
        if _built_as(c, V4) and isinstance(v, dict):
            words += ("; DeepseekV4ForCausalLM applies it only on the blocks that compress their keys, with base "
                      "compress_rope_theta, and without that temperature correction (its attention factor is fixed at 1)")
        return words

    def rope_theta(key, v, c):
        words = plain[key](key, v, c)
        if _built_as(c, V4):
            words += "; in DeepseekV4ForCausalLM only the sliding-window-only blocks use it (the others use compress_rope_theta)"
        return words

    def sliding_window(key, v, c):
        if not _built_as(c, V4) or v is None:
            return plain[key](key, v, c)
        return (f"Every block's attention reads the {grouped(c.count(key))} positions ending at the query, with or without "
                "compressed keys besides (compress_ratios)")

    for key, fn in (("rope_scaling", rope_scaling), ("rope_theta", rope_theta), ("sliding_window", sliding_window)):
        EXPLAIN[key] = fn


_v4_notes()


@explains("attn_rotary_emb")
def _attn_rotary_emb(key, v, c):
    # Bamba's files carry the original code's rotary width; BambaConfig does not read it and fixes the share itself
    return (f"The original code's rotary width, {grouped(c.count(key))} dims of each attention head; transformers' "
            "configuration class does not read this key and sets partial_rotary_factor itself")


# --- AFMoE's pattern of windowed and global blocks ------------------------------------------

@explains("global_attn_every_n_layers")
def _global_every(key, v, c):
    n = c.count(key)
    words = f"Every {_ordinal(n)} block attends to the whole context, the others within the sliding window"
    if isinstance(c.raw.get("layer_types"), list):
        words += "; layer_types gives the same pattern block by block, and the model reads layer_types"
    return words


# --- Granite SWA's per-layer rotary base ----------------------------------------------------

@explains("layer_rope_theta")
def _layer_rope_theta(key, v, c):
    # one rotary base a layer, 0 for a layer that gets no rotary angles at all (NoPE)
    values = list(v) if isinstance(v, (list, tuple)) else []
    if not values:
        return "One rotary base a layer; unset, every layer takes rope_theta"
    without = sum(1 for x in values if not x)
    bases = sorted({float(x) for x in values if x})
    words = f"One rotary base a layer, {_plural(len(values), 'layer')} listed"
    if bases:
        words += ": " + ", ".join(_num(b) for b in bases) + (" on every rotated layer" if len(bases) == 1 else "")
    if without:
        words += f"; {_plural(without, 'layer')} at 0 take no positions at all (NoPE)"
    else:
        words += "; no layer is without positions"
    return words
