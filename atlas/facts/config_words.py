"""config.json in words: each released key explained from its own value and the config around it.

A sentence here is written from the value it explains, never beside it: a softmax router is called a
softmax, a rope_scaling names its own rope_type and settings, a switch says what its state means, an
unset key says it is unset. Where the text needs another key of the same config (the expert count
for "top-8 of 384"), it reads that key too. A key the atlas has no words for is said to be one.

A value of the wrong type (a string where a count belongs, a rope_scaling that is not an object) is
an error naming the config file and the key, so a broken config cannot turn into a wrong sentence.

``unread_keys`` adds one computed fact: the keys no file of transformers that could read them names
at all (the library's shared code, and the family's own configuration and modeling modules). Such a
key is described, and the page says transformers does not read it.
"""

from __future__ import annotations

import json
import re
from functools import cache
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

# What each rope_type does to the rotary frequencies, by transformers' names for them.
ROPE_TYPES = {
    "default": "plain rotary frequencies with no context extension",
    "linear": "linear scaling: positions are divided by the factor",
    "dynamic": "dynamic NTK scaling: the base grows with the sequence once it passes the original length",
    "yarn": ("YaRN: the low frequencies are divided by the factor and the high ones kept, with a ramp between set by "
             "beta_fast and beta_slow, plus a correction of the attention's temperature"),
    "longrope": "LongRoPE: a separate factor for every frequency, one list for short and one for long contexts",
    "llama3": ("Llama 3 scaling: the low frequencies are divided by the factor and the high ones kept, with a smooth "
               "ramp between set by low_freq_factor and high_freq_factor"),
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


def rope_words(values: Any, c: _Config, key: str) -> str:
    """A rope_scaling or rope_parameters object: its type in words, then every setting it holds."""
    if values is None:
        return "Left unset: the rotary frequencies are used as the base gives them, with no context extension"
    if not isinstance(values, dict):
        c.fail(key, f"must be an object of rotary settings or unset, not {json.dumps(values)}")
    if values and all(isinstance(v, dict) for v in values.values()):
        # One set of settings per attention kind (Gemma 3's sliding and full attention).
        return "Separate rotary settings per attention kind: " + "; ".join(
            f"{kind}: {_rope_one(v, c, f'{key}.{kind}')}" for kind, v in values.items()
        )
    return _rope_one(values, c, key)


def _rope_one(values: Mapping[str, Any], c: _Config, key: str) -> str:
    # Older configs name the rule "type", newer ones "rope_type": the words quote the one the file uses.
    named = "rope_type" if "rope_type" in values else "type"
    kind = values.get(named)
    if not isinstance(kind, str):
        c.fail(key, "names no rope_type (or type): the rule it applies to the rotary frequencies is unknown")
    words = ROPE_TYPES.get(kind, "a rope type the atlas has no words for")
    settings = _settings(values, skip=("rope_type", "type"))
    return f'{words} ({named} "{kind}"' + (f"; {settings})" if settings else ")")


# --- one function per key: (value, the whole config) -> words ----------------------------------------

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


# Keys that are another key under a second name: key -> the name the rest of this module reads.
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


def _token(key: str, role: str) -> None:
    SPEAKS_FOR_UNSET.add(key)

    def explain(key, v, c):
        if v is None:
            return f"Left unset: no {role} token is declared"
        if isinstance(v, list):
            return f"Token ids {', '.join(str(c.count(key, t)) for t in v)} each {ROLE_VERBS[role][1]}"
        return f"Token id {c.count(key)} {ROLE_VERBS[role][0]}"

    EXPLAIN[key] = explain


ROLE_VERBS = {  # what one token id does, and what each of several does
    "beginning-of-sequence": ("begins a sequence", "begin a sequence"),
    "end-of-sequence": ("ends a sequence", "end a sequence"),
    "padding": ("pads a batch", "pad a batch"),
    "image placeholder": ("holds an image's place in the text; the vision tower's features replace its embedding",
                          "hold an image's place in the text; the vision tower's features replace their embeddings"),
    "video placeholder": ("holds a video's place in the text; the vision tower's features replace its embedding",
                          "hold a video's place in the text; the vision tower's features replace their embeddings"),
    "vision-start": ("opens an image or a video in the text", "open an image or a video in the text"),
    "vision-end": ("closes an image or a video in the text", "close an image or a video in the text"),
}
_token("bos_token_id", "beginning-of-sequence")
_token("eos_token_id", "end-of-sequence")
_token("pad_token_id", "padding")
_token("image_token_id", "image placeholder")
_token("video_token_id", "video placeholder")
_token("vision_start_token_id", "vision-start")
_token("vision_end_token_id", "vision-end")

_dropout("attention_dropout", "the attention pattern")
_dropout("attn_pdrop", "the attention pattern")
_dropout("embd_pdrop", "the embeddings")
_dropout("resid_pdrop", "each sublayer's output before it is added to the stream")
_dropout("summary_first_dropout", "the sequence summary's input")

_switch("attention_bias", "The attention's projections add a learned bias", "The attention's projections have no bias")
_switch("mlp_bias", "The MLP's projections add a learned bias", "The MLP's projections have no bias")
_switch("use_cache", "Generation keeps a key/value cache by default", "Generation recomputes every position by default, keeping no key/value cache")
_switch("tie_word_embeddings", "The output head reuses the embedding table's weights: one tensor serves both",
        "The output head has its own weights, separate from the embedding table")
_switch("output_router_logits", "The router logits are returned with the output (for training's balancing loss)",
        "The router logits are not returned with the output (they serve only training's balancing loss)")
_switch("seq_aux", "Training's balancing loss was computed per sequence; no effect on a forward pass",
        "Training's balancing loss was computed over the batch; no effect on a forward pass")
_switch("rope_interleave", "The rotated dimensions are stored as interleaved pairs and regrouped before rotation",
        "The rotated dimensions are stored as two halves, rotated as they are")
_switch("summary_use_proj", "The sequence-summary head (for classification, not the language model) has a projection",
        "The sequence-summary head (for classification, not the language model) has no projection")
_switch("summary_proj_to_labels", "The sequence-summary projection maps to the label count, not the width",
        "The sequence-summary projection keeps the width")


@explains("architectures")
def _architectures(key, v, c):
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        c.fail("architectures", "must be a list of class names")
    return f"The model class the checkpoint was saved from: {', '.join(v)}"


@explains("model_type")
def _model_type(key, v, c):
    return f'The configuration type "{c.text("model_type")}", which transformers\' AutoConfig maps to a configuration class'


@explains("_name_or_path")
def _name_or_path(key, v, c):
    return f'The name the configuration was saved under, "{c.text("_name_or_path")}"; a record only'


@explains("transformers_version")
def _transformers_version(key, v, c):
    return f"The transformers version that wrote this file: {c.text('transformers_version')}"


@explains("torch_dtype", "dtype")
def _dtype(key, v, c):
    words = f"The weights were saved as {c.text(key)}"
    if c.raw.get("quantization_config"):
        words += ", where quantization_config does not store them otherwise"
    return words


@explains("auto_map")
def _auto_map(key, v, c):
    if not isinstance(v, dict):
        c.fail("auto_map", "must be an object of auto classes")
    return (f"The checkpoint's own remote code for {_plural(len(v), 'auto class', 'auto classes')} ({', '.join(v)}); "
            "transformers' native classes, which the atlas runs, do not use it")


@explains("hidden_act", "hidden_activation", "activation_function")
def _activation(key, v, c):
    where = "every MLP and expert" if c.experts() else "every MLP"
    return f"The activation named for {where}: {activation_words(c.text(key))}"


@explains("hidden_size", "n_embd")
def _hidden_size(key, v, c):
    return f"The residual stream is {grouped(c.count(key))} wide"


@explains("num_hidden_layers", "n_layer")
def _layers(key, v, c):
    return f"{_plural(c.count(key), 'decoder block')}"


@explains("num_attention_heads", "n_head")
def _heads(key, v, c):
    return f"{_plural(c.count(key), 'query head')} per attention"


@explains("num_key_value_heads")
def _kv_heads(key, v, c):
    kv = c.count("num_key_value_heads")
    heads = c.get_count("num_attention_heads")
    if heads is None:
        return f"{_plural(kv, 'key and value head', 'key and value heads')} per attention"
    if kv == 0 or heads % kv:
        c.fail("num_key_value_heads", f"{kv} does not divide num_attention_heads ({heads})")
    if kv == heads:
        return f"{_plural(kv, 'key and value head', 'key and value heads')} per attention, one per query head: none is shared"
    if kv == 1:
        return f"One key and value head shared by all {heads} query heads (multi-query attention)"
    return f"{kv} key and value heads, each shared by {heads // kv} of the {heads} query heads (grouped-query attention)"


@explains("head_dim")
def _head_dim(key, v, c):
    d = c.count("head_dim")
    words = f"Each query, key and value head is {grouped(d)} wide"
    heads, width = c.get_count("num_attention_heads"), c.get_count("hidden_size")
    if heads and width:
        total = heads * d
        relation = "equal to" if total == width else ("wider than" if total > width else "narrower than")
        words += f"; {heads} heads × {grouped(d)} = {grouped(total)}, {relation} the residual width {grouped(width)}"
    return words


@explains("v_head_dim")
def _v_head_dim(key, v, c):
    return f"Each value head is {grouped(c.count('v_head_dim'))} wide"


@explains("qk_nope_head_dim")
def _qk_nope(key, v, c):
    return f"{grouped(c.count('qk_nope_head_dim'))} dims of each query and key head carry no rotary position"


@explains("qk_rope_head_dim")
def _qk_rope(key, v, c):
    words = f"{grouped(c.count('qk_rope_head_dim'))} dims of each query and key head are rotated by position"
    if c.raw.get("kv_lora_rank"):
        words += "; the rotated key part is computed once per token and shared by every head"
    return words


@explains("q_lora_rank", unset=True)
def _q_lora(key, v, c):
    if v is None:
        return "Left unset: queries are projected straight from the stream, with no latent"
    return f"Queries are expanded from a {grouped(c.count('q_lora_rank'))}-wide latent per token"


@explains("kv_lora_rank")
def _kv_lora(key, v, c):
    return f"Keys and values are expanded from a {grouped(c.count('kv_lora_rank'))}-wide latent per token (latent attention)"


@explains("intermediate_size")
def _intermediate(key, v, c):
    width = grouped(c.count("intermediate_size"))
    if "moe_intermediate_size" in c.raw:
        return f"The hidden width of a dense MLP, wherever a block keeps one: {width}"
    if c.experts():
        return f"The hidden width of each expert: {width}"
    return f"The hidden width of every MLP: {width}"


@explains("moe_intermediate_size")
def _moe_intermediate(key, v, c):
    shared = c.get_count("n_shared_experts")
    who = "each routed and shared expert" if shared else "each routed expert"
    if isinstance(v, list):  # one width per layer (Hunyuan's training config)
        widths = [c.count(key, w) for w in v]
        if len(set(widths)) == 1:
            return f"The hidden width of the experts, given once per layer: {grouped(widths[0])} at each of the {len(widths)} layers"
        return f"The hidden width of the experts, given once per layer: from {grouped(min(widths))} to {grouped(max(widths))}"
    return f"The hidden width of {who}: {grouped(c.count('moe_intermediate_size'))}"


@explains(*EXPERT_COUNT_KEYS)
def _expert_count(key, v, c):
    return f"{_plural(c.count(key), 'routed expert')} per mixture block"


@explains("num_experts_per_tok", "experts_per_token")
def _top_k(key, v, c):
    k = c.count(key)
    experts = c.experts()
    words = f"Each token is sent to {k} of the {experts[1]} routed experts" if experts else f"Each token is sent to {_plural(k, 'expert')}"
    if key == "experts_per_token" and "num_experts_per_tok" in c.raw:
        other = c.count("num_experts_per_tok", c.raw["num_experts_per_tok"])
        words += "; the same count as num_experts_per_tok" if other == k else f"; num_experts_per_tok says {other}"
    return words


@explains("n_shared_experts")
def _shared(key, v, c):
    n = c.count("n_shared_experts")
    if n == 0:
        return "No shared expert: every token passes through routed experts only"
    if n == 1:
        return "One shared expert per mixture block, which every token passes through"
    return f"{n} shared experts per mixture block, which every token passes through (built as one MLP {n} times the expert width)"


@explains("scoring_func")
def _scoring(key, v, c):
    func = c.text("scoring_func")
    if func == "sigmoid":
        return "The router scores each expert with a sigmoid of its logit, each score on its own (they need not sum to one)"
    if func == "softmax":
        return "The router turns its logits into scores with a softmax over all routed experts, so the scores sum to one"
    return f'The router\'s scoring function is "{func}", which the atlas has no words for'


@explains("norm_topk_prob")
def _norm_topk(key, v, c):
    if c.flag("norm_topk_prob"):
        words = "The chosen experts' weights are renormalized to sum to one"
        factor = c.raw.get("routed_scaling_factor")
        if factor is not None:
            words += f", then multiplied by routed_scaling_factor ({_num(c.number('routed_scaling_factor', factor))})"
        return words
    return "The chosen experts' weights are not renormalized: each keeps the score the router gave it, whatever their sum"


@explains("routed_scaling_factor")
def _scaling(key, v, c):
    factor = _num(c.number("routed_scaling_factor"))
    if c.raw.get("norm_topk_prob") is True:
        return f"The chosen experts' weights are multiplied by {factor} after renormalizing, so they sum to {factor}"
    return f"The chosen experts' weights are multiplied by {factor}"


@explains("n_group")
def _n_group(key, v, c):
    groups = c.count("n_group")
    experts = c.experts()
    if groups <= 1:
        return "The routed experts form a single group, so the group limit removes no candidate"
    if experts and experts[1] % groups == 0:
        return f"The {experts[1]} routed experts are split into {groups} groups of {experts[1] // groups} for selection"
    return f"The routed experts are split into {groups} groups for selection"


@explains("topk_group")
def _topk_group(key, v, c):
    k = c.count("topk_group")
    groups = c.get_count("n_group")
    if groups is not None and groups <= 1:
        return f"Candidates come from the best {k} group{'s' if k != 1 else ''}; with a single group every expert stays a candidate"
    of = f" of the {groups}" if groups else ""
    return f"Each token keeps candidates only from the best {k}{of} expert groups"


@explains("topk_method")
def _topk_method(key, v, c):
    method = c.text("topk_method")
    words = {
        "noaux_tc": "scores plus a learned per-expert selection bias choose the experts, within the best groups; the weights are the unbiased scores",
        "greedy": "a plain top-k of the scores",
        "group_limited_greedy": "a top-k of the scores within the best groups",
    }.get(method, "a rule the atlas has no words for")
    return f'The original code\'s name for its expert-selection rule, "{method}": {words}'


@explains("first_k_dense_replace")
def _first_dense(key, v, c):
    k = c.count("first_k_dense_replace")
    if k == 0:
        return "No block keeps a dense MLP: the mixture of experts starts at block 0"
    blocks = "Block 0 keeps" if k == 1 else f"Blocks 0–{k - 1} keep"
    return f"{blocks} a dense MLP; the mixture of experts starts at block {k}"


@explains("moe_layer_freq")
def _moe_freq(key, v, c):
    f = c.count("moe_layer_freq")
    if f == 1:
        return "In the original code, every block after the dense first ones is a mixture (a spacing of 1)"
    return f"In the original code, every {_ordinal(f)} block after the dense first ones is a mixture"


@explains("decoder_sparse_step")
def _sparse_step(key, v, c):
    step = c.count("decoder_sparse_step")
    if step == 1:
        return "Every block not listed in mlp_only_layers is a mixture of experts (a step of 1)"
    return f"Every {_ordinal(step)} block not listed in mlp_only_layers is a mixture of experts; the others keep a dense MLP"


@explains("mlp_only_layers")
def _mlp_only(key, v, c):
    if not isinstance(v, list):
        c.fail("mlp_only_layers", "must be a list of block indices")
    if not v:
        return "No block is forced to keep a dense MLP (the list is empty)"
    return f"Blocks {', '.join(str(c.count('mlp_only_layers', i)) for i in v)} keep a dense MLP instead of a mixture"


@explains("num_nextn_predict_layers")
def _mtp(key, v, c):
    n = c.count("num_nextn_predict_layers")
    if n == 0:
        return "No multi-token-prediction block is stored"
    return f"{_plural(n, 'multi-token-prediction block')} stored after the last decoder block; transformers builds none"


@explains("ep_size")
def _ep_size(key, v, c):
    return f"The expert-parallel degree of the original code ({c.count('ep_size')}); it changes no shape"


@explains("pretraining_tp")
def _tp(key, v, c):
    return f"The tensor-parallel degree of pretraining ({c.count('pretraining_tp')}); it changes no shape"


@explains("aux_loss_alpha", "router_aux_loss_coef")
def _aux(key, v, c):
    return f"Weight {_num(c.number(key))} of the experts' balancing loss in training; no effect on a forward pass"


@explains("initializer_range")
def _init(key, v, c):
    return f"Standard deviation {_num(c.number('initializer_range'))} of the random initialization; trained weights replace it"


@explains("rms_norm_eps")
def _rms_eps(key, v, c):
    return f"The epsilon added to the mean square inside every RMSNorm: {_num(c.number('rms_norm_eps'))}"


@explains("layer_norm_epsilon")
def _ln_eps(key, v, c):
    return f"The epsilon added to the variance inside every LayerNorm: {_num(c.number('layer_norm_epsilon'))}"


@explains("vocab_size")
def _vocab(key, v, c):
    n = grouped(c.count("vocab_size"))
    return f"{n} rows in the embedding table, and {n} scores out of the head"


@explains("max_position_embeddings")
def _max_positions(key, v, c):
    n = c.count("max_position_embeddings")
    words = f"The longest context the configuration declares: {grouped(n)} positions"
    scaling = c.raw.get("rope_scaling") or {}
    original = scaling.get("original_max_position_embeddings") if isinstance(scaling, dict) else None
    if original:
        words += f", {_num(n / c.count('rope_scaling', original))} times the {grouped(original)} the rotary scaling starts from"
    return words


@explains("n_positions")
def _n_positions(key, v, c):
    return f"Rows of the learned position table: positions 0 to {grouped(c.count('n_positions') - 1)}, the longest context"


@explains("n_ctx")
def _n_ctx(key, v, c):
    n = c.count("n_ctx")
    words = f"The context length in the original code: {grouped(n)} positions"
    if "n_positions" in c.raw:
        same = c.raw["n_positions"] == n
        words += "; the same as n_positions" if same else f"; n_positions says {grouped(c.count('n_positions'))}"
    return words


@explains("original_max_position_embeddings")
def _original_max(key, v, c):
    n = c.count("original_max_position_embeddings")
    words = f"The context length before any extension: {grouped(n)} positions"
    if c.raw.get("rope_scaling") is None:
        words += "; rope_scaling is unset here, so no extension rule uses it"
    return words


@explains("initial_context_length")
def _initial_context(key, v, c):
    n = c.count("initial_context_length")
    words = f"The context length of the original training: {grouped(n)} positions"
    scaling = c.raw.get("rope_scaling")
    if isinstance(scaling, dict) and "original_max_position_embeddings" in scaling:
        same = scaling["original_max_position_embeddings"] == n
        words += "; the same as rope_scaling's original length" if same else "; rope_scaling's original length differs"
    return words


@explains("rope_theta")
def _rope_theta(key, v, c):
    return f"The base of the rotary frequencies: dimension pair j turns by {_num(c.number('rope_theta'))}^(−2j/d) radians per position"


@explains("rope_local_base_freq")
def _rope_local(key, v, c):
    words = f"The base of the rotary frequencies in the sliding-window blocks: {_num(c.number('rope_local_base_freq'))}"
    if "rope_theta" in c.raw:
        words += f" (the other blocks use rope_theta, {_num(c.number('rope_theta', c.raw['rope_theta']))})"
    return words


@explains("rope_scaling", "rope_parameters", unset=True)
def _rope(key, v, c):
    words = rope_words(v, c, key)
    return words[:1].upper() + words[1:]


@explains("sliding_window", "sliding_window_size", unset=True)
def _window(key, v, c):
    if v is None:
        return "Left unset: no block limits how far back it attends"
    w = grouped(c.count(key))
    words = f"A sliding-window block lets each position attend to the {w} positions ending at itself"
    if key == "sliding_window_size" and "sliding_window" in c.raw:
        words += "; the same as sliding_window" if c.raw["sliding_window"] == v else "; sliding_window says otherwise"
    if c.raw.get("use_sliding_window") is False:
        words += "; use_sliding_window is off, so no block uses it"
    types = c.raw.get("layer_types")
    if isinstance(types, list) and types:
        words += f" ({types.count('sliding_attention')} of the {len(types)} blocks in layer_types)"
    return words


@explains("use_sliding_window")
def _use_window(key, v, c):
    if c.flag("use_sliding_window"):
        return "On: the blocks from max_window_layers on attend within sliding_window"
    return "Off: no block attends within a sliding window, whatever sliding_window and max_window_layers say"


@explains("max_window_layers")
def _max_window_layers(key, v, c):
    n = c.count("max_window_layers")
    layers = c.get_count("num_hidden_layers")
    if layers is not None and n >= layers:
        return f"The first {n} blocks never attend within a sliding window; with {layers} blocks, that is every block"
    later = f"Blocks {n}–{layers - 1}" if layers is not None else f"Blocks {n} and later"
    if c.raw.get("use_sliding_window") is True and c.raw.get("sliding_window"):
        return f"{later} attend within the sliding window; the first {n} attend to every earlier position"
    return f"{later} would attend within a sliding window if use_sliding_window were on; it is off"


@explains("sliding_window_pattern")
def _window_pattern(key, v, c):
    p = c.count("sliding_window_pattern")
    if p <= 1:
        return "Every block is a global block (a period of 1)"
    return f"The blocks repeat in a period of {p}: {_plural(p - 1, 'sliding-window block')}, then one global block"


@explains("layer_types")
def _layer_types(key, v, c):
    if not isinstance(v, list) or not all(isinstance(t, str) for t in v):
        c.fail("layer_types", "must be a list of attention kinds, one per block")
    counts = {t: v.count(t) for t in dict.fromkeys(v)}
    period = next(p for p in range(1, len(v) + 1) if all(x == v[i % p] for i, x in enumerate(v)))
    words = f"The attention kind of each of the {len(v)} blocks: " + ", ".join(f"{n} {t}" for t, n in counts.items())
    if 1 < period < len(v):
        words += f", repeating every {period} blocks ({', '.join(v[:period])})"
    return words


@explains("attn_logit_softcapping", unset=True)
def _attn_softcap(key, v, c):
    if v is None:
        return "Left unset: the attention scores are not softcapped"
    cap = _num(c.number("attn_logit_softcapping"))
    return f"The attention scores are squashed into (−{cap}, {cap}) by {cap}·tanh(score / {cap}) before the softmax"


@explains("final_logit_softcapping", unset=True)
def _final_softcap(key, v, c):
    if v is None:
        return "Left unset: the logits are not softcapped"
    cap = _num(c.number("final_logit_softcapping"))
    return f"The head's logits are squashed into (−{cap}, {cap}) by {cap}·tanh(logit / {cap})"


@explains("query_pre_attn_scalar")
def _query_scalar(key, v, c):
    s = c.number("query_pre_attn_scalar")
    words = f"The attention scores are scaled by 1/√{_num(s)} = {s ** -0.5:.4g}"
    d = c.raw.get("head_dim")
    if d is not None:
        words += ", which is 1/√head_dim here" if c.count("head_dim", d) == s else f", not by 1/√head_dim (head_dim is {d})"
    return words


@explains("swiglu_limit")
def _swiglu_limit(key, v, c):
    limit = _num(c.number("swiglu_limit"))
    return f"The gated MLP clamps its gate projection at {limit} from above and its up projection into [−{limit}, {limit}]"


@explains("cache_implementation")
def _cache(key, v, c):
    return f'The key/value cache generation uses by default: "{c.text("cache_implementation")}"; no effect on a single forward pass'


@explains("quantization_config")
def _quantization(key, v, c):
    if not isinstance(v, dict):
        c.fail("quantization_config", "must be an object naming its quant_method")
    method = v.get("quant_method")
    if not isinstance(method, str):
        c.fail("quantization_config.quant_method", "missing: the format of the stored weights is unknown")
    if method == "fp8":
        block = v.get("weight_block_size")
        scales = (f"one scale per {' × '.join(grouped(c.count('quantization_config.weight_block_size', b)) for b in block)} block"
                  if isinstance(block, list) and block else "scales as the settings give them")
        words = f"The released files store the weights as 8-bit floats ({v.get('fmt', 'fp8')}) with {scales}"
    elif method == "mxfp4":
        from atlas.model.quantization import QUANTIZERS

        words = (f"The released files store the weights as MXFP4: 4-bit values in blocks of {QUANTIZERS['mxfp4'].BLOCK}, "
                 "each block sharing one power-of-two scale")
        skipped = v.get("modules_to_not_convert")
        if skipped:
            words += f", except {', '.join(skipped)}, kept unquantized"
    else:
        words = f'The released files store the weights in the format "{method}", which the atlas has no words for'
    others = _settings(v, skip=("quant_method", "weight_block_size", "fmt", "modules_to_not_convert"))
    return words + f' (quant_method "{method}"' + (f"; {others})" if others else ")")


@explains("task_specific_params")
def _task_params(key, v, c):
    if not isinstance(v, dict):
        c.fail("task_specific_params", "must be an object of settings per task")
    return "Default generation settings per task: " + "; ".join(
        f"{task}: {_settings(s) if isinstance(s, dict) else _value_words(s)}" for task, s in v.items()
    )


@explains("summary_type")
def _summary_type(key, v, c):
    return (f'How the sequence-summary head (for classification, not the language model) pools the sequence: '
            f'"{c.text("summary_type")}"')


@explains("summary_activation", unset=True)
def _summary_activation(key, v, c):
    if v is None:
        return "Left unset: the sequence-summary head (for classification, not the language model) applies no activation"
    return f"The sequence-summary head's activation: {activation_words(c.text('summary_activation'))}"


# --- the whole config ------------------------------------------------------------------------------


# --- keys of the mixture-of-experts families added from the reference set ---------------------------

_dropout("hidden_dropout", "each sublayer's output")
_switch("use_qk_norm", "Queries and keys each pass an RMSNorm before the attention scores are taken",
        "No norm on queries or keys")
_switch("lm_head_bias", "The output head adds a learned bias to every vocabulary entry's logit", "The output head has no bias")
_switch("use_bias", "Every projection, in the attention, the MLPs and the head, carries a bias", "No projection carries a bias")
_switch("moe_use_aux_free", "The router holds a learned per-expert bias that steers which experts are chosen, in place of a balancing loss",
        "The router holds no per-expert selection bias")
_switch("use_routing_bias", "The mixture holds a learned per-expert bias that steers which experts are chosen and does not weigh them",
        "No per-expert selection bias")
_switch("use_mtp", "Multi-token-prediction modules are attached in training (transformers builds none)", "No multi-token-prediction modules")


@explains("partial_rotary_factor")
def _partial_rotary(key, v, c):
    return f"The share of each head's dimensions the rotary embedding turns: {_num(c.number(key))}; the others carry no position"


@explains("rotary_dim")
def _rotary_dim(key, v, c):
    return f"The dimensions of each head the rotary embedding turns: {grouped(c.count(key))}; the others carry no position"


@explains("input_jitter_noise")
def _input_jitter(key, v, c):
    return f"Training only: the mixture's input is multiplied by random factors within 1 ± {_num(c.number(key))}; no effect at inference"


@explains("router_jitter_noise")
def _router_jitter(key, v, c):
    eps = c.number(key)
    return (f"The router's noise setting, {_num(eps)}: a random jitter in training; a router that masks logits by their relative "
            f"distance from the best one (SparseMixer) also keeps only those within {_num(2 * eps)} of it at inference")


@explains("clip_qkv")
def _clip_qkv(key, v, c):
    return f"Queries, keys and values are clamped to ±{_num(c.number(key))} after their projections"


@explains("shared_expert_intermediate_size", "shared_intermediate_size")
def _shared_width(key, v, c):
    width = c.count(key)
    return f"The hidden width of the shared expert: {grouped(width)}" if width else "Zero: there is no shared expert"


@explains("moe_num_experts")
def _moe_num_experts(key, v, c):
    return f"{_plural(c.count(key), 'routed expert')} per mixture block"


@explains("moe_num_shared_experts")
def _moe_num_shared(key, v, c):
    n = c.count(key)
    return f"{_plural(n, 'shared expert')}, run on every token as one MLP {grouped(n)} times an expert's width" if n else "No shared experts"


@explains("moe_k")
def _moe_k(key, v, c):
    return f"{_plural(c.count(key), 'routed expert')} chosen for each token"


@explains("moe_layer_start_index")
def _moe_start(key, v, c):
    return f"The first block that is a mixture of experts: block {grouped(c.count(key))}; the blocks before it keep a dense MLP"


@explains("moe_layer_end_index")
def _moe_end(key, v, c):
    end = v if isinstance(v, int) and not isinstance(v, bool) and v < 0 else c.count(key)
    return "The last block may be a mixture" if end < 0 else f"The last block that may be a mixture of experts: block {grouped(end)}"


@explains("moe_layer_interval")
def _moe_interval(key, v, c):
    n = c.count(key)
    return "From the first mixture block on, every block is a mixture" if n == 1 else f"From the first mixture block on, every {_ordinal(n)} block is a mixture"


@explains("moe_capacity")
def _moe_capacity(key, v, c):
    return f"Per-expert token capacities of the training code's dispatch, {_value_words(v)}; transformers' class routes every token without a cap"


@explains("moe_gate")
def _moe_gate(key, v, c):
    return f"The training code's name for the router's rule, {_value_words(c.text(key))}"


@explains("attn_type_list")
def _attn_type_list(key, v, c):
    if not isinstance(v, list) or not v:
        c.fail(key, f"must be a list of attention types, one per layer, not {json.dumps(v)}")
    counts = {t: v.count(t) for t in dict.fromkeys(v)}
    return "One attention type per layer, as the checkpoint's own code numbers them: " + ", ".join(
        f"type {_value_words(t)} at {_plural(n, 'layer')}" for t, n in counts.items())


@explains("qk_norm_type")
def _qk_norm_type(key, v, c):
    kind = c.text(key)
    where = ("one norm over all heads' width for the queries and one for the keys" if kind == "per_layer"
             else "a norm over each head" if kind == "per_head" else "a placement the atlas has no words for")
    return f'Where the query and key norms act, "{kind}": {where}'


@explains("num_mtp_modules")
def _mtp_modules(key, v, c):
    return f"{_plural(c.count(key), 'multi-token-prediction module')} in training; transformers builds none"


@explains("mtp_transformer_layers")
def _mtp_layers(key, v, c):
    return f"{_plural(c.count(key), 'decoder layer')} inside each multi-token-prediction module; transformers builds none"


# Special-token ids a training config reserves (Hunyuan's): the role each key names.
RESERVED_TOKENS = {
    "eod_token_id": "end of a document", "sep_token_id": "separator", "pad_id": "padding (a second spelling of pad_token_id)",
    "im_start_id": "start of a chat message", "im_end_id": "end of a chat message", "im_newline_id": "line break inside a message",
    "image_token_id": "place of an image", "mask_init_id": "first mask token", "text_start_id": "start of text",
    "text_end_id": "end of text", "video_start_id": "start of a video", "video_end_id": "end of a video",
}


def _reserved(key, v, c):
    return f"Token id {grouped(c.count(key))}, reserved as the {RESERVED_TOKENS[key]}; the model's layers treat it like any other token"


for _key in RESERVED_TOKENS:
    EXPLAIN[_key] = _reserved

# Settings of a vision tower or of training that a text-only model's class never uses: each says what it
# sets, from its value.
_switch("add_classification_head", "A classification head is added for training", "No classification head is added")
_switch("anyres_vit_two_views", "The image encoder looks at two views of each image", "The image encoder looks at one view of each image")
_switch("group_limited_greedy", "The router first limits each token to the best expert groups", "The router does not limit tokens to expert groups")
_switch("moe_drop_tokens", "Experts over their capacity drop tokens in training", "No token is dropped for capacity")
_switch("moe_random_routing_dropped_token", "Dropped tokens are routed at random in training", "Dropped tokens are not routed at random")
_switch("position_embedding_xdrope", "Positions of media tokens use the XD rotary layout", "No XD rotary layout for media tokens")
_switch("skip_cls_token", "The image encoder's class token is left out", "The image encoder's class token is kept")
_switch("use_cla", "Key-value caches are shared across adjacent layers (cross-layer attention)", "Every layer keeps its own keys and values")
_switch("use_mixed_mlp_moe", "Every mixture block also runs a shared MLP on every token", "No shared MLP beside the experts")
_switch("use_mla", "Attention uses compressed latents (latent attention)", "Attention is ordinary grouped-query attention, with no latents")
_switch("use_rotary_pos_emb", "Positions enter through the rotary embedding", "No rotary embedding")
_switch("vit_add_patchemb_bias", "The image patch embedding carries a bias", "The image patch embedding has no bias")
_switch("vit_remove_prenorm", "The image encoder drops its first norm", "The image encoder keeps its first norm")
_switch("vit_used_rms_norm", "The image encoder uses RMSNorm", "The image encoder uses LayerNorm")


@explains("attention_head_dim")
def _attention_head_dim(key, v, c):
    return f"The width of each attention head, {grouped(c.count(key))}, under the training code's name for head_dim"


@explains("moe_topk")
def _moe_topk(key, v, c):
    if isinstance(v, list):
        ks = [c.count(key, k) for k in v]
        return (f"Experts chosen per token, given once per layer: {grouped(ks[0])} at each of the {len(ks)} layers" if len(set(ks)) == 1
                else f"Experts chosen per token, given once per layer: from {grouped(min(ks))} to {grouped(max(ks))}")
    return f"{_plural(c.count(key), 'routed expert')} chosen for each token"


@explains("num_shared_expert")
def _num_shared_expert(key, v, c):
    counts = v if isinstance(v, list) else [v]
    ns = [c.count(key, n) for n in counts]
    per = f", given once per layer for {len(ns)} layers" if isinstance(v, list) else ""
    return (f"{_plural(ns[0], 'shared expert')} in every mixture block{per}" if len(set(ns)) == 1
            else f"Shared experts per mixture block, from {grouped(min(ns))} to {grouped(max(ns))}{per}")


@explains("cla_share_factor")
def _cla_factor(key, v, c):
    return f"With cross-layer attention on, each key-value cache would serve {_plural(c.count(key), 'layer')}"


@explains("class_num")
def _class_num(key, v, c):
    return f"Classes of the optional classification head: {grouped(c.count(key))}"


@explains("pool_type")
def _pool_type(key, v, c):
    return f"How the optional classification head pools the sequence: {_value_words(c.text(key))}"


@explains("dense_list")
def _dense_list(key, v, c):
    return f"A list of sizes the training code reads, {_value_words(v)}; its meaning there is not documented in the copy"


@explains("moe_layer_num_skipped")
def _moe_skipped(key, v, c):
    return f"A count of mixture layers the training code skips, {grouped(c.count(key))}"


@explains("norm_type")
def _norm_type(key, v, c):
    kind = c.text(key)
    return f'The norm the blocks use, "{kind}"' + (": RMSNorm" if kind == "rms" else "")


@explains("org_vocab_size")
def _org_vocab(key, v, c):
    return f"The vocabulary before any tokens were added for media, {grouped(c.count(key))} entries"


@explains("num_media_embeds")
def _media_embeds(key, v, c):
    return f"Embeddings each image contributes to the sequence: {grouped(c.count(key))}"


@explains("anyres_pooling_size")
def _anyres_pool(key, v, c):
    return f"Pooling window over image features at any resolution: {grouped(c.count(key))}"


@explains("anyres_vit_max_image_size", "vit_path", "vit_type", "xdrope_section", unset=True)
def _vision_unset(key, v, c):
    return f"A setting of the image encoder, {_value_words(v)}" if v is not None else "Left unset: no image encoder is configured here"


@explains("vit_input_resolution", "vit_patch", "vit_token")
def _vit_size(key, v, c):
    what = {"vit_input_resolution": "input resolution in pixels", "vit_patch": "patch size", "vit_token": "tokens per image"}[key]
    return f"The image encoder's {what}: {grouped(c.count(key))}"


@explains("vit_mapping_type", "vit_norm_type")
def _vit_kind(key, v, c):
    what = {"vit_mapping_type": "how image features are mapped into the stream", "vit_norm_type": "the image encoder's norm"}[key]
    return f"{what[0].upper() + what[1:]}: {_value_words(c.text(key))}"


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


# --- which keys transformers reads -----------------------------------------------------------------

# The parts of transformers that hold model-specific code: only the family's own files count there.
MODELS_DIR = "models"
RELATIVE_IMPORT = re.compile(r"from \.\.(\w+)\.(\w+) import")


WORD = re.compile(r"\w+")


@cache
def _shared_words() -> frozenset[str]:
    """Every word in transformers outside its models folder: configuration, modeling, generation,
    masking, caching, quantization and the rest of the shared code."""
    import transformers

    root = Path(transformers.__file__).parent
    words: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        if path.relative_to(root).parts[0] != MODELS_DIR:
            words.update(WORD.findall(path.read_text(encoding="utf-8")))
    return frozenset(words)


@cache
def _family_words(*classes) -> frozenset[str]:
    """Every word in the source files of the classes' modules and the sibling model files they import from."""
    import importlib.util
    import inspect

    seen: set[str] = set()
    words: set[str] = set()
    todo = [inspect.getsourcefile(cls) for cls in classes]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        text = Path(path).read_text(encoding="utf-8")
        words.update(WORD.findall(text))
        for package, module in RELATIVE_IMPORT.findall(text):
            found = importlib.util.find_spec(f"transformers.models.{package}.{module}")
            if found and found.origin:
                todo.append(found.origin)
    return frozenset(words)


# Keys that set the layers' own arithmetic. Only the model's modeling code implements that arithmetic,
# so only its files are searched for them: the shared code names some of them for other purposes
# (GGUF conversion tables, fused kernels for other models), and a configuration class may declare
# one that its model never uses (gpt-oss declares hidden_act; its experts use their own gate).
MODEL_SCOPED = frozenset({
    "hidden_act", "hidden_activation", "activation_function", "attention_bias", "mlp_bias", "scoring_func",
    "topk_method", "n_group", "topk_group", "norm_topk_prob", "routed_scaling_factor", "n_shared_experts",
    "first_k_dense_replace", "moe_layer_freq", "swiglu_limit", "query_pre_attn_scalar", "attn_logit_softcapping",
    "final_logit_softcapping",
})


def unread_keys(raw: Mapping[str, Any], model_class, config_class) -> set[str]:
    """The keys of ``raw`` that transformers never names where it could read them for this model.

    A key of MODEL_SCOPED counts as read where the model's modeling files name it (or the attribute
    the configuration class maps it to); any other key where the shared code, the configuration
    files or the modeling files name it. The match is generous (a name in a comment counts), so a key
    is called unread only when no such code can read it under that name."""
    modeling = _family_words(model_class)
    everything = _shared_words() | _family_words(config_class) | modeling
    aliases = getattr(config_class, "attribute_map", {}) or {}
    unread = set()
    for key in raw:
        names = {key, aliases.get(key, key)}
        if not names & (modeling if key in MODEL_SCOPED else everything):
            unread.add(key)
    return unread


# The keys of the older, multimodal and hybrid-attention configs, registered in EXPLAIN like the ones above.
from atlas.facts import config_words_more  # noqa: E402,F401  (imported last: it builds on this module's helpers)
from atlas.facts import config_words_v4  # noqa: E402,F401  (DeepSeek-V4's keys; builds on both modules above)
