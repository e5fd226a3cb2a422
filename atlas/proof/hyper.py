"""Hyper-connections (DeepSeek-V4's manifold-constrained ones): several residual streams, collapsed before a
sublayer and mixed among themselves by a near doubly stochastic matrix; and a linear map by groups.

A hyper-connection holds one linear map from the n streams (flattened to n × width, normalized by their
root mean square without a gain) to 2n + n² coefficients, their biases, and three scales. The first n
give, through a sigmoid, the weight with which each stream enters the collapsed input of the sublayer; the
next n, through twice a sigmoid, the weight with which the sublayer's output is added to each stream; the
last n² form a matrix, a softmax per row, then Sinkhorn rounds (columns, then rows and columns again)
bring it close to doubly stochastic. The module returns (post weights, mixing matrix, collapsed input).
The final collapse before the model's norm (its "head") is the first part alone, with one scale.

Which tensor is which is read from their shapes (a 2-D map whose rows are (2 + n)·n and whose columns
are n times the width, a bias of as many entries, three scales), never from the class.
"""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, sub
from atlas.proof.steps import Chain, Input, Step
from atlas.model.structure import (  # noqa: F401 - the predicates are the model's; kinds asks them here
    is_grouped_linear,
    is_hyper_connection,
    is_stream_collapse,
    own_parameters as _own,
    stream_count as _streams,
)

STREAMS = Input("x", "X", "hidden_streams", "the residual streams (one row per stream)")
HEAD_STREAMS = Input("x", "X", "x", "the residual streams after the last block (one row per stream)")


def _names(module) -> tuple[str, str, str]:
    """(map, bias, scale) names, told apart by shape."""
    own = _own(module)
    matrix = next(k for k, p in own.items() if p.dim() == 2)
    rows = own[matrix].shape[0]
    bias = next(k for k, p in own.items() if p.dim() == 1 and p.numel() == rows and k != matrix)
    scale = next(k for k, p in own.items() if k not in (matrix, bias))
    return matrix, bias, scale


def _eps(module) -> float:
    for attr in ("hc_eps", "eps"):
        value = getattr(module, attr, None)
        if isinstance(value, float):
            return value
    raise LookupError("no epsilon")


def hyper_connection(part: Part) -> Chain:
    import torch

    full, tiny = part.full, part.tiny
    matrix, bias, scale = _names(tiny)
    rows, cols = getattr(full, matrix).shape
    n = _streams(rows, cols, 2)
    tn = _streams(*getattr(tiny, matrix).shape, 2)
    width = cols // n
    rounds = getattr(tiny, "hc_sinkhorn_iters", None)
    eps, tiny_eps = _eps(full), _eps(tiny)
    norm_name = next(iter(dict(tiny.named_children())))
    part.note("streams", n, "the shape of the module's map: (2 + n)·n rows, n × width columns")
    part.note("sinkhorn_rounds", rounds, "the module's hc_sinkhorn_iters")
    part.note("eps", eps, "the module's hc_eps")

    def coefficients(e):
        return e["u"] @ e.w(matrix).T

    def split(e):
        z, b, s = e["z"], e.w(bias), e.w(scale)
        pre = torch.sigmoid(z[..., :tn] * s[0] + b[:tn]) + tiny_eps
        post = 2 * torch.sigmoid(z[..., tn:2 * tn] * s[1] + b[tn:2 * tn])
        logits = z[..., 2 * tn:].unflatten(-1, (tn, tn)) * s[2] + b[2 * tn:].view(tn, tn)
        return pre, post, torch.softmax(logits, dim=-1) + tiny_eps

    def sinkhorn(e):
        m = e["A0"]
        m = m / (m.sum(-2, keepdim=True) + tiny_eps)
        for _ in range(rounds - 1):
            m = m / (m.sum(-1, keepdim=True) + tiny_eps)
            m = m / (m.sum(-2, keepdim=True) + tiny_eps)
        return m

    X_, u, z = "X", r"\hat u", "z"
    steps = [
        Step(rf"u=\operatorname{{flatten}}({X_})\in\mathbb{{R}}^{{{T.times(n, width)}}}\quad\text{{the {T.num(n)} streams side by side}}", "flat",
             lambda e: e["x"].flatten(-2)),
        Step(rf"{u}=\operatorname{{RMSNorm}}(u)\quad\text{{(no gain)}}", "u", sub(part, norm_name, x="flat")),
        Step(rf"{z}={u}\,W_{{hc}}^{{\top}}{T.maps(n * width, (2 + n) * n)}", "z", coefficients),
        Step(rf"a=\sigma(s_1 z_{{1..{T.num(n)}}}+b_1)+\epsilon,\quad p=2\,\sigma(s_2 z_{{{T.num(n + 1)}..{T.num(2 * n)}}}+b_2),\quad "
             rf"A^{{(0)}}=\operatorname{{softmax}}_{{\text{{row}}}}(s_3 Z+B)+\epsilon,\ Z,B\in\mathbb{{R}}^{{{T.times(n, n)}}}",
             ("a", "p", "A0"), split),
        Step(rf"A=\text{{columns, then }}{T.num(rounds - 1)}\text{{ rounds of rows and columns, each divided by its sum}}+\epsilon",
             "A", sinkhorn, summary=True),
        Step(rf"x=\textstyle\sum_{{i=1}}^{{{T.num(n)}}} a_i\,{X_}_i\quad\text{{the sublayer's input}}", "collapsed",
             lambda e: (e["a"][..., None] * e["x"]).sum(-2), summary=True),
    ]
    return Chain(steps, [STREAMS], ("p", "A", "collapsed"))


