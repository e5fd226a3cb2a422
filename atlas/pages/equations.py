"""Equations, per component kind. Each returns {"summary": [tex], "steps": [tex]}.

``equations(node, s)`` picks the builder by the node's class where a class computes differently
from its role's generic kind, otherwise by its role; attention and the mixture's parts have their
own modules.
"""

from __future__ import annotations

from typing import Any

from atlas.pages.attention_equations import eq_attention, eq_latent_attention
from atlas.pages.mixture_equations import eq_clamped_swiglu_experts, eq_experts, eq_router, eq_router_topk_softmax
from atlas.pages.roles import anatomy, gated_inner, in_out, role
from atlas.pages.sizes import Sizes, routing
from atlas.pages.tex import act_tex, tex_num
from atlas.pages.words import title_of


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
    _, definition = act_tex(act)
    return {"summary": [definition], "steps": [definition]}


def eq_gated_mlp(width: int, inner: int, act: str, out: str = "y") -> dict[str, list[str]]:
    a, definition = act_tex(act)
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


# Component kinds whose computation differs from the generic kind of the same role, by class.
CLASS_EQUATIONS = {
    "GptOssTopKRouter": lambda node, s: eq_router_topk_softmax(s),
    "GptOssExperts": lambda node, s: eq_clamped_swiglu_experts(s, node["tensors"][-1]["shape"][-1] if node["tensors"] else None),
}


def eq_moe(s: Sizes, node: dict[str, Any]) -> dict[str, list[str]]:
    kids = {c["name"]: c for c in node["children"]}
    router = kids.get("gate") or kids.get("router")
    r = routing(s, router)
    inner = s.first("moe_intermediate_size", "intermediate_size")
    shared = kids.get("shared_experts") or kids.get("shared_expert")
    route = equations(router, s) if router is not None and router["class"] in CLASS_EQUATIONS else eq_router(s, router)
    expert_node = kids.get("experts")
    experts = equations(expert_node, s) if expert_node is not None and expert_node["class"] in CLASS_EQUATIONS else eq_experts(s, inner)
    steps = [r"\text{Routing:}", *route["steps"], r"\text{Routed experts:}", *experts["steps"]]
    summary = [*route["summary"], experts["summary"][1]]
    if shared is not None:
        shared_inner = gated_inner(shared)
        sh = eq_gated_mlp(s.get("hidden_size"), shared_inner, s.act, out=r"y^{\mathrm{shared}}")
        steps += [r"\text{Shared expert:}", *sh["steps"], r"\Delta_{\mathrm{ffn}}=y^{\mathrm{routed}}+y^{\mathrm{shared}}"]
        summary.append(r"\Delta_{\mathrm{ffn}}=y^{\mathrm{routed}}+y^{\mathrm{shared}}")
    else:
        steps.append(r"\Delta_{\mathrm{ffn}}=y^{\mathrm{routed}}")
    return {"summary": summary, "steps": steps}


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
        dims = in_out(node)
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
        return eq_gated_mlp(d, gated_inner(node), s.act)
    if r == "mlp":
        return eq_mlp(node, s)
    if r == "block":
        return eq_block(node, s)
    return None


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
    a, definition = act_tex(s.act or s.get("activation_function"))

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
