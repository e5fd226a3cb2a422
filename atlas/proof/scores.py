"""Attention from its queries and keys on: the scores scaled, capped, biased and masked, the softmax (with
sinks), the heads' outputs mixed, and the output projection; the head counts and sizes they are written at.

Every attention chain (multi-head, grouped-query, multi-query, latent) ends with these steps; each
setting is read from the module (and its block's config) at both sizes, and the proof checks it.
"""

from __future__ import annotations

from atlas.model.structure import built_kv_heads
from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import _attr, apply_child, linear_call, linear_dims
from atlas.proof.positions import _alibi_bias, alibi_slopes, alibi_slopes_tex, alibi_tex
from atlas.proof.steps import Step


NEG = float("-inf")


def _heads(part: Part, tiny: bool):
    cfg = part.ctx.tiny_config if tiny else part.ctx.full_config
    m = part.tiny if tiny else part.full
    h = _attr(m, "num_heads") or cfg.num_attention_heads
    cfg = _layer_of(cfg, m)  # a block built with sizes of its own (Gemma 4's global blocks)
    kv = getattr(cfg, "num_key_value_heads", None) or _attr(m, "num_kv_heads") or h  # Falcon's module holds its own count
    kv = built_kv_heads(m, h) or kv  # the module's own count, where it builds one (MiMo-V2-Flash's windowed blocks)
    d = _attr(m, "head_dim") or getattr(cfg, "head_dim", None) or cfg.hidden_size // h
    return h, kv, d


def _layer_of(cfg, module):
    """The configuration the module's block was built from, where blocks differ in size."""
    from atlas.inputs.layers import heterogeneous, layer_config

    index = getattr(module, "layer_idx", None)
    return layer_config(cfg, index) if heterogeneous(cfg) and isinstance(index, int) else cfg


def _window(part: Part, module) -> int | None:
    w = _attr(module, "sliding_window")
    if w is not None and getattr(module, "is_sliding", None) is False:
        return None  # the module keeps the config's window but applies it only where it is_sliding (K-EXAONE)
    if w is None and part.attention_type == "sliding_attention":
        cfg = part.ctx.tiny_config if module is part.tiny else part.ctx.full_config
        w = getattr(cfg, "sliding_window", None)
    return w


def held_causal_mask(module) -> str | None:
    """The name of a buffer the module keeps its causal mask in (GPT-1's attention: a lower triangle of
    ones, [1, 1, n_positions, n_positions]), else None."""
    import torch

    for name, b in module.named_buffers(recurse=False):
        if b.dim() == 4 and b.shape[-1] == b.shape[-2] and not b.is_meta and torch.equal(b[0, 0], torch.ones_like(b[0, 0]).tril()):
            return name
    return None


def _mask(T_, window):
    import torch

    t = torch.arange(T_)
    allowed = t[None, :] <= t[:, None]
    if window:
        allowed &= t[None, :] > t[:, None] - window
    return torch.zeros(T_, T_, dtype=torch.float64).masked_fill(~allowed, NEG)


# a norm the attention calls on its joined heads, before the output projection: the names it goes by
SUB_NORM_NAMES = ("attn_sub_norm",)


