"""More of config.json in words: the keys of the older, the multimodal and the hybrid-attention configs.

The same rules as ``atlas.facts.config_words``, which imports this module at its end so that every key is
registered wherever the words are read: each sentence is written from the key's own value and, where
the meaning depends on them, from other keys of the same config.
"""

from __future__ import annotations

import math
from typing import Any

from atlas.facts.config_words import (
    _alias,
    _Config,
    _dropout,
    _num,
    _ordinal,
    _plural,
    _switch,
    _value_words,
    activation_words,
    explains,
    settings_words,
)
from atlas.numbers import grouped


def _head_width(c: _Config) -> int | None:
    """The width of one attention head: head_dim where given, else the width shared out over the heads."""
    if c.raw.get("head_dim"):
        return c.count("head_dim", c.raw["head_dim"])
    for width_key, heads_key in (("hidden_size", "num_attention_heads"), ("n_embd", "n_head")):
        width, heads = c.get_count(width_key), c.get_count(heads_key)
        if width and heads:
            return width // heads
    return None


# --- other names for keys the atlas already explains ------------------------------------------------

_alias("model_max_length", "max_position_embeddings")
_alias("moe_renormalize", "norm_topk_prob")
_alias("num_expert_group", "n_group")
_alias("num_experts_per_token", "num_experts_per_tok")
_alias("moe_k", "num_experts_per_tok")
_alias("num_shared_experts", "n_shared_experts")
_alias("moe_num_shared_experts", "n_shared_experts")
_alias("moe_router_activation_func", "scoring_func")
_alias("rotary_emb_base", "rope_theta")


# --- records and training-only settings -------------------------------------------------------------

@explains("name")
def _name(key, v, c):
    return f'The name the model was saved under, "{c.text("name")}"; a record only'


@explains("tokenizer_class")
def _tokenizer_class(key, v, c):
    return f'The tokenizer class to load with the model, "{c.text("tokenizer_class")}"; the model\'s computation does not use it'


@explains("prefix")
def _prefix(key, v, c):
    return (f'Text that the text-generation pipeline puts before each prompt, {_value_words(c.text("prefix"))}; '
            "the model's computation does not use it")


_switch("gradient_checkpointing",
        "Training recomputes the blocks' activations instead of storing them, to save memory; no effect on a forward pass",
        "Training stores the blocks' activations rather than recomputing them; no effect on a forward pass")


@explains("init_std")
def _init_std(key, v, c):
    return f"Standard deviation {_num(c.number('init_std'))} of the random initialization; trained weights replace it"


_dropout("hidden_dropout", "each sublayer's output before it is added to the stream")
_dropout("residual_dropout", "each sublayer's output before it is added to the stream")
_dropout("dropout", "each sublayer's output before it is added to the stream")
_dropout("embedding_dropout", "the embeddings")
_dropout("activation_dropout", "the MLP's activations")


@explains("layerdrop")
def _layerdrop(key, v, c):
    p = c.number("layerdrop")
    if p == 0:
        return "No block is skipped in training (probability 0); every block runs at inference"
    return f"Each block is skipped with probability {_num(p)} in training (LayerDrop); every block runs at inference"


def _input_jitter(p: int | float) -> str:
    if p == 0:
        return "No noise on the mixture block's input (0); no effect at inference anyway"
    return (f"In training, the mixture block's input is multiplied by noise drawn evenly from "
            f"[{_num(1 - p)}, {_num(1 + p)}]; no effect at inference")


@explains("input_jitter_noise")
def _input_jitter_noise(key, v, c):
    return _input_jitter(c.number("input_jitter_noise"))


@explains("router_jitter_noise")
def _router_jitter(key, v, c):
    p = c.number("router_jitter_noise")
    if "input_jitter_noise" not in c.raw:
        # The only jitter of the config: the block's input noise.
        return _input_jitter(p)
    # The input noise has a key of its own, so this one is the router's threshold.
    return (f"The router's threshold: every expert whose score trails the best one by more than {_num(2 * p)} "
            f"(twice {_num(p)}) of the larger magnitude is masked out before an expert is chosen and weighted; "
            "it applies at inference too")


# --- norms ---------------------------------------------------------------------------------------

NORM_TYPES = {  # a norm_type's name -> what the norm is
    "layer_norm": "LayerNorm: each vector is centred on its mean and divided by its standard deviation, then scaled",
    "layernorm": "LayerNorm: each vector is centred on its mean and divided by its standard deviation, then scaled",
    "rms_norm": "RMSNorm: each vector is divided by its root mean square, then scaled",
    "rmsnorm": "RMSNorm: each vector is divided by its root mean square, then scaled",
}


@explains("norm_type")
def _norm_type(key, v, c):
    kind = c.text("norm_type")
    return f'Every norm is of the kind "{kind}", ' + NORM_TYPES.get(kind, "a kind the atlas has no words for")


@explains("layer_norm_eps")
def _layer_norm_eps(key, v, c):
    return f"The epsilon added to the variance inside every LayerNorm: {_num(c.number('layer_norm_eps'))}"


@explains("norm_epsilon")
def _norm_epsilon(key, v, c):
    eps = _num(c.number("norm_epsilon"))
    kind = c.raw.get("norm_type")
    if kind in ("layer_norm", "layernorm"):
        return f"The epsilon added to the variance inside every LayerNorm: {eps}"
    if kind in ("rms_norm", "rmsnorm"):
        return f"The epsilon added to the mean square inside every RMSNorm: {eps}"
    return f"The epsilon added inside every norm: {eps}"


@explains("use_qk_norm", "qk_norm", "qk_layernorm")
def _qk_norm(key, v, c):
    if c.flag(key):
        return "Queries and keys are each normalized per head before the attention scores are computed"
    return "Queries and keys go into the attention scores without a norm of their own"


_switch("do_layer_norm_before", "Each sublayer normalizes its input (a pre-norm block)",
        "The stream is normalized after each sublayer's output is added to it (a post-norm block)")
_switch("post_norm", "A norm is applied to each sublayer's output", "No norm is applied to the sublayers' outputs")
_switch("apply_residual_connection_post_layernorm",
        "The residual carried past each sublayer is its normed input, not the stream itself",
        "The residual carried past each sublayer is the stream itself, not its normed copy")


# --- the block's layout --------------------------------------------------------------------------

