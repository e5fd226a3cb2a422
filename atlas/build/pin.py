"""`python build.py pin ORG/REPO [--revision R] [--out DIR] [--endpoint URL] [--timeout S]`: a checkpoint
folder from the Hub.

It asks the Hub (or the server HF_ENDPOINT or --endpoint names) for config.json and for the header of
every safetensors file, by HTTP range requests of its own (the standard library's http.client, nothing
cached, the user's Hugging Face cache untouched); no weights are downloaded. What it reads is bounded:
the whole pin has one deadline (--timeout, 60 s by default) that every request and every byte of it
must meet, every body is capped by what it can be (a JSON file by the local reader's limit, a header by
its declared length, itself capped as the local reader caps it), and a server that answers a range
request with the whole file is refused, the body left unread. Headers and the index pass the very
checks the local reader applies (atlas/inputs/safetensors_headers.py), and the revision pinned is the commit
the server names, taken only as 40 hex digits.

It writes config.json as served, checkpoint.json with the exact header figures in the shape the pinned
folders use (the build then checks the family's prediction against them), the index copy where the
weights are sharded, and headers.json, every tensor's name, dtype, shape and file. The folder is written
beside the target and swapped in whole: a failure leaves the old folder as it was. Re-pinning a folder
keeps what only a person writes in its checkpoint.json. The build itself never needs the network: this
command is the one place that does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from atlas.inputs.checkpoint import MAX_JSON_BYTES, read_json_object
from atlas.errors import AtlasError
from atlas.build.hub import Hub, Offline, content_size
from atlas.errors import one_line
from atlas.inputs.dtypes import DTYPE_BYTES
from atlas.inputs.safetensors_headers import (
    INDEX_NAME, MAX_INDEX_BYTES, HeaderTensor, check_header, check_header_length, check_index, check_index_agrees,
)

CHECKPOINTS = Path(__file__).parents[1] / "checkpoints"
HEADERS_NAME = "headers.json"
DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT = 60.0
# The first range read of a safetensors file: its 8-byte length and, for most files, the whole header.
FIRST_READ = 100_000
REPO_PART = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$")
COMMIT = re.compile(r"^[0-9a-f]{40}$")
# What a pin writes into its folder; a folder holding anything else is not one a pin made.
PIN_FILES = ("config.json", "checkpoint.json", HEADERS_NAME, INDEX_NAME)
# checkpoint.json's keys a pin writes; any other key was written by a person and is kept.
PIN_KEYS = ("repo", "revision", "safetensors", "figure_sources", "stored_buffers", "layout", "provenance", "config_source")
PIN_FIGURES = ("tensors", "tensors_by_dtype", "bytes_by_dtype", "payload_bytes", "shards", "files", "file_bytes",
               "index_total_size", "index_total_size_counts", "index_file_bytes")
TOTAL_SIZE_NOTE = "the index's total_size, "  # how the one layout note a pin writes begins


class Usage(Exception):
    """An argument that cannot name what it should: exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # a usage error is one line too, exit 2
        self.exit(2, f"error: {one_line(message)} (python build.py pin --help lists the options)\n")


