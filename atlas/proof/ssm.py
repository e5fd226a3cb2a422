"""A selective state-space mixer (Mamba-2) and its gated norm, as steps.

The mixer's chain writes the scan as the recurrence it is, one position after another: each head
keeps a state of head_dim × state_size numbers, decays it by exp(Δ·A) and adds Δ·x·Bᵀ, then reads it
with C and adds the skip D·x. transformers computes the same thing chunk by chunk (a quadratic form
inside each chunk, the recurrence between chunks); the proof checks that both give the module's
output on the preview run. Which mixer a module is comes from its structure (atlas.model.structure.is_ssm):
a depthwise causal convolution, a per-head decay A_log and a skip D.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, apply_child, linear_call
from atlas.proof.steps import Chain, Input, Step


@dataclass(eq=False)
class CausalConv(E.Expr):
    """A depthwise causal convolution over positions: channel c at position t mixes positions t-K+1..t of
    channel c (zeros before the first), ``last`` = K-1; printed as that sum, with u_{<0} = 0 after it. Its
    input is (batch, T, channels), the weight the module's conv1d's (channels, 1, K)."""

    u: E.Expr
    weight: E.Weight
    last: E.Size
    bias: E.Weight | None = None
    prec = E.SUM

    def children(self):
        return (self.u, self.weight, self.last) + ((self.bias,) if self.bias is not None else ())

    def tex(self, index=None):
        k = self.last.tex()
        b = f"+{self.bias.tex()}" if self.bias is not None else ""
        return rf"\textstyle\sum_{{k=0}}^{{{k}}} {self.weight.tex()}_{{k}}\odot {self.u.tex()}_{{t-{k}+k}}{b}"

    def where(self):
        return rf"{self.u.tex()}_{{<0}}=0"

    def run(self, env):
        import torch

        u, w, K = self.u.run(env), self.weight.run(env)[:, 0, :], int(self.last.run(env)) + 1
        padded = torch.cat([u.new_zeros(u.shape[0], K - 1, u.shape[2]), u], dim=1)
        out = sum(w[:, k] * padded[:, k:k + u.shape[1], :] for k in range(K))
        return out + self.bias.run(env) if self.bias is not None else out


def causal_conv(part: Part, u: E.Expr, conv: str) -> CausalConv:
    """The module's ``conv`` (a depthwise Conv1d) run causally on ``u``, its bias where it holds one."""
    full, tiny = part.full.get_submodule(conv), part.tiny.get_submodule(conv)
    bias = E.Weight(f"{conv}.bias", "b") if tiny.bias is not None else None
    return CausalConv(u, E.Weight(f"{conv}.weight", "w"), E.Size(full.kernel_size[0] - 1, tiny.kernel_size[0] - 1), bias)


def blocks(source: E.Sym, parts: list[tuple[E.Sym, int, int]]) -> E.Lets:
    """``source`` split into consecutive column blocks, each (its name, its checkpoint width, its tiny width):
    each printed by the columns it takes (arrange.column_block)."""
    lets, first, t_first = [], 1, 1
    for target, width, tiny in parts:
        lets.append(E.Let(target, A.column_block(source, E.Size(first, t_first), E.Size(first + width - 1, t_first + tiny - 1))))
        first, t_first = first + width, t_first + tiny
    return E.Lets(tuple(lets), each=False)


