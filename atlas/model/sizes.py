"""The sizes a configuration gives the layouts: the standardized sizes, per model and per block.

``checkpoint_sizes`` reads them from a transformers config under whichever key its family uses (the
heads, the head sizes, the MLP's width, the routed experts and experts per token, a linear-attention
or state-space mixer's sizes, an indexer's keep, the residual streams), so a layout's dims
(``atlas.model.vocabulary``) resolve to numbers at a checkpoint's (or the preview's) sizes.
"""

from __future__ import annotations

from typing import Mapping

from atlas.inputs.config_keys import EXPERT_KEYS, TOP_K_KEYS

STREAM_SIZE_KEYS = ("residual_streams", "compressed_blocks")  # the sizes stream_sizes gives, where the config has them


def stream_sizes(config) -> dict[str, int]:
    """How many residual streams a block reads and writes (hyper-connections' hc_mult), and how many blocks
    add compressed keys to their sliding window (DeepSeek-V4's layer_types); nothing for other models."""
    out = {}
    if isinstance(getattr(config, "hc_mult", None), int):
        out["residual_streams"] = config.hc_mult
    types = getattr(config, "layer_types", None) or []
    rates = getattr(config, "compress_rates", None)
    if isinstance(rates, dict) and types:
        out["compressed_blocks"] = sum(1 for t in types if t in rates)
    return out


