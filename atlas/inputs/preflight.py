"""The inputs, checked before anything is built: one clear error instead of a wrong page or a traceback.

A family is three inputs a person writes: its module (``atlas/families/<name>.py``), its notes and its
checkpoint folder (config.json, checkpoint.json). Each check here names the file and the field at
fault. The cheap ones run on the raw files before transformers is imported, so an absurd config (a
hundred thousand layers) is refused in a moment, before any module is made; the ones that need the
configuration class run once it is loaded, and the last one (which sizes the model took from the class
rather than the file) runs on the meta build, where transformers reads them.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import re
from typing import Any, Iterator, Mapping

from atlas.errors import AtlasError
from atlas.inputs.config_keys import EXPERT_KEYS

MAX_LAYERS = 10_000
MAX_PARAMETERS = 10**14

# The core sizes under the names configs give them. The bound check runs before transformers (and its
# classes' attribute maps) is loaded, so it reads the raw file under every common spelling.
LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
WIDTH = ("hidden_size", "n_embd", "d_model")
HEADS = ("num_attention_heads", "n_head", "num_heads")
VOCAB = ("vocab_size",)
FEED_FORWARD = ("intermediate_size", "moe_intermediate_size", "n_inner", "ffn_dim", "d_ff")
EXPERTS = EXPERT_KEYS
CORE = LAYERS + WIDTH + HEADS + VOCAB  # must be in config.json as a positive integer
MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")
REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


# --- the family module ------------------------------------------------------------------------------

def check_inputs(name: str):
    """A family's module, notes and checkpoint folder, checked without transformers; the checkpoint."""
    from atlas.inputs.checkpoint import load_pinned
    from atlas.families import load

    family = load(name)
    check_family(family)
    checkpoint = load_pinned(family.checkpoint, section=family.config_section)
    check_pinned(checkpoint)
    check_raw_config(family, checkpoint)
    return family, checkpoint


def check_family(family) -> None:
    """What a family module declares, before it is used."""
    source = f"atlas/families/{family.name}.py"
    for field in ("title", "vendor", "summary", "model_class", "config_class"):
        value = getattr(family, field)
        if not isinstance(value, str) or not value.strip():
            raise AtlasError(source, field, f"must be a non-empty string, not {value!r}")
    if not isinstance(family.released, str) or not MONTH.match(family.released):
        raise AtlasError(source, "released", f"must be the release month as YYYY-MM (e.g. 2025-07), not {family.released!r}")
    if not isinstance(family.checkpoint, str) or not REPO.match(family.checkpoint) or ".." in family.checkpoint:
        raise AtlasError(source, "checkpoint", f"must name a checkpoint as org/repo, not {family.checkpoint!r}")
    if not isinstance(family.tags, tuple) or not all(isinstance(t, str) for t in family.tags):
        raise AtlasError(source, "tags", "must be a tuple of strings")
    for key, reason in dict(family.config_defaults).items():
        if not isinstance(reason, str) or not reason.strip():
            raise AtlasError(source, f"config_defaults[{key!r}]", "must give the reason the class default is right here")
    if family.wrapper_class is not None and not family.config_section:
        raise AtlasError(source, "wrapper_class", "needs config_section: the key of config.json the text model reads")
    reasons = dict(family.override_reasons)
    for key in family.config_overrides:
        reason = reasons.get(key)
        if not isinstance(reason, str) or not reason.strip():
            raise AtlasError(source, f"override_reasons[{key!r}]", f"missing: say why config_overrides changes {key!r} "
                                                                   "(the page shows every edit with its reason)")
    for key in reasons:
        if key not in family.config_overrides:
            raise AtlasError(source, f"override_reasons[{key!r}]", "gives a reason for a key config_overrides does not change")
    _check_published_active(source, dict(family.published_active))
    from atlas.inputs.notes import FAMILIES

    for note in family.notes or (family.name,):
        if not (FAMILIES / f"{note}.md").is_file():
            raise AtlasError(f"atlas/families/{note}.md", None, f"the notes file {source} names is missing")


def _check_published_active(source: str, published: dict) -> None:
    """The vendor's active-parameter range: two positive whole numbers in order, the address a reader checks it
    at, and the words it is given in."""
    if not published:
        return
    fewest, most = published.get("fewest"), published.get("most")
    if not (_integer(fewest) and _integer(most) and 0 < fewest <= most):
        raise AtlasError(source, "published_active", f"fewest and most must be whole numbers with 0 < fewest <= most, not {fewest!r} and {most!r}")
    where = published.get("source")
    if not isinstance(where, str) or not where.startswith("https://"):
        raise AtlasError(source, "published_active.source", f"must be the https:// address a reader can check the figure at, not {where!r}")
    if not isinstance(published.get("says"), str) or not published["says"].strip():
        raise AtlasError(source, "published_active.says", "must give the vendor's words for the figure")


