"""config.json in words: how each block is wired. Parallel or sequential sublayers, which projections
carry a bias, the residual stream's precision and hyper-connections, and the fixed scales on the
stream's paths (embeddings, residual, attention, state-space mixer, MLP) and on the logits.
"""

from __future__ import annotations

import math
from typing import Any

from atlas.model.config_words.registry import (
    EXPLAIN,
    _Config,
    _alias,
    _built_as,
    _num,
    _plural,
    _switch,
    explains,
)
from atlas.numbers import grouped


# --- parallel or sequential blocks ----------------------------------------------------------------

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


# --- biases ---------------------------------------------------------------------------------------

_switch("attention_bias", "The attention's projections add a learned bias", "The attention's projections have no bias")
_switch("mlp_bias", "The MLP's projections add a learned bias", "The MLP's projections have no bias")

_switch("bias", "The blocks' linear projections add a learned bias", "The blocks' linear projections have no bias")
@explains("use_bias")
def _use_bias(key, v, c):
    where = "The Mamba mixers' input and output projections" if c.mamba_stack() else "The attention's and the MLP's projections"
    return f"{where} add a learned bias" if c.flag(key) else f"{where} have no bias"
_switch("attention_out_bias", "The attention's output projection adds a learned bias",
        "The attention's output projection has no bias")
_switch("lm_head_bias", "The output head adds a learned bias to every logit", "The output head has no bias")


# --- the residual stream: its precision, and hyper-connections ------------------------------------

_switch("residual_in_fp32", "The residual stream is kept in 32-bit floats, whatever the weights' precision",
        "The residual stream is kept in the weights' own precision")


@explains("hc_mult")
def _hc_mult(key, v, c):
    n = c.count("hc_mult")
    width = c.get_count("hidden_size")
    wide = f" of {grouped(width)}" if width else ""
    return (f"The residual is {_plural(n, 'parallel stream')}{wide}, not one: before each sublayer a hyper-connection "
            f"collapses them into the sublayer's input with a weight per stream, spreads the sublayer's output back over them, "
            f"and mixes the old streams with a {n} × {n} matrix")


@explains("hc_sinkhorn_iters")
def _hc_sinkhorn(key, v, c):
    n = c.count("hc_sinkhorn_iters")
    return (f"The hyper-connections' mixing matrix is a softmax per row, then its columns are divided by their sums and "
            f"{_plural(n - 1, 'more round')} divide rows then columns (Sinkhorn), which drives it towards doubly stochastic")


@explains("hc_eps")
def _hc_eps(key, v, c):
    return (f"Added to the hyper-connections' collapse weights and mixing matrix and to every sum they are divided by: "
            f"{_num(c.number('hc_eps'))}")


# --- fixed scales on the stream's paths -----------------------------------------------------------

@explains("embedding_multiplier", "scale_emb")
def _embedding_scale(key, v, c):
    return f"The embeddings are multiplied by {_num(c.number(key))} before the first block"


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


@explains("attention_value_scale")
def _attention_value_scale(key, v, c):
    words = (f"The values are multiplied by {_factor(c, key)} straight after their projection, before the heads "
             "mix them, so every head's output is scaled by it too")
    width, heads, value_width = c.raw.get("hidden_size"), c.raw.get("num_attention_heads"), c.raw.get("v_head_dim")
    if all(isinstance(n, int) and n > 0 for n in (width, heads, value_width)):
        words += (f"; the square root of the width over the heads' joined value width, √({grouped(width)} / "
                  f"({heads} × {value_width})), is {_num(round(math.sqrt(width / (heads * value_width)), 4))}")
    return words


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


# --- the logits: scales and a softcap -------------------------------------------------------------

@explains("logit_scale")
def _logit_scale(key, v, c):
    return f"The head's logits are multiplied by {_num(c.number('logit_scale'))}"


@explains("logits_scaling")
def _logits_scaling(key, v, c):
    return f"The head's logits are divided by {_num(c.number('logits_scaling'))}"


@explains("lm_head_multiplier")
def _lm_head_multiplier(key, v, c):
    return f"The head's logits are multiplied by {_factor(c, key)}"


@explains("final_logit_softcapping", unset=True)
def _final_softcap(key, v, c):
    if v is None:
        return "Left unset: the logits are not softcapped"
    cap = _num(c.number("final_logit_softcapping"))
    return f"The head's logits are squashed into (−{cap}, {cap}) by {cap}·tanh(logit / {cap})"


_alias("logits_soft_cap", "final_logit_softcapping")  # RecurrentGemma's name for the cap on its logits


# --- biases and scales under other names ----------------------------------------------------------

_switch("qkv_bias", "The query, key and value projections add a learned bias", "The query, key and value projections have no bias")
_switch("use_qkv_bias", "The query, key and value projections add a learned bias", "The query, key and value projections have no bias")
_switch("scale_embedding", "The token embeddings are multiplied by the square root of the width before block 0",
        "The token embeddings enter block 0 unscaled")


def _residual_factors(kind: str, sublayer: str) -> None:
    # MiniMax's block: the stream after a sublayer is its normed input times alpha plus its output times beta
    def alpha(key, v, c):
        return (f"After each {sublayer}, the stream is the normed input it read times {_num(c.number(key))}, "
                f"plus its output times {kind}_beta_factor")

    def beta(key, v, c):
        return f"Each {sublayer}'s output is added to the stream times {_num(c.number(key))}"

    EXPLAIN[f"{kind}_alpha_factor"], EXPLAIN[f"{kind}_beta_factor"] = alpha, beta


for _kind, _sublayer in (("full_attn", "softmax attention"), ("linear_attn", "lightning attention"), ("mlp", "MLP or mixture")):
    _residual_factors(_kind, _sublayer)


# --- AFMoE's muP switch -----------------------------------------------------------------------

_switch("mup_enabled", "The token embeddings are multiplied by the square root of the width before block 0 (muP's input scale)",
        "The token embeddings enter block 0 unscaled (muP's input scale is off)")
