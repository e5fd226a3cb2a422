"""config.json in words: attention. Its heads (how many, how wide, which share keys and values), latent
attention, what happens to the scores and the output (scale, softcap, clipping, precision, gate), keys
and values shared across layers, the sparse-attention indexer, and DeepSeek-V4's compressed keys and
grouped output projection.
"""

from __future__ import annotations

from atlas.model.config_words.registry import (
    EXPLAIN,
    V4,
    _alias,
    _built_as,
    _entries,
    _head_width,
    _num,
    _plural,
    _same_as,
    _switch,
    _value_words,
    explains,
)
from atlas.numbers import grouped


# --- the heads: how many, how wide, which share keys and values -----------------------------------

@explains("num_attention_heads", "n_head")
def _heads(key, v, c):
    return f"{_plural(c.count(key), 'query head')} per attention"


_alias("n_heads", "num_attention_heads")  # DBRX's name; its configuration class maps it onto the usual one


@explains("num_key_value_heads")
def _kv_heads(key, v, c):
    kv = c.count("num_key_value_heads")
    heads = c.get_count("num_attention_heads")
    if heads is None:
        return f"{_plural(kv, 'key and value head', 'key and value heads')} per attention"
    if kv == 0 or heads % kv:
        c.fail("num_key_value_heads", f"{kv} does not divide num_attention_heads ({heads})")
    if kv == heads:
        return f"{_plural(kv, 'key and value head', 'key and value heads')} per attention, one per query head: none is shared"
    if kv == 1:
        return f"One key and value head shared by all {heads} query heads (multi-query attention)"
    return f"{kv} key and value heads, each shared by {heads // kv} of the {heads} query heads (grouped-query attention)"


@explains("multi_query")
def _multi_query(key, v, c):
    if c.flag("multi_query"):
        words = "One key and value head shared by all query heads (multi-query attention)"
    else:
        words = "Not multi-query: the key and value heads are not reduced to one"
    if c.raw.get("new_decoder_architecture") is True:
        words += "; new_decoder_architecture is on, so this is ignored"
    return words


@explains("num_heads")
def _num_heads(key, v, c):
    n = c.count("num_heads")
    return f"{_plural(n, 'attention head')} per attention block{_same_as(c, n, 'num_attention_heads')}"


@explains("head_dim")
def _head_dim(key, v, c):
    d = c.count("head_dim")
    words = f"Each query, key and value head is {grouped(d)} wide"
    heads, width = c.get_count("num_attention_heads"), c.get_count("hidden_size")
    if heads and width:
        total = heads * d
        relation = "equal to" if total == width else ("wider than" if total > width else "narrower than")
        words += f"; {heads} heads × {grouped(d)} = {grouped(total)}, {relation} the residual width {grouped(width)}"
    return words


@explains("attention_head_dim")
def _attention_head_dim(key, v, c):
    return f"The width of each attention head, {grouped(c.count(key))}, under the training code's name for head_dim"


@explains("v_head_dim")
def _v_head_dim(key, v, c):
    return f"Each value head is {grouped(c.count('v_head_dim'))} wide"


@explains("qk_head_dim")
def _qk_head_dim(key, v, c):
    d = c.count("qk_head_dim")
    words = f"Each query and key head is {grouped(d)} wide in all"
    nope, rope = c.get_count("qk_nope_head_dim"), c.get_count("qk_rope_head_dim")
    if nope is not None and rope is not None:
        total = nope + rope
        words += f": qk_nope_head_dim {grouped(nope)} + qk_rope_head_dim {grouped(rope)} = {grouped(total)}"
        if total != d:
            words += f", not {grouped(d)}; the configuration class recomputes it from those two, so {grouped(total)} holds"
        else:
            words += "; the configuration class recomputes it from those two rather than reading it"
    return words


# --- latent attention: queries, keys and values expanded from a small latent per token ------------

_switch("use_mla", "Attention uses compressed latents (latent attention)", "Attention is ordinary grouped-query attention, with no latents")


@explains("q_lora_rank", unset=True)
def _q_lora(key, v, c):
    if v is None:
        return "Left unset: queries are projected straight from the stream, with no latent"
    return f"Queries are expanded from a {grouped(c.count('q_lora_rank'))}-wide latent per token"


