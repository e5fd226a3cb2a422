"""Expressions for rules stated in clauses: a quantity named where it is used and defined after the
equation (g_j = b^{-2j/d}), a value chosen by cases, comparisons, a list of numbers from the config, the
length of the prompt, and a number printed with its value at the checkpoint's sizes.

Each is a node of ``atlas.proof.expr``: its notation and its arithmetic together, so a condition a page
prints is the condition that runs (the rotary frequency rules of ``atlas.proof.rope`` are built of them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from atlas.proof import tex as T
from atlas.proof.expr import SUM, Expr, Function, _torch

# a number between two bounds (YaRN's ramp between 0 and 1), and the larger of two (dynamic NTK's length)
clamp_between = Function("clamp", lambda a, low, high: a.clamp(low, high) if hasattr(a, "clamp") else min(max(a, low), high),
                         lambda a, low, high: rf"\operatorname{{clamp}}\!\big({a},{low},{high}\big)")
larger = Function("max", lambda a, b: max(a, b), lambda a, b: rf"\max({a},{b})")


@dataclass(eq=False)
class Named(Expr):
    """A quantity printed by its symbol where it is used and defined once in the step's where-clause
    (``symbol = its expression``); the same node runs that expression."""

    symbol: str
    expr: Expr
    scalar: bool = True  # a number (or a number per pair): a product with it prints a\,b, not a ⊙ b

    def children(self):
        return (self.expr,)

    def tex(self, index=None):
        return self.symbol

    def where(self) -> str:
        return f"{self.symbol}={self.expr.tex()}"

    def run(self, env):
        return self.expr.run(env)


_COMPARE = {"<": lambda a, b: a < b, ">": lambda a, b: a > b, r"\le": lambda a, b: a <= b, r"\ge": lambda a, b: a >= b}


@dataclass(eq=False)
class Compare(Expr):
    """a < b, a > b, a ≤ b, a ≥ b: a condition of a case, true or false per entry."""

    op: str  # "<", ">", r"\le", r"\ge"
    a: Expr
    b: Expr
    prec = 0  # binds less tightly than any operator

    def children(self):
        return (self.a, self.b)

    def tex(self, index=None):
        space = " " if self.op.startswith("\\") else ""
        return f"{self.a.tex(index)}{self.op}{space}{self.b.tex(index)}"

    def run(self, env):
        return _torch().as_tensor(_COMPARE[self.op](self.a.run(env), self.b.run(env)))


@dataclass(eq=False)
class Cases(Expr):
    """The value of the first case whose condition holds, entry by entry; ``otherwise`` where none does.
    Without ``otherwise``, an entry no printed condition covers is NaN, so the conditions printed are the
    ones that run and a gap between them fails the proof."""

    cases: tuple[tuple[Expr, Compare], ...]  # (value, condition)
    otherwise: Expr | None = None
    prec = SUM

    def children(self):
        return tuple(n for value, condition in self.cases for n in (value, condition)) + (
            (self.otherwise,) if self.otherwise is not None else ())

    def tex(self, index=None):
        rows = [f"{value.tex(index)} & {condition.tex(index)}" for value, condition in self.cases]
        if self.otherwise is not None:
            rows.append(rf"{self.otherwise.tex(index)} & \text{{otherwise}}")
        return r"\begin{cases}" + r"\\ ".join(rows) + r"\end{cases}"

    def run(self, env):
        torch = _torch()
        result = torch.as_tensor(self.otherwise.run(env) if self.otherwise is not None else math.nan, dtype=torch.float64)
        for value, condition in reversed(self.cases):
            result = torch.where(condition.run(env), torch.as_tensor(value.run(env), dtype=torch.float64), result)
        return result


def _listed(values) -> str:
    shown = [T.num(int(v) if float(v).is_integer() else float(v)) for v in values[:3]]
    return ",".join(shown) + (r",\dots" if len(values) > 3 else "")


@dataclass(eq=False)
class Listed(Expr):
    """A list of numbers from the config, one per pair (LongRoPE's factors): printed ``symbol_j``, its
    first entries in the where-clause; the checkpoint's list printed, the preview's run."""

    symbol: str
    full: Any
    tiny: Any

    def tex(self, index=None):
        return f"{self.symbol}_j"

    def where(self) -> str:
        return f"{self.symbol}=({_listed(self.full)})"

    def run(self, env):
        return _torch().tensor([float(v) for v in self.tiny], dtype=_torch().float64)


@dataclass(eq=False)
class Length(Expr):
    """T, the prompt's length: one past its last position (read from the chain's positions)."""

    positions: Expr

    def children(self):
        return (self.positions,)

    def tex(self, index=None):
        return "T"

    def run(self, env):
        return int(self.positions.run(env).max()) + 1


@dataclass(eq=False)
class Valued(Expr):
    """An expression printed with its value at the checkpoint's sizes (``0.1 log(32)+1 = 1.3466``): the
    value is ``at_full``, the same rule built at the checkpoint's sizes and run; ``expr`` runs."""

    expr: Expr
    at_full: Expr
    digits: int = 4
    prec = 0  # "a = b": binds less tightly than any operator

    def children(self):
        return (self.expr,)

    def tex(self, index=None):
        value = f"{float(self.at_full.run({})):.{self.digits}f}".rstrip("0").rstrip(".")
        return f"{self.expr.tex(index)}={value}"

    def run(self, env):
        return self.expr.run(env)