def stream_collapse(part: Part) -> Chain:
    import torch

    full, tiny = part.full, part.tiny
    matrix, bias, scale = _names(tiny)
    n, cols = getattr(full, matrix).shape
    width = cols // n
    eps, tiny_eps = _eps(full), _eps(tiny)
    norm_name = next(iter(dict(tiny.named_children())))
    part.note("streams", n, "the shape of the module's map: n rows, n × width columns")
    part.note("eps", eps, "the module's epsilon")
    steps = [
        Step(rf"u=\operatorname{{flatten}}(X)\in\mathbb{{R}}^{{{T.times(n, width)}}}", "flat", lambda e: e["x"].flatten(-2)),
        Step(r"\hat u=\operatorname{RMSNorm}(u)\quad\text{(no gain)}", "u", sub(part, norm_name, x="flat")),
        Step(rf"a=\sigma\big(s\,\hat u W^{{\top}}+b\big)+\epsilon{T.maps(n * width, n)}", "a",
             lambda e: torch.sigmoid((e["u"] @ e.w(matrix).T) * e.w(scale) + e.w(bias)) + tiny_eps),
        Step(rf"y=\textstyle\sum_{{i=1}}^{{{T.num(n)}}} a_i\,X_i", "y", lambda e: (e["a"][..., None] * e["x"]).sum(-2), summary=True),
    ]
    return Chain(steps, [HEAD_STREAMS], "y")


# --- a linear map by groups ------------------------------------------------------------------------


def grouped_linear(part: Part) -> Chain:
    g, tg = part.full.n_groups, part.tiny.n_groups
    rows, per_group_in = part.full.weight.shape
    out = rows // g
    part.note("groups", g, "the module's n_groups")
    part.note("bias", part.tiny.bias is not None, "the module holds a bias" if part.tiny.bias is not None else "the module holds no bias")

    def fn(e):
        w = e.w("weight").unflatten(0, (tg, -1))  # (group, out, in)
        y = (e["x"][..., None, :] @ w.transpose(-1, -2)).squeeze(-2)  # x: (..., group, in) -> (..., group, out)
        return y + e.w("bias").unflatten(0, (tg, -1)) if part.tiny.bias is not None else y

    tex = (rf"y_j=x_j W_j^{{\top}},\ j=1..{T.num(g)},\quad W_j\in\mathbb{{R}}^{{{T.times(out, per_group_in)}}}"
           rf"\quad\text{{each group of the input through its own block of rows}}")
    return Chain([Step(tex, "y", fn, summary=True)], [X], "y")



# --- a block whose residual is several streams ------------------------------------------------------


