"""Standard names: one vocabulary of activations across families, and where each family hosts them.

The vocabulary says what a value is (its name, its host, its layout type with symbolic dims, one line
of description). The resolver says where a given model holds it: it finds modules by their role
(embedding, block list, final norm, head, attention, MLP, router, experts, shared expert, the two
norms) from names and classes every transformers family shares, and a family module declares
overrides only where that generic rule cannot tell (``Family.standard_overrides``).

Each resolved value carries a ``Read``: the mechanism that captures it (a module's input or output,
the arguments or results of the attention function, the input of the eager attention's softmax, the
per-slot outputs of a registered experts function, the model's call arguments, or a derivation).
The words on the page ("the child module norm's output") are generated from the ``Read``, so they
cannot disagree with what ``atlas.model.trace`` does.

No torch here: the vocabulary and the words are plain data; only ``resolve`` walks a model.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from dataclasses import dataclass, field
from typing import Any, Mapping

# --- layouts ---------------------------------------------------------------------------------------

# Each layout type names its dims; the dims resolve per checkpoint from the standardized sizes
# (batch and seq stay symbolic: they are the call's, not the checkpoint's). The attention pattern's
# query and key axes are both positions of the call.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "Tokens": ("batch", "seq"),
    "Residual": ("batch", "seq", "hidden_size"),
    "Logits": ("batch", "seq", "vocab_size"),
    "NextTokenProbs": ("batch", "vocab_size"),
    "Queries": ("batch", "num_heads", "seq", "qk_head_dim"),
    "Keys": ("batch", "num_kv_heads", "seq", "qk_head_dim"),
    "Values": ("batch", "num_kv_heads", "seq", "head_dim"),
    "Pattern": ("batch", "num_heads", "query", "key"),
    "HeadOutputs": ("batch", "seq", "num_heads", "head_dim"),
    "Neurons": ("batch", "seq", "intermediate_size"),
    "RouterLogits": ("batch", "seq", "num_experts"),
    "ExpertWeights": ("batch", "seq", "top_k"),
    "ExpertIndices": ("batch", "seq", "top_k"),
    "ExpertOutputs": ("batch", "seq", "top_k", "hidden_size"),
    # linear attention with a recurrent state (gated DeltaNet): its own heads and head sizes
    "LinearKeys": ("batch", "seq", "linear_key_heads", "linear_key_head_dim"),
    "LinearValues": ("batch", "seq", "linear_value_heads", "linear_value_head_dim"),
    "LinearGates": ("batch", "seq", "linear_value_heads"),
    "LinearChannelGates": ("batch", "seq", "linear_value_heads", "linear_key_head_dim"),
    "RecurrentState": ("batch", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim"),
    # a state-space mixer's inner width (heads × head size) and its one input projection
    "SSMInner": ("batch", "seq", "ssm_inner_size"),
    "SSMProjections": ("batch", "seq", "ssm_projection_size"),
    # a recurrent block's RG-LRU (RecurrentGemma): its state is one number per channel of lru_width
    "RecurrentChannels": ("batch", "seq", "ssm_inner_size"),
    # a sparse attention's lightning indexer: one score per query and key position, and the positions it keeps
    "IndexScores": ("batch", "query", "key"),
    "IndexPositions": ("batch", "query", "index_topk"),
    # several residual streams (DeepSeek-V4's hyper-connections): a block's input and output hold them all
    "Streams": ("batch", "seq", "residual_streams", "hidden_size"),
    # keys (and values) of a sliding window followed by compressed ones: as many as the positions attended
    "AttendedKeys": ("batch", "num_kv_heads", "key", "qk_head_dim"),
    "AttendedValues": ("batch", "num_kv_heads", "key", "head_dim"),
    "scalar": (),
}

# the values whose layout depends on the checkpoint (layout_of), and what they become
STREAM_VALUES = ("layer_input", "layer_output")
ATTENDED_KEYS = {"attention_keys": "AttendedKeys", "attention_values": "AttendedValues"}


def layout_of(name: str, sizes: Mapping[str, Any]) -> str:
    """Value ``name``'s layout at a checkpoint's (or the preview's) sizes: its own, but a block's input and
    output hold every residual stream where there are several (residual_streams), and the keys and values
    the attention reads are as many as the positions it attends where blocks add compressed keys to their
    window (compressed_blocks)."""
    if sizes.get("residual_streams") and name in STREAM_VALUES:
        return "Streams"
    if sizes.get("compressed_blocks") and name in ATTENDED_KEYS:
        return ATTENDED_KEYS[name]
    return BY_NAME[name].layout


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


def resolve_dims(layout: str, sizes: Mapping[str, Any]) -> list[Any]:
    """A layout's dims at given sizes: symbolic call dims stay names, the others become numbers.

    ``sizes`` maps dim names to numbers (the standardized sizes plus num_experts and top_k, or the
    tiny run's sizes including batch and seq). A dim the sizes lack, or hold no number for (a dense
    model's num_experts), stays symbolic: a shape never shows a missing size as a value.
    """
    return [d if sizes.get(d) is None else sizes[d] for d in LAYOUTS[layout]]


def checkpoint_sizes(config) -> dict[str, int | None]:
    """The sizes layouts resolve with, from a transformers config: the standardized sizes, the
    number of routed experts and the experts per token (None where the family has no such size).
    Where blocks are built with sizes of their own (Gemma 4's global blocks), a size that differs
    between blocks is None here, so layouts keep its name; ``block_sizes`` gives each block's."""
    from atlas.inputs.layers import heterogeneous, layer_configs

    if heterogeneous(config):
        per_block = [checkpoint_sizes(layer) for layer in layer_configs(config)]
        return {k: (v if all(b[k] == v for b in per_block) else None) for k, v in per_block[0].items()}
    heads = config.num_attention_heads
    head_dim = getattr(config, "v_head_dim", None) or getattr(config, "head_dim", None) or config.hidden_size // heads
    rope, nope = getattr(config, "qk_rope_head_dim", None), getattr(config, "qk_nope_head_dim", None)
    experts = routed_experts(config)
    if experts and getattr(config, "zero_expert_num", None):
        experts += config.zero_expert_num  # the router's choices: zero-computation experts (LongCat-Flash) are chosen like the others
    return {
        "hidden_size": config.hidden_size,
        "num_heads": heads,
        "num_kv_heads": getattr(config, "num_key_value_heads", None) or _falcon_style_kv_heads(config) or heads,
        "head_dim": head_dim,
        "qk_head_dim": (rope + nope) if (rope and nope) else head_dim,
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


EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")  # the config's routed experts, by whichever name it uses


def expert_key(config) -> str | None:
    """The key under which a config (a transformers config or config.json's dict) counts its routed
    experts; None where it has no mixture."""
    read = config.get if isinstance(config, Mapping) else (lambda k: getattr(config, k, None))
    return next((k for k in EXPERT_KEYS if read(k)), None)


def routed_experts(config) -> int | None:
    """How many routed experts the config gives each mixture (None: no mixture)."""
    key = expert_key(config)
    return None if key is None else (config[key] if isinstance(config, Mapping) else getattr(config, key))


TOP_K_KEYS = ("num_experts_per_tok", "top_k_experts")  # the config's experts per token (Gemma 4: top_k_experts)


def experts_per_token(config) -> int | None:
    """How many routed experts each token is sent to, under the key the config uses (None: no mixture)."""
    return next((getattr(config, k) for k in TOP_K_KEYS if isinstance(getattr(config, k, None), int)), None)


def block_sizes(config, index: int) -> dict[str, int | None]:
    """The sizes block ``index`` is built with (the whole model's where no size differs per block)."""
    from atlas.inputs.layers import layer_config

    return checkpoint_sizes(layer_config(config, index))


def differing_block_sizes(config) -> dict[str, dict[str, int]]:
    """The blocks built with sizes of their own, and those sizes: {block: {size: value}}, each against
    the whole configuration's own (empty where every block is built alike)."""
    from atlas.inputs.layers import global_config, heterogeneous

    if not heterogeneous(config):
        return {}
    whole = checkpoint_sizes(global_config(config))
    found = {}
    for i in range(config.num_hidden_layers):
        own = {k: v for k, v in block_sizes(config, i).items() if v != whole.get(k)}
        if own:
            found[str(i)] = own
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
SSM_HEADS_KEYS = ("mamba_num_heads", "mamba_n_heads")
SSM_HEAD_DIM_KEYS = ("mamba_head_dim", "mamba_d_head")
SSM_STATE_KEYS = ("ssm_state_size", "mamba_d_state")
SSM_GROUPS_KEYS = ("n_groups", "mamba_n_groups")
SSM_INNER_KEYS = ("mamba_d_ssm",)


def _first(config, keys: tuple[str, ...]):
    return next((getattr(config, k) for k in keys if isinstance(getattr(config, k, None), int)), None)


SSM_SIZE_KEYS = ("ssm_inner_size", "ssm_projection_size")  # the sizes below, present only on a model with such a mixer


def ssm_sizes(config) -> dict[str, int]:
    """A state-space mixer's sizes where the config gives them (nothing on a model without one): the
    inner width the heads span, and the one input projection's width (gate, the convolved x, B and C,
    one time step per head)."""
    heads, head_dim, state = _first(config, SSM_HEADS_KEYS), _first(config, SSM_HEAD_DIM_KEYS), _first(config, SSM_STATE_KEYS)
    if isinstance(getattr(config, "conv_L_cache", None), int):  # LFM2's gated short convolution: B, C and x at the full width
        return {"ssm_inner_size": config.hidden_size, "ssm_projection_size": 3 * config.hidden_size}
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
    if size is None and not any(hasattr(config, k) for k in ("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim",
                                                            "moe_intermediate_size", "num_experts", "num_local_experts", "n_routed_experts")):
        # a dense model's configuration class with no MLP width at all (BLOOM's): the classic MLP, four times
        # the width, which the preview run's shapes check (a mixture's class without one names its experts' width)
        size = 4 * config.hidden_size
    return size


# --- the vocabulary --------------------------------------------------------------------------------

HOSTS = ("model", "layers[i]", "layers[i].self_attn", "layers[i].mlp", "layers[i].ssm")
# Hosts whose values are all extensions: listed only on a model that has one of them.
EXTENSION_HOSTS = ("layers[i].ssm",)


@dataclass(frozen=True)
class StandardValue:
    name: str
    host: str  # one of HOSTS
    layout: str  # a key of LAYOUTS
    description: str
    mixture: bool = False  # exists only where the MLP is a mixture of experts
    # Added for families that have something the SPEC's core set lacks (GPT-2's learned positions):
    # listed only on the models that have it.
    extension: bool = False


VOCABULARY: tuple[StandardValue, ...] = (
    # model
    StandardValue("logits", "model", "Logits", "What the model returns as logits, after anything it applies past the head"),
    StandardValue("token_embeddings", "model", "Residual", "The embedding table's rows for the input tokens: the stream before block 0"),
    StandardValue("position_embeddings", "model", "Residual", "The learned position table's rows for the call's positions, added to the token embeddings before block 0", extension=True),
    StandardValue("embedding_norm_output", "model", "Residual", "The token embeddings after the norm the model applies to them before block 0", extension=True),
    StandardValue("final_norm_output", "model", "Residual", "The stream after the last norm: what the head reads"),
    StandardValue("lm_head_output", "model", "Logits", "The head's own output, before any softcap or scale the model adds"),
    StandardValue("next_token_probs", "model", "NextTokenProbs", "The softmax of the logits at the last position: the next-token distribution"),
    StandardValue("input_ids", "model", "Tokens", "The token ids of the call"),
    StandardValue("attention_mask", "model", "Tokens", "The padding mask of the call: 1 for a real token, 0 for padding"),
    StandardValue("input_size", "model", "scalar", "The call's (batch, seq) pair"),
    # layers[i]
    StandardValue("layer_input", "layers[i]", "Residual", "The residual stream as the block receives it"),
    StandardValue("attention_norm_output", "layers[i]", "Residual", "The stream normalized for the attention"),
    StandardValue("layer_mid", "layers[i]", "Residual", "The stream between the sublayers: input plus the attention's contribution"),
    StandardValue("mlp_norm_output", "layers[i]", "Residual", "The stream normalized for the MLP"),
    StandardValue("mlp_input", "layers[i]", "Residual", "The tensor the MLP is called on"),
    StandardValue("layer_output", "layers[i]", "Residual", "The residual stream the block hands on (the tensor, even where the block returns a tuple)"),
    # layers[i].self_attn
    StandardValue("attention_queries", "layers[i].self_attn", "Queries", "Queries per head as the attention function receives them, rotary applied"),
    StandardValue("attention_keys", "layers[i].self_attn", "Keys", "Keys per key head as the attention function receives them, rotary applied"),
    StandardValue("attention_values", "layers[i].self_attn", "Values", "Values per key head as the attention function receives them"),
    StandardValue("attention_scores", "layers[i].self_attn", "Pattern", "Scaled query-key products with the mask added, before the softmax"),
    StandardValue("attention_probabilities", "layers[i].self_attn", "Pattern", "The softmax of the scores: how much each query position takes from each key position"),
    StandardValue("attention_head_outputs", "layers[i].self_attn", "HeadOutputs", "Each head's mix of values, as the attention function returns it"),
    StandardValue("attention_premix", "layers[i].self_attn", "HeadOutputs", "All heads' outputs as the output projection receives them, split by head"),
    StandardValue("attention_output", "layers[i].self_attn", "Residual", "The attention's contribution to the residual stream"),
    # the token mixer where it is linear attention with a recurrent state (gated DeltaNet)
    # the lightning indexer of a sparse attention (DeepSeek Sparse Attention)
    StandardValue("indexer_scores", "layers[i].self_attn", "IndexScores", "The indexer's score of each key position for each query, the causal mask added: what its top-k ranks", extension=True),
    StandardValue("indexer_positions", "layers[i].self_attn", "IndexPositions", "The key positions the indexer keeps for each query, best first; the attention is masked to them", extension=True),
    StandardValue("linear_attention_queries", "layers[i].self_attn", "LinearKeys", "Queries per key head after the short causal convolution, as the delta rule receives them (before their L2 norm)", extension=True),
    StandardValue("linear_attention_keys", "layers[i].self_attn", "LinearKeys", "Keys per key head after the short causal convolution, as the delta rule receives them (before their L2 norm)", extension=True),
    StandardValue("linear_attention_values", "layers[i].self_attn", "LinearValues", "Values per value head after the short causal convolution: what the delta rule writes into the state", extension=True),
    StandardValue("linear_attention_beta", "layers[i].self_attn", "LinearGates", "The write strength in (0, 1) of each position and value head: how far the state moves towards the new value", extension=True),
    StandardValue("linear_attention_decay", "layers[i].self_attn", "LinearGates", "The log of the factor (at most 1) the state is multiplied by before each position's write, per value head", extension=True),
    StandardValue("linear_attention_channel_decay", "layers[i].self_attn", "LinearChannelGates", "The log of the factor (at most 1) each key channel of the state is multiplied by before each position's write, per value head", extension=True),
    StandardValue("linear_attention_state", "layers[i].self_attn", "RecurrentState", "The recurrent state after the last position: one key × value matrix per value head, all the layer carries to the next token", extension=True),
    StandardValue("linear_attention_head_outputs", "layers[i].self_attn", "LinearValues", "Each value head's read-out of the state with its query, before the gated norm", extension=True),
    # layers[i].mlp
    StandardValue("mlp_activation", "layers[i].mlp", "Neurons", "The activation function's output inside a dense MLP"),
    StandardValue("mlp_neurons", "layers[i].mlp", "Neurons", "What the down projection receives: act(gate) × up where the MLP is gated"),
    StandardValue("mlp_output", "layers[i].mlp", "Residual", "The MLP's contribution to the residual stream"),
    StandardValue("router_logits", "layers[i].mlp", "RouterLogits", "One logit per routed expert, before the router's scoring function", mixture=True),
    StandardValue("expert_weights", "layers[i].mlp", "ExpertWeights", "The factor each chosen expert's output is multiplied by", mixture=True),
    StandardValue("expert_indices", "layers[i].mlp", "ExpertIndices", "Which expert each routing slot sends the token to", mixture=True),
    StandardValue("expert_outputs", "layers[i].mlp", "ExpertOutputs", "Each routing slot's expert output, already multiplied by its weight", mixture=True),
    StandardValue("routed_output", "layers[i].mlp", "Residual", "The routed experts' weighted sum", mixture=True),
    # a mixture that sends every token to every expert, each expert's input scaled by the token's score for it (Llama 4)
    StandardValue("router_scores", "layers[i].mlp", "RouterLogits", "Each routed expert's factor for the token, zero for the experts not chosen: the mixture scales every expert's input by it", mixture=True, extension=True),
    StandardValue("shared_expert_output", "layers[i].mlp", "Residual", "The output of the expert every token passes through", mixture=True),
    # a state-space (Mamba-2) mixer, in blocks that have one
    StandardValue("ssm_norm_output", "layers[i]", "Residual", "The stream normalized for the state-space mixer", extension=True),
    StandardValue("ssm_input", "layers[i].ssm", "Residual", "The tensor the state-space (or short-convolution, or recurrent) mixer is called on", extension=True),
    StandardValue("ssm_projections", "layers[i].ssm", "SSMProjections", "The one input projection, its parts side by side (a Mamba-2 mixer: the gate, the convolution's inputs x, B and C, a time step per head; a short convolution: B, C and x)", extension=True),
    StandardValue("ssm_scan_output", "layers[i].ssm", "SSMInner", "Each head's read-out of its recurrent state plus the skip D·x, before the gate", extension=True),
    StandardValue("ssm_gate", "layers[i].ssm", "SSMInner", "The gate z: what the scan's output is multiplied by after a SiLU", extension=True),
    StandardValue("ssm_premix", "layers[i].ssm", "SSMInner", "What the output projection receives: the gated and normalized heads (Mamba-2), or an RG-LRU's state times its gate branch", extension=True),
    StandardValue("ssm_output", "layers[i].ssm", "Residual", "The state-space (or short-convolution, or recurrent) mixer's contribution to the residual stream", extension=True),
    # a recurrent block with an RG-LRU (RecurrentGemma's), in the state-space mixer's place
    StandardValue("rglru_input", "layers[i].ssm", "RecurrentChannels", "What the RG-LRU receives: the x branch after its short causal convolution", extension=True),
    StandardValue("rglru_input_gate", "layers[i].ssm", "RecurrentChannels", "The RG-LRU's input gate in (0, 1), per channel: how much of its input enters the state", extension=True),
    StandardValue("rglru_recurrence_gate", "layers[i].ssm", "RecurrentChannels", "The RG-LRU's recurrence gate in (0, 1), per channel: the power the decay's base is raised to, times 8", extension=True),
    StandardValue("rglru_state", "layers[i].ssm", "RecurrentChannels", "The RG-LRU's state at every position, one number per channel (its output is its state): the last position's is what the block carries to the next token, beside its convolution's last inputs", extension=True),
    StandardValue("rglru_gate_branch", "layers[i].ssm", "RecurrentChannels", "The other branch of the recurrent block: the activation of linear_y's output, which multiplies the RG-LRU's state channel by channel", extension=True),
)

BY_NAME = {v.name: v for v in VOCABULARY}

# Short names the capture API also answers to (``t.layers[1].input`` is ``layer_input``).
ALIASES = {"input": "layer_input", "output": "layer_output"}


def standard_value(name: str) -> StandardValue:
    return BY_NAME[ALIASES.get(name, name)]


# --- how a value is read ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Read:
    """The mechanism that captures one value, relative to its host module.

    kind: "output" | "input" (a module's, ``module`` relative to the host, "" for the host itself;
    ``element`` picks from a tuple; ``split_heads`` splits the last axis by head) ·
    "attention_args" | "attention_result" (the attention function's arguments or results, by element) ·
    "attention_softmax_input" (the input of the softmax inside the eager attention function) ·
    "expert_slots" (per routing slot, from the registered experts function) · "gate_sigmoids" (the outputs
    of the sigmoids a module's forward calls, by element: an RG-LRU's input gate, then its recurrence gate) · "delta_rule_args" |
    "delta_rule_result" (the arguments or results of a linear-attention mixer's delta-rule function, by
    element: query, key, value, decay, beta; output, final state) · "call_argument" (a named
    argument of the model's call) · "derived" (computed from other values: ``module`` says how).
    """

    kind: str
    module: str = ""
    element: int | None = None
    split_heads: bool = False
    flatten_tokens: bool = False  # the module sees batch × seq as one axis: unflatten it
    sum_experts: bool = False  # the module returns one row per expert and token, expert by expert: summed over the experts
    from_block: bool = False  # ``module`` is relative to the block, not the host (a post-norm beside the attention)
    # expert_slots of an experts class that runs its own loop, never dispatched to transformers' experts
    # functions (LongCat-Flash): each slot from that forward, every other slot's weight set to zero
    own_loop: bool = False

    def words(self) -> str:
        where = "the module's own" if not self.module else f"the child module {self.module}'s"
        if self.from_block:
            where = f"the block's child module {self.module}'s" if self.module else "the block's own"
        if self.kind in ("output", "input"):
            text = f"{where} {self.kind}"
            if self.element is not None:
                text += f", element {self.element}"
            if self.split_heads:
                text += ", split by head"
            if self.sum_experts:
                text += ", summed over the experts (it holds one row per expert and token)"
            if self.flatten_tokens:
                text += ", rows unflattened to batch × seq"
            return text
        if self.kind == "attention_args":
            return f"inside the forward: the arguments of the attention function, element {self.element}"
        if self.kind == "attention_result":
            return f"inside the forward: the output of the attention function, element {self.element}"
        if self.kind == "attention_softmax_input":
            return "inside the attention function: the input of its softmax"
        if self.kind == "delta_rule_args":
            return f"inside the forward: the arguments of the delta-rule function, element {self.element} ({DELTA_RULE_ARGS[self.element]})"
        if self.kind == "delta_rule_result":
            return f"inside the forward: the output of the delta-rule function, element {self.element} ({DELTA_RULE_RESULTS[self.element]})"
        if self.kind == "gate_sigmoids":
            return (f"inside {where} forward: the output of its sigmoid number {self.element + 1} "
                    f"({GATE_SIGMOIDS[self.element]})")
        if self.kind == "indexer_scores":
            return f"inside {where} forward: the scores its top-k ranks, read where it adds the causal mask to them"
        if self.kind == "expert_slots" and self.own_loop:
            return f"inside {where} forward: one routing slot at a time, through the class's own forward with every other slot's weight set to zero"
        if self.kind == "expert_slots":
            return f"inside {where} forward: one routing slot at a time, through transformers' batched experts code"
        if self.kind == "call_argument":
            return f"the model's call argument {self.module}"
        if self.kind == "derived":
            return f"derived: {self.module}"
        raise ValueError(self.kind)


# The delta-rule function a linear-attention mixer calls: its leading arguments and its results, in order.
DELTA_RULE_ARGS = ("query", "key", "value", "g", "beta")
DELTA_RULE_RESULTS = ("output", "final state")
# The sigmoids an RG-LRU's forward calls, in order: the input gate, then the recurrence gate.
GATE_SIGMOIDS = ("the input gate", "the recurrence gate")
RGLRU_GATES = ("rglru_input_gate", "rglru_recurrence_gate")


OVERRIDE_FORMAT = re.compile(r"^(?P<module>[A-Za-z0-9_.]*?)\.?(?P<kind>input|output)(?:\[(?P<element>\d+)\])?$")


BLOCK_PREFIX = "layers[i]."


def parse_override(text: str) -> Read:
    """A family's override, written as "<module path relative to the host>.<input|output>[element]".

    "shared_experts.output" is the shared expert's output; "output[0]" is the host's own first output;
    a path that starts with "layers[i]." is relative to the block instead ("layers[i].post_attention_layernorm.output"
    for an attention whose contribution is post-normed beside it).
    """
    from_block = text.startswith(BLOCK_PREFIX)
    match = OVERRIDE_FORMAT.match(text.removeprefix(BLOCK_PREFIX))
    if not match:
        raise ValueError(f"{text!r} is not '[layers[i].]<child module>.input|output[element]'")
    element = match.group("element")
    return Read(match.group("kind"), match.group("module"), int(element) if element is not None else None, from_block=from_block)


# --- roles: finding modules generically ------------------------------------------------------------

ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")
# A block whose token mixer is linear attention may name it apart (Qwen3-Next's linear_attn).
LINEAR_ATTENTION_NAMES = ("linear_attn",)
MLP_NAMES = ("mlp", "feed_forward", "block_sparse_moe", "moe", "ffn")
ATTENTION_NORM_NAMES = ("input_layernorm", "ln_1", "attention_norm", "pre_attention_layernorm", "self_attn_layer_norm")
# Order matters: where a block has both, pre_feedforward_layernorm is the MLP's norm and
# post_attention_layernorm a post-norm of the attention (Gemma 2 and 3).
MLP_NORM_NAMES = ("pre_feedforward_layernorm", "post_attention_layernorm", "ln_2", "ffn_norm", "pre_mlp_layernorm")
MLP_POST_NORM_NAMES = ("post_feedforward_layernorm", "post_mlp_layernorm")
POSITION_EMBEDDING_NAMES = ("wpe", "embed_positions", "position_embeddings")
FINAL_NORM_NAMES = ("norm", "final_layernorm", "ln_f", "final_norm")
# A norm the model applies to the token embeddings before block 0 (BLOOM's word_embeddings_layernorm;
# not LFM2's embedding_norm, which is its final norm).
EMBEDDING_NORM_NAMES = ("word_embeddings_layernorm",)
ROUTER_NAMES = ("gate", "router")
EXPERTS_NAMES = ("experts",)
SHARED_EXPERT_NAMES = ("shared_experts", "shared_expert", "shared_mlp")
ACTIVATION_NAMES = ("act_fn", "act", "activation_fn", "gelu_impl")
DOWN_PROJ_NAMES = ("down_proj", "c_proj", "fc2", "w2", "dense_4h_to_h", "fc_out")
OUTPUT_PROJ_NAMES = ("o_proj", "c_proj", "out_proj", "dense", "o")


def _child(module, names: tuple[str, ...]) -> str | None:
    children = dict(module.named_children())
    return next((n for n in names if n in children), None)


def _is_norm(module) -> bool:
    return "norm" in type(module).__name__.lower()


@dataclass(frozen=True)  # shared by every reader of a block (block_roles)
class BlockRoles:
    """The modules of one block by role, as child names (None where the block has no such module)."""

    attention: str | None
    mlp: str | None
    attention_norm: str | None
    mlp_norm: str | None
    # Norms applied to a sublayer's output before the add (Gemma 2/3's sandwich, OLMo 2's post-norms):
    # there the sublayer's contribution to the stream is the post-norm's output.
    attention_post_norm: str | None
    mlp_post_norm: str | None
    mlp_class: str | None
    # inside the attention / the MLP, relative to them
    output_proj: str | None
    activation: str | None
    down_proj: str | None
    router: str | None
    experts: str | None
    shared_expert: str | None
    # the token mixer is linear attention with a recurrent state (see is_linear_attention)
    linear_attention: bool = False
    # ... whose decay is one per key channel rather than one per head (see has_channel_decay)
    channel_decay: bool = False
    # a state-space mixer (Mamba-2) and its norm; inside it, relative to it: the input projection, the
    # gated norm and the output projection
    ssm: str | None = None
    ssm_norm: str | None = None
    ssm_in_proj: str | None = None
    ssm_gated_norm: str | None = None
    ssm_out_proj: str | None = None
    # a recurrent block's RG-LRU and the activation of its other branch (RecurrentGemma), relative to the mixer
    ssm_rg_lru: str | None = None
    ssm_branch_activation: str | None = None
    # a shared expert beside the mixture, as the block's own child (Granite 4.0-H's shared_mlp): the
    # block adds its output to the mixture's
    block_shared: str | None = None
    # the experts take every token, each expert's rows scaled beforehand by the token's score for it (see is_dense_dispatch)
    dense_dispatch: bool = False
    # the attention's lightning indexer (a sparse attention's), relative to the attention; see is_indexer
    indexer: str | None = None
    # a lightning indexer that chooses among pooled keys, inside the attention's compressor (DeepSeek-V4)
    pooled_indexer: str | None = None
    # heads projected by groups before one map to the width (DeepSeek-V4's o_a_proj and o_b_proj)
    grouped_output: bool = False

    @property
    def sublayers(self) -> int:
        """How many mixers the block runs (attention, MLP, state-space mixer); an MLP whose layers the
        block holds itself (OPT's fc1, fc2) is one."""
        return sum(x is not None for x in (self.attention, self.mlp or self.mlp_inline, self.ssm))
    # The attention computes its scores itself instead of calling transformers' attention functions
    # (Falcon, BLOOM): its modeling file defines no eager_attention_forward for a hook to stand in for.
    attention_inline: bool = False
    # The experts class runs its own loop, not dispatched through transformers' experts functions
    # (LongCat-Flash's, whose zero-computation experts those functions do not know)
    experts_own_loop: bool = False
    # Children that are lists of sublayers the block runs in turn (LongCat-Flash's two attentions, two
    # dense MLPs and their norms): the roles above name the first entries; empty elsewhere.
    sublayer_lists: tuple[str, ...] = ()
    # An MLP whose layers are the block's own children, with no MLP module around them (OPT's fc1,
    # fc2 and activation_fn): (up, down, activation), relative to the block; None elsewhere.
    mlp_inline: tuple[str, str, str | None] | None = None
    # The child that holds the first norm, the attention, the first residual add and the second norm
    # (DBRX's norm_attn_norm), returning the stream and its normed copy; None elsewhere.
    wrapper: str | None = None
    # Sublayers that add the residual stream themselves (BLOOM's attention and MLP are handed it and
    # return their output plus it): there the contribution is their last projection's output.
    attention_adds_residual: bool = False
    mlp_adds_residual: bool = False


UP_PROJ_NAMES = ("fc1", "fc_in", "c_fc", "up_proj", "dense_h_to_4h")


def is_indexer(module) -> bool:
    """A sparse attention's lightning indexer (DeepSeek Sparse Attention), by structure: a key projection
    (wk) through a LayerNorm, and a projection (weights_proj) giving one weight per indexer head; no
    tensor of its own. Its class name is never read."""
    import torch

    children = dict(module.named_children()) if module is not None else {}
    return ({"wk", "weights_proj"} <= set(children) and any(isinstance(c, torch.nn.LayerNorm) for c in children.values())
            and not _tensor_names(module))


def _grouped_output(attention) -> bool:
    from atlas.proof.hyper import is_grouped_linear

    return any(is_grouped_linear(m) for m in attention.children())


def _pooled_indexer(attention) -> str | None:
    """The path of an indexer that scores pooled keys inside the attention's compressor (DeepSeek-V4)."""
    from atlas.proof.compressed import is_compressed_indexer

    if attention is None:
        return None
    return next((n for n, m in attention.named_modules() if n and is_compressed_indexer(m)), None)


def _indexer_child(attention) -> str | None:
    return next((n for n, m in attention.named_children() if is_indexer(m)), None) if attention is not None else None


def is_linear_attention(module) -> bool:
    """A token mixer is linear attention with a recurrent state when it holds a depthwise causal
    convolution (a Conv1d with one group per channel) over its projections, as gated DeltaNet and
    Kimi delta attention do: softmax attention has none. Its structure decides, never its class name."""
    import torch

    return module is not None and any(
        isinstance(c, torch.nn.Conv1d) and c.groups == c.in_channels == c.out_channels for c in module.children())


def has_channel_decay(module) -> bool:
    """A linear-attention mixer decays its state channel by channel (Kimi delta attention) when its
    decay offset dt_bias holds more values than its decay rates A_log, one per head; a decay per head
    (gated DeltaNet) holds one of each per head."""
    named = dict(module.named_parameters()) if module is not None else {}
    bias = next((p for n, p in named.items() if n.rpartition(".")[2] == "dt_bias"), None)
    rate = next((p for n, p in named.items() if n.rpartition(".")[2] == "A_log"), None)
    return bias is not None and rate is not None and bias.numel() > rate.numel()


def adds_residual(module) -> bool:
    """A sublayer whose forward takes the residual stream as an argument of its own (BLOOM's attention
    and MLP): it returns its contribution already added to that stream."""
    import inspect

    return module is not None and "residual" in inspect.signature(module.forward).parameters


def attention_is_inline(attention) -> bool:
    import sys

    return not hasattr(sys.modules.get(type(attention).__module__), "eager_attention_forward")


@dataclass
class Roles:
    """Where a model keeps each role, as module paths from the model's root."""

    embedding: str
    position_embedding: str | None  # a learned position table (GPT-2's wpe); None where positions are rotary
    block_list: str
    final_norm: str | None
    head: str | None
    blocks: list[BlockRoles] = field(default_factory=list)
    modules: frozenset[str] = frozenset()  # every module path, so overrides can be checked
    embedding_norm: str | None = None  # a norm on the token embeddings before block 0 (BLOOM's)


def _path_of(model, target) -> str | None:
    return next((path for path, m in model.named_modules() if m is target), None)


def _tensor_names(module) -> set[str]:
    return {n for n, _ in module.named_parameters(recurse=False)}


def is_ssm(module) -> bool:
    """A selective state-space mixer, by structure: a depthwise causal convolution among its children
    and a learned per-head decay (``A_log``) and skip (``D``) of its own."""
    import torch

    convs = [m for m in module.children() if isinstance(m, torch.nn.Conv1d)]
    return bool(convs) and convs[0].groups == convs[0].in_channels and {"A_log", "D"} <= _tensor_names(module)


def is_short_conv(module) -> bool:
    """A gated short convolution (LFM2's), by structure: a depthwise causal convolution between an input
    and an output projection, and no decay of its own (so no recurrent state beyond the kernel's inputs)."""
    import torch

    children = dict(module.named_children())
    convs = [m for m in children.values() if isinstance(m, torch.nn.Conv1d)]
    return (bool(convs) and convs[0].groups == convs[0].in_channels and {"in_proj", "out_proj"} <= set(children)
            and "A_log" not in _tensor_names(module))


def is_rg_lru(module) -> bool:
    """A real-gated linear recurrent unit (RecurrentGemma's RG-LRU), by structure: no children, and its own
    tensors are one vector of the width (the decay's parameter), two block-diagonal weights of heads ×
    block × block (the input and recurrence gates) and their two biases of heads × block."""
    if list(module.children()):
        return False
    shapes = sorted((tuple(p.shape) for _, p in module.named_parameters(recurse=False)), key=len)
    if [len(s) for s in shapes] != [1, 2, 2, 3, 3]:
        return False
    (width,), bias_a, bias_b, weight_a, weight_b = shapes
    heads, block = weight_a[0], weight_a[1]
    return (weight_a == weight_b == (heads, block, block) and bias_a == bias_b == (heads, block)
            and heads * block == width)


def is_recurrent_block(module) -> bool:
    """A recurrent block (Griffin's, RecurrentGemma's), by structure: a depthwise convolution and an
    RG-LRU among its children."""
    import torch

    children = list(module.children())
    return (any(isinstance(c, torch.nn.Conv1d) and c.groups == c.in_channels for c in children)
            and any(is_rg_lru(c) for c in children))


def _is_attention(module) -> bool:
    children = dict(module.named_children())
    return ("q_proj" in children and "k_proj" in children) or "qkv_proj" in children or "Wqkv" in children


def attention_wrapper(block) -> str | None:
    """A child of the block that holds the attention between two norms (DBRX's norm_attn_norm: norm,
    attention, residual add, norm), with no tensors of its own: its name. The block's attention and
    both pre-norms are then read inside it."""
    for name, module in block.named_children():
        if any(True for _ in module.parameters(recurse=False)):
            continue
        children = dict(module.named_children())
        attention = _child(module, ATTENTION_NAMES) or next((n for n, m in children.items() if _is_attention(m)), None)
        norms = [n for n, m in children.items() if _is_norm(m)]
        if attention is not None and len(norms) == 2 and len(children) == 3:
            return name
    return None


def _is_mlp(module) -> bool:
    children = dict(module.named_children())
    return any(n in children for n in DOWN_PROJ_NAMES + EXPERTS_NAMES)


def _mixers(block) -> tuple[str | None, str | None, str | None]:
    """(attention, MLP, state-space mixer) child names: by the names families share, and where a child
    has another name (Nemotron-H's ``mixer``), by what it holds."""
    attention = _child(block, ATTENTION_NAMES) or _child(block, LINEAR_ATTENTION_NAMES)
    mlp = _child(block, MLP_NAMES)
    ssm = next((n for n, m in block.named_children() if is_ssm(m) or is_short_conv(m) or is_recurrent_block(m)), None)
    for name, module in block.named_children():
        if name == ssm or _is_norm(module):
            continue
        if attention is None and _is_attention(module):
            attention = name
        elif mlp is None and name != attention and name not in SHARED_EXPERT_NAMES and _is_mlp(module):
            mlp = name
    return attention, mlp, ssm


def _first_of_list(block, name: str | None) -> str | None:
    """A role's child that is a list of modules (LongCat-Flash's two attentions, two norms of each kind):
    the role is its first entry, ``name.0``; the list is named in ``BlockRoles.sublayer_lists``."""
    import torch

    if name is not None and isinstance(getattr(block, name), torch.nn.ModuleList) and len(getattr(block, name)):
        return f"{name}.0"
    return name


def sublayer_lists(block) -> tuple[str, ...]:
    """The block's children that are lists of sublayers (attentions, MLPs, norms), each entry run in turn
    by the block itself: LongCat-Flash's self_attn, mlps, input_layernorm, post_attention_layernorm."""
    import torch

    return tuple(n for n, m in block.named_children() if isinstance(m, torch.nn.ModuleList) and len(m) > 1)


def block_roles(block) -> BlockRoles:
    """What each child of a block does (its attention, MLP, norms, ...), read from its structure. Read
    once per block: a block's structure is fixed once built, and the kinds, proofs and costs all ask."""
    roles = _ROLES_OF.get(block)
    if roles is None:
        roles = _ROLES_OF[block] = _read_block_roles(block)
    return roles


_ROLES_OF: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # gone with the model


def _read_block_roles(block) -> BlockRoles:
    wrapper = attention_wrapper(block)
    if wrapper is not None:
        return _wrapped_roles(block, wrapper)
    attention, mlp, ssm = _mixers(block)
    lists = sublayer_lists(block)
    if lists:
        return _block_roles_of_lists(block, attention, mlp, lists)
    mlp_post_norm = _child(block, MLP_POST_NORM_NAMES)
    # post_attention_layernorm is Llama's pre-MLP norm, unless the block also post-norms its MLP:
    # then it is the attention's post-norm (Gemma 2/3, OLMo 2).
    attention_post_norm = "post_attention_layernorm" if mlp_post_norm and _child(block, ("post_attention_layernorm",)) else None
    post_norms = {attention_post_norm, mlp_post_norm}
    norms = [n for n, m in block.named_children() if _is_norm(m) and n not in post_norms]
    attention_norm = _child(block, ATTENTION_NORM_NAMES) or (norms[0] if norms else None)
    mlp_norm = next((n for n in MLP_NORM_NAMES if n in dict(block.named_children()) and n not in post_norms), None)
    mlp_norm = mlp_norm or (norms[1] if len(norms) > 1 else None)
    ssm_norm = None
    if ssm and attention is None:  # the state-space mixer takes the attention's place: its norm too
        ssm_norm, attention_norm = attention_norm, None
    elif attention is None and mlp is not None and mlp_norm is None:  # a block that is one MLP
        mlp_norm, attention_norm = attention_norm, None
    attn_module = getattr(block, attention) if attention else None
    mlp_module = getattr(block, mlp) if mlp else None
    ssm_module = getattr(block, ssm) if ssm else None
    experts = _child(mlp_module, EXPERTS_NAMES) if mlp_module is not None else None
    router = _child(mlp_module, ROUTER_NAMES) if experts else None
    # the norm over the heads' outputs, as wide as what the output projection reads (Jamba's time-step, B and C
    # norms are narrower, and its mixer gates without a norm)
    out_proj = getattr(ssm_module, _child(ssm_module, OUTPUT_PROJ_NAMES) or "", None) if ssm_module is not None else None
    gated_norm = next((n for n, m in ssm_module.named_children() if _is_norm(m) and out_proj is not None
                       and getattr(m, "weight", None) is not None and m.weight.shape[0] == out_proj.weight.shape[1]), None) if ssm_module is not None else None
    return BlockRoles(
        attention=attention,
        mlp=mlp,
        attention_norm=attention_norm,
        mlp_norm=mlp_norm,
        attention_post_norm=attention_post_norm,
        mlp_post_norm=mlp_post_norm,
        mlp_class=type(mlp_module).__name__ if mlp_module is not None else None,
        output_proj=_child(attn_module, OUTPUT_PROJ_NAMES) if attn_module is not None else None,
        # A mixture's own activation and down projection live inside each expert, not on the block's MLP.
        activation=None if experts else (_child(mlp_module, ACTIVATION_NAMES) if mlp_module is not None else None),
        down_proj=None if experts else (_child(mlp_module, DOWN_PROJ_NAMES) if mlp_module is not None else None),
        router=router,
        experts=experts,
        shared_expert=_child(mlp_module, SHARED_EXPERT_NAMES) if experts else None,
        linear_attention=is_linear_attention(attn_module),
        channel_decay=is_linear_attention(attn_module) and has_channel_decay(attn_module),
        ssm=ssm,
        ssm_norm=ssm_norm,
        ssm_in_proj=_child(ssm_module, ("in_proj",)) if ssm_module is not None else None,
        ssm_gated_norm=gated_norm,
        ssm_out_proj=_child(ssm_module, OUTPUT_PROJ_NAMES + ("linear_out",)) if ssm_module is not None else None,
        ssm_rg_lru=next((n for n, m in ssm_module.named_children() if is_rg_lru(m)), None) if ssm_module is not None else None,
        ssm_branch_activation=(_child(ssm_module, ACTIVATION_NAMES) if ssm_module is not None and is_recurrent_block(ssm_module)
                               else None),
        block_shared=_child(block, SHARED_EXPERT_NAMES) if experts and not _child(mlp_module, SHARED_EXPERT_NAMES) else None,
        attention_inline=attn_module is not None and attention_is_inline(attn_module),
        mlp_inline=_inline_mlp(block) if mlp_module is None else None,
        dense_dispatch=bool(experts) and is_dense_dispatch(getattr(mlp_module, experts)),
        attention_adds_residual=adds_residual(attn_module),
        mlp_adds_residual=adds_residual(mlp_module),
        indexer=_indexer_child(attn_module),
        pooled_indexer=_pooled_indexer(attn_module),
        grouped_output=attn_module is not None and _grouped_output(attn_module),
        experts_own_loop=_own_loop(mlp_module, experts),
    )


def is_dense_dispatch(experts) -> bool:
    """Experts held as fused 3-D weights whose forward takes the tokens alone, no chosen experts nor
    weights: every expert runs on every token's row, the mixture having scaled each expert's rows by
    the token's score for it beforehand (Llama 4)."""
    import inspect

    own = dict(experts.named_parameters(recurse=False))
    if "gate_up_proj" not in own or own["gate_up_proj"].dim() != 3:
        return False
    params = [p for p in inspect.signature(experts.forward).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return len(params) == 1


def _wrapped_roles(block, wrapper: str) -> BlockRoles:
    """The roles of a block whose attention and pre-norms sit inside one child (see attention_wrapper):
    the mixture or MLP is the block's own other child; the first norm is the attention's, the second the
    MLP's. Paths are relative to the block, through the wrapper."""
    inner = getattr(block, wrapper)
    children = dict(inner.named_children())
    attention = _child(inner, ATTENTION_NAMES) or next(n for n, m in children.items() if _is_attention(m))
    first, second = [n for n, m in children.items() if _is_norm(m)]
    attn_module = children[attention]
    return dataclasses.replace(
        block_roles_of_children(block, exclude=wrapper),
        attention=f"{wrapper}.{attention}",
        attention_norm=f"{wrapper}.{first}",
        mlp_norm=f"{wrapper}.{second}",
        output_proj=_child(attn_module, OUTPUT_PROJ_NAMES),
        attention_inline=attention_is_inline(attn_module),
        wrapper=wrapper,
    )


def block_roles_of_children(block, exclude: str) -> BlockRoles:
    """The generic roles of a block with one child left out (the wrapper, whose roles are read apart)."""
    import torch

    view = torch.nn.Module()
    for name, module in block.named_children():
        if name != exclude:
            view.add_module(name, module)
    return block_roles(view)


def _block_roles_of_lists(block, attention: str | None, mlp: str | None, lists: tuple[str, ...]) -> BlockRoles:
    """The roles of a block that runs its sublayers from lists (LongCat-Flash): the first attention and
    its norm, the first post-attention norm, and the block's mixture of experts as its MLP; the later
    entries of each list are the block's own, shown by its proof (``sublayer_lists``)."""
    attention = _first_of_list(block, attention)
    attention_norm = _first_of_list(block, _child(block, ATTENTION_NORM_NAMES))
    mlp_norm = _first_of_list(block, next((n for n in MLP_NORM_NAMES if n in dict(block.named_children())), None))
    attn_module = block.get_submodule(attention) if attention else None
    mlp_module = block.get_submodule(mlp) if mlp else None
    experts = _child(mlp_module, EXPERTS_NAMES) if mlp_module is not None else None
    return BlockRoles(
        attention=attention, mlp=mlp, attention_norm=attention_norm, mlp_norm=mlp_norm,
        attention_post_norm=None, mlp_post_norm=None,
        mlp_class=type(mlp_module).__name__ if mlp_module is not None else None,
        output_proj=_child(attn_module, OUTPUT_PROJ_NAMES) if attn_module is not None else None,
        activation=None if experts else (_child(mlp_module, ACTIVATION_NAMES) if mlp_module is not None else None),
        down_proj=None if experts else (_child(mlp_module, DOWN_PROJ_NAMES) if mlp_module is not None else None),
        router=_child(mlp_module, ROUTER_NAMES) if experts else None,
        experts=experts,
        shared_expert=_child(mlp_module, SHARED_EXPERT_NAMES) if experts else None,
        linear_attention=is_linear_attention(attn_module),
        channel_decay=is_linear_attention(attn_module) and has_channel_decay(attn_module),
        attention_inline=attn_module is not None and attention_is_inline(attn_module),
        sublayer_lists=lists,
        experts_own_loop=_own_loop(mlp_module, experts),
    )


def _own_loop(mlp_module, experts: str | None) -> bool:
    """An experts class whose forward transformers' use_experts_implementation never wrapped: it runs its
    own loop over the experts, and no experts function is called."""
    if mlp_module is None or experts is None:
        return False
    return not hasattr(type(getattr(mlp_module, experts)).forward, "__wrapped__")


def _inline_mlp(block) -> tuple[str, str, str | None] | None:
    up, down = _child(block, UP_PROJ_NAMES), _child(block, DOWN_PROJ_NAMES)
    return (up, down, _child(block, ACTIVATION_NAMES)) if up and down else None


def find_roles(model, num_layers: int) -> Roles:
    """The roles of a causal language model's modules, by the generic rules."""
    from atlas.model.introspect import find_block_list

    block_path, blocks = find_block_list(model, num_layers)
    embedding = _path_of(model, model.get_input_embeddings())
    head_module = model.get_output_embeddings()
    head = _path_of(model, head_module) if head_module is not None else None
    parent_path = block_path.rpartition(".")[0]
    parent = model.get_submodule(parent_path) if parent_path else model
    final = _child(parent, FINAL_NORM_NAMES) or next((n for n, m in parent.named_children() if _is_norm(m)), None)
    positions = _child(parent, POSITION_EMBEDDING_NAMES)
    embedding_norm = _child(parent, EMBEDDING_NORM_NAMES)
    embedding_norm = embedding_norm if embedding_norm != final else None
    return Roles(
        embedding=embedding,
        position_embedding=_join(parent_path, positions) if positions else None,
        block_list=block_path,
        final_norm=f"{parent_path}.{final}" if (final and parent_path) else final,
        head=head,
        blocks=[block_roles(b) for b in blocks],
        modules=frozenset(path for path, _ in model.named_modules()),
        embedding_norm=_join(parent_path, embedding_norm) if embedding_norm else None,
    )


# --- the generic rule: value -> Read at one block --------------------------------------------------


@dataclass(frozen=True)
class Placement:
    """One value resolved at one block (or on the model): how it is read and the module it is read at.

    ``read`` is None where the value is missing; ``missing`` then says why.
    """

    value: StandardValue
    read: Read | None
    module: str | None  # path from the model's root of the module whose hook captures it
    missing: str | None = None
    # "attention" | "experts": the implementation knob the value's capture depends on, if any
    needs_eager: str | None = None


def _join(*parts: str | None) -> str:
    return ".".join(p for p in parts if p)


MODEL_MISSING = {
    "position_embeddings": "no learned position table: positions enter inside attention (rotary embeddings)",
    "embedding_norm_output": "no norm between the token embeddings and block 0",
}


def model_placements(roles: Roles, overrides: Mapping[str, str] | None = None) -> list[Placement]:
    rules: dict[str, tuple[Read, str | None]] = {
        "logits": (Read("output", "", element=0), ""),
        "token_embeddings": (Read("output", roles.embedding), roles.embedding),
        "position_embeddings": (Read("output", roles.position_embedding), roles.position_embedding),
        "embedding_norm_output": (Read("output", roles.embedding_norm), roles.embedding_norm),
        "final_norm_output": (Read("output", roles.final_norm), roles.final_norm),
        "lm_head_output": (Read("output", roles.head), roles.head),
        "next_token_probs": (Read("derived", "softmax of logits at the last position"), ""),
        "input_ids": (Read("call_argument", "input_ids"), ""),
        "attention_mask": (Read("call_argument", "attention_mask"), ""),
        "input_size": (Read("derived", "the shape of input_ids"), ""),
    }
    placements = []
    for value in VOCABULARY:
        if value.host != "model":
            continue
        read, module = rules[value.name]
        if overrides and value.name in overrides:
            read = parse_override(overrides[value.name])
            module = read.module
        missing = None
        if roles.head is None and value.name in ("logits", "lm_head_output", "next_token_probs"):
            read, module = Read("output", None), None  # a base model returns hidden states, not logits
        if read.kind in ("output", "input") and read.module is None:
            read, module, missing = None, None, MODEL_MISSING.get(value.name, f"the model has no module in the role of {value.name}")
        placements.append(Placement(value, read, module, missing))
    return placements


def block_placements(roles: Roles, index: int, overrides: Mapping[str, str] | None = None) -> list[Placement]:
    """Every layers[i] / self_attn / mlp value at block ``index``: its Read, or why it is missing there."""
    b = roles.blocks[index]
    block = f"{roles.block_list}.{index}"
    attn = _join(block, b.attention) if b.attention else None
    mlp = _join(block, b.mlp) if b.mlp else (block if b.mlp_inline else None)  # an inline MLP: the block hosts it
    ssm = _join(block, b.ssm) if b.ssm else None
    host_paths = {"layers[i]": block, "layers[i].self_attn": attn, "layers[i].mlp": mlp, "layers[i].ssm": ssm}

    mixture_words = (f"block {index}'s MLP ({b.mlp_class}) is not a mixture of experts" if b.mlp_class or not b.mlp_inline
                     else f"block {index}'s MLP (layers of the block itself) is not a mixture of experts")
    dense_words = f"block {index}'s MLP ({b.mlp_class}) is a mixture: each expert has its own neurons"
    rules: dict[str, tuple[Read | None, str | None, str | None]] = {}

    def rule(name, read, missing=None, needs_eager=None):
        rules[name] = (read, missing, needs_eager)

    rule("layer_input", Read("input", "", element=0))
    rule("layer_output", Read("output", "", element=0))
    rule("attention_norm_output", Read("output", b.attention_norm) if b.attention_norm else None,
         f"block {index} has no norm before its attention")
    # The stream after the attention add enters the MLP's norm, or the MLP itself where there is none.
    if b.sublayers == 1:
        rule("layer_mid", None, f"block {index} runs one sublayer: the stream has no midpoint")
    else:
        rule("layer_mid", Read("input", b.mlp_norm or b.mlp, element=0) if (b.mlp_norm or b.mlp) else None,
             f"block {index} has neither a norm before its MLP nor an MLP to read the stream at")
    rule("mlp_norm_output", Read("output", b.mlp_norm) if b.mlp_norm else None, f"block {index} has no norm before its MLP")
    rule("mlp_input", Read("input", b.mlp, element=0) if b.mlp else None, f"block {index} has no MLP")
    for name, element in (("attention_queries", 1), ("attention_keys", 2), ("attention_values", 3)):
        rule(name, Read("attention_args", element=element))
    rule("attention_scores", Read("attention_softmax_input"), needs_eager="attention")
    rule("attention_probabilities", Read("attention_result", element=1), needs_eager="attention")
    rule("attention_head_outputs", Read("attention_result", element=0))
    if b.attention_inline:
        inside = (f"block {index}'s attention computes it inside its own forward, not through transformers' attention "
                  "functions, so no hook reaches it")
        for name in ("attention_queries", "attention_keys", "attention_values", "attention_head_outputs"):
            rule(name, None, inside)
        # the eager path's softmax input, and the probabilities the module returns beside its output
        rule("attention_probabilities", Read("output", "", element=1), needs_eager="attention")
    rule("attention_premix", Read("input", b.output_proj, element=0, split_heads=True) if b.output_proj else None,
         f"block {index}'s attention projects its heads by groups, then mixes the groups to the width: no one output projection "
         "receives every head" if b.grouped_output else f"block {index}'s attention has no output projection")
    if b.linear_attention:
        # no attention function: the values of softmax attention are missing, the delta rule's are read
        words = f"block {index}'s token mixer is linear attention with a recurrent state: it computes no attention scores"
        for name in ("attention_queries", "attention_keys", "attention_values", "attention_scores",
                     "attention_probabilities", "attention_head_outputs"):
            rule(name, None, words)
        rule("attention_premix", None, f"block {index}'s token mixer is linear attention: its output projection receives "
             "the gated, normalized read-out of its value heads, not softmax heads")
    linear_words = f"block {index}'s token mixer is softmax attention: it keeps no recurrent state"
    for element, name in enumerate(("linear_attention_queries", "linear_attention_keys", "linear_attention_values",
                                    "linear_attention_decay", "linear_attention_beta")):
        rule(name, Read("delta_rule_args", element=element) if b.linear_attention else None, linear_words)
    rule("linear_attention_channel_decay", Read("delta_rule_args", element=3) if b.channel_decay else None,
         linear_words if not b.linear_attention else f"block {index}'s linear attention decays its state by one factor a head")
    if b.channel_decay:
        rule("linear_attention_decay", None, f"block {index}'s linear attention decays its state by one factor a key channel "
             "(linear_attention_channel_decay)")
    rule("linear_attention_head_outputs", Read("delta_rule_result", element=0) if b.linear_attention else None, linear_words)
    rule("linear_attention_state", Read("delta_rule_result", element=1) if b.linear_attention else None, linear_words)
    no_indexer = f"block {index}'s attention has no lightning indexer: every earlier position is attended"
    if b.pooled_indexer:  # DeepSeek-V4: its indexer ranks the keys its compressor pools, not key positions
        no_indexer = (f"block {index}'s indexer ({b.pooled_indexer}) ranks the keys its compressor pools, one per window of "
                      "positions, not the key positions these values index")
    rule("indexer_scores", Read("indexer_scores", b.indexer) if b.indexer else None, no_indexer)
    rule("indexer_positions", Read("output", b.indexer) if b.indexer else None, no_indexer)
    rule("attention_output", Read("output", b.attention_post_norm, from_block=True) if b.attention_post_norm else Read("output", "", element=0))
    rule("mlp_activation", Read("output", b.activation) if b.activation else None,
         dense_words if b.experts else f"block {index}'s MLP has no activation module")
    rule("mlp_neurons", Read("input", b.down_proj, element=0) if b.down_proj else None,
         dense_words if b.experts else f"block {index}'s MLP has no down projection")
    rule("mlp_output", Read("output", b.mlp_post_norm, from_block=True) if b.mlp_post_norm else Read("output", "", element=0))
    # a sublayer that adds the stream itself returns the stream: its contribution is its last projection's output
    if b.attention_adds_residual and b.output_proj and not b.attention_post_norm:
        rule("attention_output", Read("output", b.output_proj))
    if b.mlp_adds_residual and b.down_proj and not b.mlp_post_norm:
        rule("mlp_output", Read("output", b.down_proj))
    if b.mlp_inline:  # the block calls its MLP's layers itself, on the tokens flattened to one axis
        up, down, act = b.mlp_inline
        rule("layer_mid", Read("input", b.mlp_norm or up, element=0, flatten_tokens=True))
        if b.mlp_norm:
            rule("mlp_norm_output", Read("output", b.mlp_norm, flatten_tokens=True))
        rule("mlp_input", Read("input", up, element=0, flatten_tokens=True))
        rule("mlp_activation", Read("output", act, flatten_tokens=True) if act else None, f"block {index}'s MLP has no activation module")
        rule("mlp_neurons", Read("input", down, element=0, flatten_tokens=True))
        rule("mlp_output", Read("output", down, flatten_tokens=True))
    rule("router_logits", Read("output", b.router, element=0, flatten_tokens=True) if b.router else None, mixture_words)
    rule("expert_indices", Read("input", b.experts, element=1, flatten_tokens=True) if b.experts else None, mixture_words)
    rule("expert_weights", Read("input", b.experts, element=2, flatten_tokens=True) if b.experts else None, mixture_words)
    rule("expert_outputs", Read("expert_slots", b.experts, own_loop=b.experts_own_loop) if b.experts else None, mixture_words, needs_eager="experts")
    rule("routed_output", Read("output", b.experts, flatten_tokens=True) if b.experts else None, mixture_words)
    rule("router_scores", None, mixture_words if not b.experts else
         f"block {index}'s router hands the chosen experts' weights, not a score for every expert")
    if b.dense_dispatch:
        # the router returns (scores, logits); every expert runs on every token, its input scaled by the score
        words = (f"block {index}'s mixture sends every token to every expert, its input scaled by the token's score "
                 "for that expert (zero where not chosen): there are no routing slots")
        rule("router_logits", Read("output", b.router, element=1, flatten_tokens=True))
        rule("router_scores", Read("output", b.router, element=0, flatten_tokens=True))
        for name in ("expert_indices", "expert_weights", "expert_outputs"):
            rule(name, None, words)
        rule("routed_output", Read("output", b.experts, flatten_tokens=True, sum_experts=True))
        if not b.mlp_post_norm:  # the mixture returns its tokens as rows; the block reshapes them
            rule("mlp_output", Read("output", "", element=0, flatten_tokens=True))
    rule("shared_expert_output", Read("output", b.block_shared, from_block=True) if b.block_shared else
         Read("output", b.shared_expert, flatten_tokens=True) if b.shared_expert else None,
         mixture_words if not b.experts else f"block {index}'s mixture has no shared expert")
    rule("ssm_norm_output", Read("output", b.ssm_norm) if b.ssm_norm else None, f"block {index} has no norm before a state-space mixer")
    rule("ssm_input", Read("input", "", element=0))
    rule("ssm_projections", Read("output", b.ssm_in_proj) if b.ssm_in_proj else None, f"block {index}'s state-space mixer has no input projection")
    rule("ssm_scan_output", Read("input", b.ssm_gated_norm, element=0) if b.ssm_gated_norm else None, f"block {index}'s state-space mixer has no gated norm")
    rule("ssm_gate", Read("input", b.ssm_gated_norm, element=1) if b.ssm_gated_norm else None, f"block {index}'s state-space mixer has no gated norm")
    rule("ssm_premix", Read("input", b.ssm_out_proj, element=0) if b.ssm_out_proj else None, f"block {index}'s state-space mixer has no output projection")
    rule("ssm_output", Read("output", "", element=0))
    recurrent_words = f"block {index}'s mixer has no RG-LRU"
    rule("rglru_input", Read("input", b.ssm_rg_lru, element=0) if b.ssm_rg_lru else None, recurrent_words)
    for element, name in enumerate(RGLRU_GATES):
        rule(name, Read("gate_sigmoids", b.ssm_rg_lru, element=element) if b.ssm_rg_lru else None, recurrent_words)
    rule("rglru_state", Read("output", b.ssm_rg_lru) if b.ssm_rg_lru else None, recurrent_words)
    rule("rglru_gate_branch", Read("output", b.ssm_branch_activation) if b.ssm_branch_activation else None,
         f"block {index}'s mixer has no activation branch beside an RG-LRU")

    placements = []
    for value in VOCABULARY:
        if value.host == "model":
            continue
        host = host_paths[value.host]
        read, missing, needs_eager = rules[value.name]
        if overrides and value.name in overrides and host is not None:
            override = parse_override(overrides[value.name])
            if LAYOUTS[value.layout][:2] == ("batch", "seq"):  # rows of batch × seq tokens (a router's) are unflattened
                import dataclasses

                override = dataclasses.replace(override, flatten_tokens=True)
            # An override names a module that must exist at this block; where it does not, the value
            # is missing there (a mixture's module on a dense block, say).
            base = block if override.from_block else host
            read = override if _join(base, override.module) in roles.modules else None
            missing = (missing or f"block {index} has no module {override.module}") if read is None else None
        if host is None:
            words = {"ssm": "state-space mixer"}.get(value.host.rpartition('.')[2], value.host.rpartition('.')[2])
            read, missing = None, f"block {index} has no {words}"
        if read is None:
            placements.append(Placement(value, None, None, missing))
            continue
        base = block if read.from_block else host
        module = _join(base, read.module) if read.kind in ("output", "input", "expert_slots", "gate_sigmoids", "indexer_scores") else host
        placements.append(Placement(value, read, module, None, needs_eager))
    return placements


@dataclass
class Resolution:
    """A model's standard values: the model-level placements and, per block, the block-level ones."""

    roles: Roles
    model: list[Placement]
    blocks: list[list[Placement]]

    def at(self, name: str, index: int | None = None) -> Placement:
        name = ALIASES.get(name, name)
        placements = self.model if index is None else self.blocks[index]
        return next(p for p in placements if p.value.name == name)


def parallel_words(index: int) -> str:
    return (f"block {index} is parallel: its attention and its MLP both read the block's input and are added "
            "to the stream together, so no stream exists between them")


def mark_parallel(resolution: Resolution, indices) -> None:
    """Blocks measured parallel on a run (``atlas.model.trace``): layer_mid, the stream between the
    sublayers, does not exist there, so it is missing with the reason instead of read at the MLP side."""
    for i in indices:
        resolution.blocks[i] = [Placement(p.value, None, None, parallel_words(i)) if p.value.name == "layer_mid" else p
                                for p in resolution.blocks[i]]


def resolve(model, num_layers: int, overrides: Mapping[str, str] | None = None) -> Resolution:
    """Every standard value placed on ``model``'s modules: generic roles, then the family's overrides."""
    roles = find_roles(model, num_layers)
    return Resolution(
        roles,
        model_placements(roles, overrides),
        [block_placements(roles, i, overrides) for i in range(len(roles.blocks))],
    )


# --- the support table -----------------------------------------------------------------------------


def _generic_path(path: str | None, block_list: str, index: int) -> str | None:
    """model.layers.3.mlp -> model.layers.{i}.mlp (the block's own number made symbolic)."""
    prefix = f"{block_list}.{index}"
    if path is None or not (path == prefix or path.startswith(prefix + ".")):
        return path
    return f"{block_list}.{{i}}" + path[len(prefix):]


def _block_words(indices: list[int], kinds: list[dict[str, Any]]) -> str | None:
    """'MoE blocks only' where the blocks present are exactly some kinds (None where all blocks)."""
    every = sorted(i for k in kinds for i in k["indices"])
    if indices == every:
        return None
    labels = [k["label"] for k in kinds if set(k["indices"]) <= set(indices)]
    covered = sorted(i for k in kinds if k["label"] in labels for i in k["indices"])
    if labels and covered == indices:
        return " and ".join(f"{label}s" for label in labels) + " only"
    return "some blocks only"


def _present_anywhere(resolution: Resolution, value: StandardValue) -> bool:
    if value.host == "model":
        return resolution.at(value.name).read is not None
    return any(resolution.at(value.name, i).read is not None for i in range(len(resolution.roles.blocks)))


def _nowhere(first: Placement, present: list[int] | None) -> str:
    """Where a value is read on a checkpoint that has it nowhere: the words say so and why."""
    where = "the model has no place for it" if present is None else "no block has it"
    return f"not read on this checkpoint: {where} ({first.missing})"


def support_facts(
    resolution: Resolution,
    sizes: Mapping[str, Any],
    kinds: list[dict[str, Any]],
    conditions: Mapping[str, str],
    classes: Mapping[str, str],
) -> dict[str, Any]:
    """facts["support"]: the standard values by host, at the checkpoint's sizes, with where each is read,
    its condition, and the blocks that have it (the others say why not)."""
    roles = resolution.roles
    hosts = []
    for host in HOSTS:
        values = []
        path = ""
        if host == "layers[i]":
            path = f"{roles.block_list}.{{i}}"
        elif host != "model":
            role = {"layers[i].self_attn": "attention", "layers[i].ssm": "ssm"}.get(host, "mlp")
            child = next((getattr(b, role) for b in roles.blocks if getattr(b, role)), None)
            path = f"{roles.block_list}.{{i}}" + (f".{child}" if child else "")  # an inline MLP: the block
        for value in VOCABULARY:
            if value.host != host:
                continue
            if value.extension and not _present_anywhere(resolution, value):
                continue
            if host == "model":
                p = resolution.at(value.name)
                present, missing, first = None, ({"model": p.missing} if p.read is None else {}), p
            else:
                placed = [resolution.at(value.name, i) for i in range(len(roles.blocks))]
                present = [i for i, p in enumerate(placed) if p.read is not None]
                missing = {str(i): p.missing for i, p in enumerate(placed) if p.read is None}
                first = placed[present[0]] if present else placed[0]
            words = [conditions[value.name]] if value.name in conditions else []
            if host == "model" and first.read is None:
                words.append(first.missing)
            if present is not None:
                scope = _block_words(present, kinds) if present else "no block"
                if scope:
                    words.append(scope)
            layout = layout_of(value.name, sizes)
            values.append({
                "name": value.name,
                "layout": layout,
                "dims": list(LAYOUTS[layout]),
                "shape": resolve_dims(layout, sizes),
                "description": value.description,
                "read_at": first.read.words() if first.read else _nowhere(first, present),
                # how it is read, as data: "input" or "output" (of ``module``), element; "inside", ...
                "read": {"kind": first.read.kind, "element": first.read.element} if first.read else None,
                "module": _generic_path(first.module, roles.block_list, present[0]) if (first.read and present) else first.module,
                "condition": "; ".join(words) or None,
                "blocks": present,
                "missing": missing,
            })
        if host in EXTENSION_HOSTS and not values:
            continue
        hosts.append({"host": host, "path": path, "class": classes.get(host, ""), "values": values})
    return {"hosts": hosts, "layouts": {name: list(dims) for name, dims in LAYOUTS.items()}, "sizes": dict(sizes)}


def host_classes(model, resolution: Resolution) -> dict[str, str]:
    """Each host's class, e.g. "DeepseekV3MLP / DeepseekV3MoE" where block kinds differ."""
    roles = resolution.roles
    found: dict[str, list[str]] = {"model": [type(model).__name__]}
    for i, b in enumerate(roles.blocks):
        block = model.get_submodule(f"{roles.block_list}.{i}")
        for host, child in (("layers[i]", ""), ("layers[i].self_attn", b.attention), ("layers[i].mlp", b.mlp), ("layers[i].ssm", b.ssm)):
            if child is None:
                continue
            name = type(block.get_submodule(child) if child else block).__name__
            if name not in found.setdefault(host, []):
                found[host].append(name)
    return {host: " / ".join(names) for host, names in found.items()}


def hosted_values(resolution: Resolution) -> dict[str, list[str]]:
    """Module path -> the standard values it hosts (the model, each block, its attention and its MLP)."""
    roles = resolution.roles
    hosted: dict[str, list[str]] = {"": [p.value.name for p in resolution.model if p.read is not None]}
    for i, placements in enumerate(resolution.blocks):
        block = f"{roles.block_list}.{i}"
        b = roles.blocks[i]
        paths = {"layers[i]": block, "layers[i].self_attn": _join(block, b.attention), "layers[i].mlp": _join(block, b.mlp),
                 "layers[i].ssm": _join(block, b.ssm)}
        for p in placements:
            if p.read is not None:
                hosted.setdefault(paths[p.value.host], []).append(p.value.name)
    return hosted
