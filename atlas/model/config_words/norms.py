"""config.json in words: the norms. Their kind and epsilon, and where they sit: before or after each
sublayer, and on the queries and keys.
"""

from __future__ import annotations

from atlas.model.config_words.registry import (
    _num,
    _same_as,
    _switch,
    explains,
)


# --- the norms' kind and epsilon ------------------------------------------------------------------

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


@explains("normalization_function")
def _normalization_function(key, v, c):
    kind = c.text("normalization_function")
    return (f'The original code\'s name for its norm, "{kind}": '
            + NORM_TYPES.get(kind, "a kind the atlas has no words for"))


@explains("rms_norm_eps")
def _rms_eps(key, v, c):
    return f"The epsilon added to the mean square inside every RMSNorm: {_num(c.number('rms_norm_eps'))}"


@explains("layer_norm_epsilon")
def _ln_eps(key, v, c):
    return f"The epsilon added to the variance inside every LayerNorm: {_num(c.number('layer_norm_epsilon'))}"


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


@explains("norm_eps")
def _norm_eps(key, v, c):
    return f"The epsilon added inside every norm of the model: {_num(c.number('norm_eps'))}"


@explains("block_norm_eps")
def _block_norm_eps(key, v, c):
    eps = c.number("block_norm_eps")
    return f"The epsilon of the blocks' norms as the original code records it, {_num(eps)}{_same_as(c, eps, 'norm_eps')}"


# --- where the norms sit: before or after each sublayer, on queries and keys ----------------------

_switch("do_layer_norm_before", "Each sublayer normalizes its input (a pre-norm block)",
        "The stream is normalized after each sublayer's output is added to it (a post-norm block)")
_switch("post_norm", "A norm is applied to each sublayer's output", "No norm is applied to the sublayers' outputs")
_switch("apply_residual_connection_post_layernorm",
        "The residual carried past each sublayer is its normed input, not the stream itself",
        "The residual carried past each sublayer is the stream itself, not its normed copy")


@explains("use_qk_norm", "qk_norm", "qk_layernorm")
def _qk_norm(key, v, c):
    if c.flag(key):
        return "Queries and keys are each normalized per head before the attention scores are computed"
    return "Queries and keys go into the attention scores without a norm of their own"


@explains("qk_norm_type")
def _qk_norm_type(key, v, c):
    kind = c.text(key)
    where = ("one norm over all heads' width for the queries and one for the keys" if kind == "per_layer"
             else "a norm over each head" if kind == "per_head" else "a placement the atlas has no words for")
    return f'Where the query and key norms act, "{kind}": {where}'
