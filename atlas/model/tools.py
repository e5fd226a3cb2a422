"""The field's own tools: how each standard value is reached in nnsight, nnterp and TransformerLens.

An access is plain data, a list of steps, so that the text on the page and the code that checks it
(``atlas.model.tool_runs``) are the same thing:

    ["attr", "layers"]          .layers                 ["index", "i"]     [i] (the block's number)
    ["index", 0]                [0]                     ["key", "x"]       ["x"]
    ["call", "unflatten", [..]] .unflatten(...)         (arguments may name a size: "batch", "num_heads")

nnsight's accesses are derived from the resolver's own ``Read`` of each value (the module path, its
``.input`` or ``.output``, the element), and from what the module was seen to return on the run (a
tuple or a tensor), never typed per family. nnterp and TransformerLens have their own names for the
values they standardize; the tables below are theirs (their API), the same for every family, and
whether a name reaches the value on a family is what the check on the run says. Plain data: none of
the libraries is imported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from atlas.model.resolver import Placement

LIBRARIES = ("nnsight", "nnterp", "transformer_lens")
TITLES = {"nnsight": "nnsight", "nnterp": "nnterp", "transformer_lens": "TransformerLens"}

# The operation nnsight's ``.source`` names for the call of transformers' attention function inside an
# attention's forward (the local variable every transformers attention calls it through, numbered by call).
ATTENTION_CALL = "attention_interface_0"

# nnterp's standardized accessors (StandardizedTransformer), by standard value: what its own API calls them.
NNTERP: dict[str, list[list[Any]]] = {
    "input_ids": [["attr", "input_ids"]],
    "attention_mask": [["attr", "attention_mask"]],
    "input_size": [["attr", "input_size"]],
    "token_embeddings": [["attr", "token_embeddings"]],
    "final_norm_output": [["attr", "ln_final"], ["attr", "output"]],
    "lm_head_output": [["attr", "lm_head"], ["attr", "output"]],
    "logits": [["attr", "logits"]],
    "next_token_probs": [["attr", "next_token_probs"]],
    "layer_input": [["attr", "layers_input"], ["index", "i"]],
    "layer_output": [["attr", "layers_output"], ["index", "i"]],
    "attention_output": [["attr", "attentions_output"], ["index", "i"]],
    "attention_probabilities": [["attr", "attention_probabilities"], ["index", "i"]],
    "mlp_input": [["attr", "mlps_input"], ["index", "i"]],
    "mlp_output": [["attr", "mlps_output"], ["index", "i"]],
}

# TransformerBridge's hook names (TransformerLens 4), by standard value, with the steps that bring the
# hook's tensor to the atlas's layout: its per-head tensors are (batch, seq, heads, d), the atlas's
# queries, keys and values (batch, heads, seq, d).
HEADS_SECOND = [["call", "transpose", [1, 2]]]
TRANSFORMER_LENS: dict[str, tuple[str, list[list[Any]]]] = {
    "token_embeddings": ("hook_embed", []),
    "position_embeddings": ("hook_pos_embed", []),
    "final_norm_output": ("ln_final.hook_out", []),
    "lm_head_output": ("unembed.hook_out", []),
    "layer_input": ("blocks.{i}.hook_resid_pre", []),
    "attention_norm_output": ("blocks.{i}.ln1.hook_out", []),
    "layer_mid": ("blocks.{i}.hook_resid_mid", []),
    "mlp_norm_output": ("blocks.{i}.ln2.hook_out", []),
    "mlp_input": ("blocks.{i}.mlp.hook_in", []),
    "layer_output": ("blocks.{i}.hook_resid_post", []),
    "attention_queries": ("blocks.{i}.attn.hook_rot_q", HEADS_SECOND),
    "attention_keys": ("blocks.{i}.attn.hook_rot_k", HEADS_SECOND),
    "attention_values": ("blocks.{i}.attn.hook_v", HEADS_SECOND),
    "attention_scores": ("blocks.{i}.attn.hook_attn_scores", []),
    "attention_probabilities": ("blocks.{i}.attn.hook_pattern", []),
    "attention_premix": ("blocks.{i}.attn.hook_z", []),
    "attention_output": ("blocks.{i}.hook_attn_out", []),
    "mlp_neurons": ("blocks.{i}.mlp.hook_post", []),
    "mlp_output": ("blocks.{i}.hook_mlp_out", []),
}


@dataclass
class Access:
    """One library's way to one value at one block (or on the model): the steps, and why there is none."""

    steps: list[list[Any]] | None
    why: str | None = None
    hook: str | None = None  # TransformerLens: the hook's name ("blocks.{i}.hook_resid_pre")
    needs: dict[str, Any] = field(default_factory=dict)  # sizes the steps name, for the check
    # when, in the forward, the module the value is read at handed it over (its input: when it was
    # called; its output: when it returned), as the run counted those moments: one trace can read
    # every access in that order. None: read in a trace of its own
    when: int | None = None


