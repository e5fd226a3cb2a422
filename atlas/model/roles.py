"""Roles: which module of a model does what, found generically from names and structure.

The resolver places each standard value on a module by its role (embedding, block list, final norm,
head; in each block the attention, the MLP, the router, the experts, the shared expert, the norms, a
state-space mixer ...). Roles come from the names and classes every transformers family shares and,
where a child has a name of its own, from what it holds (``atlas.model.structure``). A block's roles
are read once (``block_roles``) and shared by the kinds, the proofs and the costs.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field

from atlas.model.introspect import find_block_list
from atlas.model.structure import (
    adds_residual,
    attention_is_inline,
    has_channel_decay,
    is_channel_mixing,
    is_compressed_indexer,
    is_dense_dispatch,
    is_grouped_linear,
    is_indexer,
    is_lightning_attention,
    is_linear_attention,
    is_recurrent_block,
    is_rg_lru,
    is_short_conv,
    is_ssm,
    is_time_mixing,
    norms_of_sums,
    separate_qkv,
    sequential_mlp,
)

ATTENTION_NAMES = ("self_attn", "attn", "attention", "self_attention")
# A block whose token mixer is linear attention may name it apart (Qwen3-Next's linear_attn).
LINEAR_ATTENTION_NAMES = ("linear_attn",)
MLP_NAMES = ("mlp", "feed_forward", "block_sparse_moe", "moe", "ffn")
ATTENTION_NORM_NAMES = ("input_layernorm", "ln_1", "attention_norm", "pre_attention_layernorm", "self_attn_layer_norm")
# Order matters: where a block has both, pre_feedforward_layernorm is the MLP's norm and
# post_attention_layernorm a post-norm of the attention (Gemma 2 and 3).
MLP_NORM_NAMES = ("pre_feedforward_layernorm", "post_attention_layernorm", "ln_2", "ffn_norm", "pre_mlp_layernorm")
MLP_POST_NORM_NAMES = ("post_feedforward_layernorm", "post_mlp_layernorm")
# A post-norm of the attention named apart (GLM-4's post_self_attn_layernorm): where it is present,
# post_attention_layernorm keeps Llama's meaning, the MLP's input norm, although the MLP is post-normed too.
ATTENTION_POST_NORM_NAMES = ("post_self_attn_layernorm",)
POSITION_EMBEDDING_NAMES = ("wpe", "embed_positions", "position_embeddings", "positions_embed")
FINAL_NORM_NAMES = ("norm", "final_layernorm", "ln_f", "final_norm")
# A norm the model applies to the token embeddings before block 0 (BLOOM's word_embeddings_layernorm;
# not LFM2's embedding_norm, which is its final norm).
EMBEDDING_NORM_NAMES = ("word_embeddings_layernorm",)
# ... held by block 0 itself, which applies it to its input before anything else (RWKV's pre_ln)
BLOCK_EMBEDDING_NORM_NAMES = ("pre_ln",)
ROUTER_NAMES = ("gate", "router")
EXPERTS_NAMES = ("experts",)
SHARED_EXPERT_NAMES = ("shared_experts", "shared_expert", "shared_mlp")
ACTIVATION_NAMES = ("act_fn", "act", "activation_fn", "gelu_impl")
DOWN_PROJ_NAMES = ("down_proj", "c_proj", "fc2", "w2", "dense_4h_to_h", "fc_out")
OUTPUT_PROJ_NAMES = ("o_proj", "c_proj", "out_proj", "dense", "o")


def _child(module, names: tuple[str, ...]) -> str | None:
    children = dict(module.named_children())
    return next((n for n in names if n in children), None)


def _calls_twice(parent, name: str) -> bool:
    """The parent's forward calls its child ``name`` more than once (read from its source, as the pages'
    evidence reads call sites): a norm it applies before the blocks and again after them."""
    import inspect

    try:
        source = inspect.getsource(type(parent).forward)
    except (OSError, TypeError):
        return False
    return source.count(f"self.{name}(") >= 2


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
    # the token mixer is lightning attention: linear attention with a fixed decay a head (see is_lightning_attention)
    lightning_attention: bool = False
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
    # the shared block a block runs before its own mixer (Zamba2's hybrid blocks), whose output reaches the stream only
    # through the mixer's input: the block's sum is its input and the mixer's output
    shared_block: str | None = None

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
    # Norms of the stream after each add (GPT-1's post-LN block: ln_1(x + attn(x)), then
    # ln_2(n + mlp(n))): the stream a sublayer reads and the block hands on is a norm's output, and no
    # norm stands before a sublayer (attention_norm and mlp_norm are None). See norms_of_sums.
    attention_add_norm: str | None = None
    mlp_add_norm: str | None = None
    # A norm of the embeddings that block 0 holds and applies to its input before anything else (RWKV's
    # pre_ln): the stream the block's sublayers add to starts at its output. None elsewhere.
    embedding_norm: str | None = None
    # Two vectors the block holds itself, as wide as the stream, that weigh the stream per channel at each add
    # (Doge's input_residual and post_attention_residual: x * w + sublayer output), in the order the block
    # registers them (the attention's add first); None elsewhere. See residual_weights.
    residual_weights: tuple[str, str] | None = None


def residual_weights(block) -> tuple[str, str] | None:
    """The block's own two stream-wide vectors that weigh its residual per channel, by structure: exactly two
    one-dimensional parameters of the block itself (not of a child), both as wide as its attention's input, in a block
    that runs an attention and an MLP. None where the block holds anything else of its own."""
    own = dict(block.named_parameters(recurse=False))
    attention, mlp, _ = _mixers(block)
    if len(own) != 2 or attention is None or mlp is None or any(p.dim() != 1 for p in own.values()):
        return None
    widths = {p.shape[0] for p in own.values()}
    first = next((m for m in getattr(block, attention).modules() if hasattr(m, "in_features")), None)
    if first is None or widths != {first.in_features}:
        return None
    a, b = own
    return (a, b)


UP_PROJ_NAMES = ("fc1", "fc_in", "c_fc", "up_proj", "dense_h_to_4h")


def _grouped_output(attention) -> bool:
    return any(is_grouped_linear(m) for m in attention.children())


def _pooled_indexer(attention) -> str | None:
    """The path of an indexer that scores pooled keys inside the attention's compressor (DeepSeek-V4)."""
    if attention is None:
        return None
    return next((n for n, m in attention.named_modules() if n and is_compressed_indexer(m)), None)


