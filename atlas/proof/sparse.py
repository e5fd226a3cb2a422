"""Sparse attention's lightning indexer (DeepSeek Sparse Attention): a score for every past position, and the best kept.

The indexer has a few heads of its own. Its queries are projected from the attention's query latent,
its single key per position from the block's input through a LayerNorm; the leading rotary dims of
both are turned by the position's angles (in halves or in adjacent pairs: measured). Each head's score
is a ReLU of the scaled dot product; a weight per head and position, projected from the input, mixes
the heads into one score per key position; the causal mask is added and the top-k positions are kept.

The module returns the kept positions, ranked. Where scores tie (every position a query may not see
is -inf, and heads whose ReLU zeroes all of them give equal scores), any order of the tied positions
is a correct top-k, so the chain's scores are checked to rank the module's positions first (``top_k``
in ``atlas.proof.core.difference``) rather than the positions compared one by one.
"""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import X, _attr, linear_dims, sub
from atlas.proof.positions import ROTARY, rotate_half, rotate_pairs
from atlas.proof.steps import Chain, Input, Step

LATENT = Input("cq", T.q(r"\hat c^{Q}"), "q_resid", "the attention's normalized query latent")
CAUSAL = Input("M", T.c("M"), "attention_mask", "the causal mask: 0 where the key position is visible, -∞ where not")


def _sizes(module):
    return (_attr(module, "n_heads"), _attr(module, "head_dim"), _attr(module, "qk_rope_head_dim"),
            _attr(module, "softmax_scale"), _attr(module, "index_topk"))


def _turn(rotate):
    """The rotation applied to the leading rotary dims only; the rest pass unchanged."""
    import torch

    def turn(x, cos, sin):
        r = cos.shape[-1]
        return torch.cat((rotate(x[..., :r], cos, sin), x[..., r:]), dim=-1)

    return turn


def _then(child, after):
    """A step function that runs a child's chain (``library.sub``) and reshapes or scales its result;
    it keeps what the pages read from the child's step (which child, fed by what)."""
    def fn(e):
        return after(child(e))

    fn.child_id, fn.child_name, fn.child_inputs = child.child_id, child.child_name, child.child_inputs
    return fn


def _additive(mask):
    """The mask as numbers to add: a boolean one (True: visible) becomes 0 and -inf."""
    import torch

    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))
    return mask


def indexer(part: Part) -> Chain:
    h, d, r, scale, topk = _sizes(part.full)
    th, td, tr, tscale, _ = _sizes(part.tiny)
    width = part.ctx.full_config.hidden_size
    rq, _, _ = linear_dims(part.full.wq_b)
    part.note("indexer", {"heads": h, "head_dim": d, "rope_dims": r, "keeps": topk}, "the module's sizes")
    part.note("scaling", scale, "the module's softmax_scale")
    qI, kI, w, I = T.q("q^{I}_{t,j}"), T.k("k^{I}_s"), T.c("w^{I}_{t,j}"), T.c("I_{ts}")
    latent = T.q(r"\hat c^{Q}_t")

    def build(rotate, words: str) -> Chain:
        turn = _turn(rotate)

        def rotated(e):
            cos, sin = e["R"]
            return turn(e["q"], cos[:, :, None], sin[:, :, None]), turn(e["k"], cos, sin)

        def scores(e):
            S = tscale * (e["q"].transpose(1, 2) @ e["k"][:, None].transpose(-1, -2))  # (batch, head, query, key)
            return S.clamp(min=0)

        steps = [
            Step(rf"{qI}=\text{{head }}j\text{{ of }}{latent}W_{{QI}}^{{\top}}{T.maps(rq, T.times(h, d))}", "q",
                 _then(sub(part, "wq_b", x="cq"), lambda q: q.unflatten(-1, (th, td)))),
            Step(rf"{kI}=x_s W_{{KI}}^{{\top}}{T.maps(width, d)}\quad\text{{one key per position, shared by the heads}}", "k", sub(part, "wk")),
            Step(rf"{kI}\leftarrow\operatorname{{LayerNorm}}({kI})", "k", sub(part, "k_norm", x="k")),
            Step(rf"{qI},\,{kI}\leftarrow\operatorname{{RoPE}}\ \text{{on the first }}{T.num(r)}\text{{ of }}{T.num(d)}\text{{ dims ({words}); the other }}"
                 rf"{T.num(d - r)}\text{{ pass unrotated}}", ("q", "k"), rotated),
            Step(rf"S_{{tsj}}=\operatorname{{ReLU}}\big({T.num(scale)}\,{qI}\cdot {kI}\big)", "S", scores, summary=True),
            Step(rf"{w}=\big(x_t W_{{w}}^{{\top}}\big)_j/\sqrt{{{T.num(h)}}}{T.maps(width, h)}", "w",
                 _then(sub(part, "weights_proj"), lambda w: w * th ** -0.5)),
            Step(rf"{I}=\textstyle\sum_{{j=1}}^{{{T.num(h)}}} {w}\,S_{{tsj}}+{T.c('M_{ts}')}", "I",
                 lambda e: (e["w"].transpose(1, 2)[..., None] * e["S"]).sum(1) + _additive(e["M"]),
                 value="indexer_scores", summary=True),
            Step(rf"P_t=\operatorname{{top}}_{{{T.num(topk)}}}\ \text{{positions }}s\text{{ by }}{I}\quad\text{{(all of them where }}t<{T.num(topk)}\text{{)}}", "P",
                 lambda e: e["I"], value="indexer_positions", summary=True, compare="top_k"),
        ]
        return Chain(steps, [X, LATENT, ROTARY, CAUSAL], "P")

    return part.choose("rotary_layout", {
        "halves": lambda: build(rotate_half, "the first half paired with the second half"),
        "interleaved_pairs": lambda: build(rotate_pairs, "adjacent pairs, laid out evens then odds"),
    })


def selection_mask(scores, keep: int):
    """0 at the ``keep`` best-scored key positions of each query, -inf elsewhere (ties taken in any order)."""
    import torch

    kept = scores.topk(min(keep, scores.shape[-1]), dim=-1).indices
    mask = torch.full(scores.shape, float("-inf"), dtype=torch.float64)
    return mask.scatter(-1, kept, 0.0)
