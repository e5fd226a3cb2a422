"""A strict reader of safetensors headers: names, dtypes and shapes, never the data.

The format: an 8-byte little-endian header length N, N bytes of a JSON object mapping tensor names to
{"dtype", "shape", "data_offsets": [begin, end]} (plus an optional "__metadata__" of strings), then
the data buffer. Offsets are relative to the buffer. A header is accepted only when the buffer is
covered exactly: no overlaps, no gaps, nothing past the end, every extent equal to dtype × shape.

The checks take the header's bytes and the file's size, wherever they came from: a local file here,
an HTTP range read in atlas/build/pin.py, so that a pin accepts exactly what the local reader accepts. Every
check is linear in the number of tensors (sorting the extents aside), so an index of 140,000 names
reads in about a second (benchmarks/read_headers.py).
"""

from __future__ import annotations

import itertools
import json
import math
import operator
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from atlas.inputs.checkpoint import regular_file
from atlas.errors import AtlasError
from atlas.inputs.dtypes import DTYPE_BYTES
from atlas.errors import one_line

MAX_HEADER_BYTES = 100 * 1024 * 1024
MAX_INDEX_BYTES = 100 * 1024 * 1024
# A header is an object of entries, each an object holding the shape and offset lists: three levels.
# A little room above that, and far below what would exhaust the parser's recursion.
MAX_NESTING = 6
INDEX_NAME = "model.safetensors.index.json"
STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes and all, in one pass
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


@dataclass(frozen=True)
class Index:
    """model.safetensors.index.json, checked: which shard holds each tensor, and the declared total."""
    weight_map: dict[str, str]
    total_size: int | None

    @property
    def shards(self) -> list[str]:
        return sorted(set(self.weight_map.values()))


def object_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object's pairs as a dict, refused when a key repeats (json.loads would keep the last)."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:  # the first repeated key, in the file's order
            if key in seen:
                raise ValueError(f"duplicate key {one_line(repr(key))}")
            seen.add(key)
    return found


def nesting(raw: bytes) -> int:
    """How deep the JSON text nests its objects and arrays (brackets inside strings aside)."""
    brackets = STRINGS.sub(b"", raw).translate(None, _NOT_BRACKETS)
    # an opener steps 2 and a closer 0, less one for every bracket: the depth after each, summed in C
    steps = brackets.translate(_STEPS)
    return max(map(operator.sub, itertools.accumulate(steps), range(1, len(steps) + 1)), default=0)


_STEPS = bytes(2 if chr(b) in "[{" else 0 for b in range(256))
_NOT_BRACKETS = bytes(b for b in range(256) if chr(b) not in "[]{}")