# --- checkpoint.json ---------------------------------------------------------------------------------

def check_pinned(checkpoint) -> None:
    """checkpoint.json: the fields the build reads, each of the type it is read as."""
    from atlas.inputs.dtypes import DTYPE_BYTES

    where, pinned = checkpoint.pinned_path, checkpoint.pinned
    if pinned.get("repo") != checkpoint.repo:
        raise AtlasError(where, "repo", f"says {pinned.get('repo')!r}, but the file is in the folder of {checkpoint.repo!r}")
    if not isinstance(pinned.get("revision"), str) or not pinned["revision"].strip():
        raise AtlasError(where, "revision", "missing: give the Hub revision (a commit) the figures are from, or \"unpinned\"")
    strings = {"prefix_removed": str, "provenance": str, "revision_note": str, "weight_dtype": str}
    for key, kind in strings.items():
        if key in pinned and not isinstance(pinned[key], kind):
            raise AtlasError(where, key, f"must be a string, not {type(pinned[key]).__name__}")
    if "weight_dtype" in pinned and pinned["weight_dtype"] not in DTYPE_BYTES:
        raise AtlasError(where, "weight_dtype", f"unknown dtype {pinned['weight_dtype']!r}; known: {', '.join(DTYPE_BYTES)}")
    for key in ("layout", "tied_stored"):
        if key in pinned and (not isinstance(pinned[key], list) or not all(isinstance(x, str) for x in pinned[key])):
            raise AtlasError(where, key, "must be a list of strings")
    if "safetensors" in pinned and not isinstance(pinned["safetensors"], dict):
        raise AtlasError(where, "safetensors", "must be an object of header figures")
    _check_config_source(where, pinned, checkpoint.file_config or checkpoint.config)
    _check_published(where, pinned)
    buffers = pinned.get("stored_buffers", [])
    if not isinstance(buffers, list):
        raise AtlasError(where, "stored_buffers", "must be a list of stored tensors")
    for i, entry in enumerate(buffers):
        field = f"stored_buffers[{i}]"
        if not isinstance(entry, dict):
            raise AtlasError(where, field, "must be an object with name, dtype and shape")
        missing = [k for k in ("name", "dtype", "shape") if k not in entry]
        if missing:
            raise AtlasError(where, f"{field}.{missing[0]}", "missing")
        if not isinstance(entry["name"], str) or not entry["name"]:
            raise AtlasError(where, f"{field}.name", "must be a tensor name")
        if not isinstance(entry["dtype"], str) or entry["dtype"] not in DTYPE_BYTES:  # a list is not hashable: not looked up
            raise AtlasError(where, f"{field}.dtype", f"unknown dtype {entry['dtype']!r}; known: {', '.join(DTYPE_BYTES)}")
        shape = entry["shape"]
        if not isinstance(shape, list) or not all(_integer(d) and d >= 0 for d in shape):
            raise AtlasError(where, f"{field}.shape", f"must be a list of non-negative integers, not {shape!r}")
        if entry.get("role", "buffer") not in ("parameter", "buffer", "scale", "rotary"):
            raise AtlasError(where, f"{field}.role", f"must be parameter, buffer, scale or rotary, not {entry.get('role')!r}")


# checkpoint.json's published figures (atlas.facts.published): a count in a unit ("7.27B", "0.36B", "1T") or
# to the unit, grouped or not ("2,795,443,200"); each set beside the atlas's count of the same name
PUBLISHED_FIGURE = re.compile(r"(\d+)(?:\.(\d+))?([KMBT])|(\d{1,3}(?:,\d{3})+|\d+)()()")
PUBLISHED_FIGURES = ("total", "active")


