"""The block (each arrangement of its norms, sublayers and adds) and the stack of blocks, as steps that run
their parts' chains; the whole model's steps around the stack are ``atlas.proof.whole_model``'s."""

from __future__ import annotations

import math

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part, as64
from atlas.proof.hyper import BLOCK_EXTRAS
from atlas.proof.library import X, apply_child, handed_residual, sub
from atlas.proof.positions import ROTARY, rotary_input
from atlas.proof.rwkv import halving_words, mixer_label
from atlas.proof.steps import Chain, Env, Input, Step, run_chain
from atlas.model.roles import block_roles
from atlas.model.structure import own_scalar


# the block's stream and its sublayers' contributions, each an environment name and its TeX
_X, _H, _XM, _HM, _Y = E.Sym("x", "x"), E.Sym("h", "h"), E.Sym("xm", "x'"), E.Sym("hm", "h'"), E.Sym("y", "y")
_DA, _DM = E.Sym("da", r"\Delta_{\mathrm{attn}}"), E.Sym("dm", r"\Delta_{\mathrm{ffn}}")
_R = E.Sym("R", T.c("R"))


def _apply(part: Part, name: str, label: str, x: E.Sym, rotary: bool = False, handed: E.Sym | None = None,
           whole: bool = False) -> E.Child:
    """Child ``name``'s own chain applied to ``x`` (and the stream ``handed`` to it, and the rotary angles
    R where ``rotary``), printed ``label(x; r, R)``; the child's first output unless ``whole``."""
    feeds = {"x": x, **({"r": handed} if handed is not None else {}), **({"R": _R} if rotary else {})}
    keys = list(feeds)

    def notation(*texts: str) -> str:
        args = "".join((r";\," if k == "r" else ",") + t for k, t in zip(keys[1:], texts[1:]))
        return f"{label}({texts[0]}{args})"

    return apply_child(part, name, notation, whole, **feeds)


def _scaled(delta: E.Sym, factor: float | None, tiny_factor: float, symbol: str | None = None) -> E.Expr:
    """A sublayer's contribution times the block's factor (printed at the checkpoint's, run at the tiny one's), or itself."""
    return delta if factor is None else E.Size(float(factor), tiny_factor, symbol) * delta


def block(part: Part) -> Chain:
    from atlas.proof import hyper, weighted

    if hyper.stream_roles(part.tiny):  # the residual is several streams, mixed by hyper-connections (DeepSeek-V4)
        return hyper.stream_block(part)
    if block_roles(part.tiny).sublayer_lists:
        return _list_block(part)
    factor = getattr(part.ctx.full_config, "residual_multiplier", None)
    depth = getattr(part.ctx.full_config, "scale_depth", None)
    if factor in (None, 1, 1.0) and depth is not None:
        return part.choose("residual_scale", {"config_scale_depth": lambda: _depth_scaled_block(part, depth), "none": lambda: _block(part, None)})
    r = block_roles(part.tiny)
    if r.residual_weights and factor in (None, 1, 1.0):  # the stream weighed per channel at each add (Doge)
        return weighted.weighted_block(part, lambda: _block(part, None))
    if r.ssm and r.attention and not r.linear_attention:  # attention and a state-space mixer side by side (Falcon-H1)
        return _two_mixers_block(part, r)
    if r.wrapper and factor in (None, 1, 1.0):
        return _wrapped_block(part, r)
    if factor in (None, 1, 1.0) and (r.ssm or not (r.attention and r.mlp)):
        return _block(part, None)  # a hybrid's block: one mixer, or a state-space mixer before the MLP; nothing runs side by side
    if factor in (None, 1, 1.0) and handed_residual(part.child(r.attention)):
        # The attention and the MLP add the stream themselves (BLOOM): which stream the block hands them,
        # its input or the normed copy (apply_residual_connection_post_layernorm), is measured on the run.
        return part.choose("residual", {"handed_input": lambda: _handed_residual_block(part, normed=False),
                                        "handed_normed": lambda: _handed_residual_block(part, normed=True)})
    if factor in (None, 1, 1.0) and r.attention_add_norm:  # the norms take the sums (GPT-1): against the adds alone, measured
        return part.choose("residual", {"norm_after_add": lambda: _post_norm_block(part, r), "sequential": lambda: _block(part, None)})
    if factor in (None, 1, 1.0):
        # Sequential (the MLP reads the stream after the attention's add) or parallel (both read the
        # block's input and both are added at once): measured on the run, never told by a name.
        variants = {"sequential": lambda: _block(part, None), "parallel": lambda: _parallel_block(part)}
        if _residual_factors(part.tiny):  # the block holds alpha and beta factors for its adds (MiniMax-Text-01)
            variants["normed_residual_scaled"] = lambda: _normed_residual_block(part)
        return part.choose("residual", variants)
    return part.choose("residual_scale", {"config_residual_multiplier": lambda: _block(part, factor), "none": lambda: _block(part, None)})


