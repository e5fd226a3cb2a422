"""The whole model as steps: token ids to embeddings (and positions), every block, the final norm, the head.

The blocks run by their kinds' chains (``atlas.proof.stack``). How the embeddings and the logits are
scaled or capped is read from the config and the model's modules, and measured where two rules fit.
"""

from __future__ import annotations

import math

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import apply_child, linear_call
from atlas.proof.rope import model_rotary
from atlas.proof.rwkv import halving_words
from atlas.proof.stack import Stack, run_blocks
from atlas.proof.steps import Chain, Input, Step
from atlas.model.introspect import num_blocks


def _positions_from_mask(part: Part, path: str) -> bool:
    """Whether the position table's own proof reads the attention mask (OPT) rather than positions."""
    from atlas.proof.library import chain_of

    child = part.child(path)
    chain_of(child)
    built = part.ctx.parts.get(child.id, child)  # the part the chain was built on holds its notes
    return built.facts.get("embedding", {}).get("value") == "positions_from_mask_offset"


def _computed_table_steps(part: Part, path: str) -> list[str]:
    """The TeX of the steps of a position module that computes its table and holds no weights (XGLM's
    sinusoids): such a module has no page, so the step that calls it prints its rule; [] otherwise."""
    from atlas.proof.library import chain_of

    child = part.child(path)
    if any(True for _ in child.full.parameters()):
        return []
    return [s.tex for s in chain_of(child).steps if s.tex]


def _holds_bfloat16_scalar(module) -> bool:
    """Whether the model holds a one-number bfloat16 buffer (RecurrentGemma's embedding normalizer)."""
    import torch

    return any(b.dim() == 0 and b.dtype == torch.bfloat16 for b in module.buffers())


def _stream_collapse(part: Part):
    """(path, streams at the checkpoint, streams on the preview) of the module that collapses several
    residual streams into one after the last block (DeepSeek-V4's hc_head); None where there is none."""
    from atlas.proof import hyper

    for name, module in part.tiny.named_modules():
        if name and hyper.is_stream_collapse(module):
            full = part.full.get_submodule(name)
            return name, next(p for p in full.parameters(recurse=False) if p.dim() == 2).shape[0], \
                next(p for p in module.parameters(recurse=False) if p.dim() == 2).shape[0]
    return None


def _head_call(part: Part, head: str, x: E.Sym) -> E.Child:
    """The head applied to the final stream: printed as the linear map it is (with its bias, where its own
    chain found one) where it holds a weight matrix, else by its name."""
    weight = getattr(part.full.get_submodule(head), "weight", None)
    if weight is not None and weight.dim() == 2:
        return linear_call(part, head, x, r"W_{\mathrm{out}}")
    return apply_child(part, head, lambda a: rf"\operatorname{{Head}}({a})", x=x)