@dataclass(frozen=True)
class Seen:
    """What a module was seen to do on the run, for its nnsight access: how it returns and how it was called."""

    returns: str  # "tensor" | "tuple" | "output:<first field>" (a ModelOutput, such as the model's own)
    positional: int  # how many arguments it was called with by position
    parameters: tuple[str, ...]  # its forward's parameter names, in order
    # per output element (one for a tensor) and per argument (by position, or by name): whether the tensor
    # holds the tokens as rows (its first axis batch × seq), as a router's or an experts' do
    flat_outputs: tuple[bool, ...] = ()
    flat_arguments: tuple[tuple[str, bool], ...] = ()
    # output elements the caller changed in place after the module returned (Falcon adds the attention's
    # output into the MLP's): read later, they hold the sum, so the access copies them when it reads them
    changed_outputs: tuple[int, ...] = ()
    called_at: int = 0  # the moments, counted over the forward, its first call began and returned
    returned_at: int = 0
    calls: int = 1  # how many times the forward called it (nanochat's norm: before block 0 and after the last)


def path_steps(path: str, block_list: str, index: int | None) -> list[list[Any]]:
    """model.layers.3.mlp -> .model.layers[i].mlp: attributes, a number as an index, the block's own number as i."""
    steps: list[list[Any]] = []
    block = f"{block_list}.{index}" if index is not None else None
    parts = path.split(".") if path else []
    for n, part in enumerate(parts):
        if block is not None and ".".join(parts[: n + 1]) == block:
            steps.append(["index", "i"])
        elif part.isdigit():
            steps.append(["index", int(part)])
        else:
            steps.append(["attr", part])
    return steps


def nnsight_access(placement: Placement, block_list: str, index: int | None, seen: dict[str, Seen]) -> Access:
    """The value's nnsight access, from the resolver's Read of it and what its module did on the run."""
    read = placement.read
    if read is None:
        return Access(None, placement.missing)
    needs: dict[str, Any] = {}
    if read.kind in ("output", "input", "call_argument"):
        path = "" if read.kind == "call_argument" else placement.module
        steps = path_steps(path, block_list, index)
        own = seen.get(path)
        if own is None:
            return Access(None, "its module was not called on the run")
        if read.sum_experts:
            return Access(None, "the module returns one row per expert and token; the atlas sums them over the experts")
        if own.calls > 1 and not read.first_call:
            return Access(None, f"the forward calls this module {own.calls} times and .{read.kind} is its first call's; the value is its last call's")
        if read.kind == "call_argument":
            position = own.parameters.index(read.module) if read.module in own.parameters else 0
            steps += _argument(own, position)
            flat = False
        elif read.kind == "input":
            steps += _argument(own, read.element or 0)
            flat = _flat_argument(own, read.element or 0)
        else:
            steps.append(["attr", "output"])
            element = read.element or 0
            if read.element is not None and own.returns == "tuple":
                steps.append(["index", read.element])
            elif read.element is not None and own.returns.startswith("output:"):
                steps.append(["attr", own.returns.partition(":")[2]])
            else:
                element = 0
            if element in own.changed_outputs:
                steps.append(["call", "clone", []])
            flat = element < len(own.flat_outputs) and own.flat_outputs[element]
        if read.flatten_tokens and flat:
            steps.append(["call", "unflatten", [0, ["batch", "seq"]]])
        if read.split_heads:
            steps.append(["call", "unflatten", [-1, ["num_heads", -1]]])
            needs["heads_of"] = placement.module.rpartition(".")[0]
        return Access(steps, needs=needs, when=own.returned_at if read.kind == "output" else own.called_at)
    if read.kind in ("attention_args", "attention_result"):
        steps = path_steps(placement.module, block_list, index) + [["attr", "source"], ["attr", ATTENTION_CALL]]
        if read.kind == "attention_args":
            return Access(steps + [["attr", "inputs"], ["index", 0], ["index", read.element]])
        return Access(steps + [["attr", "output"], ["index", read.element]])
    return Access(None, NOT_A_CALL.get(read.kind, "the atlas derives it from other values: no module computes it as such"))


