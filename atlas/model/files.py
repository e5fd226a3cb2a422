"""The checkpoint's files, predicted: which file holds each stored tensor, each file's header and size.

A safetensors file is 8 bytes of header length, the header (a JSON object naming every tensor with its
dtype, shape and data offsets) and the payload. The payload follows from the predicted layout alone;
which file a tensor lands in follows from the index where one is carried beside config.json, or from
the rule the saving code followed (fill a shard up to a byte limit, in the order the model holds its
tensors); the header's length follows from the writer's serialization, where it is known.

The writer reproduced here is the safetensors library's: tensors ordered by dtype (the wider first)
then by name, compact JSON with ``__metadata__`` first, spaces appended up to a multiple of 8 bytes.
tests/test_files.py holds it to the installed library's own output. Older writers neither padded
nor ordered the tensors; for them only the bounds over every order are settled.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from atlas.errors import AtlasError
from atlas.inputs.family import StoredTensor
from atlas.inputs.dtypes import DTYPE_BYTES

INDEX_NAME = "model.safetensors.index.json"
HEADERS_NAME = "headers.json"  # the tensor list `build.py pin` writes: name, dtype, shape, file
SINGLE_FILE = "model.safetensors"

# The safetensors writer's dtype order (its Dtype enum); it writes the later ones first.
WRITER_DTYPE_ORDER = ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16", "F16", "BF16",
                      "I32", "U32", "F32", "F64", "I64", "U64")

HEADER_ORDERS = ("dtype, name", "unknown")


@dataclass(frozen=True)
class HeaderWriter:
    """How the files' headers were written: checkpoint.json's "header_writer" (every key optional).

    order: "dtype, name" (the safetensors writer's) or "unknown" (an older writer: only bounds settle);
    padded: spaces up to a multiple of 8 bytes; metadata: the ``__metadata__`` object (transformers
    writes {"format": "pt"}).
    """

    order: str = "dtype, name"
    padded: bool = True
    metadata: Mapping[str, str] | None = None

    @classmethod
    def read(cls, value: Any, where: str) -> "HeaderWriter":
        if value is None:
            return cls(metadata={"format": "pt"})
        if not isinstance(value, dict) or set(value) - {"order", "padded", "metadata"}:
            raise AtlasError(where, "header_writer", "must be an object with order, padded and metadata (each optional)")
        order = value.get("order", "dtype, name")
        if order not in HEADER_ORDERS:
            raise AtlasError(where, "header_writer.order", f"{order!r} is not one of {', '.join(map(repr, HEADER_ORDERS))}")
        padded = value.get("padded", True)
        if not isinstance(padded, bool):
            raise AtlasError(where, "header_writer.padded", "must be true or false")
        metadata = value.get("metadata", {"format": "pt"})
        if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items())):
            raise AtlasError(where, "header_writer.metadata", "must map strings to strings, or be null")
        return cls(order, padded, metadata)


def payload(tensors: list[StoredTensor]) -> int:
    return sum(t.elements * DTYPE_BYTES[t.dtype] for t in tensors)


def _entries(ordered: list[StoredTensor], metadata: Mapping[str, str] | None) -> str:
    parts = [] if metadata is None else ['"__metadata__":' + json.dumps(dict(metadata), separators=(",", ":"))]
    offset = 0
    for t in ordered:
        end = offset + t.elements * DTYPE_BYTES[t.dtype]
        parts.append(json.dumps(t.name) + ":" + json.dumps(
            {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, end]}, separators=(",", ":")))
        offset = end
    return "{" + ",".join(parts) + "}"


def header_text(tensors: list[StoredTensor], metadata: Mapping[str, str] | None, padded: bool = True) -> str:
    """The header the safetensors writer produces for these tensors, byte for byte."""
    ordered = sorted(tensors, key=lambda t: (-WRITER_DTYPE_ORDER.index(t.dtype), t.name))
    text = _entries(ordered, metadata)
    return text + " " * ((-len(text)) % 8) if padded else text


def header_bounds(tensors: list[StoredTensor], metadata: Mapping[str, str] | None) -> tuple[int, int]:
    """The shortest and longest unpadded header over every order of the tensors: only the offsets' digits
    depend on the order, and smallest-first keeps every offset as low as it can be (largest-first, high)."""
    by_size = sorted(tensors, key=lambda t: (t.elements * DTYPE_BYTES[t.dtype], t.name))
    return len(_entries(by_size, metadata).encode()), len(_entries(by_size[::-1], metadata).encode())


def greedy_shards(ordered: list[StoredTensor], max_bytes: int) -> list[list[StoredTensor]]:
    """transformers' sharding: tensors in order, a new shard whenever the next would pass the limit."""
    shards: list[list[StoredTensor]] = [[]]
    size = 0
    for t in ordered:
        n = t.elements * DTYPE_BYTES[t.dtype]
        if shards[-1] and size + n > max_bytes:
            shards.append([])
            size = 0
        shards[-1].append(t)
        size += n
    return shards


def shard_name(i: int, n: int) -> str:
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def index_text(total_size: int, weight_map: Mapping[str, str]) -> str:
    """model.safetensors.index.json as save_pretrained writes it: sorted keys, indent 2, a final newline."""
    return json.dumps({"metadata": {"total_size": total_size}, "weight_map": dict(weight_map)}, indent=2, sort_keys=True) + "\n"


def read_index(path: Path) -> dict[str, Any]:
    """An index copy: {"total_size": int, "weight_map": {name: file}, "bytes": size of the file}."""
    from atlas.inputs.checkpoint import read_json_object

    data = read_json_object(path)
    weight_map = data.get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map or not all(isinstance(v, str) for v in weight_map.values()):
        raise AtlasError(path, "weight_map", "must map tensor names to shard file names")
    total = (data.get("metadata") or {}).get("total_size") if isinstance(data.get("metadata"), dict) else None
    if not isinstance(total, int) or isinstance(total, bool):
        raise AtlasError(path, "metadata.total_size", f"must be a whole number, not {total!r}")
    return {"total_size": total, "weight_map": weight_map, "bytes": path.stat().st_size}


def check_index(path: Path | str, layout: list[StoredTensor], index: Mapping[str, Any], total_size: int) -> None:
    """The index copy lists exactly the predicted tensors, name by name, and its total_size is the
    prediction's (``total_size``, counted the way checkpoint.json says the index counts)."""
    predicted = [t.name for t in layout]
    listed = index["weight_map"]
    for name in predicted:
        if name not in listed:
            raise AtlasError(path, f"weight_map: {name}", "predicted, but the index lists no such tensor")
    names = set(predicted)
    for name in listed:
        if name not in names:
            raise AtlasError(path, f"weight_map: {name}", "listed in the index, but the predicted layout has no such tensor")
    if index["total_size"] != total_size:
        raise AtlasError(path, "metadata.total_size", f"{index['total_size']:,}, the prediction gives {total_size:,}")


def check_headers(path: Path | str, layout: list[StoredTensor], listed: Any) -> None:
    """headers.json lists exactly the predicted tensors, each with the predicted dtype and shape."""
    rows = listed.get("tensors") if isinstance(listed, dict) else None
    if not isinstance(rows, list) or not all(isinstance(r, dict) and {"name", "dtype", "shape", "file"} <= set(r) for r in rows):
        raise AtlasError(path, "tensors", "must list every tensor as {name, dtype, shape, file}")
    predicted = {t.name: t for t in layout}
    for r in rows:
        t = predicted.get(r["name"])
        if t is None:
            raise AtlasError(path, r["name"], "in the headers, but the predicted layout has no such tensor")
        if (t.dtype, list(t.shape)) != (r["dtype"], r["shape"]):
            raise AtlasError(path, r["name"], f"{r['dtype']} {r['shape']} in the headers, predicted {t.dtype} {list(t.shape)}")
    missing = sorted(set(predicted) - {r["name"] for r in rows})
    if missing:
        raise AtlasError(path, missing[0], "predicted, but the headers list no such tensor")


def save_order(layout: list[StoredTensor], state_order: list[list[str]]) -> list[StoredTensor]:
    """The layout in the order the saving code met the tensors: ``state_order`` lists, for each module
    in the model's state_dict order, the stored names its tensors became. A fused experts tensor
    expands into one tensor per expert; the per-expert modules it replaced were met expert by expert,
    so within a module the names are ordered by expert (stable). Entries no module made (stored buffers,
    extras) come last, in layout order."""
    by_name = {t.name: t for t in layout}
    ordered, seen = [], set()
    for names in state_order:
        keyed = sorted(names, key=lambda n: _expert_index(n))
        for name in keyed:
            if name in by_name and name not in seen:
                ordered.append(by_name[name])
                seen.add(name)
    ordered += [t for t in layout if t.name not in seen]
    return ordered


def _expert_index(name: str) -> int:
    m = re.search(r"\.experts\.(\d+)\.", name)
    return int(m.group(1)) if m else -1


@dataclass(frozen=True)
class ShardRule:
    """checkpoint.json's "shard_rule": how the files were cut where no index copy says."""

    max_shard_bytes: int

    @classmethod
    def read(cls, value: Any, where: str) -> "ShardRule | None":
        if value is None:
            return None
        limit = value.get("max_shard_bytes") if isinstance(value, dict) else None
        if not isinstance(value, dict) or set(value) != {"max_shard_bytes"} or not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
            raise AtlasError(where, "shard_rule", "must be {\"max_shard_bytes\": a positive whole number}")
        return cls(limit)


def predicted_files(layout: list[StoredTensor], ordered: list[StoredTensor] | None, index: Mapping[str, Any] | None,
                    rule: ShardRule | None, single: bool, writer: HeaderWriter) -> dict[str, Any] | None:
    """Each predicted file with its tensors, payload, header length (or bounds) and size; None where
    nothing says how the tensors are split into files.

    ``index``: an index copy, already compared with the layout name by name; ``rule`` with ``ordered``
    (the layout in save order): the sharding rule; ``single``: the checkpoint is one model.safetensors.
    """
    if index is not None:
        how = "the index copy carried beside config.json says"
        names = sorted(set(index["weight_map"].values()))
        groups = {n: [] for n in names}
        for t in layout:
            groups[index["weight_map"][t.name]].append(t)
    elif rule is not None:
        how = f"the sharding rule says: the tensors in the order the model holds them, a new file whenever the next would take the current one past {rule.max_shard_bytes:,} bytes"
        shards = greedy_shards(ordered or layout, rule.max_shard_bytes)
        groups = {shard_name(i, len(shards)): s for i, s in enumerate(shards)}
    elif single:
        how = "the checkpoint is one file"
        groups = {SINGLE_FILE: list(layout)}
    else:
        return None
    files = []
    for name, tensors in groups.items():
        entry = {"name": name, "tensors": len(tensors), "payload_bytes": payload(tensors), "header_bytes": None, "header_bounds": None,
                 "names": [t.name for t in tensors]}
        if writer.order == "dtype, name":
            entry["header_bytes"] = len(header_text(tensors, writer.metadata, writer.padded).encode())
        else:
            lo, hi = header_bounds(tensors, writer.metadata)
            entry["header_bounds"] = [lo, hi + (7 if writer.padded else 0)]
        entry["bytes"] = 8 + entry["header_bytes"] + entry["payload_bytes"] if entry["header_bytes"] is not None else None
        files.append(entry)
    if index is not None:
        index_bytes, index_from = index["bytes"], "the copy carried beside config.json"
    elif len(files) > 1:
        weight_map = {t.name: f["name"] for f, tensors in zip(files, groups.values()) for t in tensors}
        index_bytes, index_from = len(index_text(payload(layout), weight_map).encode()), "predicted as save_pretrained writes it"
    else:
        index_bytes, index_from = None, None
    return {"assigned_by": how, "files": files, "index_bytes": index_bytes, "index_bytes_from": index_from}
