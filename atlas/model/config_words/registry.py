"""The machinery of config.json in words: the registry of explainers, the typed reader and the helpers
every topic writes with, and ``explain_config``, which puts one key after another into words.

A sentence is written from the value it explains, never beside it: a softmax router is called a
softmax, a rope_scaling names its own rope_type and settings, a switch says what its state means, an
unset key says it is unset. Where the text needs another key of the same config (the expert count
for "top-8 of 384"), it reads that key too. A key the atlas has no words for is said to be one.

A value of the wrong type (a string where a count belongs, a rope_scaling that is not an object) is
an error naming the config file and the key, so a broken config cannot turn into a wrong sentence.

The explainers themselves live in the topic modules beside this one (positions, attention, experts,
...), each registering its keys in ``EXPLAIN`` when it is imported; the package imports them all.
This module imports none of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from atlas.errors import AtlasError
from atlas.numbers import grouped

# Words for the activations transformers' ACT2FN names; an unlisted name is reported as unlisted.
ACTIVATIONS = {
    "silu": "SiLU, x·σ(x)",
    "swish": "SiLU, x·σ(x)",
    "gelu": "GELU in its exact form, x·Φ(x)",
    "gelu_new": "GELU in its tanh approximation",
    "gelu_pytorch_tanh": "GELU in its tanh approximation",
    "gelu_fast": "GELU in its tanh approximation",
    "relu": "ReLU, max(0, x)",
    "relu2": "squared ReLU, max(0, x)²",
    "tanh": "tanh",
    "sigmoid": "the logistic sigmoid",
}

# The names the families use for the number of routed experts, in the order they are looked for.
EXPERT_COUNT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")

NO_WORDS = "The atlas has no words for this key yet."


class _Config:
    """The raw config with typed reads: a value of the wrong type is an error naming file and key."""

    def __init__(self, raw: Mapping[str, Any], where: str, names: Mapping[str, str] | None = None):
        self.raw, self.where = raw, where
        self.names = dict(names or {})  # a key read under another key's name, and the name to report

    def fail(self, key: str, problem: str):
        raise AtlasError(self.where, self.names.get(key, key), problem)

    def renamed(self, target: str, key: str, value: Any) -> "_Config":
        """The config with ``key``'s value read as ``target``; an error names ``key``."""
        return _Config({**self.raw, target: value}, self.where, {**self.names, target: key})

    def number(self, key: str, value: Any = ...) -> int | float:
        value = self.raw[key] if value is ... else value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, f"must be a number, not {json.dumps(value)}")
        return value

    def count(self, key: str, value: Any = ...) -> int:
        value = self.raw[key] if value is ... else value
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            self.fail(key, f"must be a whole number of zero or more, not {json.dumps(value)}")
        return value

    def flag(self, key: str) -> bool:
        value = self.raw[key]
        if not isinstance(value, bool):
            self.fail(key, f"must be true or false, not {json.dumps(value)}")
        return value

    def text(self, key: str) -> str:
        value = self.raw[key]
        if not isinstance(value, str):
            self.fail(key, f"must be a string, not {json.dumps(value)}")
        return value

    def get_count(self, key: str) -> int | None:
        """Another key's count, where the config has one (None where it is absent or unset)."""
        value = self.raw.get(key)
        return None if value is None else self.count(key, value)

    def mamba_stack(self) -> bool:
        """An attention-free stack of Mamba mixers (MambaConfig's keys: state_size, conv_kernel, expand, and no
        attention heads): its MLP-sounding keys (intermediate_size, hidden_act, use_bias) are the mixer's."""
        return (all(isinstance(self.raw.get(k), (int, float)) for k in ("state_size", "conv_kernel", "expand"))
                and "num_attention_heads" not in self.raw)

    def time_mixing(self) -> bool:
        """An RWKV stack (RwkvConfig's keys: rescale_every and attention_hidden_size, and no attention heads): its
        attention-sounding keys are the time mixing's, its MLP's the channel mixing's, its cache a state."""
        return "rescale_every" in self.raw and "attention_hidden_size" in self.raw and "num_attention_heads" not in self.raw

    def experts(self) -> tuple[str, int] | None:
        key = next((k for k in EXPERT_COUNT_KEYS if self.raw.get(k)), None)
        return (key, self.count(key, self.raw[key])) if key else None


def _num(value: int | float) -> str:
    """A number as the page writes it: whole numbers grouped, others as short as they stay exact."""
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1000:
        return grouped(int(value))
    if isinstance(value, int):
        return grouped(value)
    return f"{value:g}"


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{grouped(n)} {one if n == 1 else (many or one + 's')}"


