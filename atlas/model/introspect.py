"""The module tree of a meta-built model as plain data: nodes, block kinds, and the printout."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Iterator

from atlas.numbers import product_calculation


def own_tensors(module) -> Iterator[tuple[str, Any, str]]:
    """(name, tensor, role) of the tensors a module holds itself: parameters, then persistent buffers."""
    for name, p in module.named_parameters(recurse=False):
        yield name, p, "parameter"
    for name, b in module.named_buffers(recurse=False):
        if name not in module._non_persistent_buffers_set:
            yield name, b, "buffer"


def count(module, role: str) -> int:
    """Parameters (role 'parameter') or persistent buffers (role 'buffer') of a module and its children."""
    if role == "parameter":
        return sum(p.numel() for p in module.parameters())
    return sum(
        b.numel()
        for owner in module.modules()
        for name, b in owner.named_buffers(recurse=False)
        if name not in owner._non_persistent_buffers_set
    )


def constructor_call(module) -> str:
    """How the module is built: torch's own layers by their settings, transformers' by their signature."""
    cls = type(module)
    if cls.__module__.startswith("torch."):
        return f"{cls.__name__}({module.extra_repr()})"
    params = [
        p.name
        for p in inspect.signature(cls.__init__).parameters.values()
        if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    return f"{cls.__name__}({', '.join(params)})"


def module_node(module, path: str, name: str) -> dict[str, Any]:
    """One module and everything under it, with its tensors and exact counts."""
    return {
        "path": path,
        "name": name,
        "class": type(module).__name__,
        "constructor": constructor_call(module),
        "parameters": count(module, "parameter"),
        "stored_buffers": count(module, "buffer"),
        "tensors": [
            {
                "name": t_name,
                "role": role,
                "shape": list(t.shape),
                "elements": t.numel(),
                "calculation": product_calculation(list(t.shape)),
            }
            for t_name, t, role in own_tensors(module)
        ],
        "children": [
            module_node(child, f"{path}.{child_name}" if path else child_name, child_name)
            for child_name, child in module.named_children()
        ],
    }


# --- the block stack -------------------------------------------------------------------------------


def num_blocks(config) -> int:
    """How many decoder blocks the model stacks: ``num_hidden_layers``, except where the configuration
    class derives ``num_hidden_layers`` from ``num_layers`` (a property over it) and the two differ. That
    is a block holding several attention sublayers, each with its own cache slot (LongCat-Flash: two per
    block, num_hidden_layers = 2 × num_layers); the block list then has num_layers entries."""
    derived = isinstance(getattr(type(config), "num_hidden_layers", None), property)
    layers = getattr(config, "num_layers", None) if derived else None
    if isinstance(layers, int) and not isinstance(layers, bool) and layers > 0:
        return layers
    return config.num_hidden_layers


def find_block_list(model, num_layers: int) -> tuple[str, Any]:
    """The ModuleList that holds the decoder blocks: the one whose length is the configured layer count."""
    import torch

    for path, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == num_layers:
            return path, module
    raise LookupError(f"no ModuleList of {num_layers} blocks in {type(model).__name__}")


def _structure(block) -> tuple:
    return tuple(
        (path, type(m).__name__, tuple((n, tuple(t.shape), role) for n, t, role in own_tensors(m)))
        for path, m in block.named_modules()
    )


def _has_experts(block) -> bool:
    return any("Experts" in type(m).__name__ or "MoE" in type(m).__name__ for m in block.modules())


ATTENTION_KIND_WORDS = {"sliding_attention": "sliding-window", "full_attention": "global"}


@dataclass
class BlockKind:
    id: str
    label: str  # "MoE block", "dense block", "sliding-window block" ...
    indices: list[int]
    mixture: bool
    attention_type: str | None

    @property
    def representative(self) -> int:
        return self.indices[0]


def layer_types(config) -> list[str] | None:
    """The attention type of every block: config.layer_types where the config lists them; otherwise a
    sliding_window alone (Mistral, Phi-3) bounds every layer, and with neither the attention is global."""
    listed = getattr(config, "layer_types", None)
    if listed:
        return list(listed)
    if getattr(config, "sliding_window", None):
        return ["sliding_attention"] * config.num_hidden_layers
    return None


def block_kinds(blocks, layer_types: list[str] | None, without_rotary: list[int] | None = None) -> list[BlockKind]:
    """Blocks grouped by structure (and by attention type where the config gives one per block, and by
    whether the block applies its rotary angles where a per-block switch turns them off: NoPE blocks)."""
    groups: dict[tuple, list[int]] = {}
    unrotated = set(without_rotary or ())
    for i, block in enumerate(blocks):
        attention_type = layer_types[i] if layer_types else None
        groups.setdefault((_structure(block), attention_type, i in unrotated), []).append(i)
    kinds_of_mlp = {_has_experts(blocks[idx[0]]) for idx in groups.values()}
    kinds_of_attention = {key[1] for key in groups}
    from atlas.model.standard import block_roles

    kinds_of_positions = {key[2] for key in groups}
    kinds = []
    for (_, attention_type, no_positions), indices in groups.items():
        mixture = _has_experts(blocks[indices[0]])
        roles = block_roles(blocks[indices[0]])
        if any(block_roles(blocks[idx[0]]).sublayers == 1 or block_roles(blocks[idx[0]]).ssm for idx in groups.values()):
            # a hybrid with state-space mixers or one-mixer blocks: each kind is named by what its block runs
            if roles.attention and roles.ssm and not roles.linear_attention:  # both mixers side by side (Falcon-H1)
                label = f"attention and {_mixer_word(blocks[indices[0]], roles)} {'MoE ' if mixture and len(kinds_of_mlp) > 1 else ''}block"
            elif roles.sublayers == 1:
                label = f"{_mixer_word(blocks[indices[0]], roles) if roles.ssm else 'attention' if roles.attention else 'MoE' if mixture else 'MLP'} block"
            else:
                label = f"{_mixer_word(blocks[indices[0]], roles) if roles.ssm else 'attention'} {'MoE ' if mixture and len(kinds_of_mlp) > 1 else ''}block"
            kinds.append(BlockKind(label.replace(" ", "_").replace("-", "_"), label, indices, mixture, attention_type))
            continue
        words = []
        if len(kinds_of_positions) > 1:
            words.append("no-position" if no_positions else "rotary")
        if len(kinds_of_attention) > 1:
            words.append(ATTENTION_KIND_WORDS.get(attention_type, attention_type.replace("_", " ")))
        if len(kinds_of_mlp) > 1:
            words.append("MoE" if mixture else "dense")
        if mixture and _routes_by_id(blocks[indices[0]]) and any(
                key[1] == attention_type and not _routes_by_id(blocks[idx[0]]) for key, idx in groups.items()):
            words.append("hash-routed")  # the same attention, a mixture choosing by token id (DeepSeek-V4's first blocks)
        label = " ".join(words + ["block"]) if words else "transformer block"
        kinds.append(BlockKind(label.replace(" ", "_").replace("-", "_"), label, indices, mixture, attention_type))
    return sorted(kinds, key=lambda k: k.indices[0])


def _routes_by_id(block) -> bool:
    """A mixture whose router holds an integer table of one row per token id (hash routing)."""
    return any(not b.is_floating_point() and b.dim() == 2 for name, b in block.named_buffers() if ".gate." in f".{name}" or "router" in name)


def _mixer_word(block, roles) -> str:
    """A fixed-state mixer by what it holds: a selective scan (a decay of its own) or a short convolution alone."""
    from atlas.model.standard import is_recurrent_block, is_ssm

    if is_recurrent_block(getattr(block, roles.ssm)):  # a convolution and an RG-LRU (RecurrentGemma)
        return "recurrent"
    return "state-space" if is_ssm(getattr(block, roles.ssm)) else "short-convolution"
def kinds_of_blocks(blocks, config) -> list[BlockKind]:
    """The block kinds of a model built from ``config``: by structure, attention type and positions."""
    from atlas.model.features import blocks_without_rotary

    return block_kinds(blocks, layer_types(config), blocks_without_rotary(config))


def index_ranges(indices: list[int]) -> str:
    """[1, 2, 3, 7] -> '1–3, 7' (block numbers as they are in the module list, from 0)."""
    spans, start = [], indices[0]
    for prev, cur in zip(indices, indices[1:] + [None]):
        if cur != prev + 1:
            spans.append(f"{start}" if start == prev else f"{start}–{prev}")
            start = cur
    return ", ".join(spans)


# --- the printout ----------------------------------------------------------------------------------


def printout(model) -> list[dict[str, Any]]:
    """What print(model) shows, as lines, with repeated blocks collapsed and the shapes of modules
    that print none (fused experts, routers) completed from their own tensors.

    Each line: {"depth", "text", "path"}; "path" is the module the line opens (a representative one for
    a collapsed run of identical blocks), so later stages can annotate it.
    """
    return _print_lines(model, "", "", 0)


def _head(module, name: str, repeat: str | None) -> str:
    extra = module.extra_repr()
    label = f"({repeat}): {_count_prefix(repeat)}" if repeat else (f"({name}): " if name else "")
    return f"{label}{type(module).__name__}({extra}"


def _count_prefix(repeat: str) -> str:
    first, _, last = repeat.partition("-")
    return f"{int(last) - int(first) + 1} x " if last else ""


def _print_lines(module, path: str, name: str, depth: int, repeat: str | None = None) -> list[dict]:
    import torch

    head = _head(module, name, repeat)
    children = list(module.named_children())
    # A module that prints no settings of its own (fused experts, a router) gets its tensors listed.
    shown = []
    if not module.extra_repr():
        shown = [
            f"({t_name}): {'Parameter' if role == 'parameter' else 'Buffer'}{list(t.shape)}"
            for t_name, t, role in own_tensors(module)
        ]
    if not children and not shown:
        return [{"depth": depth, "text": head + ")", "path": path}]
    lines = [{"depth": depth, "text": head, "path": path}]
    lines += [{"depth": depth + 1, "text": text, "path": path} for text in shown]
    if isinstance(module, torch.nn.ModuleList):
        for first, last, child in _runs(children):
            label = f"{first}-{last}" if last != first else str(first)
            lines += _print_lines(child, f"{path}.{first}", str(first), depth + 1, label)
    else:
        for child_name, child in children:
            child_path = f"{path}.{child_name}" if path else child_name
            lines += _print_lines(child, child_path, child_name, depth + 1)
    lines.append({"depth": depth, "text": ")", "path": path})
    return lines


def _runs(children):
    """Consecutive identical children of a ModuleList, as (first, last, representative)."""
    runs = []
    for name, child in children:
        index = int(name)
        if runs and repr(runs[-1][2]) == repr(child):
            runs[-1][1] = index
        else:
            runs.append([index, index, child])
    return runs
