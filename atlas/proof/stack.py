"""The block, the stack of blocks and the whole model, each as steps that run their parts' chains."""

from __future__ import annotations

import math

from atlas.proof import tex as T
from atlas.proof.attention import ROTARY, rotary_input
from atlas.proof.core import Part
from atlas.proof.library import X, child_output, sub
from atlas.proof.steps import Chain, Env, Input, Step, run_chain
from atlas.standard import block_roles
from atlas.introspect import num_blocks


def block(part: Part) -> Chain:
    if block_roles(part.tiny).sublayer_lists:
        return _list_block(part)
    factor = getattr(part.ctx.full_config, "residual_multiplier", None)
    depth = getattr(part.ctx.full_config, "scale_depth", None)
    if factor in (None, 1, 1.0) and depth is not None:
        return part.choose("residual_scale", {"config_scale_depth": lambda: _depth_scaled_block(part, depth), "none": lambda: _block(part, None)})
    r = block_roles(part.tiny)
    if factor in (None, 1, 1.0) and (r.ssm or not (r.attention and r.mlp)):
        return _block(part, None)  # a hybrid's block: one mixer, or a state-space mixer before the MLP; nothing runs side by side
    if factor in (None, 1, 1.0):
        # Sequential (the MLP reads the stream after the attention's add) or parallel (both read the
        # block's input and both are added at once): measured on the run, never told by a name.
        return part.choose("residual", {"sequential": lambda: _block(part, None), "parallel": lambda: _parallel_block(part)})
    return part.choose("residual_scale", {"config_residual_multiplier": lambda: _block(part, factor), "none": lambda: _block(part, None)})


def _depth_scaled_block(part: Part, depth: float) -> Chain:
    """The block whose sublayer outputs are scaled by scale_depth / sqrt(number of blocks) at each add
    (MiniCPM): the factor shrinks as the stack deepens, so the tiny run's factor is its own."""
    full, tiny = part.ctx.full_config.num_hidden_layers, part.ctx.tiny_config.num_hidden_layers
    tiny_depth = getattr(part.ctx.tiny_config, "scale_depth", depth)
    return _block(part, depth / math.sqrt(full), tiny_factor=tiny_depth / math.sqrt(tiny),
                  times=rf"\tfrac{{{T.num(float(depth))}}}{{\sqrt{{{T.num(full)}}}}}\,")