@explains("kv_lora_rank")
def _kv_lora(key, v, c):
    return f"Keys and values are expanded from a {grouped(c.count('kv_lora_rank'))}-wide latent per token (latent attention)"


@explains("qk_nope_head_dim")
def _qk_nope(key, v, c):
    return f"{grouped(c.count('qk_nope_head_dim'))} dims of each query and key head carry no rotary position"


@explains("qk_rope_head_dim")
def _qk_rope(key, v, c):
    words = f"{grouped(c.count('qk_rope_head_dim'))} dims of each query and key head are rotated by position"
    if c.raw.get("kv_lora_rank"):
        words += "; the rotated key part is computed once per token and shared by every head"
    return words


def _latent_scale(kind: str, rank_key: str):
    def explain(key, v, c):
        on = c.flag(key)
        rank, width = c.get_count(rank_key), c.get_count("hidden_size")
        by = f"√({grouped(width)}/{grouped(rank)}) ≈ {(width / rank) ** 0.5:.4g}" if rank and width else f"√(hidden_size/{rank_key})"
        words = f"The original code's switch for multiplying the {kind} expanded from the latent by {by}: {'on' if on else 'off'}"
        if _built_as(c, "LongcatFlashForCausalLM"):
            words += "; transformers reads no such switch and always applies the factor"
        return words

    return explain


explains("mla_scale_q_lora")(_latent_scale("queries", "q_lora_rank"))
explains("mla_scale_kv_lora")(_latent_scale("keys", "kv_lora_rank"))


# --- the scores and the output: scale, softcap, clipping, precision, gate -------------------------

@explains("query_pre_attn_scalar")
def _query_scalar(key, v, c):
    s = c.number("query_pre_attn_scalar")
    words = f"The attention scores are scaled by 1/√{_num(s)} = {s ** -0.5:.4g}"
    d = c.raw.get("head_dim")
    if d is not None:
        words += ", which is 1/√head_dim here" if c.count("head_dim", d) == s else f", not by 1/√head_dim (head_dim is {d})"
    return words


@explains("scale_attn_weights")
def _scale_attn(key, v, c):
    d = _head_width(c)
    by = f"1/√{grouped(d)} = {d ** -0.5:.4g}" if d else "1/√(head width)"
    if c.flag("scale_attn_weights"):
        return f"The attention scores are scaled by {by} before the softmax"
    return f"The attention scores are not scaled by {by}: they go into the softmax as they are"


@explains("attention_multiplier")
def _attention_multiplier(key, v, c):
    words = f"The attention scores are multiplied by {_num(c.number('attention_multiplier'))}"
    d = _head_width(c)
    if d:
        words += f", in place of the usual 1/√(head width), here 1/√{grouped(d)} = {d ** -0.5:.4g}"
    return words


_switch("attention_softmax_in_fp32", "The attention's softmax runs in 32-bit floats, whatever the weights' precision",
        "The attention's softmax runs in the weights' own precision")


@explains("scale_attention_softmax_in_fp32")
def _scale_in_fp32(key, v, c):
    if c.flag("scale_attention_softmax_in_fp32"):
        words = "The attention scores are scaled in 32-bit floats together with the softmax, not before it"
        if c.raw.get("attention_softmax_in_fp32") is False:
            words += "; attention_softmax_in_fp32 is off, so this has no effect"
        return words
    return "The attention scores are scaled in the weights' own precision before the softmax"


@explains("attn_logit_softcapping", unset=True)
def _attn_softcap(key, v, c):
    if v is None:
        return "Left unset: the attention scores are not softcapped"
    cap = _num(c.number("attn_logit_softcapping"))
    return f"The attention scores are squashed into (−{cap}, {cap}) by {cap}·tanh(score / {cap}) before the softmax"


@explains("clip_qkv", unset=True)
def _clip_qkv(key, v, c):
    if v is None:
        return "Left unset: queries, keys and values are not clipped"
    limit = _num(c.number("clip_qkv"))
    return f"Queries, keys and values are each clamped into [−{limit}, {limit}] before the attention"


_switch("attn_output_gate",
        "The full-attention blocks multiply their output, element by element, by a sigmoid gate projected from the stream",
        "The full-attention blocks have no output gate")


# --- keys and values shared across layers ---------------------------------------------------------

_switch("use_cla", "Key-value caches are shared across adjacent layers (cross-layer attention)", "Every layer keeps its own keys and values")