def model(part: Part, stack: Stack, roles) -> Chain:
    """Token ids to logits: embeddings (and positions), every block, the final norm, the head."""
    cfg = part.ctx.full_config
    ids = Input("ids", "I", "input_ids", "the token ids of the prompt")
    embed = roles.embedding

    multiplier = getattr(cfg, "embedding_multiplier", None)
    tiny_multiplier = getattr(part.ctx.tiny_config, "embedding_multiplier", None)
    logits_scaling = getattr(cfg, "logits_scaling", None)
    tiny_logits_scaling = getattr(part.ctx.tiny_config, "logits_scaling", None)

    I, e_, p_, x0_ = E.Sym("ids", "I"), E.Sym("e", "e"), E.Sym("p", "p"), E.Sym("x0", "x_0")

    held_table = getattr(roles, "position_table", None)  # a fixed table the model holds as a buffer and reads itself (CTRL)

    def build(scale: str, logits_place: str = "after_head", sinusoid: str | None = None) -> Chain:
        steps = [Step(expr=E.Let(e_, apply_child(part, embed, lambda i: f"E[{i}]", ids=I)), value="token_embeddings", summary=True)]
        x0 = e_
        if held_table:
            if scale == "sqrt_width":  # the token rows are scaled before the positions are added
                root = E.Size(math.sqrt(cfg.hidden_size), math.sqrt(part.ctx.tiny_config.hidden_size), rf"\sqrt{{{T.num(cfg.hidden_size)}}}")
                steps.append(Step(expr=E.Let(e_, root * e_, "(the token rows scaled by the square root of their width)"), summary=True))
            from atlas.proof.positions import sinusoid_steps

            width, tiny_width = (m.get_buffer(held_table).shape[1] for m in (part.full, part.tiny))
            positions = E.Sym("pos", "t")
            steps.append(Step(expr=E.Let(positions, A.positions(I), "(the positions of the prompt)"), summary=True))
            steps += sinusoid_steps(width, tiny_width, sinusoid, 0, ids="pos", out="p", note=f"(rows of {held_table.rpartition('.')[2]})")
            steps.append(Step(expr=E.Let(x0_, e_ + p_), summary=True))
            x0 = x0_
        if roles.position_embedding and _positions_from_mask(part, roles.position_embedding):
            mask = E.Sym("pos", "m")
            steps += [
                Step(expr=E.Let(mask, A.every_token(I), "(the attention mask: every token of the prompt is real)")),
                Step(expr=E.Let(p_, apply_child(part, roles.position_embedding, lambda m: rf"\operatorname{{PosEmb}}({m})", ids=mask)),
                     value="position_embeddings", summary=True),
                Step(expr=E.Let(x0_, e_ + p_), summary=True),
            ]
            x0 = x0_
        elif roles.position_embedding:
            table = _computed_table_steps(part, roles.position_embedding)
            # a table without weights has no page of its own: its rule is printed here (XGLM)
            rule = "".join(r",\quad " + t for t in table)
            positions = E.Sym("pos", "t")
            steps += [
                Step(expr=E.Let(positions, A.positions(I), "(the positions of the prompt)")),
                Step(expr=E.Let(p_, apply_child(part, roles.position_embedding, lambda t: f"P[{t}]{rule}", ids=positions)),
                     value="position_embeddings", summary=True),
                Step(expr=E.Let(x0_, e_ + p_), summary=True),
            ]
            x0 = x0_
        embedding_norm = getattr(roles, "embedding_norm", None)
        if embedding_norm and not embedding_norm.startswith(f"{stack.path}."):  # a norm on the embeddings before block 0 (BLOOM's
            # word_embeddings_layernorm); one that block 0 holds (RWKV's pre_ln) is a step of that block's own chain
            steps.append(Step(expr=E.Let(x0_, apply_child(part, embedding_norm, lambda x: rf"\operatorname{{Norm}}_{{\mathrm{{emb}}}}({x})", x=x0)),
                              value="embedding_norm_output", summary=True))
            x0 = x0_
        if scale == "config_embedding_multiplier":
            steps.append(Step(expr=E.Let(x0_, E.Size(float(multiplier), tiny_multiplier) * x0, "(the config's embedding_multiplier)"), summary=True))
            x0 = x0_
        if scale == "sqrt_width_bfloat16":  # the scale held as a bfloat16 number (RecurrentGemma's normalizer buffer)
            import torch

            rounded = lambda width: float(torch.tensor(width ** 0.5, dtype=torch.bfloat16))
            full_scale = rounded(cfg.hidden_size)
            steps.append(Step(expr=E.Let(x0_, E.Size(full_scale, rounded(part.ctx.tiny_config.hidden_size)) * x0,
                                         f"(the square root of {cfg.hidden_size:,}, {cfg.hidden_size ** 0.5:.4g}, rounded to bfloat16: the model holds the scale in that dtype)")))
            x0 = x0_
            part.note("embedding_scale_value", full_scale, "the square root of hidden_size, rounded to bfloat16")
        if scale == "sqrt_width" and not held_table:
            root = E.Size(math.sqrt(cfg.hidden_size), math.sqrt(part.ctx.tiny_config.hidden_size), rf"\sqrt{{{T.num(cfg.hidden_size)}}}")
            steps.append(Step(expr=E.Let(x0_, root * x0, "(the model scales the embeddings by the square root of their width)")))
            x0 = x0_
        collapse = _stream_collapse(part)
        if collapse:  # several residual streams (DeepSeek-V4): block 0 reads n copies of the embeddings
            streams = E.Sym("X0", "X_0")
            steps.append(Step(expr=E.Let(streams, A.copies(x0, collapse[2]), f"({collapse[1]:,} copies, one per residual stream)"), summary=True))
            x0 = streams

        rotary_steps, rotary_facts = model_rotary(part, stack)  # the angles every block turns by, from the config
        steps += rotary_steps
        for feature, fact in rotary_facts.items():
            part.note(feature, fact["value"], fact["how"])

        def all_blocks(e, s=x0.name):
            return run_blocks(stack, e, e[s], stack.path)

        all_blocks.child_name, all_blocks.child_inputs = stack.path, {"x": x0.name}
        xL, xn, z = E.Sym("xL", "x_L"), E.Sym("xn", r"\hat x"), E.Sym("z", "z")
        depth = T.num(num_blocks(cfg))
        halves = f"(each block's output{halving_words(stack.halving)})" if stack.halving[0] else ""
        steps.append(Step(expr=E.Let(xL, E.Child(all_blocks, (x0,), lambda x: rf"\operatorname{{Block}}_{{L-1}}\circ\dots\circ\operatorname{{Block}}_0({x}),\quad L={depth}"),
                                     halves), summary=True))
        steps[-1].sub = "blocks"
        if collapse:
            steps.append(Step(expr=E.Let(xL, apply_child(part, collapse[0], lambda x: rf"\operatorname{{Collapse}}({x})", x=E.Sym("xL", "X_L")),
                                         "(the streams weighted into one)"), summary=True))
        if roles.final_norm:
            steps.append(Step(expr=E.Let(xn, apply_child(part, roles.final_norm, lambda x: rf"\operatorname{{Norm}}({x})", x=xL)),
                              value="final_norm_output", summary=True))
        else:  # no norm after the last block (GPT-1, whose blocks end on a norm): the head reads the stream as it is
            xn = xL
        if roles.head and logits_place == "before_head":  # the stream is divided before the head reads it (MiniCPM)
            steps.append(Step(expr=E.Let(xn, xn / E.Size(float(logits_scaling), tiny_logits_scaling), "(the config's logits_scaling, before the head)"),
                              summary=True))
            part.note("logits_scaling", logits_scaling, "the config's logits_scaling, applied to the stream the head reads")
        if roles.head:
            steps.append(Step(expr=E.Let(z, _head_call(part, roles.head, xn)), value="lm_head_output", summary=True))
            cap_key = next((k for k in ("final_logit_softcapping", "logits_soft_cap") if getattr(cfg, k, None)), None)  # RecurrentGemma: logits_soft_cap
            cap = getattr(cfg, cap_key) if cap_key else None
            if cap:
                bound = E.Size(cap, getattr(part.ctx.tiny_config, cap_key))
                steps.append(Step(expr=E.Let(z, bound * E.tanh(z / bound)), value="logits", summary=True))
                part.note("logit_softcap", cap, f"the config's {cap_key}")
            head_multiplier = getattr(cfg, "lm_head_multiplier", None)
            if isinstance(head_multiplier, (int, float)) and head_multiplier != 1:  # the head's logits times a constant (Falcon-H1)
                steps.append(Step(expr=E.Let(z, E.Size(float(head_multiplier), part.ctx.tiny_config.lm_head_multiplier) * z,
                                             "(the config's lm_head_multiplier)"), value="logits", summary=True))
                part.note("lm_head_multiplier", head_multiplier, "the config's lm_head_multiplier")
            logit_scale = getattr(cfg, "logit_scale", None)
            if logit_scale not in (None, 1, 1.0):  # the head's logits multiplied by a constant (Cohere)
                steps.append(Step(expr=E.Let(z, E.Size(float(logit_scale), part.ctx.tiny_config.logit_scale) * z, "(the config's logit_scale)"),
                                  value="logits", summary=True))
                part.note("logit_scale", logit_scale, "the config's logit_scale")
            if logits_scaling not in (None, 1, 1.0) and logits_place == "after_head":
                steps.append(Step(expr=E.Let(z, z / E.Size(float(logits_scaling), tiny_logits_scaling), "(the config's logits_scaling)"),
                                  value="logits", summary=True))
                part.note("logits_scaling", logits_scaling, "the config's logits_scaling")
        return Chain(steps, [ids], "z" if roles.head else xn.name, output_element=0)

    variants = {"none": lambda: build("none"), "sqrt_width": lambda: build("sqrt_width")}
    if _holds_bfloat16_scalar(part.tiny):  # a one-number bfloat16 buffer: the scale may be rounded to that dtype
        variants["sqrt_width_bfloat16"] = lambda: build("sqrt_width_bfloat16")
    if multiplier not in (None, 1, 1.0):
        variants = {"config_embedding_multiplier": lambda: build("config_embedding_multiplier"), **variants}
    if held_table:  # which frequency rule the table follows, then how the token rows are scaled: measured
        part.note("positions", "sinusoidal", f"the model holds one computed table, {held_table}, and no weights for it")
        return part.choose("sinusoid", {den: (lambda den=den: part.choose("embedding_scale", {
            name: (lambda name=name: build(name, sinusoid=den)) for name in variants})) for den in ("half", "half_minus_one")})
    if logits_scaling in (None, 1, 1.0) or not roles.head:
        return part.choose("embedding_scale", variants)
    # Where the model divides by logits_scaling: what the head returns (Granite) or what it reads (MiniCPM).
    before = {name: (lambda name=name: build(name, "before_head")) for name in variants}
    return part.choose("logits_scale_place", {"after_head": lambda: part.choose("embedding_scale", variants),
                                              "before_head": lambda: part.choose("embedding_scale", before)})