def _block(part: Part, factor: float | None, tiny_factor: float | None = None, times: str | None = None) -> Chain:
    """Norms, attention, MLP and the two adds; ``factor`` scales each sublayer's contribution at its add
    (``tiny_factor`` on the preview run and ``times`` its TeX, where they are not the config's residual_multiplier)."""
    r = block_roles(part.tiny)
    if r.sublayers == 1:
        return _one_sublayer(part, r, factor)
    if tiny_factor is None:
        tiny_factor = getattr(part.ctx.tiny_config, "residual_multiplier", 1.0) if factor is not None else 1.0
    if times is None:
        times = rf"{T.num(float(factor))}\," if factor is not None else ""
    steps: list[Step] = []
    inputs = [X]
    # the first sublayer: the attention, or a state-space mixer in its place (a hybrid's Mamba blocks)
    first, first_norm = (r.attention, r.attention_norm) if r.attention else (r.ssm, r.ssm_norm)
    first_values = ("attention_norm_output", "attention_output") if r.attention else ("ssm_norm_output", "ssm_output")
    first_label = r"\operatorname{Attn}" if r.attention else r"\operatorname{SSM}"
    attn = part.child(first)
    rotary = attn.argument("position_embeddings") is not None
    if rotary:
        inputs.append(rotary_input(attn.argument("position_embeddings")))
    if first_norm:
        steps.append(Step(r"h=\operatorname{Norm}_1(x)", "h", sub(part, first_norm), value=first_values[0], summary=True))
    attn_in = "h" if first_norm else "x"
    call = {"x": attn_in, **({"R": "R"} if rotary else {})}
    steps.append(Step(rf"\Delta_{{\mathrm{{attn}}}}={first_label}({attn_in}{',' + T.c('R') if rotary else ''})", "da",
                      child_output(part, first, **call), value=None if r.attention_post_norm else first_values[1], summary=True))
    if r.attention_post_norm:
        steps.append(Step(r"\Delta_{\mathrm{attn}}\leftarrow\operatorname{Norm}_2(\Delta_{\mathrm{attn}})", "da", sub(part, r.attention_post_norm, x="da"), value="attention_output", summary=True))
    steps.append(Step(rf"x'=x+{times}\Delta_{{\mathrm{{attn}}}}", "xm", lambda e: e["x"] + tiny_factor * e["da"], value="layer_mid", summary=True))
    if r.mlp_norm:
        steps.append(Step(r"h'=\operatorname{Norm}_3(x')", "hm", sub(part, r.mlp_norm, x="xm"), value="mlp_norm_output"))
    mlp_in = "hm" if r.mlp_norm else "xm"
    mlp_arg = "h'" if r.mlp_norm else "x'"
    if r.mlp is None and r.mlp_inline:
        steps += _inline_mlp_steps(part, r.mlp_inline, mlp_in, mlp_arg)
    else:
        steps.append(Step(rf"\Delta_{{\mathrm{{ffn}}}}=\operatorname{{FFN}}({mlp_arg})", "dm",
                          child_output(part, r.mlp, x=mlp_in), value=None if r.mlp_post_norm else "mlp_output", summary=True))
    if r.block_shared:  # a shared expert beside the mixture, run by the block on the same input
        steps.append(Step(rf"\Delta_{{\mathrm{{shared}}}}=\operatorname{{Shared}}({mlp_arg})", "ds", sub(part, r.block_shared, x=mlp_in),
                          value="shared_expert_output", summary=True))
        steps.append(Step(r"\Delta_{\mathrm{ffn}}\leftarrow\Delta_{\mathrm{ffn}}+\Delta_{\mathrm{shared}}", "dm", lambda e: e["dm"] + e["ds"], summary=True))
    if r.mlp_post_norm:
        steps.append(Step(r"\Delta_{\mathrm{ffn}}\leftarrow\operatorname{Norm}_4(\Delta_{\mathrm{ffn}})", "dm", sub(part, r.mlp_post_norm, x="dm"), value="mlp_output", summary=True))
    steps.append(Step(rf"y=x'+{times}\Delta_{{\mathrm{{ffn}}}}", "y", lambda e: e["xm"] + tiny_factor * e["dm"], value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp, **({"ssm": r.ssm} if r.ssm else {})}, "the block's children by role")
    part.note("norms", {"before attention": first_norm, "after attention": r.attention_post_norm,
                        "before MLP": r.mlp_norm, "after MLP": r.mlp_post_norm}, "the block's children by role")
    if r.mlp is None and r.mlp_inline:
        part.note("inline_mlp", {"up": r.mlp_inline[0], "down": r.mlp_inline[1], "activation": r.mlp_inline[2]},
                  "the block's own children: its MLP has no module of its own")
    return Chain(steps, inputs, "y", output_element=0)


