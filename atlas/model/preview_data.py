"""The preview run's values as data: sizes, shapes, what is missing, compact tensors, weight histograms.

What the pages draw from the run: the tiny model's sizes (per block where they differ), every captured
value's shape, the values a block lacks and why, each value as compact float16 (or integer) data with
its axes named, and a histogram of every tensor the tiny model holds.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

from atlas.model.block_kinds import kinds_of_blocks
from atlas.model.introspect import find_block_list, num_blocks
from atlas.model.preview import PreviewRun
from atlas.model.sizes import block_sizes, checkpoint_sizes, own_kv_heads
from atlas.model.vocabulary import LAYOUTS, layout_of, standard_value

MAX_AXIS = 64  # preview tensors keep at most this many entries per axis (evenly strided)


# --- shapes ----------------------------------------------------------------------------------------


def tiny_sizes(preview: PreviewRun) -> dict[str, int]:
    sizes = checkpoint_sizes(preview.config)
    batch, seq = preview.ids.shape
    sizes.update(batch=int(batch), seq=int(seq), query=int(seq), key=int(seq))
    return sizes


def tiny_block_sizes(preview: PreviewRun) -> dict[str, dict[str, int]]:
    """The sizes of the tiny model's blocks that differ between blocks: {block: {size: value}} (empty
    where every block is built alike)."""
    config = preview.config
    whole = checkpoint_sizes(config)
    varying = [k for k, v in whole.items() if v is None]
    found = {}
    for i in range(config.num_hidden_layers):
        own = block_sizes(config, i)
        if any(own[k] is not None for k in varying):
            found[str(i)] = {k: own[k] for k in varying if own[k] is not None}
    found = found if any(own != whole for own in (block_sizes(config, i) for i in range(config.num_hidden_layers))) else {}
    for block, kv in own_kv_heads(preview.model, config).items():  # an attention that builds its own count (MiMo-V2-Flash)
        found.setdefault(str(block), {})["num_kv_heads"] = kv
    for block, attended in attended_keys(preview).items():
        found.setdefault(block, {})["key"] = attended
    return found


def attended_keys(preview: PreviewRun) -> dict[str, int]:
    """Blocks that add compressed keys to their window (DeepSeek-V4): how many keys each attends on the
    prompt, the prompt's positions plus one key per closed window of compress_rates' size."""
    config = preview.config
    rates = getattr(config, "compress_rates", None)
    types = getattr(config, "layer_types", None) or []
    if not isinstance(rates, dict):
        return {}
    seq = int(preview.ids.shape[1])
    return {str(i): seq + seq // rates[t] for i, t in enumerate(types) if t in rates}


def captured_shapes(preview: PreviewRun) -> dict[str, dict[str, list]]:
    """Every captured value's shape on the eager run: {name: {block or "model": shape}}."""
    shapes: dict[str, dict[str, list]] = {}
    for (name, index), value in preview.eager.captured.items():
        shape = list(value.shape) if hasattr(value, "shape") else [len(value)]
        shapes.setdefault(name, {})["model" if index is None else str(index)] = shape
    return {name: dict(sorted(by.items(), key=lambda kv: (kv[0] != "model", int(kv[0]) if kv[0] != "model" else 0)))
            for name, by in sorted(shapes.items())}


def missing_on_the_run(preview: PreviewRun) -> dict[str, dict[str, str]]:
    """Values the tiny model's blocks lack, with the reason: {name: {block: reason}}."""
    missing: dict[str, dict[str, str]] = {}
    for index, placements in enumerate(preview.eager.resolution.blocks):
        for p in placements:
            if p.read is None:
                missing.setdefault(p.value.name, {})[str(index)] = p.missing
    return missing


def uncaptured(preview: PreviewRun) -> list[str]:
    """Values the resolver placed on the tiny model that the eager run did not capture (must be none)."""
    t = preview.eager
    gaps = []
    for index, placements in [(None, t.resolution.model)] + list(enumerate(t.resolution.blocks)):
        for p in placements:
            if p.read is not None and (p.value.name, index) not in t.captured:
                gaps.append(f"{p.value.name} at {'the model' if index is None else f'block {index}'} ({p.read.words()})")
    return gaps


# --- compact data ----------------------------------------------------------------------------------


def compact(tensor, integer: bool = False, max_axis: int = MAX_AXIS) -> dict[str, Any]:
    """A tensor as float16 values (or integers) in nested lists, long axes strided to ``max_axis`` entries."""
    import torch

    strides = []
    for axis, size in enumerate(tensor.shape):
        stride = math.ceil(size / max_axis)
        strides.append(stride)
        if stride > 1:
            tensor = tensor.index_select(axis, torch.arange(0, size, stride))
    if integer:
        data = tensor.to(torch.int64).tolist()
        return {"shape": list(tensor.shape), "dtype": "int64", "strides": strides, "data": data,
                "min": int(tensor.min()), "max": int(tensor.max())}
    half = tensor.detach().to(torch.float16)
    data = _rounded_table()[half.view(torch.int16).to(torch.int64) + 32768].tolist()
    if torch.isneginf(half).any():
        data = _masked_as_none(data)
    half = half.to(torch.float32)
    finite = half[torch.isfinite(half)]
    return {"shape": list(half.shape), "dtype": "float16", "strides": strides, "data": data,
            "min": float(f"{float(finite.min()):.4g}"), "max": float(f"{float(finite.max()):.4g}")}


