"""A mixture of experts: its router, then its experts (or every expert on every token), a shared expert added.

The router's rules are ``atlas.proof.router``'s and the experts' ``atlas.proof.experts``'; here, the
mixture that runs them in turn, and the routing rule a mixture applies itself to logits its router
returns alone (DBRX), measured on the run.
"""

from __future__ import annotations

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, apply_child, linear_call, sub
from atlas.proof.router import _CHOSEN, _G, _S, _X, _Z, _router_rows, _setting, _slot_weights, _top
from atlas.proof.steps import Chain, Input, Step


# a router's logits the mixture routes by itself, printed z: named "logits" in the chain, as the pages
# title a child whose result is "z" as the model's head
_LOGITS = E.Sym("logits", "z")
# ‖G‖_p = (Σ_j |G_j|^p)^{1/p} over the chosen experts' weights: printed by its definition, which is what runs
_p_norm = E.Function("p-norm", None, lambda g, p: rf"\|{g}\|_{{{p}}}",
                     definition=lambda g, p: E.Mean(_magnitude(g) ** p, total=True) ** (1 / p), stated=True)
_magnitude = E.Function("abs", lambda a: a.abs(), lambda a: f"|{a}|")


def _routing_steps(part: Part) -> list[Step]:
    """The routing rule a mixture applies itself to its router's logits: softmax, the top k, and the k
    weights renormalised, by their p-norm where the mixture holds a p (DBRX's moe_normalize_expert_weights),
    else by their sum, or left as they are: measured on the run."""
    k = _setting(part, ("top_k",), ("num_experts_per_tok",))
    tiny_k = _setting(part, ("top_k",), ("num_experts_per_tok",), part.ctx.tiny_config)
    p = _setting(part, ("moe_normalize_expert_weights",), ())
    tiny_p = _setting(part, ("moe_normalize_expert_weights",), (), part.ctx.tiny_config)
    head = [Step(expr=E.Let(_S, E.softmax(_LOGITS)), summary=True), _top(_S, k, tiny_k)]
    head[-1].value = "expert_indices"

    def weights(rule: str) -> list[Step]:
        steps = _slot_weights(part, rule == "sum", 1.0)
        if rule == "pnorm":
            steps.append(Step(expr=E.Let(_G, _G / _p_norm(_G, E.Size(p, tiny_p, "p", stated=True))), summary=True))
        steps[-1].value = "expert_weights"
        return steps

    def measured() -> list[Step]:
        # the three rules, each tried on the mixture's own run: the first that reproduces it is kept
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


def _mixture_selection(part: Part, route: str) -> str | None:
    """A per-expert buffer the mixture itself holds and hands to its router (MiniMax-M2)."""
    experts = _router_rows(part.tiny.get_submodule(route))
    own = {**dict(part.tiny.named_parameters(recurse=False)), **dict(part.tiny.named_buffers(recurse=False))}
    return next((n for n, t in own.items() if t.dim() == 1 and t.numel() == experts), None)


def _shared_gate(part: Part, route: str) -> str | None:
    """A child linear map with a single output beside the router: the shared expert's per-token gate."""
    import torch

    return next((n for n, m in part.tiny.named_children() if n != route and isinstance(m, torch.nn.Linear) and m.out_features == 1), None)


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


def _output_norm(part: Part, taken: set) -> str | None:
    """A child norm beside the router, experts and shared expert: one gain vector of the width and no
    children, which the mixture applies to its summed output (A.X K1's post_mlp_layernorm)."""
    for name, child in part.tiny.named_children():
        own = dict(child.named_parameters(recurse=False))
        if name not in taken and not list(child.children()) and set(own) <= {"weight", "bias"} and "weight" in own and own["weight"].dim() == 1:
            return name
    return None


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
    x = _X  # the tokens the mixture is given
    if route_chain.output == "z":
        # the router gives logits only: the mixture's own forward turns them into the routing (DBRX)
        router = apply_child(part, route, lambda a: rf"\operatorname{{Router}}({a})", x=x)
        steps += [Step(expr=E.Let(_LOGITS, router), value="router_logits", summary=True)]
        steps += _routing_steps(part)
    else:
        # the router's own inputs: the tokens, the selection bias the mixture hands it, the token ids
        feeds = {"x": x, **({"b": E.Sym("b", "b")} if handed else {}), **({"ids": E.Sym("ids", "t")} if reads_ids else {})}
        router = apply_child(part, route, lambda *a: rf"\operatorname{{Router}}({','.join(a)})", **feeds)
        steps.append(Step(expr=E.Let((_Z, _G, _CHOSEN), router),
                          value=("router_logits", "expert_weights", "expert_indices"), summary=True))
    rows = E.Sym("xt", r"x_{\mathrm{tok}}")
    yr, ys, delta = E.Sym("yr", r"y^{\mathrm{routed}}"), E.Sym("ys", r"y^{\mathrm{shared}}"), E.Sym("y", r"\Delta")
    experts = apply_child(part, "experts", lambda t, chosen, weights: rf"\operatorname{{Experts}}({t},{chosen},{weights})",
                          x=rows, E=E.Sym("E", r"\mathcal{E}"), G=_G)
    steps += [
        Step(expr=E.Let(rows, A.rows_of(x), "(as rows, one per token)")),
        Step(expr=E.Let(yr, experts), value="routed_output", summary=True),
    ]
    gate = _shared_gate(part, route) if shared else None
    if shared:
        steps.append(Step(expr=E.Let(ys, apply_child(part, shared, lambda a: rf"\operatorname{{SharedMLP}}({a})", x=x)),
                          value="shared_expert_output", summary=True))
    if gate:
        # a one-output linear beside the shared expert scales its output per token by a sigmoid (Qwen2-MoE)
        sg = E.Sym("sg", "s")
        steps += [
            Step(expr=E.Let(sg, E.sigmoid(linear_call(part, gate, x, "w_s")), "one gate per token",
                            maps=(part.ctx.full_config.hidden_size, 1)), summary=True),
            Step(expr=E.Let(ys, sg * ys)),
        ]
    # the routed rows back in the input's shape, the shared expert's output added (its gate folded in, where it has one)
    routed = E.shaped_like(yr, x)
    after = _output_norm(part, {route, shared, "experts"})
    if after:
        # the sum normalised before the mixture returns it: Δ is the norm's output, the sum its input
        from atlas.proof.library import norm_call

        summed = E.Sym("ysum", r"y^{\mathrm{sum}}")
        steps.append(Step(expr=E.Let(summed, routed + ys if shared else routed), summary=True))
        steps.append(Step(expr=E.Let(delta, norm_call(part, after, summed)), value="mlp_output", summary=True))
        part.note("output_norm", after, "the mixture's children: a norm applied to its summed output")
    else:
        steps.append(Step(expr=E.Let(delta, routed + ys if shared else routed), value="mlp_output", summary=True))
    part.note("shared_expert", bool(shared), "the mixture's children")
    if gate:
        part.note("shared_expert_gate", gate, "the mixture's children: a linear map with one output")
    part.note("sub_steps", {"Router": f"{part.id}.{route}", "Experts": f"{part.id}.experts", **({"SharedMLP": f"{part.id}.{shared}"} if shared else {})}, "the mixture's children")
    if reads_ids:
        part.note("hash_routing", True, "the router reads the token ids")
    return Chain(steps, [X, *([Input("ids", "t", "input_ids", "the token ids, which choose the experts")] if reads_ids else [])], "y")