def _list_block(part: Part) -> Chain:
    """A block that holds its sublayers in lists and runs them in turn (LongCat-Flash): for each entry i,
    norm, attention and add, then norm, dense MLP and add; the mixture of experts reads the first
    post-attention norm's output, and its output joins the stream only at the block's end (a shortcut
    past the second pair of sublayers)."""
    r = block_roles(part.tiny)
    base = lambda name: name.rpartition(".")[0]
    attentions, attention_norms, mlp_norms = base(r.attention), base(r.attention_norm), base(r.mlp_norm)
    dense = next(n for n in r.sublayer_lists if n not in (attentions, attention_norms, mlp_norms))
    pairs = len(part.tiny.get_submodule(attentions))
    attn = part.child(r.attention)
    rotary = attn.argument("position_embeddings") is not None
    inputs = [X] + ([rotary_input(attn.argument("position_embeddings"))] if rotary else [])
    steps: list[Step] = []
    x = "x"
    for i in range(pairs):
        n = i + 1
        first = i == 0
        xs = "x" if first else rf"x_{{{2 * i}}}"
        call = {"x": f"h{i}", **({"R": "R"} if rotary else {})}
        steps += [
            Step(rf"h_{{{n}}}=\operatorname{{Norm}}^{{\mathrm{{attn}}}}_{{{n}}}({xs})", f"h{i}", sub(part, f"{attention_norms}.{i}", x=x),
                 value="attention_norm_output" if first else None, summary=True),
            Step(rf"a_{{{n}}}=\operatorname{{Attn}}_{{{n}}}(h_{{{n}}}{',' + T.c('R') if rotary else ''})", f"a{i}",
                 child_output(part, f"{attentions}.{i}", **call), value="attention_output" if first else None, summary=True),
            Step(rf"x_{{{2 * i + 1}}}={xs}+a_{{{n}}}", f"x{2 * i + 1}", (lambda e, x=x, i=i: e[x] + e[f"a{i}"]), value="layer_mid" if first else None),
            Step(rf"h'_{{{n}}}=\operatorname{{Norm}}^{{\mathrm{{ffn}}}}_{{{n}}}(x_{{{2 * i + 1}}})", f"hm{i}", sub(part, f"{mlp_norms}.{i}", x=f"x{2 * i + 1}"),
                 value="mlp_norm_output" if first else None, summary=True),
        ]
        if first:
            steps.append(Step(r"m=\operatorname{MoE}(h'_{1})\quad\text{(the shortcut: added at the block's end)}", "m",
                              sub(part, r.mlp, x="hm0"), value="mlp_output", summary=True))
        steps += [
            Step(rf"f_{{{n}}}=\operatorname{{MLP}}_{{{n}}}(h'_{{{n}}})", f"d{i}", sub(part, f"{dense}.{i}", x=f"hm{i}"), summary=True),
            Step(rf"x_{{{2 * i + 2}}}=x_{{{2 * i + 1}}}+f_{{{n}}}", f"x{2 * i + 2}", (lambda e, i=i: e[f"x{2 * i + 1}"] + e[f"d{i}"])),
        ]
        x = f"x{2 * i + 2}"
    steps.append(Step(rf"y=x_{{{2 * pairs}}}+m", "y", lambda e, x=x: e[x] + e["m"], value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp, "dense_mlp": f"{dense}.0", "pairs": pairs}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "before MLP": r.mlp_norm}, "the block's children by role")
    return Chain(steps, inputs, "y", output_element=0)


def _inline_mlp_steps(part: Part, names: tuple, x: str, arg: str) -> list[Step]:
    """An MLP whose layers the block calls itself (OPT): up projection, activation, down projection."""
    from atlas.proof.library import ACT_NAMES, chain_of, linear_dims

    up, down, act = names
    d, inner = linear_dims(getattr(part.full, up))[:2]
    up_tex, down_tex = (n.replace("_", r"\_") for n in (up, down))
    steps = [Step(rf"f={arg}\,W_1^{{\top}}+b_1{T.maps(d, inner)}\quad\text{{(the block's {up_tex})}}", "f", sub(part, up, x=x))]
    if act:
        child = part.child(act)
        chain_of(child)
        measured = part.ctx.parts.get(child.id, child).facts["activation"]["value"]  # the part the chain was built on
        steps.append(Step(rf"a={ACT_NAMES[measured]}(f)", "a", sub(part, act, x="f"), value="mlp_activation", summary=True))
    else:
        steps.append(Step(r"a=f", "a", lambda e: e["f"]))
    steps.append(Step(rf"\Delta_{{\mathrm{{ffn}}}}=a\,W_2^{{\top}}+b_2{T.maps(inner, d)}\quad\text{{(the block's {down_tex})}}", "dm",
                      sub(part, down, x="a"), value="mlp_output", summary=True))
    return steps


