"""config.json in words: the MLP. Its hidden width (and the width LFM2's original code adjusts), its
activation and its gate.
"""

from __future__ import annotations

from atlas.model.config_words.registry import (
    _Config,
    _alias,
    _num,
    _switch,
    activation_words,
    explains,
)
from atlas.numbers import grouped


# --- the MLP's hidden width -----------------------------------------------------------------------

@explains("intermediate_size")
def _intermediate(key, v, c):
    width = grouped(c.count("intermediate_size"))
    if c.mamba_stack():
        return f"The Mamba mixers' inner width, which the scan input and the gate each have: {width}"
    if c.time_mixing():
        return f"The width of every block's channel mixing inside, where its key goes through a squared ReLU: {width}"
    if "moe_intermediate_size" in c.raw:
        return f"The hidden width of a dense MLP, wherever a block keeps one: {width}"
    if c.experts():
        return f"The hidden width of each expert: {width}"
    return f"The hidden width of every MLP: {width}"


_alias("ffn_hidden_size", "intermediate_size")


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


@explains("intermediate_size_mlp")
def _intermediate_size_mlp(key, v, c):
    n = c.count("intermediate_size_mlp")
    words = f"The hidden width of a dense block's MLP: {grouped(n)}"
    layers, moe = c.get_count("num_hidden_layers"), c.raw.get("moe_layers")
    if layers is not None and isinstance(moe, list) and sorted(moe) == list(range(layers)):
        words += "; every block here is a mixture, so no block uses it"
    return words


# --- a width the original code adjusts (LFM2) -----------------------------------------------------

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


def _after_adjust(words: str, c: _Config) -> str:
    if c.raw.get("block_auto_adjust_ff_dim") is False:
        return words + "; block_auto_adjust_ff_dim is off, so this has no effect"
    return words


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


@explains("block_ffn_dim_multiplier", unset=True)
def _ffn_multiplier(key, v, c):
    if v is None:
        return _after_adjust("Left unset: the adjusted MLP width is two thirds of the given one, with no further "
                             "multiplier or rounding", c)
    return _after_adjust(f"The adjusted MLP width is multiplied by {_num(c.number(key))} before it is rounded", c)


@explains("block_multiple_of")
def _block_multiple_of(key, v, c):
    return _after_adjust(f"The adjusted MLP width is rounded up to a multiple of {grouped(c.count(key))}", c)


# --- the activation and the gate ------------------------------------------------------------------

@explains("hidden_act", "hidden_activation", "activation_function")
def _activation(key, v, c):
    if c.mamba_stack():  # no MLP: the mixer's convolution output and its gate go through it
        return f"The activation of the Mamba mixers, after the convolution and on the gate: {activation_words(c.text(key))}"
    where = "every MLP and expert" if c.experts() else "every MLP"
    return f"The activation named for {where}: {activation_words(c.text(key))}"


@explains("mlp_hidden_act")
def _mlp_act(key, v, c):
    return f"The activation of the MLP blocks: {activation_words(c.text(key))}"


_switch("use_gated_activation", "The MLP is gated: the activated gate projection multiplies an up projection",
        "The MLP is not gated: one projection up, the activation, one projection down")

_switch("block_use_swiglu",
        "The original code's switch for a gated MLP in which the SiLU of a gate projection multiplies an up "
        "projection (SwiGLU): on",
        "The original code's switch for a gated MLP in which the SiLU of a gate projection multiplies an up "
        "projection (SwiGLU): off")


@explains("mlp_type")
def _mlp_type(key, v, c):
    return f'The original code\'s name for its kind of MLP, "{c.text("mlp_type")}"'


@explains("swiglu_limit")
def _swiglu_limit(key, v, c):
    limit = _num(c.number("swiglu_limit"))
    return f"The gated MLP clamps its gate projection at {limit} from above and its up projection into [−{limit}, {limit}]"


@explains("afn")
def _afn(key, v, c):
    # GPT-1's modeling file looks the name up in a table of its own (ACT_FNS), where "gelu" is the tanh form
    own = {"gelu": "gelu_new", "swish": "silu"}.get(c.text(key), c.text(key))
    return f"The activation of every MLP, by the name GPT-1's own table gives it: {activation_words(own)}"


@explains("dff")
def _dff(key, v, c):
    return f"The hidden width of every MLP: {grouped(c.count('dff'))}"
