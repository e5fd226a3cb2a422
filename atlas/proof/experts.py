"""A mixture's experts: each routing slot's gated MLP on its expert's share of the weights, weighted and summed.

Fused 3-D weights (gate and up in halves, or interleaved and clamped as gpt-oss's), every expert on
every token (dense dispatch, Llama 4), zero-computation experts (LongCat-Flash), and experts stored
stacked in 2-D matrices whose one gated MLP is handed each expert's rows (DBRX).
"""

from __future__ import annotations

import dataclasses

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof.library import activation_call, gate_activation, swiglu_limit
from atlas.proof.router import TOKENS
from atlas.proof.steps import Chain, Input, Step
from atlas.model.sizes import routed_experts


def dense_experts(part: Part) -> Chain:
    """Every expert on its own block of rows (the mixture lays the tokens out once per expert, each copy
    already scaled): a gated MLP on its slice of the fused 3-D weights; the rows come back expert by expert."""
    d = part.ctx.full_config.hidden_size
    gate_up = part.full.gate_up_proj
    n = gate_up.shape[0]
    stored_in_out = gate_up.shape[1] == d and part.full.down_proj.shape[2] == d
    inner = (gate_up.shape[2] if stored_in_out else gate_up.shape[1]) // 2
    act = gate_activation(part, "act_fn", E.Sym("g", "g"))
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
        if act is not None:
            steps.append(Step(expr=E.Let(E.Sym("a", "a"), act)))
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

    # Fewer down projections than routing choices: the experts past the last down projection compute
    # nothing of their own (LongCat-Flash's zero-computation experts); what they return is measured.
    # (Measured on the preview model's own tensors: the full model's may be cut to what the files store.)
    real, tiny_real = part.full.down_proj.shape[0], part.tiny.down_proj.shape[0]
    zero = part.tiny.gate_up_proj.shape[0] - tiny_real

    x, chosen, weights = E.Sym("x", "x"), E.Sym("E", r"\mathcal{E}", False), E.Sym("G", "G")
    gu, e_out, o = E.Sym("gu", r"[g;\,u]"), E.Sym("e_out", "E_i(x)"), E.Sym("o", "o")

    def down(h: E.Expr) -> A.ExpertMatMul:
        return A.ExpertMatMul(h, E.Weight("down_proj", "W_{d,i}"), chosen, stored_in_out,
                              E.Weight("down_proj_bias", "b_{d,i}") if biases else None, last=tiny_real - 1)

    projected = A.ExpertMatMul(x, E.Weight("gate_up_proj", "W_{gu,i}"), chosen, stored_in_out,
                               E.Weight("gate_up_proj_bias", "b_{gu,i}") if biases else None)
    first = Step(expr=E.Let(gu, projected, "(each slot's expert i)", maps=(d, T.times(2, inner))), summary=True)
    weigh = [
        Step(expr=E.Let(o, A.slot_weighted(weights, e_out), "(each slot j)"), value="expert_outputs", summary=True),
        Step(expr=E.Let(E.Sym("y", "y"), A.slot_sum(o)), value="routed_output", summary=True),
    ]
    tiny_inner = (part.tiny.gate_up_proj.shape[2] if stored_in_out else part.tiny.gate_up_proj.shape[1]) // 2  # as ``inner``, on the preview

    g, u, a = E.Sym("g", "g"), E.Sym("u", "u"), E.Sym("a", "a")

    def split(interleaved: bool) -> list[Step]:
        """Gate and up from the fused projection: its two halves, or its even and odd columns."""
        if interleaved:
            return [Step(expr=E.Let(g, A.even_columns(gu)), summary=True), Step(expr=E.Let(u, A.odd_columns(gu)), summary=True)]
        half = E.Size(inner, tiny_inner)
        return [Step(expr=E.Let(g, A.first_columns(gu, half)), summary=True), Step(expr=E.Let(u, A.last_columns(gu, half)), summary=True)]
    act = gate_activation(part, "act_fn", g)

    def clamps(bound) -> list[Step]:
        """The gate clamped from above and the up projection on both sides, each its own expression."""
        return [Step(expr=E.Let(g, E.clamp_max(g, bound)), summary=True), Step(expr=E.Let(u, E.clamp(u, bound)), summary=True)]

    def halves() -> Chain:
        steps = [first, *split(interleaved=False)]
        if act is not None:
            steps.append(Step(expr=E.Let(a, act), summary=True))
        steps += [Step(expr=E.Let(e_out, down(a * u), maps=(inner, d)), summary=True), *weigh]
        return Chain(steps, inputs, "y")

    def clamped() -> Chain:
        limit, alpha = part.full.limit, part.full.alpha
        tiny_limit, tiny_alpha = part.tiny.limit, part.tiny.alpha
        steps = [
            first,
            *split(interleaved=True),
            *clamps(E.Size(limit, tiny_limit)),
            Step(expr=E.Let(a, g * E.sigmoid(E.Size(alpha, tiny_alpha) * g)), summary=True),
            Step(expr=E.Let(e_out, down((u + 1) * a), maps=(inner, d)), summary=True),
            *weigh,
        ]
        return Chain(steps, inputs, "y")

    def clamped_halves() -> Chain:
        limit, tiny_limit = swiglu_limit(part.full), swiglu_limit(part.tiny)
        steps = [first, *split(interleaved=False), *clamps(E.Size(limit, tiny_limit))]
        if act is not None:
            steps.append(Step(expr=E.Let(a, act), summary=True))
        steps += [Step(expr=E.Let(e_out, down(a * u), maps=(inner, d)), summary=True), *weigh]
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
    def chain(gate_first: bool) -> Chain:
        first, second = ("A", "B") if gate_first else ("B", "A")
        gs, us = ("W_1", "V_1") if gate_first else ("V_1", "W_1")
        return Chain([
            Step(rf"g=x\,{gs}^{{\top}}{T.maps(d, inner)}", "g", lambda e: (e[first] @ e["x"][..., None]).squeeze(-1)),
            Step(rf"u=x\,{us}^{{\top}}{T.maps(d, inner)}", "u", lambda e: (e[second] @ e["x"][..., None]).squeeze(-1)),
            Step(expr=E.Let(E.Sym("a", "a"), activation_call(part, act_name, E.Sym("g", "g")))),
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
