"""Per-layer configurations: a configuration whose blocks differ in a size (Gemma 4's global blocks
have wider heads and fewer key-value heads than its sliding ones) keeps the differing values per
layer (transformers' ``per_layer_config``), and reading such a value off the whole configuration is
refused there. The atlas reads it per block, or as the whole configuration's own value where that is
what a figure means.
"""

from __future__ import annotations

from typing import Any


def heterogeneous(config) -> bool:
    """Whether some blocks of ``config`` are built with values of their own."""
    return bool(getattr(config, "is_heterogeneous", False))


def layer_config(config, index: int):
    """The configuration block ``index`` is built from: the layer's own view where sizes differ per
    layer, the configuration itself everywhere else."""
    if heterogeneous(config):
        return config.per_layer_config[index]
    return config


def layer_configs(config) -> list:
    """Every block's configuration, in order."""
    return [layer_config(config, i) for i in range(config.num_hidden_layers)]


def per_layer_keys(config) -> set[str]:
    """The attributes whose value differs between blocks (none on an ordinary configuration)."""
    if not heterogeneous(config):
        return set()
    return set(config._heterogeneity_spec.per_layer_attributes)


def global_value(config, key: str, default: Any = None) -> Any:
    """The whole configuration's own value of ``key`` (the value blocks without an override take),
    read without the refusal a per-layer attribute meets."""
    if key in per_layer_keys(config):
        return config._getattr_without_heterogeneous_validation(key, default)
    return getattr(config, key, default)


def base_config(config):
    """A configuration that reads like an ordinary one: the first block's view where sizes differ per
    layer (every figure of the whole model that depends on a per-layer size is computed per block)."""
    return layer_config(config, 0) if heterogeneous(config) else config


def global_config(config):
    """The whole configuration with no per-layer values: what a block without an override is built
    from (the configuration itself where blocks do not differ)."""
    if not heterogeneous(config):
        return config
    import copy

    view = copy.copy(config)
    view.__dict__.pop("_heterogeneity_spec", None)
    return view


def overrides(config) -> dict[int, dict[str, Any]]:
    """The blocks built with values of their own, and those values: {block: {key: value}}."""
    if not heterogeneous(config):
        return {}
    return {i: dict(v) for i, v in config._heterogeneity_spec.per_layer_overrides.items()}