def _check_published(where, pinned) -> None:
    """published: the vendor's counts as it states them, where a reader can check them, and why ours differ."""
    published = pinned.get("published")
    if published is None:
        return
    if not isinstance(published, dict) or "total" not in published:
        raise AtlasError(where, "published", "must be an object with the vendor's total, its words (says) and its source")
    if extra := sorted(set(published) - {*PUBLISHED_FIGURES, "says", "source", "differs"}):
        raise AtlasError(where, f"published.{extra[0]}", "unknown: give total, active, says, source and differs only")
    for what in PUBLISHED_FIGURES:
        if what in published and not (isinstance(published[what], str) and PUBLISHED_FIGURE.fullmatch(published[what])):
            raise AtlasError(where, f"published.{what}", f"must be a count as the vendor writes it: a number and K, M, B or T (\"7.27B\"), or the whole count (\"2,795,443,200\"), not {published[what]!r}")
    for key in ("says", "differs"):
        if key in published and not (isinstance(published[key], str) and published[key].strip()):
            raise AtlasError(where, f"published.{key}", "must be words (a non-empty string)")
    if "says" not in published:
        raise AtlasError(where, "published.says", "missing: give the vendor's words for the figure")
    if not (isinstance(published.get("source"), str) and published["source"].startswith("https://")):
        raise AtlasError(where, "published.source", f"must be the https:// address a reader can check the figure at, not {published.get('source')!r}")


CONFIG_STATUSES = {  # how close config.json is to the released file, weakest last
    "verbatim": "a copy of the released file",
    "copy": "transcribed from a literal of the released file in someone's code",
    "reconstructed-partial": "assembled from partial copies and defaults, some values unconfirmed",
    "reconstructed": "assembled from fixtures, partial copies and transformers' defaults",
}


def _check_config_source(where, pinned, config) -> None:
    """config_source: how far to trust config.json, and which of its values are guesses."""
    source = pinned.get("config_source")
    if source is None:
        return
    if not isinstance(source, dict):
        raise AtlasError(where, "config_source", "must be an object with status, from and guessed")
    if source.get("status") not in CONFIG_STATUSES:
        raise AtlasError(where, "config_source.status", f"must be one of {', '.join(CONFIG_STATUSES)}, not {source.get('status')!r}")
    said = source.get("from")
    if not isinstance(said, str) or not said.strip() or not said.strip()[0].isupper() or not said.strip().endswith("."):
        raise AtlasError(where, "config_source.from", "must say in a sentence (a capital first, a full stop last) where the file comes from")
    guessed = source.get("guessed", {})
    if not isinstance(guessed, dict) or not all(isinstance(v, str) and v.strip() for v in guessed.values()):
        raise AtlasError(where, "config_source.guessed", "must map each guessed key of config.json to why it is a guess")
    for key in guessed:
        if _dotted(config, key) is _ABSENT:
            raise AtlasError(where, f"config_source.guessed[{key!r}]", "names no key of config.json")


_ABSENT = object()


def _dotted(config, key: str):
    """config.json's value at a dotted key ("rope_scaling.factor"), or _ABSENT."""
    value = config
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value


# --- config.json, raw ----------------------------------------------------------------------------------

def check_raw_config(family, checkpoint) -> None:
    """config.json before transformers reads it: the core sizes and the bounds."""
    where, config = checkpoint.config_path, checkpoint.config
    values = {**config, **family.config_overrides}
    layers = _first(values, LAYERS)
    for key in CORE + FEED_FORWARD + EXPERTS:
        if key in values and values[key] is not None and not (_integer(values[key]) and values[key] >= (1 if key in CORE else 0)):
            if key not in CORE and isinstance(values[key], list):
                _check_per_layer(where, key, values[key], layers)
                continue
            need = "a positive integer" if key in CORE else "a non-negative integer"
            raise AtlasError(where, key, f"must be {need}, not {values[key]!r}")
    if layers is not None and layers > MAX_LAYERS:
        raise AtlasError(where, _key(values, LAYERS), f"{layers:,} layers is past the atlas's bound of {MAX_LAYERS:,}")
    estimate = rough_parameters(values)
    if estimate > MAX_PARAMETERS:
        sizes = {k: _largest(values[k]) for k in CORE + FEED_FORWARD + EXPERTS if _largest(values.get(k)) is not None}
        largest = max(sizes, key=sizes.get)  # the field a typo most likely blew up
        listed = ", ".join(f"{k} {v:,}" for k, v in sizes.items())
        raise AtlasError(where, largest, f"its sizes ({listed}) make about {estimate:.1e} parameters, past the atlas's "
                                         f"bound of {MAX_PARAMETERS:.0e}")


def _check_per_layer(where, key: str, sizes: list, layers: int | None) -> None:
    """A feed-forward width or expert count given per layer (Hunyuan's moe_intermediate_size): a list
    of non-negative integers, one for each layer."""
    if not sizes or not all(_integer(v) and v >= 0 for v in sizes):
        raise AtlasError(where, key, f"must be a non-negative integer or a list of them, one per layer, not {sizes!r}")
    if layers is not None and len(sizes) != layers:
        raise AtlasError(where, key, f"lists {len(sizes)} sizes, one per layer, but the model has {layers} layers")