def _one_sublayer(part: Part, r, factor: float | None) -> Chain:
    """A block that runs one mixer (a hybrid's state-space, attention or MLP block): its norm, the
    mixer, and one add."""
    tiny_factor = getattr(part.ctx.tiny_config, "residual_multiplier", 1.0) if factor is not None else 1.0
    times = rf"{T.num(float(factor))}\," if factor is not None else ""
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
        steps.append(Step(r"h=\operatorname{Norm}(x)", "h", sub(part, norm), value=names[0], summary=True))
    arg = "h" if norm else "x"
    call = {"x": arg, **({"R": "R"} if rotary else {})}
    steps.append(Step(rf"\Delta={label}({arg}{',' + T.c('R') if rotary else ''})", "d", child_output(part, child, **call), value=names[1], summary=True))
    steps.append(Step(rf"y=x+{times}\Delta", "y", lambda e: e["x"] + tiny_factor * e["d"], value="layer_output", summary=True))
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
        steps.append(Step(r"h=\operatorname{Norm}_1(x)", "h", sub(part, r.attention_norm), value="attention_norm_output", summary=True))
    attn_in = "h" if r.attention_norm else "x"
    call = {"x": attn_in, **({"R": "R"} if rotary else {})}
    steps.append(Step(rf"\Delta_{{\mathrm{{attn}}}}=\operatorname{{Attn}}({attn_in}{',' + T.c('R') if rotary else ''})", "da",
                      child_output(part, r.attention, **call), value=None if r.attention_post_norm else "attention_output", summary=True))
    if r.attention_post_norm:
        steps.append(Step(r"\Delta_{\mathrm{attn}}\leftarrow\operatorname{Norm}_2(\Delta_{\mathrm{attn}})", "da", sub(part, r.attention_post_norm, x="da"), value="attention_output", summary=True))
    if r.mlp_norm:
        steps.append(Step(r"h'=\operatorname{Norm}_3(x)\quad\text{(the block's input, not the stream after the attention)}", "hm",
                          sub(part, r.mlp_norm, x="x"), value="mlp_norm_output"))
        mlp_in, mlp_arg = "hm", "h'"
    else:
        mlp_in, mlp_arg = attn_in, attn_in
    words = r"\quad\text{(the same input as the attention)}" if mlp_in == attn_in else ""
    if r.mlp is None and r.mlp_inline:
        steps += _inline_mlp_steps(part, r.mlp_inline, mlp_in, mlp_arg)
    else:
        steps.append(Step(rf"\Delta_{{\mathrm{{ffn}}}}=\operatorname{{FFN}}({mlp_arg}){words}", "dm",
                          child_output(part, r.mlp, x=mlp_in), value=None if r.mlp_post_norm else "mlp_output", summary=True))
    if r.mlp_post_norm:
        steps.append(Step(r"\Delta_{\mathrm{ffn}}\leftarrow\operatorname{Norm}_4(\Delta_{\mathrm{ffn}})", "dm", sub(part, r.mlp_post_norm, x="dm"), value="mlp_output", summary=True))
    steps.append(Step(r"y=x+\Delta_{\mathrm{attn}}+\Delta_{\mathrm{ffn}}\quad\text{(both sublayers added at once)}", "y",
                      lambda e: e["x"] + e["da"] + e["dm"], value="layer_output", summary=True))
    part.note("sublayers", {"attention": r.attention, "mlp": r.mlp}, "the block's children by role")
    part.note("norms", {"before attention": r.attention_norm, "after attention": r.attention_post_norm,
                        "before MLP": r.mlp_norm, "after MLP": r.mlp_post_norm},
              "the block's children by role")
    if mlp_in == attn_in and r.attention_norm:
        part.note("shared_norm", r.attention_norm, "the MLP reads the attention's normed input")
    return Chain(steps, inputs, "y", output_element=0)


