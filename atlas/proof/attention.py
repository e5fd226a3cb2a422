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
ROTARY_COMPLEX = Input("R", T.c("R"), "position_embeddings", "one complex factor per position and rotated pair: cos + i sin of the angle, times the rotary attention factor", given=True)


def rotary_input(angles) -> Input:
    """How the page names the rotary angles a module is given: a (cos, sin) pair or one complex tensor."""
    return ROTARY_COMPLEX if _complex_angles(angles) else ROTARY
NEG = float("-inf")


def _attr(module, *names):
    return next((getattr(module, n) for n in names if isinstance(getattr(module, n, None), (int, float)) and not isinstance(getattr(module, n), bool)), None)


def _heads(part: Part, tiny: bool):
    cfg = part.ctx.tiny_config if tiny else part.ctx.full_config
    m = part.tiny if tiny else part.full
    h = _attr(m, "num_heads") or cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or _attr(m, "num_kv_heads") or h  # Falcon's module holds its own count
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


def _complex_angles(angles) -> bool:
    """Whether the rotary angles come as one complex tensor (DeepSeek-V2) rather than a (cos, sin) pair."""
    import torch

    return isinstance(angles, torch.Tensor) and torch.is_complex(angles)


def rotate_pairs_complex(x, freqs, _unused=None):
    """Adjacent pairs (x0, x1), (x2, x3) ... read as complex numbers a + ib and multiplied by the given
    complex factor per pair (its real and imaginary parts: r cos, r sin); the result stays interleaved."""
    import torch

    a, b = x[..., 0::2], x[..., 1::2]
    c, s = freqs.real.to(x.dtype), freqs.imag.to(x.dtype)
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


def _partial_rotary_words(part: Part, d: int, tiny_rotated: int, td: int) -> str:
    """The TeX that says how many of a head's dims the rotation turns at the checkpoint's sizes, where
    it turns only a leading part (partial_rotary_factor; the tiny run's share where the config says none)."""
    cfg = part.ctx.full_config
    rope = getattr(cfg, "rope_parameters", None) or {}
    factor = rope.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", getattr(cfg, "rotary_pct", None)))
    dims = getattr(cfg, "rotary_dim", None)  # GPT-J names the rotated width itself
    rotated = dims if isinstance(dims, int) and 0 < dims < d else int(d * factor) if factor else d * tiny_rotated // td
    return rf"\quad\text{{on the first }}{T.num(rotated)}\text{{ of }}{T.num(d)}\text{{ dims; the other }}{T.num(d - rotated)}\text{{ pass unrotated}}"


def rotate_interleaved(x, cos, sin):
    """Adjacent pairs (x0, x1), (x2, x3) ... each turned by one angle, kept in place; cos and sin given
    once per dim (each angle twice, side by side). Only the first cos.shape[-1] dims turn."""
    import torch

    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    turned = torch.stack((-x_rot[..., 1::2], x_rot[..., 0::2]), dim=-1).flatten(-2)
    return torch.cat((x_rot * cos + turned * sin, x_pass), dim=-1)


def rotate_interleaved_sin_first(x, sin, cos):
    """Adjacent pairs turned in place, the angles handed as (sin, cos) and once per pair (GPT-J)."""
    return rotate_interleaved(x, cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1))


# Rotations whose cos and sin come once per angle (half the dims they turn): the note counts dims, not angles.
rotate_half_angles.per_pair = True
rotate_interleaved_sin_first.per_pair = True


