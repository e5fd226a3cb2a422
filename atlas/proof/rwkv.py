"""RWKV-4's token shift, time mixing and channel mixing, as steps written in expressions.

Both mixings start from a token shift: the module's padding moves the sequence one position later, so
position t reads x_{t-1} (x_{-1} = 0), and every channel of the input is interpolated with it by a
learned weight μ per channel. The time mixing projects three such mixes to a key k, a value v and a
receptance r, and reads the values through the weighted key-value recurrence (WKV): with a decay
w = -exp(θ) per channel and a bonus u for the current position,

    wkv_t = (Σ_{s<t} e^{(t-1-s)w + k_s} v_s + e^{u + k_t} v_t) / (Σ_{s<t} e^{(t-1-s)w + k_s} + e^{u + k_t}),

which the module computes position by position from a numerator a, a denominator b and the largest
exponent p seen so far, each exponential taken relative to p so that none overflows. The step prints
and runs that stable form; the notes check it against the plain ratio of sums on the preview run. The
sigmoid of r gates the read-out and the output projection maps it back. The channel mixing squares
the ReLU of a wide key projection, maps it back with the value projection and gates it by the sigmoid
of a receptance projection.

Which module is which comes from structure (atlas.model.structure.is_token_shift, is_time_mixing,
is_channel_mixing): the padding by one position, and the mixing weights, vectors and linear maps each
mixing holds. The linear maps are told apart by their shapes and by the names the module gives them
(key, value, receptance, output), which the proof checks on the run: a map used in the wrong place
does not reproduce the module.
"""

from __future__ import annotations

import dataclasses

from atlas.proof import expr as E
from atlas.proof.core import Part
from atlas.proof.library import X, apply_child, linear_call, linear_dims
from atlas.proof.steps import Chain, Step
from atlas.numbers import ordinal


def _shifted(x):
    import torch

    return torch.cat([torch.zeros_like(x[:, :1]), x[:, :-1]], dim=1)


# the sequence moved one position later: position t holds x_{t-1}, position 0 zeros
shift = E.Function("shift", _shifted, lambda a: rf"{a}_{{t-1}}")


def _wkv(k, v, w, u):
    """The module's recurrence in its stable form, position by position (a: numerator, b: denominator,
    p: the largest exponent so far, each state held relative to e^p)."""
    import torch

    a = torch.zeros_like(k[:, 0])
    b = torch.zeros_like(k[:, 0])
    p = torch.full_like(k[:, 0], -1e38)
    out = []
    for t in range(k.shape[1]):
        kt, vt = k[:, t], v[:, t]
        q = torch.maximum(p, u + kt)
        e1, e2 = torch.exp(p - q), torch.exp(u + kt - q)
        out.append((e1 * a + e2 * vt) / (e1 * b + e2))
        q = torch.maximum(p + w, kt)
        e1, e2 = torch.exp(p + w - q), torch.exp(kt - q)
        a, b, p = e1 * a + e2 * vt, e1 * b + e2, q
    return torch.stack(out, dim=1)


def _wkv_tex(k, v, w, u):
    return (rf"\operatorname{{WKV}}({k},{v})_t=\frac{{e^{{p_{{t-1}}-q_t}}a_{{t-1}}+e^{{{u}+{k}_t-q_t}}{v}_t}}"
            rf"{{e^{{p_{{t-1}}-q_t}}b_{{t-1}}+e^{{{u}+{k}_t-q_t}}}},\ q_t=\max(p_{{t-1}},{u}+{k}_t);\ "
            rf"a_t=e^{{p_{{t-1}}+{w}-p_t}}a_{{t-1}}+e^{{{k}_t-p_t}}{v}_t,\ b_t=e^{{p_{{t-1}}+{w}-p_t}}b_{{t-1}}+e^{{{k}_t-p_t}},\ "
            rf"p_t=\max(p_{{t-1}}+{w},{k}_t);\ a_{{-1}}=b_{{-1}}=0,\ p_{{-1}}=-10^{{38}}")


wkv = E.Function("WKV", _wkv, _wkv_tex)


def token_shift(part: Part) -> Chain:
    """The padding that hands position t the input of position t - 1 (zeros at the first position)."""
    step = Step(expr=E.Let(E.Sym("y", r"\bar x_t"), shift(E.Sym("x", "x")), "(the token shift: the previous position, zeros before the first)"),
                summary=True)
    part.note("shift", 1, "the padding's rows: one position added before the sequence, the last one dropped")
    return Chain([step], [X], "y")


def _mixes(part: Part, x: E.Sym, xs: E.Sym, names: list[tuple[str, str, str]]) -> Step:
    """Each named interpolation of the input with its previous position, x ⊙ μ + x_{t-1} ⊙ (1 − μ), for
    (the module's weight, the name defined, its subscript)."""
    width = part.full.get_parameter(names[0][0]).shape[-1]
    lets = tuple(E.Let(E.Sym(out, f"x_{sub}"), x * E.Weight(weight, rf"\mu_{sub}", (width,)) + xs * (1 - E.Weight(weight, rf"\mu_{sub}")))
                 for weight, out, sub in names)
    return Step(expr=E.Lets(lets, each=False, tail=r"\quad\text{(each channel between the position and the previous one)}"), summary=True)


def _rescaled(part: Part, symbol: str) -> str:
    """Words for an output projection the model divides in eval mode (RWKV's rescale_every): in block n, the
    stored weight over 2 to the number of whole periods before it; nothing where the model does not rescale."""
    every = getattr(part.ctx.full_config, "rescale_every", 0)
    if not (isinstance(every, int) and every > 0):
        return ""
    return (f"({symbol} in eval mode: the stored weight divided by 2 for every {every} blocks before this one, "
            f"so by 2 to the power floor(n/{every}) in block n)")