def _depth_scaled_block(part: Part, depth: float) -> Chain:
    """The block whose sublayer outputs are scaled by scale_depth / sqrt(number of blocks) at each add
    (MiniCPM): the factor shrinks as the stack deepens, so the tiny run's factor is its own."""
    full, tiny = part.ctx.full_config.num_hidden_layers, part.ctx.tiny_config.num_hidden_layers
    tiny_depth = getattr(part.ctx.tiny_config, "scale_depth", depth)
    return _block(part, depth / math.sqrt(full), tiny_factor=tiny_depth / math.sqrt(tiny),
                  times=rf"\tfrac{{{T.num(float(depth))}}}{{\sqrt{{{T.num(full)}}}}}")


def _scaled_output(part: Part, chain: Chain) -> Chain:
    """The block's chain with its output scaled by the block's own stored number, where it holds one (decided from
    the structure; the preview moves the number off 1, so a chain without the product would not reproduce the block)."""
    import copy
    import dataclasses

    name = own_scalar(part.tiny)
    if name is None:
        return chain
    steps = list(chain.steps)
    steps[-1] = copy.copy(steps[-1])  # the product below now gives the block's output
    steps[-1].value = None
    stored = E.Weight(name, "s", scalar=True)
    steps.append(Step(expr=E.Let(_Y, stored * _Y, f"(s: the block's stored {name}, one number per block)"),
                      value="layer_output", summary=True))
    part.note("output_scale", name, "the block holds one stored number of its own, which scales its output")
    return dataclasses.replace(chain, steps=steps)


def _block(part: Part, factor: float | None, tiny_factor: float | None = None, times: str | None = None) -> Chain:
    """Norms, attention, MLP and the two adds; ``factor`` scales each sublayer's contribution at its add
    (``tiny_factor`` on the preview run and ``times`` its TeX, where they are not the config's residual_multiplier)."""
    side = side_mixture(part.tiny)
    if side and len(side["norms"]) == 3:
        import itertools

        # which spare norm feeds the experts and which follows the MLP or the experts: measured
        return part.choose("side_mixture_norms", {
            f"experts' input {a}, after the MLP {b}, after the experts {c}":
                (lambda p=(a, b, c): _scaled_output(part, _plain_block(part, factor, tiny_factor, times, {**side, "roles": list(p)})))
            for a, b, c in itertools.permutations(side["norms"])})
    return _scaled_output(part, _plain_block(part, factor, tiny_factor, times, side))


def _plain_block(part: Part, factor: float | None, tiny_factor: float | None = None, times: str | None = None,
                 side: dict | None = None) -> Chain:
    r = block_roles(part.tiny)
    if r.sublayers == 1:
        return _one_sublayer(part, r, factor)
    if tiny_factor is None:
        tiny_factor = getattr(part.ctx.tiny_config, "residual_multiplier", 1.0) if factor is not None else 1.0
    steps: list[Step] = []
    inputs = [X]
    # the first sublayer: the attention, or a state-space mixer in its place (a hybrid's Mamba blocks)
    first, first_norm = (r.attention, r.attention_norm) if r.attention else (r.ssm, r.ssm_norm)
    first_values = ("attention_norm_output", "attention_output") if r.attention else ("ssm_norm_output", "ssm_output")
    first_label = r"\operatorname{Attn}" if r.attention else mixer_label(part.tiny.get_submodule(r.ssm))
    attn = part.child(first)
    rotary = attn.argument("position_embeddings") is not None
    if rotary:
        inputs.append(rotary_input(attn.argument("position_embeddings")))
    if first_norm:
        steps.append(Step(expr=E.Let(_H, _apply(part, first_norm, r"\operatorname{Norm}_1", _X, whole=True)),
                          value=first_values[0], summary=True))
    attn_in = _H if first_norm else _X
    steps.append(Step(expr=E.Let(_DA, _apply(part, first, first_label, attn_in, rotary)),
                      value=None if r.attention_post_norm else first_values[1], summary=True))
    if r.attention_post_norm:
        steps.append(Step(expr=E.Let(_DA, _apply(part, r.attention_post_norm, r"\operatorname{Norm}_2", _DA, whole=True)),
                          value="attention_output", summary=True))
    steps.append(Step(expr=E.Let(_XM, _X + _scaled(_DA, factor, tiny_factor, times)), value="layer_mid", summary=True))
    if r.mlp_norm:
        steps.append(Step(expr=E.Let(_HM, _apply(part, r.mlp_norm, r"\operatorname{Norm}_3", _XM, whole=True)),
                          value="mlp_norm_output", summary=True))
    mlp_in = _HM if r.mlp_norm else _XM
    if r.mlp is None and r.mlp_inline:
        steps += _inline_mlp_steps(part, r.mlp_inline, mlp_in)
    else:
        steps.append(Step(expr=E.Let(_DM, _apply(part, r.mlp, r"\operatorname{FFN}", mlp_in)),
                          value=None if r.mlp_post_norm else "mlp_output", summary=True))
    if r.block_shared:  # a shared expert beside the mixture, run by the block on the same input
        shared = E.Sym("ds", r"\Delta_{\mathrm{shared}}")
        steps.append(Step(expr=E.Let(shared, _apply(part, r.block_shared, r"\operatorname{Shared}", mlp_in, whole=True)),
                          value="shared_expert_output", summary=True))
        steps.append(Step(expr=E.Let(_DM, _DM + shared), summary=True))
    if side:  # a mixture of experts the block runs beside its MLP, on the stream before the MLP's norm (Gemma 4)
        steps += _side_mixture_steps(part, side, r)
    if r.mlp_post_norm:
        steps.append(Step(expr=E.Let(_DM, _apply(part, r.mlp_post_norm, r"\operatorname{Norm}_4", _DM, whole=True)),
                          value="mlp_output", summary=True))
    steps.append(Step(expr=E.Let(_Y, _XM + _scaled(_DM, factor, tiny_factor, times)), value="layer_output", summary=True))
    if side:
        part.note("side_mixture", side, "the block's own router and experts beside its MLP, and the norms around them (which norm does what: measured)")
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp, **({"ssm": r.ssm} if r.ssm else {})}, "the block's children by role")
    part.note("norms", {"before attention": first_norm, "after attention": r.attention_post_norm,
                        "before MLP": r.mlp_norm, "after MLP": r.mlp_post_norm}, "the block's children by role")
    if r.mlp is None and r.mlp_inline:
        part.note("inline_mlp", {"up": r.mlp_inline[0], "down": r.mlp_inline[1], "activation": r.mlp_inline[2]},
                  "the block's own children: its MLP has no module of its own")
    return Chain(steps, inputs, "y", output_element=0)


