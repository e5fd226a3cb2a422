"""The preview's tiny config, derived from the pinned one by rule.

The same block kinds in the same pattern (DeepSeek-style "first k blocks dense" keeps its k dense
blocks and adds two mixture blocks), the same routing rule, expert groups, top-k ratio and scaling
factor, the same rotary settings, and small widths; a family's ``preview`` function adds its own
changes. The preview run (``atlas.model.preview``) builds the family's class at this config.
"""

from __future__ import annotations

from typing import Any

from atlas.inputs.config_keys import TOP_K_KEYS
from atlas.model.block_kinds import window_narrows
from atlas.model.sizes import expert_key, mamba_stack, ssm_sizes

TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 32,
    "num_attention_heads": 4,
    "q_lora_rank": 32,
    "kv_lora_rank": 16,
    "qk_nope_head_dim": 16,
    "qk_rope_head_dim": 8,
    "v_head_dim": 16,
    "vocab_size": 256,
}
TINY_TOP_K = 2
TINY_SLIDING_WINDOW = 8
TINY_SWIGLU_LIMIT = 0.5
TINY_RESCALE_EVERY = 2  # RWKV's halving of the stream: after every second block, so the three tiny blocks show it once


def _period(pattern: list) -> int:
    """The shortest p with pattern[i] == pattern[i % p] for every i."""
    return next(p for p in range(1, len(pattern) + 1) if all(x == pattern[i % p] for i, x in enumerate(pattern)))


