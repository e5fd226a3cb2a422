"""The pages' view of a family, as plain data computed from its facts.

``site(facts)`` returns everything the templates lay out beyond the facts themselves:

- ``nodes``: the component hierarchy, model › blocks › block kind › component › sub-component ›
  tensor, one page each, with breadcrumbs, a description, the constructor call, equations (TeX, per
  component kind, filled with the checkpoint's numbers), inputs and outputs with named dims, the
  accounting table and the evidence (pinned excerpts, each with the claim it supports);
- ``diagram``: the residual-stream diagram of each block kind (SVG geometry) and the model's flow,
  each part naming the standard value it produces and the card a reader sees on hover;
- ``search``: the words the index's search box matches for the family.

Equations are written per component *kind* (RMSNorm, latent attention, grouped-query attention, a
mixture of experts, a gated MLP, an embedding, a linear map …), never per family: the numbers come
from the config and the accounting.
"""

from __future__ import annotations

import re
from typing import Any

from atlas import search
from atlas.math import stream
from atlas.numbers import grouped

# --------------------------------------------------------------------------------------------------
# Config access


class Sizes:
    """The config values equations need, read from the released config (or its text_config)."""

    def __init__(self, facts: dict[str, Any]):
        self.raw = facts["config"]["raw"]
        self.std = facts["config"]["standardized"]
        self.attention = facts.get("attention", {})
        self.attention_type: str | None = None  # of the block kind whose pages are being built
        self.act = self.first("hidden_act", "hidden_activation", "activation_function", default="silu")

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.std and self.std[key] is not None:
            return self.std[key]
        if key in self.raw:
            return self.raw[key]
        text = self.raw.get("text_config")
        if isinstance(text, dict) and key in text:
            return text[key]
        return default

    def first(self, *keys: str, default: Any = None) -> Any:
        for key in keys:
            value = self.get(key)
            if value is not None:
                return value
        return default


def tex_num(n: Any) -> str:
    """A number as TeX: integers grouped with thin commas, small floats kept as written."""
    if isinstance(n, bool):
        return str(n)
    if isinstance(n, int):
        return grouped(n).replace(",", "{,}")
    if isinstance(n, float):
        if n != 0 and abs(n) < 1e-3:
            mantissa, exponent = f"{n:.0e}".split("e")
            return (f"{mantissa} \\cdot " if mantissa != "1" else "") + f"10^{{{int(exponent)}}}"
        return f"{n:g}"
    return str(n)


# --------------------------------------------------------------------------------------------------
# Names and roles


TITLES = {
    "embed_tokens": "Token embedding",
    "norm": "Final RMSNorm",
    "lm_head": "Language-model head",
    "input_layernorm": "Attention RMSNorm",
    "post_attention_layernorm": "MLP RMSNorm",
    "self_attn": "Attention",
    "mlp": "MLP",
    "q_a_proj": "Query down-projection",
    "q_a_layernorm": "Query latent RMSNorm",
    "q_b_proj": "Query up-projection",
    "kv_a_proj_with_mqa": "Key–value down-projection",
    "kv_a_layernorm": "Key–value latent RMSNorm",
    "kv_b_proj": "Key–value up-projection",
    "q_proj": "Query projection",
    "k_proj": "Key projection",
    "v_proj": "Value projection",
    "o_proj": "Output projection",
    "q_norm": "Query RMSNorm",
    "k_norm": "Key RMSNorm",
    "gate_proj": "Gate projection",
    "up_proj": "Up projection",
    "down_proj": "Down projection",
    "act_fn": "Activation",
    "gate": "Router",
    "router": "Router",
    "experts": "Routed experts",
    "shared_experts": "Shared expert",
    "shared_expert": "Shared expert",
    "rotary_emb": "Rotary embedding",
}


def role(node: dict[str, Any]) -> str:
    """The kind of component a tree node is, from its class and its children's names."""
    cls = node["class"]
    names = {c["name"] for c in node.get("children", [])}
    if cls.endswith("DecoderLayer") or (cls.endswith("Block") and "SparseMoe" not in cls):  # Mixtral's MLP is a *SparseMoeBlock
        return "block"
    if "RMSNorm" in cls:
        return "rmsnorm"
    if "LayerNorm" in cls:
        return "layernorm"
    if cls == "Embedding" or cls.endswith("Embedding") and "Rotary" not in cls:
        return "embedding"
    if cls in ("Linear", "Conv1D"):  # GPT-2's Conv1D is a linear map whose weight is stored [in, out]
        return "linear"
    if "Dropout" in cls:
        return "dropout"
    if "Attention" in cls:
        return "latent_attention" if "kv_a_proj_with_mqa" in names else "attention"
    if "Router" in cls or (node["name"] == "gate" and cls != "Linear"):
        return "router"
    if cls.endswith("Experts"):
        return "experts"
    if "MoE" in cls or "SparseMoe" in cls or ("experts" in names and ("gate" in names or "router" in names)):
        return "moe"
    if "MLP" in cls and {"gate_proj", "up_proj", "down_proj"} <= names:
        return "gated_mlp"
    if "MLP" in cls:
        return "mlp"
    if "Activation" in cls or cls in {"SiLU", "GELU", "GELUActivation", "PytorchGELUTanh"}:
        return "activation"
    return "module"


ROLE_TITLES = {
    "latent_attention": "Latent attention",
    "attention": "Attention",
    "moe": "Mixture of experts",
    "gated_mlp": "Gated MLP",
    "router": "Router",
    "experts": "Routed experts",
}


SLOT_TITLES = {"pre_attn": "Attention {norm}", "post_attn": "Post-attention {norm}", "pre_ffn": "{mlp} {norm}", "post_ffn": "Post-{mlp} {norm}"}


def title_of(node: dict[str, Any], parent_role: str | None = None, slot: str | None = None) -> str:
    r = role(node)
    name = node["name"]
    if slot in SLOT_TITLES and r in ("rmsnorm", "layernorm"):
        return SLOT_TITLES[slot].format(norm="LayerNorm" if r == "layernorm" else "RMSNorm", mlp="MoE" if parent_role == "moe_block" else "MLP")
    if name in ("self_attn", "mlp") and r in ROLE_TITLES:
        return ROLE_TITLES[r]
    if name == "post_attention_layernorm" and parent_role == "moe_block":
        return "MoE RMSNorm"
    if name == "mlp" and r == "gated_mlp":
        return "Dense MLP"
    return TITLES.get(name) or ROLE_TITLES.get(r) or name


def _lower(title: str) -> str:
    """'Latent attention' -> 'latent attention'; 'Gated MLP' -> 'gated MLP'."""
    return " ".join(w if w.isupper() or any(ch.isupper() for ch in w[1:]) else w.lower() for w in title.split())


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")


# --------------------------------------------------------------------------------------------------
# Equations, per component kind. Each returns {"summary": [tex], "steps": [tex]}.

def _q(t: str) -> str:
    return stream("q", t)


def _k(t: str) -> str:
    return stream("k", t)


def _v(t: str) -> str:
    return stream("v", t)


def _c(t: str) -> str:
    return stream("c", t)


def _act_tex(act: str) -> tuple[str, str]:
    """(name, definition) of an activation function."""
    act = (act or "silu").lower()
    if act in ("silu", "swish"):
        return r"\operatorname{SiLU}", r"\operatorname{SiLU}(g)=g\,\sigma(g)=\frac{g}{1+e^{-g}}"
    if act in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu_tanh"):
        return r"\operatorname{GELU}", r"\operatorname{GELU}(g)\approx\tfrac12 g\big(1+\tanh\big(\sqrt{2/\pi}\,(g+0.044715\,g^3)\big)\big)"
    if act.startswith("gelu"):
        return r"\operatorname{GELU}", r"\operatorname{GELU}(g)=g\,\Phi(g)"
    return r"\operatorname{" + act + "}", r"\operatorname{" + act + r"}(g)"


def eq_rmsnorm(width: int, eps: float, x: str = "x", y: str = "y") -> dict[str, list[str]]:
    return {
        "summary": [rf"{y}=\frac{{{x}}}{{\sqrt{{\tfrac{{1}}{{{tex_num(width)}}}\sum_j {x}_j^2+{tex_num(eps)}}}}}\odot g"],
        "steps": [
            rf"{x}\leftarrow\operatorname{{float32}}({x})",
            rf"\rho=\frac{{1}}{{{tex_num(width)}}}\sum_{{j=1}}^{{{tex_num(width)}}}{x}_j^2",
            rf"\hat{{{x}}}={x}\,/\sqrt{{\rho+{tex_num(eps)}}}",
            rf"{y}=g\odot\hat{{{x}}}\quad g\in\mathbb{{R}}^{{{tex_num(width)}}}\ \text{{learned}}",
        ],
    }


def eq_linear(n_in: int, n_out: int, bias: bool, x: str = "x", y: str = "y") -> dict[str, list[str]]:
    b = "+b" if bias else ""
    return {
        "summary": [rf"{y}={x}W^{{\top}}{b},\quad W\in\mathbb{{R}}^{{{tex_num(n_out)}\times{tex_num(n_in)}}}"],
        "steps": [rf"{y}_i=\sum_{{j=1}}^{{{tex_num(n_in)}}}W_{{ij}}\,{x}_j{b.replace('b', 'b_i')}\quad i=1,\dots,{tex_num(n_out)}"],
    }


def eq_embedding(vocab: int, width: int) -> dict[str, list[str]]:
    return {
        "summary": [rf"x_0=E[I],\quad E\in\mathbb{{R}}^{{{tex_num(vocab)}\times{tex_num(width)}}}"],
        "steps": [rf"x_{{0,t}}=E_{{I_t,:}}\quad\text{{row }}I_t\text{{ of the table, for each position }}t"],
    }