def _positions_from_mask(part: Part, path: str) -> bool:
    """Whether the position table's own proof reads the attention mask (OPT) rather than positions."""
    from atlas.proof.library import chain_of

    child = part.child(path)
    chain_of(child)
    built = part.ctx.parts.get(child.id, child)  # the part the chain was built on holds its notes
    return built.facts.get("embedding", {}).get("value") == "positions_from_mask_offset"


def run_blocks(stack: "Stack", e: Env, x, rel: str):
    """Every block in order, each by its kind's chain on its own weights (``rel``: the block list's path
    relative to the chain's module), with the rotary angles the model handed that block."""
    for n, chain in enumerate(stack.chains):
        values = {"x": x}
        if any(i.name == "R" for i in chain.inputs):
            values["R"] = stack.rotary[n]
        x = run_chain(chain, e.child(f"{rel}.{n}" if rel else str(n), values))
    return x


class Stack:
    """The blocks of the tiny model: each one's chain (its kind's) and the rotary angles it received."""

    def __init__(self, chains: list[Chain], rotary: list, path: str, count_full: int):
        self.chains, self.rotary, self.path, self.count = chains, rotary, path, len(chains)
        self.count_full = count_full


def blocks(part: Part, stack: Stack) -> Chain:
    n = stack.count_full
    step = Step(rf"x_{{n+1}}=\operatorname{{Block}}_n(x_n)\quad n=0,\dots,{n - 1}\quad\text{{(each block by its kind's steps; the preview runs {stack.count})}}",
                "y", lambda e: run_blocks(stack, e, e["x"], ""), summary=True)
    return Chain([step], [Input("x", "x_0", "hidden_states", "the stream entering block 0")], "y")