def tiny_values(config) -> dict[str, Any]:
    """The config values the preview changes, by the generic rule (a family's ``preview`` adds to it)."""
    values: dict[str, Any] = {k: v for k, v in TINY.items() if getattr(config, k, None) is not None}
    heads, kv_heads = getattr(config, "num_attention_heads", None), getattr(config, "num_key_value_heads", None)
    if kv_heads and heads:
        # at least two key-value heads where the checkpoint has two or more: with one, every query head
        # reads the same keys and the run cannot show which key head a query head shares
        values["num_key_value_heads"] = max(min(2, kv_heads), TINY["num_attention_heads"] * kv_heads // heads)
    derived_head_dim = isinstance(getattr(type(config), "head_dim", None), property)  # width / heads (Falcon): follows the tiny sizes
    # latent attention sizes its heads apart: a qk_rope_head_dim that is set, not a key left null (Hunyuan's copy)
    if getattr(config, "head_dim", None) and not getattr(config, "qk_rope_head_dim", None) and not derived_head_dim:
        values["head_dim"] = 16
    first_dense = getattr(config, "first_k_dense_replace", None)
    values["num_hidden_layers"] = (first_dense + 2) if first_dense is not None else 3
    layer_types = getattr(config, "layer_types", None)
    if layer_types:
        # One whole period of the attention pattern (5 local then 1 global on Gemma 3), at least 3 blocks.
        period = _period(list(layer_types))
        if period > len(layer_types) // 2 and period > 3:
            # a pattern that does not repeat (a hybrid's hand-placed attention blocks): the shortest
            # start of it that has every kind of block
            period = next(n for n in range(1, period + 1) if set(layer_types[:n]) == set(layer_types))
        values["num_hidden_layers"] = max(period, values["num_hidden_layers"])
        values["layer_types"] = list(layer_types[: values["num_hidden_layers"]])
    no_rope = getattr(config, "no_rope_layers", None)
    if no_rope:
        # One whole period of the blocks that skip their rotary angles too (3 rotary, 1 NoPE on SmolLM3).
        flags = list(no_rope)[: config.num_hidden_layers]
        values["num_hidden_layers"] = max(_period(flags), values["num_hidden_layers"])
        values["no_rope_layers"] = flags[: values["num_hidden_layers"]]
        if layer_types:
            values["layer_types"] = list(layer_types[: values["num_hidden_layers"]])
    mlp_kinds = getattr(config, "mlp_layer_types", None)
    if mlp_kinds and len(mlp_kinds) == config.num_hidden_layers:
        if layer_types and len(layer_types) == len(mlp_kinds):
            # every pairing of an attention kind with an MLP kind the stack has (MiMo-V2-Flash: a dense global
            # block 0, windowed mixtures, global mixtures from block 5): the shortest start that has them all
            pairs = list(zip(layer_types, mlp_kinds))
            values["num_hidden_layers"] = max(values["num_hidden_layers"],
                                              next(n for n in range(1, len(pairs) + 1) if set(pairs[:n]) == set(pairs)))
            values["layer_types"] = list(layer_types[: values["num_hidden_layers"]])
        # one entry per block (dense or sparse MLP): the tiny stack's first blocks, as the generic rule keeps them
        values["mlp_layer_types"] = list(mlp_kinds[: values["num_hidden_layers"]])
    values.update(tiny_ssm_values(config))
    values.update(tiny_time_mixing(config))
    if getattr(config, "sliding_window", None) and window_narrows(config):
        # shorter than the prompt, so the window shows; a window as long as the context (Phi-3.5-MoE's) is
        # no window, and the tiny model keeps it as long, so that it stays none
        values["sliding_window"] = TINY_SLIDING_WINDOW
    if isinstance(getattr(config, "keep_window_size", None), int):
        # the keys each query keeps past which a mask scored from the values masks the rest (Doge's 2,048): fewer than
        # the prompt's, so the selection acts on the run and a proof without it fails
        values["keep_window_size"] = TINY_SLIDING_WINDOW // 2
    if getattr(config, "swiglu_limit", None):
        # the experts' clamp (gpt-oss: 7), far past any value the tiny run's gates reach: a bound they do
        # reach, so the clamp acts on the run and a proof without it fails
        values["swiglu_limit"] = TINY_SWIGLU_LIMIT
    if getattr(config, "attention_chunk_size", None):
        values["attention_chunk_size"] = TINY_SLIDING_WINDOW  # likewise the chunks of chunked attention
    if getattr(config, "attn_temperature_tuning", None) and getattr(config, "floor_scale", None):
        # the positions per step of the query temperature (Llama 4's NoPE blocks): short, so the temperature rises on the prompt
        values["floor_scale"] = TINY_SLIDING_WINDOW // 2
    experts_key = expert_key(config)
    top_k_key = next((k for k in TOP_K_KEYS if getattr(config, k, None)), None)
    if experts_key and top_k_key:
        # the same share of experts per token: top_k / experts stays the pinned ratio
        experts = round(TINY_TOP_K * getattr(config, experts_key) / getattr(config, top_k_key))
        values[experts_key] = experts
        values[top_k_key] = TINY_TOP_K
    values.update(tiny_linear_attention(config))
    values.update(tiny_indexer(config))
    if getattr(config, "indexer_types", None):  # which blocks run their own indexer: the tiny stack's first ones
        values["indexer_types"] = list(config.indexer_types[: values["num_hidden_layers"]])
    values["initializer_range"] = TINY["hidden_size"] ** -0.5  # wide enough weights for visible patterns
    for token in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if hasattr(config, token):
            # no id of the pinned vocabulary fits the tiny one: none, or id 0 where the class's field takes
            # no None (CwmConfig's bos_token_id is an int)
            values[token] = None if _takes_none(type(config), token) else 0
    return values


def tiny_time_mixing(config) -> dict[str, Any]:
    """RWKV's own keys: the time mixing's width in the pinned ratio to the width, and the stream halved
    often enough (every second block) that the three tiny blocks halve it once and scale one block's
    output projections, as the checkpoint's every rescale_every blocks do."""
    values: dict[str, Any] = {}
    inner = getattr(config, "attention_hidden_size", None)
    if isinstance(inner, int) and inner > 0 and isinstance(getattr(config, "hidden_size", None), int):
        values["attention_hidden_size"] = TINY["hidden_size"] * inner // config.hidden_size
    rescale = getattr(config, "rescale_every", None)
    if isinstance(rescale, int) and rescale > 0:
        values["rescale_every"] = TINY_RESCALE_EVERY
    return values


def _takes_none(cls, field: str) -> bool:
    """Whether the configuration class's annotation of ``field`` admits None (true where it says nothing)."""
    import types
    import typing

    annotation = next((c.__annotations__[field] for c in cls.__mro__ if field in getattr(c, "__annotations__", {})), None)
    if annotation is None or isinstance(annotation, str):
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return type(None) in typing.get_args(annotation)
    return annotation is type(None) or annotation is typing.Any


TINY_INDEX_TOPK = 8  # shorter than the prompt: the later queries' indexers drop positions
TINY_INDEX_HEADS = 4
TINY_INDEX_HEAD_DIM = 16  # twice the tiny rotary width: half the indexer's head is rotated, half is not


def tiny_indexer(config) -> dict[str, Any]:
    """A sparse attention's lightning indexer (DeepSeek Sparse Attention), small: four heads of 16 dims,
    and fewer positions kept than the prompt has, so the selection drops some."""
    if not isinstance(getattr(config, "index_topk", None), int):
        return {}
    return {"index_topk": TINY_INDEX_TOPK, "index_n_heads": TINY_INDEX_HEADS, "index_head_dim": TINY_INDEX_HEAD_DIM}


TINY_LINEAR_KEY_HEADS = 2
TINY_LINEAR_HEAD_DIM = 16


def tiny_linear_attention(config) -> dict[str, Any]:
    """Linear attention's own heads, small: two key heads, value heads in the pinned ratio to them
    (several value heads share a key head where the checkpoint's do), 16 dims a head."""
    values: dict[str, Any] = {}
    key_heads = getattr(config, "linear_num_key_heads", None)
    if key_heads:
        ratio = max(1, (getattr(config, "linear_num_value_heads", None) or key_heads) // key_heads)
        values["linear_num_key_heads"] = TINY_LINEAR_KEY_HEADS
        if getattr(config, "linear_num_value_heads", None):
            values["linear_num_value_heads"] = TINY_LINEAR_KEY_HEADS * ratio
    elif getattr(config, "linear_num_heads", None):
        values["linear_num_heads"] = TINY_LINEAR_KEY_HEADS
    for key in ("linear_key_head_dim", "linear_value_head_dim", "linear_head_dim"):
        if getattr(config, key, None):
            values[key] = TINY_LINEAR_HEAD_DIM
    return values


# A state-space mixer's sizes at the preview (each config key a family may use): 8 heads of 8 channels in
# 2 groups, a state of 16 per channel, chunks shorter than the prompt so that the chunked scan carries
# its state across chunk boundaries.
TINY_SSM = {
    "mamba_num_heads": 8, "mamba_n_heads": 8,
    "mamba_head_dim": 8, "mamba_d_head": 8,
    "ssm_state_size": 16, "mamba_d_state": 16,
    "n_groups": 2, "mamba_n_groups": 2,
    "chunk_size": 8, "mamba_chunk_size": 8,
    "mamba_d_ssm": 64,
    "mamba_dt_rank": 8,  # the first Mamba's low-rank time step (Jamba)
    "n_mamba_heads": 8, "mamba_ngroups": 2,  # Zamba2's names; its head size follows as mamba_expand × width / heads
}


TINY_STATE = 16  # an attention-free Mamba stack's state per channel (Mamba-1) or per head channel (Mamba-2)
TINY_MAMBA2_HEADS = 8


def tiny_mamba_stack(config, kind: str) -> dict[str, Any]:
    """An attention-free Mamba stack's own sizes, shrunk with the width so that the class's checks and
    derivations hold: the inner width stays expand × width (Mamba2Config requires num_heads × head_dim to
    equal it)."""
    width = TINY["hidden_size"]
    inner = int(config.expand * width)
    # the time-step rank at 8, not the rule's ceil(64 / 16) = 4: a width no other tiny size has (conv_kernel is 4), so a
    # norm over it (Falcon Mamba's) is read back to the checkpoint's time_step_rank
    values: dict[str, Any] = {"state_size": TINY_STATE, "time_step_rank": 8, "intermediate_size": inner}
    if kind == "mamba2":
        values.update(num_heads=TINY_MAMBA2_HEADS, head_dim=inner // TINY_MAMBA2_HEADS,
                      n_groups=TINY_SSM["n_groups"], chunk_size=TINY_SSM["chunk_size"])
        values.pop("intermediate_size")
    return values


def tiny_ssm_values(config) -> dict[str, Any]:
    if not ssm_sizes(config):
        return {}
    stack = mamba_stack(config)
    if stack:
        return tiny_mamba_stack(config, stack)
    values = {k: v for k, v in TINY_SSM.items() if isinstance(getattr(config, k, None), int)}
    expand = getattr(config, "mamba_expand", None)
    if isinstance(expand, int) and "mamba_d_head" in values and "mamba_d_ssm" not in values:
        # the inner width is tied to the width (Granite 4.0-H: mamba_expand × hidden_size = heads × head_dim)
        values["mamba_d_head"] = expand * TINY["hidden_size"] // values["mamba_n_heads"]
    if isinstance(expand, int) and "n_mamba_heads" in values and isinstance(getattr(config, "mamba_headdim", None), int):
        # a head size the file gives beside the heads it follows from (Zamba2's mamba_headdim): kept in step
        values["mamba_headdim"] = expand * TINY["hidden_size"] // values["n_mamba_heads"]
    return values


def tiny_per_layer(config, values: dict[str, Any]) -> dict[str, Any]:
    """A configuration whose blocks differ in some size (Gemma 4's global blocks: wider heads, fewer
    key-value heads) keeps that difference at the tiny sizes: each block of the tiny stack that the
    pinned one builds with its own values gets them shrunk by the same rule, a head size in the pinned
    ratio to the others' (512 against 256 becomes 32 against 16)."""
    from atlas.inputs.layers import global_config, layer_config, overrides

    pinned = overrides(config)
    if not pinned:
        return {}
    whole = global_config(config)
    layers = values.get("num_hidden_layers", config.num_hidden_layers)
    tiny: dict[int, dict[str, Any]] = {}
    for index, changed in pinned.items():
        if index >= layers:
            continue
        shrunk = tiny_values(layer_config(config, index))
        own: dict[str, Any] = {}
        for key, value in changed.items():
            base, tiny_base = getattr(whole, key, None), values.get(key)
            if key == "head_dim" and _integer_ratio(value, base, tiny_base):
                own[key] = tiny_base * value // base
            elif key == "num_key_value_heads" and isinstance(value, int):
                # a block with fewer key-value heads than the others (Gemma 4's global blocks) keeps fewer on the
                # preview: the plain share of the tiny heads, not the two the generic rule keeps at least
                own[key] = max(1, TINY["num_attention_heads"] * value // config.num_attention_heads)
            else:
                own[key] = shrunk.get(key, value)
        tiny[index] = own
    return {"per_layer_config": tiny}


def _integer_ratio(value, base, tiny_base) -> bool:
    return all(isinstance(v, int) and v > 0 for v in (value, base, tiny_base)) and (tiny_base * value) % base == 0


def tiny_config(family, pinned_config):
    """The tiny config: the pinned config with the generic rule's and the family's changes applied."""
    from atlas.inputs.layers import global_config

    values = tiny_values(global_config(pinned_config))
    values.update(tiny_per_layer(pinned_config, values))
    if family.preview is not None:
        values.update(family.call("preview", pinned_config))
    raw = pinned_config.to_dict()
    for derived in ("model_type", "transformers_version", "architectures", "head_dim", "num_local_experts", "qk_head_dim"):
        if derived not in values:
            raw.pop(derived, None)
    raw.update(values)
    # a value the class derives from others (Falcon-H1's and Jamba's block types: a property without a
    # setter, reached directly or through attribute_map) cannot be given: the fields it derives from are
    # given instead, and the tiny config derives it again
    cls = type(pinned_config)
    for key in list(raw):
        target = getattr(cls, "attribute_map", {}).get(key, key)
        attribute = getattr(cls, target, None)
        if isinstance(attribute, property) and attribute.fset is None:
            raw.pop(key)
    from huggingface_hub.errors import StrictDataclassError  # what a config class's validators raise

    try:
        return cls(**raw)
    except (TypeError, ValueError, StrictDataclassError) as e:
        # the generic rule shrank a field another one must agree with (GPT-Neo's attention_types against
        # num_layers): the family's preview() sets the two together
        from atlas.errors import AtlasError

        raise AtlasError(f"atlas/families/{family.name}.py", "preview",
                         f"the tiny config is rejected by {cls.__name__}: {' '.join(str(e).split())}; "
                         "a preview() that sets the fields it names together makes one the class accepts") from None
