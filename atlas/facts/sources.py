"""Pinned source excerpts: the lines of the installed transformers that define each component.

An excerpt records the package, its version, the file's path inside the package, the line range,
the text and the text's sha256. ``verify`` re-reads the installed file independently of ``inspect``
and fails when a hash no longer matches or the package is not at the pinned version.
"""

from __future__ import annotations

import inspect
import re
import sys
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from atlas.errors import AtlasError
from atlas.facts.excerpt_text import SELF_CALL, sha256

LOCK_FILE = Path(__file__).resolve().parents[2] / "requirements.lock"


@cache
def pinned_version(package: str) -> str:
    """The version requirements.lock pins a package at."""
    for line in LOCK_FILE.read_text(encoding="utf-8").splitlines():
        name, _, version = line.partition("==")
        if re.sub(r"[-_.]+", "-", name).lower() == package.lower():
            return version.strip()
    raise AtlasError(LOCK_FILE, package, "not pinned")


@cache  # asked once per excerpt, and each answer parses the package's metadata anew
def _package_root(package: str) -> Path:
    return Path(metadata.distribution(package).locate_file(package))


@cache
def installed_version(package: str) -> str:
    return metadata.version(package)


def excerpt(obj: Any, package: str = "transformers") -> dict[str, Any]:
    """The pinned excerpt of a class or function, decorators included (located on the unwrapped object)."""
    target = inspect.unwrap(obj)
    path = Path(inspect.getsourcefile(target)).resolve()
    lines, start = inspect.getsourcelines(target)
    text = "".join(lines)
    return {
        "package": package,
        "version": installed_version(package),
        "path": path.relative_to(_package_root(package).resolve()).as_posix(),
        "start": start,
        "end": start + len(lines) - 1,
        "qualname": getattr(target, "__qualname__", getattr(obj, "__name__", "")),
        "sha256": sha256(text),
        "text": text,
    }


def class_excerpts(cls: type) -> dict[str, dict[str, Any]]:
    """A transformers class by its parts: where it is constructed, where it runs, and every method of
    its own that the forward calls (``self.expand_kv(``), and those they call, each pinned by name:
    a page that cites a call the forward leaves to such a method cites that method's lines."""
    parts = {}
    for method in ("__init__", "forward"):
        fn = cls.__dict__.get(method)
        if fn is not None:
            parts[method] = excerpt(fn)
    queue = [parts["forward"]["text"]] if "forward" in parts else []
    while queue:
        text = queue.pop(0)
        for name in SELF_CALL.findall(text):
            fn = cls.__dict__.get(name)
            if name not in parts and inspect.isfunction(fn):
                parts[name] = excerpt(fn)
                queue.append(parts[name]["text"])
        # an autograd function the code runs through its apply (BLOOM's GeLUFunction.apply(x)): its
        # forward, pinned as "GeLUFunction_forward", and the functions of the same file that forward calls
        module = sys.modules.get(cls.__module__)
        for name in FUNCTION_APPLY.findall(text):
            target = getattr(module, name, None)
            key = f"{name}_forward"
            if key not in parts and inspect.isclass(target) and _is_autograd_function(target) and "forward" in target.__dict__:
                parts[key] = excerpt(target.__dict__["forward"])
                queue.append(parts[key]["text"])
        if any(p.endswith("_forward") and parts[p]["qualname"] == p.replace("_forward", ".forward") and parts[p]["text"] == text
               for p in parts):  # inside such a forward
            for name in PLAIN_CALL.findall(text):
                fn = getattr(module, name, None)
                if name not in parts and inspect.isfunction(fn) and fn.__module__ == cls.__module__:
                    parts[name] = excerpt(fn)
                    queue.append(parts[name]["text"])
    return parts


FUNCTION_APPLY = re.compile(r"\b(\w+)\.apply\(")
PLAIN_CALL = re.compile(r"(?<![\w.])(\w+)\(")


def _is_autograd_function(target: type) -> bool:
    import torch

    return issubclass(target, torch.autograd.Function)


def verify(excerpts: list[dict[str, Any]]) -> None:
    """Every excerpt's lines, read straight from the installed file, hash to what was recorded."""
    for ex in excerpts:
        where = f"{ex['package']}/{ex['path']}:{ex['start']}-{ex['end']}"
        pinned = pinned_version(ex["package"])
        if ex["version"] != pinned:
            raise AtlasError(where, "version", f"excerpt taken from {ex['version']}, but {pinned} is pinned")
        installed = installed_version(ex["package"])
        if installed != pinned:
            raise AtlasError(where, "version", f"{installed} is installed, but {pinned} is pinned (run make env)")
        file_lines = (_package_root(ex["package"]) / ex["path"]).read_text(encoding="utf-8").splitlines(keepends=True)
        text = "".join(file_lines[ex["start"] - 1 : ex["end"]])
        if sha256(text) != ex["sha256"]:
            raise AtlasError(where, "sha256", "the installed file's lines no longer hash to the pinned excerpt")
