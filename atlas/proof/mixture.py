"""Mixtures of experts: the router's rule, the experts' gated MLPs, and the mixture that sums them."""

from __future__ import annotations

import dataclasses

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import ACT_NAMES, X, activation_name, sub, swiglu_limit
from atlas.proof.steps import Chain, Input, Step
from atlas.inputs.config_keys import TOP_K_KEYS
from atlas.model.sizes import routed_experts

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


def _router_projection(module) -> str:
    """Where a router keeps its logits' weight: "" for its own, else the name of its one linear child
    (Hunyuan's gate holds it as wg)."""
    import torch

    if "weight" in dict(module.named_parameters(recurse=False)):
        return ""
    return next((n for n, m in module.named_children() if isinstance(m, torch.nn.Linear)), "")


def _router_rows(module) -> int:
    projection = _router_projection(module)
    return (module.get_submodule(projection) if projection else module).weight.shape[0]


def n_rows(part: Part) -> int:
    return _router_rows(part.tiny)


def _handed_selection(part: Part) -> str | None:
    """The router's forward argument, beyond the tokens, that carries one value per expert (MiniMax-M2's
    mixture holds the selection bias and hands it to the router): its name."""
    import inspect

    import torch

    experts = _router_rows(part.tiny)
    params = [p for p in inspect.signature(part.tiny.forward).parameters if p != "self"]
    for position, name in enumerate(params[1:], start=1):
        value = part.argument(name, position)
        if isinstance(value, torch.Tensor) and value.numel() == experts:
            return name
    return None


def _child_selection(part: Part) -> str | None:
    """A per-expert selection bias a child of the router holds (ERNIE 4.5's moe_statics), by its name
    relative to the router: the child's only tensor, one value per expert."""
    experts = _router_rows(part.tiny)
    for child, module in part.tiny.named_children():
        tensors = {**dict(module.named_parameters(recurse=False)), **dict(module.named_buffers(recurse=False))}
        if len(tensors) == 1 and not any(True for _ in module.children()):
            name, t = next(iter(tensors.items()))
            if t.numel() == experts and max(t.shape) == experts:
                return f"{child}.{name}"
    return None


def offset(part: Part) -> Chain:
    """A module that adds its one vector to what it receives (a router's selection bias held apart)."""
    full = {**dict(part.full.named_parameters(recurse=False)), **dict(part.full.named_buffers(recurse=False))}
    name, tensor = next(iter(full.items()))
    return Chain([Step(rf"y=x+b,\quad b\in\mathbb{{R}}^{{{T.num(tensor.numel())}}}", "y", lambda e: e["x"] + e.w(name).reshape(-1), summary=True)], [X], "y")



def _norm_child(part: Part, projection: str) -> str | None:
    """A norm the router applies to the tokens before its projection (Gemma 4's router.norm)."""
    from atlas.proof.library import has_epsilon

    return next((n for n, c in part.tiny.named_children() if n != projection and has_epsilon(c)), None)


def normed_router(part: Part, projection: str, norm: str) -> Chain:
    """A router that normalizes the tokens first (its own norm, then a learned gain per feature and,
    where it reproduces the module, 1/sqrt(width)), takes a softmax over its logits, keeps the top k,
    renormalizes them and multiplies each by a learned number of its expert (Gemma 4)."""
    n, d = part.full.get_submodule(projection).weight.shape
    k = _setting(part, ("top_k",), TOP_K_KEYS)
    tiny_k = _setting(part, ("top_k",), TOP_K_KEYS, part.ctx.tiny_config)
    own = dict(part.tiny.named_parameters(recurse=False))
    gain = next((name for name, t in own.items() if t.dim() == 1 and t.shape[0] == part.tiny.get_submodule(projection).weight.shape[1]), None)
    per_expert = next((name for name, t in own.items() if t.dim() == 1 and t.shape[0] == n_rows(part) and name != gain), None)
    part.note("count", n, "the router's projection rows")
    part.note("top_k", k, "the config's experts per token")
    part.note("router_norm", norm, "the router's child norm, applied to the tokens before the projection")
    if per_expert:
        part.note("per_expert_scale", per_expert, "the router holds one learned number per expert")

    def build(root: bool) -> Chain:
        shown = lambda name: name.replace("_", r"\_")  # noqa: E731
        steps = [Step(r"x\ \text{as rows, one per token}", "x", lambda e: e["x"].reshape(-1, e["x"].shape[-1])),
                 Step(r"\hat x=\operatorname{Norm}(x)", "xh", sub(part, norm, x="x"))]
        if gain:
            factor = rf"\,/\sqrt{{{T.num(d)}}}" if root else ""
            steps.append(Step(rf"\hat x\leftarrow \hat x\odot g{factor},\quad g\in\mathbb{{R}}^{{{T.num(d)}}}\ \text{{the router's {shown(gain)}}}", "xh",
                              (lambda e: e["xh"] * e.w(gain) / e["xh"].shape[-1] ** 0.5) if root else (lambda e: e["xh"] * e.w(gain))))
        steps += [
            Step(rf"z=\hat x\,W_r^{{\top}},\quad W_r\in\mathbb{{R}}^{{{T.num(n)}\times{T.num(d)}}}", "z", sub(part, projection, x="xh"), value="router_logits", summary=True),
            Step(rf"s=\operatorname{{softmax}}(z)\in\mathbb{{R}}^{{{T.num(n)}}}", "s", lambda e: e["z"].softmax(-1), summary=True),
            Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(s),\quad G_i=s_i\ \ (i\in\mathcal{{E}})", ("G", "E"),
                 lambda e: tuple(e["s"].topk(tiny_k, dim=-1)), summary=True),
            Step(r"G_i\leftarrow G_i\big/\textstyle\sum_{j\in\mathcal{E}}G_j", "G", lambda e: e["G"] / e["G"].sum(-1, keepdim=True), summary=True),
        ]
        if per_expert:
            steps.append(Step(rf"G_i\leftarrow G_i\,c_i\quad c\in\mathbb{{R}}^{{{T.num(n)}}}\ \text{{the router's {shown(per_expert)}, one number per expert}}", "G",
                              lambda e: e["G"] * e.w(per_expert)[e["E"]], summary=True))
        return Chain(steps, [TOKENS], ("s", "G", "E"), output_values=("", "expert_weights", "expert_indices"))

    return part.choose("router_gain", {"gain_over_sqrt_width": lambda: build(True), "gain": lambda: build(False)})