def _post_norm_block(part: Part, r) -> Chain:
    """A block that normalises the stream after each add (GPT-1): the attention reads the block's input, the MLP the
    first sum normalised, and the second sum normalised is the output."""
    attn = part.child(r.attention)
    rotary = attn.argument("position_embeddings") is not None
    inputs = [X] + ([rotary_input(attn.argument("position_embeddings"))] if rotary else [])
    steps = [
        Step(expr=E.Let(_DA, _apply(part, r.attention, r"\operatorname{Attn}", _X, rotary)), value="attention_output", summary=True),
        Step(expr=E.Let(_XM, _X + _DA), summary=True),
        Step(expr=E.Let(_XM, _apply(part, r.attention_add_norm, r"\operatorname{Norm}_1", _XM, whole=True),
                        "(the sum normalised: the stream the MLP reads)"), value="layer_mid", summary=True),
        Step(expr=E.Let(_DM, _apply(part, r.mlp, r"\operatorname{FFN}", _XM)), value="mlp_output", summary=True),
        Step(expr=E.Let(_Y, _XM + _DM), summary=True),
        Step(expr=E.Let(_Y, _apply(part, r.mlp_add_norm, r"\operatorname{Norm}_2", _Y, whole=True)),
             value="layer_output", summary=True),
    ]
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp}, "the block's children by role")
    no_norm = dict.fromkeys(("before attention", "after attention", "before MLP", "after MLP"))
    part.note("norms", {**no_norm, "after the attention's add": r.attention_add_norm, "after the MLP's add": r.mlp_add_norm}, "the block's children by role")
    return Chain(steps, inputs, "y", output_element=0)


RESIDUAL_FACTORS = ("attn_alpha_factor", "attn_beta_factor", "mlp_alpha_factor", "mlp_beta_factor")


def _residual_factors(block) -> tuple[float, ...] | None:
    """The four numbers a block holds for its adds (MiniMax's attn_alpha_factor and the rest), else None."""
    values = [getattr(block, n, None) for n in RESIDUAL_FACTORS]
    ok = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
    return tuple(float(v) for v in values) if ok else None


