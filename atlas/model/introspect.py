"""The module tree of a meta-built model as plain data: nodes and counts, the block list, and the printout."""

from __future__ import annotations

import inspect
from typing import Any, Iterator

from atlas.numbers import index_spans, product_calculation


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
    from atlas.errors import AtlasError

    # (xLSTM keeps its blocks otherwise): one line naming the class, not an internal error
    raise AtlasError(f"transformers' {type(model).__name__}", None,
                     f"holds no ModuleList of {num_layers} modules, one per configured block, where the atlas "
                     "looks for a model's blocks; the atlas does not know how this class keeps them")


# --- the printout ----------------------------------------------------------------------------------


def printout(model) -> list[dict[str, Any]]:
    """What print(model) shows, as lines, with repeated blocks collapsed and the shapes of modules
    that print none (fused experts, routers) completed from their own tensors.

    Each line: {"depth", "text", "path"}; "path" is the module the line opens (a representative one for
    a collapsed run of identical blocks), so later stages can annotate it.
    """
    return _print_lines(model, "", "", 0)


def _head(module, name: str, repeat: tuple[str, int] | None) -> str:
    extra = module.extra_repr()
    if repeat:
        label, count = repeat
        label = f"({label}): {count} x " if count > 1 else f"({label}): "
    else:
        label = f"({name}): " if name else ""
    return f"{label}{type(module).__name__}({extra}"


def _print_lines(module, path: str, name: str, depth: int, repeat: tuple[str, int] | None = None) -> list[dict]:
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
        for indices, child in _alike(children):
            lines += _print_lines(child, f"{path}.{indices[0]}", str(indices[0]), depth + 1, (index_spans(indices, "-"), len(indices)))
    else:
        for child_name, child in children:
            child_path = f"{path}.{child_name}" if path else child_name
            lines += _print_lines(child, child_path, child_name, depth + 1)
    lines.append({"depth": depth, "text": ")", "path": path})
    return lines


def _alike(children) -> list[tuple[list[int], Any]]:
    """The children of a ModuleList grouped by what they print, each group once, in the order of its first
    member, as (indices, representative). print(model) folds only neighbours; a hybrid's alternating
    blocks (three linear-attention blocks, then a global one) are folded here too, so that every distinct
    block is printed once and the page stays readable."""
    groups: dict[str, tuple[list[int], Any]] = {}
    for name, child in children:
        groups.setdefault(repr(child), ([], child))[0].append(int(name))
    return list(groups.values())


