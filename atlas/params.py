"""Exact parameter accounting, and the checkpoint layout predicted from config.json.

Accounting answers "how many parameters, and from what calculation" for every component; the layout
answers "which tensors, with which dtypes and shapes, do the released safetensors files hold". The
two meet at the checkpoint check: the predicted files must equal the pinned header totals.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import math
import re
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

    def under(self, prefix: str, **config_changes: Any) -> list[StoredTensor]:
        """The stored tensors of the model's tensors whose names start with ``prefix`` (one block of a
        model built longer, say): only those are converted back, not the whole model's."""
        return predicted_tensors(
            self.build(config_changes), self.raw_config.get("quantization_config"), self.weight_dtype, self.rules, prefix
        )

    def state_order(self) -> list[list[str]]:
        """For each module, in the model's state_dict order, the stored names its tensors become (what
        atlas.files.save_order needs to cut shards as the saving code did)."""
        model = self.build({})
        unique, _ = _unique_state(model, self.rules)
        saved = _SavedNames(model, self.raw_config.get("quantization_config"), self.weight_dtype, self.rules)
        groups: list[list[str]] = []
        owner_of_last = None
        for key, tensor in unique.items():
            owner = _owner_path(key, saved.modules)
            made = [t.name for t, _ in saved.tensors({key: tensor})]
            if owner != owner_of_last:
                groups.append([])
                owner_of_last = owner
            groups[-1] += made
        return groups

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
    return _SavedNames(model, quantization, weight_dtype, rules).tensors(unique)


