"""Expressions that are both the equation a page prints and the arithmetic the proof runs.

A step written as an expression has no TeX of its own: ``Let(out, expr)`` prints ``out = expr`` from
the same tree of nodes whose ``run`` computes the step's result, so an edit to the notation is an
edit to the arithmetic (flip a sign and both change; the proof then fails). Each operator and each
named function (RMSNorm, softplus, SiLU, rot, softmax with sinks, top-k ...) is defined once here,
with its torch arithmetic beside its notation.

Sizes print the checkpoint's value and compute with the tiny run's (``Size(full, tiny)``); symbols
read the chain's environment by name (``Sym``) or the module's weights (``Weight``), and say which
names they read (``reads``), which the summary check follows (atlas.proof.summaries).
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable

from atlas.proof import tex as T

# while a summary prints a step: the names it folds, each to the expression (and folds) that computed it
_FOLD: ContextVar[dict] = ContextVar("fold", default={})

# how tightly a node binds, for parentheses: a sum inside a product is bracketed, a call never is
SUM, PRODUCT, POWER, ATOM = 1, 2, 3, 4


def _wrap(node: "Expr", above: int, index: str | None = None) -> str:
    text = node.tex(index)
    return f"({text})" if node.prec < above else text


class Expr:
    """A node: ``tex`` its notation, ``run(env)`` its value, ``reads()`` the environment names it reads."""

    prec = ATOM

    def tex(self, index: str | None = None) -> str:  # ``index``: the symbols subscripted (x_j inside a sum)
        raise NotImplementedError

    def run(self, env) -> Any:
        raise NotImplementedError

    def children(self) -> tuple["Expr", ...]:
        return ()

    def reads(self) -> set[str]:
        return set().union(*(c.reads() for c in self.children())) if self.children() else set()

    def nodes(self):
        yield self
        for c in self.children():
            yield from c.nodes()

    # --- operators: each one a node class below, its TeX and its arithmetic together ---------------
    def __add__(self, other): return Bin("+", self, lift(other))
    def __radd__(self, other): return Bin("+", lift(other), self)
    def __sub__(self, other): return Bin("-", self, lift(other))
    def __rsub__(self, other): return Bin("-", lift(other), self)
    def __mul__(self, other): return Bin("*", self, lift(other))
    def __rmul__(self, other): return Bin("*", lift(other), self)
    def __truediv__(self, other): return Bin("/", self, lift(other))
    def __rtruediv__(self, other): return Bin("/", lift(other), self)
    def __pow__(self, other): return Pow(self, lift(other))
    def __neg__(self): return Neg(self)
    def __matmul__(self, weight): return MatMul(self, weight)


def lift(value) -> Expr:
    return value if isinstance(value, Expr) else Size(value, value)


@dataclass(eq=False)
class Sym(Expr):
    """A name in the chain's environment (an input or an earlier step's result) and its TeX."""

    name: str
    symbol: str
    indexed: bool = True  # subscripted inside a sum over j (x_j); False for a number per row (ρ, μ)

    @property
    def prec(self):
        folded = _FOLD.get().get(self.name)
        return folded[0].prec if folded else ATOM

    def tex(self, index=None):
        folded = _FOLD.get().get(self.name)
        if folded:  # a summary folds the step that computed this name: print its expression
            expr, inner = folded
            token = _FOLD.set(inner)
            try:
                return expr.tex(index)
            finally:
                _FOLD.reset(token)
        return f"{self.symbol}_{{{index}}}" if index and self.indexed else self.symbol

    def run(self, env):
        return env[self.name]

    def reads(self):
        return {self.name}


@dataclass(eq=False)
class Weight(Expr):
    """One of the module's weights (relative to the module), its symbol and its checkpoint shape (for the
    step's "where W ∈ ℝ^{…}" clause)."""

    name: str
    symbol: str
    shape: tuple[int, ...] | None = None
    scalar: bool = False  # one number (a block's stored scale): printed s\,y, not s ⊙ y

    def tex(self, index=None):
        return self.symbol

    def run(self, env):
        return env.w(self.name)

    def where(self) -> str | None:
        if not self.shape:
            return None
        return rf"{self.symbol}\in\mathbb{{R}}^{{{T.times(*self.shape)}}}"