def eq_head(vocab: int, width: int) -> dict[str, list[str]]:
    return {
        "summary": [rf"z=\hat x_{{L}}W_{{\mathrm{{out}}}}^{{\top}},\quad W_{{\mathrm{{out}}}}\in\mathbb{{R}}^{{{tex_num(vocab)}\times{tex_num(width)}}}"],
        "steps": [rf"z_{{t,v}}=\langle \hat x_{{L,t}},\,W_{{\mathrm{{out}},v}}\rangle\quad v=1,\dots,{tex_num(vocab)}"],
    }


def eq_activation(act: str) -> dict[str, list[str]]:
    _, definition = _act_tex(act)
    return {"summary": [definition], "steps": [definition]}


def eq_gated_mlp(width: int, inner: int, act: str, out: str = "y") -> dict[str, list[str]]:
    a, definition = _act_tex(act)
    return {
        "summary": [rf"{out}=\big({a}(xW_{{g}})\odot xW_{{u}}\big)W_{{d}},\quad {tex_num(width)}\to{tex_num(inner)}\to{tex_num(width)}"],
        "steps": [
            rf"g=xW_{{g}}\quad W_{{g}}\in\mathbb{{R}}^{{{tex_num(width)}\times{tex_num(inner)}}}",
            rf"u=xW_{{u}}\quad W_{{u}}\in\mathbb{{R}}^{{{tex_num(width)}\times{tex_num(inner)}}}",
            definition,
            rf"h={a}(g)\odot u",
            rf"{out}=hW_{{d}}\quad W_{{d}}\in\mathbb{{R}}^{{{tex_num(inner)}\times{tex_num(width)}}}",
        ],
    }


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


def _routing(s: Sizes, router: dict[str, Any] | None) -> dict[str, Any]:
    n = s.first("n_routed_experts", "num_local_experts", "num_experts")
    k = s.first("num_experts_per_tok", "top_k")
    scale = s.get("routed_scaling_factor")
    scoring = s.get("scoring_func", "softmax")
    bias = bool(router and any(t["name"] == "e_score_correction_bias" for t in router["tensors"]))
    normalize = s.get("norm_topk_prob", True)
    return {"n": n, "k": k, "scale": scale, "scoring": scoring, "bias": bias, "normalize": normalize}


def eq_router_topk_softmax(s: Sizes) -> dict[str, list[str]]:
    """A router that picks the top k logits first and takes the softmax over those k only (gpt-oss)."""
    r = _routing(s, None)
    n, k = tex_num(r["n"]), tex_num(r["k"])
    steps = [
        rf"z=xW_{{r}}^{{\top}}+b_r\quad W_r\in\mathbb{{R}}^{{{n}\times{tex_num(s.get('hidden_size'))}}}",
        rf"\mathcal{{E}}=\operatorname{{top}}_{{{k}}}(z)",
        r"G_i=\frac{e^{z_i}}{\sum_{j\in\mathcal{E}}e^{z_j}}\ \ (i\in\mathcal{E})",
    ]
    return {"summary": steps[1:], "steps": steps}


def eq_clamped_swiglu_experts(s: Sizes, inner: int) -> dict[str, list[str]]:
    """gpt-oss's experts: biased projections, the gate and up halves interleaved and clamped, a sigmoid
    gate with a slope, and (up + 1) multiplying it."""
    r = _routing(s, None)
    d, limit = s.get("hidden_size"), s.get("swiglu_limit")
    lim = tex_num(limit) if limit is not None else r"\ell"
    steps = [
        rf"[g;\,u]=xW_{{gu,i}}+b_{{gu,i}}\quad {tex_num(d)}\to2\times{tex_num(inner)}\ \text{{(columns interleaved: }}g\text{{ even, }}u\text{{ odd)}}",
        rf"g\leftarrow\min(g,{lim}),\quad u\leftarrow\operatorname{{clamp}}(u,-{lim},{lim})",
        r"a=g\,\sigma(\alpha g)\quad\alpha=\texttt{config.swiglu\_alpha}",
        rf"E_i(x)=\big((u+1)\odot a\big)W_{{d,i}}+b_{{d,i}}\quad {tex_num(inner)}\to{tex_num(d)}",
        rf"y^{{\mathrm{{routed}}}}=\sum_{{i\in\mathcal{{E}}}}G_i\,E_i(x)\quad |\mathcal{{E}}|={tex_num(r['k'])}\text{{ of }}{tex_num(r['n'])}",
    ]
    return {"summary": [rf"E_i(x)=\big((u+1)\odot g\,\sigma(\alpha g)\big)W_{{d,i}}+b_{{d,i}}", steps[-1].split(r"\quad")[0]], "steps": steps}


# Component kinds whose computation differs from the generic kind of the same role, by class.
CLASS_EQUATIONS = {
    "GptOssTopKRouter": lambda node, s: eq_router_topk_softmax(s),
    "GptOssExperts": lambda node, s: eq_clamped_swiglu_experts(s, node["tensors"][-1]["shape"][-1] if node["tensors"] else None),
}


def eq_router(s: Sizes, router: dict[str, Any] | None) -> dict[str, list[str]]:
    r = _routing(s, router)
    n, k = tex_num(r["n"]), tex_num(r["k"])
    score = r"\sigma(z)" if r["scoring"] == "sigmoid" else r"\operatorname{softmax}(z)"
    pick = rf"\operatorname{{top}}_{{{k}}}(s+b)" if r["bias"] else rf"\operatorname{{top}}_{{{k}}}(s)"
    scale = rf"{tex_num(r['scale'])}\," if r["scale"] not in (None, 1, 1.0) else ""
    weight = (
        rf"G_i={scale}\frac{{s_i}}{{\sum_{{j\in\mathcal{{E}}}}s_j}}\ \ (i\in\mathcal{{E}})"
        if r["normalize"]
        else rf"G_i={scale}s_i\ \ (i\in\mathcal{{E}})"
    )
    steps = [
        rf"z=xW_{{r}}^{{\top}}\quad W_r\in\mathbb{{R}}^{{{n}\times{tex_num(s.get('hidden_size'))}}}",
        rf"s={score}\in\mathbb{{R}}^{{{n}}}",
        rf"\mathcal{{E}}={pick}",
        weight,
    ]
    return {"summary": [rf"\mathcal{{E}}={pick}", weight], "steps": steps}


def eq_experts(s: Sizes, inner: int) -> dict[str, list[str]]:
    r = _routing(s, None)
    d = s.get("hidden_size")
    a, definition = _act_tex(s.act)
    return {
        "summary": [
            rf"E_i(x)=\big({a}(xW_{{g,i}})\odot xW_{{u,i}}\big)W_{{d,i}},\quad i=1,\dots,{tex_num(r['n'])}",
            r"y^{\mathrm{routed}}=\sum_{i\in\mathcal{E}}G_i\,E_i(x)",
        ],
        "steps": [
            rf"g=xW_{{g,i}},\ u=xW_{{u,i}}\quad {tex_num(d)}\to{tex_num(inner)}",
            definition,
            rf"E_i(x)=\big({a}(g)\odot u\big)W_{{d,i}}\quad {tex_num(inner)}\to{tex_num(d)}",
            rf"y^{{\mathrm{{routed}}}}=\sum_{{i\in\mathcal{{E}}}}G_i\,E_i(x)\quad |\mathcal{{E}}|={tex_num(r['k'])}\text{{ of }}{tex_num(r['n'])}",
        ],
    }


def eq_moe(s: Sizes, node: dict[str, Any]) -> dict[str, list[str]]:
    kids = {c["name"]: c for c in node["children"]}
    router = kids.get("gate") or kids.get("router")
    r = _routing(s, router)
    inner = s.first("moe_intermediate_size", "intermediate_size")
    shared = kids.get("shared_experts") or kids.get("shared_expert")
    route = equations(router, s) if router is not None and router["class"] in CLASS_EQUATIONS else eq_router(s, router)
    expert_node = kids.get("experts")
    experts = equations(expert_node, s) if expert_node is not None and expert_node["class"] in CLASS_EQUATIONS else eq_experts(s, inner)
    steps = [r"\text{Routing:}", *route["steps"], r"\text{Routed experts:}", *experts["steps"]]
    summary = [*route["summary"], experts["summary"][1]]
    if shared is not None:
        shared_inner = _gated_inner(shared)
        sh = eq_gated_mlp(s.get("hidden_size"), shared_inner, s.act, out=r"y^{\mathrm{shared}}")
        steps += [r"\text{Shared expert:}", *sh["steps"], r"\Delta_{\mathrm{ffn}}=y^{\mathrm{routed}}+y^{\mathrm{shared}}"]
        summary.append(r"\Delta_{\mathrm{ffn}}=y^{\mathrm{routed}}+y^{\mathrm{shared}}")
    else:
        steps.append(r"\Delta_{\mathrm{ffn}}=y^{\mathrm{routed}}")
    return {"summary": summary, "steps": steps}


def _gated_inner(node: dict[str, Any]) -> int | None:
    for c in node["children"]:
        if c["name"] in ("gate_proj", "up_proj") and c["tensors"]:
            return c["tensors"][0]["shape"][0]
    return None