def _indexer_child(attention) -> str | None:
    return next((n for n, m in attention.named_children() if is_indexer(m)), None) if attention is not None else None


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
    # a fixed position table the model holds as a buffer of its own and reads in its forward (CTRL's
    # pos_encoding), where no module holds one: its path
    position_table: str | None = None


def _path_of(model, target) -> str | None:
    return next((path for path, m in model.named_modules() if m is target), None)


def _is_attention(module) -> bool:
    children = dict(module.named_children())
    return separate_qkv(module) is not None or "qkv_proj" in children or "Wqkv" in children


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
    ssm = next((n for n, m in block.named_children()
                if is_ssm(m) or is_short_conv(m) or is_recurrent_block(m) or is_time_mixing(m)), None)
    if attention == ssm:  # a recurrent mixer under an attention's name (RWKV's time mixing, called attention)
        attention = None
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
    from atlas.model.structure import shared_hybrid_roles

    hybrid = shared_hybrid_roles(block)
    if hybrid:
        return _shared_hybrid_roles(block, hybrid)
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
    attention_post_norm = _child(block, ATTENTION_POST_NORM_NAMES) or (
        "post_attention_layernorm" if mlp_post_norm and _child(block, ("post_attention_layernorm",)) else None)
    post_norms = {attention_post_norm, mlp_post_norm}
    norms = [n for n, m in block.named_children() if _is_norm(m) and n not in post_norms and n not in BLOCK_EMBEDDING_NORM_NAMES]
    attention_norm = _child(block, ATTENTION_NORM_NAMES) or (norms[0] if norms else None)
    mlp_norm = next((n for n in MLP_NORM_NAMES if n in dict(block.named_children()) and n not in post_norms), None)
    mlp_norm = mlp_norm or (norms[1] if len(norms) > 1 else None)
    ssm_norm = None
    if ssm and attention is None:  # the state-space mixer takes the attention's place: its norm too
        ssm_norm, attention_norm = attention_norm, None
    elif attention is None and mlp is not None and mlp_norm is None:  # a block that is one MLP
        mlp_norm, attention_norm = attention_norm, None
    attention_add_norm = mlp_add_norm = None
    if attention and mlp and attention_norm and mlp_norm and norms_of_sums(block) == [attention_norm, mlp_norm]:
        # each norm takes the sum after an add, not a sublayer's input: the block normalises after it adds
        attention_add_norm, mlp_add_norm, attention_norm, mlp_norm = attention_norm, mlp_norm, None, None
    attn_module = getattr(block, attention) if attention else None
    mlp_module = getattr(block, mlp) if mlp else None
    ssm_module = getattr(block, ssm) if ssm else None
    experts = _child(mlp_module, EXPERTS_NAMES) if mlp_module is not None else None
    router = _child(mlp_module, ROUTER_NAMES) if experts else None
    # the norm over the heads' outputs, as wide as what the output projection reads (Jamba's time-step, B and C
    # norms are narrower, and its mixer gates without a norm)
    out_proj = getattr(ssm_module, _child(ssm_module, OUTPUT_PROJ_NAMES) or "", None) if ssm_module is not None else None
    # (a learned weight: Falcon Mamba's weightless norms hold a dummy buffer "weight" as wide as the inner width)
    gated_norm = next((n for n, m in ssm_module.named_children() if _is_norm(m) and out_proj is not None
                       and "weight" in dict(m.named_parameters(recurse=False)) and m.weight.shape[0] == out_proj.weight.shape[1]),
                      None) if ssm_module is not None else None
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
        activation=None if experts else (_child(mlp_module, ACTIVATION_NAMES) or _sequential_part(mlp_module, 1) if mlp_module is not None else None),
        down_proj=None if experts else (_child(mlp_module, DOWN_PROJ_NAMES) or _sequential_part(mlp_module, 2)
                                        or ("value" if is_channel_mixing(mlp_module) else None) if mlp_module is not None else None),
        router=router,
        experts=experts,
        shared_expert=_child(mlp_module, SHARED_EXPERT_NAMES) if experts else None,
        linear_attention=is_linear_attention(attn_module),
        channel_decay=is_linear_attention(attn_module) and has_channel_decay(attn_module),
        lightning_attention=is_lightning_attention(attn_module),
        ssm=ssm,
        ssm_norm=ssm_norm,
        ssm_in_proj=_child(ssm_module, ("in_proj",)) if ssm_module is not None else None,
        ssm_gated_norm=gated_norm,
        ssm_out_proj=_child(ssm_module, OUTPUT_PROJ_NAMES + ("linear_out", "output")) if ssm_module is not None else None,
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
        attention_add_norm=attention_add_norm,
        mlp_add_norm=mlp_add_norm,
        embedding_norm=_child(block, BLOCK_EMBEDDING_NORM_NAMES),
        residual_weights=residual_weights(block),
    )