@dataclass(eq=False)
class Size(Expr):
    """A number: printed at the checkpoint's value, computed at the tiny run's (the same where both agree)."""

    full: Any
    tiny: Any
    symbol: str | None = None  # print this instead of the number (ε, d)
    stated: bool = False  # the symbol printed, and "symbol = its value" after the equation

    def tex(self, index=None):
        return self.symbol if self.symbol else T.num(self.full)

    def where(self) -> str | None:
        return f"{self.symbol}={T.num(self.full)}" if self.stated else None

    def run(self, env):
        return self.tiny

    @property
    def prec(self):  # a negative number is bracketed where it is multiplied
        return SUM if isinstance(self.full, (int, float)) and self.full < 0 and not self.symbol else ATOM


_BIN_PREC = {"+": SUM, "-": SUM, "*": PRODUCT, "/": PRODUCT}


@dataclass(eq=False)
class Bin(Expr):
    """a + b, a − b, a ⊙ b (a number times a tensor prints as c x), a / b."""

    op: str
    a: Expr
    b: Expr

    @property
    def prec(self):
        return _BIN_PREC[self.op]

    @property
    def scalar(self) -> bool:  # numbers combined are a number: (1-ρ) g prints (1-ρ)\,g
        return all(isinstance(n, Size) or getattr(n, "scalar", False) for n in (self.a, self.b))

    def children(self):
        return (self.a, self.b)

    def tex(self, index=None):
        if self.op in "+-":
            return f"{self.a.tex(index)}{self.op}{_wrap(self.b, SUM + 1, index)}"
        if self.op == "/":
            return rf"{_wrap(self.a, PRODUCT, index)}/{_wrap(self.b, PRODUCT + 1, index)}"
        scalar = isinstance(self.a, Size) or getattr(self.a, "scalar", False)
        right = _wrap(self.b, PRODUCT, index)
        # a number times a tensor is c\,x; a number before another number is c\cdot n (10,000·1,000^{…})
        joint = (r"\cdot " if right[:1].isdigit() else r"\,") if scalar else r"\odot "
        return f"{_wrap(self.a, PRODUCT, index)}{joint}{right}"

    def run(self, env):
        a, b = self.a.run(env), self.b.run(env)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[self.op]()


@dataclass(eq=False)
class Pow(Expr):
    base: Expr
    exponent: Expr
    prec = POWER

    def children(self):
        return (self.base, self.exponent)

    def tex(self, index=None):
        return f"{_wrap(self.base, ATOM, index)}^{{{self.exponent.tex()}}}"

    def run(self, env):
        return self.base.run(env) ** self.exponent.run(env)


@dataclass(eq=False)
class Neg(Expr):
    a: Expr
    prec = SUM

    def children(self):
        return (self.a,)

    def tex(self, index=None):
        return "-" + _wrap(self.a, PRODUCT, index)

    def run(self, env):
        return -self.a.run(env)


@dataclass(eq=False)
class MatMul(Expr):
    """x W^⊤ for a weight stored out × in (torch's Linear), x W for one stored in × out (GPT-2's Conv1D)."""

    x: Expr
    weight: Weight
    stored_in_out: bool = False
    prec = PRODUCT

    def children(self):
        return (self.x, self.weight)

    def tex(self, index=None):
        w = self.weight.symbol if self.stored_in_out else rf"{self.weight.symbol}^{{\top}}"
        return f"{_wrap(self.x, POWER, index)}{w}"  # (a ⊙ u) W: a product before a matrix is bracketed

    def run(self, env):
        w = self.weight.run(env)
        return self.x.run(env) @ (w if self.stored_in_out else w.T)


# --- named functions: each defined once, its notation and its arithmetic --------------------------------


@dataclass(eq=False)
class Function:
    """A named function. ``arithmetic`` computes it from its arguments' values (and the call's settings);
    ``notation`` prints it from its arguments' TeX; ``definition``, where given, is the same function
    written with this module's operators, printed where a page defines it (an activation's own page)."""

    name: str
    arithmetic: Callable[..., Any]
    notation: Callable[..., str] | None = None
    definition: Callable[..., Expr] | None = None
    # where the notation sets an argument beside other symbols (a subscript after it): an argument binding
    # less tightly (a summary folds a product into it) is bracketed; 0 where the notation encloses it
    bracket: int = 0
    # the definition printed after the equation that uses the function (‖G‖_p = …), not only on its own page
    stated: bool = False

    def __call__(self, *args, **settings) -> "Call":
        return Call(self, tuple(lift(a) for a in args), settings)