@explains("cla_share_factor")
def _cla_factor(key, v, c):
    return f"With cross-layer attention on, each key-value cache would serve {_plural(c.count(key), 'layer')}"


# --- the sparse-attention indexer -----------------------------------------------------------------

# The sparse-attention indexer of DeepSeek-V3.2 and GLM-5: a small scorer picks the keys each query attends to.

@explains("index_n_heads")
def _index_heads(key, v, c):
    n = c.count("index_n_heads")
    return (f"The indexer scores earlier positions with {_plural(n, 'query head')} against one shared key; each "
            "head's score passes a ReLU, and the heads are summed with weights computed from the query's token")


@explains("index_head_dim")
def _index_head_dim(key, v, c):
    d = c.count("index_head_dim")
    words = f"Each of the indexer's query heads, and its one key, is {grouped(d)} wide"
    rot = c.get_count("qk_rope_head_dim")
    if rot is not None and rot <= d:
        words += f"; the first {grouped(rot)} dims are rotated by position, the other {grouped(d - rot)} are not"
    return words


@explains("index_topk")
def _index_topk(key, v, c):
    k = c.count("index_topk")
    return (f"Each query attends only to the {_plural(k, 'position')} up to its own that the indexer scores highest "
            f"(to all of them while there are no more than {grouped(k)})")


_switch("indexer_rope_interleave",
        "The indexer's rotated dims are stored as interleaved pairs (x0, x1), (x2, x3), …, each pair turned together",
        "The indexer's rotated dims are stored as two halves, dim i turned with dim i + half")


def _indexer_interleave_note() -> None:
    switch = EXPLAIN["indexer_rope_interleave"]

    def explain(key, v, c):
        words = switch(key, v, c)
        if _built_as(c, "GlmMoeDsaForCausalLM"):
            words += ("; transformers' GLM-MoE-DSA indexer reads no such switch and always rotates interleaved "
                      "pairs" + (", as this says" if v else ", which this contradicts"))
        return words

    EXPLAIN["indexer_rope_interleave"] = explain


_indexer_interleave_note()


# --- compressed keys and a grouped output projection (DeepSeek-V4) --------------------------------

RATE_NAMES = {0: "the sliding window alone"}  # any other entry m: "compressed by m"


def _indexed_ratio() -> int:
    """The compress_ratios entry DeepseekV4Config builds as compressed sparse attention, the blocks that
    run a lightning indexer, read from transformers' own table of entries (the others: the sliding
    window alone, and heavy compression without an indexer)."""
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import _COMPRESS_RATIO_TO_LAYER_TYPE

    (ratio,) = (r for r, kind in _COMPRESS_RATIO_TO_LAYER_TYPE.items() if kind == "compressed_sparse_attention")
    return ratio


@explains("compress_ratios")
def _compress_ratios(key, v, c):
    ratios = list(v) if isinstance(v, list) else []
    layers = c.get_count("num_hidden_layers")
    counts = ", ".join(f"{ratios[:layers].count(r)} {RATE_NAMES.get(r, f'compressed by {r}')}" for r in sorted(set(ratios)))
    words = (f"One entry per block: 0 keeps only the sliding window's keys, m adds one key per m positions, each a learned, "
             f"gated average of a window; of the {layers} blocks, {counts}")
    if layers is not None and len(ratios) > layers:
        words += f"; the {_plural(len(ratios) - layers, 'entry', 'entries')} past the last block {'is' if len(ratios) - layers == 1 else 'are'} the multi-token-prediction block's"
    indexed = _indexed_ratio()
    if indexed in ratios and c.raw.get("index_topk"):
        words += (f"; the blocks compressing by {indexed} also run a lightning indexer that keeps the index_topk "
                  "best compressed keys per query")
    return words


@explains("o_groups")
def _o_groups(key, v, c):
    g = c.count("o_groups")
    heads = c.get_count("num_attention_heads")
    per = f" of {_plural(heads // g, 'head')}" if heads and heads % g == 0 else ""
    return (f"The attention's output projection works in {_plural(g, 'group')}{per}: each group's heads are projected on "
            "their own to o_lora_rank values, and one map then mixes every group's values to the residual width")


