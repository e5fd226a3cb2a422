"""Mixtures of experts: the router's rule, the experts' gated MLPs, and the mixture that sums them."""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import ACT_NAMES, X, activation_name, sub
from atlas.proof.steps import Chain, Input, Step

ROUTER_OUTPUTS = ("router_logits", "expert_weights", "expert_indices")
TOKENS = Input("x", "x", "hidden_states", "the tokens routed, one row each")


def _setting(part: Part, attrs: tuple[str, ...], keys: tuple[str, ...], config=None):
    """A routing setting as the module holds it, else as the config states it."""
    for a in attrs:
        value = getattr(part.full if config is None else part.tiny, a, None)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    cfg = part.ctx.full_config if config is None else config
    return next((getattr(cfg, k) for k in keys if isinstance(getattr(cfg, k, None), (int, float))), None)


def router(part: Part) -> Chain:
    import torch

    n, d = part.full.weight.shape
    k = _setting(part, ("top_k",), ("num_experts_per_tok",))
    tiny_k = _setting(part, ("top_k",), ("num_experts_per_tok",), part.ctx.tiny_config)
    scale = _setting(part, ("routed_scaling_factor",), ("routed_scaling_factor",)) or 1.0
    groups = _setting(part, ("num_group", "n_group"), ("n_group",)) or 1
    topk_group = _setting(part, ("topk_group",), ("topk_group",)) or 1
    tiny_groups = _setting(part, ("num_group", "n_group"), ("n_group",), part.ctx.tiny_config) or 1
    tiny_topk_group = _setting(part, ("topk_group",), ("topk_group",), part.ctx.tiny_config) or 1
    has_bias = getattr(part.tiny, "bias", None) is not None and isinstance(part.tiny.bias, torch.nn.Parameter)
    selection = next((name for name, b in part.tiny.named_buffers(recurse=False) if b.dim() == 1 and b.shape[0] == part.tiny.weight.shape[0]), None)
    part.note("count", n, "the router's weight rows")
    part.note("top_k", k, "the router's setting")
    part.note("selection_bias", selection is not None, "the router holds a per-expert buffer" if selection else "the router holds no per-expert buffer")
    if scale != 1.0:
        part.note("scaling", scale, "the router's setting")
    if groups > 1:
        part.note("groups", f"{topk_group} of {groups}", "the router's settings")

    def logits_step() -> Step:
        b = "+b_r" if has_bias else ""

        def fn(e):
            x = e["x"].reshape(-1, e["x"].shape[-1])
            return x @ e.w("weight").T + (e.w("bias") if has_bias else 0)

        return Step(rf"z=x W_r^{{\top}}{b},\quad W_r\in\mathbb{{R}}^{{{T.num(n)}\times{T.num(d)}}}", "z", fn, value="router_logits", summary=True)

    def scored(scoring: str, renormalize: bool) -> Chain:
        s_tex = r"\sigma(z)" if scoring == "sigmoid" else r"\operatorname{softmax}(z)"
        steps = [logits_step(), Step(rf"s={s_tex}\in\mathbb{{R}}^{{{T.num(n)}}}", "s",
                                     (lambda e: e["z"].sigmoid()) if scoring == "sigmoid" else (lambda e: e["z"].softmax(-1)), summary=True)]
        choice = "s+b" if selection else "s"
        steps.append(Step(rf"c={choice}\quad\text{{(to choose by)}}" if selection else r"c=s", "c",
                          (lambda e: e["s"] + e.w(selection)) if selection else (lambda e: e["s"])))
        if groups > 1:
            size = n // groups

            def grouped(e):
                c = e["c"]
                g = c.view(c.shape[0], tiny_groups, -1).topk(2, dim=-1).values.sum(-1)
                keep = torch.zeros_like(g).scatter_(1, g.topk(tiny_topk_group, dim=-1).indices, 1).bool()
                mask = keep.unsqueeze(-1).expand(-1, -1, c.shape[1] // tiny_groups).reshape(c.shape)
                return c.masked_fill(~mask, float("-inf"))

            steps.append(Step(rf"c_i\leftarrow-\infty\ \text{{outside the {T.num(topk_group)} of {T.num(groups)} groups (of {T.num(size)}) with the largest top-2 sums of }}c", "c", grouped))
        steps.append(Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(c)", "E", lambda e: e["c"].topk(tiny_k, dim=-1).indices, summary=True))
        steps.append(Step(r"G_i=s_i\ \ (i\in\mathcal{E})", "G", lambda e: e["s"].gather(-1, e["E"])))
        if renormalize:
            steps.append(Step(r"G_i\leftarrow G_i\big/\textstyle\sum_{j\in\mathcal{E}}G_j", "G", lambda e: e["G"] / e["G"].sum(-1, keepdim=True), summary=True))
        if scale != 1.0:
            tiny_scale = _setting(part, ("routed_scaling_factor",), ("routed_scaling_factor",), part.ctx.tiny_config) or 1.0
            steps.append(Step(rf"G_i\leftarrow{T.num(float(scale))}\,G_i", "G", lambda e: e["G"] * tiny_scale, summary=True))
        return Chain(steps, [TOKENS], ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    def topk_softmax() -> Chain:
        return Chain([
            logits_step(),
            Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(z)", "E", lambda e: e["z"].topk(tiny_k, dim=-1).indices, summary=True),
            Step(r"G_i=\frac{e^{z_i}}{\sum_{j\in\mathcal{E}}e^{z_j}}\ \ (i\in\mathcal{E})", "G", lambda e: e["z"].gather(-1, e["E"]).softmax(-1), summary=True),
        ], [TOKENS], ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    return part.choose("routing", {
        "softmax_renormalized": lambda: scored("softmax", True),
        "softmax": lambda: scored("softmax", False),
        "sigmoid_renormalized": lambda: scored("sigmoid", True),
        "sigmoid": lambda: scored("sigmoid", False),
        "topk_softmax": topk_softmax,
    })


def experts(part: Part) -> Chain:
    """Each routing slot's expert, a gated MLP on its own slice of the fused 3-D weights, weighted and summed."""
    d = part.ctx.full_config.hidden_size
    gate_up = part.full.gate_up_proj
    n = gate_up.shape[0]
    stored_in_out = gate_up.shape[1] == d  # [E, d, 2I]: the map is x W; [E, 2I, d]: x Wᵀ
    inner = (gate_up.shape[2] if stored_in_out else gate_up.shape[1]) // 2
    names = dict(part.tiny.named_parameters(recurse=False))
    biases = "gate_up_proj_bias" in names
    inputs = [TOKENS, Input("E", r"\mathcal{E}", "top_k_index", "the experts each token's routing slots chose"),
              Input("G", "G", "top_k_weights", "each slot's weight")]
    has_act = "act_fn" in dict(part.tiny.named_children())
    act = ACT_NAMES[activation_name(part.child("act_fn"))] if has_act else None

    def project(e):
        w = e.w("gate_up_proj")[e["E"]]  # (N, k, ·, ·): each slot's expert
        x = e["x"]
        gu = (x[:, None, None, :] @ w).squeeze(-2) if stored_in_out else (w @ x[:, None, :, None]).squeeze(-1)
        return gu + (e.w("gate_up_proj_bias")[e["E"]] if biases else 0)

    def down(h, e):
        w = e.w("down_proj")[e["E"]]
        o = (h[..., None, :] @ w).squeeze(-2) if stored_in_out else (w @ h[..., None]).squeeze(-1)
        return o + (e.w("down_proj_bias")[e["E"]] if biases else 0)

    Wt = "W_{gu,i}" if stored_in_out else r"W_{gu,i}^{\top}"
    b = "+b_{gu,i}" if biases else ""
    first = Step(rf"[g;\,u]=x {Wt}{b}{T.maps(d, T.times(2, inner))}\quad\text{{for each slot's expert }}i\in\mathcal{{E}}", "gu", project)
    weigh = [
        Step(r"o_j=G_j\,E_{i_j}(x)\quad\text{each routing slot }j", "o", lambda e: e["G"][..., None] * e["e_out"], value="expert_outputs"),
        Step(r"y=\textstyle\sum_{j}o_j", "y", lambda e: e["o"].sum(1), value="routed_output", summary=True),
    ]
    Wd = "W_{d,i}" if stored_in_out else r"W_{d,i}^{\top}"

    def halves() -> Chain:
        steps = [first, Step(r"g,\ u\ \text{the first and second halves}", ("g", "u"), lambda e: e["gu"].chunk(2, dim=-1))]
        if has_act:
            steps.append(Step(rf"a={act}(g)", "a", sub(part, "act_fn", x="g")))
        steps += [Step(rf"E_i(x)=(a\odot u)\,{Wd}{'+b_{d,i}' if biases else ''}{T.maps(inner, d)}", "e_out", lambda e: down(e["a"] * e["u"], e), summary=True), *weigh]
        return Chain(steps, inputs, "y")

    def clamped() -> Chain:
        limit, alpha = part.full.limit, part.full.alpha
        tiny_limit, tiny_alpha = part.tiny.limit, part.tiny.alpha
        steps = [
            first,
            Step(r"g=[g;u]_{\text{even columns}},\quad u=[g;u]_{\text{odd columns}}", ("g", "u"), lambda e: (e["gu"][..., ::2], e["gu"][..., 1::2])),
            Step(rf"g\leftarrow\min(g,{T.num(limit)}),\quad u\leftarrow\operatorname{{clamp}}(u,-{T.num(limit)},{T.num(limit)})", ("g", "u"),
                 lambda e: (e["g"].clamp(max=tiny_limit), e["u"].clamp(-tiny_limit, tiny_limit))),
            Step(rf"a=g\,\sigma({T.num(alpha)}\,g)", "a", lambda e: e["g"] * (e["g"] * tiny_alpha).sigmoid(), summary=True),
            Step(rf"E_i(x)=\big((u+1)\odot a\big)\,{Wd}{'+b_{d,i}' if biases else ''}{T.maps(inner, d)}", "e_out", lambda e: down((e["u"] + 1) * e["a"], e), summary=True),
            *weigh,
        ]
        return Chain(steps, inputs, "y")

    part.note("count", n, "the fused weights' first axis")
    variants = {"gated_halves": halves}
    if hasattr(part.tiny, "limit") and hasattr(part.tiny, "alpha"):
        variants = {"clamped_interleaved": clamped, **variants}
    return part.choose("experts", variants)


def mixture(part: Part) -> Chain:
    names = dict(part.tiny.named_children())
    route = next(n for n in ("gate", "router") if n in names)
    shared = next((n for n in ("shared_experts", "shared_expert", "shared_mlp") if n in names), None)
    steps = [
        Step(r"(z,\,G,\,\mathcal{E})=\operatorname{Router}(x)", ("z", "G", "E"), sub(part, route),
             value=("router_logits", "expert_weights", "expert_indices"), summary=True),
        Step(r"x_{\mathrm{tok}}=x\ \text{as rows, one per token}", "xt", lambda e: e["x"].reshape(-1, e["x"].shape[-1])),
        Step(r"y^{\mathrm{routed}}=\operatorname{Experts}(x_{\mathrm{tok}},\mathcal{E},G)", "yr", sub(part, "experts", x="xt"), value="routed_output", summary=True),
    ]
    gate = next((n for n in ("shared_expert_gate",) if n in names), None) if shared else None
    if shared and gate:  # a learned per-token gate scales the shared expert's output (Qwen2-MoE, Qwen3-Next)
        steps += [
            Step(r"y^{\mathrm{shared}}=\operatorname{SharedMLP}(x)", "ys", sub(part, shared), value="shared_expert_output", summary=True),
            Step(rf"\gamma=\sigma(x\,w_{{\gamma}}^{{\top}}){T.maps(part.ctx.full_config.hidden_size, 1)}\quad\text{{one gate per token}}", "gamma",
                 lambda e, f=sub(part, gate): f(e).sigmoid()),
            Step(r"\Delta=y^{\mathrm{routed}}+\gamma\,y^{\mathrm{shared}}", "y",
                 lambda e: e["yr"].reshape(e["x"].shape) + e["gamma"] * e["ys"].reshape(e["x"].shape), value="mlp_output", summary=True),
        ]
        steps[-2].sub = f"{part.id}.{gate}"
    elif shared:
        steps += [
            Step(r"y^{\mathrm{shared}}=\operatorname{SharedMLP}(x)", "ys", sub(part, shared), value="shared_expert_output", summary=True),
            Step(r"\Delta=y^{\mathrm{routed}}+y^{\mathrm{shared}}", "y", lambda e: e["yr"].reshape(e["x"].shape) + e["ys"], value="mlp_output", summary=True),
        ]
    else:
        steps.append(Step(r"\Delta=y^{\mathrm{routed}}", "y", lambda e: e["yr"].reshape(e["x"].shape), value="mlp_output", summary=True))
    part.note("shared_expert", bool(shared), "the mixture's children")
    if gate:
        part.note("shared_expert_gate", True, "the mixture's children: a one-output projection whose sigmoid scales the shared expert")
    part.note("sub_steps", {"Router": f"{part.id}.{route}", "Experts": f"{part.id}.experts", **({"SharedMLP": f"{part.id}.{shared}"} if shared else {})}, "the mixture's children")
    return Chain(steps, [X], "y")