def stream_roles(module) -> dict[str, str] | None:
    """A block's hyper-connections, by the order its children are declared in: the first feeds the
    attention, the second the MLP; the norms and sublayers by their roles (atlas.model.roles.block_roles).
    None where the block holds no pair of hyper-connections."""
    from atlas.model.roles import block_roles

    connections = [name for name, child in module.named_children() if is_hyper_connection(child)]
    if len(connections) != 2:
        return None
    r = block_roles(module)
    if not (r.attention and r.mlp and r.attention_norm and r.mlp_norm):
        return None
    return {"attention_hc": connections[0], "mlp_hc": connections[1], "attention": r.attention, "mlp": r.mlp,
            "attention_norm": r.attention_norm, "mlp_norm": r.mlp_norm}


BLOCK_EXTRAS = (("M", "attention_mask", "the attention mask the model hands every block"),
                ("pos", "position_ids", "the positions of the call"),
                ("ids", "input_ids", "the token ids, which the hash-routed mixtures read"))


def stream_block(part: Part) -> Chain:
    """Collapse the streams for the attention, add its output back spread over them with the old streams
    mixed; the same around the MLP."""
    from atlas.proof.positions import rotary_input
    from atlas.proof.library import chain_of

    r = stream_roles(part.tiny)
    attn_chain = chain_of(part.child(r["attention"]))
    mlp_chain = chain_of(part.child(r["mlp"]))
    wanted = {i.name for i in attn_chain.inputs} | {i.name for i in mlp_chain.inputs}
    inputs = [Input("x", "X", "hidden_states", "the residual streams entering the block")]
    if "R" in wanted:
        inputs.append(rotary_input(part.argument("position_embeddings")))
    inputs += [Input(name, T.c(name), argument, words) for name, argument, words in BLOCK_EXTRAS if name in wanted]
    attn_args = {i.name: ("h" if i.name == "x" else i.name) for i in attn_chain.inputs}
    mlp_args = {i.name: ("h2" if i.name == "x" else i.name) for i in mlp_chain.inputs}
    n = part.ctx.full_config.hc_mult if hasattr(part.ctx.full_config, "hc_mult") else None

    def spread(p, delta, A, X):
        return p[..., None] * delta[..., None, :] + A.transpose(-1, -2) @ X

    steps = [
        Step(r"(p,\,A,\,x)=\operatorname{HC}_{\mathrm{attn}}(X)\quad\text{spread weights, mixing matrix, the collapsed input}", ("p", "A", "xa"),
             sub(part, r["attention_hc"], x="x"), summary=True),
        Step(r"h=\operatorname{Norm}_1(x)", "h", sub(part, r["attention_norm"], x="xa"), value="attention_norm_output", summary=True),
        Step(r"\Delta_{\mathrm{attn}}=\operatorname{Attn}(h)", "da", sub(part, r["attention"], **attn_args), value="attention_output", summary=True),
        Step(r"X_i'=p_i\,\Delta_{\mathrm{attn}}+\textstyle\sum_j A_{ji}X_j\quad\text{each stream: its share of the output, plus the streams mixed}",
             "Xm", lambda e: spread(e["p"], e["da"], e["A"], e["x"]), summary=True),
        Step(r"(p',\,A',\,x')=\operatorname{HC}_{\mathrm{ffn}}(X')", ("p2", "A2", "xf"), sub(part, r["mlp_hc"], x="Xm"), summary=True),
        Step(r"h'=\operatorname{Norm}_2(x')", "h2", sub(part, r["mlp_norm"], x="xf"), value="mlp_norm_output", summary=True),
        Step(r"\Delta_{\mathrm{ffn}}=\operatorname{FFN}(h')", "dm", sub(part, r["mlp"], **mlp_args), value="mlp_output", summary=True),
        Step(r"Y_i=p'_i\,\Delta_{\mathrm{ffn}}+\textstyle\sum_j A'_{ji}X'_j", "y", lambda e: spread(e["p2"], e["dm"], e["A2"], e["Xm"]),
             value="layer_output", summary=True),
    ]
    part.note("streams", n, "the config's hc_mult: the block's input holds that many streams")
    part.note("sublayers", {"attention": r["attention"], "mlp": r["mlp"]}, "the block's children by role")
    part.note("norms", {"before attention": r["attention_norm"], "after attention": None, "before MLP": r["mlp_norm"], "after MLP": None},
              "the block's children by role")
    part.note("hyper_connections", {"attention": r["attention_hc"], "mlp": r["mlp_hc"]}, "the block's children: two hyper-connections")
    return Chain(steps, inputs, "y")