def _normed_residual_block(part: Part) -> Chain:
    """A block whose residual is its normalised input, not the input (MiniMax-Text-01): each add is
    alpha times the normalised stream plus beta times the sublayer's output, alpha and beta the block's
    own numbers (DeepNorm's alpha in the checkpoint's config)."""
    r = block_roles(part.tiny)
    aa, ab, ma, mb = (E.Size(full, tiny) for full, tiny in zip(_residual_factors(part.full), _residual_factors(part.tiny)))
    attn = part.child(r.attention)
    rotary = attn.argument("position_embeddings") is not None
    inputs = [X] + ([rotary_input(attn.argument("position_embeddings"))] if rotary else [])
    steps = [
        Step(expr=E.Let(_H, _apply(part, r.attention_norm, r"\operatorname{Norm}_1", _X, whole=True)), value="attention_norm_output", summary=True),
        Step(expr=E.Let(_DA, _apply(part, r.attention, r"\operatorname{Attn}", _H, rotary)), value="attention_output", summary=True),
        Step(expr=E.Let(_XM, aa * _H + ab * _DA, "(the residual is the normalised input, times the block's alpha)"),
             value="layer_mid", summary=True),
        Step(expr=E.Let(_HM, _apply(part, r.mlp_norm, r"\operatorname{Norm}_2", _XM, whole=True)), value="mlp_norm_output", summary=True),
        Step(expr=E.Let(_DM, _apply(part, r.mlp, r"\operatorname{FFN}", _HM)), value="mlp_output", summary=True),
        Step(expr=E.Let(_Y, ma * _HM + mb * _DM), value="layer_output", summary=True),
    ]
    part.note("residual_factors", dict(zip(RESIDUAL_FACTORS, (f.full for f in (aa, ab, ma, mb)))), "the block's own numbers, from the config")
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "after attention": None, "before MLP": r.mlp_norm, "after MLP": None},
              "the block's children by role")
    return Chain(steps, inputs, "y", output_element=0)


def _handed_residual_block(part: Part, normed: bool) -> Chain:
    """A sequential block whose attention and MLP are each handed the stream and add their own output to
    it (BLOOM): the block makes no add of its own. ``normed``: the stream handed is the norm's output
    rather than the sublayer's input (apply_residual_connection_post_layernorm)."""
    r = block_roles(part.tiny)
    steps: list[Step] = [Step(expr=E.Let(_H, _apply(part, r.attention_norm, r"\operatorname{Norm}_1", _X, whole=True)),
                              value="attention_norm_output", summary=True)]
    first, second = (_H, _HM) if normed else (_X, _XM)  # the stream each sublayer is handed
    steps.append(Step(expr=E.Let(_XM, _apply(part, r.attention, r"\operatorname{Attn}", _H, handed=first),
                                 f"(the attention adds the stream it is handed, {first.symbol}, to its own output)"),
                      value="layer_mid", summary=True))
    steps.append(Step(expr=E.Let(_HM, _apply(part, r.mlp_norm, r"\operatorname{Norm}_2", _XM, whole=True)), value="mlp_norm_output", summary=True))
    steps.append(Step(expr=E.Let(_Y, _apply(part, r.mlp, r"\operatorname{FFN}", _HM, handed=second),
                                 f"(the MLP adds the stream it is handed, {second.symbol}, to its own output)"),
                      value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "after attention": None, "before MLP": r.mlp_norm, "after MLP": None},
              "the block's children by role")
    part.note("handed_residual", "the normed stream" if normed else "the block's input, then the stream after the attention",
              "measured: the stream the sublayers are handed to add their output to")
    return Chain(steps, [X], "y", output_element=0)


def _routes_to(module, rows: int) -> bool:
    import torch

    from atlas.proof.library import has_epsilon

    linear = [c for c in module.children() if isinstance(c, torch.nn.Linear)]
    return (len(linear) == 1 and linear[0].out_features == rows
            and all(isinstance(c, torch.nn.Linear) or has_epsilon(c) for c in module.children()))


def side_mixture(block) -> dict[str, str] | None:
    """A router and routed experts held by the block itself beside its MLP (Gemma 4's 26B-A4B), with the
    block's norms no other role takes: {"router", "experts", "norms": [...]}; None where there are none."""
    from atlas.proof.library import has_epsilon

    r = block_roles(block)
    if r.experts or not r.mlp:
        return None
    kids = dict(block.named_children())
    import torch

    experts = next((n for n, m in kids.items() if isinstance(getattr(m, "gate_up_proj", None), torch.Tensor) and m.gate_up_proj.dim() == 3), None)
    rows = experts and kids[experts].gate_up_proj.shape[0]
    # the router: a child whose one linear map has a row per expert, beside nothing but norms
    router = next((n for n, m in kids.items() if n not in (r.attention, r.mlp) and _routes_to(m, rows)), None) if experts else None
    if not (experts and router):
        return None
    taken = {r.attention_norm, r.attention_post_norm, r.mlp_norm, r.mlp_post_norm}
    norms = [n for n, m in kids.items() if n not in taken and has_epsilon(m) and not any(True for _ in m.children())]
    return {"router": router, "experts": experts, "norms": norms}