def _value_words(value: Any) -> str:
    """A setting's value inside a sentence: JSON's spelling, but an unset value is called unset."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return _num(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(_value_words(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} {_value_words(v)}" for k, v in value.items()) + "}"


def _settings(values: Mapping[str, Any], skip: tuple[str, ...] = ()) -> str:
    return ", ".join(f"{k} {_value_words(v)}" for k, v in values.items() if k not in skip)


def settings_words(values: Mapping[str, Any]) -> str:
    """Every setting of an object in words ("rope_type \"yarn\", factor 32"), unset ones called unset."""
    return _settings(values)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def activation_words(name: str) -> str:
    return ACTIVATIONS.get(name, f'"{name}", an activation the atlas has no words for')


# --- the registry: one function per key, (key, value, the whole config) -> words ---------------------

Explainer = Callable[[str, Any, _Config], str]
EXPLAIN: dict[str, Explainer] = {}


# Keys whose explainer has its own words for an unset value; any other unset key gets one plain sentence.
SPEAKS_FOR_UNSET: set[str] = set()


def explains(*keys: str, unset: bool = False):
    def register(fn: Explainer) -> Explainer:
        for key in keys:
            EXPLAIN[key] = fn
            if unset:
                SPEAKS_FOR_UNSET.add(key)
        return fn

    return register


def _switch(key: str, on: str, off: str) -> None:
    """A true/false key whose two states have their own sentence."""
    EXPLAIN[key] = lambda key, v, c: (on if c.flag(key) else off)


def _dropout(key: str, where: str) -> None:
    def explain(key, v, c):
        p = c.number(key)
        if p == 0:
            return f"No dropout on {where} (probability 0); dropout is off at inference anyway"
        return f"Dropout with probability {_num(p)} on {where} in training; off at inference"

    EXPLAIN[key] = explain


# Keys that are another key under a second name: key -> the name the other explainers read.
ALIASES: dict[str, str] = {}


def _alias(key: str, target: str) -> None:
    """A key that holds another key's setting under a second name: the other key's words, from this value."""
    ALIASES[key] = target

    def explain(key, v, c):
        words = EXPLAIN[target](target, v, c.renamed(target, key, v))
        return f"{words}; {key} is {target} under another name"

    EXPLAIN[key] = explain


def _with_aliases(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The config with each aliased setting also under the name it has elsewhere, where that name is absent."""
    return {**{target: raw[key] for key, target in ALIASES.items() if key in raw and target not in raw}, **raw}


def explain_config(raw: Mapping[str, Any], where: str | Path = "config.json", unread: set[str] | frozenset[str] = frozenset(),
                   version: str | None = None) -> dict[str, str]:
    """Every key of a released config.json in words written from its value, in the file's order.

    ``unread`` are keys transformers never names (``unread_keys``); their words say so, with the
    transformers ``version`` where it is given.
    """
    c = _Config(_with_aliases(raw), str(where), {t: k for k, t in ALIASES.items() if k in raw and t not in raw})
    out = {}
    for key, value in raw.items():
        explain = EXPLAIN.get(key)
        if explain is None:
            words = NO_WORDS.rstrip(".")
        elif value is None and key not in SPEAKS_FOR_UNSET:
            words = "Left unset: the configuration class's default applies"
        else:
            words = explain(key, value, c)
        if key in unread:
            words += f"; transformers{' ' + version if version else ''} never reads it for this model"
        out[key] = words + "."
    return out


# --- reads of the config that several topics' words share --------------------------------------------

def _head_width(c: _Config) -> int | None:
    """The width of one attention head: head_dim where given, else the width shared out over the heads."""
    if c.raw.get("head_dim"):
        return c.count("head_dim", c.raw["head_dim"])
    for width_key, heads_key in (("hidden_size", "num_attention_heads"), ("n_embd", "n_head")):
        width, heads = c.get_count(width_key), c.get_count(heads_key)
        if width and heads:
            return width // heads
    return None


def _same_as(c: _Config, n: int | float, other: str) -> str:
    """How a recorded value compares with the key transformers reads for the same thing, where the config has it."""
    theirs = c.raw.get(other)
    if theirs is None or isinstance(theirs, bool) or not isinstance(theirs, (int, float)):
        return ""
    if theirs == n:
        return f", the same as {other}"
    return f"; {other} gives {_num(theirs)}"


def _built_as(c, model_class: str) -> bool:
    """Whether config.json names this transformers class in ``architectures``: words that say what that
    class does with a key hold only where the file is built as it."""
    return model_class in (c.raw.get("architectures") or [])


def _entries(c: _Config, key: str, v: Any) -> dict:
    if not isinstance(v, dict):
        c.fail(key, f"must be an object of settings, not {_value_words(v)}")
    return v


# The class whose words several topics hold for it alone (its attention, routing and positions).
V4 = "DeepseekV4ForCausalLM"


def standard_names(raw: Mapping[str, Any], config_class) -> dict[str, str]:
    """The keys of a config.json that hold a setting other families' files name another way, each with
    that common name: the configuration class's own ``attribute_map`` (GPT-2's ``n_layer`` is
    transformers' ``num_hidden_layers``) and the second names the words above know (DBRX's ``n_heads``).
    Keys already under the common name are left out."""
    common = {own: standard for standard, own in (getattr(config_class, "attribute_map", None) or {}).items()}
    common.update((key, target) for key, target in ALIASES.items() if key not in common)
    return {key: common[key] for key in raw if key in common and common[key] != key and common[key] not in raw}
