"""Lightning attention (MiniMax-Text-01): linear attention whose state decays by a fixed factor a head.

One projection, through an activation, gives each head its queries, keys and values; a query at t reads
every value at s <= t weighted by q_t . k_s and by exp(-lambda_h (t - s)), with no softmax; the heads'
joined read-out is RMS-normalised across the width, gated by the sigmoid of a projection of the input,
and projected back. The module computes the sum block by block (a decay matrix inside each block and a
decayed state carried between blocks); the steps write the same sum over positions, and the preview
run (whose blocks are shorter than its prompt) checks that the two agree.
"""

from __future__ import annotations

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, activation_call, linear_call, linear_dims, sub
from atlas.proof.steps import Chain, Step


def lightning_attention(part: Part) -> Chain:
    import torch

    m, tm = part.full, part.tiny
    h, d, th, td = m.num_attention_heads, m.head_dim, tm.num_attention_heads, tm.head_dim
    width = linear_dims(m.qkv_proj)[0]
    layers = m.num_hidden_layers
    Q, K, V = T.q("Q_h"), T.k("K_h"), T.v("V_h")

    def decayed_scores(e):
        T_ = e["Q"].shape[-2]
        t = torch.arange(T_, dtype=torch.float64)
        gap = t[:, None] - t[None, :]
        lam = e.w("slope_rate").to(torch.float64).reshape(-1, 1, 1)
        D = torch.where(gap >= 0, torch.exp(-lam * gap.clamp(min=0)), torch.zeros(()))
        return (e["Q"] @ e["K"].transpose(-1, -2)) * D.to(e["Q"].dtype)

    p, by_h = E.Sym("p", "p"), A.head_part("h")
    steps = [
        Step(expr=E.Let(p, E.Child(sub(part, "qkv_proj"), (E.Sym("x", "x"),), lambda a: rf"{a}\,W_{{QKV}}^{{\top}}"),
                        maps=(width, T.times(3 * h, d)))),
        # its own summary line: folded into the heads' split it would print three times
        Step(expr=E.Let(E.Sym("a", "a"), activation_call(part, "act_fn", p)), summary=True),
        # each head's 3d columns of a: its query, key and value side by side
        Step(expr=E.Lets(tuple(E.Let(E.Sym(n, sym), by_h(E.Sym("a", "a"), E.Size(3 * d, 3 * td), E.Size(h, th), E.Size(j * d + 1, j * td + 1),
                                                           E.Size((j + 1) * d, (j + 1) * td)))
                               for j, (n, sym) in enumerate((("Q", Q), ("K", K), ("V", V)))), rf":\ h=1..{T.num(h)}", each=False)),
        Step(rf"\lambda_h=\big(2^{{-8/{T.num(h)}}}\big)^{{h}}\Big(1-\frac{{\ell}}{{{T.num(layers - 1)}}}\Big)\quad\text{{each head's decay rate in block }}\ell"
             r"\ \text{(the module's slope\_rate buffer; the notes check the rule on every block)}", "lam",
             lambda e: e.w("slope_rate").reshape(-1), summary=True),
        Step(rf"S_h=\big({Q}{K}^{{\top}}\big)\odot D_h,\quad (D_h)_{{ts}}=e^{{-\lambda_h (t-s)}}\ \text{{if}}\ s\le t,\ 0\ \text{{otherwise (no softmax)}}",
             "S", decayed_scores, summary=True),
        Step(rf"{T.v('O_h')}=S_h{V}\quad\text{{a decayed sum of every earlier value}}", "O", lambda e: e["S"] @ e["V"], summary=True),
        Step(rf"o=[{T.v('O_1')};\dots;{T.v(f'O_{{{h}}}')}]\in\mathbb{{R}}^{{{T.times(h, d)}}}", "o",
             lambda e: e["O"].transpose(1, 2).reshape(*e["x"].shape[:2], -1)),
        Step(r"o\leftarrow\operatorname{Norm}(o)\quad\text{across all heads' width}", "o", sub(part, "norm", x="o"), sub=f"{part.id}.norm"),
        Step(rf"o\leftarrow\sigma\big(x\,W_G^{{\top}}\big)\odot o{T.maps(width, T.times(h, d))}\quad\text{{the output gate}}", "o",
             lambda e, gate=sub(part, "output_gate"): gate(e).sigmoid() * e["o"], summary=True),
        Step(expr=E.Let(E.Sym("y", r"\Delta"), linear_call(part, "out_proj", E.Sym("o", "o"), "W_O"), maps=(T.times(h, d), linear_dims(m.out_proj)[1])),
             value="attention_output", summary=True),
    ]
    part.note("heads", {"query": h, "key_value": h, "head_dim": d}, "the module's sizes: one key and one value head per query head")
    part.note("decay", "exp(-lambda_h) a step, lambda_h = (2^(-8/H))^h (1 - l/(L-1))", "the module's slope_rate buffer, checked on the preview run")
    part.note("block_size", m.block_size, "the module computes the sum in blocks of this many positions; the steps write it over positions")
    return Chain(steps, [X], "y")
