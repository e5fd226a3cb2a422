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

from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, linear_call, sub
from atlas.proof.steps import Chain, Input, Step


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
    import torch

    full, tiny = _sizes(part.full), _sizes(part.tiny)
    d, di, H, P, G, N, K = full["width"], full["inner"], full["heads"], full["head_dim"], full["groups"], full["state"], full["kernel"]
    cd = full["conv_dim"]
    gated = _gated_norm_name(part.tiny)
    low, high = _limit(part.full)
    tiny_low, tiny_high = _limit(part.tiny)
    conv_bias = part.tiny.conv1d.bias is not None
    t_di, t_cd, t_H, t_P, t_G, t_N, t_K = tiny["inner"], tiny["conv_dim"], tiny["heads"], tiny["head_dim"], tiny["groups"], tiny["state"], tiny["kernel"]

    def split_projection(e):
        p = e["p"]
        return p[..., :t_di], p[..., t_di:t_di + t_cd], p[..., t_di + t_cd:]

    def convolve(e):
        # a depthwise causal convolution: channel c at position t mixes positions t-K+1..t of channel c
        u = e["xbc"]  # (batch, T, channels)
        w = e.w("conv1d.weight")[:, 0, :]  # (channels, K)
        padded = torch.cat([u.new_zeros(u.shape[0], t_K - 1, u.shape[2]), u], dim=1)
        out = sum(w[:, k] * padded[:, k:k + u.shape[1], :] for k in range(t_K))
        return out + e.w("conv1d.bias") if conv_bias else out

    def split_conv(e):
        c = e["c"]
        return c[..., :t_di], c[..., t_di:t_di + t_G * t_N], c[..., t_di + t_G * t_N:]

    def scan(e):
        x, B, C, dt, A = e["xs"], e["B"], e["C"], e["dt"], e["A"]
        b, T_ = x.shape[0], x.shape[1]
        x = x.reshape(b, T_, t_H, t_P)
        per_group = t_H // t_G
        B = B.reshape(b, T_, t_G, t_N).repeat_interleave(per_group, dim=2)  # each head reads its group's B and C
        C = C.reshape(b, T_, t_G, t_N).repeat_interleave(per_group, dim=2)
        S = x.new_zeros(b, t_H, t_P, t_N)
        ys = []
        for t in range(T_):
            decay = torch.exp(dt[:, t] * A)  # (batch, heads)
            S = decay[:, :, None, None] * S + (dt[:, t, :, None, None] * x[:, t, :, :, None]) * B[:, t, :, None, :]
            ys.append((S * C[:, t, :, None, :]).sum(-1) + e.w("D")[None, :, None] * x[:, t])
        return torch.stack(ys, dim=1).reshape(b, T_, t_H * t_P)

    clamp = ""
    if low > 0 or high < math.inf:
        bounds = rf"{T.num(low)}" + (rf",\,{T.num(high)}" if high < math.inf else r",\,\infty")
        clamp = rf",\ \text{{clamped to }}[{bounds}]"
    act = r"\operatorname{SiLU}"
    steps = _input_scale_steps(part, di, G * N, H, (t_di, t_G * t_N, t_H))
    steps += [
        Step(expr=E.Let(E.Sym("p", "p"), linear_call(part, "in_proj", E.Sym("x", "x"), r"W_{\mathrm{in}}"), maps=(d, 2 * di + 2 * G * N + H)),
             value="ssm_projections", summary=True),
        *_part_scale_steps(part, di, G * N, H, (t_di, t_G * t_N, t_H)),
        Step(rf"[z;\,u;\,\delta]=p,\quad z\in\mathbb{{R}}^{{{T.num(di)}}},\ u\in\mathbb{{R}}^{{{T.num(cd)}}},\ \delta\in\mathbb{{R}}^{{{T.num(H)}}}",
             ("z", "xbc", "delta"), split_projection, value=("ssm_gate", None, None)),
        Step(rf"c_t={act}\Big(\textstyle\sum_{{k=0}}^{{{K - 1}}} w_{{k}}\odot u_{{t-{K - 1}+k}}{'+b' if conv_bias else ''}\Big)"
             rf"\quad\text{{(depthwise causal convolution over {T.num(K)} positions, }}u_{{<0}}=0\text{{)}}",
             "c", lambda e: (lambda v: v * v.sigmoid())(convolve(e)), summary=True),
        Step(rf"[x;\,B;\,C]=c,\quad x\in\mathbb{{R}}^{{{T.num(H)}\times{T.num(P)}}},\ B,C\in\mathbb{{R}}^{{{T.num(G)}\times{T.num(N)}}}\ \text{{(one pair per group of {T.num(H // G)} heads)}}",
             ("xs", "B", "C"), split_conv),
        Step(rf"\Delta=\operatorname{{softplus}}(\delta+b_\Delta){clamp}", "dt",
             lambda e: torch.nn.functional.softplus(e["delta"] + e.w("dt_bias")).clamp(min=tiny_low, max=tiny_high), summary=True),
        Step(expr=E.Let(E.Sym("A", "A"), -E.exp(E.Weight("A_log", r"A_{\log}", (H,))), "one decay rate per head"), summary=True),
        Step(rf"S^{{h}}_t=e^{{\Delta^{{h}}_t A^{{h}}}}S^{{h}}_{{t-1}}+\Delta^{{h}}_t\,x^{{h}}_t\,(B^{{g(h)}}_t)^{{\top}},\quad "
             rf"y^{{h}}_t=S^{{h}}_t\,C^{{g(h)}}_t+D^{{h}}x^{{h}}_t,\quad S^{{h}}\in\mathbb{{R}}^{{{T.num(P)}\times{T.num(N)}}},\ S^{{h}}_{{-1}}=0",
             "y", scan, value="ssm_scan_output", summary=True),
        Step(rf"\hat y=\operatorname{{GatedNorm}}(y,z)", "yn", sub(part, gated, x="y", z="z"), value="ssm_premix", summary=True) if gated else
        Step(r"\hat y=y\odot\operatorname{SiLU}(z)\quad\text{(no norm: the gate alone)}", "yn", lambda e: e["y"] * (e["z"] * e["z"].sigmoid()),
             value="ssm_premix", summary=True),
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
    return [Step(rf"x\leftarrow{T.num(full)}\,x\quad\text{{(the module's ssm\_in\_multiplier)}}", "x", lambda e: small * e["x"], summary=True)]


MUP_PARTS = ("z", "x", "B", "C", r"\delta")


def _part_scale_steps(part: Part, di: int, gn: int, H: int, tiny: tuple) -> list[Step]:
    """Each of the input projection's five parts (z, x, B, C, the time steps) times its own constant:
    where the mixer holds a buffer as wide as the projection (Falcon-H1's mup_vector), the constants are
    the config's ssm_multipliers laid over the parts' widths, and the proof checks that they reproduce it."""
    import torch

    width = 2 * di + 2 * gn + H
    buffers = {n: b for n, b in part.tiny.named_buffers(recurse=False) if b.numel() == sum(2 * t for t in tiny[:2]) + tiny[2]}
    full_factors = getattr(part.ctx.full_config, "ssm_multipliers", None)
    tiny_factors = getattr(part.ctx.tiny_config, "ssm_multipliers", None)
    if not buffers or not full_factors or len(full_factors) != 5:
        return []
    t_di, t_gn, t_H = tiny

    def scale(e):
        widths = (t_di, t_di, t_gn, t_gn, t_H)
        vector = torch.cat([torch.full((w,), float(f), dtype=e["p"].dtype) for w, f in zip(widths, tiny_factors)])
        return e["p"] * vector

    widths = (di, di, gn, gn, H)
    parts = r",\ ".join(rf"{n}:{T.num(float(f))}" for n, f in zip(MUP_PARTS, full_factors))
    part.note("part_multipliers", {"buffer": next(iter(buffers)), "parts": dict(zip(("z", "x", "B", "C", "dt"), map(float, full_factors))),
                                   "widths": dict(zip(("z", "x", "B", "C", "dt"), widths))},
              "the config's ssm_multipliers over the projection's parts; checked against the module on the preview run")
    return [Step(rf"p\leftarrow p\odot m,\quad m\in\mathbb{{R}}^{{{T.num(width)}}}\ \text{{one constant per part }}({parts})", "p", scale, summary=True)]


def gated_norm(part: Part) -> Chain:
    """RMSNorm of y·SiLU(z) over groups of channels, then a gain: Mamba-2's norm before the output projection."""
    width = part.full.weight.shape[0]
    group = getattr(part.full, "group_size", width)
    tiny_group = getattr(part.tiny, "group_size", part.tiny.weight.shape[0])
    from atlas.proof.library import _eps

    eps, tiny_eps = _eps(part.full), _eps(part.tiny)
    z = Input("z", "z", "gate", "the gate the mixer split from its input projection")

    def normalize(e):
        v = e["v"]
        shape = v.shape
        grouped = v.reshape(*shape[:-1], shape[-1] // tiny_group, tiny_group)
        grouped = grouped / ((grouped ** 2).mean(-1, keepdim=True) + tiny_eps).sqrt()
        return grouped.reshape(shape)

    groups = width // group
    part.note("eps", eps, "the module's epsilon")
    part.note("groups", groups, "the module's group_size")
    return Chain([
        Step(r"v=y\odot\operatorname{SiLU}(z)", "v", lambda e: e["x"] * (e["z"] * e["z"].sigmoid()), summary=True),
        Step(rf"\hat v_{{[k]}}=v_{{[k]}}\Big/\sqrt{{\tfrac{{1}}{{{T.num(group)}}}\textstyle\sum_{{j\in[k]}} v_j^2+{T.num(eps)}}}\quad\text{{for each of {T.num(groups)} groups }}[k]"
             rf"\text{{ of {T.num(group)} channels}}", "vh", normalize),
        Step(rf"\hat y=g\odot\hat v,\quad g\in\mathbb{{R}}^{{{T.num(width)}}}", "y", lambda e: e.w("weight") * e["vh"], summary=True),
    ], [Input("x", "y", "hidden_states", "the scan's output"), z], "y")


def depthwise_conv(part: Part) -> Chain:
    """A depthwise 1-D convolution over positions (input: batch × channels × positions), each channel
    with its own kernel, zero-padded on both sides as the module is built (the caller keeps the first T
    outputs, which makes it causal)."""
    import torch

    channels, _, kernel = part.full.weight.shape
    pad = part.tiny.padding[0]
    bias = part.tiny.bias is not None

    def convolve(e):
        u = e["x"]
        zeros = u.new_zeros(u.shape[0], u.shape[1], pad)
        padded = torch.cat([zeros, u, zeros], dim=-1)
        n = padded.shape[-1] - part.tiny.kernel_size[0] + 1
        w = e.w("weight")[:, 0, :]
        out = sum(w[:, k, None] * padded[:, :, k:k + n] for k in range(part.tiny.kernel_size[0]))
        return out + e.w("bias")[:, None] if bias else out

    return Chain([Step(rf"y_{{c,t}}=\textstyle\sum_{{k=0}}^{{{kernel - 1}}} w_{{c,k}}\,u_{{c,t-{pad}+k}}{'+b_c' if bias else ''},"
                       rf"\quad c=1..{T.num(channels)}\ \text{{(zero padding of {pad} each side)}}", "y", convolve, summary=True)],
                 [Input("x", "u", "input", "the channels by position")], "y")


def short_conv(part: Part) -> Chain:
    """A gated short convolution (LFM2): B, C and x from one projection, B·x convolved along the
    positions channel by channel, gated by C, projected back."""
    import torch

    conv = part.full.conv
    width, kernel = conv.weight.shape[0], conv.kernel_size[0]
    t_kernel = part.tiny.conv.kernel_size[0]
    bias = part.tiny.conv.bias is not None

    def convolve(e):
        u = e["u"]  # (batch, T, channels)
        w = e.w("conv.weight")[:, 0, :]
        padded = torch.cat([u.new_zeros(u.shape[0], t_kernel - 1, u.shape[2]), u], dim=1)
        out = sum(w[:, k] * padded[:, k:k + u.shape[1], :] for k in range(t_kernel))
        return out + e.w("conv.bias") if bias else out

    return Chain([
        Step(expr=E.Let(E.Sym("p", "p"), linear_call(part, "in_proj", E.Sym("x", "x"), r"W_{\mathrm{in}}"), maps=(width, 3 * width)),
             value="ssm_projections", summary=True),
        Step(rf"[B;\,C;\,\tilde x]=p,\quad B,C,\tilde x\in\mathbb{{R}}^{{{T.num(width)}}}", ("B", "C", "xt"), lambda e: e["p"].chunk(3, dim=-1)),
        Step(r"u=B\odot\tilde x", "u", lambda e: e["B"] * e["xt"], summary=True),
        Step(rf"c_t=\textstyle\sum_{{k=0}}^{{{kernel - 1}}} w_{{k}}\odot u_{{t-{kernel - 1}+k}}{'+b' if bias else ''}"
             rf"\quad\text{{(depthwise causal convolution over {kernel} positions, }}u_{{<0}}=0\text{{)}}", "c", convolve, summary=True),
        Step(r"y=C\odot c", "y", lambda e: e["C"] * e["c"], summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta"), linear_call(part, "out_proj", E.Sym("y", "y"), r"W_{\mathrm{out}}"), maps=(width, width)),
             value="ssm_output", summary=True),
    ], [X], "out")


def mamba1(part: Part) -> Chain:
    """The first Mamba (Jamba's): a decay per channel and state entry, a low-rank time step projected up
    per channel, B and C shared by all channels, the gate applied to the scan's output."""
    import torch

    m, t = part.full, part.tiny
    inner, N = m.A_log.shape
    d = m.out_proj.weight.shape[0]
    K = m.conv1d.kernel_size[0]
    R = m.dt_proj.weight.shape[1]
    t_inner, t_N = t.A_log.shape
    t_R = t.dt_proj.weight.shape[1]
    t_K = t.conv1d.kernel_size[0]
    conv_bias = t.conv1d.bias is not None
    dt_bias = t.dt_proj.bias is not None
    names = set(dict(t.named_children()))
    norms = [n for n in ("dt_layernorm", "b_layernorm", "c_layernorm") if n in names]

    def convolve(e):
        u = e["u"]
        w = e.w("conv1d.weight")[:, 0, :]
        padded = torch.cat([u.new_zeros(u.shape[0], t_K - 1, u.shape[2]), u], dim=1)
        out = sum(w[:, k] * padded[:, k:k + u.shape[1], :] for k in range(t_K))
        out = out + e.w("conv1d.bias") if conv_bias else out
        return out * out.sigmoid()

    def scan(e):
        x, B, C, dt, A = e["c"], e["B"], e["C"], e["dt"], e["A"]
        S = x.new_zeros(x.shape[0], t_inner, t_N)
        ys = []
        for step in range(x.shape[1]):
            S = torch.exp(dt[:, step, :, None] * A) * S + (dt[:, step] * x[:, step])[:, :, None] * B[:, step, None, :]
            ys.append((S * C[:, step, None, :]).sum(-1) + e.w("D") * x[:, step])
        return torch.stack(ys, dim=1)

    steps = [
        Step(expr=E.Let(E.Sym("p", "p"), linear_call(part, "in_proj", E.Sym("x", "x"), r"W_{\mathrm{in}}"), maps=(d, 2 * inner)),
             value="ssm_projections", summary=True),
        Step(rf"[u;\,z]=p,\quad u,z\in\mathbb{{R}}^{{{T.num(inner)}}}", ("u", "z"), lambda e: e["p"].chunk(2, dim=-1)),
        Step(rf"c_t=\operatorname{{SiLU}}\Big(\textstyle\sum_{{k=0}}^{{{K - 1}}} w_{{k}}\odot u_{{t-{K - 1}+k}}{'+b' if conv_bias else ''}\Big)"
             rf"\quad\text{{(depthwise causal convolution over {K} positions)}}", "c", convolve, summary=True),
        Step(rf"[\delta;\,B;\,C]=c\,W_x^{{\top}},\quad \delta\in\mathbb{{R}}^{{{T.num(R)}}},\ B,C\in\mathbb{{R}}^{{{T.num(N)}}}", ("q_dt", "B", "C"),
             lambda e, f=sub(part, "x_proj", x="c"): f(e).split([t_R, t_N, t_N], dim=-1), sub=f"{part.id}.x_proj"),
    ]
    if norms:
        subs = {n: sub(part, n, x=v) for n, v in zip(("dt_layernorm", "b_layernorm", "c_layernorm"), ("q_dt", "B", "C")) if n in norms}
        steps.append(Step(r"\delta\leftarrow\operatorname{Norm}_\delta(\delta),\ B\leftarrow\operatorname{Norm}_B(B),\ C\leftarrow\operatorname{Norm}_C(C)",
                          ("q_dt", "B", "C"), lambda e: tuple(subs[n](e) if n in subs else e[v] for n, v in
                                                             zip(("dt_layernorm", "b_layernorm", "c_layernorm"), ("q_dt", "B", "C"))),
                          sub=f"{part.id}.{norms[0]}"))
    plus_bias = r"+b_\Delta" if dt_bias else ""
    steps += [
        Step(rf"\Delta=\operatorname{{softplus}}(\delta\,W_\Delta^{{\top}}{plus_bias}){T.maps(R, inner)}",
             "dt", lambda e: torch.nn.functional.softplus(e["q_dt"] @ e.w("dt_proj.weight").T + (e.w("dt_proj.bias") if dt_bias else 0)), summary=True),
        Step(expr=E.Let(E.Sym("A", "A"), -E.exp(E.Weight("A_log", r"A_{\log}", (inner, N)))), summary=True),
        Step(rf"S^{{j}}_t=e^{{\Delta^{{j}}_t A^{{j}}}}\odot S^{{j}}_{{t-1}}+\Delta^{{j}}_t c^{{j}}_t B_t,\quad y^{{j}}_t=S^{{j}}_t\cdot C_t+D^{{j}}c^{{j}}_t,"
             rf"\quad S^{{j}}\in\mathbb{{R}}^{{{T.num(N)}}},\ j=1..{T.num(inner)},\ S_{{-1}}=0", "y", scan, summary=True),
        Step(r"\hat y=y\odot\operatorname{SiLU}(z)", "yg", lambda e: e["y"] * (e["z"] * e["z"].sigmoid()), summary=True),
        Step(expr=E.Let(E.Sym("out", r"\Delta_{\mathrm{ssm}}"), linear_call(part, "out_proj", E.Sym("yg", r"\hat y"), r"W_{\mathrm{out}}"), maps=(inner, d)),
             value="ssm_output", summary=True),
    ]
    part.note("state", {"channels": inner, "state_size": N, "time_step_rank": R}, "the mixer's tensors")
    return Chain(steps, [X], "out")
