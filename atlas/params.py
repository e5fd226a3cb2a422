"""Exact parameter accounting, and the checkpoint layout predicted from config.json.

Accounting answers "how many parameters, and from what calculation" for every component; the layout
answers "which tensors, with which dtypes and shapes, do the released safetensors files hold". The
two meet at the checkpoint check: the predicted files must equal the pinned header totals.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from atlas.errors import AtlasError
from atlas.family import StoredTensor
from atlas.introspect import BlockKind, count, module_node
from atlas.numbers import grouped

# Bytes per element of each safetensors dtype the atlas may predict or read.
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}

# config.json's torch_dtype / dtype -> the safetensors dtype the unquantized weights are stored in.
TORCH_TO_SAFETENSORS = {"bfloat16": "BF16", "float16": "F16", "float32": "F32", None: "F32"}


# --- accounting ------------------------------------------------------------------------------------


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


def routed_expert_parameters(block) -> tuple[int, int]:
    """(parameters of the routed experts, how many experts) in a block; (0, 0) in a dense block."""
    for module in block.modules():
        if "Experts" in type(module).__name__:
            n_experts = getattr(module, "num_experts", None) or len(list(module.children()))
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
        if new or tied or n_buffers:
            row = {"path": path, "class": type(module).__name__, "parameters": sum(p.numel() for p in new), "stored_buffers": n_buffers}
            if tied:
                # A module whose weight is another's (a tied output head): shown, counted where it was first seen.
                row["tied_parameters"] = sum(p.numel() for p in tied)
                row["tied_to"] = owners[id(tied[0])]
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


# --- the predicted checkpoint layout ---------------------------------------------------------------


@dataclass(frozen=True)
class StoredRules:
    """What checkpoint.json says about how the released files store the model, beyond its config.

    weight_dtype: the dtype of the unquantized weights where config.json names none (or names another);
    tied_stored: tied tensors the files nevertheless write out under their own name (a tied head the
    export saved twice); prefix_removed: a module prefix the files' names lack (weights saved from the
    base model, GPT-2's ``transformer.``).
    """

    weight_dtype: str | None = None
    tied_stored: tuple[str, ...] = ()
    prefix_removed: str = ""
    source: str = "checkpoint.json"  # the file the rules come from, for error messages


@dataclass
class LayoutPredictor:
    """Predicts the tensors of a checkpoint's files from its config: names as stored, dtypes, shapes."""

    raw_config: Mapping[str, Any]
    build: Callable[[Mapping[str, Any]], Any]  # config changes -> a meta model
    rules: StoredRules = StoredRules()

    @property
    def weight_dtype(self) -> str:
        if self.rules.weight_dtype:
            return self.rules.weight_dtype
        dtype = self.raw_config.get("torch_dtype", self.raw_config.get("dtype"))
        return TORCH_TO_SAFETENSORS[dtype]

    def __call__(self, **config_changes: Any) -> list[StoredTensor]:
        return predicted_tensors(
            self.build(config_changes), self.raw_config.get("quantization_config"), self.weight_dtype, self.rules
        )

    def tensors_of(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """What the files store for each of these model tensors (tensor_summary), by the same rules."""
        return tensor_summary(self.build({}), keys, self.raw_config.get("quantization_config"), self.weight_dtype, self.rules)


def _unique_state(model, rules: StoredRules) -> tuple[dict[str, Any], dict[str, str]]:
    """The model's tensors as the files store them once: (name -> tensor, tied name -> the name kept)."""
    # keep_vars: the state's tensors are the model's own, so tied ones are one object under two names.
    state = model.state_dict(keep_vars=True)
    # Tied weights are stored once: keep the first name of each shared tensor (unless the files say otherwise).
    first: dict[int, str] = {}
    unique, tied = {}, {}
    for key, tensor in state.items():
        if id(tensor) not in first or key in rules.tied_stored:
            first.setdefault(id(tensor), key)
            unique[key] = tensor.detach()
        else:
            tied[key] = first[id(tensor)]
    for key in rules.tied_stored:
        if key not in state:
            raise AtlasError(rules.source, "tied_stored", f"{key!r} is no tensor of {type(model).__name__}")
    return unique, tied


def _file_tensors(model, unique: dict[str, Any], quantization: Mapping[str, Any] | None, weight_dtype: str,
                  rules: StoredRules) -> list[tuple[StoredTensor, Any]]:
    """The stored tensors of these model tensors (names as stored, dtypes, shapes), each with the
    quantizer that made it (None where none did)."""
    from transformers.core_model_loading import revert_weight_conversion

    buffers = {
        f"{path}.{name}" if path else name
        for path, owner in model.named_modules()
        for name, _ in owner.named_buffers(recurse=False)
        if name not in owner._non_persistent_buffers_set
    }
    stored = revert_weight_conversion(model, unique)
    modules = dict(model.named_modules())
    quantized = _quantizer(quantization)
    tensors = []
    for key, tensor in stored.items():
        shape = tuple(tensor.shape)
        if key in buffers:
            tensors.append((StoredTensor(key, _safetensors_dtype(tensor.dtype), shape, "buffer"), None))
            continue
        owner = modules.get(_owner_path(key, modules))
        if quantized and quantized.applies(owner, key, shape):
            tensors += [(t, quantized) for t in quantized.tensors(key, shape)]
        else:
            tensors.append((StoredTensor(key, weight_dtype, shape, "parameter"), None))
    if rules.prefix_removed:
        tensors = [(dataclasses.replace(t, name=t.name.removeprefix(rules.prefix_removed)), q) for t, q in tensors]
    return tensors


def predicted_tensors(
    model, quantization: Mapping[str, Any] | None, weight_dtype: str, rules: StoredRules = StoredRules()
) -> list[StoredTensor]:
    """The tensors save_pretrained would write for this model, under the released quantization."""
    unique, _ = _unique_state(model, rules)
    tensors = [t for t, _ in _file_tensors(model, unique, quantization, weight_dtype, dataclasses.replace(rules, prefix_removed=""))]
    if rules.prefix_removed:
        if not any(t.name.startswith(rules.prefix_removed) for t in tensors):
            raise AtlasError(rules.source, "prefix_removed", f"no tensor name starts with {rules.prefix_removed!r}")
        tensors = [dataclasses.replace(t, name=t.name.removeprefix(rules.prefix_removed)) for t in tensors]
    return tensors


def tensor_summary(model, keys: list[str], quantization: Mapping[str, Any] | None, weight_dtype: str,
                   rules: StoredRules = StoredRules()) -> dict[str, dict[str, Any]]:
    """For each model tensor (by its name in the model), what the files store for it: ``stored``, the
    stored tensors grouped by name pattern (one per expert: ``experts.{0…383}.gate_proj.weight`` ×384),
    each with dtype, shape, bytes, and for a quantization scale the tensor it scales and the block one
    scale covers; ``tied_to``, where the files hold a tied tensor once under another name."""
    unique, tied = _unique_state(model, rules)
    out = {}
    for key in keys:
        if key not in unique:
            kept = tied.get(key)
            out[key] = {"stored": [], "tied_to": kept.removeprefix(rules.prefix_removed) if kept else None}
            continue
        made = _file_tensors(model, {key: unique[key]}, quantization, weight_dtype, rules)
        out[key] = {"stored": _grouped(made), "tied_to": None}
    return out


def _grouped(made: list[tuple[StoredTensor, Any]]) -> list[dict[str, Any]]:
    """Stored tensors that differ only by an index (one per expert) as one entry with a name pattern."""
    import re

    groups: dict[tuple, list[tuple[StoredTensor, Any]]] = {}
    for t, q in made:
        parts = tuple("#" if p.isdigit() else p for p in t.name.split("."))
        groups.setdefault((parts, t.dtype, t.shape, t.role), []).append((t, q))
    entries = []
    for (parts, dtype, shape, role), members in groups.items():
        names = [t.name.split(".") for t, _ in members]
        shown = []
        for i, part in enumerate(parts):
            seen = sorted({int(n[i]) for n in names}) if part == "#" else None
            if seen is None or len(seen) == 1:
                shown.append(names[0][i])
            elif seen == list(range(seen[0], seen[-1] + 1)):
                shown.append(f"{{{seen[0]}…{seen[-1]}}}")
            else:
                shown.append("{" + ",".join(map(str, seen)) + "}")
        t, q = members[0]
        entry = {"name": ".".join(shown), "count": len(members), "dtype": dtype, "shape": list(shape), "role": role,
                 "elements": t.elements, "bytes": t.elements * DTYPE_BYTES[dtype], "total_bytes": len(members) * t.elements * DTYPE_BYTES[dtype],
                 "values_per_element": t.values_per_element}
        if q is not None and role == "scale":
            entry["scales"] = re.sub(r"(_scale_inv|_scales)$", "", entry["name"]) + ("_blocks" if entry["name"].endswith("_scales") else "")
            entry["block"] = list(q.scale_block)
        entries.append(entry)
    return entries


def _owner_path(key: str, modules: Mapping[str, Any]) -> str:
    """The deepest module whose path prefixes the stored name (experts.E.gate_proj.weight -> experts)."""
    parts = key.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:cut])
        if candidate in modules:
            return candidate
    return ""


