"""The equations of attention: latent (multi-head latent attention) and grouped-query, with the
softcap and the causal or sliding-window mask between scores and softmax."""

from __future__ import annotations

from atlas.math import stream
from atlas.pages.sizes import Sizes
from atlas.pages.tex import tex_num


def _q(t: str) -> str:
    return stream("q", t)


def _k(t: str) -> str:
    return stream("k", t)


def _v(t: str) -> str:
    return stream("v", t)


def _c(t: str) -> str:
    return stream("c", t)


def eq_latent_attention(s: Sizes) -> dict[str, list[str]]:
    d = s.get("hidden_size")
    heads = s.get("num_heads")
    rq = s.get("q_lora_rank")
    rkv = s.get("kv_lora_rank")
    nope = s.get("qk_nope_head_dim")
    rope = s.get("qk_rope_head_dim")
    dv = s.get("v_head_dim")
    scale = s.attention.get("scaling_rounded")
    qC, qR, kC, kR = _q("q^{C}_h"), _q("q^{R}_h"), _k("k^{C}_h"), _k("k^{R}")
    Qh, Kh, Vh = _q("Q_h"), _k("K_h"), _v("V_h")
    R = _c(r"R_t")
    cq, cq_hat, ckv, ckv_hat = _q("c^{Q}"), _q(r"\hat c^{Q}"), _k("c^{KV}"), _k(r"\hat c^{KV}")
    o_last = _v(f"O_{{{heads}}}")
    steps = []
    if rq:
        steps += [
            rf"{cq}=xW_{{DQ}}\quad {tex_num(d)}\to{tex_num(rq)}",
            rf"{cq_hat}=\operatorname{{RMSNorm}}({cq})",
            rf"[{qC};\,{qR}]={cq_hat}W_{{UQ}}\quad {tex_num(rq)}\to{tex_num(heads)}\times({tex_num(nope)}+{tex_num(rope)})",
        ]
    else:
        steps += [rf"[{qC};\,{qR}]=xW_{{Q}}\quad {tex_num(d)}\to{tex_num(heads)}\times({tex_num(nope)}+{tex_num(rope)})"]
    steps += [
        rf"{_q('q^{R}_{t,h}')}=\operatorname{{RoPE}}({_q('q^{R}_{t,h}')},{R})",
        rf"[{ckv};\,{kR}]=xW_{{DKV}}\quad {tex_num(d)}\to{tex_num(rkv)}+{tex_num(rope)}",
        rf"{_k('k^{R}_t')}=\operatorname{{RoPE}}({_k('k^{R}_t')},{R})\quad\text{{one rotary key shared by all heads}}",
        rf"{ckv_hat}=\operatorname{{RMSNorm}}({ckv})",
        rf"[{kC};\,{_v('v_h')}]={ckv_hat}W_{{UKV}}\quad {tex_num(rkv)}\to{tex_num(heads)}\times({tex_num(nope)}+{tex_num(dv)})",
        rf"{Qh}=[{qC};\,{qR}],\quad {Kh}=[{kC};\,{kR}]\quad\in\mathbb{{R}}^{{{tex_num(nope + rope)}}}",
        rf"S_h={tex_num(scale)}\,{Qh}{Kh}^{{\top}}",
        *_softcap_and_mask(s),
        rf"P_h=\operatorname{{softmax}}(S_h)",
        rf"{_v('O_h')}=P_h{Vh}\quad\in\mathbb{{R}}^{{T\times{tex_num(dv)}}}",
        rf"\Delta_{{\mathrm{{attn}}}}=[{_v('O_1')};\dots;{o_last}]W_{{O}}\quad {tex_num(heads * dv)}\to{tex_num(d)}",
    ]
    return {
        "summary": [
            rf"{Qh}=[{qC};\operatorname{{RoPE}}({qR})],\ {Kh}=[{kC};\operatorname{{RoPE}}({kR})],\ {Vh}\ \text{{from a }}{tex_num(rkv)}\text{{-wide latent}}",
            rf"\Delta_{{\mathrm{{attn}}}}=\big[\operatorname{{softmax}}({tex_num(scale)}\,{Qh}{Kh}^{{\top}}+{_c('M')}){Vh}\big]_{{h=1}}^{{{tex_num(heads)}}}W_{{O}}",
        ],
        "steps": steps,
    }