def _side_mixture_steps(part: Part, side: dict, r) -> list[Step]:
    """The mixture beside the MLP: the router reads the stream x' itself, the experts read it through a
    norm of their own, and the dense MLP's and the experts' outputs each pass a norm before they are
    summed. Which of the block's three spare norms does which is measured on the run."""
    from atlas.proof.library import chain_of

    router, experts, norms = side["router"], side["experts"], side["norms"]
    if len(norms) != 3:
        from atlas.errors import AtlasError

        raise AtlasError(f"family {part.ctx.family.name}", f"component {part.id}",
                         f"a mixture beside the MLP with {len(norms)} norms of its own, not 3: no steps describe it yet")

    def steps_for(before: str, after_mlp: str, after_experts: str) -> list[Step]:
        chain_of(part.child(router))
        rows, normed, routed = E.Sym("xt", r"x'_{\mathrm{tok}}"), E.Sym("he", "h''"), E.Sym("de", r"\Delta_{\mathrm{moe}}")
        return [
            Step(expr=E.Let(_DM, _apply(part, after_mlp, r"\operatorname{Norm}_{5}", _DM, whole=True), "(the dense MLP's own post-norm)")),
            Step(expr=E.Let(rows, A.rows_of(_XM), "(as rows, one per token)")),
            # the router's three results (scores, gates, experts) are one step that runs its own chain
            Step(r"(s,\,G,\,\mathcal{E})=\operatorname{Router}(x'_{\mathrm{tok}})\quad\text{(the stream itself, not a normed copy)}", ("s", "G", "E"),
                 sub(part, router, x="xt"), value=(None, "expert_weights", "expert_indices"), summary=True),
            Step(expr=E.Let(normed, _apply(part, before, r"\operatorname{Norm}_{6}", rows, whole=True), "(the experts' own input norm)")),
            Step(r"\Delta_{\mathrm{moe}}=\operatorname{Experts}(h'',\mathcal{E},G)", "de", sub(part, experts, x="he"), value="routed_output", summary=True),
            Step(expr=E.Let(routed, E.shaped_like(_apply(part, after_experts, r"\operatorname{Norm}_{7}", routed, whole=True), _XM))),
            Step(expr=E.Let(_DM, _DM + routed, "(the MLP and the mixture side by side)"), summary=True),
        ]

    return steps_for(*side["roles"])


def _list_block(part: Part) -> Chain:
    """A block that holds its sublayers in lists and runs them in turn (LongCat-Flash): for each entry i, norm, attention
    and add, then norm, dense MLP and add; the mixture of experts reads the first post-attention norm's output, and its
    output joins the stream only at the block's end (a shortcut past the second pair of sublayers)."""
    r = block_roles(part.tiny)
    base = lambda name: name.rpartition(".")[0]
    attentions, attention_norms, mlp_norms = base(r.attention), base(r.attention_norm), base(r.mlp_norm)
    dense = next(n for n in r.sublayer_lists if n not in (attentions, attention_norms, mlp_norms))
    pairs = len(part.tiny.get_submodule(attentions))
    attn = part.child(r.attention)
    rotary = attn.argument("position_embeddings") is not None
    inputs = [X] + ([rotary_input(attn.argument("position_embeddings"))] if rotary else [])
    steps: list[Step] = []
    x = _X
    shortcut = E.Sym("m", "m")
    for i in range(pairs):
        n = i + 1
        first = i == 0
        h, a = E.Sym(f"h{i}", f"h_{{{n}}}"), E.Sym(f"a{i}", f"a_{{{n}}}")
        mid, hm = E.Sym(f"x{2 * i + 1}", f"x_{{{2 * i + 1}}}"), E.Sym(f"hm{i}", f"h'_{{{n}}}")
        f, after = E.Sym(f"d{i}", f"f_{{{n}}}"), E.Sym(f"x{2 * i + 2}", f"x_{{{2 * i + 2}}}")
        steps += [
            Step(expr=E.Let(h, _apply(part, f"{attention_norms}.{i}", rf"\operatorname{{Norm}}^{{\mathrm{{attn}}}}_{{{n}}}", x, whole=True)),
                 value="attention_norm_output" if first else None, summary=True),
            Step(expr=E.Let(a, _apply(part, f"{attentions}.{i}", rf"\operatorname{{Attn}}_{{{n}}}", h, rotary)),
                 value="attention_output" if first else None, summary=True),
            Step(expr=E.Let(mid, x + a), value="layer_mid" if first else None, summary=True),
            Step(expr=E.Let(hm, _apply(part, f"{mlp_norms}.{i}", rf"\operatorname{{Norm}}^{{\mathrm{{ffn}}}}_{{{n}}}", mid, whole=True)),
                 value="mlp_norm_output" if first else None, summary=True),
        ]
        if first:
            steps.append(Step(expr=E.Let(shortcut, _apply(part, r.mlp, r"\operatorname{MoE}", hm, whole=True), "(the shortcut: added at the block's end)"),
                              value="mlp_output", summary=True))
        steps += [
            Step(expr=E.Let(f, _apply(part, f"{dense}.{i}", rf"\operatorname{{MLP}}_{{{n}}}", hm, whole=True)), summary=True),
            Step(expr=E.Let(after, mid + f), summary=True),
        ]
        x = after
    steps.append(Step(expr=E.Let(_Y, x + shortcut), value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp, "dense_mlp": f"{dense}.0", "pairs": pairs}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "before MLP": r.mlp_norm}, "the block's children by role")
    return Chain(steps, inputs, "y", output_element=0)


