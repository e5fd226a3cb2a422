"""Pinned checkpoint data (atlas/checkpoints/<org>/<repo>/) and the model built from it on the meta device."""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from atlas.errors import AtlasError
from atlas.inputs.family import Family

CHECKPOINTS = Path(__file__).parents[1] / "checkpoints"


@dataclass(frozen=True)
class PinnedCheckpoint:
    repo: str  # "org/repo"
    folder: Path
    config: dict[str, Any]  # config.json exactly as released (the section the model reads, for a wrapper)
    pinned: dict[str, Any]  # checkpoint.json: revision, header totals, provenance
    # A multimodal wrapper's whole file, where ``config`` is the text model's section of it
    file_config: dict[str, Any] | None = None
    section: str | None = None  # that section's key ("text_config")

    @property
    def config_path(self) -> Path:
        return self.folder / "config.json"

    @property
    def pinned_path(self) -> Path:
        return self.folder / "checkpoint.json"

    def require(self, *keys: str) -> Any:
        """A value of checkpoint.json by its key path; missing is an error naming file and field."""
        value: Any = self.pinned
        for depth, key in enumerate(keys):
            if not isinstance(value, dict) or key not in value:
                raise AtlasError(self.pinned_path, ".".join(keys[: depth + 1]), "missing")
            value = value[key]
        return value


MAX_JSON_BYTES = 16 * 1024 * 1024  # a config is a few kilobytes; an index of 100,000 tensors a few megabytes


def regular_file(path: Path) -> int:
    """The size of ``path``, which must be a regular file (a link to one is fine): a folder, a pipe
    or a device is refused before it is opened, so nothing can make the reader hang."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise AtlasError(path, None, "file not found") from None
    except OSError as e:
        raise AtlasError(path, None, f"cannot be read ({e.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a pipe" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise AtlasError(path, None, f"is {kind}; only regular files are read")
    return info.st_size


def read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object from a regular file of sane size, decoded as UTF-8."""
    size = regular_file(path)
    if size > MAX_JSON_BYTES:
        raise AtlasError(path, None, f"{size:,} bytes is over the {MAX_JSON_BYTES:,}-byte limit")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise AtlasError(path, f"byte {e.start}", "not UTF-8 text") from None
    except OSError as e:
        raise AtlasError(path, None, f"cannot be read ({e.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise AtlasError(path, f"line {e.lineno} column {e.colno}", f"not valid JSON ({e.msg})") from None
    except RecursionError:
        raise AtlasError(path, None, "not valid JSON (nested too deep)") from None
    if not isinstance(data, dict):
        raise AtlasError(path, None, "must hold a JSON object")
    return data


def load_pinned(repo: str, root: Path = CHECKPOINTS, section: str | None = None) -> PinnedCheckpoint:
    """The checkpoint folder's two files; ``section``: the key of config.json whose object the model
    reads (a multimodal wrapper's "text_config"), the whole file kept beside it."""
    folder = root / repo
    if not folder.is_dir():
        raise AtlasError(folder, None, "no pinned checkpoint folder (config.json + checkpoint.json)")
    config = read_json_object(folder / "config.json")
    whole = None
    if section is not None:
        whole, config = config, config.get(section)
        if not isinstance(config, dict):
            raise AtlasError(folder / "config.json", section, "missing: the family reads its text model's config from this key")
    return PinnedCheckpoint(repo=repo, folder=folder, config=config, pinned=read_json_object(folder / "checkpoint.json"),
                            file_config=whole, section=section)


def transformers_class(family: Family, field: str):
    """The transformers class a family names in ``field`` ("model_class" or "config_class")."""
    import transformers

    name = getattr(family, field)
    try:
        return getattr(transformers, name)
    except AttributeError:
        raise AtlasError(f"atlas/families/{family.name}.py", field, f"transformers {transformers.__version__} has no class {name!r}") from None


def transformers_config(family: Family, checkpoint: PinnedCheckpoint):
    """The family's configuration class, loaded from the released values."""
    import transformers

    config_class = transformers_class(family, "config_class")
    values = {k: v for k, v in checkpoint.config.items() if k not in family.config_drop}
    values.update(family.config_overrides)
    from huggingface_hub.errors import StrictDataclassError  # what a config class's typed fields raise

    try:
        return config_class(**values)
    except (TypeError, ValueError, StrictDataclassError) as e:
        said = " ".join(str(e).split())  # one line, whatever the class's message spans
        field = re.match(r"Validation error for field '([^']+)'", said)
        if field:  # a typed field: name it, and say what it expected (the class's own words after the field)
            expected = re.search(r"expected (\w+), got (\w+) \(value: (.*?)\)", said)
            problem = f"must be {expected.group(1)}, not {expected.group(2)} {expected.group(3)}" if expected else said
            raise AtlasError(checkpoint.config_path, field.group(1), f"{family.config_class} rejects it: {problem}") from None
        raise AtlasError(checkpoint.config_path, None, f"{family.config_class} rejects it: {said}") from None


def build_on_meta(family: Family, config, source: Path | str | None = None):
    """The family's transformers model with every tensor on the meta device: shapes without memory.

    ``source`` is the config file the values came from: a model class that rejects them is one error
    naming it, not a traceback.
    """
    import torch
    import transformers

    model_class = transformers_class(family, "model_class")
    try:
        with torch.device("meta"):
            return model_class(config)
    except (AssertionError, ValueError, TypeError, RuntimeError, IndexError) as e:
        where = source or f"atlas/checkpoints/{family.checkpoint}/config.json"
        raise AtlasError(where, None, f"{family.model_class} cannot be built from it: {e or type(e).__name__}") from None