@dataclass(eq=False)
class Call(Expr):
    function: Function
    args: tuple[Expr, ...]
    settings: dict = field(default_factory=dict)

    @property
    def prec(self):
        return POWER if self.function.name == "exp" else ATOM

    def children(self):
        return self.args

    def tex(self, index=None):
        if self.function.notation:
            return self.function.notation(*(_wrap(a, self.function.bracket, index) for a in self.args), **self.settings)
        return rf"\operatorname{{{self.function.name}}}({','.join(a.tex(index) for a in self.args)})"

    def where(self) -> str | None:
        return self.defined() if self.function.stated else None

    def defined(self) -> str:
        """``f(x) = its definition``: the function's name applied, then the operators that compute it."""
        return f"{self.tex()}={self.function.definition(*self.args, **self.settings).tex()}"

    def run(self, env):
        if self.function.arithmetic is None:  # the function is its definition
            return self.function.definition(*self.args, **self.settings).run(env)
        return self.function.arithmetic(*(a.run(env) for a in self.args), **self.settings)


def _torch():
    import torch

    return torch


def _mean_tex(a: str, width: Any = None) -> str:
    return (rf"\tfrac{{1}}{{{T.num(width)}}}\textstyle\sum_{{j}}{a}" if width else rf"\operatorname{{mean}}_j\,{a}")


@dataclass(eq=False)
class Mean(Expr):
    """The mean over the last axis (kept as an axis of one): printed as 1/d Σ_j with its terms indexed by j."""

    a: Expr
    width: Any = None  # the checkpoint's width, printed; None: "mean_j"
    total: bool = False  # the sum, not the mean
    # the Σ reaches to the right: bracketed where it is raised to a power, nowhere else
    prec = POWER + 0.5

    def children(self):
        return (self.a,)

    def tex(self, index=None):
        inner = self.a.tex("j")
        if self.total:
            return rf"\textstyle\sum_{{j}}{inner}"
        return _mean_tex(inner, self.width)

    def run(self, env):
        v = self.a.run(env)
        return v.sum(-1, keepdim=True) if self.total else v.mean(-1, keepdim=True)


exp = Function("exp", lambda a: _torch().exp(a), lambda a: f"e^{{{a}}}")
sqrt = Function("sqrt", lambda a: a.sqrt() if hasattr(a, "sqrt") else math.sqrt(a), lambda a: rf"\sqrt{{{a}}}")
tanh = Function("tanh", lambda a: a.tanh(), lambda a: rf"\tanh({a})")
erf = Function("erf", lambda a: _torch().erf(a))
sigmoid = Function("σ", lambda a: a.sigmoid(), lambda a: rf"\sigma({a})")
log = Function("log", lambda a: a.log() if hasattr(a, "log") else math.log(a), lambda a: rf"\log({a})")
cos = Function("cos", lambda a: a.cos(), lambda a: rf"\cos({a})")
sin = Function("sin", lambda a: a.sin(), lambda a: rf"\sin({a})")
relu = Function("ReLU", None, definition=lambda a: Function("max", lambda a: a.clamp(min=0), lambda a: rf"\max({a},0)")(a))
softplus = Function("softplus", lambda a: _torch().nn.functional.softplus(a), definition=None)
clamp_max = Function("min", lambda a, bound: a.clamp(max=bound), lambda a, bound: rf"\min({a},{bound})")
clamp = Function("clamp", lambda a, bound: a.clamp(-bound, bound), lambda a, bound: rf"\operatorname{{clamp}}({a},-{bound},{bound})")

# the activations, each by its definition (the arithmetic is the definition's)
silu = Function("SiLU", None, definition=lambda g: g / (1 + exp(-g)))
gelu = Function("GELU", None, definition=lambda g: Size(0.5, 0.5, r"\tfrac12") * g * (1 + erf(g / sqrt(2))))
gelu_tanh = Function("GELU_tanh", None, lambda g: rf"\operatorname{{GELU}}_{{\tanh}}({g})", definition=lambda g: Size(0.5, 0.5, r"\tfrac12") * g * (
    1 + tanh(Size(math.sqrt(2 / math.pi), math.sqrt(2 / math.pi), r"\sqrt{2/\pi}") * (g + Size(0.044715, 0.044715, "0.044715") * g ** 3))))
relu2 = Function("ReLU^2", None, lambda g: rf"\operatorname{{ReLU}}^2({g})", definition=lambda g: relu(g) ** 2)
sqrtsoftplus = Function("sqrtsoftplus", lambda g: _torch().nn.functional.softplus(g).sqrt(), lambda g: rf"\sqrt{{\operatorname{{softplus}}({g})}}", definition=lambda g: sqrt(log(1 + exp(g))))


def rms_norm_of(x: Expr, eps: Size, width: Any = None) -> Expr:
    """x / √(mean_j x_j² + ε): RMSNorm without its gain, written with the operators."""
    return x / sqrt(Mean(x ** 2, width) + eps)


def _rms(x, eps):
    return x / ((x ** 2).mean(-1, keepdim=True) + eps).sqrt()