def _safetensors_dtype(torch_dtype) -> str:
    return TORCH_TO_SAFETENSORS[str(torch_dtype).removeprefix("torch.")]


class _BlockFP8:
    """quant_method fp8 with weight_block_size: Linear and expert weights in F8_E4M3, F32 scales per block."""

    def __init__(self, config: Mapping[str, Any]):
        self.block = tuple(config.get("weight_block_size") or (128, 128))
        self.skip = set(config.get("modules_to_not_convert") or ["lm_head"])
        self.scale_block = self.block  # the rows × columns of the weight one F32 scale covers

    def applies(self, owner, key: str, shape: tuple[int, ...]) -> bool:
        import torch

        if len(shape) != 2 or not key.endswith(".weight") or any(part in self.skip for part in key.split(".")):
            return False
        # Linear layers, and fused expert tensors stored one matrix per expert.
        return isinstance(owner, torch.nn.Linear) or "Experts" in type(owner).__name__

    def tensors(self, key: str, shape: tuple[int, ...]) -> list[StoredTensor]:
        rows, cols = shape
        scales = (math.ceil(rows / self.block[0]), math.ceil(cols / self.block[1]))
        return [
            StoredTensor(key, "F8_E4M3", shape, "parameter"),
            StoredTensor(f"{key}_scale_inv", "F32", scales, "scale"),
        ]