@explains("use_parallel_block", "use_parallel_residual", "parallel_attn")
def _parallel(key, v, c):
    if c.flag(key):
        return ("The attention and the MLP both read the block's input, and both outputs are added to the stream "
                "together (a parallel block)")
    words = "The MLP reads the stream after the attention's output has been added to it (a sequential block)"
    if key == "parallel_attn" and c.raw.get("new_decoder_architecture") is True:
        words += "; new_decoder_architecture is on, which makes the block parallel anyway"
    return words


@explains("new_decoder_architecture")
def _new_decoder(key, v, c):
    if c.flag("new_decoder_architecture"):
        return ("The newer block layout: key and value heads as num_kv_heads gives them, the attention and the MLP in "
                "parallel; multi_query and parallel_attn are ignored")
    return "The original block layout: multi_query and parallel_attn decide the attention's heads and the block's order"


_switch("bias", "The blocks' linear projections add a learned bias", "The blocks' linear projections have no bias")
_switch("use_bias", "The attention's and the MLP's projections add a learned bias",
        "The attention's and the MLP's projections have no bias")
_switch("attention_out_bias", "The attention's output projection adds a learned bias",
        "The attention's output projection has no bias")
_switch("lm_head_bias", "The output head adds a learned bias to every logit", "The output head has no bias")


# --- attention -----------------------------------------------------------------------------------

@explains("multi_query")
def _multi_query(key, v, c):
    if c.flag("multi_query"):
        words = "One key and value head shared by all query heads (multi-query attention)"
    else:
        words = "Not multi-query: the key and value heads are not reduced to one"
    if c.raw.get("new_decoder_architecture") is True:
        words += "; new_decoder_architecture is on, so this is ignored"
    return words


_switch("alibi", "ALiBi: each head adds a penalty growing linearly with distance to its attention scores",
        "No ALiBi distance penalty is added to the attention scores")


@explains("scale_attn_weights")
def _scale_attn(key, v, c):
    d = _head_width(c)
    by = f"1/√{grouped(d)} = {d ** -0.5:.4g}" if d else "1/√(head width)"
    if c.flag("scale_attn_weights"):
        return f"The attention scores are scaled by {by} before the softmax"
    return f"The attention scores are not scaled by {by}: they go into the softmax as they are"


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


@explains("clip_qkv", unset=True)
def _clip_qkv(key, v, c):
    if v is None:
        return "Left unset: queries, keys and values are not clipped"
    limit = _num(c.number("clip_qkv"))
    return f"Queries, keys and values are each clamped into [−{limit}, {limit}] before the attention"


@explains("attention_multiplier")
def _attention_multiplier(key, v, c):
    words = f"The attention scores are multiplied by {_num(c.number('attention_multiplier'))}"
    d = _head_width(c)
    if d:
        words += f", in place of the usual 1/√(head width), here 1/√{grouped(d)} = {d ** -0.5:.4g}"
    return words


@explains("order_of_interleaved_layers")
def _interleave_order(key, v, c):
    order = c.text("order_of_interleaved_layers")
    words = {
        "local_attn_first": "in each repeating group of blocks, the sliding-window blocks come first and the full-attention block last",
        "global_attn_first": "in each repeating group of blocks, the full-attention block comes first and the sliding-window blocks after it",
    }.get(order, "an order the atlas has no words for")
    return f'The order of the interleaved attention kinds, "{order}": {words}'


# --- positions -----------------------------------------------------------------------------------

POSITION_KINDS = {
    "rope_gptj": "rotary positions on interleaved pairs: each even dim of a head rotates with the odd dim after it",
    "absolute": "a learned table of absolute positions added to the embeddings",
    "alibi": "ALiBi, a penalty on the attention scores growing linearly with distance",
}


@explains("position_embedding_type")
def _position_kind(key, v, c):
    kind = c.text("position_embedding_type")
    return f'Positions enter the model as "{kind}", ' + POSITION_KINDS.get(kind, "a kind the atlas has no words for")


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


_switch("rotary", "Queries and keys are rotated by position (rotary embeddings)",
        "No rotary position: queries and keys are not rotated")
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


# --- scales --------------------------------------------------------------------------------------

@explains("embedding_multiplier", "scale_emb")
def _embedding_scale(key, v, c):
    return f"The embeddings are multiplied by {_num(c.number(key))} before the first block"


@explains("residual_multiplier")
def _residual_multiplier(key, v, c):
    return f"Each sublayer's output is multiplied by {_num(c.number('residual_multiplier'))} before it is added to the stream"


@explains("scale_depth")
def _scale_depth(key, v, c):
    s = c.number("scale_depth")
    layers = c.get_count("num_hidden_layers")
    if not layers:
        return f"Each sublayer's output is multiplied by {_num(s)}/√(number of blocks) before it is added to the stream"
    return (f"Each sublayer's output is multiplied by {_num(s)}/√{layers} = {s / math.sqrt(layers):.4g} "
            "before it is added to the stream")


@explains("dim_model_base")
def _dim_model_base(key, v, c):
    base = c.count("dim_model_base")
    width = c.get_count("hidden_size")
    words = f"The width the model's scaling was tuned at: {grouped(base)}"
    if width and base:
        words += f"; the stream is divided by hidden_size/{grouped(base)} = {_num(width / base)} before the output head"
    return words


@explains("logit_scale")
def _logit_scale(key, v, c):
    return f"The head's logits are multiplied by {_num(c.number('logit_scale'))}"


@explains("logits_scaling")
def _logits_scaling(key, v, c):
    return f"The head's logits are divided by {_num(c.number('logits_scaling'))}"


# --- MLP widths and kinds ------------------------------------------------------------------------

@explains("ffn_dim")
def _ffn_dim(key, v, c):
    return f"The hidden width of every MLP: {grouped(c.count('ffn_dim'))}"


@explains("n_inner", unset=True)
def _n_inner(key, v, c):
    width = c.get_count("n_embd") or c.get_count("hidden_size")
    if v is None:
        four = f" ({grouped(4 * width)})" if width else ""
        return f"Left unset: the hidden width of every MLP is four times the residual width{four}"
    return f"The hidden width of every MLP: {grouped(c.count('n_inner'))}"


@explains("shared_expert_intermediate_size")
def _shared_expert_width(key, v, c):
    return f"The hidden width of the shared expert, which every token passes through: {grouped(c.count(key))}"


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