def _inline_mlp_steps(part: Part, names: tuple, x: E.Sym) -> list[Step]:
    """An MLP whose layers the block calls itself (OPT): up projection, activation, down projection."""
    from atlas.proof.library import activation_call, linear_call, linear_dims

    up, down, act = names
    d, inner = linear_dims(getattr(part.full, up))[:2]
    f, a = E.Sym("f", "f"), E.Sym("a", "a")
    steps = [Step(expr=E.Let(f, linear_call(part, up, x, "W_1"), f"(the block's {up})", maps=(d, inner)))]
    if act:
        steps.append(Step(expr=E.Let(a, activation_call(part, act, f)), value="mlp_activation", summary=True))
    else:
        steps.append(Step(expr=E.Let(a, f)))
    steps.append(Step(expr=E.Let(_DM, linear_call(part, down, a, "W_2"), f"(the block's {down})", maps=(inner, d)),
                      value="mlp_output", summary=True))
    return steps


def _one_sublayer(part: Part, r, factor: float | None) -> Chain:
    """A block that runs one mixer (a hybrid's state-space, attention or MLP block): its norm, the mixer, and one add."""
    tiny_factor = getattr(part.ctx.tiny_config, "residual_multiplier", 1.0) if factor is not None else 1.0
    if r.ssm:
        child, norm, names, label = r.ssm, r.ssm_norm, ("ssm_norm_output", "ssm_output"), r"\operatorname{SSM}"
    elif r.attention:
        child, norm, names, label = r.attention, r.attention_norm, ("attention_norm_output", "attention_output"), r"\operatorname{Attn}"
    else:
        child, norm, names, label = r.mlp, r.mlp_norm, ("mlp_norm_output", "mlp_output"), r"\operatorname{FFN}"
    inputs = [X]
    rotary = part.child(child).argument("position_embeddings") is not None
    if rotary:
        inputs.append(rotary_input(part.child(child).argument("position_embeddings")))
    steps: list[Step] = []
    if norm:
        steps.append(Step(expr=E.Let(_H, _apply(part, norm, r"\operatorname{Norm}", _X, whole=True)), value=names[0], summary=True))
    delta = E.Sym("d", r"\Delta")
    steps.append(Step(expr=E.Let(delta, _apply(part, child, label, _H if norm else _X, rotary)), value=names[1], summary=True))
    steps.append(Step(expr=E.Let(_Y, _X + _scaled(delta, factor, tiny_factor)), value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp, "ssm": r.ssm}, "the block's children by role")
    part.note("norms", {"before the mixer": norm}, "the block's children by role")
    return Chain(steps, inputs, "y", output_element=0)


def _parallel_block(part: Part) -> Chain:
    """The attention and the MLP side by side: each reads the block's input through its own norm (or
    one norm they share), and both contributions are added to the stream in one sum. No stream exists
    between the two sublayers, so the chain claims no layer_mid."""
    r = block_roles(part.tiny)
    steps: list[Step] = []
    inputs = [X]
    attn = part.child(r.attention)
    rotary = attn.argument("position_embeddings") is not None
    if rotary:
        inputs.append(ROTARY)
    if r.attention_norm:
        steps.append(Step(expr=E.Let(_H, _apply(part, r.attention_norm, r"\operatorname{Norm}_1", _X, whole=True)),
                          value="attention_norm_output", summary=True))
    attn_in = _H if r.attention_norm else _X
    steps.append(Step(expr=E.Let(_DA, _apply(part, r.attention, r"\operatorname{Attn}", attn_in, rotary)),
                      value=None if r.attention_post_norm else "attention_output", summary=True))
    if r.attention_post_norm:
        steps.append(Step(expr=E.Let(_DA, _apply(part, r.attention_post_norm, r"\operatorname{Norm}_2", _DA, whole=True)),
                          value="attention_output", summary=True))
    if r.mlp_norm:
        steps.append(Step(expr=E.Let(_HM, _apply(part, r.mlp_norm, r"\operatorname{Norm}_3", _X, whole=True),
                                     "(the block's input, not the stream after the attention)"),
                          value="mlp_norm_output", summary=True))
        mlp_in = _HM
    else:
        mlp_in = attn_in
    words = "(the same input as the attention)" if mlp_in is attn_in else ""
    if r.mlp is None and r.mlp_inline:
        steps += _inline_mlp_steps(part, r.mlp_inline, mlp_in)
    else:
        steps.append(Step(expr=E.Let(_DM, _apply(part, r.mlp, r"\operatorname{FFN}", mlp_in), words),
                          value=None if r.mlp_post_norm else "mlp_output", summary=True))
    if r.mlp_post_norm:
        steps.append(Step(expr=E.Let(_DM, _apply(part, r.mlp_post_norm, r"\operatorname{Norm}_4", _DM, whole=True)),
                          value="mlp_output", summary=True))
    steps.append(Step(expr=E.Let(_Y, _X + _DA + _DM, "(both sublayers added at once)"), value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "after attention": r.attention_post_norm,
                        "before MLP": r.mlp_norm, "after MLP": r.mlp_post_norm},
              "the block's children by role")
    if mlp_in is attn_in and r.attention_norm:
        part.note("shared_norm", r.attention_norm, "the MLP reads the attention's normed input")
    return Chain(steps, inputs, "y", output_element=0)