class _MXFP4:
    """quant_method mxfp4 (gpt-oss): the routed experts' weight matrices as 4-bit values in blocks of 32.

    transformers holds an expert projection as [experts, in, out]; the files store it transposed and
    packed: ``<name>_blocks`` U8 [experts, out, in / 32, 16] (two 4-bit values a byte, 32 a block) and
    ``<name>_scales`` U8 [experts, out, in / 32] (one power-of-two exponent a block). Biases and every
    module in modules_to_not_convert keep the unquantized dtype.
    """

    BLOCK = 32  # values per block, sharing one scale
    VALUES_PER_BYTE = 2

    def __init__(self, config: Mapping[str, Any]):
        self.skip = list(config.get("modules_to_not_convert") or [])
        self.scale_block = (self.BLOCK,)  # the values of one row one U8 exponent covers

    def applies(self, owner, key: str, shape: tuple[int, ...]) -> bool:
        if owner is None or "Experts" not in type(owner).__name__ or len(shape) != 3 or key.endswith("_bias"):
            return False
        return not any(fnmatch.fnmatchcase(key, pattern) or fnmatch.fnmatchcase(key, pattern + ".*") for pattern in self.skip)

    def tensors(self, key: str, shape: tuple[int, ...]) -> list[StoredTensor]:
        experts, inputs, outputs = shape
        if inputs % self.BLOCK:
            raise AtlasError("config.json", "quantization_config", f"{key}: {inputs} inputs do not split into MXFP4 blocks of {self.BLOCK}")
        blocks = inputs // self.BLOCK
        return [
            StoredTensor(f"{key}_blocks", "U8", (experts, outputs, blocks, self.BLOCK // self.VALUES_PER_BYTE), "parameter", self.VALUES_PER_BYTE),
            StoredTensor(f"{key}_scales", "U8", (experts, outputs, blocks), "scale"),
        ]


QUANTIZERS = {"fp8": _BlockFP8, "mxfp4": _MXFP4}


def _quantizer(config: Mapping[str, Any] | None):
    if not config:
        return None
    method = config.get("quant_method")
    if method not in QUANTIZERS:
        raise AtlasError("config.json", "quantization_config.quant_method", f"{method!r} has no layout rule (known: {', '.join(QUANTIZERS)})")
    return QUANTIZERS[method](config)


def expand_stored_buffers(entries: list[Mapping[str, Any]], num_blocks: int) -> list[StoredTensor]:
    """checkpoint.json's "stored_buffers": file entries the transformers model has no tensor for."""
    tensors = []
    for entry in entries:
        names = [entry["name"].format(block=i) for i in range(num_blocks)] if "{block}" in entry["name"] else [entry["name"]]
        tensors += [StoredTensor(n, entry["dtype"], tuple(entry["shape"]), entry.get("role", "buffer")) for n in names]
    return tensors


def layout_summary(tensors: list[StoredTensor]) -> dict[str, Any]:
    """Totals of a predicted (or read) layout, in the same terms as checkpoint.json."""
    by_dtype: Counter = Counter()
    count_by_dtype: Counter = Counter()
    for t in tensors:
        by_dtype[t.dtype] += t.elements * DTYPE_BYTES[t.dtype]
        count_by_dtype[t.dtype] += 1
    return {
        "tensors": len(tensors),
        "tensors_by_dtype": dict(sorted(count_by_dtype.items())),
        "bytes_by_dtype": dict(sorted(by_dtype.items())),
        "payload_bytes": sum(by_dtype.values()),
        "elements": sum(t.elements for t in tensors),
        "weight_parameters": sum(t.values for t in tensors if t.role in ("parameter", "buffer")),
        "scale_elements": sum(t.elements for t in tensors if t.role == "scale"),
        "other_elements": sum(t.elements for t in tensors if t.role not in ("parameter", "buffer", "scale")),
    }


# --- the figures a checkpoint.json may pin ---------------------------------------------------------

# Keys of checkpoint.json's "safetensors": the figures compared with the prediction, and descriptive ones.
COMPARED_FIGURES = ("tensors", "tensors_by_dtype", "bytes_by_dtype", "payload_bytes", "weight_parameters", "index_total_size")
DESCRIPTIVE_FIGURES = ("shards", "file_bytes", "index_total_size_counts")
INDEX_COUNTS = ("payload bytes", "2 bytes per element")


def figure_rows(predicted: Mapping[str, Any], pinned: Mapping[str, Any], where: str) -> list[dict[str, Any]]:
    """Every figure the prediction gives, beside the pinned value where checkpoint.json has one (else None).

    Rows the checkpoint does not pin stay on the page as not checked; they never pass silently as checked.
    """
    unknown = sorted(set(pinned) - set(COMPARED_FIGURES) - set(DESCRIPTIVE_FIGURES))
    if unknown:
        raise AtlasError(where, f"safetensors.{unknown[0]}", f"is not a known figure ({', '.join(COMPARED_FIGURES + DESCRIPTIVE_FIGURES)})")
    for key in COMPARED_FIGURES:
        value = pinned.get(key)
        if key.endswith("_by_dtype"):
            if value is not None and not (isinstance(value, dict) and all(isinstance(v, int) for v in value.values())):
                raise AtlasError(where, f"safetensors.{key}", "must map dtypes to whole numbers")
        elif value is not None and not isinstance(value, int):
            raise AtlasError(where, f"safetensors.{key}", f"must be a whole number, not {value!r}")
    rows = [{"key": "tensors", "figure": "tensors", "predicted": predicted["tensors"], "pinned": pinned.get("tensors")}]
    for key, label in (("tensors_by_dtype", "{} tensors"), ("bytes_by_dtype", "{} bytes")):
        given = pinned.get(key)
        for dtype in sorted(set(predicted[key]) | set(given or {})):
            rows.append({
                "key": f"{key}.{dtype}", "figure": label.format(dtype),
                "predicted": predicted[key].get(dtype, 0), "pinned": None if given is None else given.get(dtype, 0),
            })
    rows.append({"key": "payload_bytes", "figure": "payload bytes", "predicted": predicted["payload_bytes"], "pinned": pinned.get("payload_bytes")})
    rows.append({"key": "weight_parameters", "figure": "weight parameters", "predicted": predicted["weight_parameters"], "pinned": pinned.get("weight_parameters")})
    counts = pinned.get("index_total_size_counts", "payload bytes")
    if counts not in INDEX_COUNTS:
        raise AtlasError(where, "safetensors.index_total_size_counts", f"{counts!r} is not one of {', '.join(map(repr, INDEX_COUNTS))}")
    index = predicted["payload_bytes"] if counts == "payload bytes" else 2 * predicted["elements"]
    rows.append({"key": "index_total_size", "figure": f"index total_size ({counts})", "predicted": index, "pinned": pinned.get("index_total_size")})
    for row in rows:
        row["checked"] = row["pinned"] is not None
    return rows