rmsnorm = Function("RMSNorm", lambda x, eps=None: _rms(x, eps.tiny),
                   lambda x, eps=None: rf"\operatorname{{RMSNorm}}({x})")
layernorm = Function("LayerNorm", lambda x, eps=None: _rms(x - x.mean(-1, keepdim=True), eps.tiny),
                     lambda x, eps=None: rf"\operatorname{{LayerNorm}}({x})")


def _rot(x, cos, sin):
    half = x.shape[-1] // 2
    turned = _torch().cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


rot = Function("rot", _rot, lambda x, cos, sin: rf"\operatorname{{rot}}({x})")


def _softmax(s, sinks=None):
    torch = _torch()
    if sinks is None:
        return torch.softmax(s, dim=-1)
    sink = sinks.reshape(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)  # one logit per head: (batch, heads, queries, 1)
    return torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]


softmax = Function("softmax", lambda s: _softmax(s), lambda s: rf"\operatorname{{softmax}}({s})")
softmax_with_sinks = Function("softmax", _softmax, lambda s, sinks: rf"\operatorname{{softmax}}(\left[{s},\ {sinks}\right])_{{:,\,1..T}}")
# A sink applied after the softmax (Granite SWA): each query's share left to the real keys, the
# sigmoid of the log-sum-exp of its scores less the head's sink logit, as (batch, queries, heads, 1) to
# scale the heads' outputs; it equals the share softmax([S, sink]) gives the keys, written the module's way
sink_share = Function(
    "sink share",
    lambda s, sinks: (_torch().logsumexp(s, dim=-1) - sinks.reshape(1, -1, 1)).sigmoid().transpose(1, 2)[..., None],
    lambda s, sinks: rf"\operatorname{{sigmoid}}\big(\log\textstyle\sum_{{s}} e^{{{s}}}-{sinks}\big)")
topk = Function("top-k", lambda s, k: _torch().topk(s, int(k), dim=-1).indices, lambda s, k: rf"\operatorname{{top}}_{{{k}}}({s})")
# a table's rows at the given indices (an embedding's lookup)
rows = Function("rows", lambda table, ids: table[ids], lambda table, ids: f"{table}_{{{ids},:}}")
# a tensor laid out as another (rows, one per token, back to the input's shape): printed as the tensor itself
shaped_like = Function("shaped like", lambda y, like: y.reshape(like.shape), lambda y, like: y)
# products of two tensors of the chain: the scores (queries times keys, per head) and the heads' mix
scores = Function("scores", lambda q, k: q @ k.transpose(-1, -2), lambda q, k: rf"{q}{k}^{{\top}}")
mix = Function("mix", lambda p, v: (p @ v).transpose(1, 2), lambda p, v: f"{p}{v}")  # (batch, heads, T, d) -> (batch, T, heads, d)


@dataclass(eq=False)
class Mask(Expr):
    """An additive mask (0 where a query may read a key, −∞ elsewhere) as wide as the scores it is added
    to: printed as its symbol, with its rule as the step's "where" clause; ``build(T)`` makes it."""

    symbol: str
    rule: str  # TeX: which key a query reads, at the checkpoint's sizes
    build: Callable[[int], Any]
    like: Expr  # the scores it is added to (their last axis gives its width)

    def children(self):
        return (self.like,)

    def reads(self):
        return set()  # only the scores' width

    def tex(self, index=None):
        return self.symbol

    def where(self):
        return self.rule

    def run(self, env):
        s = self.like.run(env)
        return self.build(s.shape[-1]).to(s.dtype)


@dataclass(eq=False)
class Child(Expr):
    """A child component applied to names of this chain: its own chain runs (``run``, made by
    atlas.proof.library.sub), printed by ``notation`` from its arguments' TeX, which the caller derives
    from what the child's chain measured (its norm, its bias), so the page names what runs."""

    fn: Callable[[Any], Any]  # library.sub's function: reads the names in fn.child_inputs
    args: tuple[Sym, ...]
    notation: Callable[..., str]
    # where the notation sets an argument beside other symbols (x W^⊤): an argument binding less tightly
    # (a summary folds a product into it) is bracketed; 0 where the notation encloses it (Norm(x))
    bracket: int = 0
    binds: int = ATOM  # how tightly its notation binds: a product (x W^⊤) or a sum (x W^⊤ + b) is bracketed where it is subscripted

    @property
    def prec(self):
        return self.binds

    def children(self):
        return self.args

    def tex(self, index=None):
        return self.notation(*(_wrap(a, self.bracket, index) for a in self.args))

    def run(self, env):
        return self.fn(env)

    def reads(self):
        return set(self.fn.child_inputs.values())