def _block_scale(part: Part, name: str) -> tuple[float, float] | None:
    """A constant the block module holds under ``name`` ((checkpoint, tiny)), None where it holds none or 1."""
    full, tiny = getattr(part.full, name, None), getattr(part.tiny, name, None)
    if not isinstance(full, (int, float)) or isinstance(full, bool) or not isinstance(tiny, (int, float)):
        return None
    return None if full == 1 and tiny == 1 else (float(full), float(tiny))


def _two_mixers_block(part: Part, r) -> Chain:
    """Attention and a state-space mixer side by side (Falcon-H1): both read the one normed stream
    (the attention after a constant the block holds), each output times its own constant, the two summed
    and added to the stream at once; then the MLP through its own norm, added as usual."""
    steps: list[Step] = []
    inputs = [X]
    attn = part.child(r.attention)
    rotary = attn.argument("position_embeddings") is not None
    if rotary:
        inputs.append(rotary_input(attn.argument("position_embeddings")))
    a_in, a_out, s_out = (_block_scale(part, n) for n in ("attention_in_multiplier", "attn_out_multiplier", "ssm_out_multiplier"))
    if r.attention_norm:
        steps.append(Step(expr=E.Let(_H, _apply(part, r.attention_norm, r"\operatorname{Norm}_1", _X, whole=True), "(one norm for both mixers)"),
                          value="attention_norm_output", summary=True))
    h = _H if r.attention_norm else _X
    ssm = E.Sym("ds", r"\Delta_{\mathrm{ssm}}")
    steps.append(Step(expr=E.Let(ssm, _apply(part, r.ssm, r"\operatorname{SSM}", h)), value="ssm_output", summary=True))
    attn_in = h
    if a_in:
        attn_in = E.Sym("ha", r"h_{\mathrm{attn}}")
        steps.append(Step(expr=E.Let(attn_in, E.Size(*a_in) * h, "(the block's attention_in_multiplier)")))
    steps.append(Step(expr=E.Let(_DA, _apply(part, r.attention, r"\operatorname{Attn}", attn_in, rotary), "(the same normed stream)"),
                      value="attention_output", summary=True))
    # each output times the block's constant for it, where it holds one ((checkpoint, tiny), else none)
    steps.append(Step(expr=E.Let(_XM, _X + _scaled(ssm, *(s_out or (None, 1.0))) + _scaled(_DA, *(a_out or (None, 1.0))),
                                 "(both mixers added at once)"),
                      value="layer_mid", summary=True))
    if r.mlp_norm:
        steps.append(Step(expr=E.Let(_HM, _apply(part, r.mlp_norm, r"\operatorname{Norm}_2", _XM, whole=True)),
                          value="mlp_norm_output", summary=True))
    steps.append(Step(expr=E.Let(_DM, _apply(part, r.mlp, r"\operatorname{FFN}", _HM if r.mlp_norm else _XM)), value="mlp_output", summary=True))
    steps.append(Step(expr=E.Let(_Y, _XM + _DM), value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "ssm": r.ssm, "mlp": r.mlp}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "before the state-space mixer": r.attention_norm, "before MLP": r.mlp_norm},
              "the block's children by role: one norm feeds both mixers")
    part.note("mixer_multipliers", {"attention_in": a_in[0] if a_in else 1.0, "attention_out": a_out[0] if a_out else 1.0,
                                    "ssm_out": s_out[0] if s_out else 1.0}, "the block's own constants")
    return Chain(steps, inputs, "y", output_element=0)


def run_blocks(stack: "Stack", e: Env, x, rel: str):
    """Every block in order, each by its kind's chain on its own weights (``rel``: the block list's path relative
    to the chain's module), with the rotary angles the model handed that block."""
    first = x  # the stream entering block 0, the embeddings: a shared block reads them beside the stream (Zamba2)
    for n, chain in enumerate(stack.chains):
        values = {"x": x, **({"e": first} if any(i.name == "e" for i in chain.inputs) else {})}
        if any(i.name == "R" for i in chain.inputs):
            # the angles the model's rotary steps computed for this block, where the chain ran them; else the run's
            computed = stack.rotary_names[n]
            values["R"] = e[computed] if computed and computed in e else stack.rotary[n]
        for name, _, _ in BLOCK_EXTRAS:  # the mask, positions and ids a block's chain reads (DeepSeek-V4's)
            if any(i.name == name for i in chain.inputs):
                values[name] = as64(stack.extras[n][name])
        x = run_chain(chain, e.child(f"{rel}.{n}" if rel else str(n), values))
        x = x / 2 if n in stack.halving[0] else x  # the model halves the stream after this block (RWKV's rescale_every)
    return x


