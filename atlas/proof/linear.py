"""Linear attention with a recurrent state: the gated delta rule, its short convolution, its gated norm.

A gated DeltaNet mixer projects queries, keys, values, an output gate z, a write strength beta and a
decay from the stream; runs the queries, keys and values through a short causal depthwise
convolution; and then carries one key × value matrix per value head from position to position:

    S_t = exp(g_t) S_{t-1}                          (the decay, at most 1)
    S_t = S_t + k_t (beta_t (v_t - S_t^T k_t))^T     (the delta rule: move the value stored under k_t towards v_t)
    o_t = S_t^T q_t                                   (read with the query)

The steps here write that recurrence out position by position with plain tensor arithmetic, on the
tiny model's weights, and must reproduce what transformers' chunked implementation returns (the
read-out and the final state). Every setting comes from the module's tensors and sizes.
"""

from __future__ import annotations

import inspect

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, linear_call, linear_dims, sub
from atlas.proof.steps import Chain, Input, Step

# each value head's gated norm output, the heads joined, and the module's output
_NORMED, _JOINED, _DELTA = E.Sym("n", "n_h"), E.Sym("nf", "n"), E.Sym("y", r"\Delta")


def is_gated_norm(module) -> bool:
    """A norm whose forward takes a second tensor, the gate (RMSNormGated): one gain vector, no children."""
    own = dict(module.named_parameters(recurse=False))
    if list(module.children()) or set(own) != {"weight"} or own["weight"].dim() != 1:
        return False
    positional = [p for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) == 2


def is_depthwise_conv(module) -> bool:
    import torch

    return isinstance(module, torch.nn.Conv1d) and module.groups == module.in_channels == module.out_channels


def _eps(module) -> float:
    return next(getattr(module, a) for a in ("variance_epsilon", "eps", "epsilon") if isinstance(getattr(module, a, None), float))


GATE_ACTIVATIONS = {"silu": E.silu, "sigmoid": E.sigmoid}  # the gate's activation, each defined once in atlas.proof.expr


def gated_norm(part: Part) -> Chain:
    """RMS-normalize each head's vector, scale by the gain, multiply by an activation of the gate."""
    width = part.full.weight.shape[-1]
    eps = E.Size(_eps(part.full), _eps(part.tiny))
    gate_name = [p for p in inspect.signature(part.tiny.forward).parameters][1]
    inputs = [X, Input("z", "z", gate_name, "the gate, one value per channel")]
    part.note("eps", eps.full, "the module's epsilon")
    x, rho, xhat, z, g = E.Sym("x", "x"), E.Sym("rho", r"\rho", False), E.Sym("xhat", r"\hat x"), E.Sym("z", "z"), E.Weight("weight", "g", (width,))

    def variant(act: str, offset: bool):
        def build() -> Chain:
            return Chain([
                Step(expr=E.Let(rho, E.Mean(x ** 2, width))),
                Step(expr=E.Let(xhat, x / E.sqrt(rho + eps))),
                Step(expr=E.Let(E.Sym("y", "y"), ((1 + g) if offset else g) * xhat * GATE_ACTIVATIONS[act](z)), summary=True),
            ], inputs, "y")

        return build

    return part.choose("gated_norm", {"silu_gain": variant("silu", False), "silu_offset": variant("silu", True),
                                      "sigmoid_gain": variant("sigmoid", False), "sigmoid_offset": variant("sigmoid", True)})


def depthwise_conv(part: Part) -> Chain:
    """A Conv1d with one filter per channel, over (batch, channels, positions), causal by its padding."""
    channels, _, width = part.full.weight.shape
    part.note("kernel", width, "the weight's last axis")

    def fn(e):  # the module's own layout: (batch, channels, positions)
        return causal_conv(e["x"].transpose(1, 2), e.w("weight")).transpose(1, 2)

    return Chain([Step(rf"y_{{c,t}}=\textstyle\sum_{{j=0}}^{{{width - 1}}} w_{{c,j}}\,x_{{c,t-{width - 1}+j}},\quad c=1..{T.num(channels)}",
                       "y", fn, summary=True)], [X], "y")


def causal_conv(c, w):
    """Each channel of c (batch, positions, channels) filtered by its own kernel w (channels, 1, K),
    looking only at the current and the K - 1 previous positions (zeros before the first)."""
    import torch

    K = w.shape[-1]
    padded = torch.nn.functional.pad(c.transpose(1, 2), (K - 1, 0))  # (B, C, K - 1 + T)
    out = sum(padded[..., j:j + c.shape[1]] * w[:, 0, j, None] for j in range(K))
    return out.transpose(1, 2)