# --- steps from expressions -------------------------------------------------------------------------


def _printed_nodes(expr: Expr, fold: dict):
    """The nodes a step prints: its own, and those of the expressions it folds in place of names."""
    for node in expr.nodes():
        yield node
        if isinstance(node, Sym) and node.name in fold:
            inner, deeper = fold[node.name]
            yield from _printed_nodes(inner, deeper)


@dataclass(eq=False)
class Let:
    """``out = expr`` (or ``out ← expr`` where the step updates a name it reads): a step's whole TeX and
    its function. ``note`` is words after the equation; every weight with a shape adds its "∈ ℝ^{…}"."""

    target: Sym | tuple  # the name defined and its TeX; a tuple of them where the expression gives several
    expr: Expr
    note: str = ""  # plain words, printed as \text{...}
    maps: tuple | None = None  # (width in, width out) of a map, printed "n → m" at the checkpoint's sizes
    define: bool = False  # print the named function's definition too: "a = SiLU(g) = g/(1+e^{-g})"

    def tex(self, fold: dict[str, "Expr"] | None = None) -> str:
        """The step's TeX; ``fold`` prints the names it maps as the expressions that computed them (a
        summary that folds a step into its use)."""
        # an update (←) where the step reads the name it writes under the same symbol; a new symbol (ĉ = Norm(c)) is "="
        several = isinstance(self.target, tuple)
        updates = not several and self.target.name not in (fold or {}) and any(
            isinstance(n, Sym) and n.name == self.target.name and n.symbol == self.target.symbol for n in self.expr.nodes())
        token = _FOLD.set(fold or {})
        try:
            body = self.expr.defined() if self.define and isinstance(self.expr, Call) else self.expr.tex()
        finally:
            _FOLD.reset(token)
        # a space ends the command only where a letter follows it (\leftarrow x), not before a backslash or a digit
        arrow = (r"\leftarrow " if body[:1].isalpha() else r"\leftarrow") if updates else "="
        symbol = "(" + r",\,".join(t.symbol for t in self.target) + ")" if several else self.target.symbol
        text = f"{symbol}{arrow}{body}"
        # an index's range after the quantities defined over it (g_j = …, ρ_j = …, j = 0..n)
        nodes = sorted(_printed_nodes(self.expr, fold or {}), key=lambda n: getattr(n, "ranges", False))
        wheres = list(dict.fromkeys(w for n in nodes if hasattr(n, "where") for w in [n.where()] if w))
        if wheres:
            text += r",\quad " + r",\ ".join(wheres)
        if self.maps:
            text += T.maps(*self.maps)
        if self.note:  # words: TeX's special characters written as text
            text += r"\quad\text{" + self.note.replace("_", r"\_") + "}"
        return text

    def run(self, env):
        return self.expr.run(env)

    def reads(self) -> set[str]:
        return self.expr.reads()

    def nodes(self):
        return self.expr.nodes()

    @property
    def outs(self) -> str:
        return tuple(t.name for t in self.target) if isinstance(self.target, tuple) else self.target.name


@dataclass(eq=False)
class Lets:
    """Several names defined in one step, runs each and gives a tuple. Where ``each`` (built by ``likewise``:
    one function applied to each name, so "likewise" is true by construction) it prints the first
    ``out ← f(out, …)`` and "likewise" the others; otherwise every equation in full. ``tail`` follows them
    (a function's definition, a range, words)."""

    lets: tuple[Let, ...]
    tail: str = ""  # TeX after the equations
    each: bool = True  # one function for all ("likewise"); False: different functions, each printed in full

    def tex(self, fold: dict | None = None) -> str:
        if not self.each:
            return r",\ ".join(let.tex(fold) for let in self.lets) + self.tail
        rest = r",\ ".join(let.target.symbol for let in self.lets[1:])
        return self.lets[0].tex(fold) + (rf",\ \text{{likewise }}{rest}" if rest else "") + self.tail

    def run(self, env):
        return tuple(let.run(env) for let in self.lets)

    def reads(self) -> set[str]:
        return set().union(*(let.reads() for let in self.lets))

    def nodes(self):
        for let in self.lets:
            yield from let.nodes()

    @property
    def outs(self) -> tuple[str, ...]:
        return tuple(let.target.name for let in self.lets)


def likewise(function: Function, targets: list[Sym], *args, tail: str = "") -> Lets:
    """``function`` applied to each of ``targets`` (with the same further ``args``), each updating its name."""
    return Lets(tuple(Let(t, function(t, *args)) for t in targets), tail)
