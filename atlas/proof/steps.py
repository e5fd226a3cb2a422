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
    tex: str  # the step at the checkpoint's sizes
    out: str | tuple[str, ...] | None = None  # the name(s) it defines in the environment (None: a heading)
    fn: Fn | None = None
    value: str | tuple | None = None  # standard value(s) the result must equal where the run captured them
    summary: bool = False  # shown in the component's summary as well as in all steps
    sub: str | None = None  # the page id of the child component whose own chain this step runs
    compare: str = "allclose"  # "allclose" | "expert_slots" (slots compared by expert, in any order)

    def __post_init__(self):
        # a step made by atlas.proof.library.sub runs a child's chain: the page links to that child
        self.sub = self.sub or getattr(self.fn, "child_id", None)

    @property
    def heading(self) -> bool:
        return self.fn is None


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

    def __getitem__(self, name: str):
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
        result = step.fn(env)
        if isinstance(step.out, tuple):  # a step that defines several names at once
            env.values.update(zip(step.out, result))
        else:
            env.values[step.out] = result
        if trail is not None:
            trail.append((step, result))
    if isinstance(chain.output, tuple):
        return tuple(env.values[name] for name in chain.output)
    return env.values[chain.output]