def equations(node: dict[str, Any], s: Sizes, parent: dict[str, Any] | None = None) -> dict[str, list[str]] | None:
    if node["class"] in CLASS_EQUATIONS:
        return CLASS_EQUATIONS[node["class"]](node, s)
    r = role(node)
    d = s.get("hidden_size")
    eps = s.first("rms_norm_eps", "layer_norm_eps", default=1e-6)
    if r in ("rmsnorm", "layernorm"):
        width = node["tensors"][0]["shape"][0] if node["tensors"] else d
        if r == "layernorm":
            return {
                "summary": [rf"y=\frac{{x-\mu}}{{\sqrt{{\sigma^2+{tex_num(eps)}}}}}\odot g+b\quad x\in\mathbb{{R}}^{{{tex_num(width)}}}"],
                "steps": [r"\mu=\operatorname{mean}(x)", r"\sigma^2=\operatorname{mean}((x-\mu)^2)", rf"y=\frac{{x-\mu}}{{\sqrt{{\sigma^2+{tex_num(eps)}}}}}\odot g+b"],
            }
        eq = eq_rmsnorm(width, eps)
        if node["class"].startswith("Gemma"):  # Gemma's norms scale by (1 + g): g is stored as an offset from one
            eq = {k: [t.replace(r"\odot g", r"\odot(1+g)").replace(r"y=g\odot", r"y=(1+g)\odot") for t in v] for k, v in eq.items()}
        return eq
    if r == "embedding":
        if not node["tensors"] or len(node["tensors"][0]["shape"]) != 2:
            return None
        vocab, width = node["tensors"][0]["shape"]
        eq = eq_embedding(vocab, width)
        if "Scaled" in node["class"]:  # Gemma multiplies the looked-up rows by the square root of the width
            eq = {k: [t.replace("x_0=E[I]", rf"x_0=\sqrt{{{tex_num(width)}}}\,E[I]").replace(r"x_{0,t}=E_{I_t,:}", rf"x_{{0,t}}=\sqrt{{{tex_num(width)}}}\,E_{{I_t,:}}") for t in v] for k, v in eq.items()}
        return eq
    if r == "linear":
        dims = _in_out(node)
        if dims is None:
            return None
        bias = any(t["name"] == "bias" for t in node["tensors"])
        if node["name"] == "lm_head":
            return eq_head(dims[1], dims[0])
        return eq_linear(dims[0], dims[1], bias)
    if r == "dropout":
        return {"summary": [r"y=x\quad\text{(at inference)}"], "steps": [r"y=x\quad\text{(at inference)}"]}
    if r == "activation":
        return eq_activation(s.act)
    if r == "latent_attention":
        return eq_latent_attention(s)
    if r == "attention":
        eq = eq_attention(s, {c["name"] for c in node["children"]})
        if any(t["name"] == "sinks" for t in node["tensors"]):  # gpt-oss: one learned logit per head joins each softmax
            eq["steps"] = [
                r"P_h=\operatorname{softmax}\big([S_h,\ \mathbf{1}\sigma_h]\big)_{:,\,:-1}\quad\sigma_h\ \text{a learned sink logit per head, dropped after the softmax}"
                if st == r"P_h=\operatorname{softmax}(S_h)" else st
                for st in eq["steps"]
            ]
        return eq
    if r == "router":
        return eq_router(s, node)
    if r == "experts":
        inner = node["tensors"][-1]["shape"][-1] if node["tensors"] else s.get("moe_intermediate_size")
        return eq_experts(s, inner)
    if r == "moe":
        return eq_moe(s, node)
    if r == "gated_mlp":
        return eq_gated_mlp(d, _gated_inner(node), s.act)
    if r == "mlp":
        return eq_mlp(node, s)
    if r == "block":
        return eq_block(node, s)
    return None


def anatomy(block: dict[str, Any]) -> dict[str, str | None]:
    """Which child of a block does what: the attention, the feed-forward part, and the norms around
    each (before it, after it, or both), by the names and classes transformers gives them."""
    kids = block["children"]
    names = [c["name"] for c in kids]
    by_role = {}
    for c in kids:
        by_role.setdefault(role(c), c["name"])
    attn = by_role.get("latent_attention") or by_role.get("attention")
    ffn = next((c["name"] for c in kids if role(c) in ("moe", "gated_mlp", "mlp", "experts")), None)
    norms = [c["name"] for c in kids if role(c) in ("rmsnorm", "layernorm")]
    a = {"attn": attn, "ffn": ffn, "pre_attn": None, "post_attn": None, "pre_ffn": None, "post_ffn": None}
    if "pre_feedforward_layernorm" in names:  # norms on both sides of each part
        a.update(pre_attn="input_layernorm" if "input_layernorm" in names else None, post_attn="post_attention_layernorm",
                 pre_ffn="pre_feedforward_layernorm", post_ffn="post_feedforward_layernorm" if "post_feedforward_layernorm" in names else None)
    elif "input_layernorm" not in names and "post_feedforward_layernorm" in names:  # norms after each part only
        a.update(post_attn="post_attention_layernorm", post_ffn="post_feedforward_layernorm")
    elif len(norms) >= 2:  # a norm before each part
        a.update(pre_attn=norms[0], pre_ffn=norms[1])
    elif len(norms) == 1:
        a.update(pre_attn=norms[0])
    return {k: (v if v in names else None) for k, v in a.items()}


def _norm_op(block: dict[str, Any], name: str | None) -> str:
    kid = next((c for c in block["children"] if c["name"] == name), None)
    return r"\operatorname{LayerNorm}" if kid is not None and role(kid) == "layernorm" else r"\operatorname{RMSNorm}"


def eq_block(node: dict[str, Any], s: Sizes) -> dict[str, list[str]]:
    kids = {c["name"]: c for c in node["children"]}
    a = anatomy(node)

    def wrap(inner: str, pre: str | None, post: str | None, x: str) -> str:
        arg = rf"{_norm_op(node, pre)}({x})" if pre else x
        out = rf"{inner}\big({arg}\big)"
        return rf"{_norm_op(node, post)}\big({out}\big)" if post else out

    summary = [
        r"x'_n=x_n+" + wrap(r"\operatorname{Attn}", a["pre_attn"], a["post_attn"], "x_n"),
        r"x_{n+1}=x'_n+" + wrap(r"\operatorname{FFN}", a["pre_ffn"], a["post_ffn"], "x'_n"),
    ]
    steps = [rf"x_{{\mathrm{{attn}}}}={_norm_op(node, a['pre_attn'])}(x_n)" if a["pre_attn"] else r"x_{\mathrm{attn}}=x_n"]
    if a["attn"]:
        attn = kids[a["attn"]]
        steps.append(r"\text{" + title_of(attn) + ":}")
        steps += (equations(attn, s) or {"steps": [r"\Delta_{\mathrm{attn}}=\operatorname{Attn}(x_{\mathrm{attn}})"]})["steps"]
    if a["post_attn"]:
        steps.append(rf"\Delta_{{\mathrm{{attn}}}}\leftarrow{_norm_op(node, a['post_attn'])}(\Delta_{{\mathrm{{attn}}}})")
    steps.append(r"x'_n=x_n+\Delta_{\mathrm{attn}}")
    ffn_in = rf"x_{{\mathrm{{ffn}}}}={_norm_op(node, a['pre_ffn'])}(x'_n)" if a["pre_ffn"] else r"x_{\mathrm{ffn}}=x'_n"
    steps.append(ffn_in)
    cut = len(steps)
    if a["ffn"]:
        mlp = kids[a["ffn"]]
        steps.append(r"\text{" + title_of(mlp) + ":}")
        inner = equations(mlp, s) or {"steps": [r"\Delta_{\mathrm{ffn}}=\operatorname{FFN}(x_{\mathrm{ffn}})"]}
        if role(mlp) in ("gated_mlp", "mlp") and inner["steps"][-1].startswith("y="):
            steps += inner["steps"][:-1] + [inner["steps"][-1].replace("y=", r"\Delta_{\mathrm{ffn}}=", 1)]
        else:
            steps += inner["steps"]
    if a["post_ffn"]:
        steps.append(rf"\Delta_{{\mathrm{{ffn}}}}\leftarrow{_norm_op(node, a['post_ffn'])}(\Delta_{{\mathrm{{ffn}}}})")
    steps.append(r"x_{n+1}=x'_n+\Delta_{\mathrm{ffn}}")
    steps = [st.replace("xW", r"x_{\mathrm{ffn}}W") if i >= cut else st for i, st in enumerate(steps)]
    return {"summary": summary, "steps": steps}


def eq_mlp(node: dict[str, Any], s: Sizes) -> dict[str, list[str]] | None:
    """An MLP that is not gate/up/down: a fused gate-up projection (Phi-3) or a plain two-layer MLP (GPT-2)."""
    kids = {c["name"]: c for c in node["children"]}
    d = s.get("hidden_size")
    a, definition = _act_tex(s.act or s.get("activation_function"))

    def width(child, axis):
        w = next((t for t in child["tensors"] if t["name"] == "weight"), None)
        return w["shape"][axis] if w else None

    if "gate_up_proj" in kids:
        inner = (width(kids["gate_up_proj"], 0) or 0) // 2
        return {
            "summary": [rf"y=\big({a}(g)\odot u\big)W_{{d}},\quad [g;\,u]=xW_{{gu}},\quad {tex_num(d)}\to2\times{tex_num(inner)}\to{tex_num(d)}"],
            "steps": [rf"[g;\,u]=xW_{{gu}}\quad {tex_num(d)}\to2\times{tex_num(inner)}", definition, rf"h={a}(g)\odot u", rf"y=hW_{{d}}\quad {tex_num(inner)}\to{tex_num(d)}"],
        }
    up = next((kids[n] for n in ("c_fc", "fc1", "up_proj", "dense_h_to_4h") if n in kids), None)
    if up is not None:
        conv = up["class"] == "Conv1D"
        inner = width(up, 1 if conv else 0)
        return {
            "summary": [rf"y={a}(xW_1+b_1)W_2+b_2,\quad {tex_num(d)}\to{tex_num(inner)}\to{tex_num(d)}"],
            "steps": [rf"g=xW_1+b_1\quad {tex_num(d)}\to{tex_num(inner)}", definition, rf"y={a}(g)W_2+b_2\quad {tex_num(inner)}\to{tex_num(d)}"],
        }
    return None