def _parse(where, raw: bytes, field: str | None):
    if nesting(raw) > MAX_NESTING:
        raise AtlasError(where, field, f"JSON nested more than {MAX_NESTING} deep; a safetensors header is 3 deep")
    try:
        return json.loads(raw.decode("utf-8"), object_pairs_hook=object_without_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise AtlasError(where, field, f"not valid JSON: {one_line(e)}") from None


def check_header_length(where, header_len: int, file_size: int) -> None:
    """The 8-byte prefix's length: within the limit, and inside a file of ``file_size`` bytes."""
    if header_len > MAX_HEADER_BYTES:
        raise AtlasError(where, "header length", f"{header_len:,} bytes is over the {MAX_HEADER_BYTES:,}-byte limit")
    if 8 + header_len > file_size:
        raise AtlasError(where, "header length", f"{header_len:,} bytes runs past the end of the {file_size:,}-byte file")


def check_header(where, raw: bytes, file_size: int, file_name: str) -> list[HeaderTensor]:
    """The tensors a header of ``len(raw)`` bytes declares, in a file of ``file_size`` bytes called
    ``file_name``, after every structural check; errors name ``where`` (a path or a URL)."""
    check_header_length(where, len(raw), file_size)
    header = _parse(where, raw, "header")
    if not isinstance(header, dict):
        raise AtlasError(where, "header", f"must be a JSON object, not {type(header).__name__}")
    _check_metadata(where, header.pop("__metadata__", {}))
    buffer_len = file_size - 8 - len(raw)
    tensors, extents = [], []
    for name, entry in header.items():
        dtype, shape, begin, end = _entry(where, name, entry)
        expected = math.prod(shape) * DTYPE_BYTES[dtype]
        if end - begin != expected:
            raise AtlasError(where, one_line(name), f"data_offsets span {end - begin:,} bytes but {dtype} × {list(shape)} needs {expected:,}")
        if end > buffer_len:
            raise AtlasError(where, one_line(name), f"data_offsets end at {end:,}, past the {buffer_len:,}-byte data buffer")
        extents.append((begin, end, name))
        tensors.append(HeaderTensor(name, dtype, shape, file_name))
    _check_coverage(where, sorted(extents), buffer_len)
    return tensors


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
            check_header_length(path, header_len, size)
            raw = f.read(header_len)
    except OSError as e:
        raise AtlasError(path, None, f"cannot be read ({e.strerror})") from None
    return check_header(path, raw, size, path.name)


def _check_metadata(where, metadata) -> None:
    if not isinstance(metadata, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise AtlasError(where, "__metadata__", "must map strings to strings")


def _whole(value) -> bool:
    return type(value) is int  # a bool is not a size


def _entry(where, name: str, entry) -> tuple[str, tuple[int, ...], int, int]:
    if not isinstance(entry, dict):
        raise AtlasError(where, one_line(name), "entry must be an object with dtype, shape and data_offsets")
    try:
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    except KeyError:
        missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
        raise AtlasError(where, one_line(name), f"entry lacks {', '.join(missing)}") from None
    if type(dtype) is not str or dtype not in DTYPE_BYTES:
        raise AtlasError(where, one_line(name), f"unknown dtype {one_line(repr(dtype))}")
    if type(shape) is not list or not all(type(d) is int and d >= 0 for d in shape):
        raise AtlasError(where, one_line(name), f"shape must be a list of non-negative integers, not {one_line(repr(shape))}")
    if type(offsets) is not list or len(offsets) != 2 or not all(type(o) is int and o >= 0 for o in offsets) or offsets[0] > offsets[1]:
        raise AtlasError(where, one_line(name), f"data_offsets must be [begin, end] with 0 <= begin <= end, not {one_line(repr(offsets))}")
    return dtype, tuple(shape), offsets[0], offsets[1]


def _check_coverage(where, extents: list[tuple[int, int, str]], buffer_len: int) -> None:
    """The tensors tile the data buffer exactly, in offset order."""
    position, previous = 0, None
    for begin, end, name in extents:
        if begin < position:
            raise AtlasError(where, one_line(name), f"data_offsets overlap {one_line(previous)}'s (starts at {begin:,}, before {position:,})")
        if begin > position:
            raise AtlasError(where, one_line(name), f"a gap of {begin - position:,} bytes before it in the data buffer")
        position, previous = end, name
    if position != buffer_len:
        raise AtlasError(where, "data buffer", f"{buffer_len - position:,} bytes after the last tensor belong to none")


def check_index(where, raw: bytes) -> Index:
    """model.safetensors.index.json's bytes: a JSON object whose weight_map maps tensor names to plain
    .safetensors file names (no folder, no ``..``) and whose metadata.total_size, if given, is a whole
    number of bytes."""
    if len(raw) > MAX_INDEX_BYTES:
        raise AtlasError(where, None, f"{len(raw):,} bytes is over the {MAX_INDEX_BYTES:,}-byte limit for an index")
    index = _parse(where, raw, None)
    if not isinstance(index, dict):
        raise AtlasError(where, None, f"must hold a JSON object, not {type(index).__name__}")
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise AtlasError(where, "weight_map", "must map tensor names to shard file names")
    for name, shard in weight_map.items():  # before any is opened: a shard is a file of this folder
        if not SHARD_NAME.match(shard):
            raise AtlasError(where, f"weight_map[{one_line(repr(name))}]",
                             f"{one_line(repr(shard))} is not a plain .safetensors file name in the checkpoint folder")
    metadata = index.get("metadata", {})
    if not isinstance(metadata, dict):
        raise AtlasError(where, "metadata", f"must be a JSON object, not {type(metadata).__name__}")
    total = metadata.get("total_size")
    if total is not None and not (_whole(total) and total >= 0):
        raise AtlasError(where, "metadata.total_size", f"must be a whole number of bytes, not {one_line(repr(total))}")
    return Index(weight_map, total)


def check_index_agrees(index: Index, tensors: list[HeaderTensor], shard_where: Callable[[str], object]) -> None:
    """The shards' headers hold exactly the tensors the index puts in them; errors name the shard by
    ``shard_where(file name)`` (its path, or its URL)."""
    for t in tensors:
        if index.weight_map.get(t.name) != t.file:
            raise AtlasError(shard_where(t.file), one_line(t.name), f"the index puts it in {index.weight_map.get(t.name) or 'no shard'}")
    found = {t.name for t in tensors}
    for name, shard in index.weight_map.items():
        if name not in found:
            raise AtlasError(shard_where(shard), one_line(name), "listed in the index but not in the shard's header")


# The last checkpoint read, by what its files were when read: a build reads --weights in its preflight
# and again when it collects, and a header of 140,000 names is worth reading once.
_last_read: tuple[tuple, tuple[list[HeaderTensor], dict]] | None = None


def _signature(directory: Path) -> tuple:
    """What would change if any file the reader reads changed: each .safetensors file's and the index's
    identity, size and times (a rewrite changes its ctime)."""
    entries = []
    with os.scandir(directory) as found:
        for entry in found:
            if entry.name.endswith(".safetensors") or entry.name == INDEX_NAME:
                info = entry.stat()
                entries.append((entry.name, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    return (str(directory.resolve()), tuple(sorted(entries)))


def read_checkpoint(directory: Path) -> tuple[list[HeaderTensor], dict]:
    """Every tensor of a local checkpoint: one .safetensors file, or shards listed by the index.

    Returns the tensors and a description of what was read (files, index total size if any). The same
    folder asked for again, its files unchanged, is not read again.
    """
    global _last_read
    directory = Path(directory)
    if not directory.is_dir():
        raise AtlasError(directory, None, "not a directory")
    try:
        signature = _signature(directory)
    except OSError:
        signature = None  # unlistable: read_checkpoint's own reads say why
    if signature is not None and _last_read is not None and _last_read[0] == signature:
        tensors, described = _last_read[1]
        return list(tensors), dict(described)
    index_path = directory / INDEX_NAME
    if index_path.exists():
        result = _read_sharded(directory, index_path)
    else:
        files = sorted(p for p in directory.glob("*.safetensors") if p.is_file())
        if len(files) != 1:
            raise AtlasError(directory, None, f"expected one .safetensors file or {INDEX_NAME}, found {len(files)} .safetensors files")
        result = read_file(files[0]), {"files": [files[0].name], "index_total_size": None}
    if signature is not None:
        _last_read = (signature, result)
    return list(result[0]), dict(result[1])


def _read_sharded(directory: Path, index_path: Path) -> tuple[list[HeaderTensor], dict]:
    size = regular_file(index_path)
    if size > MAX_INDEX_BYTES:
        raise AtlasError(index_path, None, f"{size:,} bytes is over the {MAX_INDEX_BYTES:,}-byte limit for an index")
    try:
        raw = index_path.read_bytes()
    except OSError as e:
        raise AtlasError(index_path, None, f"cannot be read ({e.strerror})") from None
    index = check_index(index_path, raw)
    tensors = []
    for shard in index.shards:
        shard_path = directory / shard
        if not shard_path.exists():
            raise AtlasError(index_path, "weight_map", f"names the shard {shard}, which is not in {directory}")
        tensors += read_file(shard_path)
    check_index_agrees(index, tensors, lambda shard: directory / shard)
    return tensors, {"files": index.shards, "index_total_size": index.total_size}