def l2_normalized(x, eps: float = 1e-6):
    return x / ((x * x).sum(-1, keepdim=True) + eps).sqrt()


def delta_rule(q, k, v, g, beta):
    """The gated delta rule over positions. q, k: (B, T, H, dk); v: (B, T, H, dv); g, beta: (B, T, H)
    or, for a decay per key channel, g: (B, T, H, dk). Returns the read-out (B, T, H, dv) and the
    final state (B, H, dk, dv)."""
    import torch

    B, T_, H, dk = k.shape
    dv = v.shape[-1]
    S = torch.zeros(B, H, dk, dv, dtype=v.dtype)
    out = []
    for t in range(T_):
        decay = g[:, t].exp()
        S = S * (decay[..., None, None] if decay.dim() == 2 else decay[..., None])
        kt, vt, qt = k[:, t], v[:, t], q[:, t]
        remembered = (S * kt[..., None]).sum(-2)  # S^T k: what the state holds under this key
        delta = (vt - remembered) * beta[:, t, :, None]
        S = S + kt[..., None] * delta[..., None, :]
        out.append((S * qt[..., None]).sum(-2))
    return torch.stack(out, dim=1), S


def _sizes(m) -> tuple[int, int, int, int]:
    return m.num_k_heads, m.num_v_heads, m.head_k_dim, m.head_v_dim