def model(part: Part, stack: Stack, roles) -> Chain:
    """Token ids to logits: embeddings (and positions), every block, the final norm, the head."""
    cfg = part.ctx.full_config
    ids = Input("ids", "I", "input_ids", "the token ids of the prompt")
    embed = roles.embedding

    multiplier = getattr(cfg, "embedding_multiplier", None)
    tiny_multiplier = getattr(part.ctx.tiny_config, "embedding_multiplier", None)
    logits_scaling = getattr(cfg, "logits_scaling", None)
    tiny_logits_scaling = getattr(part.ctx.tiny_config, "logits_scaling", None)

    def build(scale: str, logits_place: str = "after_head") -> Chain:
        steps = [Step(r"e=E[I]", "e", sub(part, embed, ids="ids"), value="token_embeddings", summary=True)]
        x0 = "e"
        if roles.position_embedding and _positions_from_mask(part, roles.position_embedding):
            import torch

            steps += [
                Step(r"m=(1,\dots,1)\quad\text{the attention mask: every token of the prompt is real}", "pos", lambda e: torch.ones_like(e["ids"])),
                Step(r"p=\operatorname{PosEmb}(m)", "p", sub(part, roles.position_embedding, ids="pos"), value="position_embeddings", summary=True),
                Step(r"x_0=e+p", "x0", lambda e: e["e"] + e["p"], summary=True),
            ]
            x0 = "x0"
        elif roles.position_embedding:
            import torch

            steps += [
                Step(r"t=0,\dots,T-1\quad\text{the positions of the prompt}", "pos", lambda e: torch.arange(e["ids"].shape[-1])[None]),
                Step(r"p=P[t]", "p", sub(part, roles.position_embedding, ids="pos"), value="position_embeddings", summary=True),
                Step(r"x_0=e+p", "x0", lambda e: e["e"] + e["p"], summary=True),
            ]
            x0 = "x0"
        if scale == "config_embedding_multiplier":
            steps.append(Step(rf"x_0\leftarrow{T.num(float(multiplier))}\,x_0\quad\text{{(the config's embedding\_multiplier)}}", "x0",
                              lambda e, s=x0: e[s] * tiny_multiplier, summary=True))
            x0 = "x0"
        if scale == "sqrt_width":
            steps.append(Step(rf"x_0\leftarrow\sqrt{{{T.num(cfg.hidden_size)}}}\,x_0\quad\text{{(the model scales the embeddings by }}\sqrt{{d}}\text{{)}}", "x0",
                              lambda e, s=x0: e[s] * math.sqrt(e[s].shape[-1])))
            x0 = "x0"
        def all_blocks(e, s=x0):
            return run_blocks(stack, e, e[s], stack.path)

        all_blocks.child_name, all_blocks.child_inputs = stack.path, {"x": x0}
        steps.append(Step(rf"x_L=\operatorname{{Block}}_{{L-1}}\circ\dots\circ\operatorname{{Block}}_0(x_0),\quad L={T.num(num_blocks(cfg))}",
                          "xL", all_blocks, summary=True))
        steps[-1].sub = "blocks"
        steps.append(Step(r"\hat x=\operatorname{Norm}(x_L)", "xn", sub(part, roles.final_norm, x="xL"), value="final_norm_output", summary=True))
        if roles.head and logits_place == "before_head":  # the stream is divided before the head reads it (MiniCPM)
            steps.append(Step(rf"\hat x\leftarrow\hat x/{T.num(float(logits_scaling))}\quad\text{{(the config's logits\_scaling, before the head)}}", "xn",
                              lambda e: e["xn"] / tiny_logits_scaling, summary=True))
            part.note("logits_scaling", logits_scaling, "the config's logits_scaling, applied to the stream the head reads")
        if roles.head:
            steps.append(Step(r"z=\hat x\,W_{\mathrm{out}}^{\top}", "z", sub(part, roles.head, x="xn"), value="lm_head_output", summary=True))
            cap = getattr(cfg, "final_logit_softcapping", None)
            if cap:
                tiny_cap = part.ctx.tiny_config.final_logit_softcapping
                steps.append(Step(rf"z\leftarrow{T.num(cap)}\tanh(z/{T.num(cap)})", "z", lambda e: tiny_cap * (e["z"] / tiny_cap).tanh(), value="logits", summary=True))
                part.note("logit_softcap", cap, "the config's final_logit_softcapping")
            logit_scale = getattr(cfg, "logit_scale", None)
            if logit_scale not in (None, 1, 1.0):  # the head's logits multiplied by a constant (Cohere)
                tiny_logit_scale = part.ctx.tiny_config.logit_scale
                steps.append(Step(rf"z\leftarrow{T.num(float(logit_scale))}\,z\quad\text{{(the config's logit\_scale)}}", "z",
                                  lambda e: e["z"] * tiny_logit_scale, value="logits", summary=True))
                part.note("logit_scale", logit_scale, "the config's logit_scale")
            if logits_scaling not in (None, 1, 1.0) and logits_place == "after_head":
                steps.append(Step(rf"z\leftarrow z/{T.num(float(logits_scaling))}\quad\text{{(the config's logits\_scaling)}}", "z",
                                  lambda e: e["z"] / tiny_logits_scaling, value="logits", summary=True))
                part.note("logits_scaling", logits_scaling, "the config's logits_scaling")
        return Chain(steps, [ids], "z" if roles.head else "xn", output_element=0)

    variants = {"none": lambda: build("none"), "sqrt_width": lambda: build("sqrt_width")}
    if multiplier not in (None, 1, 1.0):
        variants = {"config_embedding_multiplier": lambda: build("config_embedding_multiplier"), **variants}
    if logits_scaling in (None, 1, 1.0) or not roles.head:
        return part.choose("embedding_scale", variants)
    # Where the model divides by logits_scaling: what the head returns (Granite) or what it reads (MiniCPM).
    before = {name: (lambda name=name: build(name, "before_head")) for name in variants}
    return part.choose("logits_scale_place", {"after_head": lambda: part.choose("embedding_scale", variants),
                                              "before_head": lambda: part.choose("embedding_scale", before)})