_switch("use_gated_activation", "The MLP is gated: the activated gate projection multiplies an up projection",
        "The MLP is not gated: one projection up, the activation, one projection down")


@explains("mlp_type")
def _mlp_type(key, v, c):
    return f'The original code\'s name for its kind of MLP, "{c.text("mlp_type")}"'


_switch("use_embedding_sharing", "The original code's switch for sharing the embedding table with the output head: on",
        "The original code's switch for sharing the embedding table with the output head: off")
_switch("use_parallel_embedding",
        "The original code splits the embedding table across tensor-parallel devices; it changes no shape",
        "The original code keeps the embedding table whole on each device; it changes no shape")


# --- mixtures of experts -------------------------------------------------------------------------

@explains("use_grouped_topk")
def _grouped_topk(key, v, c):
    if not c.flag("use_grouped_topk"):
        return "The experts are chosen by a plain top-k of the scores, with no groups"
    groups = c.get_count("n_group")
    words = "The experts are chosen within the best groups, as n_group and topk_group set them"
    if groups is not None and groups <= 1:
        words += "; with a single group, every expert stays a candidate"
    return words


@explains("moe_layer_start_index")
def _moe_start(key, v, c):
    s = c.count("moe_layer_start_index")
    if s == 0:
        return "The mixtures of experts may start at block 0"
    dense = "Block 0 keeps" if s == 1 else f"Blocks 0–{s - 1} keep"
    return f"{dense} a dense MLP; the mixtures of experts may start at block {s}"


@explains("moe_layer_end_index")
def _moe_end(key, v, c):
    e = c.raw["moe_layer_end_index"]
    if e != -1:
        e = c.count("moe_layer_end_index")
    layers = c.get_count("num_hidden_layers")
    if e == -1:
        return "Set to −1: the mixtures of experts may run to the last block"
    if layers is not None and e >= layers - 1:
        return f"The mixtures of experts may run to block {e}, the last of the {layers}"
    return f"The mixtures of experts end at block {e}; the blocks after it keep a dense MLP"


@explains("moe_layer_interval")
def _moe_interval(key, v, c):
    n = c.count("moe_layer_interval")
    if n == 1:
        return "Every block from moe_layer_start_index to moe_layer_end_index is a mixture of experts (an interval of 1)"
    return (f"Between moe_layer_start_index and moe_layer_end_index, a block is a mixture of experts where its number "
            f"counted from 1 is a multiple of {n}; the others keep a dense MLP")


@explains("moe_capacity")
def _moe_capacity(key, v, c):
    if not isinstance(v, list):
        c.fail("moe_capacity", "must be a list of capacities")
    return (f"The original code's expert-capacity settings, {_value_words(v)}, which cap how many tokens an expert "
            "takes in that code; they change no shape")


@explains("moe_gate")
def _moe_gate(key, v, c):
    gate = c.text("moe_gate")
    words = {"topk": "each token goes to its top-scoring experts"}.get(gate, "a gate the atlas has no words for")
    return f'The original code\'s name for its gate, "{gate}": {words}'


_switch("moe_use_aux_free",
        "A per-expert bias added to the scores balances the experts without an auxiliary loss: it shifts which experts "
        "are chosen, not their weights",
        "No per-expert selection bias: the experts are chosen by their scores alone")


# --- linear attention ----------------------------------------------------------------------------

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


# --- sections of a multimodal config ---------------------------------------------------------------

def _section(c: _Config, key: str, v: Any) -> dict:
    if not isinstance(v, dict):
        c.fail(key, "must be an object of settings")
    return v


@explains("text_config")
def _text_config(key, v, c):
    v = _section(c, key, v)
    return (f"The language model's own configuration, {_plural(len(v), 'key')}; the atlas builds the text model from "
            "this section and explains its keys on their own lines")


@explains("vision_config")
def _vision_config(key, v, c):
    v = _section(c, key, v)
    return f"The vision tower's configuration, {_plural(len(v), 'key')}: {settings_words(v)}"


_switch("attn_output_gate",
        "The full-attention blocks multiply their output, element by element, by a sigmoid gate projected from the stream",
        "The full-attention blocks have no output gate")


@explains("mamba_ssm_dtype")
def _state_dtype(key, v, c):
    return (f"The precision the original code keeps the linear-attention blocks' recurrent state in, "
            f"{c.text('mamba_ssm_dtype')}; it changes no shape")


@explains("mtp_num_hidden_layers")
def _mtp_layers(key, v, c):
    n = c.count("mtp_num_hidden_layers")
    if n == 0:
        return "No multi-token-prediction block"
    return f"{_plural(n, 'multi-token-prediction block')} of the original model, for guessing tokens further ahead; transformers builds none"


_switch("mtp_use_dedicated_embeddings", "The multi-token-prediction blocks have an embedding table of their own",
        "The multi-token-prediction blocks share the main embedding table")


# --- settings of a checkpoint's original code that transformers defines no meaning for ---------------

@explains("full_attn_mod", "interpolate_factor")
def _undefined_setting(key, v, c):
    return (f"A setting of the checkpoint's original code, {_value_words(v)}, that transformers' configuration class "
            "does not define; this file says nothing more of what it did there")


# --- convolution and state-space blocks ------------------------------------------------------------

def _same_as(c: _Config, n: int | float, other: str) -> str:
    """How a recorded value compares with the key transformers reads for the same thing, where the config has it."""
    theirs = c.raw.get(other)
    if theirs is None or isinstance(theirs, bool) or not isinstance(theirs, (int, float)):
        return ""
    if theirs == n:
        return f", the same as {other}"
    return f"; {other} gives {_num(theirs)}"


