"""A block that weighs its stream per channel at each add (Doge's input_residual and post_attention_residual):
x' = w_1 ⊙ x + Δ_attn and y = w_2 ⊙ x' + Δ_ffn, with w_1 and w_2 two vectors as wide as the stream that the
block holds itself. The rest of the block is the sequential block's (atlas.proof.stack); which vector weighs which
add is measured on the preview run, whose vectors are seeded off 1. The structure is read in
atlas.model.roles.residual_weights.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from atlas.proof import expr as E
from atlas.proof.core import Part
from atlas.proof.steps import Chain, Step
from atlas.model.roles import block_roles


def weighted_block(part: Part, sequential: Callable[[], Chain]) -> Chain:
    """The sequential block (``sequential`` makes its chain) with each add's stream weighed by one of the block's own
    vectors (which: measured)."""
    a, b = block_roles(part.tiny).residual_weights
    return part.choose("residual_weights", {f"{a} at the attention's add, {b} at the MLP's": lambda: _weighted(part, sequential(), a, b),
                                             f"{b} at the attention's add, {a} at the MLP's": lambda: _weighted(part, sequential(), b, a)})


def _weighted(part: Part, chain: Chain, first: str, second: str) -> Chain:
    """The chain's two adds (stream + sublayer output, giving layer_mid and layer_output) with the stream weighed."""
    width = part.ctx.full_config.hidden_size
    weights = {"layer_mid": (E.Weight(first, "w_1", (width,)), f"(w_1: the block's {first}, one weight a channel)"),
               "layer_output": (E.Weight(second, "w_2", (width,)), f"(w_2: the block's {second})")}
    steps = []
    for step in chain.steps:
        add = step.expr
        if step.value in weights and isinstance(add, E.Let) and isinstance(add.expr, E.Bin) and add.expr.op == "+":
            w, words = weights.pop(step.value)
            step = Step(expr=E.Let(add.target, w * add.expr.a + add.expr.b, words), value=step.value, summary=step.summary)
        steps.append(step)
    if weights:
        raise ValueError(f"the block's chain has no add giving {', '.join(weights)}")
    part.note("residual_vectors", {"attention's add": first, "MLP's add": second},
              "the block's own two vectors as wide as the stream: the stream times each, plus the sublayer's output")
    return dataclasses.replace(chain, steps=steps)
