"""What a module is, from its structure: its torch type, its tensors, its children. Never its class name."""

from __future__ import annotations

from atlas.errors import AtlasError
from atlas.proof import attention, compressed, shared, experts, hyper, library, lightning, linear, mixture, positions, rglru, router, rwkv, sparse, ssm, stack
from atlas.proof.core import Part
from atlas.proof.steps import Chain
from atlas.model.sizes import routed_experts
from atlas.model.structure import (is_concatenating_block, is_low_rank_adapter, is_ssm_block, shared_hybrid_roles, is_channel_mixing, is_indexer, is_lightning_attention, is_linear_attention, is_recurrent_block, is_rg_lru,
                                   is_short_conv, is_ssm, is_time_mixing, is_token_shift, separate_qkv, sequential_mlp)


def _own(module) -> dict:
    return dict(module.named_parameters(recurse=False))


def _routes(part: Part) -> bool:
    """A linear map with one output per routed expert of the (tiny) config."""
    cfg = part.ctx.tiny_config
    experts = routed_experts(cfg)
    # zero-computation experts (LongCat-Flash's zero_expert_num) are routed to like the others: one row each
    zero = getattr(cfg, "zero_expert_num", None) or 0
    return experts is not None and part.tiny.out_features in (experts, experts + zero)


def _routes_rows(part: Part, rows: int) -> bool:
    """``rows`` is the (tiny) config's count of routed experts."""
    experts = routed_experts(part.ctx.tiny_config)
    return experts is not None and rows == experts


def is_offset(module) -> bool:
    """A module with no children whose only tensor is one vector (leading axes of 1 allowed), not a weight."""
    own = {**_own(module), **dict(module.named_buffers(recurse=False))}
    if any(True for _ in module.children()) or len(own) != 1 or "weight" in own:
        return False
    return sum(1 for n in next(iter(own.values())).shape if n != 1) == 1


