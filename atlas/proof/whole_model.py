"""The whole model as steps: token ids to embeddings (and positions), every block, the final norm, the head.

The blocks run by their kinds' chains (``atlas.proof.stack``). How the embeddings and the logits are
scaled or capped is read from the config and the model's modules, and measured where two rules fit.
"""

from __future__ import annotations

import math

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import sub
from atlas.proof.rope import model_rotary
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

            looked_up = r"p=P[t]"
            table = _computed_table_steps(part, roles.position_embedding)
            if table:  # a table without weights has no page of its own: its rule is printed here (XGLM)
                looked_up = r"p=P[t],\quad " + r",\quad ".join(table)
            steps += [
                Step(r"t=0,\dots,T-1\quad\text{the positions of the prompt}", "pos", lambda e: torch.arange(e["ids"].shape[-1])[None]),
                Step(looked_up, "p", sub(part, roles.position_embedding, ids="pos"), value="position_embeddings", summary=True),
                Step(r"x_0=e+p", "x0", lambda e: e["e"] + e["p"], summary=True),
            ]
            x0 = "x0"
        embedding_norm = getattr(roles, "embedding_norm", None)
        if embedding_norm:  # a norm on the embeddings before block 0 (BLOOM's word_embeddings_layernorm)
            steps.append(Step(r"x_0=\operatorname{Norm}_{\mathrm{emb}}(" + ("x_0" if x0 == "x0" else "e") + ")", "x0",
                              sub(part, embedding_norm, x=x0), value="embedding_norm_output", summary=True))
            x0 = "x0"
        if scale == "config_embedding_multiplier":
            steps.append(Step(rf"x_0\leftarrow{T.num(float(multiplier))}\,x_0\quad\text{{(the config's embedding\_multiplier)}}", "x0",
                              lambda e, s=x0: e[s] * tiny_multiplier, summary=True))
            x0 = "x0"
        if scale == "sqrt_width_bfloat16":  # the scale held as a bfloat16 number (RecurrentGemma's normalizer buffer)
            import torch

            full_scale = float(torch.tensor(cfg.hidden_size ** 0.5, dtype=torch.bfloat16))
            steps.append(Step(rf"x_0\leftarrow{T.num(full_scale)}\,x_0\quad\text{{(}}\sqrt{{{T.num(cfg.hidden_size)}}}={T.num(cfg.hidden_size ** 0.5)}"
                              r"\text{ rounded to bfloat16: the model holds the scale in that dtype)}", "x0",
                              lambda e, s=x0: e[s] * float(torch.tensor(e[s].shape[-1] ** 0.5, dtype=torch.bfloat16))))
            x0 = "x0"
            part.note("embedding_scale_value", full_scale, "the square root of hidden_size, rounded to bfloat16")
        if scale == "sqrt_width":
            steps.append(Step(rf"x_0\leftarrow\sqrt{{{T.num(cfg.hidden_size)}}}\,x_0\quad\text{{(the model scales the embeddings by }}\sqrt{{d}}\text{{)}}", "x0",
                              lambda e, s=x0: e[s] * math.sqrt(e[s].shape[-1])))
            x0 = "x0"
        collapse = _stream_collapse(part)
        if collapse:  # several residual streams (DeepSeek-V4): block 0 reads n copies of the embeddings
            streams = collapse[1]
            steps.append(Step(rf"X_0=(x_0,\dots,x_0)\quad\text{{{T.num(streams)} copies, one per residual stream}}", "X0",
                              lambda e, s=x0, n=collapse[2]: e[s][..., None, :].expand(*e[s].shape[:-1], n, e[s].shape[-1]), summary=True))
            x0 = "X0"

        rotary_steps, rotary_facts = model_rotary(part, stack)  # the angles every block turns by, from the config
        steps += rotary_steps
        for feature, fact in rotary_facts.items():
            part.note(feature, fact["value"], fact["how"])

        def all_blocks(e, s=x0):
            return run_blocks(stack, e, e[s], stack.path)

        all_blocks.child_name, all_blocks.child_inputs = stack.path, {"x": x0}
        steps.append(Step(rf"x_L=\operatorname{{Block}}_{{L-1}}\circ\dots\circ\operatorname{{Block}}_0(x_0),\quad L={T.num(num_blocks(cfg))}",
                          "xL", all_blocks, summary=True))
        steps[-1].sub = "blocks"
        if collapse:
            steps.append(Step(r"x_L=\operatorname{Collapse}(X_L)\quad\text{the streams weighted into one}", "xL", sub(part, collapse[0], x="xL"), summary=True))
        steps.append(Step(r"\hat x=\operatorname{Norm}(x_L)", "xn", sub(part, roles.final_norm, x="xL"), value="final_norm_output", summary=True))
        if roles.head and logits_place == "before_head":  # the stream is divided before the head reads it (MiniCPM)
            steps.append(Step(rf"\hat x\leftarrow\hat x/{T.num(float(logits_scaling))}\quad\text{{(the config's logits\_scaling, before the head)}}", "xn",
                              lambda e: e["xn"] / tiny_logits_scaling, summary=True))
            part.note("logits_scaling", logits_scaling, "the config's logits_scaling, applied to the stream the head reads")
        if roles.head:
            steps.append(Step(r"z=\hat x\,W_{\mathrm{out}}^{\top}", "z", sub(part, roles.head, x="xn"), value="lm_head_output", summary=True))
            cap_key = next((k for k in ("final_logit_softcapping", "logits_soft_cap") if getattr(cfg, k, None)), None)  # RecurrentGemma: logits_soft_cap
            cap = getattr(cfg, cap_key) if cap_key else None
            if cap:
                tiny_cap = getattr(part.ctx.tiny_config, cap_key)
                steps.append(Step(rf"z\leftarrow{T.num(cap)}\tanh(z/{T.num(cap)})", "z", lambda e: tiny_cap * (e["z"] / tiny_cap).tanh(), value="logits", summary=True))
                part.note("logit_softcap", cap, f"the config's {cap_key}")
            head_multiplier = getattr(cfg, "lm_head_multiplier", None)
            if isinstance(head_multiplier, (int, float)) and head_multiplier != 1:  # the head's logits times a constant (Falcon-H1)
                tiny_head_multiplier = part.ctx.tiny_config.lm_head_multiplier
                steps.append(Step(rf"z\leftarrow{T.num(float(head_multiplier))}\,z\quad\text{{(the config's lm\_head\_multiplier)}}", "z",
                                  lambda e: e["z"] * tiny_head_multiplier, value="logits", summary=True))
                part.note("lm_head_multiplier", head_multiplier, "the config's lm_head_multiplier")
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
    if _holds_bfloat16_scalar(part.tiny):  # a one-number bfloat16 buffer: the scale may be rounded to that dtype
        variants["sqrt_width_bfloat16"] = lambda: build("sqrt_width_bfloat16")
    if multiplier not in (None, 1, 1.0):
        variants = {"config_embedding_multiplier": lambda: build("config_embedding_multiplier"), **variants}
    if logits_scaling in (None, 1, 1.0) or not roles.head:
        return part.choose("embedding_scale", variants)
    # Where the model divides by logits_scaling: what the head returns (Granite) or what it reads (MiniCPM).
    before = {name: (lambda name=name: build(name, "before_head")) for name in variants}
    return part.choose("logits_scale_place", {"after_head": lambda: part.choose("embedding_scale", variants),
                                              "before_head": lambda: part.choose("embedding_scale", before)})
