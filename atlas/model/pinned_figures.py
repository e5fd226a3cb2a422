"""The figures a checkpoint.json may pin, beside the predicted layout's: the checkpoint check's rows.

Each figure the prediction gives (tensors, bytes and tensors by dtype, payload, weight parameters, the
index's total_size, the files, their headers and sizes, particular named tensors) is set beside the
pinned value where checkpoint.json has one, with the source that pin names; a pinned figure the
prediction cannot give is shown with the reason, never passed silently.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from atlas.errors import AtlasError
from atlas.inputs.dtypes import DTYPE_BYTES
from atlas.inputs.family import StoredTensor

# Keys of checkpoint.json's "safetensors": the figures compared with the prediction. "files" maps each
# file's name to its own figures (FILE_FIGURES); the files' figures, "shards", "file_bytes" and
# "index_file_bytes" need the predicted files (atlas.model.files), the rest the layout alone.
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
    split into files) is shown with the reason, as not checked. ``files`` is atlas.model.files' prediction;
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