@explains("o_lora_rank")
def _o_lora_rank(key, v, c):
    r = c.count("o_lora_rank")
    g = c.get_count("o_groups")
    total = f" ({grouped(g * r)} in all, the input of the last output map)" if g else ""
    return f"Each output group's heads are projected to {grouped(r)} values{total}"


def _v4_notes() -> None:
    """The indexer's keys, where DeepseekV4ForCausalLM uses them in its own way: it scores compressed keys."""
    plain = {key: EXPLAIN[key] for key in ("index_n_heads", "index_head_dim", "index_topk")}

    def index_n_heads(key, v, c):
        if not _built_as(c, V4):
            return plain[key](key, v, c)
        return (f"The indexer of each block compressing by {_indexed_ratio()} scores the compressed keys with {_plural(c.count(key), 'query head')}; "
                "each head's score passes a ReLU, and the heads are summed with weights computed from the query's token")

    def index_head_dim(key, v, c):
        if not _built_as(c, V4):
            return plain[key](key, v, c)
        d, rot = c.count(key), c.get_count("qk_rope_head_dim")
        words = f"Each of the indexer's query heads, and each compressed key it scores, is {grouped(d)} wide"
        if rot is not None and rot <= d:
            words += f"; the last {grouped(rot)} dims are rotated by position, the first {grouped(d - rot)} are not"
        return words

    def index_topk(key, v, c):
        if not _built_as(c, V4):
            return plain[key](key, v, c)
        k = c.count(key)
        return (f"On the blocks compressing by {_indexed_ratio()}, each query reads the {grouped(k)} compressed keys the indexer scores highest "
                f"(all of them while it has no more than {grouped(k)}), besides its sliding window")

    for key, fn in (("index_n_heads", index_n_heads), ("index_head_dim", index_head_dim), ("index_topk", index_topk)):
        EXPLAIN[key] = fn


_v4_notes()


# --- the attention's own section of a config, and its original code's name for it -----------------

@explains("attn_config")
def _attn_config(key, v, c):
    v = _entries(c, key, v)
    parts = []
    for name, value in v.items():
        where = f"{key}.{name}"
        if name == "clip_qkv" and value is not None:
            limit = _num(c.number(where, value))
            parts.append(f"clip_qkv {limit} (every entry of the fused query-key-value projection is clamped into "
                         f"[−{limit}, {limit}] before the heads are split)")
        elif name == "kv_n_heads":
            kv = c.count(where, value)
            heads = c.get_count("num_attention_heads")
            if heads is not None and (kv == 0 or heads % kv):
                c.fail(where, f"{kv} does not divide the {heads} query heads")
            share = f", each shared by {heads // kv} of the {heads} query heads" if heads else ""
            parts.append(f"kv_n_heads {grouped(kv)} (key and value heads{share})")
        elif name == "rope_theta":
            base = _num(c.number(where, value))
            parts.append(f"rope_theta {base} (the rotary base the checkpoint was trained with, which transformers' "
                         "rotary embedding does not take from here: it reads the top-level rope_parameters)")
        elif name == "attn_pdrop":
            parts.append(f"attn_pdrop {_num(c.number(where, value))} (dropout on the attention pattern in training only)")
        elif name == "model_type":
            parts.append(f"model_type {_value_words(value)} (a label the sub-config was saved with; nothing reads it)")
        else:
            parts.append(f"{name} {_value_words(value)} (a setting the atlas has no words for)")
    return "The attention's own section of the config: " + "; ".join(parts) if parts else \
        "The attention's own section of the config, empty: every setting takes the class's default"


@explains("attention_method")
def _attention_method(key, v, c):
    if not isinstance(v, str):
        c.fail(key, "must be a name")
    return (f"The original code's name for its attention, {v!r}; transformers reads it nowhere: the class it builds "
            "decides the attention")

_alias("attention_heads", "num_attention_heads")  # XGLM's name; its configuration class maps it onto the usual one


@explains("block_size")
def _block_size(key, v, c):
    # MiniMax's lightning attention sums block by block: within a block by a decay matrix, across blocks by a state
    n = c.count(key)
    if not _built_as(c, "MiniMaxForCausalLM"):
        return f"The model's own code works through the positions in blocks of {grouped(n)}"
    return (f"Lightning attention computes its sum in blocks of {grouped(n)} positions: inside a block with a decay "
            "matrix, across blocks with a decayed state it carries; the result is the same sum over every earlier position")