NOT_A_CALL = {
    "attention_softmax_input": "it lives inside the attention function, below the calls nnsight's .source reaches",
    "expert_slots": "the experts' forward adds the routing slots up inside one call: no module returns one slot",
    "gate_sigmoids": "it is an unnamed intermediate of the mixer's forward",
    "delta_rule_args": "it is read inside the delta-rule function the mixer calls",
    "delta_rule_result": "it is read inside the delta-rule function the mixer calls",
    "indexer_scores": "it is an intermediate inside the indexer's forward",
}


def _argument(own: Seen, position: int) -> list[list[Any]]:
    """The steps to a module's call argument: .input for the first, else by position or by name, as it was called."""
    if position == 0 and own.positional > 0:
        return [["attr", "input"]]
    if position < own.positional:
        return [["attr", "inputs"], ["index", 0], ["index", position]]
    name = own.parameters[position] if position < len(own.parameters) else f"argument {position}"
    return [["attr", "inputs"], ["index", 1], ["key", name]]


def _flat_argument(own: Seen, position: int) -> bool:
    key = str(position) if position < own.positional else (own.parameters[position] if position < len(own.parameters) else "")
    return dict(own.flat_arguments).get(key, False)


# Values both libraries read at the sublayer module's own output: where the atlas reads the value
# elsewhere (after a norm beside the sublayer, or at the last projection of a sublayer that adds the
# stream itself), their name for it is another tensor, and is not offered.
SUBLAYER_OUTPUTS = ("attention_output", "mlp_output")


def _sublayer_elsewhere(name: str, placement: Placement | None, library: str) -> str | None:
    """Why a library's sublayer-output name is not this family's value, from the atlas's own read of it."""
    if name not in SUBLAYER_OUTPUTS or placement is None or placement.read is None:
        return None
    read = placement.read
    if read.kind == "output" and not read.module and not read.from_block:
        return None
    return (f"{TITLES[library]}'s name for it is the sublayer module's own output; this family's {name} "
            f"is {read.words()}")


def nnterp_access(name: str, placement: Placement | None = None, when: int | None = None) -> Access:
    """nnterp's accessor for the value; ``when`` is the moment the atlas reads it (nnterp's accessors read
    the same module inputs and outputs), so that one trace can read them all in order."""
    steps = NNTERP.get(name)
    if not steps:
        return Access(None, "nnterp has no standardized accessor for it")
    elsewhere = _sublayer_elsewhere(name, placement, "nnterp")
    return Access(None, elsewhere) if elsewhere else Access(list(steps), when=when)


def transformer_lens_access(name: str, placement: Placement | None = None) -> Access:
    found = TRANSFORMER_LENS.get(name)
    if not found:
        return Access(None, "TransformerBridge has no hook named for it")
    elsewhere = _sublayer_elsewhere(name, placement, "transformer_lens")
    if elsewhere:
        return Access(None, elsewhere)
    hook, steps = found
    return Access(list(steps), hook=hook)


# --- words -----------------------------------------------------------------------------------------


def _argument_text(value: Any) -> str:
    if isinstance(value, list):
        return "(" + ", ".join(_argument_text(v) for v in value) + ")"
    return str(value)


def steps_text(steps: list[list[Any]], root: str = "model") -> str:
    """The steps as Python: [["attr", "layers"], ["index", "i"]] -> model.layers[i]."""
    text = root
    for kind, *rest in steps:
        if kind == "attr":
            text += f".{rest[0]}"
        elif kind == "index":
            text += f"[{rest[0]}]"
        elif kind == "key":
            text += f'["{rest[0]}"]'
        elif kind == "call":
            text += f".{rest[0]}(" + ", ".join(_argument_text(a) for a in rest[1]) + ")"
    return text


def access_text(library: str, access: Access) -> str:
    """An access as the code a reader writes, generic in the block's number i (TransformerLens: a key of the
    cache run_with_cache returns, an f-string where it names the block)."""
    if library == "transformer_lens":
        key = f'f"{access.hook}"' if "{i}" in access.hook else f'"{access.hook}"'
        return steps_text(access.steps, f"cache[{key}]")
    return steps_text(access.steps)
