"""Executable equations: each step is TeX for the page and a function over named tensors for the proof.

A ``Chain`` is the list of steps of one component. Its TeX is written at the checkpoint's sizes; its
functions run at the preview run's tiny sizes on the tiny model's own weights and the inputs the
module received on the run. A step reads only the chain's inputs, the module's weights (by name,
relative to the module) and earlier steps' results, and computes with plain tensor arithmetic: it
never calls the module, a submodule or a transformers function. Where it needs a transformers
helper's result (the rotary cos and sin), that result is an input the chain is given, named on the
page as such.

A step may stand for a whole child component (``Step.sub``): its function runs the child's own
chain on the child's weights, so a block's proof runs every operation of the block, and the page
links to the child's page for its steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

Fn = Callable[["Env"], Any]


@dataclass
class Step:
    tex: str = ""  # the step at the checkpoint's sizes (printed from ``expr`` where the step has one)
    out: str | tuple[str, ...] | None = None  # the name(s) it defines in the environment (None: a heading)
    fn: Fn | None = None
    value: str | tuple | None = None  # standard value(s) the result must equal where the run captured them
    summary: bool = False  # shown in the component's summary as well as in all steps
    sub: str | None = None  # the page id of the child component whose own chain this step runs
    compare: str = "allclose"  # "allclose" | "expert_slots" (slots compared by expert, in any order)
    # an atlas.proof.expr.Let: the step's TeX and its function both come from it, so neither can be
    # edited without the other; ``tex`` and ``fn`` must then be left unset
    expr: Any = None
    reads: frozenset = frozenset()  # the environment names its function read on the run (run_chain records them)

    def __post_init__(self):
        if self.expr is not None:
            if self.tex or self.fn is not None:
                raise ValueError("a step built from an expression takes its TeX and function from it, not beside it")
            run = self.expr.run

            def fn(env):
                return run(env)

            child = next((n.fn for n in self.expr.nodes() if getattr(getattr(n, "fn", None), "child_name", None)), None)
            if child is not None:  # the step runs a child's chain (or the stack of blocks): the page links to it, its feeds are known
                fn.child_name, fn.child_inputs = child.child_name, child.child_inputs
                if getattr(child, "child_id", None):
                    fn.child_id = child.child_id
            self.tex, self.fn = self.expr.tex(), fn
            self.out = self.out or self.expr.outs
        # a step made by atlas.proof.library.sub runs a child's chain: the page links to that child
        self.sub = self.sub or getattr(self.fn, "child_id", None)

    @property
    def heading(self) -> bool:
        return self.fn is None

    @property
    def expression_built(self) -> bool:
        """Whether the step's TeX and function are one expression (the page prints what ran)."""
        return self.expr is not None

    @property
    def outs(self) -> tuple[str, ...]:
        return self.out if isinstance(self.out, tuple) else (self.out,)


@dataclass
class Input:
    """A tensor the chain reads from the module's call: its symbol, the call's argument, what it is."""

    name: str  # the environment name
    symbol: str  # TeX
    argument: str  # "hidden_states", "position_embeddings", ...: the call's argument it is read from
    what: str  # words for the page
    given: bool = False  # a transformers helper's result the chain takes as given (rotary cos and sin)


@dataclass
class Chain:
    steps: list[Step]
    inputs: list[Input]
    output: str | tuple[str, ...]  # the environment name(s) compared with the module's output (its elements)
    output_element: int | None = None  # the element of a tuple output the result is
    output_values: tuple[str, ...] = ()  # standard names of a tuple output's elements, where they are ones
    # Facts about what the module does that the chain was built from, each with how it is known:
    # {"norm": {"value": "rms", "how": "measured on the preview run"}, ...}
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)


class Env:
    """The names a chain's steps read: its inputs, earlier results, and the module's weights."""

    def __init__(self, weights: Callable[[str], Any], values: dict[str, Any] | None = None):
        self._weights = weights
        self.values: dict[str, Any] = dict(values or {})
        self.read: set[str] | None = None  # while a step runs: the names it reads (run_chain sets it)

    def __getitem__(self, name: str):
        if self.read is not None:
            self.read.add(name)
        return self.values[name]

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def w(self, name: str):
        """The module's weight ``name`` (relative to the module, e.g. "q_proj.weight"), in float64."""
        return self._weights(name)

    def has_w(self, name: str) -> bool:
        try:
            self._weights(name)
        except KeyError:
            return False
        return True

    def child(self, prefix: str, values: dict[str, Any]) -> "Env":
        return Env(lambda name: self._weights(f"{prefix}.{name}"), values)


def run_chain(chain: Chain, env: Env, trail: list | None = None) -> Any:
    """Every step in order; the chain's output. ``trail`` collects (step, result) for comparisons."""
    for step in chain.steps:
        if step.fn is None:
            continue
        env.read = set()
        try:
            result = step.fn(env)
        finally:
            # what the step read, over every run (a step's reads do not depend on the values)
            step.reads, env.read = step.reads | frozenset(env.read), None
        if isinstance(step.out, tuple):  # a step that defines several names at once
            env.values.update(zip(step.out, result))
        else:
            env.values[step.out] = result
        if trail is not None:
            trail.append((step, result))
    if isinstance(chain.output, tuple):
        return tuple(env.values[name] for name in chain.output)
    return env.values[chain.output]