def eq_model(s: Sizes, n_blocks: int) -> dict[str, list[str]]:
    return {
        "summary": [
            rf"x_0=E[I],\quad x_{{n+1}}=\operatorname{{Block}}_n(x_n)\ \ (n=0,\dots,{n_blocks - 1})",
            rf"z=\operatorname{{RMSNorm}}(x_{{{n_blocks}}})\,W_{{\mathrm{{out}}}}^{{\top}}",
        ],
        "steps": [
            r"x_0=E[I]",
            rf"x_{{n+1}}=\operatorname{{Block}}_n(x_n)\quad n=0,\dots,{n_blocks - 1}",
            rf"\hat x_{{{n_blocks}}}=\operatorname{{RMSNorm}}(x_{{{n_blocks}}})",
            rf"z=\hat x_{{{n_blocks}}}W_{{\mathrm{{out}}}}^{{\top}}\in\mathbb{{R}}^{{T\times{tex_num(s.get('vocab_size'))}}}",
            *([rf"z\leftarrow{tex_num(s.get('final_logit_softcapping'))}\tanh(z/{tex_num(s.get('final_logit_softcapping'))})"] if s.get("final_logit_softcapping") else []),
        ],
    }


# --------------------------------------------------------------------------------------------------
# One-line descriptions, per component kind, with the checkpoint's numbers.

LINEAR_ROLES = {
    "q_a_proj": "Compresses the normed stream into the query latent",
    "q_b_proj": "Expands the normed query latent into every head's query, content and rotary parts",
    "kv_a_proj_with_mqa": "Compresses the stream into the key–value latent plus one rotary key shared by all heads",
    "kv_b_proj": "Expands the normed key–value latent into every head's content key and value",
    "q_proj": "Projects the stream into the queries of every head",
    "k_proj": "Projects the stream into the keys of the key–value heads",
    "v_proj": "Projects the stream into the values of the key–value heads",
    "o_proj": "Mixes the heads' outputs, side by side, back into the residual width",
    "gate_proj": "Projects the stream into the gate that the activation opens",
    "up_proj": "Projects the stream into the features the gate multiplies",
    "down_proj": "Projects the gated features back into the residual width",
    "lm_head": "Scores every vocabulary entry from the final normed stream",
    "c_attn": "Projects the stream into the queries, keys and values of every head at once",
    "c_fc": "Projects the stream into the MLP's hidden features",
    "gate_up_proj": "Projects the stream into the gate and the features it multiplies, side by side",
    "qkv_proj": "Projects the stream into the queries, keys and values of every head at once",
}


def _in_out(node: dict[str, Any]) -> tuple[int, int] | None:
    """A linear map's (in, out) features: Linear stores its weight [out, in], Conv1D [in, out]."""
    w = next((t for t in node["tensors"] if t["name"] == "weight"), None)
    if w is None or len(w["shape"]) != 2:
        return None
    return tuple(w["shape"]) if node["class"] == "Conv1D" else (w["shape"][1], w["shape"][0])


def describe(node: dict[str, Any], s: Sizes) -> str:
    r = role(node)
    d = s.get("hidden_size")
    kids = {c["name"]: c for c in node["children"]}
    if r in ("rmsnorm", "layernorm"):
        width = node["tensors"][0]["shape"][0] if node["tensors"] else d
        what = "root-mean-square" if r == "rmsnorm" else "zero mean and unit variance"
        return f"Rescales each {grouped(width)}-wide vector to unit {what}, then multiplies it by a learned gain per feature."
    if r == "embedding":
        if not node["tensors"] or len(node["tensors"][0]["shape"]) != 2:
            return "A learned lookup table."
        vocab, width = node["tensors"][0]["shape"]
        if node["name"] in ("wpe", "embed_positions", "position_embeddings"):
            return f"Looks up a learned {grouped(width)}-wide vector for each position, up to {grouped(vocab)} positions; added to the token embeddings."
        return f"Looks up a learned {grouped(width)}-wide vector for each token id, one row per entry of a {grouped(vocab)}-token vocabulary."
    if r == "linear" and node.get("tied_to"):
        return f"{LINEAR_ROLES.get(node['name'], 'A linear map')}, with the weight of {node['tied_to']} (tied): counted there, not here."
    if r == "dropout":
        return "Dropout: zeroes random features while training; at inference it passes its input through unchanged."
    if r == "linear":
        dims = _in_out(node)
        base = LINEAR_ROLES.get(node["name"], "A learned linear map")
        if dims is None:
            return base + "."
        bias = "with a bias" if any(t["name"] == "bias" for t in node["tensors"]) else "no bias"
        stored = " (a Conv1D: the weight is stored in × out)" if node["class"] == "Conv1D" else ""
        return f"{base}: {grouped(dims[0])} → {grouped(dims[1])} features, {bias}{stored}."
    if r == "activation":
        act = (s.act or "silu").upper().replace("SILU", "SiLU")
        return f"{act}, applied to each feature on its own; it has no parameters."
    if r == "latent_attention":
        return (
            f"{s.get('num_heads')} heads whose keys and values are rebuilt from a {grouped(s.get('kv_lora_rank'))}-wide latent, "
            f"each query and key carrying a {s.get('qk_rope_head_dim')}-wide rotary part; scores scaled by {s.attention.get('scaling_rounded')}."
        )
    if r == "attention":
        heads, kv = s.get("num_heads"), s.get("num_kv_heads") or s.get("num_heads")
        share = f"{heads} query heads sharing {kv} key–value heads" if kv != heads else f"{heads} heads, each with its own keys and values"
        return f"Causal self-attention: {share}, {s.get('head_dim')} wide."
    if r == "router":
        rt = _routing(s, node)
        scale = f", then scaled by {rt['scale']}" if rt["scale"] not in (None, 1, 1.0) else ""
        bias = " A stored bias per expert (b) steers which experts are kept, not how much they weigh." if rt["bias"] else ""
        return f"Scores the {rt['n']} experts for each token and keeps the top {rt['k']}; the kept scores are normalized{scale}.{bias}"
    if r == "experts":
        rt = _routing(s, None)
        inner = node["tensors"][-1]["shape"][-1] if node["tensors"] else None
        return f"{rt['n']} gated MLPs of inner width {grouped(inner)}, stored as fused 3-D tensors; each token runs only the {rt['k']} its router picked."
    if r == "moe":
        rt = _routing(s, kids.get("gate") or kids.get("router"))
        shared = " and adds a shared expert that every token runs" if ("shared_experts" in kids or "shared_expert" in kids) else ""
        return f"Sends each token to {rt['k']} of {rt['n']} routed experts, weights their outputs by the router{shared}."
    if r == "gated_mlp":
        inner = _gated_inner(node)
        return f"A gated MLP: two projections {grouped(d)} → {grouped(inner)}, one through the activation, multiplied, then projected back to {grouped(d)}."
    if r == "mlp":
        act = (s.act or "silu").upper().replace("SILU", "SiLU").replace("GELU_NEW", "GELU (tanh)").replace("GELU_PYTORCH_TANH", "GELU (tanh)")
        if "gate_up_proj" in kids and _in_out(kids["gate_up_proj"]):
            inner = _in_out(kids["gate_up_proj"])[1] // 2
            return f"A gated MLP whose gate and up projections are one fused matrix: {grouped(d)} → 2 × {grouped(inner)}, the {act} gate times the rest, back to {grouped(d)}."
        up = next((kids[n] for n in ("c_fc", "fc1", "up_proj") if n in kids and _in_out(kids[n])), None)
        if up is not None:
            inner = _in_out(up)[1]
            return f"A two-layer MLP: {grouped(d)} → {grouped(inner)} through {act}, then back to {grouped(d)}."
    if r == "block":
        a = anatomy(node)
        attn, mlp = kids.get(a["attn"] or ""), kids.get(a["ffn"] or "")
        parts = [_lower(title_of(x)) for x in (attn, mlp) if x is not None]
        norm = "LayerNorm" if any(role(c) == "layernorm" for c in node["children"]) else "RMSNorm"
        article = "a" if norm == "LayerNorm" else "an"
        if a["post_attn"] and (a["pre_attn"] or a["pre_ffn"]):
            where = f"each between two {norm}s"
        elif a["post_attn"] or a["post_ffn"]:
            where = f"each followed by {article} {norm}"
        else:
            where = f"each after {article} {norm}"
        return f"Applies {' then '.join(parts)}, {where} and each added back to the residual stream."
    return f"A {node['class']} module."


# --------------------------------------------------------------------------------------------------
# Inputs and outputs with named dims.


def _dims(*pairs: tuple[Any, str]) -> str:
    return "[" + ", ".join(f"{grouped(a) if isinstance(a, int) else a} {b}" for a, b in pairs) + "]"


