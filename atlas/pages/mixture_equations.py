"""The equations of a mixture of experts' parts: the router's choice and the routed experts."""

from __future__ import annotations

from typing import Any

from atlas.pages.sizes import Sizes, routing
from atlas.pages.tex import act_tex, tex_num


def eq_router_topk_softmax(s: Sizes) -> dict[str, list[str]]:
    """A router that picks the top k logits first and takes the softmax over those k only (gpt-oss)."""
    r = routing(s, None)
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
    r = routing(s, None)
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


def eq_router(s: Sizes, router: dict[str, Any] | None) -> dict[str, list[str]]:
    r = routing(s, router)
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
    r = routing(s, None)
    d = s.get("hidden_size")
    a, definition = act_tex(s.act)
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