class Stack:
    """The blocks of the tiny model: each one's chain (its kind's) and the rotary angles it received."""

    def __init__(self, chains: list[Chain], rotary: list, path: str, count_full: int):
        self.chains, self.rotary, self.path, self.count = chains, rotary, path, len(chains)
        self.count_full = count_full
        self.extras: list[dict] = [{} for _ in chains]  # per block: what else it was handed (BLOCK_EXTRAS)
        self.rotary_names: list[str | None] = [None for _ in chains]  # per block: the model's rotary result it reads (atlas.proof.rope)
        self.halving: tuple[list[int], int | None] = ([], None)  # blocks after which the stream is halved, the checkpoint's period


def blocks(part: Part, stack: Stack) -> Chain:
    def every_block(e: Env):
        return run_blocks(stack, e, e["x"], "")

    every_block.child_inputs = {"x": "x"}
    last = T.num(stack.count_full - 1)
    apply = E.Child(every_block, (E.Sym("x", "x_n"),), lambda x: rf"\operatorname{{Block}}_n({x})\quad n=0,\dots,{last}")
    step = Step(expr=E.Let(E.Sym("y", "x_{n+1}"), apply, f"(each block by its kind's steps{halving_words(stack.halving)}; the preview runs "
                           f"{stack.count})"), summary=True)
    return Chain([step], [Input("x", "x_0", "hidden_states", "the stream entering block 0")], "y")


# --- a block whose attention and both norms sit in one child (DBRX's norm_attn_norm) -----------------


def is_attention_wrapper(module) -> bool:
    """A module with no tensors of its own that holds a norm, an attention and a norm, as a block would (roles.attention_wrapper)."""
    from atlas.model.roles import attention_wrapper

    import torch

    holder = torch.nn.Module()
    holder.add_module("inner", module)
    return attention_wrapper(holder) == "inner"


def norm_attention_norm(part: Part) -> Chain:
    """The first half of a pre-norm block as one module: norm, attention, add, the MLP's norm; it returns both streams."""
    from atlas.model.roles import _child, _is_attention, _is_norm, ATTENTION_NAMES

    children = dict(part.tiny.named_children())
    attention = _child(part.tiny, ATTENTION_NAMES) or next(n for n, m in children.items() if _is_attention(m))
    first, second = [n for n, m in children.items() if _is_norm(m)]
    attn = part.child(attention)
    rotary = attn.argument("position_embeddings") is not None or part.argument("position_embeddings") is not None
    inputs = [X] + ([rotary_input(part.argument("position_embeddings"))] if rotary else [])
    call = {"x": "h", **({"R": "R"} if rotary else {})}
    steps = [
        Step(expr=E.Let(_H, _apply(part, first, r"\operatorname{Norm}_1", _X, whole=True)), value="attention_norm_output", summary=True),
        Step(expr=E.Let(_DA, _apply(part, attention, r"\operatorname{Attn}", _H, rotary)), value="attention_output", summary=True),
        Step(expr=E.Let(_XM, _X + _DA), value="layer_mid", summary=True),
        Step(expr=E.Let(_HM, _apply(part, second, r"\operatorname{Norm}_2", _XM, whole=True)), value="mlp_norm_output", summary=True),
        Step(r"\text{returns }(x',\,h')\quad\text{the stream after the add, and its normed copy for the MLP}", ("out0", "out1"),
             lambda e: (e["xm"], e["hm"])),
    ]
    part.note("norms", {"before attention": first, "before MLP": second}, "the module's children by role")
    return Chain(steps, inputs, ("out0", "out1"), output_values=("layer_mid", "mlp_norm_output"))


def _wrapped_block(part: Part, r) -> Chain:
    """A block that hands its input to the wrapper (norm, attention, add, norm) and runs its MLP on the
    normed copy the wrapper returns, adding the result to the stream the wrapper returns."""
    wrapper = part.child(r.wrapper)
    rotary = wrapper.argument("position_embeddings") is not None
    inputs = [X] + ([rotary_input(wrapper.argument("position_embeddings"))] if rotary else [])
    call = {"x": "x", **({"R": "R"} if rotary else {})}
    steps = [
        Step(rf"(x',\,h')=\operatorname{{NormAttnNorm}}(x{',' + T.c('R') if rotary else ''})", ("xm", "hm"), sub(part, r.wrapper, **call),
             value=("layer_mid", "mlp_norm_output"), summary=True),
        Step(expr=E.Let(_DM, _apply(part, r.mlp, r"\operatorname{FFN}", _HM)), value="mlp_output", summary=True),
        Step(expr=E.Let(_Y, _XM + _DM), value="layer_output", summary=True),
    ]
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "before MLP": r.mlp_norm}, "inside the block's child " + r.wrapper)
    return Chain(steps, inputs, "y", output_element=0)
