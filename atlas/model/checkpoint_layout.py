"""The checkpoint layout predicted from config.json: which tensors the released safetensors files hold.

Names as the saving code writes them (transformers' conversions reverted, tied tensors once, a prefix
the files lack removed), dtypes (the unquantized weights' dtype, or the released quantization's
tensors: ``atlas.model.quantization``) and shapes; the tensors transformers allocates larger than the
files hold them; the files' own extra entries; and the layout's totals, in checkpoint.json's terms.
The predicted layout must equal the pinned header totals (``atlas.model.pinned_figures``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from atlas.errors import AtlasError
from atlas.inputs.dtypes import DTYPE_BYTES, TORCH_TO_SAFETENSORS
from atlas.inputs.family import StoredTensor
from atlas.model.quantization import quantizer


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
        atlas.model.files.save_order needs to cut shards as the saving code did)."""
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
        self.quantized = quantizer(quantization)
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
