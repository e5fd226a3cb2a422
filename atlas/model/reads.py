"""How a standard value is read: the ``Read`` that captures it, and a family's override written as text.

A ``Read`` is the mechanism relative to the value's host module (a module's input or output, the
arguments or results of the attention function, the input of the eager attention's softmax, the
per-slot outputs of a registered experts function, the model's call arguments, or a derivation). The
words on the page ("the child module norm's output") are generated from it, so they cannot disagree
with what ``atlas.model.trace`` does. Plain data: no torch here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Read:
    """The mechanism that captures one value, relative to its host module.

    kind: "output" | "input" (a module's, ``module`` relative to the host, "" for the host itself;
    ``element`` picks from a tuple; ``split_heads`` splits the last axis by head) ·
    "attention_args" | "attention_result" (the attention function's arguments or results, by element) ·
    "attention_softmax_input" (the input of the softmax inside the eager attention function) ·
    "expert_slots" (per routing slot, from the registered experts function) · "gate_sigmoids" (the outputs
    of the sigmoids a module's forward calls, by element: an RG-LRU's input gate, then its recurrence gate) · "delta_rule_args" |
    "delta_rule_result" (the arguments or results of a linear-attention mixer's delta-rule function, by
    element: query, key, value, decay, beta; output, final state) · "call_argument" (a named
    argument of the model's call) · "derived" (computed from other values: ``module`` says how).
    """

    kind: str
    module: str = ""
    element: int | None = None
    split_heads: bool = False
    flatten_tokens: bool = False  # the module sees batch × seq as one axis: unflatten it
    sum_experts: bool = False  # the module returns one row per expert and token, expert by expert: summed over the experts
    from_block: bool = False  # ``module`` is relative to the block, not the host (a post-norm beside the attention)
    # expert_slots of an experts class that runs its own loop, never dispatched to transformers' experts
    # functions (LongCat-Flash): each slot from that forward, every other slot's weight set to zero
    own_loop: bool = False
    # a module the forward calls twice (nanochat's norm, before block 0 and after the last): its first call's
    # value, not the last one's
    first_call: bool = False
    last_call: bool = False  # said only: a module's later calls overwrite its earlier ones anyway

    def words(self) -> str:
        where = "the module's own" if not self.module else f"the child module {self.module}'s"
        if self.from_block:
            where = f"the block's child module {self.module}'s" if self.module else "the block's own"
        if self.kind in ("output", "input"):
            text = f"{where} {self.kind}"
            if self.element is not None:
                text += f", element {self.element}"
            if self.split_heads:
                text += ", split by head"
            if self.sum_experts:
                text += ", summed over the experts (it holds one row per expert and token)"
            if self.flatten_tokens:
                text += ", rows unflattened to batch × seq"
            if self.first_call:
                text += " at its first call (the forward calls it again after the last block)"
            if self.last_call:
                text += " at its last call (the forward calls it before block 0 too)"
            return text
        if self.kind == "attention_args":
            return f"inside the forward: the arguments of the attention function, element {self.element}"
        if self.kind == "attention_result":
            return f"inside the forward: the output of the attention function, element {self.element}"
        if self.kind == "attention_softmax_input":
            return "inside the attention function: the input of its softmax"
        if self.kind == "delta_rule_args":
            return f"inside the forward: the arguments of the delta-rule function, element {self.element} ({DELTA_RULE_ARGS[self.element]})"
        if self.kind == "delta_rule_result":
            return f"inside the forward: the output of the delta-rule function, element {self.element} ({DELTA_RULE_RESULTS[self.element]})"
        if self.kind == "gate_sigmoids":
            return (f"inside {where} forward: the output of its sigmoid number {self.element + 1} "
                    f"({GATE_SIGMOIDS[self.element]})")
        if self.kind == "indexer_scores":
            return f"inside {where} forward: the scores its top-k ranks, read where it adds the causal mask to them"
        if self.kind == "expert_slots" and self.own_loop:
            return f"inside {where} forward: one routing slot at a time, through the class's own forward with every other slot's weight set to zero"
        if self.kind == "expert_slots":
            return f"inside {where} forward: one routing slot at a time, through transformers' batched experts code"
        if self.kind == "call_argument":
            return f"the model's call argument {self.module}"
        if self.kind == "derived":
            return f"derived: {self.module}"
        raise ValueError(self.kind)


# The delta-rule function a linear-attention mixer calls: its leading arguments and its results, in order.
DELTA_RULE_ARGS = ("query", "key", "value", "g", "beta")
DELTA_RULE_RESULTS = ("output", "final state")
# The sigmoids an RG-LRU's forward calls, in order: the input gate, then the recurrence gate.
GATE_SIGMOIDS = ("the input gate", "the recurrence gate")
RGLRU_GATES = ("rglru_input_gate", "rglru_recurrence_gate")


OVERRIDE_FORMAT = re.compile(r"^(?P<module>[A-Za-z0-9_.]*?)\.?(?P<kind>input|output)(?:\[(?P<element>\d+)\])?$")


BLOCK_PREFIX = "layers[i]."


def parse_override(text: str) -> Read:
    """A family's override, written as "<module path relative to the host>.<input|output>[element]".

    "shared_experts.output" is the shared expert's output; "output[0]" is the host's own first output;
    a path that starts with "layers[i]." is relative to the block instead ("layers[i].post_attention_layernorm.output"
    for an attention whose contribution is post-normed beside it).
    """
    from_block = text.startswith(BLOCK_PREFIX)
    match = OVERRIDE_FORMAT.match(text.removeprefix(BLOCK_PREFIX))
    if not match:
        raise ValueError(f"{text!r} is not '[layers[i].]<child module>.input|output[element]'")
    element = match.group("element")
    return Read(match.group("kind"), match.group("module"), int(element) if element is not None else None, from_block=from_block)