class _SavedNames:
    """How the saving code names and stores a model's tensors. What that needs from the model (its
    modules, its persistent buffers, transformers' conversion mapping) is looked up once here: a layout
    is also predicted one tensor at a time (to cut shards in state order, to describe a tensor's page),
    and looking them up for each tensor was most of the time of collecting a family."""

    def __init__(self, model, quantization: Mapping[str, Any] | None, weight_dtype: str, rules: StoredRules):
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import PrefixChange

        self.model, self.weight_dtype, self.rules = model, weight_dtype, rules
        self.modules = dict(model.named_modules())
        self.buffers = {
            f"{path}.{name}" if path else name
            for path, owner in self.modules.items()
            for name, _ in owner.named_buffers(recurse=False)
            if name not in owner._non_persistent_buffers_set
        }
        self.quantized = _quantizer(quantization)
        self._first_of_kind: dict[tuple, list | None] = {}  # a kind of block -> its first block's tensors, cut by _index_split
        self._alike: dict[tuple, bool] = {}  # a kind of block -> whether its second block was stored as its first one
        # What revert_weight_conversion itself looks up for a model not loaded from files (which ours
        # never are): the conversions, less any prefix change; none at all means names are kept as they are.
        conversions = getattr(model, "_weight_conversions", None)
        if conversions is None:
            conversions = [c for c in get_model_conversion_mapping(model, add_legacy=False) if not isinstance(c, PrefixChange)]
        self.conversions = conversions or None

    def revert(self, tensors: dict[str, Any]) -> dict[str, Any]:
        """The names (and tensors) save_pretrained writes for these model tensors."""
        from transformers.core_model_loading import revert_weight_conversion

        if self.conversions is None:
            return tensors
        held = self.model.__dict__.get("_weight_conversions")
        self.model._weight_conversions = self.conversions  # handed over: not looked up again
        try:
            return revert_weight_conversion(self.model, tensors)
        finally:
            self.model._weight_conversions = held

    def tensors(self, unique: dict[str, Any]) -> list[tuple[StoredTensor, Any]]:
        """What the files store for these model tensors, in the order the saving code writes them."""
        if self.conversions is None or not self._index_free:
            tensors = self._stored(unique)
        else:  # one block at a time, in the order revert_weight_conversion takes the names
            tensors = [made for block, keys in _runs_by_block(unique) for made in self._block(block, {k: unique[k] for k in keys})]
        if self.rules.prefix_removed:
            tensors = [(t.renamed(t.name.removeprefix(self.rules.prefix_removed)), q) for t, q in tensors]
        return tensors

    @functools.cached_property
    def _index_free(self) -> bool:
        """Whether every conversion and every module kept unquantized is named by names and wildcards
        alone (a number, or a regular expression's class or group, could name one block or some): only
        then are two blocks that hold the same tensors stored alike."""
        patterns = [p for c in self.conversions for p in (*c.source_patterns, *c.target_patterns)]
        patterns += getattr(self.quantized, "skip", [])
        return all(_NAME_PART.fullmatch(part) for p in patterns for part in str(p).replace("\\.", ".").split("."))

    def _block(self, block: tuple[str, int] | None, unique: dict[str, Any]) -> list[tuple[StoredTensor, Any]]:
        """One block's stored tensors. Converting a model's tensors back is most of predicting its layout,
        and a 61-block model has two or three kinds of block: the second block of a kind is converted too,
        to check that its names are the first one's with its own index, and after that every block of
        the kind takes the first one's."""
        if block is None:
            return self._stored(unique)
        path, index = block
        kind = (path, tuple((k.removeprefix(f"{path}.{index}."), tuple(t.shape), t.dtype) for k, t in unique.items()))
        if self._alike.get(kind):
            return _reindexed(self._first_of_kind[kind], index)
        made = self._stored(unique)
        if kind not in self._first_of_kind:
            self._first_of_kind[kind] = _index_split(made, index)
        elif kind not in self._alike:
            first = self._first_of_kind[kind]
            self._alike[kind] = first is not None and _reindexed(first, index) == made
        return made

    def _stored(self, unique: dict[str, Any]) -> list[tuple[StoredTensor, Any]]:
        stored = self.revert(unique)
        owners = self._renamed_owners(unique, stored) if self.quantized else {}
        tensors = []
        for key, tensor in stored.items():
            shape = tuple(tensor.shape)
            if key in self.buffers:
                tensors.append((StoredTensor(key, _safetensors_dtype(tensor.dtype), shape, "buffer"), None))
                continue
            if self.quantized and self.quantized.applies(self._owner(key, owners), key, shape):
                tensors += [(t, self.quantized) for t in self.quantized.tensors(key, shape)]
            else:
                tensors.append((StoredTensor(key, self.weight_dtype, shape, "parameter"), None))
        return tensors

    def _owner(self, key: str, owners: dict[str, Any]):
        """The module a stored tensor comes from: as found for a renamed one, else the deepest module over it."""
        return owners[key] if key in owners else self.modules.get(_owner_path(key, self.modules))

    def _renamed_owners(self, unique: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
        """The module each stored name comes from, where the files name it otherwise than the model does
        (MiniMax-M2's block_sparse_moe.experts.E.w1 for the model's mlp.experts): each such module's
        tensors are converted back alone, and the names that come out are its. Only names the model
        does not hold."""
        if all(key in unique for key in stored):
            return {}
        # Only a module some of whose tensors the files name otherwise can be the source of a new name.
        renamed = {key.rpartition(".")[0] for key in unique if key not in stored}
        # Most often every new name lies under such a module (a stacked expert tensor stored one matrix
        # per expert: experts.E.gate_proj.weight under experts), and that module is its owner: nothing
        # needs converting again.
        owners = {}
        for key in stored:
            if key not in unique:
                path = _owner_path(key, self.modules)
                if path not in renamed:
                    break
                owners[key] = self.modules[path]
        else:
            return owners
        by_module: dict[str, dict[str, Any]] = {}
        for key, tensor in unique.items():
            by_module.setdefault(key.rpartition(".")[0], {})[key] = tensor
        by_module = {path: tensors for path, tensors in by_module.items() if path in renamed}
        owners = {}
        for path, tensors in by_module.items():
            for key in self.revert(tensors):
                if key in stored and key not in unique:
                    owners[key] = self.modules.get(path)
        return owners


def predicted_tensors(
    model, quantization: Mapping[str, Any] | None, weight_dtype: str, rules: StoredRules = StoredRules(), under: str = ""
) -> list[StoredTensor]:
    """The tensors save_pretrained would write for this model (for its tensors named ``under...``), under
    the released quantization."""
    unique, _ = _unique_state(model, rules)
    if under:
        unique = {key: tensor for key, tensor in unique.items() if key.startswith(under)}
    tensors = [t for t, _ in _file_tensors(model, unique, quantization, weight_dtype, dataclasses.replace(rules, prefix_removed=""))]
    if rules.prefix_removed:
        if not any(t.name.startswith(rules.prefix_removed) for t in tensors):
            raise AtlasError(rules.source, "prefix_removed", f"no tensor name starts with {rules.prefix_removed!r}")
        tensors = [t.renamed(t.name.removeprefix(rules.prefix_removed)) for t in tensors]
    return tensors


def tensor_summary(model, keys: list[str], quantization: Mapping[str, Any] | None, weight_dtype: str,
                   rules: StoredRules = StoredRules()) -> dict[str, dict[str, Any]]:
    """For each model tensor (by its name in the model), what the files store for it: ``stored``, the
    stored tensors grouped by name pattern (one per expert: ``experts.{0…383}.gate_proj.weight`` ×384),
    each with dtype, shape, bytes, and for a quantization scale the tensor it scales and the block one
    scale covers; ``tied_to``, where the files hold a tied tensor once under another name."""
    unique, tied = _unique_state(model, rules)
    saved = _SavedNames(model, quantization, weight_dtype, rules)
    out = {}
    for key in keys:
        if key not in unique:
            kept = tied.get(key)
            out[key] = {"stored": [], "tied_to": kept.removeprefix(rules.prefix_removed) if kept else None}
            continue
        out[key] = {"stored": _grouped(saved.tensors({key: unique[key]})), "tied_to": None}
    return out


def _grouped(made: list[tuple[StoredTensor, Any]]) -> list[dict[str, Any]]:
    """Stored tensors that differ only by an index (one per expert) as one entry with a name pattern."""
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


def _runs_by_block(unique: Mapping[str, Any]) -> list[tuple[tuple[str, int] | None, list[str]]]:
    """The names in revert_weight_conversion's order (dot_natural_key), cut where the block changes:
    (the list's path and the block's index, the names), None for the names outside any numbered module."""
    from transformers.core_model_loading import dot_natural_key

    runs: list[tuple[tuple[str, int] | None, list[str]]] = []
    for key in sorted(unique, key=dot_natural_key):
        parts = key.split(".")
        at = next((i for i, part in enumerate(parts) if part.isdigit()), None)
        block = None if at is None else (".".join(parts[:at]), int(parts[at]))
        if not runs or runs[-1][0] != block:
            runs.append((block, []))
        runs[-1][1].append(key)
    return runs


_NAME_PART = re.compile(r"\^?(?:[A-Za-z_]\w*)?\$?|\*")  # one part of a pattern that names no particular block


def _index_split(made: list[tuple[StoredTensor, Any]], index: int) -> list[tuple[StoredTensor, Any, str, str]] | None:
    """A block's stored tensors, each with its name cut around the first part that is the block's index
    (what comes before it, what comes after); None where a name has no such part."""
    mark = str(index)
    split = []
    for t, q in made:
        parts = t.name.split(".")
        if mark not in parts:
            return None
        at = parts.index(mark)
        split.append((t, q, ".".join(parts[:at] + [""]), ".".join([""] + parts[at + 1:])))
    return split


def _reindexed(split: list[tuple[StoredTensor, Any, str, str]], index: int) -> list[tuple[StoredTensor, Any]]:
    """The tensors of a block cut by _index_split, as the block ``index`` stores them."""
    return [(t.renamed(f"{before}{index}{after}"), q) for t, q, before, after in split]


def _owner_path(key: str, modules: Mapping[str, Any]) -> str:
    """The deepest module whose path prefixes the stored name (experts.E.gate_proj.weight -> experts).
    Tried from the name's parent up: for a name the model holds, the first try is the one."""
    path = key
    while "." in path:
        path = path.rpartition(".")[0]
        if path in modules:
            return path
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

        if len(shape) != 2 or not key.endswith(".weight") or not self.skip.isdisjoint(key.split(".")):
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


def cut_unstored(model, entries: Any, config, where: str) -> list[dict[str, Any]]:
    """checkpoint.json's "not_stored": tensors transformers allocates larger than the released files hold
    them (LongCat-Flash's gate_up_proj has a slot for every zero-computation expert; the files store the
    real experts only). The files decide what is counted: each matching parameter of the meta model is
    replaced by one of the stored shape, its first ``stored`` entries along ``axis``, where ``stored``
    names the config key that gives the count. Returns, per entry, what was allocated and what is counted."""
    import torch

    if entries is None:
        return []
    if not isinstance(entries, list):
        raise AtlasError(where, "not_stored", "must be a list of {tensor, axis, stored, why}")
    found = []
    for i, entry in enumerate(entries):
        field = f"not_stored[{i}]"
        if not (isinstance(entry, dict) and set(entry) == {"tensor", "axis", "stored", "why"} and isinstance(entry["tensor"], str)
                and isinstance(entry["axis"], int) and isinstance(entry["stored"], str) and isinstance(entry["why"], str) and entry["why"].strip()):
            raise AtlasError(where, field, "must be {tensor (a model tensor name, {block} for any block), axis, stored (a config key), why}")
        kept = getattr(config, entry["stored"], None)
        if not isinstance(kept, int) or isinstance(kept, bool) or kept < 0:
            raise AtlasError(where, f"{field}.stored", f"{entry['stored']!r} is no whole-number setting of the config")
        rx = re.compile(re.escape(entry["tensor"]).replace(re.escape("{block}"), r"\d+") + "$")
        matched = [(n, p) for n, p in model.named_parameters() if rx.match(n)]
        if not matched:
            raise AtlasError(where, f"{field}.tensor", f"{entry['tensor']!r} names no parameter of {type(model).__name__}")
        allocated = list(matched[0][1].shape)
        axis = entry["axis"]
        if not 0 <= axis < len(allocated) or kept > allocated[axis]:
            raise AtlasError(where, field, f"cannot keep {kept} entries of axis {axis} of a tensor of shape {allocated}")
        stored = allocated[:axis] + [kept] + allocated[axis + 1:]
        for name, _ in matched:
            owner_path, _, attr = name.rpartition(".")
            owner = model.get_submodule(owner_path)
            setattr(owner, attr, torch.nn.Parameter(torch.empty(stored, device="meta", dtype=getattr(owner, attr).dtype), requires_grad=False))
        per = math.prod(allocated) - math.prod(stored)
        found.append({"tensor": entry["tensor"], "axis": axis, "config_key": entry["stored"], "kept": kept,
                      "allocated": allocated, "stored": stored, "instances": len(matched),
                      "not_counted": per * len(matched), "why": entry["why"].strip()})
    return found


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
    elements_by_role: Counter = Counter()
    weight_parameters = 0
    for t in tensors:  # one pass: the largest layouts hold over a hundred thousand tensors
        by_dtype[t.dtype] += t.elements * DTYPE_BYTES[t.dtype]
        count_by_dtype[t.dtype] += 1
        elements_by_role[t.role] += t.elements
        if t.role in ("parameter", "buffer"):
            weight_parameters += t.values
    return {
        "tensors": len(tensors),
        "tensors_by_dtype": dict(sorted(count_by_dtype.items())),
        "bytes_by_dtype": dict(sorted(by_dtype.items())),
        "payload_bytes": sum(by_dtype.values()),
        "elements": sum(elements_by_role.values()),
        "weight_parameters": weight_parameters,
        "scale_elements": elements_by_role["scale"],
        "other_elements": sum(n for role, n in elements_by_role.items() if role not in ("parameter", "buffer", "scale")),
    }


# --- the figures a checkpoint.json may pin ---------------------------------------------------------

# Keys of checkpoint.json's "safetensors": the figures compared with the prediction. "files" maps each
# file's name to its own figures (FILE_FIGURES); the files' figures, "shards", "file_bytes" and
# "index_file_bytes" need the predicted files (atlas.files), the rest the layout alone.
COMPARED_FIGURES = ("tensors", "tensors_by_dtype", "bytes_by_dtype", "dtypes", "payload_bytes", "weight_parameters",
                    "index_total_size", "shards", "files", "file_bytes", "index_file_bytes", "named_tensors")
DESCRIPTIVE_FIGURES = ("index_total_size_counts",)
FILE_FIGURES = ("tensors", "header_bytes", "bytes")
NAMED_FIGURES = ("count", "dtype", "shape", "file")  # what "named_tensors" may say of the tensors a name pattern matches
INDEX_COUNTS = ("payload bytes", "2 bytes per element")
CONFIDENCE = ("high", "medium-high", "medium", "low")


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_pinned_types(pinned: Mapping[str, Any], where: str) -> None:
    for key in COMPARED_FIGURES:
        value = pinned.get(key)
        if value is None:
            continue
        if key.endswith("_by_dtype"):
            if not (isinstance(value, dict) and all(_whole(v) for v in value.values())):
                raise AtlasError(where, f"safetensors.{key}", "must map dtypes to whole numbers")
        elif key == "dtypes":
            if not (isinstance(value, list) and value and all(isinstance(v, str) and v in DTYPE_BYTES for v in value)):
                raise AtlasError(where, "safetensors.dtypes", f"must list safetensors dtypes ({', '.join(DTYPE_BYTES)})")
        elif key == "files":
            if not isinstance(value, dict) or not value:
                raise AtlasError(where, "safetensors.files", "must map file names to their figures")
            for name, figures in value.items():
                if not isinstance(figures, dict) or set(figures) - set(FILE_FIGURES) or not all(_whole(v) for v in figures.values()):
                    raise AtlasError(where, f"safetensors.files.{name}", f"must map {', '.join(FILE_FIGURES)} to whole numbers")
        elif key == "named_tensors":
            if not isinstance(value, dict) or not value:
                raise AtlasError(where, "safetensors.named_tensors", "must map tensor names ({block} for any block) to what is known of them")
            for name, known in value.items():
                if not (isinstance(known, dict) and known and not set(known) - set(NAMED_FIGURES)
                        and _whole(known.get("count", 1)) and isinstance(known.get("dtype", "BF16"), str) and known.get("dtype", "BF16") in DTYPE_BYTES
                        and isinstance(known.get("shape", []), list) and all(_whole(d) for d in known.get("shape", []))
                        and isinstance(known.get("file", ""), str)):
                    raise AtlasError(where, f"safetensors.named_tensors.{name}", f"must give some of {', '.join(NAMED_FIGURES)}: a count, a dtype, a shape, a file name")
        elif not _whole(value):
            raise AtlasError(where, f"safetensors.{key}", f"must be a whole number, not {value!r}")


def _sources(sources: Any, where: str) -> list[dict[str, Any]]:
    """checkpoint.json's "figure_sources": [{"figures": [keys], "source": text, "confidence": ...}]."""
    if sources is None:
        return []
    if not isinstance(sources, list):
        raise AtlasError(where, "figure_sources", "must be a list of {figures, source, confidence}")
    for i, s in enumerate(sources):
        if not (isinstance(s, dict) and set(s) == {"figures", "source", "confidence"} and isinstance(s["source"], str) and s["source"]
                and isinstance(s["figures"], list) and s["figures"] and all(isinstance(f, str) for f in s["figures"])):
            raise AtlasError(where, f"figure_sources[{i}]", "must be {figures: [keys], source: text, confidence: ...}")
        if s["confidence"] not in CONFIDENCE:
            raise AtlasError(where, f"figure_sources[{i}].confidence", f"{s['confidence']!r} is not one of {', '.join(CONFIDENCE)}")
    return sources


def _source_of(key: str, sources: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The source that names this figure's key or a key above it (files names every file's figures)."""
    for s in sources:
        if any(key == f or key.startswith(f + ".") for f in s["figures"]):
            return s
    return None


def figure_rows(predicted: Mapping[str, Any], pinned: Mapping[str, Any], where: str, files: Mapping[str, Any] | None = None,
                sources: Any = None, layout: list[StoredTensor] | None = None) -> list[dict[str, Any]]:
    """Every figure the prediction gives, beside the pinned value where checkpoint.json has one (else None).

    Rows the checkpoint does not pin stay on the page as not checked; they never pass silently as checked.
    A pinned figure the prediction cannot give (a file's size where nothing says how the tensors are
    split into files) is shown with the reason, as not checked. ``files`` is atlas.files' prediction;
    every pinned figure names its source in ``sources``; ``layout``, the predicted tensors, answers
    "named_tensors".
    """
    unknown = sorted(set(pinned) - set(COMPARED_FIGURES) - set(DESCRIPTIVE_FIGURES))
    if unknown:
        raise AtlasError(where, f"safetensors.{unknown[0]}", f"is not a known figure ({', '.join(COMPARED_FIGURES + DESCRIPTIVE_FIGURES)})")
    _check_pinned_types(pinned, where)
    sources = _sources(sources, where)
    rows = [{"key": "tensors", "figure": "tensors", "predicted": predicted["tensors"], "pinned": pinned.get("tensors")}]
    for key, label in (("tensors_by_dtype", "{} tensors"), ("bytes_by_dtype", "{} bytes")):
        given = pinned.get(key)
        for dtype in sorted(set(predicted[key]) | set(given or {})):
            rows.append({
                "key": f"{key}.{dtype}", "figure": label.format(dtype),
                "predicted": predicted[key].get(dtype, 0), "pinned": None if given is None else given.get(dtype, 0),
            })
    dtypes = pinned.get("dtypes")
    rows.append({"key": "dtypes", "figure": "dtypes stored", "predicted": ", ".join(sorted(predicted["tensors_by_dtype"])),
                 "pinned": None if dtypes is None else ", ".join(sorted(dtypes))})
    rows.append({"key": "payload_bytes", "figure": "payload bytes", "predicted": predicted["payload_bytes"], "pinned": pinned.get("payload_bytes")})
    rows.append({"key": "weight_parameters", "figure": "weight parameters", "predicted": predicted["weight_parameters"], "pinned": pinned.get("weight_parameters")})
    counts = pinned.get("index_total_size_counts", "payload bytes")
    if counts not in INDEX_COUNTS:
        raise AtlasError(where, "safetensors.index_total_size_counts", f"{counts!r} is not one of {', '.join(map(repr, INDEX_COUNTS))}")
    index = predicted["payload_bytes"] if counts == "payload bytes" else 2 * predicted["elements"]
    rows.append({"key": "index_total_size", "figure": f"index total_size ({counts})", "predicted": index, "pinned": pinned.get("index_total_size")})
    rows += _file_rows(pinned, files, where)
    rows += _named_rows(pinned.get("named_tensors") or {}, layout or [], files)
    for row in rows:
        row.setdefault("bounds", None)
        row["checked"] = row["pinned"] is not None and (row["predicted"] is not None or row["bounds"] is not None)
        row.setdefault("why", None)
        source = _source_of(row["key"], sources)
        if row["pinned"] is not None and source is None:
            raise AtlasError(where, "figure_sources", f"no source names the pinned figure {row['key']}")
        row["source"] = source["source"] if source and row["pinned"] is not None else None
        row["confidence"] = source["confidence"] if source and row["pinned"] is not None else None
    return rows


def _file_rows(pinned: Mapping[str, Any], files: Mapping[str, Any] | None, where: str) -> list[dict[str, Any]]:
    """The figures of the files: how many, each one's tensors, header length and size, their total, the
    index file's size. Predicted only where the split into files is known."""
    unknown = "not checked: nothing here says how the tensors are split into files (no index copy, no sharding rule)"
    predicted = {f["name"]: f for f in files["files"]} if files else {}
    rows = [{"key": "shards", "figure": "files", "predicted": len(predicted) if files else None, "pinned": pinned.get("shards")}]
    given = pinned.get("files") or {}
    if files:
        for name in given:
            if name not in predicted:
                raise AtlasError(where, f"safetensors.files.{name}", f"no predicted file has this name (predicted: {', '.join(predicted)})")
    for name in list(predicted) + [n for n in given if n not in predicted]:
        f, pin = predicted.get(name), given.get(name, {})
        rows.append({"key": f"files.{name}.tensors", "figure": f"{name}: tensors", "predicted": f and f["tensors"], "pinned": pin.get("tensors")})
        header = {"key": f"files.{name}.header_bytes", "figure": f"{name}: header bytes", "predicted": f and f["header_bytes"], "pinned": pin.get("header_bytes")}
        size = {"key": f"files.{name}.bytes", "figure": f"{name}: bytes", "predicted": f and f["bytes"], "pinned": pin.get("bytes")}
        if f and f["header_bounds"] is not None:
            lo, hi = f["header_bounds"]
            header.update(bounds=[lo, hi], figure=f"{name}: header bytes (the writer's tensor order unknown)")
            if pin.get("header_bytes") is not None:
                # Where the order is unknown the header length is not predicted; the pinned one with the
                # predicted payload must still give the file's size.
                size.update(predicted=8 + pin["header_bytes"] + f["payload_bytes"], figure=f"{name}: bytes (8 + the header's + the payload's)")
        rows += [header, size]
    sizes = [f["bytes"] for f in predicted.values()]
    total = sum(sizes) if files and None not in sizes else None
    if files and total is None and all(given.get(n, {}).get("header_bytes") is not None for n in predicted):
        total = sum(8 + given[n]["header_bytes"] + f["payload_bytes"] for n, f in predicted.items())
    rows.append({"key": "file_bytes", "figure": "bytes of all files", "predicted": total, "pinned": pinned.get("file_bytes")})
    rows.append({"key": "index_file_bytes", "figure": f"index file bytes ({files['index_bytes_from']})" if files and files["index_bytes"] else "index file bytes",
                 "predicted": files["index_bytes"] if files else None, "pinned": pinned.get("index_file_bytes")})
    for row in rows:
        if row["pinned"] is not None and row["predicted"] is None and row.get("bounds") is None:
            row["why"] = unknown
    return rows


def _named_rows(pinned: Mapping[str, Any], tensors: list[StoredTensor], files: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """What checkpoint.json knows of particular tensors (the masks GPT-2 stores, the head Qwen3 writes
    twice, the file the head lands in), in words built alike from the pin and from the prediction."""
    if not pinned:
        return []
    layout = {t.name: (t.dtype, t.shape) for t in tensors}  # every predicted name with its dtype and shape
    where_of = {n: f["name"] for f in (files or {}).get("files", []) for n in f.get("names", [])}
    rows = []
    for pattern, known in pinned.items():
        rx = re.compile(re.escape(pattern).replace(re.escape("{block}"), r"\d+") + "$")
        matched = [n for n in layout if rx.match(n)]

        def words(count, dtypes, shapes, files_):
            parts = []
            if "count" in known:
                parts.append(f"{count} tensor{'s' if count != 1 else ''}")
            if "dtype" in known:
                parts.append(" or ".join(sorted(dtypes)) or "no dtype")
            if "shape" in known:
                parts.append(" or ".join(sorted(map(str, shapes))) or "no shape")
            if "file" in known:
                parts.append("in " + (" or ".join(sorted(files_)) or "no known file"))
            return ", ".join(parts)

        pin = words(known.get("count", 1), {known.get("dtype")}, {str(known.get("shape"))}, {known.get("file")})
        if "file" in known and files is None:
            guess = None
        else:
            guess = words(len(matched), {layout[n][0] for n in matched}, {str(list(layout[n][1])) for n in matched},
                          {where_of.get(n, "no known file") for n in matched})
        rows.append({"key": f"named_tensors.{pattern}", "figure": f"stored tensor {pattern}",
                     "predicted": guess if matched else "absent", "pinned": pin})
    return rows