@cache
def _rounded_table():
    """Every float16 value (indexed by its bits, offset to start at 0) rounded to 4 significant digits,
    as float16 holds about 3.3: a lookup for a whole tensor at once instead of formatting each entry."""
    import torch

    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(torch.float16).to(torch.float32)
    return torch.tensor([float(f"{v:.4g}") for v in every.tolist()], dtype=torch.float64)


def _masked_as_none(values):
    """-inf (an entry the mask hid, in masked scores) as None: JSON has no -inf."""
    if isinstance(values, list):
        return [_masked_as_none(v) for v in values]
    return None if values == float("-inf") else values


# Values drawn at every block of the run; every other captured value is kept at the first block of
# each kind of block the tiny model has (dense and mixture, sliding and global), which is enough to
# draw it on its page without making every value page carry every block.
EVERY_BLOCK = ("layer_output", "attention_probabilities", "mlp_output", "router_logits", "expert_weights", "expert_indices")

# The axis a value's drawing picks one slice of (a head, a routing slot): the grid shows the others.
PICKED_AXIS = ("num_heads", "num_kv_heads", "top_k")

HISTOGRAM_BINS = 40


def preview_tensors(preview: PreviewRun) -> dict[str, dict[str, Any]]:
    """Every value the eager run captured, compact, by key (``token_embeddings``, ``layers.1.mlp.routed_output``):
    the batch axis dropped (the run has one prompt), a head or routing-slot axis moved first."""
    t = preview.eager
    sizes = tiny_sizes(preview)
    firsts = set(_first_of_each_kind(preview))
    tensors = {}
    for (name, index), value in t.captured.items():
        if index is not None and name not in EVERY_BLOCK and index not in firsts:
            continue
        dims = list(LAYOUTS[layout_of(name, sizes)])
        if not hasattr(value, "shape"):  # input_size: the call's (batch, seq)
            import torch

            value, dims = torch.tensor(list(value)), ["batch, seq"]
        elif dims and dims[0] == "batch":
            value, dims = value[0], dims[1:]
        picked = next((d for d in PICKED_AXIS if d in dims[1:]), None)
        if picked is not None and len(dims) == 3:  # a grid of the other two, one slice at a time
            axis = dims.index(picked)
            value = value.movedim(axis, 0)
            dims = [picked] + dims[:axis] + dims[axis + 1:]
        host = standard_value(name).host
        key = name if index is None else (f"layers.{index}.{name}" if host == "layers[i]" else f"layers.{index}.{host.split('.')[-1]}.{name}")
        integer = not value.is_floating_point()
        # a value drawn at one block per kind keeps its feature axes shorter: a drawing, not a record
        short = index is not None and name not in EVERY_BLOCK
        max_axis = MAX_AXIS // 2 if short else MAX_AXIS
        if "residual_streams" in dims:  # several residual streams (DeepSeek-V4) share the entries one stream would keep
            max_axis = max(8, max_axis // max(1, sizes.get("residual_streams") or 1))
        tensors[key] = {**compact(value, integer=integer, max_axis=max_axis), "axes": dims}
    return dict(sorted(tensors.items(), key=lambda kv: _key_order(kv[0])))


def _key_order(key: str) -> tuple:
    """layers.10 after layers.9: numeric parts compare as numbers."""
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in key.split("."))


def _first_of_each_kind(preview: PreviewRun) -> list[int]:
    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    return [k.indices[0] for k in kinds_of_blocks(blocks, preview.config)]


def weight_histograms(preview: PreviewRun) -> dict[str, dict[str, Any]]:
    """Every parameter and persistent buffer of the tiny model, by name, as a histogram of all its
    values (exact counts in equal bins between its smallest and largest value)."""
    import torch

    model = preview.model
    persistent = {name for name, _ in model.named_buffers() if _is_persistent(model, name)}
    # tied tensors under every name they have (lm_head.weight as well as embed_tokens.weight)
    named = list(model.named_parameters(remove_duplicate=False)) + [(n, b) for n, b in model.named_buffers() if n in persistent]
    out = {}
    for name, tensor in named:
        values = tensor.detach().float().flatten()
        lo, hi = float(values.min()), float(values.max())
        counts = torch.histc(values, bins=HISTOGRAM_BINS, min=lo, max=hi if hi > lo else lo + 1).to(torch.int64).tolist()
        out[name] = {"shape": list(tensor.shape), "elements": int(values.numel()), "bins": counts,
                     "min": float(f"{lo:.4g}"), "max": float(f"{hi:.4g}"), "mean": float(f"{float(values.mean()):.4g}"),
                     "std": float(f"{float(values.std()) if values.numel() > 1 else 0.0:.4g}")}
    return dict(sorted(out.items(), key=lambda kv: _key_order(kv[0])))


def _is_persistent(model, name: str) -> bool:
    owner, _, leaf = name.rpartition(".")
    module = model.get_submodule(owner) if owner else model
    return leaf not in module._non_persistent_buffers_set