def checkpoint_sizes(config) -> dict[str, int | None]:
    """The sizes layouts resolve with, from a transformers config: the standardized sizes, the
    number of routed experts and the experts per token (None where the family has no such size).
    Where blocks are built with sizes of their own (Gemma 4's global blocks), a size that differs
    between blocks is None here, so layouts keep its name; ``block_sizes`` gives each block's."""
    from atlas.inputs.layers import heterogeneous, layer_configs

    if heterogeneous(config):
        per_block = [checkpoint_sizes(layer) for layer in layer_configs(config)]
        return {k: (v if all(b[k] == v for b in per_block) else None) for k, v in per_block[0].items()}
    # read through the class's own names (getattr follows attribute_map and properties); an attention-free
    # model's class (Mamba's, RWKV's) has no heads at all, and its head sizes are then None
    heads = getattr(config, "num_attention_heads", None)
    head_dim = getattr(config, "v_head_dim", None) or getattr(config, "head_dim", None) or (config.hidden_size // heads if heads else None)
    rope, nope = getattr(config, "qk_rope_head_dim", None), getattr(config, "qk_nope_head_dim", None)
    experts = routed_experts(config)
    if experts and getattr(config, "zero_expert_num", None):
        experts += config.zero_expert_num  # the router's choices: zero-computation experts (LongCat-Flash) are chosen like the others
    return {
        "hidden_size": config.hidden_size,
        "num_heads": heads,
        "num_kv_heads": getattr(config, "num_key_value_heads", None) or _falcon_style_kv_heads(config) or heads,
        "head_dim": head_dim,
        # queries and keys wider than values without latent attention (MiMo-V2-Flash: head_dim 192, v_head_dim 128)
        "qk_head_dim": (rope + nope) if (rope and nope) else (getattr(config, "head_dim", None) or head_dim),
        "vocab_size": config.vocab_size,
        "intermediate_size": _intermediate_size(config),
        "num_experts": experts,
        "top_k": experts_per_token(config) if experts else None,
        **linear_attention_sizes(config),
        **ssm_sizes(config),
        **indexer_sizes(config),
        **stream_sizes(config),
    }


def indexer_sizes(config) -> dict[str, int]:
    """How many positions a sparse attention's indexer keeps for each query (none without an indexer)."""
    topk = getattr(config, "index_topk", None)
    return {"index_topk": topk} if isinstance(topk, int) else {}


def expert_key(config) -> str | None:
    """The key under which a config (a transformers config or config.json's dict) counts its routed
    experts; None where it has no mixture."""
    read = config.get if isinstance(config, Mapping) else (lambda k: getattr(config, k, None))
    return next((k for k in EXPERT_KEYS if read(k)), None)


def routed_experts(config) -> int | None:
    """How many routed experts the config gives each mixture (None: no mixture)."""
    key = expert_key(config)
    return None if key is None else (config[key] if isinstance(config, Mapping) else getattr(config, key))


def experts_per_token(config) -> int | None:
    """How many routed experts each token is sent to, under the key the config uses (None: no mixture)."""
    return next((getattr(config, k) for k in TOP_K_KEYS if isinstance(getattr(config, k, None), int)), None)


def block_sizes(config, index: int) -> dict[str, int | None]:
    """The sizes block ``index`` is built with (the whole model's where no size differs per block)."""
    from atlas.inputs.layers import layer_config

    return checkpoint_sizes(layer_config(config, index))


def differing_block_sizes(config, model=None) -> dict[str, dict[str, int]]:
    """The blocks built with sizes of their own, and those sizes: {block: {size: value}}, each against
    the whole configuration's own (empty where every block is built alike). With ``model``, also the
    key/value heads a block's attention builds for itself (MiMo-V2-Flash's windowed blocks double them)."""
    from atlas.inputs.layers import global_config, heterogeneous

    found: dict[str, dict[str, int]] = {}
    if heterogeneous(config):
        whole = checkpoint_sizes(global_config(config))
        for i in range(config.num_hidden_layers):
            own = {k: v for k, v in block_sizes(config, i).items() if v != whole.get(k)}
            if own:
                found[str(i)] = own
    if model is not None:
        for i, kv in own_kv_heads(model, config).items():
            found.setdefault(str(i), {})["num_kv_heads"] = kv
    return found


def own_kv_heads(model, config) -> dict[int, int]:
    """{block: key/value heads} for the blocks whose attention builds another count than the config's
    num_key_value_heads, read from the module's grouping of its query heads."""
    from atlas.inputs.layers import heterogeneous
    from atlas.model.introspect import find_block_list, num_blocks
    from atlas.model.roles import block_roles
    from atlas.model.structure import built_kv_heads

    if heterogeneous(config):
        return {}
    sizes = checkpoint_sizes(config)
    heads, kv = sizes.get("num_heads"), sizes.get("num_kv_heads")
    if not isinstance(heads, int) or not isinstance(kv, int):
        return {}
    found = {}
    for i, block in enumerate(find_block_list(model, num_blocks(config))[1]):
        name = block_roles(block).attention
        built = built_kv_heads(block.get_submodule(name), heads) if name else None
        if built is not None and built != kv:
            found[i] = built
    return found


LINEAR_ATTENTION_SIZES = ("linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim")


def linear_attention_sizes(config) -> dict[str, int]:
    """The heads and head sizes of a linear-attention mixer, where the config has one (none otherwise)."""
    key_heads = getattr(config, "linear_num_key_heads", None) or getattr(config, "linear_num_heads", None)
    if not key_heads:
        return {}
    key_dim = getattr(config, "linear_key_head_dim", None) or getattr(config, "linear_head_dim", None)
    values = (key_heads, getattr(config, "linear_num_value_heads", None) or key_heads, key_dim,
              getattr(config, "linear_value_head_dim", None) or key_dim)
    return dict(zip(LINEAR_ATTENTION_SIZES, values))


# The keys configuration classes give a Mamba-2 mixer's sizes under (Nemotron-H's first, then
# Granite 4.0-H's and Falcon-H1's).
SSM_HEADS_KEYS = ("mamba_num_heads", "mamba_n_heads", "n_mamba_heads")  # n_mamba_heads: Zamba2's
SSM_HEAD_DIM_KEYS = ("mamba_head_dim", "mamba_d_head", "mamba_headdim")
SSM_STATE_KEYS = ("ssm_state_size", "mamba_d_state")
SSM_GROUPS_KEYS = ("n_groups", "mamba_n_groups", "mamba_ngroups")
SSM_INNER_KEYS = ("mamba_d_ssm",)


def _first(config, keys: tuple[str, ...]):
    return next((getattr(config, k) for k in keys if isinstance(getattr(config, k, None), int)), None)


SSM_SIZE_KEYS = ("ssm_inner_size", "ssm_projection_size")  # the sizes below, present only on a model with such a mixer


def mamba_stack(config) -> str | None:
    """"mamba1" or "mamba2" where the configuration class is an attention-free Mamba stack's own (MambaConfig,
    FalconMambaConfig, Mamba2Config), None elsewhere. Those classes name the mixer's sizes without a mamba_
    prefix: expand, state_size, conv_kernel (and Mamba-2's num_heads, head_dim, n_groups), and give no
    attention heads at all."""
    if hasattr(config, "num_attention_heads") or not all(
            isinstance(getattr(config, k, None), int) for k in ("state_size", "conv_kernel")):
        return None
    if not isinstance(getattr(config, "expand", None), (int, float)):
        return None
    heads, head_dim = getattr(config, "num_heads", None), getattr(config, "head_dim", None)
    return "mamba2" if isinstance(heads, int) and isinstance(head_dim, int) else "mamba1"


def _mamba_stack_sizes(config, kind: str) -> dict[str, int]:
    # both mixers are expand × width wide inside, as the classes compute it (MambaConfig derives
    # intermediate_size from expand; Mamba2Mixer multiplies expand by the width itself)
    inner = int(config.expand * config.hidden_size)
    if kind == "mamba1":  # the scan input x and the gate z, each the inner width
        return {"ssm_inner_size": inner, "ssm_projection_size": 2 * inner}
    groups = getattr(config, "n_groups", None) or 1
    return {"ssm_inner_size": inner, "ssm_projection_size": 2 * inner + 2 * groups * config.state_size + config.num_heads}


def ssm_sizes(config) -> dict[str, int]:
    """A state-space mixer's sizes where the config gives them (nothing on a model without one): the
    inner width the heads span, and the one input projection's width (gate, the convolved x, B and C,
    one time step per head)."""
    stack = mamba_stack(config)
    if stack:
        return _mamba_stack_sizes(config, stack)
    heads, head_dim, state = _first(config, SSM_HEADS_KEYS), _first(config, SSM_HEAD_DIM_KEYS), _first(config, SSM_STATE_KEYS)
    if isinstance(getattr(config, "conv_L_cache", None), int):  # LFM2's gated short convolution: B, C and x at the full width
        return {"ssm_inner_size": config.hidden_size, "ssm_projection_size": 3 * config.hidden_size}
    if isinstance(getattr(config, "attention_hidden_size", None), int) and isinstance(getattr(config, "rescale_every", None), int):
        return {"ssm_inner_size": config.attention_hidden_size}  # RWKV's time mixing: one recurrence per channel of its own width
    if isinstance(getattr(config, "lru_width", None), int):  # RecurrentGemma's RG-LRU: one state value per channel, no one input projection
        return {"ssm_inner_size": config.lru_width}
    expand = getattr(config, "mamba_expand", None)
    if not heads and isinstance(expand, int) and state:  # the first Mamba (Jamba's): x and the gate z, each expand × width
        return {"ssm_inner_size": expand * config.hidden_size, "ssm_projection_size": 2 * expand * config.hidden_size}
    if not (heads and head_dim and state):
        return {}
    inner = _first(config, SSM_INNER_KEYS) or heads * head_dim
    groups = _first(config, SSM_GROUPS_KEYS) or 1
    return {"ssm_inner_size": inner, "ssm_projection_size": 2 * inner + 2 * groups * state + heads}


def _falcon_style_kv_heads(config) -> int | None:
    """Key/value heads where the config says multi_query (one key and one value head for every query
    head) or gives num_kv_heads under the newer grouped layout, as FalconConfig does; None elsewhere."""
    if getattr(config, "new_decoder_architecture", False):
        return getattr(config, "num_kv_heads", None)
    if getattr(config, "multi_query", False):
        return 1
    return None


def _intermediate_size(config) -> int | None:
    size = getattr(config, "intermediate_size", None)
    if size is None and hasattr(config, "n_inner"):  # GPT-2's config: None means four times the width
        size = config.n_inner or 4 * config.hidden_size
    if size and getattr(config, "block_auto_adjust_ff_dim", False):
        # LFM2's feed-forward: two thirds of the configured width, times block_ffn_dim_multiplier, rounded up
        # to a multiple of block_multiple_of (as Lfm2MLP sizes itself)
        size = int(2 * size / 3)
        multiplier, multiple = getattr(config, "block_ffn_dim_multiplier", None), getattr(config, "block_multiple_of", 1)
        if multiplier is not None:
            size = int(multiplier * size)
            size = multiple * ((size + multiple - 1) // multiple)
    if size and isinstance(getattr(config, "lru_width", None), int):
        # RecurrentGemma's MLP: the gate and the up projection are each half of intermediate_size wide
        size //= 2
    if size is None and getattr(config, "ffn_hidden_size", None):  # Falcon's name for it
        size = config.ffn_hidden_size
    if size is None and getattr(config, "ffn_dim", None):  # OPT's name for it
        size = config.ffn_dim
    if size is None and getattr(config, "dff", None):  # CTRL's name for it
        size = config.dff
    if size is None and not any(hasattr(config, k) for k in ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim", "dff",
                                                            "moe_intermediate_size", "num_experts", "num_local_experts", "n_routed_experts")):
        # a dense model's configuration class with no MLP width at all (BLOOM's): the classic MLP, four times
        # the width, which the preview run's shapes check (a mixture's class without one names its experts' width)
        size = 4 * config.hidden_size
    return size