def io(node: dict[str, Any], s: Sizes) -> dict[str, list[dict[str, str]]]:
    r = role(node)
    d = s.get("hidden_size")
    B, T = ("B", "batch"), ("T", "positions")
    res = _dims(B, T, (d, "d"))
    if r in ("rmsnorm", "layernorm"):
        width = node["tensors"][0]["shape"][0] if node["tensors"] else d
        dims = _dims(B, T, (width, "d" if width == d else "latent"))
        return {"in": [{"symbol": "x", "dims": dims}], "out": [{"symbol": "y", "dims": dims}]}
    if r == "embedding":
        if not node["tensors"] or len(node["tensors"][0]["shape"]) != 2:
            return {"in": [], "out": []}
        vocab, width = node["tensors"][0]["shape"]
        return {"in": [{"symbol": "I", "dims": _dims(B, T)}], "out": [{"symbol": "x_0", "dims": _dims(B, T, (width, "d"))}]}
    if r == "linear":
        dims = _in_out(node)
        if dims is None:
            return {"in": [], "out": []}
        out_name = "vocab" if node["name"] == "lm_head" else "out"
        return {
            "in": [{"symbol": "x", "dims": _dims(B, T, (dims[0], "in"))}],
            "out": [{"symbol": "z" if node["name"] == "lm_head" else "y", "dims": _dims(B, T, (dims[1], out_name))}],
        }
    if r in ("latent_attention", "attention"):
        rope = s.get("qk_rope_head_dim") or s.get("head_dim")
        return {
            "in": [
                {"symbol": "x", "dims": res},
                {"symbol": stream("c", "R"), "dims": _dims(T, (rope // 2 if rope else "d/2", "pairs"))},
                {"symbol": stream("c", "M"), "dims": _dims(("T", "queries"), ("T", "keys"))},
            ],
            "out": [{"symbol": r"\Delta_{\mathrm{attn}}", "dims": res}],
        }
    if r == "router":
        rt = _routing(s, node)
        tok = ("B·T", "tokens")
        return {
            "in": [{"symbol": "x", "dims": _dims(tok, (d, "d"))}],
            "out": [
                {"symbol": r"\mathcal{E}", "dims": _dims(tok, (rt["k"], "top_k"))},
                {"symbol": "G", "dims": _dims(tok, (rt["k"], "top_k"))},
            ],
        }
    if r == "experts":
        rt = _routing(s, None)
        tok = ("B·T", "tokens")
        return {
            "in": [
                {"symbol": "x", "dims": _dims(tok, (d, "d"))},
                {"symbol": r"\mathcal{E}", "dims": _dims(tok, (rt["k"], "top_k"))},
                {"symbol": "G", "dims": _dims(tok, (rt["k"], "top_k"))},
            ],
            "out": [{"symbol": r"y^{\mathrm{routed}}", "dims": _dims(tok, (d, "d"))}],
        }
    if r in ("moe", "gated_mlp", "mlp"):
        return {"in": [{"symbol": "x", "dims": res}], "out": [{"symbol": r"\Delta_{\mathrm{ffn}}", "dims": res}]}
    if r == "block":
        return {"in": [{"symbol": "x_n", "dims": res}], "out": [{"symbol": "x_{n+1}", "dims": res}]}
    if r == "activation":
        return {"in": [{"symbol": "g", "dims": _dims(B, T, ("…", "features"))}], "out": [{"symbol": "a", "dims": _dims(B, T, ("…", "features"))}]}
    return {"in": [], "out": []}


# --------------------------------------------------------------------------------------------------
# Evidence: pinned excerpts, each with the claim it supports.


def _excerpt(facts: dict[str, Any], cls: str, part: str) -> dict[str, Any] | None:
    ex = facts.get("excerpts", {}).get(cls, {}).get(part)
    if ex is None:
        return None
    return {k: ex[k] for k in ("path", "start", "end", "version", "sha256", "text", "qualname") if k in ex}


def evidence(facts: dict[str, Any], node: dict[str, Any], parent: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Direct evidence: the component's own code. Contextual: its parent's code that builds and calls it."""
    out = _cited(facts, node["class"], True, (
        ("forward", f"The forward pass of {node['class']}: the computation the equations above state."),
        ("__init__", f"The constructor of {node['class']}: the parameters it creates, counted below."),
    ))
    if parent is not None:
        attr = f"self.{parent['name']}[i]" if role(node) == "block" else f"self.{node['name']}"
        what = "each block" if role(node) == "block" else f"the {_lower(title_of(node))}"
        out += _cited(facts, parent["class"], False, (
            ("__init__", f"{parent['class']} builds {what} as {attr} with these arguments."),
            ("forward", f"{parent['class']}'s forward calls {attr}: what goes in and where its output goes."),
        ))
    return out


def _cited(facts: dict[str, Any], cls: str, direct: bool, claims) -> list[dict[str, Any]]:
    """The excerpts of ``cls`` that exist, each with the claim it supports."""
    return [
        {"direct": direct, "claim": claim, "part": part, "class": cls, **ex}
        for part, claim in claims
        if (ex := _excerpt(facts, cls, part))
    ]


# --------------------------------------------------------------------------------------------------
# Standard values: what the diagram's parts produce. support() (when the facts carry it) is the
# source; until then a small vocabulary names the values of the parts the diagram draws.

LAYOUT_DIMS = {
    "Tokens": ["batch", "seq"],
    "Residual": ["batch", "seq", "hidden_size"],
    "Logits": ["batch", "seq", "vocab_size"],
    "RouterLogits": ["batch", "seq", "num_experts"],
    "ExpertWeights": ["batch", "seq", "top_k"],
    "ExpertIndices": ["batch", "seq", "top_k"],
}

# name: (host, layout, description, read at)
VALUES = {
    "token_embeddings": ("model", "Residual", "One learned vector per token: the residual stream as block 0 receives it", "the output of the child module embed_tokens"),
    "final_norm_output": ("model", "Residual", "The last block's output after the final norm: what the head reads", "the output of the child module norm"),
    "lm_head_output": ("model", "Logits", "The head's score for every vocabulary entry at every position", "the output of the child module lm_head"),
    "logits": ("model", "Logits", "What the model returns; with no softcap or scale past the head, the head's scores", "the model's own output"),
    "layer_input": ("layers[i]", "Residual", "The residual stream entering the block", "the block's own input"),
    "attention_norm_output": ("layers[i]", "Residual", "The stream normalized for the attention", "the output of the child module input_layernorm"),
    "attention_output": ("layers[i].self_attn", "Residual", "What the attention adds to the residual stream", "the attention module's own output"),
    "layer_mid": ("layers[i]", "Residual", "The residual stream after the attention's add, before the MLP's", "the input of the child module post_attention_layernorm"),
    "mlp_norm_output": ("layers[i]", "Residual", "The stream normalized for the MLP", "the output of the child module post_attention_layernorm"),
    "mlp_output": ("layers[i].mlp", "Residual", "What the MLP adds to the residual stream", "the MLP module's own output"),
    "layer_output": ("layers[i]", "Residual", "The residual stream leaving the block", "the block's own output"),
    "router_logits": ("layers[i].mlp", "RouterLogits", "The router's score for every expert, before the scoring function", "inside the router's forward: its linear map's output"),
    "expert_weights": ("layers[i].mlp", "ExpertWeights", "The weight each chosen expert's output is multiplied by", "the router's output, as the experts receive it"),
    "routed_output": ("layers[i].mlp", "Residual", "The chosen experts' outputs, weighted and summed", "the output of the child module experts"),
    "shared_expert_output": ("layers[i].mlp", "Residual", "The shared expert's output, which every token gets", "the output of the child module shared_experts"),
}

# The module each value is read from, relative to its host (for the diagram's cards).
VALUE_MODULES = {
    "token_embeddings": "model.embed_tokens",
    "final_norm_output": "model.norm",
    "lm_head_output": "lm_head",
    "logits": "",
    "layer_input": "model.layers.{i}",
    "attention_norm_output": "model.layers.{i}.input_layernorm",
    "attention_output": "model.layers.{i}.self_attn",
    "layer_mid": "model.layers.{i}",
    "mlp_norm_output": "model.layers.{i}.post_attention_layernorm",
    "mlp_output": "model.layers.{i}.mlp",
    "layer_output": "model.layers.{i}",
    "router_logits": "model.layers.{i}.mlp.gate",
    "expert_weights": "model.layers.{i}.mlp.gate",
    "routed_output": "model.layers.{i}.mlp.experts",
    "shared_expert_output": "model.layers.{i}.mlp.shared_experts",
}


def _resolve(dims: list[str], s: Sizes) -> list[Any]:
    rt = _routing(s, None)
    sizes = {
        "hidden_size": s.get("hidden_size"),
        "vocab_size": s.get("vocab_size"),
        "num_experts": rt["n"],
        "top_k": rt["k"],
        "num_heads": s.get("num_heads"),
        "num_kv_heads": s.get("num_kv_heads"),
        "head_dim": s.get("head_dim"),
        "qk_head_dim": s.get("qk_head_dim"),
        "intermediate_size": s.get("intermediate_size"),
    }
    return [sizes.get(d) if sizes.get(d) is not None else d for d in dims]


def values(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every standard value the pages name, by name: layout, dims, shape at the checkpoint's sizes,
    description, where it is read, the condition under which it exists."""
    s = Sizes(facts)
    out: dict[str, dict[str, Any]] = {}
    support = facts.get("support")
    if support:
        for host in support.get("hosts", []):
            for v in host.get("values", []):
                out.setdefault(
                    v["name"],
                    {
                        "name": v["name"],
                        "host": host.get("host", ""),
                        "layout": v.get("layout", ""),
                        "dims": list(v.get("dims") or []),
                        "shape": list(v.get("shape") or _resolve(list(v.get("dims") or []), s)),
                        "description": v.get("description", ""),
                        "read_at": v.get("read_at", ""),
                        "module": v.get("module") or "",
                        "condition": v.get("condition"),
                        "blocks": v.get("blocks"),
                        "source": "support",
                    },
                )
    block_path = facts["model"]["block_path"]
    rows = facts["accounting"]["model"]["rows"]
    at = {
        "token_embeddings": next((r["path"] for r in rows if "Embed" in r["class"]), None),
        "final_norm_output": next((r["path"] for r in rows if "Norm" in r["class"]), None),
        "lm_head_output": next((r["path"] for r in rows if r["path"].split(".")[-1] == "lm_head"), None),
    }
    for name, (host, layout, description, read_at) in VALUES.items():
        if name in out:
            continue
        dims = LAYOUT_DIMS[layout]
        module = at.get(name) or VALUE_MODULES[name].replace("model.layers", block_path)
        if name == "token_embeddings":
            read_at = read_at.replace("embed_tokens", module.split(".")[-1])
            if sum("Embed" in r["class"] for r in rows) > 1:
                description = "One learned vector per token; block 0 receives it with the position embeddings added"
        read_at = read_at.replace("child module norm", f"child module {module.split('.')[-1]}") if name == "final_norm_output" else read_at
        out[name] = {
            "name": name,
            "host": host,
            "layout": layout,
            "dims": dims,
            "shape": _resolve(dims, s),
            "description": description,
            "read_at": read_at,
            "module": module,
            "condition": None,
            "blocks": None,
            "source": "diagram",
        }
    return out


# --------------------------------------------------------------------------------------------------
# The component hierarchy.

def _kind_title(kind: dict[str, Any]) -> str:
    label = kind["label"]
    return label[:1].upper() + label[1:]


def _plural(n: int, label: str) -> str:
    return f"{n} {label}" + ("s" if n != 1 else "")


def _calc(node: dict[str, Any]) -> str:
    return "sum of its components" if (node["children"] or len(node["tensors"]) > 1) else (node["tensors"][0]["calculation"] if node["tensors"] else "no parameters")


def hierarchy(facts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every component and tensor page, by id, in reading order."""
    s = Sizes(facts)
    acc = facts["accounting"]
    model_acc = acc["model"]
    n_blocks = facts["model"]["num_blocks"]
    block_path = facts["model"]["block_path"]
    nodes: dict[str, dict[str, Any]] = {}
    model_title = "The whole model"
    blocks_title = f"{n_blocks} transformer blocks"

    rows_by_path = {r["path"]: r for r in model_acc["rows"]}
    model_node = {
        "id": "model", "type": "component", "title": model_title, "heading": f"{facts['family']['title']}: the whole model", "name": "model", "class": facts["model"]["class"],
        "constructor": f"{facts['model']['class']}(config)", "path": "", "where": "the whole model",
        "role": "model", "parameters": model_acc["total"], "stored_buffers": model_acc["stored_buffers"],
        "instances": 1, "instances_label": "", "crumbs": [],
        "description": f"{n_blocks} transformer blocks between a token embedding and a language-model head; {grouped(model_acc['total'])} weight parameters.",
        "equations": eq_model(s, n_blocks),
        "io": {"in": [{"symbol": "I", "dims": _dims(("B", "batch"), ("T", "positions"))}],
               "out": [{"symbol": "z", "dims": _dims(("B", "batch"), ("T", "positions"), (s.get("vocab_size"), "vocab"))}]},
        "children": [], "tensors": [], "accounting": [], "evidence": [],
    }
    ex = _excerpt(facts, facts["model"]["class"], "forward")
    if ex:
        model_node["evidence"].append({"direct": True, "claim": "The model's forward: the blocks, the final norm and the head, in that order.", "part": "forward", "class": facts["model"]["class"], **ex})
    nodes["model"] = model_node

    kinds = acc["block_kinds"]
    kind_info = {k["id"]: k for k in facts["block_kinds"]}
    blocks_node = {
        "id": "blocks", "type": "component", "title": blocks_title, "name": "layers", "class": "ModuleList",
        "constructor": f"nn.ModuleList({facts['model']['block_class']}(config, layer_idx) for layer_idx in range({n_blocks}))",
        "path": block_path, "where": f"{block_path}[0–{n_blocks - 1}]", "role": "blocks",
        "parameters": sum(k["total"] for k in kinds), "stored_buffers": sum(k["per_instance_stored_buffers"] * k["instances"] for k in kinds),
        "instances": 1, "instances_label": "", "crumbs": [{"id": "model", "title": model_title}],
        "description": "The stack of blocks, grouped by structure: " + "; ".join(f"{_plural(k['instances'], k['label'])} ({kind_info[k['kind']]['ranges']})" for k in kinds) + ".",
        "equations": {"summary": [rf"x_{{n+1}}=\operatorname{{Block}}_n(x_n)\quad n=0,\dots,{n_blocks - 1}"], "steps": [rf"x_{{n+1}}=\operatorname{{Block}}_n(x_n)\quad n=0,\dots,{n_blocks - 1}"]},
        "io": {"in": [{"symbol": "x_0", "dims": _dims(("B", "batch"), ("T", "positions"), (s.get("hidden_size"), "d"))}],
               "out": [{"symbol": f"x_{{{n_blocks}}}", "dims": _dims(("B", "batch"), ("T", "positions"), (s.get("hidden_size"), "d"))}]},
        "children": [], "tensors": [], "accounting": [], "evidence": [],
    }
    ex = _excerpt(facts, facts["model"]["class"].replace("ForCausalLM", "Model"), "__init__")
    if ex:
        blocks_node["evidence"].append({"direct": False, "claim": "The model builds its blocks, one per layer index; the layer index decides each block's kind.", "part": "__init__", "class": facts["model"]["class"].replace("ForCausalLM", "Model"), **ex})
    nodes["blocks"] = blocks_node

    def add_module(node, nid, crumbs, instances, instances_label, parent, where, parent_role=None, crumb_title=None, slot=None):
        r = role(node)
        title = title_of(node, parent_role, slot)
        page = {
            "id": nid, "type": "component", "title": title, "name": node["name"], "class": node["class"],
            "constructor": node.get("constructor", ""), "path": node["path"], "where": where, "role": r,
            "parameters": node["parameters"] + node["stored_buffers"], "stored_buffers": node["stored_buffers"],
            "instances": instances, "instances_label": instances_label, "crumbs": crumbs,
            "description": describe(node, s), "equations": equations(node, s, parent), "io": io(node, s),
            "children": [], "tensors": [], "accounting": [], "evidence": evidence(facts, node, parent),
        }
        nodes[nid] = page
        here = crumbs + [{"id": nid, "title": crumb_title or title}]
        slots = {}
        children = node["children"]
        if r == "block":
            a = anatomy(node)
            order = ["pre_attn", "attn", "post_attn", "pre_ffn", "ffn", "post_ffn"]
            slots = {a[k]: k for k in order if a[k]}
            rank = {a[k]: i for i, k in enumerate(order) if a[k]}
            children = sorted(children, key=lambda c: rank.get(c["name"], len(order)))
        child_role = r
        if r == "block" and any(role(c) == "moe" for c in node["children"]):
            child_role = "moe_block"
        for child in children:
            cid = f"{nid}.{child['name']}"
            add_module(child, cid, here, instances, instances_label, node, f"{where}.{child['name']}", parent_role=child_role, slot=slots.get(child["name"]))
            c = nodes[cid]
            page["children"].append({"id": cid, "title": c["title"], "class": c["class"], "name": child["name"], "parameters": c["parameters"]})
            page["accounting"].append({"id": cid, "title": c["title"], "name": child["name"], "calculation": _calc(child) if child["parameters"] + child["stored_buffers"] else "no parameters", "parameters": c["parameters"]})
        for t in node["tensors"]:
            tid = f"{nid}.{t['name']}"
            nodes[tid] = tensor_page(facts, t, tid, node, here, instances, instances_label, where, title)
            page["tensors"].append({"id": tid, "title": t["name"], "shape": t["shape"], "role": t["role"], "elements": t["elements"]})
            if node.get("tied_to"):
                page["accounting"].append({"id": tid, "title": t["name"], "name": t["name"], "calculation": f"tied to {node['tied_to']}.{t['name']}, counted there", "parameters": 0})
                continue
            page["accounting"].append({"id": tid, "title": t["name"] + (" (persistent buffer)" if t["role"] == "buffer" else ""), "name": t["name"], "calculation": t["calculation"], "parameters": t["elements"]})
        return page

    # modules outside the blocks, in the order the forward runs them
    top_children = []
    outside = [r["path"] for r in model_acc["rows"]]
    outside_trees = facts["accounting"]["outside"]
    for path in outside:
        row = rows_by_path[path]
        name = path.split(".")[-1]
        tree = outside_trees[path]
        if row.get("tied_to"):
            tree = {**tree, "parameters": row["parameters"], "stored_buffers": row["stored_buffers"], "tied_to": row["tied_to"]}
        nid = slug(name)
        add_module(tree, nid, [{"id": "model", "title": model_title}], 1, "", {"class": facts["model"]["class"].replace("ForCausalLM", "Model") if path.startswith("model.") else facts["model"]["class"], "name": "model"}, path)
        top_children.append(nid)

    for k in kinds:
        info = kind_info[k["kind"]]
        kid = slug(k["kind"])
        label = f"{_plural(k['instances'], k['label'])}"
        tree = k["tree"]
        s.attention_type = info.get("attention_type")
        page = add_module(
            tree, kid, [{"id": "model", "title": model_title}, {"id": "blocks", "title": blocks_title}],
            k["instances"], label, {"class": facts["model"]["class"].replace("ForCausalLM", "Model"), "name": block_path.split(".")[-1]},
            f"{block_path}[{info['ranges']}]", crumb_title=label,
        )
        s.attention_type = None
        page["title"] = _kind_title(info)
        page["name"] = k["kind"]
        page["ranges"] = info["ranges"]
        page["indices"] = info["indices"]
        page["description"] = describe(tree, s)[:-1] + f"; block{'s' if k['instances'] > 1 else ''} {info['ranges']}."
        blocks_node["children"].append({"id": kid, "title": page["title"], "class": tree["class"], "name": k["kind"], "parameters": page["parameters"],
                                        "note": f"block{'s' if k['instances'] > 1 else ''} {info['ranges']}, {grouped(page['parameters'])} each"})
        blocks_node["accounting"].append({"id": kid, "title": f"{page['title']} × {k['instances']}", "name": k["kind"], "calculation": k["calculation"], "parameters": k["total"]})

    # the model's own page lists the outside modules and the blocks in forward order
    order = []
    for nid in top_children:
        if nid == "embed_tokens":
            order.append(nid)
    order.append("blocks")
    order += [n for n in top_children if n != "embed_tokens"]
    for nid in order:
        n = nodes[nid]
        model_node["children"].append({"id": nid, "title": n["title"], "class": n["class"], "name": n["name"], "parameters": n["parameters"]})
        calc = " + ".join(f"{grouped(k['total'])}" for k in kinds) if nid == "blocks" else ("sum of its components" if n["children"] else (n["accounting"][0]["calculation"] if n["accounting"] else ""))
        if nid == "blocks" and len(kinds) > 1:
            calc = " + ".join(k["calculation"].split(" = ")[0] for k in kinds)
        elif nid == "blocks":
            calc = kinds[0]["calculation"].split(" = ")[0]
        model_node["accounting"].append({"id": nid, "title": n["title"], "name": n["name"], "calculation": calc, "parameters": n["parameters"]})
    return nodes


def tensor_page(facts, t, tid, owner, crumbs, instances, instances_label, where, owner_title) -> dict[str, Any]:
    learned = t["role"] == "parameter"
    page = {
        "id": tid, "type": "tensor", "title": t["name"], "owner_title": owner_title, "name": t["name"], "class": "Parameter" if learned else "buffer",
        "constructor": "", "path": f"{owner['path']}.{t['name']}", "where": f"{where}.{t['name']}", "role": t["role"],
        "parameters": t["elements"], "stored_buffers": 0 if learned else t["elements"],
        "instances": instances, "instances_label": instances_label, "crumbs": crumbs,
        "shape": t["shape"], "calculation": t["calculation"],
        "description": (
            f"A learned tensor of shape [{', '.join(grouped(x) for x in t['shape'])}] that {owner['class']} owns."
            if learned
            else f"A persistent buffer of shape [{', '.join(grouped(x) for x in t['shape'])}]: not trained by gradient, yet stored in the checkpoint and counted apart."
        ),
        "producer": f"created by {owner['class']}.__init__" + (" and loaded from the checkpoint" if learned else "; its values are loaded from the checkpoint"),
        "consumers": [f"{owner['class']}.forward"],
        "owner": crumbs[-1]["id"],
        "equations": None, "io": None, "children": [], "tensors": [],
        "accounting": [{"id": None, "title": t["name"], "name": t["name"], "calculation": t["calculation"], "parameters": t["elements"]}],
        "evidence": [],
    }
    for part, direct, claim in (
        ("__init__", True, f"{owner['class']}.__init__ creates {t['name']} with this shape."),
        ("forward", False, f"{owner['class']}.forward reads {t['name']}."),
    ):
        ex = _excerpt(facts, owner["class"], part)
        if ex:
            page["evidence"].append({"direct": direct, "claim": claim, "part": part, "class": owner["class"], **ex})
    return page


# --------------------------------------------------------------------------------------------------
# The residual-stream diagram: SVG geometry per block kind, and the model's flow.

SPINE = 22
WIDTH = 440


def _box(x, y, w, h, label, sub, part, link, cls):
    return {"x": x, "y": y, "w": w, "h": h, "label": label, "sub": sub, "part": part, "link": link, "cls": cls}


# The standard value each part of a block produces, by the part's role in the block.
PART_VALUES = {"pre_attn": "attention_norm_output", "attn": "attention_output", "pre_ffn": "mlp_norm_output", "ffn": "mlp_output"}


ATTENTION_TYPES = {"sliding_attention": "sliding window", "full_attention": "global", "linear_attention": "linear", "chunked_attention": "chunked"}


def block_diagram(kind_id: str, tree: dict[str, Any], s: Sizes, known: set[str], by_module: dict[str, str], attention_type: str | None = None) -> dict[str, Any]:
    """One block kind's residual stream: each part a box on a branch off the stream, each branch
    ending in an add. ``known``: the page ids that exist; ``by_module``: standard value by module name."""
    kids = {c["name"]: c for c in tree["children"]}
    kid = slug(kind_id)
    a = anatomy(tree)
    boxes, lines, adds = [], [], []
    terminals = [{"x": SPINE, "y": 14, "part": "layer_input", "text": "layers[i] input"}]

    def part_of(slot: str, name: str) -> str | None:
        return by_module.get(name) or PART_VALUES.get(slot)

    def link(*names: str) -> str | None:
        nid = ".".join((kid,) + names)
        return nid if nid in known else None

    def norm_box(x, y, name, slot):
        node = kids[name]
        return _box(x, y, 186, 40, name, "LayerNorm" if role(node) == "layernorm" else "RMSNorm", part_of(slot, name), link(name), "norm")

    y = 44
    lines.append((SPINE, 24, SPINE, 340))
    for pre, main, post, add_part in (("pre_attn", "attn", "post_attn", "layer_mid"), ("pre_ffn", "ffn", "post_ffn", "layer_output")):
        row = y
        x = 52
        lines.append((SPINE, row + 20, x, row + 20))
        if a[pre]:
            boxes.append(norm_box(x, row, a[pre], pre))
            lines.append((x + 186, row + 20, 256, row + 20))
        else:
            lines.append((x, row + 20, 256, row + 20))
        bottom = row + 40
        name = a[main]
        if name is None:
            boxes.append(_box(256, row, 176, 40, "—", "no module", None, None, "mlp"))
        elif main == "ffn" and role(kids[name]) == "moe":
            mlp = kids[name]
            mk = {c["name"]: c for c in mlp["children"]}
            router = next((n for n in ("gate", "router") if n in mk), None)
            rt = _routing(s, mk.get(router) if router else None)
            inner = []
            if router:
                inner.append((router, f"router: top-{rt['k']} of {rt['n']}", by_module.get(f"{name}.{router}") or "expert_weights", "router"))
            if "experts" in mk:
                inner.append(("experts", f"{rt['n']} experts, {rt['k']} per token", "routed_output", "experts"))
            for shared in ("shared_experts", "shared_expert"):
                if shared in mk:
                    inner.append((shared, "shared: every token runs it", "shared_expert_output", "shared"))
            boxes.append(_box(256, row, 176, 34 + 40 * len(inner), name, title_of(mlp), part_of(main, name), link(name), "mlp moe"))
            for n, (sub_name, sub, part, cls) in enumerate(inner):
                boxes.append(_box(264, row + 30 + 40 * n, 160, 34, sub_name, sub, part, link(name, sub_name), cls))
            bottom = row + 34 + 40 * len(inner)
        else:
            node = kids[name]
            sub = title_of(node)
            if role(node) == "gated_mlp":
                sub = f"{sub} · {grouped(_gated_inner(node))} wide"
            if main == "attn" and attention_type:
                sub = f"{sub} · {ATTENTION_TYPES.get(attention_type, attention_type.replace('_', ' '))}"
            boxes.append(_box(256, row, 176, 40, name, sub, part_of(main, name), link(name), "attn" if main == "attn" else "mlp"))
        if a[post]:
            # a norm after the part: drawn under it, on the way back to the stream
            node = kids[a[post]]
            kind = "LayerNorm" if role(node) == "layernorm" else "RMSNorm"
            boxes.append(_box(246, bottom + 14, 186, 40, a[post], kind, part_of(post, a[post]), link(a[post]), "norm"))
            lines.append((344, bottom, 344, bottom + 14))
            bottom += 54
        y_add = bottom + 28
        lines += [(344, bottom, 344, y_add), (344, y_add, SPINE + 10, y_add)]
        adds.append({"x": SPINE, "y": y_add, "part": add_part})
        y = y_add + 28
    height = y + 16
    lines[0] = (SPINE, 24, SPINE, height - 10)
    terminals.append({"x": SPINE, "y": height - 10, "part": "layer_output", "text": "layers[i] output → next block"})
    return {
        "kind": kind_id,
        "id": kid,
        "mixture": any("moe" in b["cls"] for b in boxes),
        "width": WIDTH,
        "height": height,
        "boxes": boxes,
        "lines": [{"x1": p, "y1": q, "x2": r, "y2": t, "arrow": p != r} for p, q, r, t in lines],
        "adds": adds,
        "terminals": terminals,
    }


def flow(facts: dict[str, Any], known: set[str], vals: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The model from input to output: embeddings, the blocks, what follows them, the logits."""
    n = facts["model"]["num_blocks"]
    at = {v["module"]: v["name"] for v in (vals or {}).values() if v.get("source") == "support" and "output" in (v.get("read_at") or "")}
    before, after = [], []
    for row in facts["accounting"]["model"]["rows"]:
        name = row["path"].split(".")[-1]
        nid = slug(name)
        if "Embedding" in row["class"] or "Embed" in row["class"]:
            part = at.get(row["path"]) or ("token_embeddings" if not before else None)
            before.append({"label": name, "sub": part or row["class"], "part": part, "link": nid if nid in known else None})
        elif "Norm" in row["class"]:
            after.append({"label": name, "sub": "final_norm_output", "part": "final_norm_output", "link": nid if nid in known else None})
        else:
            head = name == "lm_head" or row["class"] == "Linear"
            after.append({"label": name, "sub": "lm_head_output" if head else row["class"], "part": "lm_head_output" if head else None, "link": nid if nid in known else None})
    return before + [{"label": f"layers × {n}", "sub": "layer_output", "part": "layer_output", "link": "blocks"}] + after + [
        {"label": "logits", "sub": "the output", "part": "logits", "link": "model"}
    ]


def diagram(facts: dict[str, Any], known: set[str], vals: dict[str, dict[str, Any]]) -> dict[str, Any]:
    s = Sizes(facts)
    # a value read at the output of a block's child module names that child's part (support, when the facts carry it)
    by_module = {}
    for v in vals.values():
        module = v.get("module") or ""
        if v.get("source") == "support" and ".{i}." in module and v["read_at"].startswith("the child module") and "'s output" in v["read_at"]:
            by_module.setdefault(module.split(".{i}.", 1)[1], v["name"])
    types = {k["id"]: k.get("attention_type") for k in facts["block_kinds"]}
    kinds = [block_diagram(k["kind"], k["tree"], s, known, by_module, types.get(k["kind"])) for k in facts["accounting"]["block_kinds"]]
    # One height for every kind: moving the slider then repaints the drawing without moving the page.
    height = max(d["height"] for d in kinds)
    for d in kinds:
        d["height"] = height
        d["lines"][0]["y2"] = height - 10
        d["terminals"][-1]["y"] = height - 10
    return {"flow": flow(facts, known, vals), "kinds": kinds}


# --------------------------------------------------------------------------------------------------
# Everything together.


def value_pages(facts: dict[str, Any], vals: dict[str, dict[str, Any]], nodes: dict[str, dict[str, Any]]) -> None:
    """A page per standard value: layout, shape, what produces it, where it is read."""
    model_title = nodes["model"]["title"]
    preview = (facts.get("preview") or {}).get("tensors") or {}
    first_anatomy = anatomy(facts["accounting"]["block_kinds"][0]["tree"])
    for name, v in vals.items():
        nid = f"value.{name}"
        in_block = v["host"].startswith("layers")
        crumbs = [{"id": "model", "title": model_title}]
        if in_block:
            crumbs.append({"id": "blocks", "title": f"{facts['model']['num_blocks']} transformer blocks"})
        module = (v.get("module") or "").replace("{i}", "i")
        producer = _producer_page(module, nodes, facts)
        related = PREVIEW_TOGETHER.get(name, (name,))
        shown = [k for k in sorted(preview, key=_preview_order) if k.split(".")[-1] in related] if name in {k.split(".")[-1] for k in preview} else []
        nodes[nid] = {
            "id": nid, "type": "value", "title": name, "name": name, "class": v["layout"], "constructor": "",
            "path": module, "where": f"{v['host']}.{name}" if v["host"] != "model" else f"model.{name}", "role": "value",
            "parameters": 0, "stored_buffers": 0, "instances": 1, "instances_label": "", "crumbs": crumbs,
            "description": v["description"] + ".", "layout": v["layout"], "dims": v["dims"], "shape": v["shape"],
            "read_at": v["read_at"], "condition": v.get("condition"), "producer_id": producer, "previews": shown,
            "consumers": consumers(name, first_anatomy), "blocks": v.get("blocks"),
            "producer_label": "read from" if "input" in (v.get("read_at") or "") and "output" not in (v.get("read_at") or "") else "producer",
            "equations": None, "io": None, "children": [], "tensors": [], "accounting": [], "evidence": [],
        }
        # the producer's forward is the direct evidence of where the value comes from
        for ev in nodes.get(producer, {}).get("evidence", []):
            if ev["direct"] and ev["part"] == "forward":
                nodes[nid]["evidence"].append({**ev, "claim": f"{ev['class']}.forward, where {name} is computed."})


def consumers(name: str, a: dict[str, str | None]) -> list[str]:
    """Where a value goes next, in the block as its anatomy has it (norms before, after or around each part)."""
    block = {
        "layer_input": [f"{a['pre_attn'] or a['attn']} (the attention branch)", "the first add (the residual path)"],
        "attention_norm_output": [str(a["attn"])],
        "attention_output": [a["post_attn"] or "the first add"],
        "layer_mid": [f"{a['pre_ffn'] or a['ffn']} (the MLP branch)", "the second add (the residual path)"],
        "mlp_norm_output": [str(a["ffn"])],
        "mlp_output": [a["post_ffn"] or "the second add"],
    }
    return block.get(name) or CONSUMERS.get(name, [])


# Where the other values go next.
CONSUMERS = {
    "token_embeddings": ["the first block, as its input"],
    "layer_output": ["the next block, or the final norm after the last block"],
    "final_norm_output": ["the language-model head"],
    "lm_head_output": ["the logits the model returns"],
    "router_logits": ["the router's scoring and top-k choice"],
    "expert_weights": ["the experts, which scale their outputs by it"],
    "expert_indices": ["the experts, which run only the chosen ones"],
    "routed_output": ["the mixture's sum with the shared expert"],
    "shared_expert_output": ["the mixture's sum with the routed experts"],
    "attention_probabilities": ["the mix of the values"],
    "attention_scores": ["the softmax"],
}


# Values drawn together: the router's choice is its indices and their weights.
PREVIEW_TOGETHER = {
    "expert_weights": ("expert_weights", "expert_indices"),
    "expert_indices": ("expert_weights", "expert_indices"),
}


def _preview_order(key: str) -> tuple:
    """layers.10 after layers.9: numeric parts compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("."))


def _producer_page(module: str, nodes: dict[str, dict[str, Any]], facts: dict[str, Any]) -> str | None:
    """The component page of the module a value is read at, for block modules the first kind that has it."""
    if not module:
        return "model"
    parts = module.split(".")
    depth = len(facts["model"]["block_path"].split("."))
    if ".".join(parts[:depth]) == facts["model"]["block_path"] and len(parts) > depth:
        rest = ".".join(parts[depth + 1:])
        if not rest:
            return "blocks"  # the block itself: every kind
        for k in facts["accounting"]["block_kinds"]:
            nid = slug(k["kind"]) + ("." + rest if rest else "")
            if nid in nodes:
                return nid
        return "blocks"
    nid = slug(parts[-1])
    return nid if nid in nodes else "model"


def site(facts: dict[str, Any]) -> dict[str, Any]:
    """The pages' data for a family (plain, JSON-serialisable)."""
    nodes = hierarchy(facts)
    vals = values(facts)
    drawn = diagram(facts, set(nodes), vals)
    # Without support(), only the values of the parts the diagram draws are named (no expert_weights on
    # a dense model); with it, every value support() lists.
    parts = {p["part"] for d in drawn["kinds"] for p in d["boxes"] + d["adds"] + d["terminals"]} | {c["part"] for c in drawn["flow"]}
    vals = {k: v for k, v in vals.items() if v["source"] == "support" or k in parts}
    value_pages(facts, vals, nodes)
    kinds = facts["accounting"]["block_kinds"]
    kind_index = {k["kind"]: i for i, k in enumerate(kinds)}
    return {
        "nodes": nodes,
        "values": vals,
        "diagram": drawn,
        "blocks": [kind_index[k] for k in facts["blocks"]],
        "kinds": [{"id": slug(k["kind"]), "label": k["label"], "ranges": next(b["ranges"] for b in facts["block_kinds"] if b["id"] == k["kind"]), "instances": k["instances"]} for k in kinds],
        "preview_values": sorted({k.split(".")[-1] for k in ((facts.get("preview") or {}).get("tensors") or {})} & set(vals)),
        "search": search.entries(facts, vals),  # each entry leads to a page: atlas.search
    }


def check_pages(view: dict[str, Any], family: str) -> None:
    """What the pages state about the accounting and their links, checked before anything is written:
    every table sums to its component's count, and every link inside a family points at a page."""
    from atlas.errors import AtlasError

    nodes = view["nodes"]
    for nid, node in nodes.items():
        if node["type"] == "component" and node["accounting"]:
            total = sum(row["parameters"] for row in node["accounting"])
            if total != node["parameters"]:
                raise AtlasError(f"family {family}", nid, f"the accounting table sums to {grouped(total)}, the component has {grouped(node['parameters'])}")
        for ref in node["crumbs"] + node["children"] + node["tensors"] + [r for r in node["accounting"] if r.get("id")]:
            if ref["id"] not in nodes:
                raise AtlasError(f"family {family}", nid, f"links to {ref['id']!r}, which has no page")
        if node["type"] == "tensor":
            product = 1
            for n in node["shape"]:
                product *= n
            if product != node["parameters"]:
                raise AtlasError(f"family {family}", nid, f"shape {node['shape']} holds {product} elements, not {node['parameters']}")
    for d in view["diagram"]["kinds"]:
        for b in d["boxes"]:
            if b["link"] is not None and b["link"] not in nodes:
                raise AtlasError(f"family {family}", f"diagram {d['kind']}", f"{b['label']} links to {b['link']!r}, which has no page")
    for step in view["diagram"]["flow"]:
        if step["link"] is not None and step["link"] not in nodes:
            raise AtlasError(f"family {family}", "diagram flow", f"{step['label']} links to {step['link']!r}, which has no page")
