"""The standard values: one vocabulary of activations across families, and their layouts.

The vocabulary says what a value is (its name, its host, its layout type with symbolic dims, one line
of description); a layout names its dims, which resolve per checkpoint from the standardized sizes
(``atlas.model.sizes``). Where each family hosts a value is the resolver's (``atlas.model.resolver``).
Plain data: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
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


def resolve_dims(layout: str, sizes: Mapping[str, Any]) -> list[Any]:
    """A layout's dims at given sizes: symbolic call dims stay names, the others become numbers.

    ``sizes`` maps dim names to numbers (the standardized sizes plus num_experts and top_k, or the
    tiny run's sizes including batch and seq). A dim the sizes lack, or hold no number for (a dense
    model's num_experts), stays symbolic: a shape never shows a missing size as a value.
    """
    return [d if sizes.get(d) is None else sizes[d] for d in LAYOUTS[layout]]


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
    StandardValue("token_embeddings", "model", "Residual", "The embedding table's rows for the input tokens"),
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
    StandardValue("attention_queries", "layers[i].self_attn", "Queries", "Queries per head as the attention function receives them"),
    StandardValue("attention_keys", "layers[i].self_attn", "Keys", "Keys per key head as the attention function receives them"),
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
    StandardValue("ssm_projections", "layers[i].ssm", "SSMProjections", "The one input projection, its parts side by side (a Mamba-2 mixer: the gate, the convolution's inputs x, B and C, a time step per head; a Mamba mixer: the scan's input and the gate; a short convolution: B, C and x)", extension=True),
    StandardValue("ssm_scan_output", "layers[i].ssm", "SSMInner", "Each head's read-out of its recurrent state plus the skip D·x, before the gate", extension=True),
    StandardValue("ssm_gate", "layers[i].ssm", "SSMInner", "The gate z: what the scan's output is multiplied by after a SiLU", extension=True),
    StandardValue("ssm_premix", "layers[i].ssm", "SSMInner", "What the output projection receives: the gated heads, normalized where the mixer has a gated norm (Mamba-2), the scan's read-out times SiLU of the gate (Mamba), C times the convolved B·x (a short convolution), or an RG-LRU's state times its gate branch", extension=True),
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
