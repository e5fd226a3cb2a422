"""A mixture's router: its logits, and the rule that turns them into each token's experts and their weights.

Softmax or sigmoid scores, a selection bias (held by the router, by a child of it, or handed by the
mixture), groups, renormalization and scaling, a score function held as a child, a frozen table of
experts by token id, dense scores (Llama 4), SparseMixer (Phi-3.5-MoE), a router that norms its input
first (Gemma 4): where the structure does not settle the rule, the preview run measures it.
"""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import ACT_NAMES, X, activation_name, sub
from atlas.proof.steps import Chain, Input, Step
from atlas.inputs.config_keys import TOP_K_KEYS


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
    scale = _setting(part, ("routed_scaling_factor", "route_scale"), ("routed_scaling_factor", "route_scale")) or 1.0
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


def _slot_weights(part: Part, renormalize: bool, scale: float) -> list[Step]:
    """The chosen experts' weights from their scores: gathered, renormalized over the choice where the
    router does, then scaled by routed_scaling_factor where it is not 1."""
    steps = [Step(r"G_i=s_i\ \ (i\in\mathcal{E})", "G", lambda e: e["s"].gather(-1, e["E"]))]
    if renormalize:
        steps.append(Step(r"G_i\leftarrow G_i\big/\textstyle\sum_{j\in\mathcal{E}}G_j", "G", lambda e: e["G"] / e["G"].sum(-1, keepdim=True), summary=True))
    if scale != 1.0:
        tiny_scale = _setting(part, ("routed_scaling_factor", "route_scale"), ("routed_scaling_factor", "route_scale"), part.ctx.tiny_config) or 1.0
        steps.append(Step(rf"G_i\leftarrow{T.num(float(scale))}\,G_i", "G", lambda e: e["G"] * tiny_scale, summary=True))
    return steps