def rotate_pairs_in_place(x, cos, sin):
    """Interleaved pairs (x0, x1), (x2, x3) ... each turned by one angle (the first half of cos and sin,
    one angle per pair), the result left interleaved (GLM's layout, as ERNIE 4.5 applies it)."""
    import torch

    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    c = cos[..., : rot // 2].repeat_interleave(2, dim=-1)
    s = sin[..., : rot // 2].repeat_interleave(2, dim=-1)
    turned = torch.stack((-x_rot[..., 1::2], x_rot[..., 0::2]), dim=-1).flatten(-2)
    return torch.cat((x_rot * c + turned * s, x_pass), dim=-1)


PAIRS_TEX = r"\operatorname{rot}(x)_{2j}=-x_{2j+1},\ \operatorname{rot}(x)_{2j+1}=x_{2j}\ \text{(one angle per adjacent pair)}"


# The attention's query and key norms, by the names modules give them.
QK_NORM_NAMES = (("q_norm", "k_norm"), ("query_layernorm", "key_layernorm"), ("q_layernorm", "k_layernorm"))  # by name: OLMo, Hunyuan, LFM2


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


def _scores_to_output(part: Part, steps: list[Step], h: int, dv: int, out_proj: str, heads_tex: str, prescaled: bool = False,
                      gated: bool = False) -> None:
    """What every attention shares after the queries and keys: scale, cap, mask, softmax, mix, project.
    ``prescaled``: the queries were already multiplied by the scale (OPT), so the scores are not."""
    import torch

    if prescaled:
        part.note("scaling", _attr(part.full, "scaling"), "the module's scaling, applied to the queries before the scores")
        steps.append(Step(rf"S_h={T.q('Q_h')}{T.k('K_h')}^{{\top}}\quad\text{{(the queries carry the scale)}}", "S",
                          lambda e: e["Q"] @ e["K"].transpose(-1, -2), summary=True))
    scale, tiny_scale = _attr(part.full, "scaling"), _attr(part.tiny, "scaling")
    if prescaled:
        pass
    elif scale is None:  # a module that holds no scaling and divides by the square root of its head width (Falcon)
        scale, tiny_scale = _heads(part, tiny=False)[2] ** -0.5, _heads(part, tiny=True)[2] ** -0.5
        part.note("scaling", scale, "the module holds none: one over the square root of the head width, checked by the proof")
    else:
        part.note("scaling", scale, "the module's scaling")
    if not prescaled:
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
        Step(rf"o=[{T.v('O_1')};\dots;{T.v(f'O_{{{h}}}')}]\in\mathbb{{R}}^{{{heads_tex}}}", "o", lambda e: e["O"].reshape(*e["O"].shape[:2], -1),
             value=None if gated else "attention_premix"),
    ]
    if gated:  # an output gate: each head's output scaled by the sigmoid of its own second query half
        steps.append(Step(r"o\leftarrow o\odot\sigma(G)\quad\text{the output gate}", "o", lambda e: e["o"] * e["G"].sigmoid(),
                          value="attention_premix", summary=True))
    n_in, n_out, _ = linear_dims(getattr(part.full, out_proj))
    steps.append(Step(rf"\Delta=o\,W_O^{{\top}}{T.maps(n_in, n_out)}", "y", sub(part, out_proj, x="o"), value="attention_output", summary=True))


def _per_head_split(qkv, heads: int, head_dim: int):
    """A fused projection laid out head by head, each head's query, key and value side by side: the
    queries, keys and values each as one (batch, seq, heads * head_dim) tensor."""
    grouped = qkv.unflatten(-1, (heads, 3, head_dim))
    return tuple(grouped[..., j, :].flatten(-2) for j in range(3))


def _fused_layout(part: Part, fused: str, sizes: tuple[int, int, int], heads: int, head_dim: int) -> str:
    """How a fused query-key-value projection orders its columns, measured on the run: the values the
    attention function received (never rotated) are one layout's third part. "blocks": all queries,
    then all keys, then all values; "per_head": each head's query, key and value side by side."""
    import torch

    from atlas.proof.core import as64, captured_value

    values = captured_value(part, "attention_values")
    x = part.argument("hidden_states", 0)
    layouts = ["blocks"]
    if sizes[0] == sizes[1] == sizes[2]:
        layouts.append("per_head")
    if values is None or x is None:
        part.note("qkv_layout", "blocks", "the run recorded no values to measure it on")
        return "blocks"
    module = getattr(part.tiny, fused)
    weight = as64(module.weight)
    qkv = as64(x) @ (weight if weight.shape[0] == x.shape[-1] and not isinstance(module, torch.nn.Linear) else weight.T)
    if getattr(module, "bias", None) is not None:
        qkv = qkv + as64(module.bias)
    values = as64(values)
    for layout in layouts:
        v = qkv.split(sizes, dim=-1)[2] if layout == "blocks" else _per_head_split(qkv, heads, head_dim)[2]
        v = v.unflatten(-1, (-1, head_dim)).transpose(1, 2)
        if v.shape == values.shape and float((v - values).abs().max()) <= 1e-4 * max(1.0, float(values.abs().max())):
            part.note("qkv_layout", layout, "measured: the fused projection's columns that give the values the attention function received")
            return layout
    part.note("qkv_layout", "blocks", "no layout gives the values the attention function received")
    return "blocks"


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
        if _attr(part.tiny, "scaling") is None:
            return _attention(part, None)
        # where the scale is applied: to the scores, or to the queries before them (OPT), as measured
        return part.choose("score_scale", {"on_scores": lambda: _attention(part, None),
                                           "on_queries": lambda: _attention(part, None, prescaled=True)})
    # "none": given the angles and leaving them unused (a NoPE block: SmolLM3, Llama 4), measured like the rest
    return part.choose("rotary_layout", {"halves": lambda: _attention(part, rotate_half),
                                         "halves_angle_per_pair": lambda: _attention(part, rotate_half_angles),
                                         "interleaved": lambda: _attention(part, rotate_interleaved, PAIRS_TEX),
                                         "interleaved_sin_first_angle_per_pair": lambda: _attention(part, rotate_interleaved_sin_first, PAIRS_TEX),
                                         "pairs_in_place": lambda: _attention(part, rotate_pairs_in_place, PAIRS_TEX),
                                         "not_applied": lambda: _attention(part, None),
                                         # per-head q/k norms applied to the rotated queries and keys (Hunyuan)
                                         "halves_then_head_norms": lambda: _attention(part, rotate_half, norm_after_rotary=True)})


def _attention(part: Part, rotate, rot_tex: str = r"\operatorname{rot}([a;b])=[-b;a]", prescaled: bool = False,
               norm_after_rotary: bool = False) -> Chain:
    h, kv, d = _heads(part, tiny=False)
    th, tkv, td = _heads(part, tiny=True)
    width = part.ctx.full_config.hidden_size
    names = set(dict(part.tiny.named_children()))
    steps: list[Step] = []
    Q, K, V = T.q("Q"), T.k("K"), T.v("V")
    # an output gate rides on the query projection: twice the query width, each head's [query; gate]
    gated = "q_proj" in names and linear_dims(part.tiny.q_proj)[1] == 2 * th * td
    if {"q_proj", "k_proj", "v_proj"} <= names:
        for sym, name, heads, stream in ((Q, "q_proj", h, "Q"), (K, "k_proj", kv, "K"), (V, "v_proj", kv, "V")):
            b = "+b" if getattr(getattr(part.tiny, name), "bias", None) is not None else ""
            if gated and name == "q_proj":
                steps.append(Step(rf"[{Q};G]=x W_Q^{{\top}}{b}{T.maps(width, T.times(heads, 2 * d))}", stream, sub(part, name), summary=False))
                continue
            steps.append(Step(rf"{sym}=x W_{stream}^{{\top}}{b}{T.maps(width, T.times(heads, d))}", stream, sub(part, name), summary=False))
        out_proj = next(n for n in ("o_proj", "dense", "out_proj", "c_proj") if n in names)
    else:
        fused = next(n for n in ("qkv_proj", "c_attn", "query_key_value") if n in names)
        _, n_out, stored = linear_dims(getattr(part.full, fused))
        b = "+b" if getattr(getattr(part.tiny, fused), "bias", None) is not None else ""
        W = "W_{QKV}" if stored else r"W_{QKV}^{\top}"
        steps.append(Step(rf"[{Q};{K};{V}]=x {W}{b}{T.maps(width, n_out)}", "QKV", sub(part, fused)))
        sizes = (th * td, tkv * td, tkv * td)
        if _fused_layout(part, fused, sizes, th, td) == "per_head":
            steps.append(Step(rf"{Q}_h,{K}_h,{V}_h\ \text{{the three }}{T.num(d)}\text{{-wide thirds of head }}h\text{{'s }}{T.num(3 * d)}\text{{ columns}}",
                              ("Q", "K", "V"), lambda e: _per_head_split(e["QKV"], th, td)))
        else:
            steps.append(Step(rf"{Q},{K},{V}\ \text{{the column blocks of widths }}{T.num(h * d)},{T.num(kv * d)},{T.num(kv * d)}", ("Q", "K", "V"),
                              lambda e: e["QKV"].split(sizes, dim=-1)))
        out_proj = next(n for n in ("o_proj", "c_proj", "dense", "out_proj") if n in names)
    part.note("heads", {"query": h, "key_value": kv, "head_dim": d}, "the module's and config's sizes")
    if prescaled:
        scale, tiny_scale = _attr(part.full, "scaling"), _attr(part.tiny, "scaling")
        steps.append(Step(rf"{Q}\leftarrow{T.num(scale)}\,{Q}\quad\text{{(scaled before the scores)}}", "Q", lambda e: tiny_scale * e["Q"]))
    if gated:
        part.note("output_gate", True, "the query projection is twice the heads' width: each head's second half gates its output")

        def ungate(e):
            B, T_ = e["x"].shape[:2]
            q, g = e["Q"].view(B, T_, th, 2 * td).chunk(2, dim=-1)
            return q.reshape(B, T_, -1), g.reshape(B, T_, -1)

        steps.append(Step(rf"[{Q}_h;\,G_h]\ \text{{the two halves of each head's }}{T.num(2 * d)}\text{{ columns of }}{Q}", ("Q", "G"), ungate))
    qn, kn = next(((q, k) for q, k in QK_NORM_NAMES if {q, k} <= names), QK_NORM_NAMES[0])
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
    head_norms = [Step(rf"{T.q('Q_h')}\leftarrow\operatorname{{Norm}}_q({T.q('Q_h')}),\ {T.k('K_g')}\leftarrow\operatorname{{Norm}}_k({T.k('K_g')})\quad\text{{per head, over }}{T.num(d)}"
                       + (r"\ \text{(after the rotation)}" if norm_after_rotary else ""),
                       ("Q", "K"), lambda e, fq=sub(part, qn, x="Q"), fk=sub(part, kn, x="K"): (fq(e), fk(e)), sub=f"{part.id}.{qn}")] if norms and per_head else []
    if not norm_after_rotary:
        steps += head_norms
    inputs = [X]
    if _rotary_given(part) and rotate is None:  # handed the angles, applies none (Cohere 2's global layers)
        part.note("positions", "none: the rotary angles it is handed are not applied", "measured: only the chain without rotation reproduces it")
    elif _rotary_given(part):
        inputs.append(ROTARY)
        turned = part.argument("position_embeddings")[0].shape[-1] * (2 if getattr(rotate, "per_pair", False) else 1)
        partial = turned < td
        part.note("positions", "rotary" + (f" on the first {turned} of {td} dims (tiny)" if partial else ""), "the module is given cos and sin")
        R = T.c("R_t")
        only = _partial_rotary_words(part, d, turned, td) if partial else ""
        steps.append(Step(rf"{T.q('Q_{t,h}')}\leftarrow {T.q('Q_{t,h}')}\odot\cos {R}+\operatorname{{rot}}({T.q('Q_{t,h}')})\odot\sin {R},\ \text{{likewise }}{T.k('K_{t,g}')};\ " + rot_tex + only,
                          ("Q", "K"), lambda e: tuple(rotate(e[n], e["R"][0][:, None], e["R"][1][:, None]) for n in ("Q", "K")), summary=True))
    else:
        part.note("positions", "none inside the attention", "the module is given no rotary angles")
    if norm_after_rotary:
        steps += head_norms
    _claim(steps, {"Q": "attention_queries", "K": "attention_keys", "V": "attention_values"})
    group = h // kv
    if group > 1:
        shared_head = r"_{\lceil h/" + str(group) + r"\rceil}"
        steps.append(Step(rf"{T.k('K_h')}={T.k('K' + shared_head)},\ {T.v('V_h')}={T.v('V' + shared_head)}\quad\text{{{group} query heads share each key–value head}}",
                          ("K", "V"), lambda e: (e["K"].repeat_interleave(th // tkv, 1), e["V"].repeat_interleave(th // tkv, 1))))
    else:
        steps.append(Step(rf"{T.k('K_h')}={T.k('K_g')},\ {T.v('V_h')}={T.v('V_g')}\quad\text{{one key–value head per query head}}", ("K", "V"), lambda e: (e["K"], e["V"])))
    _scores_to_output(part, steps, h, d, out_proj, T.times(h, d), prescaled, gated=gated)
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

    # Latents scaled by the square root of the width over their rank (LongCat-Flash's mla_scale_q_lora,
    # mla_scale_kv_lora): settings the module holds, multiplied in after the split and after the norm
    sq, skv = getattr(part.full, "mla_scale_q_lora", None), getattr(part.full, "mla_scale_kv_lora", None)
    tsq, tskv = getattr(part.tiny, "mla_scale_q_lora", None), getattr(part.tiny, "mla_scale_kv_lora", None)
    lora_scales = all(isinstance(v, float) for v in (sq, skv, tsq, tskv))
    if lora_scales:
        part.note("latent_scales", {"queries": sq, "keys_values": skv}, "the module's settings")

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

        steps.append(Step(rf"{qC}\in\mathbb{{R}}^{{{T.num(nope)}}},\ {qR}\in\mathbb{{R}}^{{{T.num(rope)}}}\ \text{{per head }}h=1..{T.num(h)}", ("qC", "qR"), heads))
        if lora_scales:
            steps.append(Step(rf"{qC}\leftarrow{T.num(sq)}\,{qC},\ {qR}\leftarrow{T.num(sq)}\,{qR}\quad\text{{(}}\sqrt{{{T.num(width)}/{T.num(cfg.q_lora_rank)}}}\text{{, the width over the query latent's)}}",
                              ("qC", "qR"), lambda e: (e["qC"] * tsq, e["qR"] * tsq)))
        steps += [
            Step(rf"[{ckv};\,{kR}]=x W_{{DKV}}^{{\top}}{T.maps(width, f'{T.num(rkv)}+{T.num(rope)}')}", "ckv", sub(part, "kv_a_proj_with_mqa"), summary=True),
            Step(rf"{ckv},\ {kR}\ \text{{the first }}{T.num(rkv)}\text{{ and last }}{T.num(rope)}\text{{ columns}}", ("ckv", "kR"),
                 lambda e: (e["ckv"][..., :tkv], e["ckv"][..., tkv:].unsqueeze(1))),
            Step(rf"{ckv_hat}=\operatorname{{Norm}}({ckv})", "ckv", sub(part, "kv_a_layernorm", x="ckv")),
        ]
        if lora_scales:
            steps.append(Step(rf"{ckv_hat}\leftarrow{T.num(skv)}\,{ckv_hat}\quad\text{{(}}\sqrt{{{T.num(width)}/{T.num(rkv)}}}\text{{, the width over the key-value latent's)}}",
                              "ckv", lambda e: e["ckv"] * tskv))
        steps += [
            Step(rf"[{kC};\,{T.v('v_h')}]={ckv_hat}W_{{UKV}}^{{\top}}{T.maps(rkv, T.times(h, f'({T.num(nope)}+{T.num(dv)})'))}", "kv", sub(part, "kv_b_proj", x="ckv"), summary=True),
            Step(rf"{kC}\in\mathbb{{R}}^{{{T.num(nope)}}},\ {T.v('V_h')}\in\mathbb{{R}}^{{{T.num(dv)}}}\ \text{{per head}}", ("kC", "V"),
                 lambda e: (lambda kv: (kv[..., :tn], kv[..., tn:]))(e["kv"].view(*e["x"].shape[:2], th, tn + tdv).transpose(1, 2))),
            *([Step(rf"{qR}\leftarrow\operatorname{{RoPE}}({qR},{T.c('R_t')}),\ {kR}\leftarrow\operatorname{{RoPE}}({kR},{T.c('R_t')})\quad\text{{{words}}}", ("qR", "kR"),
                    lambda e: tuple(rotate(e[n], e["R"][:, None]) if _complex_angles(e["R"]) else rotate(e[n], e["R"][0][:, None], e["R"][1][:, None])
                                    for n in ("qR", "kR")))] if rotate else []),
            Step(rf"{T.q('Q_h')}=[{qC};\,{qR}],\ {T.k('K_h')}=[{kC};\,{kR}]\in\mathbb{{R}}^{{{T.num(nope + rope)}}}\quad\text{{one rotary key for every head}}", ("Q", "K", "V"),
                 lambda e: (torch.cat((e["qC"], e["qR"]), -1), torch.cat((e["kC"], e["kR"].expand(-1, th, -1, -1)), -1), e["V"]),
                 value=("attention_queries", "attention_keys", "attention_values"), summary=True),
        ]
        _scores_to_output(part, steps, h, dv, "o_proj", T.times(h, dv))
        return Chain(steps, [X, rotary_input(part.argument("position_embeddings"))] if rotate else [X], "y", output_element=0)

    part.note("latent", {"kv_lora_rank": rkv, "q_lora_rank": getattr(cfg, "q_lora_rank", None), "rope_dims": rope}, "the config's sizes")
    if not _rotary_given(part):  # no rotary angles (Kimi Linear's MLA): the "rotary" parts are plain projections
        part.note("positions", "none inside the attention", "the module is given no rotary angles")
        return build(None, "")
    if _complex_angles(part.argument("position_embeddings")):
        # The model hands one complex number per rotated pair (cos + i sin, times any rotary attention
        # factor) instead of a (cos, sin) pair: the other layouts cannot even read it.
        return part.choose("rotary_layout", {
            "interleaved_pairs_complex": lambda: build(rotate_pairs_complex, "dims taken in adjacent pairs, each pair turned (and scaled) by the given complex factor; the pairs stay in place"),
        })
    return part.choose("rotary_layout", {
        "interleaved_pairs": lambda: build(rotate_pairs, "dims taken in adjacent pairs"),
        "halves": lambda: build(rotate_half, "the first half of the dims paired with the second half"),
    })