def _largest(value: Any) -> int | None:
    """A size, or the largest of a list of sizes per layer."""
    if isinstance(value, list) and value and all(_integer(v) for v in value):
        return max(value)
    return value if _integer(value) else None


def rough_parameters(values: Mapping[str, Any]) -> int:
    """An upper estimate of a decoder's parameters from its raw sizes, before any module is made:
    embeddings and head, four width-square attention matrices and three feed-forward matrices per
    expert (and one more, for a shared expert or a dense block) in every layer."""
    width = _first(values, WIDTH) or 0
    layers = _first(values, LAYERS) or 0
    vocab = _first(values, VOCAB) or 0
    feed_forward = max([_largest(values[k]) for k in FEED_FORWARD if _largest(values.get(k)) is not None] or [4 * width])
    experts = max([_largest(values[k]) for k in EXPERTS if _largest(values.get(k)) is not None] or [0])
    return 2 * vocab * width + layers * (4 * width * width + 3 * width * feed_forward * (experts + 1))


# --- config.json, as the configuration class reads it ---------------------------------------------------

def check_config_values(family, checkpoint) -> None:
    """config.json names the family's class, and every value it gives a parameter of the configuration
    class has the type of the class's default: an integer where it counts something, a number, a flag
    (None is a value of its own)."""
    from atlas.inputs.checkpoint import transformers_class

    transformers_class(family, "model_class")  # a misspelt class is named as such, before what follows
    if family.wrapper_class:
        transformers_class(family, "wrapper_class")
    config_class = transformers_class(family, "config_class")
    defaults = _defaults(config_class)
    where, config = checkpoint.config_path, checkpoint.config
    architectures = (checkpoint.file_config or config).get("architectures")
    named = family.wrapper_class or family.model_class  # a wrapper's file names the wrapper
    if "architectures" not in family.config_overrides:
        if not isinstance(architectures, list) or not architectures:
            raise AtlasError(where, "architectures", f"missing: it must name the family's class {named}")
        if named not in architectures:
            raise AtlasError(where, "architectures", f"names {', '.join(map(str, architectures))}, but the family "
                                                     f"atlas/families/{family.name}.py builds {named}")
    for key, value in checkpoint.config.items():
        key = config_class.attribute_map.get(key, key)
        if key in family.config_drop or key in family.config_overrides or key not in defaults or value is None:
            continue
        if key.endswith("_token_id"):  # an id, or a list of them (Gemma's two end-of-turn tokens)
            continue
        default = defaults[key]
        if _annotated_as(config_class, key, value):  # the class says so: Jamba's mamba_dt_rank is int | str ("auto")
            continue
        if isinstance(default, bool):
            if not isinstance(value, bool):
                raise AtlasError(where, key, f"must be true or false, not {value!r}")
        elif isinstance(default, int):
            if not _integer(value):
                raise AtlasError(where, key, f"must be an integer, not {value!r}")
            if value < 0 and not key.endswith("_token_id"):
                raise AtlasError(where, key, f"must not be negative, not {value!r}")
        elif isinstance(default, float) and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise AtlasError(where, key, f"must be a number, not {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise AtlasError(where, key, f"must be a string, not {value!r}")


def check_config(family, checkpoint, config) -> None:
    """The loaded configuration: the heads tile the width where no head size is given."""
    where = checkpoint.config_path
    heads = getattr(config, "num_attention_heads", None)
    width = getattr(config, "hidden_size", None)
    given_head_dim = any(k in checkpoint.config for k in ("head_dim", "qk_rope_head_dim", "v_head_dim"))
    if _integer(heads) and _integer(width) and not given_head_dim and width % heads:
        raise AtlasError(where, _key(checkpoint.config, HEADS) or "num_attention_heads",
                         f"{heads:,} heads do not divide hidden_size {width:,}, and no head_dim is given")
    from atlas.inputs.layers import layer_configs

    for layer in layer_configs(config) if _integer(getattr(config, "num_hidden_layers", None)) else [config]:
        kv_heads = getattr(layer, "num_key_value_heads", None)  # per block where blocks differ (Gemma 4)
        if _integer(heads) and _integer(kv_heads) and kv_heads and heads % kv_heads:
            raise AtlasError(where, "num_key_value_heads", f"{kv_heads:,} key-value heads do not divide {heads:,} query heads")


@contextlib.contextmanager
def reads(config) -> Iterator[dict[str, Any]]:
    """The attributes read off ``config`` inside the block, by the configuration's own names (an alias
    such as GPT-2's n_embd is recorded as hidden_size): what the model's constructor took from it."""
    cls = type(config)
    aliases = cls.attribute_map
    seen: dict[str, Any] = {}

    def read(self, key):
        value = cls.__getattribute__(self, key)
        if not key.startswith("_"):
            seen.setdefault(aliases.get(key, key), value)
        return value

    config.__class__ = type(cls.__name__, (cls,), {"__getattribute__": read})
    try:
        yield seen
    finally:
        config.__class__ = cls


def check_defaulted_sizes(family, checkpoint, read: Mapping[str, Any]) -> None:
    """No integer the model was built with may come silently from the class: a config.json without
    hidden_size would otherwise build a model of transformers' default width. A value the class
    derives (head_dim from the width, where its default is None) is the file's own."""
    from atlas.inputs.checkpoint import transformers_class

    config_class = transformers_class(family, "config_class")
    defaults = _defaults(config_class)
    given = {config_class.attribute_map.get(k, k) for k in (*checkpoint.config, *family.config_overrides)}
    for key, value in read.items():
        default = defaults.get(key)
        if key in given or key in family.config_defaults or key.endswith("_token_id"):
            continue
        if _integer(default) and value == default:
            raise AtlasError(checkpoint.config_path, key, f"missing: the model would be built with {family.config_class}'s "
                                                          f"default {default!r}; give the checkpoint's value (or declare the "
                                                          f"default in atlas/families/{family.name}.py config_defaults, with why)")


def unread_keys(family, checkpoint, config, read: Mapping[str, Any]) -> list[str]:
    """Keys of config.json that neither the configuration class nor the model reads: kept as they are,
    they change nothing the atlas shows (a remote-code setting such as topk_method, say). A key that
    is no parameter of the class may still be read from its keyword arguments (Gemma 3's
    sliding_window_pattern makes its layer_types): it counts as read when another value of it (or
    leaving it out) changes any other value of the loaded configuration."""
    config_class = type(config)
    aliases = config_class.attribute_map
    parameters = _defaults(config_class)
    given = {k: v for k, v in checkpoint.config.items() if k not in family.config_drop}
    given.update(family.config_overrides)
    loaded = _settings(config)
    out = []
    for key in checkpoint.config:
        name = aliases.get(key, key)
        if key in family.config_drop or key in family.config_overrides or name in parameters or name in read or key in read:
            continue
        if key not in vars(config):  # taken up by the class's __init__ (rope_theta into rope_parameters)
            continue
        others = {k: v for k, v in loaded.items() if k != key}
        probes = [{k: v for k, v in given.items() if k != key}, {**given, key: _another(given[key])}]
        if all(_same(config_class, p, key, others) for p in probes):
            out.append(key)
    return out


def _same(config_class, values: Mapping[str, Any], key: str, others: Mapping[str, Any]) -> bool:
    try:
        probe = config_class(**values)
    except Exception:  # the class checks the value, so it reads it
        return False
    return {k: v for k, v in _settings(probe).items() if k != key} == others


def _another(value: Any) -> Any:
    """A value of the same kind that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value * 2 + 1
    if isinstance(value, str):
        return value + "_other"
    return None


def _settings(config) -> dict[str, Any]:
    return {k: v for k, v in config.to_dict().items() if k != "transformers_version"}


def _defaults(config_class) -> dict[str, Any]:
    """Every parameter the configuration class (and its base) takes, with its default (None if none)."""
    defaults: dict[str, Any] = {}
    for cls in reversed(config_class.__mro__):
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        with contextlib.suppress(TypeError, ValueError):
            for name, p in inspect.signature(init).parameters.items():
                if name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
                    defaults[name] = None if p.default is p.empty else p.default
    return defaults


def _annotated_as(config_class, key: str, value: Any) -> bool:
    """Whether the class's own annotation of ``key`` names the type of ``value`` (int also where it
    says float). Where the class annotates nothing, the default's type is the rule."""
    import re

    for cls in config_class.__mro__:
        annotation = cls.__dict__.get("__annotations__", {}).get(key)
        if annotation is not None:
            names = set(re.findall(r"[A-Za-z_]+", annotation if isinstance(annotation, str) else repr(annotation)))
            kind = type(value).__name__
            return kind in names or (kind == "int" and "float" in names)
    return False


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _first(values: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    return next((values[k] for k in keys if _integer(values.get(k))), None)


def _key(values: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    return next((k for k in keys if k in values), None)

