"""A mixture's router: its logits, and the rule that turns them into each token's experts and their weights.

Softmax or sigmoid scores, a selection bias (held by the router, by a child of it, or handed by the
mixture), groups, renormalization and scaling, a score function held as a child, a frozen table of
experts by token id, dense scores (Llama 4), SparseMixer (Phi-3.5-MoE), a router that norms its input
first (Gemma 4): where the structure does not settle the rule, the preview run measures it.
"""

from __future__ import annotations

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, activation_call, apply_child, linear_call
from atlas.proof.steps import Chain, Input, Step
from atlas.inputs.config_keys import TOP_K_KEYS


ROUTER_OUTPUTS = ("router_logits", "expert_weights", "expert_indices")
# the router's names: its tokens, logits, scores, what it chooses by, the experts chosen and their weights
_X, _Z, _S, _C = E.Sym("x", "x"), E.Sym("z", "z"), E.Sym("s", "s"), E.Sym("c", "c")
_CHOSEN, _G = E.Sym("E", r"\mathcal{E}", False), E.Sym("G", "G")
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
    bias = E.Weight(name, "b", (tensor.numel(),))
    return Chain([Step(expr=E.Let(E.Sym("y", "y"), _X + A.flat(bias)), summary=True)], [X], "y")


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

    tiny_d = part.tiny.get_submodule(projection).weight.shape[1]

    def build(root: bool) -> Chain:
        xh = E.Sym("xh", r"\hat x")
        steps = [Step(expr=E.Let(_X, A.rows_of(_X), "(as rows, one per token)")),
                 Step(expr=E.Let(xh, apply_child(part, norm, lambda a: rf"\operatorname{{Norm}}({a})", x=_X)), summary=True)]
        if gain:
            gained = xh * E.Weight(gain, "g", (d,))
            if root:
                gained = gained / E.Size(d ** 0.5, tiny_d ** 0.5, rf"\sqrt{{{T.num(d)}}}")
            steps.append(Step(expr=E.Let(xh, gained, f"(g: the router's {gain})"), summary=True))
        steps += [
            Step(expr=E.Let(_Z, linear_call(part, projection, xh, "W_r"), maps=(d, n)), value="router_logits", summary=True),
            Step(expr=E.Let(_S, E.softmax(_Z)), summary=True),
            _top(_S, k, tiny_k),
            *_slot_weights(part, renormalize=True, scale=1.0),
        ]
        if per_expert:
            steps.append(Step(expr=E.Let(_G, _G * A.at_chosen(E.Weight(per_expert, "c", (n,)), _CHOSEN),
                                         f"(c: the router's {per_expert}, one number per expert)"), summary=True))
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
        logits = E.MatMul(A.rows_of(_X), E.Weight(at + "weight", "W_r", (n, d)))
        if has_bias:
            logits = logits + E.Weight(at + "bias", "b_r")
        return Step(expr=E.Let(_Z, logits), value="router_logits", summary=True)

    def choose_by() -> Step:
        """What the experts are chosen by: the scores, plus the selection bias where there is one."""
        if selection:
            return Step(expr=E.Let(_C, _S + E.Weight(selection, "b", (n,)), "(to choose by)"))
        if handed:
            return Step(expr=E.Let(_C, _S + E.Sym("b", "b"), "(to choose by)"))
        return Step(expr=E.Let(_C, _S))

    def scored(scoring: str, renormalize: bool, epsilon: float | None = None) -> Chain:
        steps = [logits_step(), Step(expr=E.Let(_S, E.sigmoid(_Z) if scoring == "sigmoid" else E.softmax(_Z)), summary=True)]
        steps.append(choose_by())
        if groups > 1:
            size = n // groups

            def grouped(e):
                c = e["c"]
                g = c.view(c.shape[0], tiny_groups, -1).topk(2, dim=-1).values.sum(-1)
                keep = torch.zeros_like(g).scatter_(1, g.topk(tiny_topk_group, dim=-1).indices, 1).bool()
                mask = keep.unsqueeze(-1).expand(-1, -1, c.shape[1] // tiny_groups).reshape(c.shape)
                return c.masked_fill(~mask, float("-inf"))

            steps.append(Step(rf"c_i\leftarrow-\infty\ \text{{outside the {T.num(topk_group)} of {T.num(groups)} groups (of {T.num(size)}) with the largest top-2 sums of }}c", "c", grouped))
        steps.append(_top(_C, k, tiny_k))
        steps += _slot_weights(part, renormalize, scale, epsilon)
        return Chain(steps, [TOKENS, *bias_input], ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    # a score function the router holds as a child without tensors (DeepSeek-V4's score_fn: √softplus),
    # its formula measured by the activation's own chain
    score = next((name for name, c in part.tiny.named_children() if not any(True for _ in c.parameters())), None)
    # a frozen table from token id to the experts chosen (DeepSeek-V4's hash-routed blocks): an integer
    # buffer of one row per vocabulary entry and one column per routing slot
    table = next((name for name, b in part.tiny.named_buffers(recurse=False)
                  if not b.is_floating_point() and b.dim() == 2 and b.shape[1] == tiny_k), None)

    def child_scored(renormalize: bool) -> Chain:
        steps = [logits_step(), Step(expr=E.Let(_S, activation_call(part, score, _Z)), summary=True)]
        inputs = [TOKENS]
        if table:
            vocab = getattr(part.full, table).shape[0]
            steps.append(Step(rf"\mathcal{{E}}=T[t]\quad\text{{the {T.num(k)} experts a frozen table of }}{T.num(vocab)}\text{{ rows gives the token id }}t"
                              r"\text{ (the scores do not choose)}", "E", lambda e: e.w(table)[e["ids"].reshape(-1)].long(), summary=True))
            inputs.append(Input("ids", "t", "input_ids", "the token ids, which alone choose the experts"))
        else:
            steps += [choose_by(), _top(_C, k, tiny_k)]
        steps += _slot_weights(part, renormalize, scale)
        if table:
            part.note("hash_routing", True, "the router holds an integer table of one row per token id and one column per routing slot")
        return Chain(steps, inputs, ("z", "G", "E"), output_values=ROUTER_OUTPUTS)

    def topk_softmax() -> Chain:
        return Chain([
            logits_step(),
            _top(_Z, k, tiny_k),
            Step(expr=E.Let(_G, E.softmax(A.at_chosen(_Z, _CHOSEN)), "(a softmax over the chosen experts' logits alone)"), summary=True),
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
        "softmax_renormalized_epsilon": lambda: scored("softmax", True, RENORMALIZATION_EPSILON),
        "sigmoid_renormalized_epsilon": lambda: scored("sigmoid", True, RENORMALIZATION_EPSILON),
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


def _top(scores: E.Sym, k: int, tiny_k: int) -> Step:
    """The experts chosen: the k largest of ``scores`` (their indices)."""
    return Step(expr=E.Let(_CHOSEN, E.topk(scores, E.Size(k, tiny_k))), summary=True)


# A renormalization that adds a small number to the sum (LFM2-MoE's router writes 1e-6 into its forward):
# a float64 run tells it from a plain sum, so it is a variant of its own. (DeepSeek-V3's 1e-20 is below
# float64's resolution of a sum near one: the plain sum is what its run gives.)
RENORMALIZATION_EPSILON = 1e-6


def _renormalized(weights: E.Sym, epsilon: float | None = None) -> E.Expr:
    """The chosen experts' weights divided by their sum (plus ``epsilon`` where the router adds one)."""
    total = E.Mean(weights, total=True)
    return weights / (total + E.Size(epsilon, epsilon) if epsilon else total)


def _slot_weights(part: Part, renormalize: bool, scale: float, epsilon: float | None = None) -> list[Step]:
    """The chosen experts' weights from their scores: gathered, renormalized over the choice where the
    router does, then scaled by routed_scaling_factor where it is not 1."""
    steps = [Step(expr=E.Let(_G, A.at_chosen(_S, _CHOSEN)), summary=True)]
    if renormalize:
        steps.append(Step(expr=E.Let(_G, _renormalized(_G, epsilon)), summary=True))
    if scale != 1.0:
        tiny_scale = _setting(part, ("routed_scaling_factor", "route_scale"), ("routed_scaling_factor", "route_scale"), part.ctx.tiny_config) or 1.0
        steps.append(Step(expr=E.Let(_G, E.Size(float(scale), tiny_scale) * _G), summary=True))
    return steps