def _adjusted_ff_width(c: _Config) -> int | None:
    """The MLP width after the two-thirds, multiplier and rounding adjustment, where the config has every part."""
    width = c.raw.get("block_ff_dim", c.raw.get("intermediate_size"))
    multiple = c.raw.get("block_multiple_of")
    if not isinstance(width, int) or isinstance(width, bool) or not isinstance(multiple, int) or multiple <= 0:
        return None
    w = int(2 * width / 3)
    factor = c.raw.get("block_ffn_dim_multiplier")
    if factor is not None:
        w = int(c.number("block_ffn_dim_multiplier", factor) * w)
        w = multiple * ((w + multiple - 1) // multiple)
    return w


@explains("block_auto_adjust_ff_dim")
def _auto_adjust_ff(key, v, c):
    if not c.flag("block_auto_adjust_ff_dim"):
        return "The MLP's hidden width is used as given, with no adjustment"
    words = ("The MLP's hidden width is recomputed from the given one: two thirds of it, times "
             "block_ffn_dim_multiplier, rounded up to a multiple of block_multiple_of")
    w = _adjusted_ff_width(c)
    if w is not None:
        words += f", here {grouped(w)}"
    return words


@explains("block_ff_dim")
def _block_ff_dim(key, v, c):
    n = c.count("block_ff_dim")
    words = f"The MLP's hidden width as given, {grouped(n)}; it takes the place of intermediate_size"
    if c.raw.get("block_auto_adjust_ff_dim") is True:
        w = _adjusted_ff_width(c)
        words += "; block_auto_adjust_ff_dim is on, so the MLP is built " + (
            f"{grouped(w)} wide" if w is not None else "at an adjusted width")
    return words


def _after_adjust(words: str, c: _Config) -> str:
    if c.raw.get("block_auto_adjust_ff_dim") is False:
        return words + "; block_auto_adjust_ff_dim is off, so this has no effect"
    return words


@explains("block_ffn_dim_multiplier", unset=True)
def _ffn_multiplier(key, v, c):
    if v is None:
        return _after_adjust("Left unset: the adjusted MLP width is two thirds of the given one, with no further "
                             "multiplier or rounding", c)
    return _after_adjust(f"The adjusted MLP width is multiplied by {_num(c.number(key))} before it is rounded", c)


@explains("block_multiple_of")
def _block_multiple_of(key, v, c):
    return _after_adjust(f"The adjusted MLP width is rounded up to a multiple of {grouped(c.count(key))}", c)


@explains("block_dim")
def _block_dim(key, v, c):
    n = c.count("block_dim")
    return f"The blocks' width as the original code records it, {grouped(n)}{_same_as(c, n, 'hidden_size')}"


@explains("conv_dim", "conv_dim_out")
def _conv_dim(key, v, c):
    n = c.count(key)
    side = "input" if key == "conv_dim" else "output"
    return (f"The width of the convolution blocks' {side} as the original code records it, "
            f"{grouped(n)}{_same_as(c, n, 'hidden_size')}")


@explains("block_norm_eps")
def _block_norm_eps(key, v, c):
    eps = c.number("block_norm_eps")
    return f"The epsilon of the blocks' norms as the original code records it, {_num(eps)}{_same_as(c, eps, 'norm_eps')}"


@explains("norm_eps")
def _norm_eps(key, v, c):
    return f"The epsilon added inside every norm of the model: {_num(c.number('norm_eps'))}"


@explains("block_mlp_init_scale", "block_out_init_scale")
def _init_scale(key, v, c):
    part = "the MLP's" if key == "block_mlp_init_scale" else "the blocks' output projections'"
    return (f"A scale on {part} random initial weights in the original code, {_num(c.number(key))}; "
            "trained weights replace them, so it changes nothing in the model")


_switch("block_use_xavier_init",
        "The original code draws the blocks' initial weights with Xavier initialization; trained weights replace them",
        "The original code does not use Xavier initialization for the blocks; trained weights replace them anyway")
_switch("conv_use_xavier_init",
        "The original code draws the convolution blocks' initial weights with Xavier initialization; trained weights "
        "replace them",
        "The original code does not use Xavier initialization for the convolution blocks; trained weights replace "
        "them anyway")
_switch("block_use_swiglu",
        "The original code's switch for a gated MLP in which the SiLU of a gate projection multiplies an up "
        "projection (SwiGLU): on",
        "The original code's switch for a gated MLP in which the SiLU of a gate projection multiplies an up "
        "projection (SwiGLU): off")
_switch("use_pos_enc", "The original code's switch for position encoding: on",
        "The original code's switch for position encoding: off")
_switch("conv_bias", "The convolution blocks' projections and convolution add a learned bias",
        "The convolution blocks' projections and convolution have no bias")


@explains("conv_L_cache")
def _conv_cache(key, v, c):
    n = c.count("conv_L_cache")
    return (f"The convolution blocks run a causal convolution {grouped(n)} positions wide over each channel; in "
            f"generation each keeps its last {_plural(n, 'input')} in the cache")


@explains("num_heads")
def _num_heads(key, v, c):
    n = c.count("num_heads")
    return f"{_plural(n, 'attention head')} per attention block{_same_as(c, n, 'num_attention_heads')}"


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


_switch("use_mamba_kernels",
        "A switch for fused state-space kernels, on: it chooses how the state-space blocks are computed, not what "
        "they compute, so it changes nothing in the model",
        "A switch for fused state-space kernels, off: it chooses how the state-space blocks are computed, not what "
        "they compute, so it changes nothing in the model")
_switch("mamba_conv_bias", "The state-space blocks' causal convolution adds a learned bias",
        "The state-space blocks' causal convolution has no bias")
_switch("use_conv_bias", "The state-space blocks' causal convolution adds a learned bias",
        "The state-space blocks' causal convolution has no bias")
_switch("mamba_proj_bias", "The state-space blocks' input and output projections add a learned bias",
        "The state-space blocks' input and output projections have no bias")
_switch("residual_in_fp32", "The residual stream is kept in 32-bit floats, whatever the weights' precision",
        "The residual stream is kept in the weights' own precision")
_switch("rescale_prenorm_residual",
        "The random initialization scales the blocks' output projections down by depth; trained weights replace "
        "them, so it changes nothing in the model",
        "The random initialization does not scale the blocks' output projections by depth; trained weights replace "
        "them anyway")


@explains("mamba_d_conv", "conv_kernel")
def _ssm_conv(key, v, c):
    return (f"The state-space blocks run a causal convolution {grouped(c.count(key))} positions wide over each "
            "channel before the scan")


@explains("mamba_d_state", "ssm_state_size")
def _ssm_state(key, v, c):
    return (f"The state-space blocks' recurrent state keeps {grouped(c.count(key))} values for each channel of "
            "their inner width")


@explains("mamba_expand")
def _ssm_expand(key, v, c):
    e = c.number("mamba_expand")
    width = c.get_count("hidden_size")
    words = f"The state-space blocks work at {_num(e)} times the stream's width inside"
    if width:
        words += f": {grouped(width)} becomes {_num(e * width)}"
    return words


@explains("mamba_dt_rank")
def _dt_rank(key, v, c):
    if v == "auto":
        width = c.get_count("hidden_size")
        n = f"hidden_size/16 rounded up ({grouped(math.ceil(width / 16))})" if width else "hidden_size/16 rounded up"
    else:
        n = grouped(c.count(key))
    return (f"The state-space blocks compute their step size through a bottleneck {n} wide: projected down to "
            "it, then up to every channel")


@explains("time_step_rank")
def _time_step_rank(key, v, c):
    if v == "auto":
        width = c.get_count("hidden_size")
        n = f"hidden_size/16 rounded up ({grouped(math.ceil(width / 16))})" if width else "hidden_size/16 rounded up"
    else:
        n = grouped(c.count(key))
    return f"The width of a low-rank projection for the state-space blocks' step size: {n}"


@explains("mamba_chunk_size", "chunk_size")
def _ssm_chunk(key, v, c):
    return (f"The state-space blocks' scan runs over the sequence in chunks of {_plural(c.count(key), 'position')}; "
            "it changes how the result is computed, not the result")


def _ssm_heads(c: _Config) -> int | None:
    return c.get_count("mamba_n_heads") or c.get_count("mamba_num_heads")


@explains("mamba_n_heads", "mamba_num_heads")
def _ssm_heads_words(key, v, c):
    return f"{_plural(c.count(key), 'head')} per state-space block, each with its own step size and decay"


@explains("mamba_d_head", "mamba_head_dim")
def _ssm_head_dim(key, v, c):
    heads = _ssm_heads(c)
    if v == "auto":
        expand, width = c.raw.get("mamba_expand"), c.get_count("hidden_size")
        words = "Each head of the state-space blocks is the inner width shared out over the heads"
        if heads and width and isinstance(expand, (int, float)) and not isinstance(expand, bool):
            words += f", {grouped(int(expand * width) // heads)} channels"
        return words
    d = c.count(key)
    words = f"Each head of the state-space blocks is {_plural(d, 'channel')} wide"
    if heads:
        words += f"; {grouped(heads)} heads make an inner width of {grouped(heads * d)}"
    return words


@explains("mamba_n_groups", "n_groups")
def _ssm_groups(key, v, c):
    g = c.count(key)
    words = (f"The state-space blocks' heads fall into {_plural(g, 'group')}; each group shares one map into and out "
             "of the state (B and C) and is normalized on its own before the output projection")
    heads = _ssm_heads(c)
    if heads and g and heads % g == 0:
        words += f", {_plural(heads // g, 'head')} per group"
    return words


@explains("mamba_hidden_act")
def _ssm_act(key, v, c):
    return f"The activation the state-space blocks apply after their convolution: {activation_words(c.text(key))}"


@explains("mlp_hidden_act")
def _mlp_act(key, v, c):
    return f"The activation of the MLP blocks: {activation_words(c.text(key))}"


@explains("num_logits_to_keep")
def _logits_to_keep(key, v, c):
    n = c.count("num_logits_to_keep")
    if n == 0:
        return "Generation computes logits for every position of the input (0)"
    last = "last position" if n == 1 else f"last {grouped(n)} positions"
    return f"Generation computes logits for the {last} of the input only, not for every position"


@explains("time_step_min")
def _dt_min(key, v, c):
    return (f"The least step size of the state-space blocks, {_num(c.number(key))}: the random initialization "
            "gives no smaller step, and where the model sets a floor on the step, this is it")


@explains("time_step_max")
def _dt_max(key, v, c):
    return (f"The largest step size the random initialization of the state-space blocks gives, "
            f"{_num(c.number(key))}; trained weights replace it, so it changes nothing in the model")


@explains("time_step_floor")
def _dt_floor(key, v, c):
    return (f"The smallest step size the random initialization of the state-space blocks lets "
            f"through, {_num(c.number(key))}; trained weights replace it, so it changes nothing in the model")


@explains("time_step_limit")
def _dt_limit(key, v, c):
    if not isinstance(v, list) or len(v) != 2:
        c.fail("time_step_limit", "must be a list of a lower and an upper limit")
    low, high = (c.number("time_step_limit", x) for x in v)
    top = "with no upper limit" if math.isinf(high) else f"and at most {_num(high)}"
    return f"The range the state-space blocks' step size is clamped to: at least {_num(low)}, {top}"


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


@explains("normalization_function")
def _normalization_function(key, v, c):
    kind = c.text("normalization_function")
    return (f'The original code\'s name for its norm, "{kind}": '
            + NORM_TYPES.get(kind, "a kind the atlas has no words for"))


# --- Llama 4: chunked attention, the no-position blocks' query temperature, interleaved mixtures ------

@explains("attention_chunk_size")
def _attention_chunk_size(key, v, c):
    n = c.count("attention_chunk_size")
    words = (f"The blocks that rotate attend in chunks of {grouped(n)} positions: a query sees only the earlier "
             "positions of its own chunk")
    if isinstance(c.raw.get("no_rope_layers"), list) and not all(c.raw["no_rope_layers"]):
        words += "; the blocks without rotary angles attend over every earlier position"
    return words


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


@explains("interleave_moe_layer_step")
def _interleave_moe(key, v, c):
    n = c.count("interleave_moe_layer_step")
    words = "Every block is a mixture of experts" if n == 1 else f"Every {_ordinal(n)} block is a mixture of experts, the others dense"
    if c.raw.get("moe_layers") is not None:
        words += "; moe_layers is given here, and it decides"
    return words


@explains("moe_layers")
def _moe_layers(key, v, c):
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        c.fail("moe_layers", "must be a list of block numbers")
    layers = c.get_count("num_hidden_layers")
    if layers is not None and sorted(v) == list(range(layers)):
        return f"The blocks that are mixtures of experts: all {_plural(layers, 'block')}"
    return f"The blocks that are mixtures of experts (counting from 0): {', '.join(map(str, v))}; the others have a dense MLP"


@explains("intermediate_size_mlp")
def _intermediate_size_mlp(key, v, c):
    n = c.count("intermediate_size_mlp")
    words = f"The hidden width of a dense block's MLP: {grouped(n)}"
    layers, moe = c.get_count("num_hidden_layers"), c.raw.get("moe_layers")
    if layers is not None and isinstance(moe, list) and sorted(moe) == list(range(layers)):
        words += "; every block here is a mixture, so no block uses it"
    return words



# the image markers of Llama 4's multimodal wrapper
from atlas.facts.config_words import ROLE_VERBS, _token  # noqa: E402 - kept beside the keys they serve

ROLE_VERBS["image-start"] = ("opens an image in the text", "open an image in the text")
ROLE_VERBS["image-end"] = ("closes an image in the text", "close an image in the text")
_token("boi_token_index", "image-start")
_token("eoi_token_index", "image-end")
_alias("image_token_index", "image_token_id")

# --- BLOOM's keys: its width's name, and Megatron-DeepSpeed's training switches -----------------------

def _bloom_words() -> None:
    from atlas.facts.config_words import EXPLAIN, ROLE_VERBS, _hidden_size, _token

    EXPLAIN["n_embed"] = _hidden_size  # BLOOM's spelling of the width (GPT-2's is n_embd)
    ROLE_VERBS.setdefault("unknown", ("stands for text the vocabulary has no token for", "stand for text the vocabulary has no token for"))
    _token("unk_token_id", "unknown")


_bloom_words()

_switch("bias_dropout_fusion", "The training code fused each bias add with its dropout into one kernel; a speed setting that changes no result",
        "The training code added each bias and applied its dropout as separate kernels")
_switch("masked_softmax_fusion", "The training code fused the attention's mask and softmax into one kernel; a speed setting that changes no result",
        "The training code masked the scores and took their softmax as separate kernels")
_switch("skip_bias_add", "The training code's projections returned their bias apart, to be added in a fused kernel later; the sum is the same",
        "The training code's projections added their own bias")
_switch("skip_bias_add_qkv", "The training code's fused query-key-value projection returned its bias apart, to be added later",
        "The training code's fused query-key-value projection added its own bias")
_switch("slow_but_exact", "With tensor-parallel pretraining, the output projections are summed slice by slice, as the shards were",
        "The output projections run as one matrix product, whatever the tensor-parallel degree of pretraining")


@explains("offset_alibi")
def _offset_alibi(key, v, c):
    return (f"A setting ({grouped(c.count(key))}) of the training code's ALiBi bias; transformers builds the bias from the "
            "heads' slopes and the key positions alone")


def _built_as(c, model_class: str) -> bool:
    """Whether config.json names this transformers class in ``architectures``: words that say what that
    class does with a key hold only where the file is built as it."""
    return model_class in (c.raw.get("architectures") or [])


# --- DBRX's own names and sub-configs, the sparse-attention indexer, Gemma 4's audio and image markers,
# --- RecurrentGemma's recurrent blocks, Falcon-H1's multipliers --------------------------------------

def _later_words() -> None:
    """Registered in one place: several keys here wrap or reuse explainers defined above."""
    from atlas.facts.config_words import EXPLAIN, ROLE_VERBS, _token

    # DBRX spells four of the common keys its own way; its config class maps them onto the usual names.
    _alias("d_model", "hidden_size")
    _alias("n_heads", "num_attention_heads")
    _alias("n_layers", "num_hidden_layers")
    _alias("max_seq_len", "max_position_embeddings")
    # RecurrentGemma's names for the window of its attention blocks and for the cap on its logits.
    _alias("attention_window_size", "sliding_window")
    _alias("logits_soft_cap", "final_logit_softcapping")

    ROLE_VERBS["audio placeholder"] = (
        "holds an audio clip's place in the text; the audio tower's features replace its embedding",
        "hold an audio clip's place in the text; the audio tower's features replace their embeddings")
    ROLE_VERBS["audio-start"] = ("opens an audio clip in the text", "open an audio clip in the text")
    ROLE_VERBS["audio-end"] = ("closes an audio clip in the text", "close an audio clip in the text")

    plain = {}
    for key, role in (("audio_token_id", "audio placeholder"), ("boi_token_id", "image-start"),
                      ("eoi_token_id", "image-end"), ("boa_token_id", "audio-start"), ("eoa_token_id", "audio-end")):
        _token(key, role)
        plain[key] = EXPLAIN[key]

    def audio_token(key, v, c):
        words = plain[key](key, v, c)
        if v is not None and "audio_config" in c.raw and c.raw["audio_config"] is None:
            words += "; audio_config is unset here, so no audio tower exists to fill it"
        return words

    def marker(key, v, c):
        words = plain[key](key, v, c)
        if v is not None and _built_as(c, "Gemma4ForConditionalGeneration"):
            words += ("; Gemma 4's model never looks for it: its processor writes the marker into the prompt from "
                      "the tokenizer's own token, so the id here is a record")
        return words

    EXPLAIN["audio_token_id"] = audio_token
    for key in ("boi_token_id", "eoi_token_id", "boa_token_id", "eoa_token_id"):
        EXPLAIN[key] = marker

    def eoa_index(key, v, c):
        words = marker("eoa_token_id", v, c.renamed("eoa_token_id", key, v))
        other = c.raw.get("eoa_token_id") if "eoa_token_id" in c.raw else ...
        if other is ...:
            return words
        if other == v:
            words += "; eoa_token_id holds the same id"
            if _built_as(c, "Gemma4ForConditionalGeneration"):
                words += ", and of the two names Gemma 4's configuration class declares only this one"
            return words
        return f"{words}; eoa_token_id says {_value_words(other)}"

    EXPLAIN["eoa_token_index"] = eoa_index

    # Falcon-H1 sets the state-space blocks' inner width outright, which leaves mamba_expand unused.
    expand = EXPLAIN["mamba_expand"]

    def mamba_expand(key, v, c):
        words = expand(key, v, c)
        if c.raw.get("mamba_d_ssm") is not None:
            words += (f"; mamba_d_ssm ({grouped(c.count('mamba_d_ssm', c.raw['mamba_d_ssm']))}) is given here and "
                      "sets the inner width instead, so this factor goes unused")
        return words

    EXPLAIN["mamba_expand"] = mamba_expand

    # Where the state-space blocks have no norm on their output, the groups normalize nothing.
    groups = EXPLAIN["mamba_n_groups"]

    def mamba_groups(key, v, c):
        words = groups(key, v, c)
        if c.raw.get("mamba_rms_norm") is False:
            words += "; mamba_rms_norm is off here, though, so no group norm exists and the groups share only B and C"
        return words

    EXPLAIN["mamba_n_groups"] = mamba_groups


_later_words()


# DBRX: the embedding dropout it keeps, and its two sub-configs.

@explains("emb_pdrop")
def _emb_pdrop(key, v, c):
    p = c.number("emb_pdrop")
    words = ("No dropout on the embeddings (probability 0)" if p == 0
             else f"Dropout with probability {_num(p)} on the embeddings in training; off at inference")
    if _built_as(c, "DbrxForCausalLM"):
        words += "; transformers' DBRX stores the value but applies no dropout to the embeddings, whatever it is"
    return words


def _entries(c: _Config, key: str, v: Any) -> dict:
    if not isinstance(v, dict):
        c.fail(key, f"must be an object of settings, not {_value_words(v)}")
    return v


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


@explains("ffn_config")
def _ffn_config(key, v, c):
    v = _entries(c, key, v)
    experts = v.get("moe_num_experts")
    parts = []
    for name, value in v.items():
        where = f"{key}.{name}"
        if name == "ffn_hidden_size":
            parts.append(f"ffn_hidden_size {grouped(c.count(where, value))} (the hidden width of each expert)")
        elif name == "moe_num_experts":
            parts.append(f"moe_num_experts {grouped(c.count(where, value))} (routed experts per mixture block)")
        elif name == "moe_top_k":
            k = c.count(where, value)
            of = f" of the {grouped(c.count(f'{key}.moe_num_experts', experts))}" if experts is not None else ""
            parts.append(f"moe_top_k {grouped(k)} (each token goes to {grouped(k)}{of} experts, picked by the "
                         "top softmax scores of the router)")
        elif name == "moe_jitter_eps":
            if value is None:
                parts.append("moe_jitter_eps unset (the router's input gets no noise)")
            else:
                eps = c.number(where, value)
                parts.append(f"moe_jitter_eps {_num(eps)} (in training only, the router's input is multiplied by "
                             f"noise drawn uniformly from [{_num(1 - eps)}, {_num(1 + eps)}]; none at inference)")
        elif name == "moe_loss_weight":
            parts.append(f"moe_loss_weight {_num(c.number(where, value))} (the weight of training's balancing loss, "
                         "added only when router logits are returned with labels; no effect on a forward pass)")
        elif name == "moe_normalize_expert_weights":
            if value is None:
                parts.append("moe_normalize_expert_weights unset (the chosen experts keep their softmax scores)")
            else:
                parts.append(f"moe_normalize_expert_weights {_num(c.number(where, value))} (the chosen experts' "
                             "weights are divided by their p-norm with this p)")
        elif name == "ffn_act_fn":
            act = value.get("name") if isinstance(value, dict) else None
            if not isinstance(act, str):
                c.fail(where, "must be an object naming its activation")
            parts.append(f"ffn_act_fn {_value_words(value)} (the experts' activation: {activation_words(act)})")
        elif name == "model_type":
            parts.append(f"model_type {_value_words(value)} (a label the sub-config was saved with; nothing reads it)")
        else:
            parts.append(f"{name} {_value_words(value)} (a setting the atlas has no words for)")
    words = ("The mixture of experts' own section of the config: " + "; ".join(parts) if parts else
             "The mixture of experts' own section of the config, empty")
    missing = [name for name in ("ffn_act_fn", "moe_normalize_expert_weights") if name not in v]
    if missing and _built_as(c, "DbrxForCausalLM"):
        words += f"; {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} absent, so DBRX's class defaults apply"
    return words


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
    from atlas.facts.config_words import EXPLAIN

    switch = EXPLAIN["indexer_rope_interleave"]

    def explain(key, v, c):
        words = switch(key, v, c)
        if _built_as(c, "GlmMoeDsaForCausalLM"):
            words += ("; transformers' GLM-MoE-DSA indexer reads no such switch and always rotates interleaved "
                      "pairs" + (", as this says" if v else ", which this contradicts"))
        return words

    EXPLAIN["indexer_rope_interleave"] = explain


_indexer_interleave_note()


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


# Gemma 4's wrapper: the audio section it may lack, and the image size its original code counted.

@explains("audio_config", unset=True)
def _audio_config(key, v, c):
    if v is None:
        return ("Left unset: the checkpoint has no audio tower, so the wrapper builds no audio encoder and no "
                "embedder for audio features")
    v = _entries(c, key, v)
    return f"The audio tower's configuration, {_plural(len(v), 'key')}: {settings_words(v)}"


@explains("vision_soft_tokens_per_image")
def _soft_tokens(key, v, c):
    n = c.count("vision_soft_tokens_per_image")
    words = f"Each image enters the text as {_plural(n, 'soft token')}, the vision tower's pooled outputs"
    if _built_as(c, "Gemma4ForConditionalGeneration"):
        words += ("; transformers' Gemma 4 takes the count from its image processor instead, which sets each image's "
                  "count from its size, up to the processor's own max_soft_tokens")
    return words


# RecurrentGemma: which blocks recur and which attend, the recurrent blocks' widths, its initialization.

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


@explains("embeddings_scale_by_sqrt_dim")
def _embeddings_sqrt(key, v, c):
    on = c.flag("embeddings_scale_by_sqrt_dim")
    words = f"The original code's switch for multiplying the embeddings by √(width): {'on' if on else 'off'}"
    if _built_as(c, "RecurrentGemmaForCausalLM"):
        width = c.get_count("hidden_size")
        by = f"√{grouped(width)} ≈ {width ** 0.5:.4g}" if width else "√hidden_size"
        words += (f"; transformers' RecurrentGemma reads no such switch and always multiplies them by {by} "
                  "(a constant it keeps in bfloat16)")
    return words


@explains("w_init_variance_scale")
def _w_init_variance(key, v, c):
    return (f"The variance scale, {_num(c.number(key))}, of the random initialization of the recurrent blocks' "
            "convolution and recurrence gates; trained weights replace it, so it changes nothing in the model")


@explains("final_w_init_variance_scale")
def _final_w_init_variance(key, v, c):
    s = c.number(key)
    words = (f"The variance scale, {_num(s)}, of the random initialization of the attention's and the recurrent "
             "blocks' output projections; trained weights replace it, so it changes nothing in the model")
    layers = c.get_count("num_hidden_layers")
    if layers and _built_as(c, "RecurrentGemmaForCausalLM"):
        own = 2 / layers
        words += (f"; transformers' RecurrentGemmaConfig sets it to 2/num_hidden_layers = 2/{layers} ≈ {own:.4g} "
                  "whatever the file says" + ("; here the two agree" if math.isclose(own, s) else "; here they differ"))
    return words


# Falcon-H1: the state-space width set outright, its gated norm, and the fixed multipliers of each path.

@explains("mamba_d_ssm", unset=True)
def _mamba_d_ssm(key, v, c):
    width, expand = c.get_count("hidden_size"), c.raw.get("mamba_expand")
    product = (f" ({_num(expand)} × {grouped(width)} = {_num(expand * width)})"
               if width and isinstance(expand, (int, float)) and not isinstance(expand, bool) else "")
    if v is None:
        return f"Left unset: the state-space blocks' inner width is mamba_expand × hidden_size{product}"
    d, heads, head = c.count(key), c.get_count("mamba_n_heads"), c.raw.get("mamba_d_head")
    if heads and isinstance(head, int) and not isinstance(head, bool) and heads * head != d:
        c.fail(key, f"{d} is not mamba_n_heads × mamba_d_head ({heads} × {head})")
    return (f"The state-space blocks' inner width, {_plural(c.count(key), 'channel')}, set outright in place of "
            f"mamba_expand × hidden_size{product}")


@explains("mamba_rms_norm")
def _mamba_rms_norm(key, v, c):
    if c.flag(key):
        return ("The state-space blocks' output passes a gated RMS norm, each group normalized on its own, before "
                "the output projection")
    return ("The state-space blocks' output is multiplied by SiLU of the gate and goes to the output projection with "
            "no norm")


@explains("mamba_norm_before_gate")
def _mamba_norm_before_gate(key, v, c):
    if c.flag(key):
        words = "Where the state-space blocks normalize their output, they normalize first and multiply by the gate after"
    else:
        words = "Where the state-space blocks normalize their output, they multiply by the gate first and normalize the product"
    if c.raw.get("mamba_rms_norm") is False:
        words += "; mamba_rms_norm is off here, so there is no such norm and the switch changes nothing"
    return words


@explains("mamba_use_mlp")
def _mamba_use_mlp(key, v, c):
    on = c.flag(key)
    words = f"The original code's switch for an MLP after the mixers in each block: {'on' if on else 'off'}"
    if _built_as(c, "FalconH1ForCausalLM"):
        words += "; transformers' Falcon-H1 reads no such switch and builds that MLP in every block"
    return words


_switch("projectors_bias", "The state-space blocks' output projection adds a learned bias",
        "The state-space blocks' output projection has no bias")


def _factor(c: _Config, key: str) -> str:
    f = c.number(key)
    return f"{_num(f)}, which leaves it as it is" if f == 1 else _num(f)


@explains("attention_in_multiplier")
def _attention_in(key, v, c):
    return (f"On its way into the attention (not into the state-space mixer), the normed stream is multiplied by "
            f"{_factor(c, key)}")


@explains("attention_out_multiplier")
def _attention_out(key, v, c):
    return (f"The attention's output is multiplied by {_factor(c, key)} before it is summed with the state-space "
            "mixer's and added to the stream")


@explains("ssm_in_multiplier")
def _ssm_in(key, v, c):
    return f"The state-space mixer's input is multiplied by {_factor(c, key)} before its input projection"


@explains("ssm_out_multiplier")
def _ssm_out(key, v, c):
    return (f"The state-space mixer's output is multiplied by {_factor(c, key)} before it is summed with the "
            "attention's and added to the stream")


@explains("key_multiplier")
def _key_multiplier(key, v, c):
    return (f"The keys are multiplied by {_factor(c, key)} straight after their projection, before rotation, so "
            "every attention score is scaled by it too")


@explains("lm_head_multiplier")
def _lm_head_multiplier(key, v, c):
    return f"The head's logits are multiplied by {_factor(c, key)}"


def _factors(c: _Config, key: str, v: Any, n: int) -> list[int | float]:
    if not isinstance(v, list) or len(v) != n:
        c.fail(key, f"must be a list of {n} numbers")
    return [c.number(key, x) for x in v]


@explains("mlp_multipliers")
def _mlp_multipliers(key, v, c):
    gate, down = _factors(c, key, v, 2)
    return (f"Two fixed factors of the MLP: the gate projection's output is multiplied by {_num(gate)} before the "
            f"activation, and the down projection's output by {_num(down)}")


SSM_PARTS = ("the gate", "the inputs x", "the map into the state (B)", "the map out of the state (C)", "the step size")


@explains("ssm_multipliers")
def _ssm_multipliers(key, v, c):
    factors = _factors(c, key, v, len(SSM_PARTS))
    return ("The state-space mixer's input projection gives five parts, each multiplied by a fixed factor of its own: "
            + ", ".join(f"{part} by {_num(f)}" for part, f in zip(SSM_PARTS, factors)))


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


# --- LongCat-Flash: blocks of two rounds, zero-computation experts, latent scales --------------------

_alias("ffn_hidden_size", "intermediate_size")
_alias("expert_ffn_hidden_size", "moe_intermediate_size")


@explains("num_layers")
def _num_layers(key, v, c):
    n = c.count(key)
    words = f"The number of blocks: {grouped(n)}"
    if _built_as(c, "LongcatFlashForCausalLM"):
        words += (f"; each runs two attentions, so transformers' LongcatFlashConfig reports num_hidden_layers as "
                  f"{grouped(2 * n)}, the count of attentions, not of blocks")
    return words


@explains("zero_expert_num")
def _zero_expert_num(key, v, c):
    n = c.count(key)
    real = c.get_count("n_routed_experts")
    words = f"{_plural(n, 'zero-computation expert')} join the router's choices, which hold no weights and run no MLP"
    if real:
        words += f": the router picks among {grouped(real + n)}, of which {grouped(real)} are real experts"
    return words


@explains("zero_expert_type")
def _zero_expert_type(key, v, c):
    if not isinstance(v, str):
        c.fail(key, "must be a name")
    words = f"What a zero-computation expert does with its token: {v!r}"
    if _built_as(c, "LongcatFlashForCausalLM"):
        words += ("; transformers reads no such setting: its zero experts always hand back the token's input, "
                  "times the slot's weight (the preview run measures which rule holds)")
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


@explains("attention_method")
def _attention_method(key, v, c):
    if not isinstance(v, str):
        c.fail(key, "must be a name")
    return (f"The original code's name for its attention, {v!r}; transformers reads it nowhere: the class it builds "
            "decides the attention")
