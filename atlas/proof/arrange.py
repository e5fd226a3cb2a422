"""Expressions that arrange tensors rather than compute new numbers: the prompt's positions, rows per
token, heads split by their columns and joined again, the parts of each head (latent attention's) split and
joined, the key-value heads a query head reads, the routing slots' experts and weights, a fused projection's
columns (in blocks, head by head or in column groups), copies of the stream.

Each is a node or a named function of ``atlas.proof.expr``: its notation and its reshaping defined
together, so the layout a page prints is the layout the proof runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from atlas.proof import tex as T
from atlas.proof.expr import ATOM, POWER, PRODUCT, SUM, Expr, Function, Weight, _torch, _wrap

# the prompt's own tensors made from its token ids (batch, T): every token real (the attention mask), and
# the positions 0..T-1
def _prompt_positions(ids):
    return _torch().arange(ids.shape[-1])[None]


every_token = Function("ones", lambda ids: _torch().ones_like(ids), lambda ids: r"(1,\dots,1)")
positions = Function("positions", _prompt_positions, lambda ids: r"0,\dots,T-1")
# the same positions printed as the rule p_t = t; and each position times each rotary frequency
# (batch, T, pairs), the angles a rotation turns by
position_index = Function("position", _prompt_positions, lambda ids: r"t,\ t=0,\dots,T-1")
angles = Function("angles", lambda p, f: p[..., None].to(_torch().float64) * f, lambda p, f: rf"{p}\,{f}")
# each angle twice, the two copies side by side (transformers' default layout of the rotary angles), in ℝ^{width}
side_by_side = Function("side by side", lambda a, width: _torch().cat((a, a), dim=-1), lambda a, width: rf"[{a};\,{a}]\in\mathbb{{R}}^{{{width}}}")
# each query head reading key-value head ⌈h/r⌉ (r query heads per key-value head): the key-value heads
# repeated in place, printed by the head each one reads; ``kv`` the symbol with its own head index g
shared_head = Function("shared head", lambda t, r: t.repeat_interleave(int(r), 1),
                       lambda t, r: t.replace("_g", rf"_{{\lceil h/{r}\rceil}}"))


@dataclass(eq=False)
class Index(Expr):
    """An index running over ``full`` entries at the checkpoint's size (``tiny`` on the preview run):
    printed as its symbol, with its range "j=0..n-1" as the step's where-clause; its value 0..tiny-1."""

    symbol: str
    full: int
    tiny: int
    ranges = True  # its range printed after the step's other where-clauses

    def tex(self, index=None):
        return self.symbol

    def where(self) -> str:
        return rf"{self.symbol}=0..{T.num(self.full - 1)}"

    def run(self, env):
        return _torch().arange(int(self.tiny), dtype=_torch().float64)


# a projection's columns split into its heads of ``width`` columns each: (batch, T, heads × width) -> (batch,
# heads, T, width), head h the columns (h-1)·width+1 .. h·width; printed by that column range, in the head index given
def head_columns(index: str):
    def arithmetic(t, width, heads):  # the width printed is the checkpoint's; the tiny run splits into its own heads
        return t.view(*t.shape[:2], int(heads), -1).transpose(1, 2)

    return Function(f"heads by {index}", arithmetic,
                    lambda t, width, heads: rf"{t}_{{:,\,({index}-1)\cdot {width}+1\,..\,{index}\cdot {width}}}", bracket=ATOM)


def _part_range(index: str, width: str, first: str, last: str) -> str:
    """Columns first..last of group ``index`` of ``width`` columns, counted from 1: (i-1)·w+first .. (i-1)·w+last,
    the last written i·w where it is the group's last column (as head_columns writes it)."""
    end = rf"{index}\cdot {width}" if last == width else rf"({index}-1)\cdot {width}+{last}"
    return rf"({index}-1)\cdot {width}+{first}\,..\,{end}"


# the columns first..last of each head of ``width`` columns (counted from 1 within the head): (batch, T, heads × width)
# -> (batch, heads, T, last-first+1); latent attention's parts of each head (q^C_h and q^R_h, k^C_h and v_h)
def head_part(index: str):
    def arithmetic(t, width, heads, first, last):
        return t.view(*t.shape[:2], int(heads), -1).transpose(1, 2)[..., int(first) - 1:int(last)]

    return Function(f"part of each head by {index}", arithmetic,
                    lambda t, width, heads, first, last: rf"{t}_{{:,\,{_part_range(index, width, first, last)}}}", bracket=ATOM)


# the columns first..last of each of ``groups`` column groups of ``width``, the groups' shares joined in turn: (batch, T,
# groups × width) -> (batch, T, groups × (last-first+1)), printed [t_{:,(i-1)·w+first..}]_{i=1..groups}; a fused projection laid
# out head by head (each head's query, key and value side by side; a query and its gate) or in model-parallel groups (CodeGen's)
def group_columns(index: str):
    def arithmetic(t, width, groups, first, last):
        return t.unflatten(-1, (int(groups), -1))[..., int(first) - 1:int(last)].flatten(-2)

    return Function(f"columns of each group by {index}", arithmetic,
                    lambda t, width, groups, first, last: rf"\big[{t}_{{:,\,{_part_range(index, width, first, last)}}}\big]_{{{index}=1..{groups}}}",
                    bracket=ATOM)


