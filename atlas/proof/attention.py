"""Attention: heads projected, positions rotated, scores scaled, capped and masked, softmax, mix, output.

One chain covers multi-head, grouped-query and multi-query attention with separate or fused
projections, biases, q/k norms (per head or across the width), rotary or no positions, sliding
windows, softcaps and sinks; latent attention (MLA) has its own chain. Every setting is read from
the module (its children, tensors and attributes) at both sizes, and the proof checks it.
"""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, linear_dims, sub
from atlas.proof.steps import Chain, Input, Step

ROTARY = Input("R", T.c("R"), "position_embeddings", "cos and sin of each position's rotary angles", given=True)
NEG = float("-inf")


def _attr(module, *names):
    return next((getattr(module, n) for n in names if isinstance(getattr(module, n, None), (int, float)) and not isinstance(getattr(module, n), bool)), None)


def _heads(part: Part, tiny: bool):
    cfg = part.ctx.tiny_config if tiny else part.ctx.full_config
    m = part.tiny if tiny else part.full
    h = _attr(m, "num_heads") or cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or h
    d = _attr(m, "head_dim") or getattr(cfg, "head_dim", None) or cfg.hidden_size // h
    return h, kv, d


def rotate_half(x, cos, sin):
    import torch

    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    half = rot // 2
    turned = torch.cat((-x_rot[..., half:], x_rot[..., :half]), dim=-1)
    return torch.cat((x_rot * cos + turned * sin, x_pass), dim=-1)


def rotate_half_angles(x, cos, sin):
    """cos and sin given once per angle (half the rotated width): the two halves turned by them."""
    import torch

    return rotate_half(x, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))


def rotate_pairs(x, cos, sin):
    """Interleaved pairs (x0, x1), (x2, x3) ... each turned by one angle; evens first, then odds."""
    import torch

    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half], sin[..., :half]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _rotary_given(part: Part) -> bool:
    return part.argument("position_embeddings") is not None


def _window(part: Part, module) -> int | None:
    w = _attr(module, "sliding_window")
    if w is None and part.attention_type == "sliding_attention":
        cfg = part.ctx.tiny_config if module is part.tiny else part.ctx.full_config
        w = getattr(cfg, "sliding_window", None)
    return w


def _mask(T_, window):
    import torch

    t = torch.arange(T_)
    allowed = t[None, :] <= t[:, None]
    if window:
        allowed &= t[None, :] > t[:, None] - window
    return torch.zeros(T_, T_, dtype=torch.float64).masked_fill(~allowed, NEG)


def _scores_to_output(part: Part, steps: list[Step], h: int, dv: int, out_proj: str, heads_tex: str) -> None:
    """What every attention shares after the queries and keys: scale, cap, mask, softmax, mix, project."""
    import torch

    scale, tiny_scale = _attr(part.full, "scaling"), _attr(part.tiny, "scaling")
    part.note("scaling", scale, "the module's scaling")
    steps.append(Step(rf"S_h={T.num(scale)}\,{T.q('Q_h')}{T.k('K_h')}^{{\top}}", "S", lambda e: tiny_scale * e["Q"] @ e["K"].transpose(-1, -2), summary=True))
    cap = _attr(part.full, "attn_logit_softcapping") or getattr(part.ctx.full_config, "attn_logit_softcapping", None)
    if cap:
        tiny_cap = _attr(part.tiny, "attn_logit_softcapping") or part.ctx.tiny_config.attn_logit_softcapping
        part.note("softcap", cap, "the module's setting")
        steps.append(Step(rf"S_h\leftarrow{T.num(cap)}\tanh(S_h/{T.num(cap)})", "S", lambda e: tiny_cap * (e["S"] / tiny_cap).tanh()))
    window, tiny_window = _window(part, part.full), _window(part, part.tiny)
    M = T.c("M")
    if window:
        part.note("window", window, "the module's sliding window")
        rule = rf"{M}_{{ts}}=0\ \text{{if}}\ t-{T.num(window)}<s\le t,\ -\infty\ \text{{otherwise}}"
    else:
        part.note("window", "none: every earlier position", "the module has no sliding window")
        rule = rf"{M}_{{ts}}=0\ \text{{if}}\ s\le t,\ -\infty\ \text{{otherwise}}"
    steps.append(Step(rf"S_h\leftarrow S_h+{M},\quad {rule}", "S", lambda e: e["S"] + _mask(e["S"].shape[-1], tiny_window), value="attention_scores"))
    if "sinks" in dict(part.tiny.named_parameters(recurse=False)):
        part.note("sinks", True, "the module holds one sink logit per head")

        def with_sink(e):
            S = e["S"]
            sink = e.w("sinks").view(1, -1, 1, 1).expand(S.shape[0], -1, S.shape[2], 1)
            return torch.cat((S, sink), dim=-1).softmax(-1)[..., :-1]

        steps.append(Step(r"P_h=\operatorname{softmax}\big([S_h,\ \sigma_h]\big)_{:,\,1..T}\quad\sigma_h\ \text{a learned sink logit per head, dropped after the softmax}",
                          "P", with_sink, value="attention_probabilities", summary=True))
    else:
        steps.append(Step(r"P_h=\operatorname{softmax}(S_h)\ \text{over keys}", "P", lambda e: e["S"].softmax(-1), value="attention_probabilities", summary=True))
    steps += [
        Step(rf"{T.v('O_h')}=P_h{T.v('V_h')}", "O", lambda e: (e["P"] @ e["V"]).transpose(1, 2), value="attention_head_outputs"),
        Step(rf"o=[{T.v('O_1')};\dots;{T.v(f'O_{{{h}}}')}]\in\mathbb{{R}}^{{{heads_tex}}}", "o", lambda e: e["O"].reshape(*e["O"].shape[:2], -1), value="attention_premix"),
    ]
    n_in, n_out, _ = linear_dims(getattr(part.full, out_proj))
    steps.append(Step(rf"\Delta=o\,W_O^{{\top}}{T.maps(n_in, n_out)}", "y", sub(part, out_proj, x="o"), value="attention_output", summary=True))


