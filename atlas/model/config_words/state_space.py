"""config.json in words: state-space (Mamba) blocks. Their widths (state, inner width, heads, groups),
the convolution before the scan, the step size, the output's norm and gate, the settings that change
how the scan is computed but not what, and Falcon-H1's keys for its blocks.
"""

from __future__ import annotations

import math

from atlas.model.config_words.registry import (
    _Config,
    EXPLAIN,
    _built_as,
    _num,
    _plural,
    _switch,
    activation_words,
    explains,
)
from atlas.numbers import grouped


# --- the mixer's widths: its state, inner width, heads and groups ---------------------------------

@explains("mamba_d_state", "ssm_state_size")
def _ssm_state(key, v, c):
    return (f"The state-space blocks' recurrent state keeps {grouped(c.count(key))} values for each channel of "
            "their inner width")


@explains("state_size")
def _mamba_state_size(key, v, c):
    return (f"Each Mamba mixer's scan keeps {grouped(c.count(key))} values of state for each channel of its "
            "inner width")


@explains("expand")
def _mamba_expand(key, v, c):
    e, width = c.number(key), c.get_count("hidden_size")
    words = f"The Mamba mixers work at {_num(e)} times the stream's width inside"
    return words + (f": {grouped(width)} becomes {_num(e * width)}" if width else "")


@explains("mixer_rms_eps")
def _mixer_rms_eps(key, v, c):
    return (f"The epsilon inside the RMS norms each mixer applies, with no gain, to its time step, B and C before "
            f"the scan: {_num(c.number(key))}")


@explains("time_step_init_scheme")
def _dt_init_scheme(key, v, c):
    return (f'How the random initialization sets the time-step projection\'s weights, "{c.text(key)}"; trained '
            "weights replace them, so it changes nothing in the model")


@explains("time_step_scale")
def _dt_scale(key, v, c):
    return (f"A factor {_num(c.number(key))} on the spread of the time-step projection's random initialization; "
            "trained weights replace it, so it changes nothing in the model")


@explains("mamba_expand")
def _ssm_expand(key, v, c):
    e = c.number("mamba_expand")
    width = c.get_count("hidden_size")
    words = f"The state-space blocks work at {_num(e)} times the stream's width inside"
    if width:
        words += f": {grouped(width)} becomes {_num(e * width)}"
    return words


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


def _ssm_heads(c: _Config) -> int | None:
    return c.get_count("mamba_n_heads") or c.get_count("mamba_num_heads") or c.get_count("n_mamba_heads")


@explains("mamba_n_heads", "mamba_num_heads", "n_mamba_heads")  # Zamba2 says n_mamba_heads
def _ssm_heads_words(key, v, c):
    return f"{_plural(c.count(key), 'head')} per state-space block, each with its own step size and decay"


@explains("mamba_d_head", "mamba_head_dim", "mamba_headdim")
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


@explains("mamba_n_groups", "n_groups", "mamba_ngroups")
def _ssm_groups(key, v, c):
    g = c.count(key)
    words = (f"The state-space blocks' heads fall into {_plural(g, 'group')}; each group shares one map into and out "
             "of the state (B and C) and is normalized on its own before the output projection")
    heads = _ssm_heads(c)
    if heads and g and heads % g == 0:
        words += f", {_plural(heads // g, 'head')} per group"
    return words


# --- the convolution before the scan, and the activation after it ---------------------------------

@explains("mamba_d_conv", "conv_kernel")
def _ssm_conv(key, v, c):
    return (f"The state-space blocks run a causal convolution {grouped(c.count(key))} positions wide over each "
            "channel before the scan")


_switch("mamba_conv_bias", "The state-space blocks' causal convolution adds a learned bias",
        "The state-space blocks' causal convolution has no bias")
_switch("use_conv_bias", "The state-space blocks' causal convolution adds a learned bias",
        "The state-space blocks' causal convolution has no bias")


@explains("mamba_hidden_act")
def _ssm_act(key, v, c):
    return f"The activation the state-space blocks apply after their convolution: {activation_words(c.text(key))}"


# --- the step size --------------------------------------------------------------------------------

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


@explains("time_step_min")
def _dt_min(key, v, c):
    if c.mamba_stack():  # MambaMixer reads it only to initialize dt_proj's bias
        return (f"The least step size the random initialization of the Mamba mixers gives, {_num(c.number(key))}; "
                "trained weights replace it, so it changes nothing in the model")
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


# --- the output: its norm and gate, the projections' biases ---------------------------------------

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


@explains("rms_norm")
def _rms_norm_switch(key, v, c):
    return ("Read by the reference Mamba-2 block, not by transformers' Mamba2 mixer, which always builds its gated RMS "
            "norm before the output projection, whatever this says")


@explains("norm_before_gate")
def _norm_before_gate(key, v, c):
    return ("Read by the reference Mamba-2 kernels' gated norm, not by transformers' Mamba2 mixer: it multiplies the scan's "
            "output by SiLU of the gate first and then normalizes the product, whatever this says (its fused kernel call "
            "passes norm_before_gate=False)")


_switch("mamba_proj_bias", "The state-space blocks' input and output projections add a learned bias",
        "The state-space blocks' input and output projections have no bias")

_switch("projectors_bias", "The state-space blocks' output projection adds a learned bias",
        "The state-space blocks' output projection has no bias")


# --- how the scan is computed, not what: chunks, kernels, the state's precision -------------------

@explains("mamba_chunk_size", "chunk_size")
def _ssm_chunk(key, v, c):
    return (f"The state-space blocks' scan runs over the sequence in chunks of {_plural(c.count(key), 'position')}; "
            "it changes how the result is computed, not the result")


_switch("use_mamba_kernels",
        "A switch for fused state-space kernels, on: it chooses how the state-space blocks are computed, not what "
        "they compute, so it changes nothing in the model",
        "A switch for fused state-space kernels, off: it chooses how the state-space blocks are computed, not what "
        "they compute, so it changes nothing in the model")


@explains("mamba_ssm_dtype")
def _state_dtype(key, v, c):
    return (f"The precision the original code keeps the linear-attention blocks' recurrent state in, "
            f"{c.text('mamba_ssm_dtype')}; it changes no shape")


# --- Falcon-H1's blocks ---------------------------------------------------------------------------

@explains("mamba_use_mlp")
def _mamba_use_mlp(key, v, c):
    on = c.flag(key)
    words = f"The original code's switch for an MLP after the mixers in each block: {'on' if on else 'off'}"
    if _built_as(c, "FalconH1ForCausalLM"):
        words += "; transformers' Falcon-H1 reads no such switch and builds that MLP in every block"
    return words


def _falcon_h1_notes() -> None:
    """Two keys whose words depend on a key Falcon-H1 adds."""
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


_falcon_h1_notes()