# a tensor one head reads for every head: a head axis of one (batch, 1, T, d), and that one head repeated for ``heads``
# (batch, heads, T, d); both printed as the tensor itself, whose symbol carries no head index (latent attention's k^R)
one_head = Function("one head", lambda t: t[:, None], lambda t: t)
every_head = Function("every head", lambda t, heads: t.expand(-1, int(heads), -1, -1), lambda t, heads: t)
# two parts of each head side by side, [a; b]: (batch, heads, T, da + db)
parts_joined = Function("parts joined", lambda a, b: _torch().cat((a, b), dim=-1), lambda a, b: rf"[{a};\,{b}]")
# a block of a fused projection's columns, from column ``first`` to column ``last`` (counted from 1), printed
# by that range
column_block = Function("column block", lambda t, first, last: t[..., int(first) - 1:int(last)],
                        lambda t, first, last: rf"{t}_{{:,\,{first}..{last}}}", bracket=ATOM)
# n copies of the stream, one per residual stream (batch, T, n, d); printed (x, …, x), the number in words
copies = Function("copies", lambda x, n: x[..., None, :].expand(*x.shape[:-1], n, x.shape[-1]), lambda x, n: rf"({x},\dots,{x})")
# the entries at the chosen columns: of each row (a token's scores at its chosen experts), or of a vector
# with one entry per column (a number per expert), printed s_{𝓔}
at_chosen = Function("at", lambda s, idx: s[idx] if s.dim() == 1 else s.gather(-1, idx), lambda s, idx: f"{s}_{{{idx}}}", bracket=ATOM)
# a stored tensor read as one vector (a bias kept as a row)
flat = Function("flat", lambda w: w.reshape(-1), lambda w: w)
# a tensor as rows, one per token (the layout a router and its experts read): printed as the tensor itself
rows_of = Function("as rows", lambda y: y.reshape(-1, y.shape[-1]), lambda y: y)


@dataclass(eq=False)
class ExpertMatMul(Expr):
    """x W_i^⊤ for each routing slot, W_i the slot's expert's slice of a 3-D weight (experts × out × in;
    experts × in × out where ``stored_in_out``), plus that expert's bias where it has one. ``x`` holds a
    row per token (the same for every slot) or a row per token and slot; ``last`` bounds the experts that
    hold a slice (a zero-computation expert past it reads the last one, its result then replaced)."""

    x: Expr
    weight: Weight
    chosen: Expr  # the experts each token's slots chose: (tokens, slots)
    stored_in_out: bool = False
    bias: Weight | None = None
    last: int | None = None

    @property
    def prec(self):
        return SUM if self.bias is not None else PRODUCT

    def children(self):
        return (self.x, self.weight, self.chosen) + ((self.bias,) if self.bias is not None else ())

    def tex(self, index=None):
        w = self.weight.symbol if self.stored_in_out else rf"{self.weight.symbol}^{{\top}}"
        b = f"+{self.bias.symbol}" if self.bias is not None else ""
        return f"{_wrap(self.x, POWER, index)}\\,{w}{b}"

    def run(self, env):
        x, chosen = self.x.run(env), self.chosen.run(env)
        at = chosen if self.last is None else chosen.clamp(max=self.last)
        w = self.weight.run(env)[at]  # (tokens, slots, ·, ·): each slot's expert
        rows = x[:, None, :] if x.dim() == 2 else x  # one row per token, the same for every slot
        out = (rows[..., None, :] @ w).squeeze(-2) if self.stored_in_out else (w @ rows[..., None]).squeeze(-1)
        return out + self.bias.run(env)[chosen] if self.bias is not None else out


# the columns of a fused projection: its first or last n (gate and up in halves), or its even or odd
# columns (gate and up interleaved), printed by which columns they are
first_columns = Function("first", lambda t, n: t[..., :int(n)], lambda t, n: rf"{t}_{{:,\,1..{n}}}", bracket=ATOM)
last_columns = Function("last", lambda t, n: t[..., -int(n):], lambda t, n: rf"{t}_{{:,\,\text{{last }}{n}}}", bracket=ATOM)
even_columns = Function("even", lambda t: t[..., ::2], lambda t: rf"{t}_{{:,\,\text{{even}}}}", bracket=ATOM)
odd_columns = Function("odd", lambda t: t[..., 1::2], lambda t: rf"{t}_{{:,\,\text{{odd}}}}", bracket=ATOM)
# each routing slot's output times its weight (tokens, slots, d), and their sum over the slots
slot_weighted = Function("weighted", lambda g, o: g[..., None] * o, lambda g, o: rf"{g}_j\,{o}")
slot_sum = Function("slot sum", lambda o: o.sum(1), lambda o: rf"\textstyle\sum_{{j}}{o}_j")


def _joined_tex(O: str, count: int, width: str) -> str:
    """[O_1; …; O_H] for the heads' symbol O_h (its subscript h replaced by the first and last head), in ℝ^{width}."""
    stem, mark, rest = O.rpartition("_h")
    first, last = (f"{stem}_1{rest}", f"{stem}_{{{count}}}{rest}") if mark else (O, O)
    return rf"[{first};\dots;{last}]\in\mathbb{{R}}^{{{width}}}"


@dataclass(eq=False)
class JoinedHeads(Expr):
    """The heads' outputs side by side, one row per token: (batch, T, heads, d) -> (batch, T, heads × d);
    printed [O_1; …; O_H] ∈ ℝ^{H×d} at the checkpoint's sizes."""

    heads: Expr
    count: int  # the checkpoint's heads
    width: str  # TeX of the joined width, at the checkpoint's sizes

    def children(self):
        return (self.heads,)

    def tex(self, index=None):
        return _joined_tex(self.heads.tex(index), self.count, self.width)

    def run(self, env):
        o = self.heads.run(env)
        return o.reshape(*o.shape[:2], -1)