def main(argv: list[str]) -> int:
    parser = Parser(prog="build.py pin", description="Pin a checkpoint: config.json and its safetensors headers from the Hub.")
    parser.add_argument("repo", metavar="ORG/REPO")
    parser.add_argument("--revision", default=None, help="a branch, tag or commit (default: main); the commit it resolves to is pinned")
    parser.add_argument("--out", type=Path, default=None, help="the folder to write (default: atlas/checkpoints/ORG/REPO)")
    parser.add_argument("--endpoint", default=None, help="the Hub's address (default: HF_ENDPOINT, else https://huggingface.co)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                        help=f"the most the whole pin may take, every request included (default: {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--send-token", action="store_true",
                        help="send HF_TOKEN to the --endpoint or HF_ENDPOINT server too (by default only to https://huggingface.co)")
    args = parser.parse_args(argv)
    try:
        check_repo(args.repo)
        check_revision(args.revision)
        endpoint = endpoint_url(args.endpoint, "--endpoint") if args.endpoint is not None else \
            endpoint_url(os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT, "HF_ENDPOINT")
        if not (math.isfinite(args.timeout) and args.timeout > 0):
            raise Usage(f"--timeout: {args.timeout:g} is not a positive number of seconds")
    except Usage as e:
        print(f"error: {one_line(e)}; nothing was written", file=sys.stderr)
        return 2
    out = args.out or CHECKPOINTS / args.repo
    try:
        written = pin(args.repo, args.revision, out, endpoint, timeout=args.timeout, send_token=args.send_token)
    except Offline as e:
        print(f"error: the Hub is not reachable ({one_line(e)}); nothing was written", file=sys.stderr)
        return 1
    except AtlasError as e:
        print(f"error: {one_line(e)}; nothing was written", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted; nothing was written", file=sys.stderr)
        return 130
    except Exception as e:  # a bug of the atlas, not of the input or the server: still one line
        print(f"error: internal error in atlas/build/pin.py: {type(e).__name__}: {one_line(e)}; nothing was written (please report this)",
              file=sys.stderr)
        return 1
    figures = written["safetensors"]
    print(f"pinned {one_line(args.repo)} at {written['revision']} into {one_line(out)}/: {figures['tensors']:,} tensors in "
          f"{figures['shards']} file{'s' if figures['shards'] != 1 else ''}, {figures['payload_bytes']:,} bytes of payload")
    return 0


# --- the arguments ----------------------------------------------------------------------------------


def check_repo(repo: str) -> None:
    """ORG/REPO as the Hub names repositories: two parts of letters, digits, '-', '_' and '.', neither
    '..' nor a space, so that the name can only ever be a path of the Hub and of atlas/checkpoints."""
    parts = repo.split("/")
    if len(parts) != 2 or len(repo) > 96 or not all(REPO_PART.match(p) and ".." not in p for p in parts):
        raise Usage(f"{repo!r} is not ORG/REPO (two names of letters, digits, '-', '_' and '.', each starting with a letter or digit)")


def check_revision(revision: str | None) -> None:
    if revision is not None and (not revision or len(revision) > 256 or one_line(revision) != revision):
        raise Usage(f"--revision: {revision!r} is not a branch, tag or commit")


def endpoint_url(text: str, where: str) -> str:
    """The server's address without a final slash; only http:// and https:// with a host."""
    try:
        parsed = urlsplit(text)
        parsed.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.query or parsed.fragment \
            or parsed.username or one_line(text) != text:
        raise Usage(f"{where}: {text!r} is not an http:// or https:// address")
    return text.rstrip("/")


# --- the pin ----------------------------------------------------------------------------------------


def pin(repo: str, revision: str | None, out: Path, endpoint: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
        send_token: bool = False) -> dict[str, Any]:
    """Fetch and write the folder; returns checkpoint.json's content. Nothing is written unless all was
    read and checked, and then the folder is swapped in whole."""
    check_repo(repo)
    endpoint = endpoint_url(endpoint or DEFAULT_ENDPOINT, "--endpoint")
    out = Path(out)
    out = out.parent.resolve() / out.name
    kept = _existing_folder(out, repo)  # refused before any request
    token = os.environ.get("HF_TOKEN", "").strip() or None
    hub = Hub(endpoint, timeout, token if endpoint == DEFAULT_ENDPOINT or send_token else None)
    config_url = f"{endpoint}/{repo}/resolve/{quote(revision or 'main', safe='')}/config.json"
    config = hub.get(config_url, MAX_JSON_BYTES)
    commit = _commit(config_url, config.commit, revision)
    at = f"{endpoint}/{repo}/resolve/{commit}/"
    # model.safetensors first, as transformers looks for it first; the index only where it is missing
    single = read_header(hub, at + "model.safetensors", "model.safetensors", commit, missing_ok=True)
    index_bytes, index = None, None
    if single is not None:
        headers = {"model.safetensors": single}
    else:
        index_answer = hub.get(at + INDEX_NAME, MAX_INDEX_BYTES, missing_ok=True)
        if index_answer is None:
            raise AtlasError(at + "model.safetensors", None, f"not found, nor {INDEX_NAME}: the repository holds no safetensors weights to pin")
        _same_commit(at + INDEX_NAME, index_answer.commit, commit)
        index_bytes = index_answer.body
        index = check_index(at + INDEX_NAME, index_bytes)
        headers = {shard: read_header(hub, at + shard, shard, commit) for shard in index.shards}
        check_index_agrees(index, [t for tensors, _ in headers.values() for t in tensors], lambda shard: at + shard)
    tensors = [t for name in sorted(headers) for t in headers[name][0]]
    pinned = _merged(_checkpoint_json(repo, commit, endpoint, headers, index_bytes, index), kept)
    files = {"config.json": config.body, "checkpoint.json": (json.dumps(pinned, indent=2) + "\n").encode(), HEADERS_NAME: _headers_json(tensors)}
    if index_bytes is not None:  # the build compares its prediction with the index name by name, file by file
        files[INDEX_NAME] = index_bytes

    def config_as_the_build_reads_it(folder: Path) -> None:
        try:
            read_json_object(folder / "config.json")
        except AtlasError as e:
            raise AtlasError(config_url, e.field, e.problem) from None

    write_folder(out, files, config_as_the_build_reads_it)
    return pinned


def read_header(hub: Hub, url: str, name: str, commit: str, missing_ok: bool = False) -> tuple[list[HeaderTensor], int] | None:
    """One safetensors file's tensors and size, by one or two range reads: never more than its header."""
    first = hub.get(url, FIRST_READ, (0, FIRST_READ - 1), missing_ok=missing_ok)
    if first is None:
        return None
    _same_commit(url, first.commit, commit)
    size = content_size(first)
    if len(first.body) < 8:
        raise AtlasError(url, "header length", f"the file has {size} bytes, fewer than the 8 that give the header length")
    (header_len,) = struct.unpack("<Q", first.body[:8])
    check_header_length(url, header_len, size)
    raw = first.body[8:8 + header_len]
    if len(raw) < header_len:
        rest = hub.get(url, header_len - len(raw), (8 + len(raw), 8 + header_len - 1))
        _same_commit(url, rest.commit, commit)
        raw += rest.body
    return check_header(url, raw, size, name), size


def _commit(url: str, served: str | None, asked: str | None) -> str:
    """The commit the server says it served, which is what is pinned: 40 hex digits and nothing else."""
    if served is None:
        raise AtlasError(url, "X-Repo-Commit", "missing: the server did not say which commit it served, so there is none to pin")
    if not COMMIT.match(served):
        raise AtlasError(url, "X-Repo-Commit", f"{served[:100]!r} is not a commit (40 hex digits)")
    if asked is not None and re.fullmatch(r"[0-9a-fA-F]{40}", asked) and asked.lower() != served:
        raise AtlasError(url, "X-Repo-Commit", f"the server served commit {served}, not the {asked} asked for")
    return served


def _same_commit(url: str, served: str | None, commit: str) -> None:
    if served is not None and served != commit:
        raise AtlasError(url, "X-Repo-Commit", f"{served[:100]!r}, not the commit {commit} config.json came from")


def _headers_json(tensors: list[HeaderTensor]) -> bytes:
    rows = [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape), "file": t.file} for t in tensors]
    return (json.dumps({"tensors": rows}, indent=1) + "\n").encode()


def _checkpoint_json(repo, commit, endpoint, headers: dict[str, tuple[list[HeaderTensor], int]], index_bytes, index) -> dict[str, Any]:
    tensors_by_dtype: Counter = Counter()
    bytes_by_dtype: Counter = Counter()
    files = {}
    elements = 0
    for name in sorted(headers):
        tensors, size = headers[name]
        payload = sum(t.elements * DTYPE_BYTES[t.dtype] for t in tensors)  # the buffer, which the tensors tile exactly
        files[name] = {"tensors": len(tensors), "header_bytes": size - 8 - payload, "bytes": size}
        for t in tensors:
            elements += t.elements
            tensors_by_dtype[t.dtype] += 1
            bytes_by_dtype[t.dtype] += t.elements * DTYPE_BYTES[t.dtype]
    figures: dict[str, Any] = {
        "tensors": sum(f["tensors"] for f in files.values()),
        "tensors_by_dtype": dict(sorted(tensors_by_dtype.items())),
        "bytes_by_dtype": dict(sorted(bytes_by_dtype.items())),
        "payload_bytes": sum(bytes_by_dtype.values()),
        "shards": len(files),
        "files": files,
        "file_bytes": sum(f["bytes"] for f in files.values()),
    }
    notes = []
    if index is not None:
        total = index.total_size
        if total is not None:
            counts = {2 * elements: "2 bytes per element", figures["payload_bytes"]: "payload bytes"}.get(total)  # payload first where both agree
            if counts is not None:
                figures.update(index_total_size=total, index_total_size_counts=counts)
            else:
                notes.append(f"{TOTAL_SIZE_NOTE}{total:,}, counts neither the payload bytes nor 2 bytes per element, so it is not pinned")
        figures["index_file_bytes"] = len(index_bytes)
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


# --- the folder -------------------------------------------------------------------------------------


def _existing_folder(out: Path, repo: str) -> dict[str, Any] | None:
    """What of the folder already at ``out`` a pin keeps (its checkpoint.json, where there is one), after
    refusing, before any request, a folder the pin could not replace without losing something."""
    if out.is_symlink():
        raise AtlasError("--out", str(out), "is a symbolic link; give the folder it points to")
    if out.exists() and not out.is_dir():
        raise AtlasError("--out", str(out), "is not a folder; give a folder (the file was left as it is)")
    if not out.exists():
        _makeable(out)
        return None
    foreign = sorted(n for n in os.listdir(out) if n not in PIN_FILES)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise AtlasError("--out", str(out), f"holds {shown}, which a pin does not write; pin into a new folder or one a pin wrote")
    if not (out / "checkpoint.json").exists():
        return None
    old = read_json_object(out / "checkpoint.json")
    figures = old.get("safetensors", {})
    by_hand = sorted(f"safetensors.{k}" for k in (figures if isinstance(figures, dict) else {}) if k not in PIN_FIGURES)
    if by_hand:  # figures a pin would drop: a person measured them, and the new ones may not agree
        raise AtlasError(out / "checkpoint.json", ", ".join(by_hand),
                         "figures a pin does not measure; remove them (the pin measures the rest) or pin into a new folder")
    kept = _by_hand(old)
    if kept and old.get("repo") != repo:
        raise AtlasError(out / "checkpoint.json", ", ".join(kept),
                         f"written by hand for {one_line(old.get('repo'))!r}, not {repo}; pin into a new folder or remove them first")
    return {k: old[k] for k in kept} if kept else None


def _by_hand(old: dict[str, Any]) -> list[str]:
    """checkpoint.json's keys a person wrote: any a pin does not write, stored buffers listed, layout notes."""
    kept = [k for k in old if k not in PIN_KEYS]
    if old.get("stored_buffers"):
        kept.append("stored_buffers")
    if any(not (isinstance(n, str) and n.startswith(TOTAL_SIZE_NOTE)) for n in old.get("layout") or []):
        kept.append("layout")
    return kept


def _merged(pinned: dict[str, Any], kept: dict[str, Any] | None) -> dict[str, Any]:
    """The new checkpoint.json with what a person wrote in the old one: their keys after the revision,
    their stored buffers, their layout notes before the pin's own."""
    if not kept:
        return pinned
    merged: dict[str, Any] = {}
    for key, value in pinned.items():
        merged[key] = value
        if key == "revision":
            merged.update((k, v) for k, v in kept.items() if k not in PIN_KEYS)
    if "stored_buffers" in kept:
        merged["stored_buffers"] = kept["stored_buffers"]
    if "layout" in kept:
        mine = [n for n in kept["layout"] if not (isinstance(n, str) and n.startswith(TOTAL_SIZE_NOTE))]
        merged["layout"] = mine + pinned["layout"]
    return merged


def _makeable(out: Path) -> None:
    """``out`` can be made: its nearest existing ancestor is a folder this user may write in."""
    ancestor = out.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise AtlasError("--out", str(out), f"cannot be made: {ancestor} is not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise AtlasError("--out", str(out), f"cannot be made: {ancestor} is not writable")


def write_folder(out: Path, files: dict[str, bytes], check=None) -> None:
    """``files`` as the folder ``out``, whole or not at all: written beside it, each file flushed to the
    disk, ``check``ed there, then swapped in with one exchange; the old folder, files of another
    repository included, goes."""
    from atlas.build.publish import exchange

    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.pin-", dir=out.parent))
    except OSError as e:
        raise AtlasError("--out", str(out), f"cannot be made ({e.strerror or type(e).__name__})") from None
    try:
        for name, data in files.items():
            with open(staging / name, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp's 0700 would make the pinned folder private
        if check is not None:
            check(staging)
        if out.exists():
            exchange(staging, out)  # the old folder is now at ``staging``, removed below
        else:
            os.rename(staging, out)
    except OSError as e:
        raise AtlasError(out, None, f"cannot be written ({e.strerror or type(e).__name__})") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