def time_mixing(part: Part) -> Chain:
    m = part.full
    d, inner = linear_dims(m.key)[0], linear_dims(m.key)[1]
    x, xs = E.Sym("x", "x"), E.Sym("xs", r"\bar x")
    k, v, r, wkv_s = E.Sym("k", "k"), E.Sym("v", "v"), E.Sym("r", "r"), E.Sym("wkv", r"\mathrm{wkv}")
    w, o = E.Sym("w", "w"), E.Sym("o", "o")
    steps = [
        Step(expr=E.Let(xs, apply_child(part, "time_shift", lambda a: rf"{a}_{{t-1}}", x=x)), summary=True),
        _mixes(part, x, xs, [("time_mix_key", "xk", "k"), ("time_mix_value", "xv", "v"), ("time_mix_receptance", "xr", "r")]),
        Step(expr=E.Let(k, linear_call(part, "key", E.Sym("xk", "x_k"), "W_k"), maps=(d, inner)), summary=True),
        Step(expr=E.Let(v, linear_call(part, "value", E.Sym("xv", "x_v"), "W_v"), maps=(d, inner)), summary=True),
        Step(expr=E.Let(r, E.sigmoid(linear_call(part, "receptance", E.Sym("xr", "x_r"), "W_r")), "(the receptance, a gate per channel)",
                        maps=(d, inner)), summary=True),
        Step(expr=E.Let(w, -E.exp(E.Weight("time_decay", r"\theta", (inner,))), "(each channel's decay a position, in log space)"), summary=True),
        Step(expr=E.Let(wkv_s, wkv(k, v, w, E.Weight("time_first", "u", (inner,)))), summary=True),
        Step(expr=E.Let(o, r * wkv_s), value="ssm_premix", summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta"), linear_call(part, "output", o, "W_o"), _rescaled(part, "W_o"), maps=(inner, d)),
             value="ssm_output", summary=True),
    ]
    part.note("state", {"channels": inner, "numbers_per_channel": 3, "shifted_inputs": d},
              "the recurrence's numerator, denominator and largest exponent per channel, and the last input of the token shift")
    return Chain(steps, [X], "out", output_element=0)


def channel_mixing(part: Part) -> Chain:
    m = part.full
    d, wide = linear_dims(m.key)[0], linear_dims(m.key)[1]
    x, xs = E.Sym("x", "x"), E.Sym("xs", r"\bar x")
    k, r = E.Sym("k", "k"), E.Sym("r", "r")
    steps = [
        Step(expr=E.Let(xs, apply_child(part, "time_shift", lambda a: rf"{a}_{{t-1}}", x=x)), summary=True),
        _mixes(part, x, xs, [("time_mix_key", "xk", "k"), ("time_mix_receptance", "xr", "r")]),
        Step(expr=E.Let(k, E.relu2(linear_call(part, "key", E.Sym("xk", "x_k"), "W_k")), maps=(d, wide)), value="mlp_neurons", summary=True),
        Step(expr=E.Let(r, E.sigmoid(linear_call(part, "receptance", E.Sym("xr", "x_r"), "W_r")), "(the receptance gate)", maps=(d, d)),
             summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta"), r * linear_call(part, "value", k, "W_v"), _rescaled(part, "W_v"), maps=(wide, d)),
             value="mlp_output", summary=True),
    ]
    part.note("shifted_inputs", d, "the last input of the token shift, kept per block between calls")
    return Chain(steps, [X], "out", output_element=0)


def with_embedding_norm(part: Part, chain: Chain) -> Chain:
    """A block that normalises its input before anything else (RWKV's block 0 and its pre_ln): the norm's
    step before the block's own, so the stream its sublayers add to starts at the norm's output."""
    from atlas.model.roles import block_roles
    from atlas.proof.library import norm_call

    held = block_roles(part.tiny).embedding_norm
    if held is None:
        return chain
    x = E.Sym("x", "x")
    first = Step(expr=E.Let(x, norm_call(part, held, x), f"(block 0 normalises the embeddings itself: {held})"), summary=True)
    part.note("embedding_norm", held, "the block's own norm of its input, which only block 0 holds")
    return dataclasses.replace(chain, steps=[first] + list(chain.steps))


def halved_after(part: Part) -> tuple[list[int], int | None]:
    """The blocks after which the model divides the stream by two (RWKV's rescale_every, which transformers
    applies in eval mode, with the output projections of later blocks divided to match), on the tiny model,
    and the checkpoint's period; ([], None) where the model does not rescale."""
    every, full = getattr(part.ctx.tiny_config, "rescale_every", 0), getattr(part.ctx.full_config, "rescale_every", 0)
    base = next((m for m in part.tiny.modules() if hasattr(m, "layers_are_rescaled")), None)
    if not (isinstance(every, int) and every > 0 and base is not None and base.layers_are_rescaled):
        return [], None
    count = part.ctx.tiny_config.num_hidden_layers
    return [n for n in range(count) if (n + 1) % every == 0], full


def halving_words(halving: tuple[list[int], int | None]) -> str:
    """What the stack does between blocks where the model rescales (RWKV): words after a block's step."""
    every = halving[1]
    return (f"; after every {ordinal(every)} block (rescale_every) the model halves the stream, x_(n+1) = Block_n(x_n)/2, in eval mode"
            if halving[0] else "")


def mixer_label(mixer) -> str:
    """How a block's step names its fixed-state mixer: RWKV's time mixing by what it is, any other as SSM."""
    from atlas.model.structure import is_time_mixing

    return r"\operatorname{TimeMix}" if is_time_mixing(mixer) else r"\operatorname{SSM}"
