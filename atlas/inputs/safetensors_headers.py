"""A strict reader of safetensors headers in local files: names, dtypes and shapes, never the data.

The format: an 8-byte little-endian header length N, N bytes of a JSON object mapping tensor names to
{"dtype", "shape", "data_offsets": [begin, end]} (plus an optional "__metadata__" of strings), then
the data buffer. Offsets are relative to the buffer. This reader accepts a file only when the buffer
is covered exactly: no overlaps, no gaps, nothing past the end, every extent equal to dtype × shape.
"""

from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from atlas.inputs.checkpoint import regular_file
from atlas.errors import AtlasError
from atlas.inputs.dtypes import DTYPE_BYTES

MAX_HEADER_BYTES = 100 * 1024 * 1024
MAX_INDEX_BYTES = 100 * 1024 * 1024
# A header is an object of entries, each an object holding the shape and offset lists: three levels.
# A little room above that, and far below what would exhaust the parser's recursion.
MAX_NESTING = 6
INDEX_NAME = "model.safetensors.index.json"
STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
SHARD_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*\.safetensors$")


@dataclass(frozen=True)
class HeaderTensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    file: str  # the file's name inside the checkpoint directory

    @property
    def elements(self) -> int:
        return math.prod(self.shape)


def _no_duplicate_keys(pairs):
    keys = [k for k, _ in pairs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"duplicate key {duplicates[0]!r}")
    return dict(pairs)


def nesting(raw: bytes) -> int:
    """How deep the JSON text nests its objects and arrays (brackets inside strings aside)."""
    depth = deepest = 0
    for bracket in re.sub(rb"[^\[\]{}]", b"", STRINGS.sub(b"", raw)):
        depth += 1 if bracket in b"[{" else -1
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            break
    return deepest


def _parse(path: Path, raw: bytes, field: str):
    if nesting(raw) > MAX_NESTING:
        raise AtlasError(path, field, f"JSON nested more than {MAX_NESTING} deep; a safetensors header is 3 deep")
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise AtlasError(path, field, f"not valid JSON: {e}") from None


def read_file(path: Path) -> list[HeaderTensor]:
    """The tensors one .safetensors file declares, after every structural check."""
    path = Path(path)
    size = regular_file(path)
    try:
        with path.open("rb") as f:
            prefix = f.read(8)
            if len(prefix) < 8:
                raise AtlasError(path, "header length", f"the file has {size} bytes, fewer than the 8 that give the header length")
            (header_len,) = struct.unpack("<Q", prefix)
            if header_len > MAX_HEADER_BYTES:
                raise AtlasError(path, "header length", f"{header_len:,} bytes is over the {MAX_HEADER_BYTES:,}-byte limit")
            if 8 + header_len > size:
                raise AtlasError(path, "header length", f"{header_len:,} bytes runs past the end of the {size:,}-byte file")
            raw = f.read(header_len)
    except OSError as e:
        raise AtlasError(path, None, f"cannot be read ({e.strerror})") from None
    header = _parse(path, raw, "header")
    if not isinstance(header, dict):
        raise AtlasError(path, "header", f"must be a JSON object, not {type(header).__name__}")
    _check_metadata(path, header.pop("__metadata__", {}))
    buffer_len = size - 8 - header_len
    tensors, extents = [], []
    for name, entry in header.items():
        dtype, shape, begin, end = _entry(path, name, entry)
        expected = math.prod(shape) * DTYPE_BYTES[dtype]
        if end - begin != expected:
            raise AtlasError(path, name, f"data_offsets span {end - begin:,} bytes but {dtype} × {list(shape)} needs {expected:,}")
        if end > buffer_len:
            raise AtlasError(path, name, f"data_offsets end at {end:,}, past the {buffer_len:,}-byte data buffer")
        extents.append((begin, end, name))
        tensors.append(HeaderTensor(name, dtype, shape, path.name))
    _check_coverage(path, sorted(extents), buffer_len)
    return tensors


def _check_metadata(path: Path, metadata) -> None:
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise AtlasError(path, "__metadata__", "must map strings to strings")


def _entry(path: Path, name: str, entry) -> tuple[str, tuple[int, ...], int, int]:
    if not isinstance(entry, dict):
        raise AtlasError(path, name, "entry must be an object with dtype, shape and data_offsets")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
    if missing:
        raise AtlasError(path, name, f"entry lacks {', '.join(missing)}")
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPE_BYTES:
        raise AtlasError(path, name, f"unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise AtlasError(path, name, f"shape must be a list of non-negative integers, not {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) and o >= 0 for o in offsets)
        or offsets[0] > offsets[1]
    ):
        raise AtlasError(path, name, f"data_offsets must be [begin, end] with 0 <= begin <= end, not {offsets!r}")
    return dtype, tuple(shape), offsets[0], offsets[1]


def _check_coverage(path: Path, extents: list[tuple[int, int, str]], buffer_len: int) -> None:
    """The tensors tile the data buffer exactly, in offset order."""
    position, previous = 0, None
    for begin, end, name in extents:
        if begin < position:
            raise AtlasError(path, name, f"data_offsets overlap {previous}'s (starts at {begin:,}, before {position:,})")
        if begin > position:
            raise AtlasError(path, name, f"a gap of {begin - position:,} bytes before it in the data buffer")
        position, previous = end, name
    if position != buffer_len:
        raise AtlasError(path, "data buffer", f"{buffer_len - position:,} bytes after the last tensor belong to none")


def read_checkpoint(directory: Path) -> tuple[list[HeaderTensor], dict]:
    """Every tensor of a local checkpoint: one .safetensors file, or shards listed by the index.

    Returns the tensors and a description of what was read (files, index total size if any).
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise AtlasError(directory, None, "not a directory")
    index_path = directory / INDEX_NAME
    if index_path.exists():
        return _read_sharded(directory, index_path)
    files = sorted(p for p in directory.glob("*.safetensors") if p.is_file())
    if len(files) != 1:
        raise AtlasError(directory, None, f"expected one .safetensors file or {INDEX_NAME}, found {len(files)} .safetensors files")
    return read_file(files[0]), {"files": [files[0].name], "index_total_size": None}


def _read_sharded(directory: Path, index_path: Path) -> tuple[list[HeaderTensor], dict]:
    size = regular_file(index_path)
    if size > MAX_INDEX_BYTES:
        raise AtlasError(index_path, None, f"{size:,} bytes is over the {MAX_INDEX_BYTES:,}-byte limit for an index")
    index = _parse(index_path, index_path.read_bytes(), None)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise AtlasError(index_path, "weight_map", "must map tensor names to shard file names")
    shards = sorted(set(weight_map.values()))
    for name, shard in weight_map.items():  # before any is opened: a shard is a file of this folder
        if not SHARD_NAME.match(shard):
            raise AtlasError(index_path, f"weight_map[{name!r}]", f"{shard!r} is not a plain .safetensors file name in the checkpoint folder")
    tensors = []
    for shard in shards:
        shard_path = directory / shard
        if not shard_path.exists():
            raise AtlasError(index_path, "weight_map", f"names the shard {shard}, which is not in {directory}")
        tensors += read_file(shard_path)
    for t in tensors:
        if weight_map.get(t.name) != t.file:
            raise AtlasError(directory / t.file, t.name, f"the index puts it in {weight_map.get(t.name) or 'no shard'}")
    found = {t.name for t in tensors}
    for name, shard in weight_map.items():
        if name not in found:
            raise AtlasError(directory / shard, name, "listed in the index but not in the shard's header")
    total = (index.get("metadata") or {}).get("total_size")
    return tensors, {"files": shards, "index_total_size": total}