def gated_delta_net(part: Part) -> Chain:
    """Qwen3-Next's gated DeltaNet: fused projections grouped by key head, a short convolution, the
    per-head decay and write strength, the delta rule, a gated RMSNorm per head, the output projection."""
    import torch
    import torch.nn.functional as F

    m, tm = part.full, part.tiny
    names = set(dict(tm.named_children()))
    if {"in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "norm", "out_proj"} <= names:
        return _gated_delta_net(part, grouped=False)
    if not {"in_proj_qkvz", "in_proj_ba", "conv1d", "norm", "out_proj"} <= names:
        from atlas.errors import AtlasError

        raise AtlasError(f"family {part.ctx.family.name}", f"component {part.id}",
                         f"no chain of steps describes this linear-attention layout ({', '.join(sorted(names))}) yet: add it to atlas/proof/linear.py")
    return _gated_delta_net(part, grouped=True)


def _gated_delta_net(part: Part, grouped: bool) -> Chain:
    """``grouped``: one fused projection laid out key head by key head, [q; k; v; z] in each, and one
    for [b; a] likewise (Qwen3-Next); otherwise separate projections, q, k and v side by side in one
    (Qwen3.5)."""

    m, tm = part.full, part.tiny
    hk, hv, dk, dv = _sizes(m)
    thk, thv, tdk, tdv = _sizes(tm)
    r, tr = hv // hk, thv // thk
    width = linear_dims(m.in_proj_qkvz if grouped else m.in_proj_qkv)[0]
    K = m.conv1d.weight.shape[-1]
    Q, Kk, V = T.q("q"), T.k("k"), T.v("v")
    per_key_head = "(2" + r"\cdot" + T.num(dk) + "+2" + r"\cdot" + str(r) + r"\cdot" + T.num(dv) + ")"
    gates_per_key_head = "2" + r"\cdot" + str(r)
    qkv_width = "2" + r"\cdot" + T.times(hk, dk) + "+" + T.times(hv, dv)

    def split(e):
        B, T_ = e["x"].shape[:2]
        p = e["p"].view(B, T_, thk, 2 * tdk + 2 * tr * tdv)
        q, k, v, z = p.split([tdk, tdk, tr * tdv, tr * tdv], dim=-1)
        ba = e["ba"].view(B, T_, thk, 2 * tr)
        b, a = ba.split([tr, tr], dim=-1)
        return (q.reshape(B, T_, -1), k.reshape(B, T_, -1), v.reshape(B, T_, -1), z.reshape(B, T_, thv, tdv),
                b.reshape(B, T_, thv), a.reshape(B, T_, thv))

    def conv(e):
        c = _convolved_qkv(e, tm)
        B, T_ = c.shape[:2]
        q, k, v = c.split([thk * tdk, thk * tdk, thv * tdv], dim=-1)
        return q.view(B, T_, thk, tdk), k.view(B, T_, thk, tdk), v.view(B, T_, thv, tdv)

    def prepare(e):
        q, k = l2_normalized(e["Qc"]), l2_normalized(e["Kc"])
        q = q / tdk ** 0.5
        return q.repeat_interleave(tr, dim=2), k.repeat_interleave(tr, dim=2)

    def split_plain(e):
        B, T_ = e["x"].shape[:2]
        q, k, v = e["p"].split([thk * tdk, thk * tdk, thv * tdv], dim=-1)
        return q, k, v, e["zp"].view(B, T_, thv, tdv)

    if grouped:
        projections = [
            Step(rf"[{Q};{Kk};{V};z]=x W_{{qkvz}}^{{\top}}{T.maps(width, T.times(hk, per_key_head))}", "p", sub(part, "in_proj_qkvz")),
            Step(rf"[b;a]=x W_{{ba}}^{{\top}}{T.maps(width, T.times(hk, gates_per_key_head))}", "ba", sub(part, "in_proj_ba")),
            Step(rf"\text{{per key head: }}{Q},{Kk}\in\mathbb{{R}}^{{{T.num(dk)}}},\ {V},z\in\mathbb{{R}}^{{{r}\times{T.num(dv)}}},\ b,a\in\mathbb{{R}}^{{{r}}}"
                 rf"\quad\text{{({T.num(hk)} key heads, {T.num(hv)} value heads)}}", ("q", "k", "v", "z", "b", "a"), split),
        ]
    else:
        projections = [
            Step(rf"[{Q};{Kk};{V}]=x W_{{qkv}}^{{\top}}{T.maps(width, qkv_width)}", "p", sub(part, "in_proj_qkv")),
            Step(rf"z=x W_z^{{\top}}{T.maps(width, T.times(hv, dv))}", "zp", sub(part, "in_proj_z")),
            Step(rf"b=x W_b^{{\top}}{T.maps(width, hv)}", "b", sub(part, "in_proj_b")),
            Step(rf"a=x W_a^{{\top}}{T.maps(width, hv)}", "a", sub(part, "in_proj_a")),
            Step(rf"{Q},{Kk},{V}\ \text{{the column blocks of widths }}{T.num(hk * dk)},{T.num(hk * dk)},{T.num(hv * dv)};\ z\ \text{{per value head}}",
                 ("q", "k", "v", "z"), split_plain),
        ]
    steps = [
        *projections,
        Step(rf"[{Q};{Kk};{V}]_t\leftarrow\operatorname{{SiLU}}\big(\textstyle\sum_{{j=0}}^{{{K - 1}}} w_j\odot[{Q};{Kk};{V}]_{{t-{K - 1}+j}}\big)"
             rf"\quad\text{{a causal depthwise convolution, {K} positions, one filter per channel}}", ("Qc", "Kc", "Vc"), conv,
             value=("linear_attention_queries", "linear_attention_keys", "linear_attention_values"), summary=True),
        # the decay and the write strength, each printed from the expression that computes it
        Step(expr=E.Let(E.Sym("g", "g"), -E.exp(E.Weight("A_log", r"A_{\log}")) * E.softplus(E.Sym("a", "a") + E.Weight("dt_bias", r"\delta")),
                        "per token and value head"), value="linear_attention_decay", summary=True),
        Step(expr=E.Let(E.Sym("beta", r"\beta"), E.sigmoid(E.Sym("b", "b"))), value="linear_attention_beta", summary=True),
        Step(rf"\hat{{{Q}}}=\frac{{{Q}}}{{\lVert {Q}\rVert\sqrt{{{T.num(dk)}}}}},\ \hat{{{Kk}}}=\frac{{{Kk}}}{{\lVert {Kk}\rVert}}"
             rf"\quad\text{{each key head serves {r} value heads}}", ("qh", "kh"), prepare),
        Step(rf"S_t=e^{{g_t}}S_{{t-1}},\ \ S_t\leftarrow S_t+\hat{{{Kk}}}_t\big(\beta_t({V}_t-S_t^{{\top}}\hat{{{Kk}}}_t)\big)^{{\top}},\ \ o_t=S_t^{{\top}}\hat{{{Q}}}_t,"
             rf"\quad S\in\mathbb{{R}}^{{{T.num(dk)}\times{T.num(dv)}}}\text{{ per value head}},\ S_0=0", ("O", "S"),
             lambda e: delta_rule(e["qh"], e["kh"], e["Vc"], e["g"], e["beta"]),
             value=("linear_attention_head_outputs", "linear_attention_state"), summary=True),
        Step(r"n=\operatorname{NormGated}(o,z)\quad\text{per value head}", "n", sub(part, "norm", x="O", z="z"), summary=True),
        Step(expr=E.Let(_JOINED, A.JoinedHeads(_NORMED, hv, T.times(hv, dv))), summary=True),
        Step(expr=E.Let(_DELTA, linear_call(part, "out_proj", _JOINED, "W_O"), maps=(hv * dv, m.out_proj.weight.shape[0])),
             value="attention_output", summary=True),
    ]
    part.note("heads", {"key": hk, "value": hv, "key_dim": dk, "value_dim": dv}, "the module's sizes")
    part.note("conv_kernel", K, "the convolution's weight")
    part.note("state", f"{hv} × {dk} × {dv} per sequence", "the module's sizes: one key × value matrix per value head")
    return Chain(steps, [X], "y")


def is_decay_gate(module) -> bool:
    """A module that turns the stream into a decay (Kimi delta attention's forget gate): it holds the
    decay rates A_log and offsets dt_bias itself, has linear children and no convolution."""
    own = dict(module.named_parameters(recurse=False))
    return {"A_log", "dt_bias"} <= set(own) and bool(list(module.children())) and not any(
        is_depthwise_conv(c) for c in module.children())


def _softplus(x):
    import torch

    return torch.where(x > 20.0, x, torch.log1p(x.exp()))


def decay_gate(part: Part) -> Chain:
    """g = -e^{A_h} softplus(x W_a W_b + delta): a low-rank projection to one decay per key channel."""
    m, tm = part.full, part.tiny
    h, d = m.num_heads, m.head_dim
    th, td = tm.num_heads, tm.head_dim
    width = linear_dims(m.f_a_proj)[0]
    rank = linear_dims(m.f_a_proj)[1]

    def decay(e):
        B, T_ = e["f"].shape[:2]
        f = (e["f"] + e.w("dt_bias").view(1, 1, -1)).view(B, T_, th, td)
        return -e.w("A_log").exp() * _softplus(f)

    part.note("heads", {"heads": h, "channels": d}, "the module's sizes")
    return Chain([
        Step(rf"a=x W_a^{{\top}}{T.maps(width, rank)}", "a", sub(part, "f_a_proj")),
        Step(rf"f=a W_b^{{\top}}{T.maps(rank, T.times(h, d))}", "f", sub(part, "f_b_proj", x="a")),
        Step(rf"g_{{t,h,c}}=-e^{{A_h}}\operatorname{{softplus}}(f_{{t,h,c}}+\delta_{{h,c}}),\quad A\in\mathbb{{R}}^{{{T.num(h)}}},\ \delta\in\mathbb{{R}}^{{{T.times(h, d)}}}",
             "g", decay, value="linear_attention_channel_decay", summary=True),
    ], [X], "g")


def kimi_delta_attention(part: Part) -> Chain:
    """Kimi delta attention: separate q/k/v projections through a short convolution, a decay per key
    channel from a low-rank forget gate, a write strength per head, the delta rule, a gated RMSNorm
    whose gate is a second low-rank projection, the output projection."""
    import torch

    m, tm = part.full, part.tiny
    h, d, th, td = m.num_heads, m.head_dim, tm.num_heads, tm.head_dim
    width = linear_dims(m.q_proj)[0]
    rank = linear_dims(m.g_a_proj)[1]
    K = m.conv1d.weight.shape[-1]
    Q, Kk, V = T.q("q"), T.k("k"), T.v("v")

    def conv(e):
        c = _convolved_qkv(e, tm)
        B, T_ = c.shape[:2]
        return tuple(x.reshape(B, T_, th, td) for x in c.split([th * td] * 3, dim=-1))

    def prepare(e):
        return l2_normalized(e["Qc"]) / td ** 0.5, l2_normalized(e["Kc"])

    steps = [
        Step(rf"{Q}=x W_Q^{{\top}},\ {Kk}=x W_K^{{\top}},\ {V}=x W_V^{{\top}}{T.maps(width, T.times(h, d))}", "q", sub(part, "q_proj")),
        Step(rf"{Kk}=x W_K^{{\top}}", "k", sub(part, "k_proj")),
        Step(rf"{V}=x W_V^{{\top}}", "v", sub(part, "v_proj")),
        Step(rf"[{Q};{Kk};{V}]_t\leftarrow\operatorname{{SiLU}}\big(\textstyle\sum_{{j=0}}^{{{K - 1}}} w_j\odot[{Q};{Kk};{V}]_{{t-{K - 1}+j}}\big)"
             rf"\quad\text{{a causal depthwise convolution, {K} positions, one filter per channel}}", ("Qc", "Kc", "Vc"), conv,
             value=("linear_attention_queries", "linear_attention_keys", "linear_attention_values"), summary=True),
        Step(r"g=\operatorname{ForgetGate}(x)\quad\text{one decay per head and key channel}", "g", sub(part, "forget_gate"),
             value="linear_attention_channel_decay", summary=True),
        Step(rf"\beta=\sigma(x W_\beta^{{\top}}){T.maps(width, h)}", "beta", lambda e, f=sub(part, "b_proj"): f(e).sigmoid(),
             value="linear_attention_beta"),
        Step(rf"\hat{{{Q}}}=\frac{{{Q}}}{{\lVert {Q}\rVert\sqrt{{{T.num(d)}}}}},\ \hat{{{Kk}}}=\frac{{{Kk}}}{{\lVert {Kk}\rVert}}", ("qh", "kh"), prepare),
        Step(rf"S_t=\operatorname{{diag}}(e^{{g_t}})S_{{t-1}},\ \ S_t\leftarrow S_t+\hat{{{Kk}}}_t\big(\beta_t({V}_t-S_t^{{\top}}\hat{{{Kk}}}_t)\big)^{{\top}},\ \ o_t=S_t^{{\top}}\hat{{{Q}}}_t,"
             rf"\quad S\in\mathbb{{R}}^{{{T.num(d)}\times{T.num(d)}}}\text{{ per head}},\ S_0=0", ("O", "S"),
             lambda e: delta_rule(e["qh"], e["kh"], e["Vc"], e["g"], e["beta"]),
             value=("linear_attention_head_outputs", "linear_attention_state"), summary=True),
        Step(rf"z=x W_{{za}}^{{\top}}W_{{zb}}^{{\top}}{T.maps(width, rank)}\to{T.times(h, d)}\quad\text{{the output gate, low rank}}", "za", sub(part, "g_a_proj")),
        Step(r"z\ \text{per head}", "z", lambda e, f=sub(part, "g_b_proj", x="za"): f(e).view(*e["za"].shape[:2], th, td)),
        Step(r"n=\operatorname{NormGated}(o,z)\quad\text{per head}", "n", sub(part, "o_norm", x="O", z="z"), summary=True),
        Step(expr=E.Let(_JOINED, A.JoinedHeads(_NORMED, h, T.times(h, d))), summary=True),
        Step(expr=E.Let(_DELTA, linear_call(part, "o_proj", _JOINED, "W_O"), maps=(h * d, m.o_proj.weight.shape[0])),
             value="attention_output", summary=True),
    ]
    steps[0].tex = rf"{Q}=x W_Q^{{\top}}{T.maps(width, T.times(h, d))}"
    steps[1].tex = rf"{Kk}=x W_K^{{\top}}{T.maps(width, T.times(h, d))}"
    steps[2].tex = rf"{V}=x W_V^{{\top}}{T.maps(width, T.times(h, d))}"
    steps[-5].tex = rf"z=x W_{{za}}^{{\top}}{T.maps(width, rank)}\quad\text{{the output gate, low rank}}"
    steps[-4].tex = rf"z\leftarrow z W_{{zb}}^{{\top}}{T.maps(rank, T.times(h, d))}\ \text{{split per head}}"
    steps[-4].sub = f"{part.id}.g_b_proj"
    steps[5].sub = f"{part.id}.b_proj"
    part.note("heads", {"key": h, "value": h, "key_dim": d, "value_dim": d}, "the module's sizes")
    part.note("conv_kernel", K, "the convolution's weight")
    part.note("decay", "per key channel", "the forget gate gives one decay per head and channel")
    part.note("state", f"{h} × {d} × {d} per sequence", "the module's sizes: one key × value matrix per head")
    return Chain(steps, [X], "y")


def linear_attention(part: Part) -> Chain:
    """The chain of a linear-attention mixer, by its layout: fused projections grouped by key head
    (gated DeltaNet) or separate ones with a forget gate (Kimi delta attention)."""
    names = set(dict(part.tiny.named_children()))
    if {"q_proj", "k_proj", "v_proj", "forget_gate", "b_proj", "g_a_proj", "g_b_proj", "o_norm", "o_proj"} <= names:
        return kimi_delta_attention(part)
    return gated_delta_net(part)


def _convolved_qkv(e, tiny_mixer):
    """q, k and v side by side through the mixer's causal depthwise convolution (and its bias), then SiLU."""
    import torch

    c = causal_conv(torch.cat((e["q"], e["k"], e["v"]), dim=-1), e.w("conv1d.weight"))
    if tiny_mixer.conv1d.bias is not None:
        c = c + e.w("conv1d.bias")
    return c * c.sigmoid()