def _scan_heads(x, B, C, dt, A, D, heads, groups, P, N):
    """Mamba-2's recurrence, position by position: each head's state decays by exp(Δ A) and takes Δ x Bᵀ; it is
    read with C, plus the skip D x. x is (batch, T, heads × P); B and C (batch, T, groups × N), each group's
    read by its heads in turn; Δ (batch, T, heads)."""
    import torch

    b, T_, H, G = x.shape[0], x.shape[1], int(heads), int(groups)
    x = x.reshape(b, T_, H, int(P))
    B = B.reshape(b, T_, G, int(N)).repeat_interleave(H // G, dim=2)  # each head reads its group's B and C
    C = C.reshape(b, T_, G, int(N)).repeat_interleave(H // G, dim=2)
    S = x.new_zeros(b, H, int(P), int(N))
    ys = []
    for t in range(T_):
        decay = torch.exp(dt[:, t] * A)  # (batch, heads)
        S = decay[:, :, None, None] * S + (dt[:, t, :, None, None] * x[:, t, :, :, None]) * B[:, t, :, None, :]
        ys.append((S * C[:, t, :, None, :]).sum(-1) + D[None, :, None] * x[:, t])
    return torch.stack(ys, dim=1).reshape(b, T_, H * int(P))


def _scan_heads_tex(x, B, C, dt, A, D, heads, groups, P, N):
    return (rf"S^{{h}}_t\,{C}^{{g(h)}}_t+{D}^{{h}}{x}^{{h}}_t,\quad "
            rf"S^{{h}}_t=e^{{{dt}^{{h}}_t {A}^{{h}}}}S^{{h}}_{{t-1}}+{dt}^{{h}}_t\,{x}^{{h}}_t\,({B}^{{g(h)}}_t)^{{\top}},\quad "
            rf"S^{{h}}\in\mathbb{{R}}^{{{P}\times{N}}},\ S^{{h}}_{{-1}}=0")


# y_t = C_t S_t + D x_t, S_t = e^{Δ_t A} S_{t-1} + Δ_t x_t B_tᵀ: Mamba-2's scan, one state per head (atlas.proof.ssm)
scan = E.Function("scan", _scan_heads, _scan_heads_tex)


def _scan_channels(x, B, C, dt, A, D):
    """The first Mamba's recurrence: a state of N numbers per channel, decayed by exp(Δ A) entry by entry; B and
    C shared by all channels. x and Δ are (batch, T, channels), B and C (batch, T, N), A (channels, N)."""
    import torch

    S = x.new_zeros(x.shape[0], x.shape[2], A.shape[1])
    ys = []
    for t in range(x.shape[1]):
        S = torch.exp(dt[:, t, :, None] * A) * S + (dt[:, t] * x[:, t])[:, :, None] * B[:, t, None, :]
        ys.append((S * C[:, t, None, :]).sum(-1) + D * x[:, t])
    return torch.stack(ys, dim=1)


def _scan_channels_tex(x, B, C, dt, A, D, N, channels):
    return (rf"S^{{j}}_t\cdot {C}_t+{D}^{{j}}{x}^{{j}}_t,\quad "
            rf"S^{{j}}_t=e^{{{dt}^{{j}}_t {A}^{{j}}}}\odot S^{{j}}_{{t-1}}+{dt}^{{j}}_t {x}^{{j}}_t {B}_t,\quad "
            rf"S^{{j}}\in\mathbb{{R}}^{{{N}}},\ j=1..{channels},\ S_{{-1}}=0")


# the first Mamba's scan, one state per channel
scan_channels = E.Function("scan per channel", lambda x, B, C, dt, A, D, N, channels: _scan_channels(x, B, C, dt, A, D), _scan_channels_tex)


def _clamped_tex(a, low, high):
    return rf"\operatorname{{clamp}}_{{[{low},\,{high}]}}({a})"


# a value kept within [low, high] (Mamba-2's time steps: the module's time_step_limit; high may be ∞)
clamped = E.Function("clamp", lambda a, low, high: a.clamp(min=low, max=high), _clamped_tex)


def _sizes(module) -> dict[str, int]:
    """The mixer's sizes, read from its tensors: heads, channels per head, groups, state, kernel."""
    heads = module.A_log.shape[0]
    conv = module.conv1d
    kernel = conv.kernel_size[0]
    gated = next((m for n, m in module.named_children() if n == _gated_norm_name(module)), None)
    inner = gated.weight.shape[0] if gated is not None else module.out_proj.weight.shape[1]
    conv_dim = conv.weight.shape[0]
    groups = module.n_groups
    state = (conv_dim - inner) // (2 * groups)
    return {"heads": heads, "head_dim": inner // heads, "inner": inner, "groups": groups, "state": state,
            "kernel": kernel, "conv_dim": conv_dim, "width": module.out_proj.weight.shape[0]}


def _gated_norm_name(module) -> str | None:
    """The child that normalizes the heads before the output projection: a gain vector and nothing else."""
    return next((n for n, m in module.named_children()
                 if not list(m.children()) and {k for k, _ in m.named_parameters()} == {"weight"} and m.weight.dim() == 1), None)


def _limit(module) -> tuple[float, float]:
    low, high = getattr(module, "time_step_limit", (0.0, math.inf))
    return float(low), float(high)


def mamba2(part: Part) -> Chain:
    full, tiny = _sizes(part.full), _sizes(part.tiny)
    d, di, H, P, G, N, K = full["width"], full["inner"], full["heads"], full["head_dim"], full["groups"], full["state"], full["kernel"]
    cd = full["conv_dim"]
    gated = _gated_norm_name(part.tiny)
    low, high = _limit(part.full)
    tiny_low, tiny_high = _limit(part.tiny)
    t_di, t_cd, t_H, t_P, t_G, t_N = tiny["inner"], tiny["conv_dim"], tiny["heads"], tiny["head_dim"], tiny["groups"], tiny["state"]

    z, u, delta, c = E.Sym("z", "z"), E.Sym("xbc", "u"), E.Sym("delta", r"\delta"), E.Sym("c", "c")
    xs, B, C, dt, A_ = E.Sym("xs", "x"), E.Sym("B", "B"), E.Sym("C", "C"), E.Sym("dt", r"\Delta"), E.Sym("A", "A")
    y = E.Sym("y", "y")
    softplus = E.softplus(delta + E.Weight("dt_bias", r"b_\Delta"))
    if low > 0 or high < math.inf:
        softplus = clamped(softplus, E.Size(low, tiny_low), E.Size(high, tiny_high, r"\infty" if high == math.inf else None))
    conv_words = f"(depthwise causal convolution over {T.num(K)} positions)"
    steps = _input_scale_steps(part, di, G * N, H, (t_di, t_G * t_N, t_H))
    steps += [
        Step(expr=E.Let(E.Sym("p", "p"), linear_call(part, "in_proj", E.Sym("x", "x"), r"W_{\mathrm{in}}"), maps=(d, 2 * di + 2 * G * N + H)),
             value="ssm_projections", summary=True),
        *_part_scale_steps(part, di, G * N, H, (t_di, t_G * t_N, t_H)),
        Step(expr=blocks(E.Sym("p", "p"), [(z, di, t_di), (u, cd, t_cd), (delta, H, t_H)]), value=("ssm_gate", None, None)),
        Step(expr=E.Let(E.Sym("c", "c_t"), E.silu(causal_conv(part, u, "conv1d")), conv_words), summary=True),
        Step(expr=E.Lets(blocks(c, [(xs, di, t_di), (B, G * N, t_G * t_N), (C, G * N, t_G * t_N)]).lets, each=False,
                         tail=rf",\quad x\in\mathbb{{R}}^{{{T.num(H)}\times{T.num(P)}}},\ B,C\in\mathbb{{R}}^{{{T.num(G)}\times{T.num(N)}}}"
                              rf"\ \text{{(one pair per group of {T.num(H // G)} heads)}}")),
        Step(expr=E.Let(dt, softplus), summary=True),
        Step(expr=E.Let(E.Sym("A", "A"), -E.exp(E.Weight("A_log", r"A_{\log}", (H,))), "one decay rate per head"), summary=True),
        Step(expr=E.Let(E.Sym("y", r"y^{h}_t"), scan(xs, B, C, dt, A_, E.Weight("D", "D"), E.Size(H, t_H), E.Size(G, t_G), E.Size(P, t_P), E.Size(N, t_N))),
             value="ssm_scan_output", summary=True),
        Step(expr=E.Let(E.Sym("yn", r"\hat y"), apply_child(part, gated, lambda a, b: rf"\operatorname{{GatedNorm}}({a},{b})", x=y, z=z)),
             value="ssm_premix", summary=True) if gated else
        Step(expr=E.Let(E.Sym("yn", r"\hat y"), y * E.silu(z), "(no norm: the gate alone)"), value="ssm_premix", summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta_{\mathrm{ssm}}"), linear_call(part, "out_proj", E.Sym("yn", r"\hat y"), r"W_{\mathrm{out}}"), maps=(di, d)),
             value="ssm_output", summary=True),
    ]
    part.note("state", {"heads": H, "head_dim": P, "state_size": N, "groups": G}, "the mixer's tensors")
    part.note("time_step_limit", f"from {low:g} to {high:g}" if high < math.inf else f"at least {low:g}, no upper bound",
              "the module's time_step_limit")
    return Chain(steps, [X], "out")


def _scalar(module, name: str) -> float | None:
    v = getattr(module, name, None)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _input_scale_steps(part: Part, di: int, gn: int, H: int, tiny: tuple) -> list[Step]:
    """The mixer's input times a constant it holds (Falcon-H1's ssm_in_multiplier), where it is not 1."""
    full, small = _scalar(part.full, "ssm_in_multiplier"), _scalar(part.tiny, "ssm_in_multiplier")
    if full is None or (full == 1 and small == 1):
        return []
    part.note("input_multiplier", full, "the module's ssm_in_multiplier")
    return [Step(expr=E.Let(E.Sym("x", "x"), E.Size(full, small) * E.Sym("x", "x"), "(the module's ssm_in_multiplier)"), summary=True)]


MUP_PARTS = ("z", "x", "B", "C", r"\delta")


def _part_scale_steps(part: Part, di: int, gn: int, H: int, tiny: tuple) -> list[Step]:
    """Each of the input projection's five parts (z, x, B, C, the time steps) times its own constant:
    where the mixer holds a buffer as wide as the projection (Falcon-H1's mup_vector), the constants are
    the config's ssm_multipliers laid over the parts' widths, and the proof checks that they reproduce it."""
    width = 2 * di + 2 * gn + H
    buffers = {n: b for n, b in part.tiny.named_buffers(recurse=False) if b.numel() == sum(2 * t for t in tiny[:2]) + tiny[2]}
    full_factors = getattr(part.ctx.full_config, "ssm_multipliers", None)
    tiny_factors = getattr(part.ctx.tiny_config, "ssm_multipliers", None)
    if not buffers or not full_factors or len(full_factors) != 5:
        return []
    t_di, t_gn, t_H = tiny
    widths = (di, di, gn, gn, H)
    part.note("part_multipliers", {"buffer": next(iter(buffers)), "parts": dict(zip(("z", "x", "B", "C", "dt"), map(float, full_factors))),
                                   "widths": dict(zip(("z", "x", "B", "C", "dt"), widths))},
              "the config's ssm_multipliers over the projection's parts; checked against the module on the preview run")
    sizes = [E.Size(w, t) for w, t in zip(widths, (t_di, t_di, t_gn, t_gn, t_H))]
    factors = [E.Size(float(f), float(t)) for f, t in zip(full_factors, tiny_factors)]
    p = E.Sym("p", "p")
    return [Step(expr=E.Let(p, p * part_constants(E.Size(width, sum(2 * t for t in tiny[:2]) + tiny[2]), *sizes, *factors)), summary=True)]


def _part_constants(width, *widths_and_factors):
    import torch

    widths, factors = widths_and_factors[:5], widths_and_factors[5:]
    return torch.cat([torch.full((int(w),), float(f), dtype=torch.float64) for w, f in zip(widths, factors)])


def _part_constants_tex(width, *widths_and_factors):
    parts = r",\ ".join(rf"{n}:{f}" for n, f in zip(MUP_PARTS, widths_and_factors[5:]))
    return rf"m,\quad m\in\mathbb{{R}}^{{{width}}}\ \text{{one constant per part }}({parts})"


# one constant per part of a projection (z, x, B, C, δ), each repeated over its part's columns (Falcon-H1's mup_vector)
part_constants = E.Function("part constants", _part_constants, _part_constants_tex)


def _grouped_rms(v, group, eps, groups):
    shape = v.shape
    grouped = v.reshape(*shape[:-1], shape[-1] // int(group), int(group))
    return (grouped / ((grouped ** 2).mean(-1, keepdim=True) + eps).sqrt()).reshape(shape)


def _grouped_rms_tex(v, group, eps, groups):
    return (rf"{v}_{{[k]}}\Big/\sqrt{{\tfrac{{1}}{{{group}}}\textstyle\sum_{{j\in[k]}} {v}_j^2+{eps}}}\quad\text{{for each of {groups} groups }}[k]"
            rf"\text{{ of {group} channels}}")


# each group of channels divided by its own root mean square (Mamba-2's gated norm, before its gain)
grouped_rms = E.Function("grouped RMS", _grouped_rms, _grouped_rms_tex)


def gated_norm(part: Part) -> Chain:
    """RMSNorm of y·SiLU(z) over groups of channels, then a gain: Mamba-2's norm before the output projection."""
    width = part.full.weight.shape[0]
    group = getattr(part.full, "group_size", width)
    tiny_group = getattr(part.tiny, "group_size", part.tiny.weight.shape[0])
    from atlas.proof.library import _eps

    eps, tiny_eps = _eps(part.full), _eps(part.tiny)
    z = Input("z", "z", "gate", "the gate the mixer split from its input projection")
    groups = width // group
    part.note("eps", eps, "the module's epsilon")
    part.note("groups", groups, "the module's group_size")
    v, vh = E.Sym("v", "v"), E.Sym("vh", r"\hat v")
    return Chain([
        Step(expr=E.Let(v, E.Sym("x", "y") * E.silu(E.Sym("z", "z"))), summary=True),
        Step(expr=E.Let(E.Sym("vh", r"\hat v_{[k]}"), grouped_rms(v, E.Size(group, tiny_group), E.Size(eps, tiny_eps),
                                                                  E.Size(groups, part.tiny.weight.shape[0] // tiny_group))), summary=True),
        Step(expr=E.Let(E.Sym("y", r"\hat y"), E.Weight("weight", "g", (width,)) * vh), summary=True),
    ], [Input("x", "y", "hidden_states", "the scan's output"), z], "y")


def _padded_conv(u, w, last, pad, channels, b=None):
    import torch

    K, pad = int(last) + 1, int(pad)
    zeros = u.new_zeros(u.shape[0], u.shape[1], pad)
    padded = torch.cat([zeros, u, zeros], dim=-1)
    n = padded.shape[-1] - K + 1
    out = sum(w[:, 0, k, None] * padded[:, :, k:k + n] for k in range(K))
    return out + b[:, None] if b is not None else out


def _padded_conv_tex(u, w, last, pad, channels, b=None):
    bias = f"+{b}_c" if b is not None else ""
    return (rf"\textstyle\sum_{{k=0}}^{{{last}}} {w}_{{c,k}}\,{u}_{{c,t-{pad}+k}}{bias},"
            rf"\quad c=1..{channels}\ \text{{(zero padding of {pad} each side)}}")


# a depthwise convolution over (batch, channels, positions), zero-padded on both sides as the module is built
padded_conv = E.Function("padded convolution", _padded_conv, _padded_conv_tex)


def depthwise_conv(part: Part) -> Chain:
    """A depthwise 1-D convolution over positions (input: batch × channels × positions), each channel
    with its own kernel, zero-padded on both sides as the module is built (the caller keeps the first T
    outputs, which makes it causal)."""
    channels, _, kernel = part.full.weight.shape
    t_channels, _, t_kernel = part.tiny.weight.shape
    pad, t_pad = part.full.padding[0], part.tiny.padding[0]
    bias = (E.Weight("bias", "b"),) if part.tiny.bias is not None else ()
    conv = padded_conv(E.Sym("x", "u"), E.Weight("weight", "w"), E.Size(kernel - 1, t_kernel - 1), E.Size(pad, t_pad),
                       E.Size(channels, t_channels), *bias)
    return Chain([Step(expr=E.Let(E.Sym("y", "y_{c,t}"), conv), summary=True)], [Input("x", "u", "input", "the channels by position")], "y")


def short_conv(part: Part) -> Chain:
    """A gated short convolution (LFM2): B, C and x from one projection, B·x convolved along the
    positions channel by channel, gated by C, projected back."""
    conv = part.full.conv
    width, kernel = conv.weight.shape[0], conv.kernel_size[0]
    t_width = part.tiny.conv.weight.shape[0]
    p, B, C, xt, u, c = E.Sym("p", "p"), E.Sym("B", "B"), E.Sym("C", "C"), E.Sym("xt", r"\tilde x"), E.Sym("u", "u"), E.Sym("c", "c")
    return Chain([
        Step(expr=E.Let(p, linear_call(part, "in_proj", E.Sym("x", "x"), r"W_{\mathrm{in}}"), maps=(width, 3 * width)),
             value="ssm_projections", summary=True),
        Step(expr=blocks(p, [(B, width, t_width), (C, width, t_width), (xt, width, t_width)])),
        Step(expr=E.Let(u, B * xt), summary=True),
        Step(expr=E.Let(E.Sym("c", "c_t"), causal_conv(part, u, "conv"), f"(depthwise causal convolution over {kernel} positions)"), summary=True),
        Step(expr=E.Let(E.Sym("y", "y"), C * c), summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta"), linear_call(part, "out_proj", E.Sym("y", "y"), r"W_{\mathrm{out}}"), maps=(width, width)),
             value="ssm_output", summary=True),
    ], [X], "out")


def mamba1(part: Part) -> Chain:
    """The first Mamba (Jamba's): a decay per channel and state entry, a low-rank time step projected up
    per channel, B and C shared by all channels, the gate applied to the scan's output."""
    from atlas.proof.library import norm_call

    m, t = part.full, part.tiny
    inner, N = m.A_log.shape
    d = m.out_proj.weight.shape[0]
    K = m.conv1d.kernel_size[0]
    R = m.dt_proj.weight.shape[1]
    t_inner, t_N = t.A_log.shape
    t_R = t.dt_proj.weight.shape[1]
    names = set(dict(t.named_children()))
    p, u, z, c = E.Sym("p", "p"), E.Sym("u", "u"), E.Sym("z", "z"), E.Sym("c", "c")
    delta, B, C, dt, y = E.Sym("q_dt", r"\delta"), E.Sym("B", "B"), E.Sym("C", "C"), E.Sym("dt", r"\Delta"), E.Sym("y", "y")
    parts = E.Sym("dbc", r"[\delta;\,B;\,C]")
    steps = [
        Step(expr=E.Let(p, linear_call(part, "in_proj", E.Sym("x", "x"), r"W_{\mathrm{in}}"), maps=(d, 2 * inner)),
             value="ssm_projections", summary=True),
        Step(expr=blocks(p, [(u, inner, t_inner), (z, inner, t_inner)])),
        Step(expr=E.Let(E.Sym("c", "c_t"), E.silu(causal_conv(part, u, "conv1d")), f"(depthwise causal convolution over {K} positions)"),
             summary=True),
        Step(expr=E.Let(parts, linear_call(part, "x_proj", c, "W_x"), maps=(inner, R + 2 * N)), summary=True),
        Step(expr=blocks(parts, [(delta, R, t_R), (B, N, t_N), (C, N, t_N)])),
    ]
    norms = [E.Let(v, norm_call(part, n, v)) for n, v in zip(("dt_layernorm", "b_layernorm", "c_layernorm"), (delta, B, C)) if n in names]
    if norms:
        steps.append(Step(expr=E.Lets(tuple(norms), each=False)))
    steps += [
        Step(expr=E.Let(dt, E.softplus(linear_call(part, "dt_proj", delta, r"W_\Delta")), maps=(R, inner)), summary=True),
        Step(expr=E.Let(E.Sym("A", "A"), -E.exp(E.Weight("A_log", r"A_{\log}", (inner, N)))), summary=True),
        Step(expr=E.Let(E.Sym("y", r"y^{j}_t"), scan_channels(c, B, C, dt, E.Sym("A", "A"), E.Weight("D", "D"), E.Size(N, t_N), E.Size(inner, t_inner))),
             summary=True),
        Step(expr=E.Let(E.Sym("yg", r"\hat y"), y * E.silu(z)), summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta_{\mathrm{ssm}}"), linear_call(part, "out_proj", E.Sym("yg", r"\hat y"), r"W_{\mathrm{out}}"), maps=(inner, d)),
             value="ssm_output", summary=True),
    ]
    part.note("state", {"channels": inner, "state_size": N, "time_step_rank": R}, "the mixer's tensors")
    return Chain(steps, [X], "out")