def _softcap_and_mask(s: Sizes) -> list[str]:
    """The steps between the scaled scores and the softmax: a softcap where the config sets one, then
    the causal mask, limited to a window on sliding-window blocks."""
    steps = []
    cap = s.get("attn_logit_softcapping")
    if cap:
        steps.append(rf"S_h\leftarrow{tex_num(cap)}\tanh(S_h/{tex_num(cap)})")
    window = s.get("sliding_window")
    M = _c("M")
    if s.attention_type == "sliding_attention" and window:
        steps.append(rf"S_h\leftarrow S_h+{M},\quad {M}_{{ts}}=0\ \text{{if}}\ t-{tex_num(window)}<s\le t,\ -\infty\ \text{{otherwise}}")
    else:
        steps.append(rf"S_h\leftarrow S_h+{M},\quad {M}_{{ts}}=0\ \text{{if}}\ s\le t,\ -\infty\ \text{{otherwise}}")
    return steps


def eq_attention(s: Sizes, names: set[str]) -> dict[str, list[str]]:
    d = s.get("hidden_size")
    heads = s.get("num_heads")
    kv = s.get("num_kv_heads") or heads
    hd = s.get("head_dim") or (d // heads if d and heads else None)
    scale = s.attention.get("scaling_rounded")
    scale_tex = tex_num(scale) if scale is not None else rf"1/\sqrt{{{tex_num(hd)}}}"
    group = heads // kv if heads and kv else 1
    Qh, Kh, Vh = _q("Q_h"), _k("K_{g(h)}"), _v("V_{g(h)}")
    o_last = _v(f"O_{{{heads}}}")
    steps = [
        rf"{_q('Q')}=xW_{{Q}}\quad {tex_num(d)}\to{tex_num(heads)}\times{tex_num(hd)}",
        rf"{_k('K')}=xW_{{K}}\quad {tex_num(d)}\to{tex_num(kv)}\times{tex_num(hd)}",
        rf"{_v('V')}=xW_{{V}}\quad {tex_num(d)}\to{tex_num(kv)}\times{tex_num(hd)}",
    ]
    if "q_norm" in names:
        steps.append(rf"{_q('Q_h')}=\operatorname{{RMSNorm}}({_q('Q_h')}),\ {_k('K_g')}=\operatorname{{RMSNorm}}({_k('K_g')})")
    steps += [
        rf"{_q('Q_{t,h}')}=\operatorname{{RoPE}}({_q('Q_{t,h}')},{_c('R_t')}),\ {_k('K_{t,g}')}=\operatorname{{RoPE}}({_k('K_{t,g}')},{_c('R_t')})",
        rf"g(h)=\lceil h/{tex_num(group)}\rceil\quad\text{{{tex_num(group)} query heads share each key–value head}}"
        if group > 1
        else r"g(h)=h",
        rf"S_h={scale_tex}\,{Qh}{Kh}^{{\top}}",
        *_softcap_and_mask(s),
        r"P_h=\operatorname{softmax}(S_h)",
        rf"{_v('O_h')}=P_h{Vh}",
        rf"\Delta_{{\mathrm{{attn}}}}=[{_v('O_1')};\dots;{o_last}]W_{{O}}\quad {tex_num(heads * hd)}\to{tex_num(d)}",
    ]
    return {
        "summary": [
            rf"\Delta_{{\mathrm{{attn}}}}=\big[\operatorname{{softmax}}({scale_tex}\,{Qh}{Kh}^{{\top}}+{_c('M')}){Vh}\big]_{{h=1}}^{{{tex_num(heads)}}}W_{{O}}"
        ],
        "steps": steps,
    }
