"""An attention mask scored from the values (Doge's dynamic mask attention), written as expressions.

Each position's values of all key-value heads, side by side, are projected to one number per key-value head
(δ = [V_1; …; V_G] W_δ^⊤); exp(A ⊙ softplus(δ)), with A one learned number a key-value head, is that key's score
m. Every query head adds its key-value head's scores to its attention scores, the same for every query, beside the
causal mask; past the module's keep_window_size keys, each query keeps only that many keys, those of highest score,
and masks the rest. The structure is read in atlas.model.structure.value_scored_mask.
"""

from __future__ import annotations

from dataclasses import dataclass

from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import _attr, linear_call
from atlas.proof.steps import Step

NEG = float("-inf")


def _joined(v, heads=None):
    """(batch, heads, T, d) -> (batch, T, heads × d): each position's heads side by side."""
    return v.transpose(1, 2).reshape(v.shape[0], v.shape[2], -1)


# the key-value heads' values side by side, per position: the width the scoring projection reads
joined_kv_heads = E.Function("key-value heads joined", _joined, lambda v, heads: rf"[{v}]_{{g=1..{heads}}}")


def _scored(m, group: int, width: int, keep: int | None):
    """The additive mask (batch, heads, T, T): each query head's key-value head's score of key s at every query t
    that may read s (s ≤ t), −∞ elsewhere; past ``keep`` keys, only the ``keep`` highest of each row stay."""
    import torch

    scores = m.transpose(1, 2).repeat_interleave(group, 1)  # (batch, heads, T): each query head its key-value head's
    t = torch.arange(width)
    allowed = t[None, :] <= t[:, None]
    d = scores[:, :, None, :].expand(-1, -1, width, -1).masked_fill(~allowed, NEG)
    if keep is not None and width > keep:
        kept = torch.zeros_like(d, dtype=torch.bool).scatter(-1, torch.topk(d, keep, dim=-1).indices, True)
        d = d.masked_fill(~kept, NEG)
    return d


@dataclass(eq=False)
class ScoredMask(E.Expr):
    """The mask the values scored, as wide as the scores it is added to: printed as its symbol, its rule the step's
    where-clause (at the checkpoint's group and keep window); computed from the scores m at the tiny run's."""

    symbol: str
    m: E.Expr
    like: E.Expr
    group: tuple[int, int]  # query heads per key-value head (checkpoint, tiny)
    keep: tuple[int | None, int | None]  # keep_window_size (checkpoint, tiny)
    score_tex: str

    def children(self):
        return (self.m, self.like)

    def reads(self):
        return self.m.reads()

    def tex(self, index=None):
        return self.symbol

    def where(self):
        r, keep = self.group[0], self.keep[0]
        head = rf"\lceil h/{r}\rceil" if r > 1 else "h"
        m, other = (rf"{self.score_tex}_{{{key},{head}}}" for key in ("s", "s'"))
        rule = rf"{self.symbol}_{{h,ts}}={m}\ \text{{if}}\ s\le t"
        if keep is not None:  # the keys s' ≤ t of highest score: all of them while there are no more than keep
            rule += rf"\ \text{{and}}\ s\in\operatorname{{top}}_{{{T.num(keep)}}}\{{{other}:\ s'\le t\}}"
        return rule + r",\ -\infty\ \text{otherwise}"

    def run(self, env):
        s = self.like.run(env)
        return _scored(self.m.run(env), self.group[1], s.shape[-1], self.keep[1]).to(s.dtype)


def score_steps(part: Part, parts: tuple[str, str], kv: tuple[int, int]) -> list[Step]:
    """The keys' scores from the values: the key-value heads joined per position, projected to one number a head,
    and exp(A ⊙ softplus(δ)). Run after the heads are split (V_g in the chain's environment)."""
    scorer, vector = parts
    joined, delta, m = E.Sym("Vj", T.v("v_t")), E.Sym("delta", r"\delta_t"), E.Sym("m", "m_t")
    width = part.full.get_submodule(scorer).out_features
    A = E.Weight(vector, "A", (kv[0],))
    part.note("value_mask", {"projection": scorer, "per_head": vector},
              "the module's own vector, one number a key-value head, and the linear child that maps the values to as many")
    return [
        Step(expr=E.Let(joined, joined_kv_heads(E.Sym("V", T.v("V_{t,g}")), E.Size(T.num(kv[0]), None)),
                        "(each position's values of every key-value head side by side)")),
        Step(expr=E.Let(delta, linear_call(part, scorer, joined, r"W_{\delta}"), maps=(part.full.get_submodule(scorer).in_features, width))),
        Step(expr=E.Let(m, E.exp(A * E.softplus(delta)), "(one score a key and key-value head, from its values)"), summary=True),
    ]


def keep_window(part: Part) -> tuple[int | None, int | None]:
    """The module's keep_window_size at both sizes (None where it holds none)."""
    return _attr(part.full, "keep_window_size"), _attr(part.tiny, "keep_window_size")


def scored_mask(part: Part, scores: E.Sym, group: tuple[int, int]) -> ScoredMask:
    """The node added to the scores in the place of the causal mask."""
    keep = keep_window(part)
    part.note("keep_window", keep[0], "the module's keep_window_size: past it, each query keeps that many keys of highest score")
    return ScoredMask(T.c("D"), E.Sym("m", "m"), scores, group, keep, "m")
