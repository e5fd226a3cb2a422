"""The resolver: where a given model holds each standard value, and how it is read there.

It finds modules by their role (``atlas.model.roles``: embedding, block list, final norm, head,
attention, MLP, router, experts, shared expert, the two norms) from names and classes every
transformers family shares, and a family module declares overrides only where that generic rule
cannot tell (``Family.standard_overrides``). Each resolved value carries a ``Read``
(``atlas.model.reads``): the mechanism that captures it, whose words the page shows, or the reason it
is missing at that block. The values themselves are the vocabulary's (``atlas.model.vocabulary``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from atlas.model.reads import RGLRU_GATES, Read, parse_override
from atlas.model.roles import Roles, find_roles, join_path
from atlas.model.vocabulary import ALIASES, LAYOUTS, VOCABULARY, StandardValue


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


MODEL_MISSING = {
    "position_embeddings": "no learned position table: positions enter inside attention (rotary embeddings)",
    "embedding_norm_output": "no norm between the token embeddings and block 0",
}


def model_placements(roles: Roles, overrides: Mapping[str, str] | None = None) -> list[Placement]:
    rules: dict[str, tuple[Read, str | None]] = {
        "logits": (Read("output", "", element=0), ""),
        "token_embeddings": (Read("output", roles.embedding), roles.embedding),
        "position_embeddings": (Read("output", roles.position_embedding), roles.position_embedding),
        "embedding_norm_output": (Read("output", roles.embedding_norm, first_call=roles.embedding_norm == roles.final_norm is not None), roles.embedding_norm),
        "final_norm_output": (Read("output", roles.final_norm, last_call=roles.embedding_norm == roles.final_norm is not None), roles.final_norm),
        "lm_head_output": (Read("output", roles.head), roles.head),
        "next_token_probs": (Read("derived", "softmax of logits at the last position"), ""),
        "input_ids": (Read("call_argument", "input_ids"), ""),
        "attention_mask": (Read("call_argument", "attention_mask"), ""),
        "input_size": (Read("derived", "the shape of input_ids"), ""),
    }
    if roles.final_norm is None and roles.head is not None:
        # no norm after the last block (GPT-1, whose blocks end on one): the stream after the last norm is what
        # the head reads
        rules["final_norm_output"] = (Read("input", roles.head, element=0), roles.head)
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
    attn = join_path(block, b.attention) if b.attention else None
    mlp = join_path(block, b.mlp) if b.mlp else (block if b.mlp_inline else None)  # an inline MLP: the block hosts it
    ssm = join_path(block, b.ssm) if b.ssm else None
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
    elif b.shared_block:  # the shared block's attention and MLP work beside the stream (Zamba2): it has one add
        rule("layer_mid", None, f"block {index} adds to the stream once, after its mixer: the shared block's attention and MLP "
                                "work on the stream beside the embeddings, not on the stream")
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
    if b.lightning_attention:
        words = (f"block {index}'s token mixer is lightning attention: linear attention computed inside its own forward, "
                 "with no attention scores or probabilities")
        for name in ("attention_queries", "attention_keys", "attention_values", "attention_scores",
                     "attention_probabilities", "attention_head_outputs", "attention_premix"):
            rule(name, None, words)
    linear_words = (f"block {index}'s token mixer is lightning attention: its decay is fixed a head and no delta rule runs"
                    if b.lightning_attention else f"block {index}'s token mixer is softmax attention: it keeps no recurrent state")
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
            read = override if join_path(base, override.module) in roles.modules else None
            missing = (missing or f"block {index} has no module {override.module}") if read is None else None
        if host is None:
            words = {"ssm": "state-space mixer"}.get(value.host.rpartition('.')[2], value.host.rpartition('.')[2])
            read, missing = None, f"block {index} has no {words}"
        if read is None:
            placements.append(Placement(value, None, None, missing))
            continue
        base = block if read.from_block else host
        module = join_path(base, read.module) if read.kind in ("output", "input", "expert_slots", "gate_sigmoids", "indexer_scores") else host
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