def kind_of(part: Part) -> str:
    import torch

    m = part.tiny
    children = set(dict(m.named_children()))
    own = _own(m)
    if part.ctx.block_ids.get(part.id) is not None:
        return "block"
    if isinstance(m, torch.nn.Embedding):
        return "embedding"
    if isinstance(m, torch.nn.Dropout):
        return "dropout"
    if isinstance(m, torch.nn.ModuleList):
        return "list"  # a list of sublayers the parent runs one by one (never called itself)
    if is_token_shift(m):
        return "token_shift"  # the sequence moved one position later (RWKV's time_shift)
    if is_time_mixing(m):
        return "time_mixing"  # RWKV's token shift, key, value and receptance, and the WKV recurrence
    if is_channel_mixing(m):
        return "channel_mixing"  # RWKV's token shift, squared-ReLU key and receptance gate
    if isinstance(m, torch.nn.Identity):
        return "identity"
    if is_concatenating_block(m):
        return "shared_block"  # the stream beside the embeddings through a norm, an attention, a norm and an MLP (Zamba2)
    if is_ssm_block(m):
        return "carried_block"  # a state-space block inside another, handed a contribution to add before its norm (Zamba2)
    if is_low_rank_adapter(m):
        return "low_rank_adapter"  # down to a rank and back up, no biases (Zamba2's per-use adapters)  # torch's identity map (LongCat-Flash's zero-computation expert)
    if hyper.is_grouped_linear(m):
        return "grouped_linear"  # each group of the input through its own block of rows (DeepSeek-V4's o_a_proj)
    if isinstance(m, torch.nn.Linear) and type(m).forward is not torch.nn.Linear.forward and _routes(part):
        return "router"  # a Linear whose own forward adds a routing rule to its product (one row per expert)
    if isinstance(m, torch.nn.Linear) or (not children and set(own) <= {"weight", "bias"} and "weight" in own and own["weight"].dim() == 2
                                          and hasattr(m, "nf")):
        return "linear"
    if linear.is_depthwise_conv(m):
        return "depthwise_conv"
    if linear.is_gated_norm(m) or (not children and set(own) == {"weight"} and own["weight"].dim() == 1 and part.path in part.ctx.calls
                                   and isinstance(part.argument("gate", 1), torch.Tensor)):
        return "gated_norm"  # a gain vector called with a second tensor, the gate
    if linear.is_decay_gate(m):
        return "decay_gate"
    if isinstance(m, torch.nn.LayerNorm) or (not children and "weight" in own and own["weight"].dim() == 1 and set(own) <= {"weight", "bias"}):
        return "norm"
    if compressed.is_shared_kv_attention(m):
        return "shared_kv_attention"  # one head as key and value, sinks, grouped output (DeepSeek-V4)
    if compressed.is_window_compressor(m):
        return "window_compressor"  # windows of positions pooled into keys (DeepSeek-V4)
    if compressed.is_compressed_indexer(m):
        return "compressed_indexer"  # a lightning indexer over compressed keys (DeepSeek-V4)
    if compressed.is_index_scorer(m):
        return "index_scorer"
    if compressed.is_rotary_table(m):
        return "rotary_table"  # angles from positions, one frequency table per kind of block (DeepSeek-V4)
    if is_rg_lru(m):
        return "rg_lru"  # one vector, two block-diagonal gate weights and their biases (RecurrentGemma)
    if is_recurrent_block(m):
        return "recurrent_block"  # a depthwise convolution beside an RG-LRU: before linear attention, which also holds a convolution
    if is_ssm(m):
        return "mamba1" if m.A_log.dim() == 2 else "mamba2"  # a decay per channel and state entry: the first Mamba
    if is_short_conv(m):
        return "short_conv"
    if is_linear_attention(m):
        return "linear_attention"
    if is_lightning_attention(m):
        return "lightning_attention"  # linear attention with a fixed decay a head, computed inside its forward (MiniMax-Text-01)
    if is_indexer(m):
        return "indexer"  # a sparse attention's lightning indexer: its own heads score past positions, the best are kept
    if "kv_a_proj_with_mqa" in children:
        return "latent_attention"
    separate = separate_qkv(m)
    if (separate and separate[2]) or children & {"qkv_proj", "c_attn", "query_key_value", "Wqkv"}:
        return "attention"
    if separate and "o_proj" in children:
        return "attention"  # no value projection: the keys' projection serves as values (Gemma 4's global blocks)
    if "gate_up_proj" in own and own["gate_up_proj"].dim() == 3:
        return "experts"
    if experts.is_stacked_experts(m):
        return "stacked_experts"  # one child holding every expert's rows, stacked (DBRX's experts.mlp)
    if experts.is_expert_glu(m):
        return "expert_glu"
    if stack.is_attention_wrapper(m):
        return "norm_attention_norm"
    if not children and "weight" in own and own["weight"].dim() == 2:
        return "router"
    if not own and len(children) == 1 and isinstance(next(m.children()), torch.nn.Linear) and _routes(part.child(next(iter(children)))):
        return "router"  # its one child is the linear map giving a logit per expert (Hunyuan's gate.wg)
    if children and "weight" in own and own["weight"].dim() == 2 and all(is_offset(c) for c in m.children()):
        return "router"  # its only children hold its per-expert selection bias (ERNIE 4.5's moe_statics)
    linear_children = [n for n, c in m.named_children() if isinstance(c, torch.nn.Linear)]
    if (len(linear_children) == 1 and _routes(part.child(linear_children[0]))
            and all(library.has_epsilon(c) for n, c in m.named_children() if n != linear_children[0])):
        return "router"  # a linear map to the experts' logits beside the norm it applies first (Gemma 4's router)
    if ("weight" in own and own["weight"].dim() == 2 and _routes_rows(part, own["weight"].shape[0]) and children
            and all(not any(True for _ in c.parameters()) and not any(True for _ in c.children()) for c in m.children())):
        return "router"  # its weight has a row per expert; its one child scores the logits (DeepSeek-V4's score_fn)
    if "experts" in children:
        return "mixture"
    if (children & {"gate_proj", "gate_up_proj", "c_fc", "fc1", "fc_in", "dense_h_to_4h"} or {"up_proj", "down_proj"} <= children
            or {"input_linear", "output_linear"} <= children or {"w1", "w2", "w3"} <= children or sequential_mlp(m)):
        return "dense_mlp"
    if not children and set(own) == {"alpha_p", "alpha_n"}:  # an activation with two learned numbers (xIELU)
        return "activation"
    if is_offset(m):
        return "offset"
    if library.is_weightless_norm(m):
        return "weightless_norm"  # no tensors, an epsilon: a norm without a gain (Llama 4's q and k norm)
    if positions.is_sinusoidal_table(m):
        return "sinusoidal_positions"  # positions looked up in a fixed table the module computes (XGLM)
    if positions.is_rotary_module(m):
        return "rotary"  # positions to cos and sin, computed inside the attention that holds it (RecurrentGemma)
    if not children and not own:
        return "activation"
    if hyper.is_hyper_connection(m):
        return "hyper_connection"  # residual streams collapsed for a sublayer and mixed (DeepSeek-V4)
    if hyper.is_stream_collapse(m):
        return "stream_collapse"  # the streams collapsed into one after the last block (DeepSeek-V4)
    raise AtlasError(f"family {part.ctx.family.name}", f"component {part.id}",
                     f"no chain of steps describes {type(m).__name__} yet: add its steps to atlas/proof before its pages can show equations")


