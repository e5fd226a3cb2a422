"""Exact parameter accounting: how many parameters, and from what calculation, for every component.

The model's top-level rows (every module outside the block list, tied weights counted once), the
blocks by kind, each kind's tree of modules with its tensors' calculations, and the parameters one
token runs through (the routed experts it is not sent to left out).
"""

from __future__ import annotations

from typing import Any

from atlas.model.block_kinds import BlockKind
from atlas.model.introspect import count, module_node
from atlas.model.structure import is_weightless_norm
from atlas.numbers import grouped


def accounting_tree(module, path: str, name: str) -> dict[str, Any]:
    """A module's components with their exact counts; tensors carry the calculation that gives them."""
    return module_node(module, path, name)


def block_kind_accounting(blocks, kinds: list[BlockKind], block_path: str) -> list[dict[str, Any]]:
    rows = []
    for kind in kinds:
        block = blocks[kind.representative]
        tree = accounting_tree(block, f"{block_path}.{kind.representative}", str(kind.representative))
        per_instance = tree["parameters"] + tree["stored_buffers"]
        instances = len(kind.indices)
        shared = _shared_parameters(block, [blocks[i] for i in kind.indices[1:]])
        if shared:
            # tensors every block of the kind holds as the very same objects (Zamba2's shared blocks): counted once
            own = per_instance - shared
            total = own * instances + shared
            rows.append({
                "kind": kind.id, "label": kind.label, "indices": kind.indices, "per_instance": per_instance,
                "per_instance_parameters": tree["parameters"], "per_instance_stored_buffers": tree["stored_buffers"],
                "instances": instances, "shared_parameters": shared, "total": total,
                "calculation": f"{grouped(own)} × {instances} + {grouped(shared)} shared, once = {grouped(total)}",
                "tree": tree,
            })
            continue
        rows.append({
            "kind": kind.id,
            "label": kind.label,
            "indices": kind.indices,
            "per_instance": per_instance,
            "per_instance_parameters": tree["parameters"],
            "per_instance_stored_buffers": tree["stored_buffers"],
            "instances": instances,
            "total": per_instance * instances,
            "calculation": f"{grouped(per_instance)} × {instances} = {grouped(per_instance * instances)}",
            "tree": tree,
        })
    return rows


def _shared_parameters(block, others) -> int:
    """The parameters of ``block`` that each of ``others`` holds as the very same tensors (one tensor run at
    several depths), each counted once; 0 where the blocks share none."""
    if not others:
        return 0
    held = [{id(p) for _, p in other.named_parameters(remove_duplicate=False)} for other in others]
    mine = {id(p): p for _, p in block.named_parameters(remove_duplicate=False)}
    return sum(p.numel() for key, p in mine.items() if all(key in h for h in held))


def routed_expert_parameters(block) -> tuple[int, int]:
    """(parameters of the routed experts, how many experts) in a block; (0, 0) in a dense block."""
    for module in block.modules():
        if "Experts" in type(module).__name__:
            # num_routed_experts: the experts with weights where zero-computation experts are routed to as well (LongCat-Flash)
            n_experts = getattr(module, "num_experts", None) or getattr(module, "num_routed_experts", None) or len(list(module.children()))
            return count(module, "parameter"), n_experts
    return 0, 0


def active_parameters(total: int, blocks, top_k: int | None) -> int:
    """Parameters one token runs through: all of them, less the routed experts it is not sent to."""
    idle = 0
    for block in blocks:
        expert_params, n_experts = routed_expert_parameters(block)
        if n_experts and top_k:
            idle += expert_params * (n_experts - top_k) // n_experts
    return total - idle


def model_accounting(model, block_path: str, kinds_rows: list[dict[str, Any]], blocks=(), top_k: int | None = None) -> dict[str, Any]:
    """The model's top-level rows: every module outside the block list, and the blocks by kind."""
    rows = []
    owners: dict[int, str] = {}  # parameter id -> the row that counted it (tied weights count once)
    for path, module in _top_level_modules(model, block_path):
        n_buffers = count(module, "buffer")
        new = [p for p in module.parameters() if id(p) not in owners]
        tied = [p for p in module.parameters() if id(p) in owners]
        # a norm without tensors (OLMo's final LayerNorm) holds nothing, yet computes what the head reads: a row of its own
        if new or tied or n_buffers or is_weightless_norm(module):
            row = {"path": path, "class": type(module).__name__, "parameters": sum(p.numel() for p in new), "stored_buffers": n_buffers}
            if tied:
                # A module whose weight is another's (a tied output head): shown, counted where it was first seen.
                row["tied_parameters"] = sum(p.numel() for p in tied)
                row["tied_to"] = owners[id(tied[0])]
                if new:  # a head tied by its weight alone (CTRL's keeps a bias of its own): which tensors are the other's
                    row["tied_tensors"] = [name for name, p in module.named_parameters() if id(p) in owners]
            rows.append(row)
        owners.update((id(p), path) for p in new)
    parameters = count(model, "parameter")
    stored_buffers = count(model, "buffer")
    return {
        "rows": rows,
        "blocks": [{k: r[k] for k in ("kind", "label", "per_instance", "instances", "total", "calculation")} for r in kinds_rows],
        "parameters": parameters,
        "stored_buffers": stored_buffers,
        "total": parameters + stored_buffers,
        "active": active_parameters(parameters + stored_buffers, blocks, top_k),
    }


def outside_trees(model, block_path: str) -> dict[str, dict[str, Any]]:
    """The modules outside the block list (embeddings, final norm, head) as accounting trees, by path."""
    return {path: accounting_tree(module, path, path.split(".")[-1]) for path, module in _top_level_modules(model, block_path)}


def _top_level_modules(model, block_path: str):
    """Leaves of the tree cut at the block list: embed_tokens, norm, lm_head, ..."""

    def walk(module, path):
        for name, child in module.named_children():
            child_path = f"{path}.{name}" if path else name
            if child_path == block_path:
                continue
            if block_path.startswith(child_path + "."):
                yield from walk(child, child_path)
            else:
                yield child_path, child

    yield from walk(model, "")
