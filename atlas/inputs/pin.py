"""`python build.py pin ORG/REPO [--revision R] [--out DIR] [--endpoint URL]`: a checkpoint folder from the Hub.

It asks the Hub (or the server HF_ENDPOINT or --endpoint names) for config.json and for the header of
every safetensors file, by HTTP range requests through huggingface_hub's own get_safetensors_metadata;
no weights are downloaded. It writes config.json as served, checkpoint.json with the exact header
figures in the shape the pinned folders use (the build then checks the family's prediction against
them), and headers.json, every tensor's name, dtype, shape and file. The build itself never needs the
network: this command is the one place that does.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from atlas.errors import AtlasError

CHECKPOINTS = Path(__file__).parents[1] / "checkpoints"
HEADERS_NAME = "headers.json"


class Offline(Exception):
    """The Hub could not be reached at all (refused, no such host, offline mode)."""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="build.py pin", description="Pin a checkpoint: config.json and its safetensors headers from the Hub.")
    parser.add_argument("repo", metavar="ORG/REPO")
    parser.add_argument("--revision", default=None, help="a branch, tag or commit (default: main); the commit it resolves to is pinned")
    parser.add_argument("--out", type=Path, default=None, help="the folder to write (default: atlas/checkpoints/ORG/REPO)")
    parser.add_argument("--endpoint", default=None, help="the Hub's address (default: HF_ENDPOINT, else huggingface.co)")
    args = parser.parse_args(argv)
    if args.repo.count("/") != 1 or not all(args.repo.split("/")):
        print(f"error: {args.repo!r} is not ORG/REPO", file=sys.stderr)
        return 2
    out = args.out or CHECKPOINTS / args.repo
    try:
        written = pin(args.repo, args.revision, out, args.endpoint)
    except Offline as e:
        print(f"error: the Hub is not reachable ({e}); nothing was written", file=sys.stderr)
        return 1
    except AtlasError as e:
        print(f"error: {e}; nothing was written", file=sys.stderr)
        return 1
    figures = written["safetensors"]
    print(f"pinned {args.repo} at {written['revision']} into {out}/: {figures['tensors']:,} tensors in {figures['shards']} file"
          f"{'s' if figures['shards'] != 1 else ''}, {figures['payload_bytes']:,} bytes of payload")
    return 0


def pin(repo: str, revision: str | None, out: Path, endpoint: str | None = None) -> dict[str, Any]:
    """Fetch and write the folder; returns checkpoint.json's content. Nothing is written unless all was read."""
    from huggingface_hub import HfApi, constants, errors

    api = HfApi(endpoint=endpoint or constants.ENDPOINT)
    where = f"{api.endpoint}/{repo}"
    try:
        with tempfile.TemporaryDirectory(prefix="atlas-pin-") as cache:
            config_meta = _file_metadata(api, repo, "config.json", revision)
            commit = config_meta.commit_hash or revision or "unpinned"
            config_path = api.hf_hub_download(repo, "config.json", revision=commit if config_meta.commit_hash else revision, cache_dir=cache)
            config_bytes = Path(config_path).read_bytes()
            found = api.get_safetensors_metadata(repo, revision=commit if config_meta.commit_hash else revision)
            sizes = {name: _file_metadata(api, repo, name, commit).size for name in sorted(found.files_metadata)}
            index_bytes, index_text = None, None
            if found.sharded:
                index_bytes = _file_metadata(api, repo, constants.SAFETENSORS_INDEX_FILE, commit).size
                index_text = Path(api.hf_hub_download(repo, constants.SAFETENSORS_INDEX_FILE, revision=commit, cache_dir=cache)).read_bytes()
    except errors.OfflineModeIsEnabled as e:
        raise Offline(str(e)) from None
    except (errors.RepositoryNotFoundError, errors.RevisionNotFoundError) as e:
        raise AtlasError(where, revision or "main", f"not found ({type(e).__name__})") from None
    except errors.RemoteEntryNotFoundError as e:
        raise AtlasError(where, "config.json", f"not found ({type(e).__name__})") from None
    except errors.NotASafetensorsRepoError:
        raise AtlasError(where, "model.safetensors", "neither model.safetensors nor model.safetensors.index.json is in the repository") from None
    except errors.SafetensorsParsingError as e:
        raise AtlasError(where, "safetensors header", str(e).splitlines()[0]) from None
    except Exception as e:  # the HTTP client's own errors: a refused connection, no such host
        if _unreachable(e):
            raise Offline(f"{api.endpoint}: {type(e).__name__}") from None
        raise
    try:
        config = json.loads(config_bytes)
    except ValueError as e:
        raise AtlasError(f"{where} config.json", None, f"not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise AtlasError(f"{where} config.json", None, "must hold a JSON object")
    headers = _tensor_list(found)
    pinned = _checkpoint_json(repo, commit, api.endpoint, found, headers, sizes, index_bytes)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_bytes(config_bytes)
    (out / "checkpoint.json").write_text(json.dumps(pinned, indent=2) + "\n", encoding="utf-8")
    if index_text is not None:  # the build compares its prediction with the index name by name, file by file
        (out / constants.SAFETENSORS_INDEX_FILE).write_bytes(index_text)
    (out / HEADERS_NAME).write_text(json.dumps({"tensors": headers}, indent=1) + "\n", encoding="utf-8")
    return pinned


def _file_metadata(api, repo: str, filename: str, revision: str | None):
    from huggingface_hub import get_hf_file_metadata, hf_hub_url

    return get_hf_file_metadata(hf_hub_url(repo, filename, revision=revision, endpoint=api.endpoint))


def _unreachable(error: BaseException) -> bool:
    """A connection that never opened: refused, no such host, a timeout while connecting."""
    seen = error
    while seen is not None:
        if isinstance(seen, (ConnectionError, TimeoutError)) or type(seen).__name__ in ("ConnectError", "ConnectTimeout"):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _tensor_list(found) -> list[dict[str, Any]]:
    """Every tensor of every file, in file then offset order: name, dtype, shape, file."""
    rows = []
    for name in sorted(found.files_metadata):
        tensors = found.files_metadata[name].tensors
        for tensor_name, info in sorted(tensors.items(), key=lambda item: item[1].data_offsets):
            rows.append({"name": tensor_name, "dtype": info.dtype, "shape": list(info.shape), "file": name})
    return rows


def _checkpoint_json(repo, commit, endpoint, found, headers, sizes, index_bytes) -> dict[str, Any]:
    from atlas.inputs.dtypes import DTYPE_BYTES

    tensors_by_dtype: Counter = Counter()
    bytes_by_dtype: Counter = Counter()
    files = {}
    elements = 0
    for name in sorted(found.files_metadata):
        tensors = found.files_metadata[name].tensors
        payload = max((info.data_offsets[1] for info in tensors.values()), default=0)
        files[name] = {"tensors": len(tensors), "header_bytes": sizes[name] - 8 - payload, "bytes": sizes[name]}
    for t in headers:
        n = 1
        for d in t["shape"]:
            n *= d
        elements += n
        tensors_by_dtype[t["dtype"]] += 1
        bytes_by_dtype[t["dtype"]] += n * DTYPE_BYTES[t["dtype"]]
    figures: dict[str, Any] = {
        "tensors": len(headers),
        "tensors_by_dtype": dict(sorted(tensors_by_dtype.items())),
        "bytes_by_dtype": dict(sorted(bytes_by_dtype.items())),
        "payload_bytes": sum(bytes_by_dtype.values()),
        "shards": len(files),
        "files": files,
        "file_bytes": sum(sizes.values()),
    }
    notes = []
    total = (found.metadata or {}).get("total_size") if found.sharded else None
    if total is not None:
        counts = {2 * elements: "2 bytes per element", figures["payload_bytes"]: "payload bytes"}.get(total)  # payload first where both agree
        if counts is not None:
            figures.update(index_total_size=total, index_total_size_counts=counts)
        else:
            notes.append(f"the index's total_size, {total:,}, counts neither the payload bytes nor 2 bytes per element, so it is not pinned")
        figures["index_file_bytes"] = index_bytes
    source = (f"the safetensors headers of {repo} at commit {commit}, read by HTTP range requests from {endpoint} "
              f"(python build.py pin), the files' sizes from the same server")
    return {
        "repo": repo,
        "revision": commit,
        "safetensors": figures,
        "figure_sources": [{"figures": sorted(k for k in figures if k != "index_total_size_counts"), "source": source, "confidence": "high"}],
        "stored_buffers": [],
        "layout": notes,
        "provenance": f"config.json as served by {endpoint} for {repo} at commit {commit}; the header figures and {HEADERS_NAME} "
                      "(every tensor's name, dtype, shape and file) read from the same commit's safetensors headers, no weights downloaded.",
        "config_source": {"status": "verbatim", "from": f"Fetched by python build.py pin from {endpoint} at commit {commit}, byte for byte.",
                          "guessed": {}},
    }