BUILDERS = {
    "embedding": library.embedding,
    "dropout": library.dropout,
    "linear": library.linear,
    "norm": library.norm,
    "activation": library.activation,
    "dense_mlp": library.dense_mlp,
    "latent_attention": attention.latent_attention,
    "indexer": sparse.indexer,
    "attention": attention.attention,
    "experts": experts.experts,
    "stacked_experts": experts.stacked_experts,
    "expert_glu": experts.expert_glu,
    "norm_attention_norm": stack.norm_attention_norm,
    "router": router.router,
    "offset": router.offset,
    "mixture": mixture.mixture,
    "block": lambda part: (shared.hybrid_block(part, shared_hybrid_roles(part.tiny)) if shared_hybrid_roles(part.tiny)
                           else rwkv.with_embedding_norm(part, stack.block(part))),
    "linear_attention": linear.linear_attention,
    "lightning_attention": lightning.lightning_attention,
    "gated_norm": lambda part: part.choose("gated_norm_order", {  # two orders of the same parts, measured
        "norm_then_gate": lambda: linear.gated_norm(part), "gate_then_grouped_norm": lambda: ssm.gated_norm(part)}),
    "depthwise_conv": lambda part: part.choose("convolution_padding", {
        "causal": lambda: linear.depthwise_conv(part), "both_sides_first_outputs_kept": lambda: ssm.depthwise_conv(part)}),
    "decay_gate": linear.decay_gate,
    "shared_block": shared.shared_block,
    "carried_block": shared.carried_block,
    "low_rank_adapter": shared.low_rank_adapter,
    "mamba2": ssm.mamba2,
    "mamba1": ssm.mamba1,
    "short_conv": ssm.short_conv,
    "weightless_norm": library.weightless_norm,
    "rg_lru": rglru.rg_lru,
    "token_shift": rwkv.token_shift,
    "time_mixing": rwkv.time_mixing,
    "channel_mixing": rwkv.channel_mixing,
    "rotary": positions.rotary,
    "sinusoidal_positions": positions.sinusoidal_positions,
    "recurrent_block": rglru.recurrent_block,
    "hyper_connection": hyper.hyper_connection,
    "stream_collapse": hyper.stream_collapse,
    "grouped_linear": hyper.grouped_linear,
    "shared_kv_attention": compressed.shared_kv_attention,
    "window_compressor": compressed.compressor,
    "compressed_indexer": compressed.indexer,
    "index_scorer": compressed.index_scorer,
    "rotary_table": compressed.rotary_table,
}


def identity(part: Part) -> Chain:
    """A module that returns what it is given."""
    from atlas.proof.steps import Step

    return Chain([Step(r"y=x", "y", lambda e: e["x"], summary=True)], [library.X], "y")


def module_list(part: Part) -> Chain:
    """A list of sublayers: its parent calls the entries; the list itself is never called, so it has no steps."""
    raise AtlasError(f"family {part.ctx.family.name}", f"component {part.id}", "a list of modules is never called: its parent runs its entries")


BUILDERS["identity"] = identity
BUILDERS["list"] = module_list


def build(part: Part) -> Chain:
    kind = kind_of(part)
    part.note("kind", kind, "the module's structure")
    return BUILDERS[kind](part)


# Every chain module builds its children's chains through library.chain_of, below this dispatch: hand
# it in. The package imports prove, and prove takes chain_of from here, so no chain is built without it.
library.use_dispatch(build)
chain_of = library.chain_of
