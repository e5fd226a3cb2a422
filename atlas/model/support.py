"""The support table (facts["support"]): the standard values by host, at a checkpoint's sizes.

For each value: its layout and shape, where it is read (the resolver's ``Read`` in words), under what
condition, and the blocks that have it (the others say why not); beside it the classes that host the
values and, per module path, the values it hosts (for the printout's annotations).
"""

from __future__ import annotations

from typing import Any, Mapping

from atlas.model.resolver import Placement, Resolution
from atlas.model.roles import join_path
from atlas.model.vocabulary import EXTENSION_HOSTS, HOSTS, LAYOUTS, VOCABULARY, StandardValue, layout_of, resolve_dims


def _generic_path(path: str | None, block_list: str, index: int) -> str | None:
    """model.layers.3.mlp -> model.layers.{i}.mlp (the block's own number made symbolic)."""
    prefix = f"{block_list}.{index}"
    if path is None or not (path == prefix or path.startswith(prefix + ".")):
        return path
    return f"{block_list}.{{i}}" + path[len(prefix):]


def _block_words(indices: list[int], kinds: list[dict[str, Any]]) -> str | None:
    """'MoE blocks only' where the blocks present are exactly some kinds (None where all blocks)."""
    every = sorted(i for k in kinds for i in k["indices"])
    if indices == every:
        return None
    labels = [k["label"] for k in kinds if set(k["indices"]) <= set(indices)]
    covered = sorted(i for k in kinds if k["label"] in labels for i in k["indices"])
    if labels and covered == indices:
        return " and ".join(f"{label}s" for label in labels) + " only"
    return "some blocks only"


def _present_anywhere(resolution: Resolution, value: StandardValue) -> bool:
    if value.host == "model":
        return resolution.at(value.name).read is not None
    return any(resolution.at(value.name, i).read is not None for i in range(len(resolution.roles.blocks)))


def _nowhere(first: Placement, present: list[int] | None) -> str:
    """Where a value is read on a checkpoint that has it nowhere: the words say so and why."""
    where = "the model has no place for it" if present is None else "no block has it"
    return f"not read on this checkpoint: {where} ({first.missing})"


def support_facts(
    resolution: Resolution,
    sizes: Mapping[str, Any],
    kinds: list[dict[str, Any]],
    conditions: Mapping[str, str],
    classes: Mapping[str, str],
) -> dict[str, Any]:
    """facts["support"]: the standard values by host, at the checkpoint's sizes, with where each is read,
    its condition, and the blocks that have it (the others say why not)."""
    roles = resolution.roles
    hosts = []
    for host in HOSTS:
        values = []
        path = ""
        if host == "layers[i]":
            path = f"{roles.block_list}.{{i}}"
        elif host != "model":
            role = {"layers[i].self_attn": "attention", "layers[i].ssm": "ssm"}.get(host, "mlp")
            child = next((getattr(b, role) for b in roles.blocks if getattr(b, role)), None)
            path = f"{roles.block_list}.{{i}}" + (f".{child}" if child else "")  # an inline MLP: the block
        for value in VOCABULARY:
            if value.host != host:
                continue
            if value.extension and not _present_anywhere(resolution, value):
                continue
            if host == "model":
                p = resolution.at(value.name)
                present, missing, first = None, ({"model": p.missing} if p.read is None else {}), p
            else:
                placed = [resolution.at(value.name, i) for i in range(len(roles.blocks))]
                present = [i for i, p in enumerate(placed) if p.read is not None]
                missing = {str(i): p.missing for i, p in enumerate(placed) if p.read is None}
                first = placed[present[0]] if present else placed[0]
            words = [conditions[value.name]] if value.name in conditions else []
            if host == "model" and first.read is None:
                words.append(first.missing)
            if present is not None:
                scope = _block_words(present, kinds) if present else "no block"
                if scope:
                    words.append(scope)
            layout = layout_of(value.name, sizes)
            values.append({
                "name": value.name,
                "layout": layout,
                "dims": list(LAYOUTS[layout]),
                "shape": resolve_dims(layout, sizes),
                "description": value.description,
                "read_at": first.read.words() if first.read else _nowhere(first, present),
                # how it is read, as data: "input" or "output" (of ``module``), element; "inside", ...
                "read": {"kind": first.read.kind, "element": first.read.element} if first.read else None,
                "module": _generic_path(first.module, roles.block_list, present[0]) if (first.read and present) else first.module,
                "condition": "; ".join(words) or None,
                "blocks": present,
                "missing": missing,
            })
        if host in EXTENSION_HOSTS and not values:
            continue
        hosts.append({"host": host, "path": path, "class": classes.get(host, ""), "values": values})
    return {"hosts": hosts, "layouts": {name: list(dims) for name, dims in LAYOUTS.items()}, "sizes": dict(sizes)}


def host_classes(model, resolution: Resolution) -> dict[str, str]:
    """Each host's class, e.g. "DeepseekV3MLP / DeepseekV3MoE" where block kinds differ."""
    roles = resolution.roles
    found: dict[str, list[str]] = {"model": [type(model).__name__]}
    for i, b in enumerate(roles.blocks):
        block = model.get_submodule(f"{roles.block_list}.{i}")
        for host, child in (("layers[i]", ""), ("layers[i].self_attn", b.attention), ("layers[i].mlp", b.mlp), ("layers[i].ssm", b.ssm)):
            if child is None:
                continue
            name = type(block.get_submodule(child) if child else block).__name__
            if name not in found.setdefault(host, []):
                found[host].append(name)
    return {host: " / ".join(names) for host, names in found.items()}


def hosted_values(resolution: Resolution) -> dict[str, list[str]]:
    """Module path -> the standard values it hosts (the model, each block, its attention and its MLP)."""
    roles = resolution.roles
    hosted: dict[str, list[str]] = {"": [p.value.name for p in resolution.model if p.read is not None]}
    for i, placements in enumerate(resolution.blocks):
        block = f"{roles.block_list}.{i}"
        b = roles.blocks[i]
        paths = {"layers[i]": block, "layers[i].self_attn": join_path(block, b.attention), "layers[i].mlp": join_path(block, b.mlp),
                 "layers[i].ssm": join_path(block, b.ssm)}
        for p in placements:
            if p.read is not None:
                hosted.setdefault(paths[p.value.host], []).append(p.value.name)
    return hosted


def position_words(found: dict[str, Any]) -> str:
    """What the queries and keys the attention receives carry of the positions, from the model's profile
    (``atlas.model.architecture.profile``): the rotation where blocks rotate, else where positions enter."""
    if found.get("rotary") and found.get("no_positions"):
        return ", rotary applied in the blocks that rotate (the others are given no positions)"
    if found.get("rotary"):
        return ", rotary applied"
    if found.get("alibi"):
        return "; ALiBi adds the positions to the scores, not to these"
    if found.get("learned_positions"):
        return "; no positions are applied here: the learned position table's rows were added to the stream before block 0"
    return "; no positions are applied: the model gives none"


def describe_values(support: dict[str, Any], found: dict[str, Any]) -> None:
    """The descriptions of support() that depend on the model, from its profile: what the queries and keys
    carry of the positions, and what is added to the token embeddings before block 0."""
    for host in support["hosts"]:
        for v in host["values"]:
            if v["name"] in ("attention_queries", "attention_keys"):
                v["description"] += position_words(found)
            if v["name"] == "token_embeddings" and found.get("learned_positions"):
                v["description"] += "; the learned position table's rows are added to them before block 0"