def _scores_to_output(part: Part, steps: list[Step], h: int, dv: int, out_proj: str, heads_tex: str, prescaled: bool = False,
                      gated: bool = False, alibi: str | None = None, selected: str | None = None, mask_form: str = "added",
                      scored=None) -> None:
    """What every attention shares after the queries and keys: scale, cap, mask, softmax, mix, project.
    ``prescaled``: the queries were already multiplied by the scale (OPT), so the scores are not.
    ``selected``: the environment name of a sparse attention's selection mask (0 at the positions its
    indexer kept, -inf elsewhere), added with the causal mask. ``mask_form`` "filled": the scores of keys
    ahead replaced by −10⁴ rather than −∞ added to them. ``scored``: makes the mask scored from the values that
    stands in the causal mask's place, from the scores (atlas.proof.value_mask)."""
    sub_norm = next((n for n in SUB_NORM_NAMES if n in dict(part.tiny.named_children())), None)
    Q, K, V, S, P = E.Sym("Q", T.q("Q_h")), E.Sym("K", T.k("K_h")), E.Sym("V", T.v("V_h")), E.Sym("S", "S_h"), E.Sym("P", "P_h")
    if prescaled:
        part.note("scaling", _attr(part.full, "scaling"), "the module's scaling, applied to the queries before the scores")
        steps.append(Step(expr=E.Let(S, E.scores(Q, K), "(the queries carry the scale)"), summary=True))
    scale, tiny_scale = _attr(part.full, "scaling"), _attr(part.tiny, "scaling")
    if prescaled:
        pass
    elif scale is None:  # a module that holds no scaling and divides by the square root of its head width (Falcon)
        scale, tiny_scale = _heads(part, tiny=False)[2] ** -0.5, _heads(part, tiny=True)[2] ** -0.5
        part.note("scaling", scale, "the module holds none: one over the square root of the head width, checked by the proof")
    else:
        part.note("scaling", scale, "the module's scaling")
    if not prescaled:
        steps.append(Step(expr=E.Let(S, E.Size(scale, tiny_scale) * E.scores(Q, K)), summary=True))
    cap = _attr(part.full, "attn_logit_softcapping") or getattr(part.ctx.full_config, "attn_logit_softcapping", None)
    if cap:
        tiny_cap = _attr(part.tiny, "attn_logit_softcapping") or part.ctx.tiny_config.attn_logit_softcapping
        part.note("softcap", cap, "the module's setting")
        steps.append(Step(expr=E.Let(S, E.Size(cap, tiny_cap) * E.tanh(S / E.Size(cap, tiny_cap)))))
    if alibi:  # a bias linear in the key's position, at a slope of each head's own (ALiBi)
        tiny_slopes = alibi_slopes(_heads(part, tiny=True)[0])
        part.note("alibi_slopes", alibi_slopes(h), "ALiBi's geometric sequence at the checkpoint's head count, checked on the preview run's")
        steps.append(Step(alibi_tex(alibi, alibi_slopes_tex(h)), "S",
                          lambda e: e["S"] + _alibi_bias(tiny_slopes, e["S"].shape[-1], alibi).to(e["S"].dtype), summary=True))
    window, tiny_window = _window(part, part.full), _window(part, part.tiny)
    M = T.c("M")
    chunk, tiny_chunk = _chunk(part, part.ctx.full_config), _chunk(part, part.ctx.tiny_config)
    if chunk:  # chunked attention (Llama 4's rotary blocks): a query sees the earlier positions of its own chunk
        part.note("chunk", chunk, "the config's attention_chunk_size, for a block of attention type chunked_attention")
        rule = (rf"{M}_{{ts}}=0\ \text{{if}}\ s\le t\ \text{{and}}\ \lfloor s/{T.num(chunk)}\rfloor=\lfloor t/{T.num(chunk)}\rfloor,"
                r"\ -\infty\ \text{otherwise (chunks of fixed length)}")
        steps.append(Step(rf"S_h\leftarrow S_h+{M},\quad {rule}", "S", lambda e: e["S"] + _chunk_mask(e["S"].shape[-1], tiny_chunk), value="attention_scores"))
    elif window:
        part.note("window", window, "the module's sliding window")
        rule = rf"{M}_{{ts}}=0\ \text{{if}}\ t-{T.num(window)}<s\le t,\ -\infty\ \text{{otherwise}}"
    else:
        part.note("window", "none: every earlier position", "the module has no sliding window")
        rule = rf"{M}_{{ts}}=0\ \text{{if}}\ s\le t,\ -\infty\ \text{{otherwise}}"
    if selected:
        part.note("selection", "the indexer's kept positions", "the module has a lightning indexer")
        steps.append(Step(rf"S_h\leftarrow S_h+{M}+{M}^{{I}},\quad {rule};\ {M}^{{I}}_{{ts}}=0\ \text{{if}}\ s\in P_t,\ -\infty\ \text{{otherwise}}", "S",
                          lambda e: e["S"] + _mask(e["S"].shape[-1], tiny_window) + e[selected][:, None], value="attention_scores", summary=True))
    elif not chunk and mask_form == "filled":
        # the module holds its causal mask as ones and zeros (GPT-1's attn.bias) and puts −10⁴ in the place
        # of a score whose key lies ahead, rather than adding −∞ to it (measured: see attention.attention)
        B = T.c("B")
        kept = E.Mask(B, rf"{B}_{{ts}}=1\ \text{{if}}\ s\le t,\ 0\ \text{{otherwise}}",
                      lambda width: _mask(width, None).isfinite().double(), S)
        steps.append(Step(expr=E.Let(S, S * kept - E.Size(1e4, 1e4, "10^{4}") * (1 - kept), "(a key ahead scores −10,000 in place of its score)"),
                          value="attention_scores"))
    elif not chunk and scored:  # a mask scored from the values, in the causal mask's place (atlas.proof.value_mask)
        steps.append(Step(expr=E.Let(S, S + scored(S)), value="attention_scores", summary=True))
    elif not chunk:
        mask = E.Mask(M, rule, lambda width: _mask(width, tiny_window), S)
        shifted = _shifted_by_row_max(part)
        steps.append(Step(expr=E.Let(S, S + mask), value=None if shifted else "attention_scores"))
        if shifted:  # the module subtracts each row's largest score before its softmax (MiMo-V2-Flash's eager attention)
            part.note("row_max_shift", True, "measured: every row of the scores the softmax received has its largest entry at exactly 0")
            steps.append(Step(r"S_h\leftarrow S_h-\max_s S_{h,ts}\quad\text{(each row shifted by its largest score; the softmax is unchanged by it)}",
                              "S", lambda e: e["S"] - e["S"].amax(dim=-1, keepdim=True), value="attention_scores"))
    if "sinks" in dict(part.tiny.named_parameters(recurse=False)):
        part.note("sinks", True, "the module holds one sink logit per head")
    after = "sinks" in dict(part.tiny.named_parameters(recurse=False)) and part.declared("sink_placement") == "output_scale"
    if after:  # the sink scales the heads' outputs after a plain softmax (Granite SWA's eager attention)
        part.note("sink_placement", "output_scale", "declared by the family: the module's softmax is over the keys alone, "
                  "and the heads' outputs are scaled by the share the sink leaves them")
        steps.append(Step(expr=E.Let(P, E.softmax(S), "over keys; the sink acts on the outputs below"), value="attention_probabilities", summary=True))
    elif "sinks" in dict(part.tiny.named_parameters(recurse=False)):
        steps.append(Step(expr=E.Let(P, E.softmax_with_sinks(S, E.Weight("sinks", r"\sigma_h")), "a learned sink logit per head, dropped after the softmax"),
                          value="attention_probabilities", summary=True))
    else:
        steps.append(Step(expr=E.Let(P, E.softmax(S), "over keys"), value="attention_probabilities", summary=True))
    O, o = E.Sym("O", T.v("O_h")), E.Sym("o", "o")
    if after:
        steps.append(Step(expr=E.Let(O, E.mix(P, V))))
        steps.append(Step(expr=E.Let(O, O * E.sink_share(S, E.Weight("sinks", r"\sigma_h")), "the share the sink leaves the keys"),
                          value="attention_head_outputs", summary=True))
    steps += [
        *([] if after else [Step(expr=E.Let(O, E.mix(P, V)), value="attention_head_outputs", summary=True)]),
        Step(expr=E.Let(o, A.JoinedHeads(O, h, heads_tex)), value=None if gated or sub_norm else "attention_premix", summary=True),
    ]
    if sub_norm:  # the heads' outputs normalised across their whole width before the projection (BitNet's attn_sub_norm)
        part.note("sub_norm", sub_norm, "the module's own norm child, called on the joined heads before the output projection")
        steps.append(Step(expr=E.Let(o, apply_child(part, sub_norm, lambda a: rf"\operatorname{{Norm}}_{{\text{{sub}}}}({a})", x=o),
                                     "(across all heads' width, before the output projection)"), value="attention_premix"))
    if gated:  # an output gate: each head's output scaled by the sigmoid of its own second query half
        steps.append(Step(expr=E.Let(o, o * E.sigmoid(E.Sym("G", "G")), "(the output gate)"), value="attention_premix", summary=True))
    n_in, n_out, _ = linear_dims(getattr(part.full, out_proj))
    steps.append(Step(expr=E.Let(E.Sym("y", r"\Delta"), linear_call(part, out_proj, o, "W_O"), maps=(n_in, n_out)),
                      value="attention_output", summary=True))


def _shifted_by_row_max(part: Part) -> bool:
    """Whether the scores the module's softmax received on the run were shifted so that every row's largest
    entry is exactly 0 (its eager attention subtracts the row's max), where no sink column explains it."""
    from atlas.proof.core import captured_value

    if "sinks" in dict(part.tiny.named_parameters(recurse=False)):
        return False
    scores = captured_value(part, "attention_scores")
    if scores is None or not hasattr(scores, "amax") or scores.numel() == 0:
        return False
    return bool((scores.amax(dim=-1) == 0).all())


def _chunk(part: Part, cfg) -> int | None:
    """The chunk length of a chunked-attention block (the config's attention_chunk_size), else None."""
    return getattr(cfg, "attention_chunk_size", None) if part.attention_type == "chunked_attention" else None


def _chunk_mask(T_, chunk):
    import torch

    t = torch.arange(T_)
    allowed = (t[None, :] <= t[:, None]) & (t[None, :] // chunk == t[:, None] // chunk)
    return torch.zeros(T_, T_, dtype=torch.float64).masked_fill(~allowed, NEG)