def router(part: Part) -> Chain:
    import torch

    projection = _router_projection(part.tiny)  # "" where the router holds its weight, else its linear child
    norm = _norm_child(part, projection) if projection else None
    if norm:
        return normed_router(part, projection, norm)
    at = f"{projection}." if projection else ""
    n, d = part.full.get_submodule(projection).weight.shape if projection else part.full.weight.shape
    k = _setting(part, ("top_k",), TOP_K_KEYS)
    tiny_k = _setting(part, ("top_k",), TOP_K_KEYS, part.ctx.tiny_config)
    scale = _setting(part, ("routed_scaling_factor",), ("routed_scaling_factor",)) or 1.0
    groups = _setting(part, ("num_group", "n_group"), ("n_group",)) or 1
    topk_group = _setting(part, ("topk_group",), ("topk_group",)) or 1
    tiny_groups = _setting(part, ("num_group", "n_group"), ("n_group",), part.ctx.tiny_config) or 1
    tiny_topk_group = _setting(part, ("topk_group",), ("topk_group",), part.ctx.tiny_config) or 1
    owner = part.tiny.get_submodule(projection) if projection else part.tiny
    has_bias = getattr(owner, "bias", None) is not None and isinstance(owner.bias, torch.nn.Parameter)
    selection = next((name for name, b in part.tiny.named_buffers(recurse=False) if b.dim() == 1 and b.shape[0] == n_rows(part)), None)
    selection = selection or _child_selection(part)
    handed = None if selection else _handed_selection(part)
    bias_input = [Input("b", "b", handed, "the per-expert selection bias the mixture hands the router")] if handed else []
    part.note("count", n, "the router's weight rows")
    part.note("top_k", k, "the router's setting")
    if handed:
        part.note("selection_bias", True, "the router is handed a per-expert vector by the mixture")
    else:
        part.note("selection_bias", selection is not None, "the router holds a per-expert buffer" if selection else "the router holds no per-expert buffer")
    if scale != 1.0:
        part.note("scaling", scale, "the router's setting")
    if groups > 1:
        part.note("groups", f"{topk_group} of {groups}", "the router's settings")

    def logits_step() -> Step:
        b = "+b_r" if has_bias else ""

        def fn(e):
            x = e["x"].reshape(-1, e["x"].shape[-1])
            return x @ e.w(at + "weight").T + (e.w(at + "bias") if has_bias else 0)

        return Step(rf"z=x W_r^{{\top}}{b},\quad W_r\in\mathbb{{R}}^{{{T.num(n)}\times{T.num(d)}}}", "z", fn, value="router_logits", summary=True)

    def scored(scoring: str, renormalize: bool) -> Chain:
        s_tex = r"\sigma(z)" if scoring == "sigmoid" else r"\operatorname{softmax}(z)"
        steps = [logits_step(), Step(rf"s={s_tex}\in\mathbb{{R}}^{{{T.num(n)}}}", "s",
                                     (lambda e: e["z"].sigmoid()) if scoring == "sigmoid" else (lambda e: e["z"].softmax(-1)), summary=True)]
        choice = "s+b" if selection or handed else "s"
        steps.append(Step(rf"c={choice}\quad\text{{(to choose by)}}" if selection or handed else r"c=s", "c",
                          (lambda e: e["s"] + e.w(selection)) if selection else (lambda e: e["s"] + e["b"]) if handed else (lambda e: e["s"])))
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
        steps += _slot_weights(part, renormalize, scale)
        return Chain(steps, [TOKENS, *bias_input], ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    # a score function the router holds as a child without tensors (DeepSeek-V4's score_fn: √softplus),
    # its formula measured by the activation's own chain
    score = next((name for name, c in part.tiny.named_children() if not any(True for _ in c.parameters())), None)
    # a frozen table from token id to the experts chosen (DeepSeek-V4's hash-routed blocks): an integer
    # buffer of one row per vocabulary entry and one column per routing slot
    table = next((name for name, b in part.tiny.named_buffers(recurse=False)
                  if not b.is_floating_point() and b.dim() == 2 and b.shape[1] == tiny_k), None)

    act = ACT_NAMES.get(activation_name(part.child(score)), r"\operatorname{score}") if score else None

    def child_scored(renormalize: bool) -> Chain:
        steps = [logits_step(), Step(rf"s={act}(z)\in\mathbb{{R}}^{{{T.num(n)}}}", "s", sub(part, score, x="z"), summary=True)]
        inputs = [TOKENS]
        if table:
            vocab = getattr(part.full, table).shape[0]
            steps.append(Step(rf"\mathcal{{E}}=T[t]\quad\text{{the {T.num(k)} experts a frozen table of }}{T.num(vocab)}\text{{ rows gives the token id }}t"
                              r"\text{ (the scores do not choose)}", "E", lambda e: e.w(table)[e["ids"].reshape(-1)].long(), summary=True))
            inputs.append(Input("ids", "t", "input_ids", "the token ids, which alone choose the experts"))
        else:
            choice = "s+b" if selection else "s"
            steps.append(Step(rf"c={choice}\quad\text{{(to choose by)}}" if selection else r"c=s", "c",
                              (lambda e: e["s"] + e.w(selection)) if selection else (lambda e: e["s"])))
            steps.append(Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(c)", "E", lambda e: e["c"].topk(tiny_k, dim=-1).indices, summary=True))
        steps += _slot_weights(part, renormalize, scale)
        if table:
            part.note("hash_routing", True, "the router holds an integer table of one row per token id and one column per routing slot")
        return Chain(steps, inputs, ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    def topk_softmax() -> Chain:
        return Chain([
            logits_step(),
            Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(z)", "E", lambda e: e["z"].topk(tiny_k, dim=-1).indices, summary=True),
            Step(r"G_i=\frac{e^{z_i}}{\sum_{j\in\mathcal{E}}e^{z_j}}\ \ (i\in\mathcal{E})", "G", lambda e: e["z"].gather(-1, e["E"]).softmax(-1), summary=True),
        ], [TOKENS], ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    if not isinstance(part.call.output, tuple) and not hasattr(part.call.output, "to_tuple"):
        # a router that returns its logits alone (DBRX's): the mixture applies the routing rule
        part.note("routing", "logits only", "the router's call returns one tensor: the mixture routes")
        return Chain([logits_step()], [TOKENS], "z")
    variants = {
        "softmax_renormalized": lambda: scored("softmax", True),
        "softmax": lambda: scored("softmax", False),
        "sigmoid_renormalized": lambda: scored("sigmoid", True),
        "sigmoid": lambda: scored("sigmoid", False),
        "topk_softmax": topk_softmax,
    }
    if score is not None:  # tried first; the usual rules stay offered after them
        variants = {"score_fn_renormalized": lambda: child_scored(True), "score_fn": lambda: child_scored(False), **variants}
    out = part.call.output
    if isinstance(out, tuple) and len(out) == 2 and all(getattr(o, "shape", (0,))[-1] == n_rows(part) for o in out):
        # a router returning two tensors of one column per expert: a score for every expert and the logits (Llama 4)
        variants["sigmoid_top_k_dense"] = lambda: dense_scores(logits_step(), k, tiny_k)
    # SparseMixer's masked softmax needs its threshold setting: offered only where the router holds one.
    jitter = _setting(part, ("router_jitter_noise",), ("router_jitter_noise",))
    if jitter is not None:
        tiny_jitter = _setting(part, ("router_jitter_noise",), ("router_jitter_noise",), part.ctx.tiny_config)
        variants["sparsemixer"] = lambda: sparsemixer(logits_step(), jitter, tiny_jitter)
    return part.choose("routing", variants)


def dense_scores(logits: Step, k: int, tiny_k: int) -> Chain:
    """A score for every expert: the sigmoid of its logit where the logit is among the token's top k, 0
    elsewhere (Llama 4's router, whose mixture scales each expert's input by it)."""
    import torch

    def scores(e):
        z = e["z"]
        top = z.topk(tiny_k, dim=-1)
        return torch.zeros_like(z).scatter(-1, top.indices, top.values.sigmoid())

    return Chain([
        logits,
        Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(z)", "E", lambda e: e["z"].topk(tiny_k, dim=-1).indices),
        Step(r"S_i=\sigma(z_i)\ \ (i\in\mathcal{E}),\quad S_i=0\ \text{otherwise}\quad\text{a score for every expert}", "S", scores,
             value="router_scores", summary=True),
    ], [TOKENS], ("S", "z"), output_values=("router_scores", "router_logits"))


def sparsemixer(logits: Step, eps: float, tiny_eps: float) -> Chain:
    """SparseMixer at inference (Phi-3.5-MoE): two rounds, each taking the largest remaining logit and
    weighting it by a softmax over only the logits close enough to that largest one; the first round's
    expert is removed before the second. "Close enough": (m - z_j) / max(|z_j|, m) <= 2 eps."""
    import torch

    def round_(z, m):
        far = (m - z) / z.abs().clamp(min=m) > 2 * tiny_eps  # the threshold is measured against the raw logits
        return far

    def first(e):
        z = e["z"]
        m, i = z.max(dim=-1, keepdim=True)
        g = z.masked_fill(round_(z, m), float("-inf")).softmax(-1).gather(-1, i)
        return i, g

    def second(e):
        z = e["z"]
        rest = z.scatter(-1, e["i1"], float("-inf"))
        m, i = rest.max(dim=-1, keepdim=True)
        g = rest.masked_fill(round_(z, m), float("-inf")).softmax(-1).gather(-1, i)
        return i, g

    two_eps = T.num(2 * eps)
    return Chain([
        logits,
        Step(rf"i_1=\arg\max_j z_j,\quad G_1=\operatorname{{softmax}}_{{j\in M_1}}(z)_{{i_1}},\ "
             rf"M_1=\{{j:(z_{{i_1}}-z_j)/\max(|z_j|,z_{{i_1}})\le{two_eps}\}}", ("i1", "g1"), first, summary=True),
        Step(rf"i_2=\arg\max_{{j\ne i_1}} z_j,\quad G_2=\operatorname{{softmax}}_{{j\in M_2}}(z)_{{i_2}},\ "
             rf"M_2=\{{j\ne i_1:(z_{{i_2}}-z_j)/\max(|z_j|,z_{{i_2}})\le{two_eps}\}}", ("i2", "g2"), second, summary=True),
        Step(r"\mathcal{E}=(i_1,i_2),\quad G=(G_1,G_2)", ("E", "G"),
             lambda e: (torch.cat([e["i1"], e["i2"]], -1), torch.cat([e["g1"], e["g2"]], -1))),
    ], [TOKENS], ("z", "G", "E"), output_values=ROUTER_OUTPUTS)


def dense_experts(part: Part) -> Chain:
    """Every expert on its own block of rows (the mixture lays the tokens out once per expert, each copy
    already scaled): a gated MLP on its slice of the fused 3-D weights; the rows come back expert by expert."""
    d = part.ctx.full_config.hidden_size
    gate_up = part.full.gate_up_proj
    n = gate_up.shape[0]
    stored_in_out = gate_up.shape[1] == d and part.full.down_proj.shape[2] == d
    inner = (gate_up.shape[2] if stored_in_out else gate_up.shape[1]) // 2
    has_act = "act_fn" in dict(part.tiny.named_children())
    act = ACT_NAMES[activation_name(part.child("act_fn"))] if has_act else r"\operatorname{SiLU}"
    Wt, Wd = ("W_{gu,e}", "W_{d,e}") if stored_in_out else (r"W_{gu,e}^{\top}", r"W_{d,e}^{\top}")
    rows = Input("x", "X", "hidden_states", "every expert's rows, one block of all the tokens per expert, expert by expert")

    def blocks(e):
        experts = e.w("gate_up_proj").shape[0]
        return e["x"].reshape(experts, -1, e["x"].shape[-1])

    def project(e):
        w = e.w("gate_up_proj")
        return e["X"] @ w if stored_in_out else e["X"] @ w.transpose(1, 2)

    def down(e):
        w = e.w("down_proj")
        h = e["a"] * e["u"]
        return (h @ w if stored_in_out else h @ w.transpose(1, 2)).reshape(-1, e["x"].shape[-1])

    def chain() -> Chain:
        steps = [
            Step(rf"X_e\ \text{{the }}e\text{{-th block of rows}},\ e=1..{T.num(n)}", "X", blocks),
            Step(rf"[g;\,u]=X_e {Wt}{T.maps(d, T.times(2, inner))}\quad\text{{every expert }}e", "gu", project),
            Step(r"g,\ u\ \text{the first and second halves}", ("g", "u"), lambda e: e["gu"].chunk(2, dim=-1)),
        ]
        if has_act:
            steps.append(Step(rf"a={act}(g)", "a", sub(part, "act_fn", x="g")))
        steps.append(Step(rf"Y_e=(a\odot u)\,{Wd}{T.maps(inner, d)}\quad\text{{the rows come back expert by expert}}", "y", down, summary=True))
        return Chain(steps, [rows], "y")

    part.note("count", n, "the fused weights' first axis")
    part.note("dispatch", "every expert on every token", "the experts' forward takes the rows alone: no chosen experts, no weights")
    return part.choose("experts", {"gated_halves_every_expert": chain})


def experts(part: Part) -> Chain:
    """Each routing slot's expert, a gated MLP on its own slice of the fused 3-D weights, weighted and summed."""
    from atlas.model.structure import is_dense_dispatch

    if is_dense_dispatch(part.tiny):
        return dense_experts(part)
    d = part.ctx.full_config.hidden_size
    gate_up = part.full.gate_up_proj
    n = gate_up.shape[0]
    # [E, d, 2I] with down [E, I, d]: the map is x W; [E, 2I, d] with down [E, d, I]: x Wᵀ. Both
    # tensors decide it: gate_up alone is square where 2I = d (OLMoE), and down alone where I = d.
    stored_in_out = gate_up.shape[1] == d and part.full.down_proj.shape[2] == d
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

    # Fewer down projections than routing choices: the experts past the last down projection compute
    # nothing of their own (LongCat-Flash's zero-computation experts); what they return is measured.
    # (Measured on the preview model's own tensors: the full model's may be cut to what the files store.)
    real, tiny_real = part.full.down_proj.shape[0], part.tiny.down_proj.shape[0]
    zero = part.tiny.gate_up_proj.shape[0] - tiny_real

    def down(h, e):
        w = e.w("down_proj")[e["E"].clamp(max=tiny_real - 1)]
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

    def clamped_halves() -> Chain:
        limit, tiny_limit = swiglu_limit(part.full), swiglu_limit(part.tiny)
        steps = [first, Step(r"g,\ u\ \text{the first and second halves}", ("g", "u"), lambda e: e["gu"].chunk(2, dim=-1)),
                 Step(rf"g\leftarrow\min(g,{T.num(limit)}),\quad u\leftarrow\operatorname{{clamp}}(u,-{T.num(limit)},{T.num(limit)})", ("g", "u"),
                      lambda e: (e["g"].clamp(max=tiny_limit), e["u"].clamp(-tiny_limit, tiny_limit)), summary=True)]
        if has_act:
            steps.append(Step(rf"a={act}(g)", "a", sub(part, "act_fn", x="g")))
        steps += [Step(rf"E_i(x)=(a\odot u)\,{Wd}{'+b_{d,i}' if biases else ''}{T.maps(inner, d)}", "e_out", lambda e: down(e["a"] * e["u"], e), summary=True), *weigh]
        part.note("clamp", limit, "the module's limit")
        return Chain(steps, inputs, "y")

    part.note("count", n, "the fused weights' first axis")
    if zero > 0:
        part.note("zero_experts", True, "the preview model's routing choices past its last down projection")
        return part.choose("zero_experts", {"identity": lambda: _with_zero_experts(halves(), real, tiny_real, "identity"),
                                            "nothing": lambda: _with_zero_experts(halves(), real, tiny_real, "nothing")})
    variants = {"gated_halves": halves}
    if hasattr(part.tiny, "limit") and hasattr(part.tiny, "alpha"):
        variants = {"clamped_interleaved": clamped, **variants}
    elif swiglu_limit(part.tiny) is not None:  # a bound and no alpha: gate and up clamped, then SwiGLU (DeepSeek-V4)
        variants = {"clamped_halves": clamped_halves}
    return part.choose("experts", variants)


def _routing_steps(part: Part) -> list[Step]:
    """The routing rule a mixture applies itself to its router's logits: softmax, the top k, and the k
    weights renormalised, by their p-norm where the mixture holds a p (DBRX's moe_normalize_expert_weights),
    else by their sum, or left as they are: measured on the run."""
    k = _setting(part, ("top_k",), ("num_experts_per_tok",))
    tiny_k = _setting(part, ("top_k",), ("num_experts_per_tok",), part.ctx.tiny_config)
    p = _setting(part, ("moe_normalize_expert_weights",), ())
    tiny_p = _setting(part, ("moe_normalize_expert_weights",), (), part.ctx.tiny_config)
    n = _router_rows(part.full.get_submodule(next(r for r in ("gate", "router") if part.has(r))))
    head = [
        Step(rf"s=\operatorname{{softmax}}(z)\in\mathbb{{R}}^{{{T.num(n)}}}", "s", lambda e: e["logits"].softmax(-1), summary=True),
        Step(rf"\mathcal{{E}}=\operatorname{{top}}_{{{T.num(k)}}}(s)", "E", lambda e: e["s"].topk(tiny_k, dim=-1).indices, value="expert_indices", summary=True),
    ]

    def weights(rule: str) -> list[Step]:
        pick = Step(r"G_i=s_i\ \ (i\in\mathcal{E})", "G", lambda e: e["s"].gather(-1, e["E"]))
        if rule == "pnorm":
            norm = Step(rf"G_i\leftarrow G_i\big/\|G\|_{{{T.num(p)}}},\quad \|G\|_p=\big(\textstyle\sum_{{j\in\mathcal{{E}}}}|G_j|^p\big)^{{1/p}}",
                        "G", lambda e: e["G"] / e["G"].abs().pow(tiny_p).sum(-1, keepdim=True).pow(1 / tiny_p), value="expert_weights", summary=True)
        elif rule == "sum":
            norm = Step(r"G_i\leftarrow G_i\big/\textstyle\sum_{j\in\mathcal{E}}G_j", "G", lambda e: e["G"] / e["G"].sum(-1, keepdim=True),
                        value="expert_weights", summary=True)
        else:
            pick.value = "expert_weights"
            return [pick]
        return [pick, norm]

    def measured() -> list[Step]:
        # the three rules, each tried on the mixture's own run: the first that reproduces it is kept
        from atlas.proof.core import reproduce

        rules = (["pnorm"] if p is not None else []) + ["sum", "none"]
        return [rule for rule in rules
                if _routes_like(part, Chain([Step(r"z", "logits", lambda e: e["z_in"]), *head, *weights(rule)], [], ("G", "E")))]

    found = measured()
    rule = found[0] if found else ("pnorm" if p is not None else "sum")
    words = {"pnorm": "softmax, top-k, divided by their p-norm", "sum": "softmax, top-k, renormalised to sum to 1", "none": "softmax, top-k"}
    if p is not None:
        part.note("expert_weight_norm", p, "the mixture's moe_normalize_expert_weights: the p of the p-norm")
    how = ("no rule gives the weights the experts received on the run" if not found else
           "measured: the only rule that gives the weights the experts received on the run" if len(found) == 1 else
           f"measured: gives the weights the experts received on the run, as {' and '.join(words[r] for r in found[1:])} also does (the same values here)")
    part.note("routing", words[rule], how)
    return head + weights(rule)


def _routes_like(part: Part, trial: Chain) -> bool:
    """Whether ``trial`` (logits to weights and experts) gives the weights and experts the mixture handed
    its experts on the run, from the logits its router returned."""
    from atlas.proof.core import as64, difference, tolerance
    from atlas.proof.steps import Env, run_chain

    route = next(r for r in ("gate", "router") if part.has(r))
    experts = part.child("experts")
    logits = part.ctx.calls.get(f"{part.path}.{route}")
    call = experts.call if experts.path in part.ctx.calls else None
    if logits is None or call is None:
        return False
    z = as64(logits.output[0] if isinstance(logits.output, tuple) else logits.output)
    G, E = run_chain(trial, Env(lambda name: None, {"z_in": z}))
    ref_E, ref_G = as64(experts.argument("top_k_index", 1)), as64(experts.argument("top_k_weights", 2))
    order, ref_order = E.argsort(-1), ref_E.argsort(-1)
    if difference(E.gather(-1, order), ref_E.gather(-1, ref_order)) != 0:
        return False
    return difference(G.gather(-1, order), ref_G.gather(-1, ref_order)) <= tolerance(ref_G)


def _with_zero_experts(chain: Chain, real: int, tiny_real: int, rule: str) -> Chain:
    """The experts' chain where the choices from ``real`` on are zero-computation experts: such a slot's
    E_i(x) is x itself ("identity") or nothing ("nothing"), put in place of the gated MLP's result
    before the slot's weight multiplies it."""
    import torch

    steps = list(chain.steps)
    at = next(i for i, s in enumerate(steps) if s.out == "e_out") + 1
    if rule == "identity":
        tex = rf"E_i(x)=x\quad\text{{for a zero-computation expert, }}i\ge{T.num(real)}"
        fn = lambda e: torch.where((e["E"] >= tiny_real)[..., None], e["x"][:, None, :].expand_as(e["e_out"]), e["e_out"])
    else:
        tex = rf"E_i(x)=0\quad\text{{for a zero-computation expert, }}i\ge{T.num(real)}"
        fn = lambda e: torch.where((e["E"] >= tiny_real)[..., None], torch.zeros_like(e["e_out"]), e["e_out"])
    steps.insert(at, Step(tex, "e_out", fn, summary=True))
    return dataclasses.replace(chain, steps=steps)


def _mixture_selection(part: Part, route: str) -> str | None:
    """A per-expert buffer the mixture itself holds and hands to its router (MiniMax-M2)."""
    experts = _router_rows(part.tiny.get_submodule(route))
    own = {**dict(part.tiny.named_parameters(recurse=False)), **dict(part.tiny.named_buffers(recurse=False))}
    return next((n for n, t in own.items() if t.dim() == 1 and t.numel() == experts), None)


def _shared_gate(part: Part, route: str) -> str | None:
    """A child linear map with a single output beside the router: the shared expert's per-token gate."""
    import torch

    return next((n for n, m in part.tiny.named_children() if n != route and isinstance(m, torch.nn.Linear) and m.out_features == 1), None)


def _has_bias(part: Part, child: str) -> bool:
    return getattr(part.tiny.get_submodule(child), "bias", None) is not None


def dense_mixture(part: Part, route: str, shared: str | None) -> Chain:
    """Dense dispatch (Llama 4): the router scores every expert (0 for those not chosen); each expert gets
    every token, scaled by that score, and the experts' outputs are summed; a shared expert is added."""
    n = part.full.experts.gate_up_proj.shape[0]
    steps = [
        Step(r"x_{\mathrm{tok}}=x\ \text{as rows, one per token}", "xt", lambda e: e["x"].reshape(-1, e["x"].shape[-1])),
        Step(r"(S,\,z)=\operatorname{Router}(x_{\mathrm{tok}})", ("S", "z"), sub(part, route, x="xt"),
             value=("router_scores", "router_logits"), summary=True),
        Step(rf"X_e=S_{{:,e}}\odot x_{{\mathrm{{tok}}}}\quad\text{{every expert }}e=1..{T.num(n)}\text{{ gets every token, scaled by its score (0 where not chosen)}}",
             "X", lambda e: (e["S"].t()[:, :, None] * e["xt"][None]).reshape(-1, e["xt"].shape[-1]), summary=True),
        Step(r"Y=\operatorname{Experts}(X)", "Y", sub(part, "experts", x="X")),
        Step(r"y^{\mathrm{routed}}=\textstyle\sum_{e}Y_e", "yr", lambda e: e["Y"].reshape(e["S"].shape[1], -1, e["Y"].shape[-1]).sum(0),
             value="routed_output", summary=True),
    ]
    if shared:
        steps.append(Step(r"y^{\mathrm{shared}}=\operatorname{SharedMLP}(x_{\mathrm{tok}})", "ys", sub(part, shared, x="xt"),
                          value="shared_expert_output", summary=True))
        steps.append(Step(r"\Delta=y^{\mathrm{routed}}+y^{\mathrm{shared}}", "y", lambda e: e["yr"] + e["ys"], value="mlp_output", summary=True))
    else:
        steps.append(Step(r"\Delta=y^{\mathrm{routed}}", "y", lambda e: e["yr"], value="mlp_output", summary=True))
    part.note("dispatch", "every expert on every token, its input scaled by the token's score", "the experts' forward takes the rows alone")
    part.note("shared_expert", bool(shared), "the mixture's children")
    part.note("sub_steps", {"Router": f"{part.id}.{route}", "Experts": f"{part.id}.experts", **({"SharedMLP": f"{part.id}.{shared}"} if shared else {})}, "the mixture's children")
    return Chain(steps, [X], "y", output_element=0)


def mixture(part: Part) -> Chain:
    from atlas.model.structure import is_dense_dispatch

    names = dict(part.tiny.named_children())
    if "experts" in names and is_dense_dispatch(part.tiny.experts):
        route = next(n for n in ("gate", "router") if n in names)
        shared = next((n for n in ("shared_experts", "shared_expert", "shared_mlp") if n in names), None)
        return part.choose("dispatch", {"dense": lambda: dense_mixture(part, route, shared)})
    names = dict(part.tiny.named_children())
    route = next(n for n in ("gate", "router") if n in names)
    shared = next((n for n in ("shared_experts", "shared_expert", "shared_mlp") if n in names), None)
    handed = _mixture_selection(part, route)
    steps = [Step(r"b\ \text{the mixture's own per-expert selection bias, handed to the router}", "b", lambda e: e.w(handed))] if handed else []
    from atlas.proof.library import chain_of

    route_chain = chain_of(part.child(route))
    reads_ids = any(i.name == "ids" for i in route_chain.inputs)
    if route_chain.output == "z":
        # the router gives logits only: the mixture's own forward turns them into the routing (DBRX)
        # (named "logits", not "z": the pages title a child whose result is "z" as the model's head)
        steps += [Step(r"z=\operatorname{Router}(x)", "logits", sub(part, route), value="router_logits", summary=True)]
        steps += _routing_steps(part)
    else:
        steps.append(Step(r"(z,\,G,\,\mathcal{E})=\operatorname{Router}(x" + (",b" if handed else "") + (",t" if reads_ids else "") + ")", ("z", "G", "E"), sub(part, route),
                          value=("router_logits", "expert_weights", "expert_indices"), summary=True))
    steps += [
        Step(r"x_{\mathrm{tok}}=x\ \text{as rows, one per token}", "xt", lambda e: e["x"].reshape(-1, e["x"].shape[-1])),
        Step(r"y^{\mathrm{routed}}=\operatorname{Experts}(x_{\mathrm{tok}},\mathcal{E},G)", "yr", sub(part, "experts", x="xt"), value="routed_output", summary=True),
    ]
    gate = _shared_gate(part, route) if shared else None
    if shared:
        steps.append(Step(r"y^{\mathrm{shared}}=\operatorname{SharedMLP}(x)", "ys", sub(part, shared), value="shared_expert_output", summary=True))
    if gate:
        # a one-output linear beside the shared expert scales its output per token by a sigmoid (Qwen2-MoE)
        d = part.ctx.full_config.hidden_size
        steps += [
            Step(rf"s=\sigma(x\,w_{{s}}^{{\top}}),\quad w_s\in\mathbb{{R}}^{{{T.num(d)}}}\quad\text{{one gate per token}}", "sg",
                 lambda e: (e["x"] @ e.w(f"{gate}.weight").T + (e.w(f"{gate}.bias") if _has_bias(part, gate) else 0)).sigmoid(), summary=True),
            Step(r"y^{\mathrm{shared}}\leftarrow s\,y^{\mathrm{shared}}", "ys", lambda e: e["sg"] * e["ys"]),
        ]
    if shared:
        steps.append(Step(r"\Delta=y^{\mathrm{routed}}+y^{\mathrm{shared}}", "y", lambda e: e["yr"].reshape(e["x"].shape) + e["ys"], value="mlp_output", summary=True))
    else:
        steps.append(Step(r"\Delta=y^{\mathrm{routed}}", "y", lambda e: e["yr"].reshape(e["x"].shape), value="mlp_output", summary=True))
    part.note("shared_expert", bool(shared), "the mixture's children")
    if gate:
        part.note("shared_expert_gate", gate, "the mixture's children: a linear map with one output")
    part.note("sub_steps", {"Router": f"{part.id}.{route}", "Experts": f"{part.id}.experts", **({"SharedMLP": f"{part.id}.{shared}"} if shared else {})}, "the mixture's children")
    if reads_ids:
        part.note("hash_routing", True, "the router reads the token ids")
    return Chain(steps, [X, *([Input("ids", "t", "input_ids", "the token ids, which choose the experts")] if reads_ids else [])], "y")


# --- experts stored stacked: every expert's rows in one 2-D matrix per projection (DBRX) -------------


def stacked_matrices(module) -> list[str] | None:
    """Three 2-D weights of one shape held by the module itself, none of them a Linear's: the gate, up
    and down rows of every expert stacked along the first axis (DBRX's w1, v1, w2), in the order held."""
    own = dict(module.named_parameters(recurse=False))
    if len(own) != 3 or any(p.dim() != 2 for p in own.values()) or len({tuple(p.shape) for p in own.values()}) != 1:
        return None
    return list(own)


def is_expert_glu(module) -> bool:
    """A gated MLP that holds every expert's stacked rows and is handed one expert's slices at each call:
    three stacked matrices and an activation, nothing else."""
    children = list(module.children())
    return stacked_matrices(module) is not None and len(children) == 1 and not any(True for _ in children[0].parameters())


def is_stacked_experts(module) -> bool:
    """Experts with no tensors of their own whose one child is such a gated MLP (DBRX's experts.mlp)."""
    children = list(module.children())
    return not any(True for _ in module.parameters(recurse=False)) and len(children) == 1 and is_expert_glu(children[0])


def _experts_count(part: Part, config) -> int:
    return routed_experts(config)


def expert_glu(part: Part) -> Chain:
    """One expert's gated MLP on the slices of the stacked matrices it is handed: the activation of the
    first map times the second, then the third map (its rows read as inner × width, no transpose)."""
    names = stacked_matrices(part.tiny)
    act_name = next(n for n, _ in part.tiny.named_children())
    n = _experts_count(part, part.ctx.full_config)
    rows, d = part.full.get_parameter(names[0]).shape
    inner = rows // n
    import inspect

    params = [p for p in inspect.signature(part.tiny.forward).parameters if p != "self"]
    handed = params[1:4]  # the three slices, in the order the forward takes them
    inputs = [Input("x", "x", params[0], "the tokens routed to this expert, one row each")] + [Input(sym, s, arg, f"the slice of {name} for the expert the tokens were routed to ({T.num(inner)} rows)")
                    for sym, s, arg, name in zip(("A", "B", "C"), ("W_1", "V_1", "W_2"), handed, names)]
    act = ACT_NAMES[activation_name(part.child(act_name))]

    def chain(gate_first: bool) -> Chain:
        first, second = ("A", "B") if gate_first else ("B", "A")
        gs, us = ("W_1", "V_1") if gate_first else ("V_1", "W_1")
        return Chain([
            Step(rf"g=x\,{gs}^{{\top}}{T.maps(d, inner)}", "g", lambda e: (e[first] @ e["x"][..., None]).squeeze(-1)),
            Step(rf"u=x\,{us}^{{\top}}{T.maps(d, inner)}", "u", lambda e: (e[second] @ e["x"][..., None]).squeeze(-1)),
            Step(rf"a={act}(g)", "a", sub(part, act_name, x="g")),
            Step(rf"y=(a\odot u)\,W_2,\quad W_2\in\mathbb{{R}}^{{{T.num(inner)}\times{T.num(d)}}}", "y",
                 lambda e: ((e["a"] * e["u"])[..., None, :] @ e["C"]).squeeze(-2), summary=True),
        ], inputs, "y")

    part.note("stacked", {"matrices": names, "experts": n, "rows_each": inner}, "the module's three 2-D weights, rows = experts × inner width")
    return part.choose("gated_map", {"first_gated": lambda: chain(True), "second_gated": lambda: chain(False)})


def stacked_experts(part: Part) -> Chain:
    """Each routing slot's expert: its rows cut from the stacked matrices, its gated MLP run on the token,
    weighted by the slot's weight, and the slots summed."""
    from atlas.proof.steps import run_chain

    glu_name = next(n for n, _ in part.tiny.named_children())
    glu = part.child(glu_name)
    names = stacked_matrices(part.tiny.get_submodule(glu_name))
    n = _experts_count(part, part.ctx.full_config)
    rows, d = part.full.get_submodule(glu_name).get_parameter(names[0]).shape
    inner = rows // n
    from atlas.proof.library import chain_of

    glu_chain = chain_of(glu)
    inputs = [TOKENS, Input("E", r"\mathcal{E}", "top_k_index", "the experts each token's routing slots chose"),
              Input("G", "G", "top_k_weights", "each slot's weight")]

    def slices(e):
        tiny_n = _experts_count(part, part.ctx.tiny_config)
        return tuple(e.w(f"{glu_name}.{name}").view(tiny_n, -1, e.w(f"{glu_name}.{name}").shape[-1])[e["E"]] for name in names)

    def run_glu(e):
        x = e["xt"][:, None, :]  # each token against each of its slots
        return run_chain(glu_chain, e.child(glu_name, {"x": x, "A": e["A"], "B": e["B"], "C": e["C"]}))

    run_glu.child_id, run_glu.child_name = glu.id, glu_name
    run_glu.child_inputs = {"x": "xt", "A": "A", "B": "B", "C": "C"}
    listed = ", ".join(names).replace("_", r"\_")
    steps = [
        Step(r"x_{\mathrm{tok}}=x\ \text{as rows, one per token}", "xt", lambda e: e["x"].reshape(-1, e["x"].shape[-1])),
        Step(rf"W_{{1,i}},V_{{1,i}},W_{{2,i}}=\text{{rows }}{T.num(inner)}\,i\ \text{{to}}\ {T.num(inner)}(i+1)-1\ \text{{of {listed}}}\quad(\in\mathbb{{R}}^{{{T.num(inner)}\times{T.num(d)}}},\ i\in\mathcal{{E}})",
             ("A", "B", "C"), slices),
        Step(r"E_i(x)=\operatorname{ExpertGLU}(x;\,W_{1,i},V_{1,i},W_{2,i})\quad\text{for each slot's expert }i", "e_out", run_glu, summary=True),
        Step(r"o_j=G_j\,E_{i_j}(x)\quad\text{each routing slot }j", "o", lambda e: e["G"][..., None] * e["e_out"], value="expert_outputs"),
        Step(r"y=\textstyle\sum_{j}o_j", "y", lambda e: e["o"].sum(1), value="routed_output", summary=True),
    ]
    part.note("count", n, "the stacked matrices' rows over the expert width")
    return Chain(steps, inputs, "y")


def _slot_weights(part: Part, renormalize: bool, scale: float) -> list[Step]:
    """The chosen experts' weights from their scores: gathered, renormalized over the choice where the
    router does, then scaled by routed_scaling_factor where it is not 1."""
    steps = [Step(r"G_i=s_i\ \ (i\in\mathcal{E})", "G", lambda e: e["s"].gather(-1, e["E"]))]
    if renormalize:
        steps.append(Step(r"G_i\leftarrow G_i\big/\textstyle\sum_{j\in\mathcal{E}}G_j", "G", lambda e: e["G"] / e["G"].sum(-1, keepdim=True), summary=True))
    if scale != 1.0:
        tiny_scale = _setting(part, ("routed_scaling_factor",), ("routed_scaling_factor",), part.ctx.tiny_config) or 1.0
        steps.append(Step(rf"G_i\leftarrow{T.num(float(scale))}\,G_i", "G", lambda e: e["G"] * tiny_scale, summary=True))
    return steps