def _last(steps: list[Step], name: str) -> Step:
    return next(s for s in reversed(steps) if s.out == name or (isinstance(s.out, tuple) and name in s.out))


def _claim(steps: list[Step], values: dict[str, str]) -> None:
    """Each name's last step claims its standard value (aligned with the step's outputs)."""
    for name, value in values.items():
        step = _last(steps, name)
        outs = step.out if isinstance(step.out, tuple) else (step.out,)
        claimed = list(step.value) if isinstance(step.value, tuple) else [None] * len(outs)
        claimed[outs.index(name)] = value
        step.value = tuple(claimed)


def attention(part: Part) -> Chain:
    if not _rotary_given(part):
        return _attention(part, None)
    return part.choose("rotary_layout", {"halves": lambda: _attention(part, rotate_half),
                                         "halves_angle_per_pair": lambda: _attention(part, rotate_half_angles)})


def _attention(part: Part, rotate) -> Chain:
    h, kv, d = _heads(part, tiny=False)
    th, tkv, td = _heads(part, tiny=True)
    width = part.ctx.full_config.hidden_size
    names = set(dict(part.tiny.named_children()))
    steps: list[Step] = []
    Q, K, V = T.q("Q"), T.k("K"), T.v("V")
    if {"q_proj", "k_proj", "v_proj"} <= names:
        for sym, name, heads, stream in ((Q, "q_proj", h, "Q"), (K, "k_proj", kv, "K"), (V, "v_proj", kv, "V")):
            b = "+b" if getattr(getattr(part.tiny, name), "bias", None) is not None else ""
            steps.append(Step(rf"{sym}=x W_{stream}^{{\top}}{b}{T.maps(width, T.times(heads, d))}", stream, sub(part, name), summary=False))
        out_proj = "o_proj" if "o_proj" in names else "out_proj"  # LFM2 names it out_proj
    else:
        fused = next(n for n in ("qkv_proj", "c_attn", "query_key_value") if n in names)
        _, n_out, stored = linear_dims(getattr(part.full, fused))
        b = "+b" if getattr(getattr(part.tiny, fused), "bias", None) is not None else ""
        W = "W_{QKV}" if stored else r"W_{QKV}^{\top}"
        steps.append(Step(rf"[{Q};{K};{V}]=x {W}{b}{T.maps(width, n_out)}", "QKV", sub(part, fused)))
        sizes = (th * td, tkv * td, tkv * td)
        steps.append(Step(rf"{Q},{K},{V}\ \text{{the column blocks of widths }}{T.num(h * d)},{T.num(kv * d)},{T.num(kv * d)}", ("Q", "K", "V"),
                          lambda e: e["QKV"].split(sizes, dim=-1)))
        out_proj = next(n for n in ("o_proj", "c_proj", "dense", "out_proj") if n in names)
    part.note("heads", {"query": h, "key_value": kv, "head_dim": d}, "the module's and config's sizes")
    # the query and key norms, by either name families give them (LFM2: q_layernorm, k_layernorm)
    qn, kn = ("q_layernorm", "k_layernorm") if {"q_layernorm", "k_layernorm"} <= names else ("q_norm", "k_norm")
    norms = {n: getattr(part.tiny, n) for n in (qn, kn) if n in names}
    per_head = bool(norms) and norms[qn].weight.shape[-1] == td
    if norms and not per_head:  # normalized across all heads' width, before the split (OLMo 2)
        steps += [Step(rf"{Q}\leftarrow\operatorname{{Norm}}_q({Q}),\ {K}\leftarrow\operatorname{{Norm}}_k({K})\quad\text{{across the whole width}}", ("Q", "K"),
                       lambda e, fq=sub(part, qn, x="Q"), fk=sub(part, kn, x="K"): (fq(e), fk(e)))]
        steps[-1].sub = f"{part.id}.{qn}"

    def split(e):
        B, T_ = e["x"].shape[:2]
        return (e["Q"].view(B, T_, th, td).transpose(1, 2), e["K"].view(B, T_, tkv, td).transpose(1, 2), e["V"].view(B, T_, tkv, -1).transpose(1, 2))

    steps.append(Step(rf"{T.q('Q_h')},\ {T.k('K_g')},\ {T.v('V_g')}\in\mathbb{{R}}^{{T\times{T.num(d)}}}:\ h=1..{T.num(h)},\ g=1..{T.num(kv)}", ("Q", "K", "V"), split))
    if norms and per_head:
        steps.append(Step(rf"{T.q('Q_h')}\leftarrow\operatorname{{Norm}}_q({T.q('Q_h')}),\ {T.k('K_g')}\leftarrow\operatorname{{Norm}}_k({T.k('K_g')})\quad\text{{per head, over }}{T.num(d)}",
                          ("Q", "K"), lambda e, fq=sub(part, qn, x="Q"), fk=sub(part, kn, x="K"): (fq(e), fk(e)), sub=f"{part.id}.{qn}"))
    inputs = [X]
    if _rotary_given(part):
        inputs.append(ROTARY)
        cos = part.argument("position_embeddings")[0]
        partial = cos.shape[-1] < td
        part.note("positions", "rotary" + (f" on the first {cos.shape[-1]} of {td} dims (tiny)" if partial else ""), "the module is given cos and sin")
        R = T.c("R_t")
        steps.append(Step(rf"{T.q('Q_{t,h}')}\leftarrow {T.q('Q_{t,h}')}\odot\cos {R}+\operatorname{{rot}}({T.q('Q_{t,h}')})\odot\sin {R},\ \text{{likewise }}{T.k('K_{t,g}')};\ \operatorname{{rot}}([a;b])=[-b;a]",
                          ("Q", "K"), lambda e: tuple(rotate(e[n], e["R"][0][:, None], e["R"][1][:, None]) for n in ("Q", "K")), summary=True))
    else:
        part.note("positions", "none inside the attention", "the module is given no rotary angles")
    _claim(steps, {"Q": "attention_queries", "K": "attention_keys", "V": "attention_values"})
    group = h // kv
    if group > 1:
        shared_head = r"_{\lceil h/" + str(group) + r"\rceil}"
        steps.append(Step(rf"{T.k('K_h')}={T.k('K' + shared_head)},\ {T.v('V_h')}={T.v('V' + shared_head)}\quad\text{{{group} query heads share each key–value head}}",
                          ("K", "V"), lambda e: (e["K"].repeat_interleave(th // tkv, 1), e["V"].repeat_interleave(th // tkv, 1))))
    else:
        steps.append(Step(rf"{T.k('K_h')}={T.k('K_g')},\ {T.v('V_h')}={T.v('V_g')}\quad\text{{one key–value head per query head}}", ("K", "V"), lambda e: (e["K"], e["V"])))
    _scores_to_output(part, steps, h, d, out_proj, T.times(h, d))
    if "resid_dropout" in names:
        steps.append(Step(r"\Delta\leftarrow\operatorname{Dropout}(\Delta)=\Delta\quad\text{(at inference)}", "y", sub(part, "resid_dropout", x="y")))
    return Chain(steps, inputs, "y", output_element=0)


def latent_attention(part: Part) -> Chain:
    """Multi-head latent attention: queries and keys/values rebuilt from small per-token latents, a
    rotary part of each query and one rotary key shared by every head."""
    import torch

    cfg, tcfg = part.ctx.full_config, part.ctx.tiny_config
    h, th = cfg.num_attention_heads, tcfg.num_attention_heads
    nope, rope, dv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    tn, tr, tdv = tcfg.qk_nope_head_dim, tcfg.qk_rope_head_dim, tcfg.v_head_dim
    width, rkv, tkv = cfg.hidden_size, cfg.kv_lora_rank, tcfg.kv_lora_rank
    names = set(dict(part.tiny.named_children()))
    qC, qR, kC, kR = T.q("q^{C}_h"), T.q("q^{R}_h"), T.k("k^{C}_h"), T.k("k^{R}")
    cq, cq_hat, ckv, ckv_hat = T.q("c^{Q}"), T.q(r"\hat c^{Q}"), T.k("c^{KV}"), T.k(r"\hat c^{KV}")

    def build(rotate, words: str) -> Chain:
        steps: list[Step] = []
        if "q_a_proj" in names:
            rq = cfg.q_lora_rank
            steps += [
                Step(rf"{cq}=x W_{{DQ}}^{{\top}}{T.maps(width, rq)}", "cq", sub(part, "q_a_proj")),
                Step(rf"{cq_hat}=\operatorname{{Norm}}({cq})", "cq", sub(part, "q_a_layernorm", x="cq")),
                Step(rf"[{qC};\,{qR}]={cq_hat}W_{{UQ}}^{{\top}}{T.maps(rq, T.times(h, f'({T.num(nope)}+{T.num(rope)})'))}", "q", sub(part, "q_b_proj", x="cq"), summary=True),
            ]
        else:
            steps.append(Step(rf"[{qC};\,{qR}]=x W_Q^{{\top}}{T.maps(width, T.times(h, f'({T.num(nope)}+{T.num(rope)})'))}", "q", sub(part, "q_proj"), summary=True))

        def heads(e):
            B, T_ = e["x"].shape[:2]
            q = e["q"].view(B, T_, th, tn + tr).transpose(1, 2)
            return q[..., :tn], q[..., tn:]

        steps += [
            Step(rf"{qC}\in\mathbb{{R}}^{{{T.num(nope)}}},\ {qR}\in\mathbb{{R}}^{{{T.num(rope)}}}\ \text{{per head }}h=1..{T.num(h)}", ("qC", "qR"), heads),
            Step(rf"[{ckv};\,{kR}]=x W_{{DKV}}^{{\top}}{T.maps(width, f'{T.num(rkv)}+{T.num(rope)}')}", "ckv", sub(part, "kv_a_proj_with_mqa"), summary=True),
            Step(rf"{ckv},\ {kR}\ \text{{the first }}{T.num(rkv)}\text{{ and last }}{T.num(rope)}\text{{ columns}}", ("ckv", "kR"),
                 lambda e: (e["ckv"][..., :tkv], e["ckv"][..., tkv:].unsqueeze(1))),
            Step(rf"{ckv_hat}=\operatorname{{Norm}}({ckv})", "ckv", sub(part, "kv_a_layernorm", x="ckv")),
            Step(rf"[{kC};\,{T.v('v_h')}]={ckv_hat}W_{{UKV}}^{{\top}}{T.maps(rkv, T.times(h, f'({T.num(nope)}+{T.num(dv)})'))}", "kv", sub(part, "kv_b_proj", x="ckv"), summary=True),
            Step(rf"{kC}\in\mathbb{{R}}^{{{T.num(nope)}}},\ {T.v('V_h')}\in\mathbb{{R}}^{{{T.num(dv)}}}\ \text{{per head}}", ("kC", "V"),
                 lambda e: (lambda kv: (kv[..., :tn], kv[..., tn:]))(e["kv"].view(*e["x"].shape[:2], th, tn + tdv).transpose(1, 2))),
            Step(rf"{qR}\leftarrow\operatorname{{RoPE}}({qR},{T.c('R_t')}),\ {kR}\leftarrow\operatorname{{RoPE}}({kR},{T.c('R_t')})\quad\text{{{words}}}", ("qR", "kR"),
                 lambda e: tuple(rotate(e[n], e["R"][0][:, None], e["R"][1][:, None]) for n in ("qR", "kR"))),
            Step(rf"{T.q('Q_h')}=[{qC};\,{qR}],\ {T.k('K_h')}=[{kC};\,{kR}]\in\mathbb{{R}}^{{{T.num(nope + rope)}}}\quad\text{{one rotary key for every head}}", ("Q", "K", "V"),
                 lambda e: (torch.cat((e["qC"], e["qR"]), -1), torch.cat((e["kC"], e["kR"].expand(-1, th, -1, -1)), -1), e["V"]),
                 value=("attention_queries", "attention_keys", "attention_values"), summary=True),
        ]
        _scores_to_output(part, steps, h, dv, "o_proj", T.times(h, dv))
        return Chain(steps, [X, ROTARY], "y", output_element=0)

    part.note("latent", {"kv_lora_rank": rkv, "q_lora_rank": getattr(cfg, "q_lora_rank", None), "rope_dims": rope}, "the config's sizes")
    return part.choose("rotary_layout", {
        "interleaved_pairs": lambda: build(rotate_pairs, "dims taken in adjacent pairs"),
        "halves": lambda: build(rotate_half, "the first half of the dims paired with the second half"),
    })