def _shared_hybrid_roles(block, parts: dict[str, str]) -> BlockRoles:
    """The roles of a block that runs a shared block, then its own state-space block (Zamba2's hybrid blocks): the
    shared block's attention and MLP, the state-space block's mixer and norm, each as a path through its holder.
    The shared block's norms read the stream beside the embeddings (twice the width) and the attention's output,
    not the stream: they host no stream value, so they are left out of the roles."""
    shared, mixer = block_roles(getattr(block, parts["shared"])), block_roles(getattr(block, parts["mixer_block"]))

    def under(holder: str, name: str | None) -> str | None:
        return f"{parts[holder]}.{name}" if name else None

    return dataclasses.replace(
        shared, attention=under("shared", shared.attention), mlp=under("shared", shared.mlp), attention_norm=None, mlp_norm=None,
        ssm=under("mixer_block", mixer.ssm), ssm_norm=under("mixer_block", mixer.ssm_norm), ssm_in_proj=mixer.ssm_in_proj,
        ssm_gated_norm=mixer.ssm_gated_norm, ssm_out_proj=mixer.ssm_out_proj, attention_adds_residual=False, mlp_adds_residual=False,
        shared_block=parts["shared"])


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
        lightning_attention=is_lightning_attention(attn_module),
        attention_inline=attn_module is not None and attention_is_inline(attn_module),
        sublayer_lists=lists,
        experts_own_loop=_own_loop(mlp_module, experts),
    )


def _sequential_part(mlp_module, which: int) -> str | None:
    """The activation (1) or the down projection (2) of a two-layer MLP built as a Sequential (CTRL's ffn)."""
    layers = sequential_mlp(mlp_module)
    return layers[which] if layers else None


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
    if embedding_norm is None and final and _calls_twice(parent, final):
        embedding_norm = final  # one norm before block 0 and after the last (nanochat's model.norm)
    held = _child(blocks[0], BLOCK_EMBEDDING_NORM_NAMES) if blocks else None
    if embedding_norm is None and held:  # block 0 normalises the embeddings itself before its own norms (RWKV's pre_ln)
        embedding_norm = join_path(block_path.rpartition(".")[2], "0", held)
    table = None if positions else _held_position_table(parent, model.get_input_embeddings())
    return Roles(
        embedding=embedding,
        position_embedding=join_path(parent_path, positions) if positions else None,
        position_table=join_path(parent_path, table) if table else None,
        block_list=block_path,
        final_norm=f"{parent_path}.{final}" if (final and parent_path) else final,
        head=head,
        blocks=[block_roles(b) for b in blocks],
        modules=frozenset(path for path, _ in model.named_modules()),
        embedding_norm=join_path(parent_path, embedding_norm) if embedding_norm else None,
    )


def _held_position_table(parent, embedding) -> str | None:
    """A 2-D float buffer of the blocks' parent as wide as the token embeddings (a table of positions the
    forward reads itself: CTRL's pos_encoding), by structure; None where it holds none."""
    import torch

    width = getattr(embedding, "embedding_dim", None)
    return next((n for n, b in parent.named_buffers(recurse=False)
                 if b.dim() == 2 and torch.is_floating_point(b) and b.shape[1] == width), None)


def join_path(*parts: str | None) -> str:
    return ".".join(p for p in parts if p)
