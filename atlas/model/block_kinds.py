"""Block kinds: a model's blocks grouped by structure, attention type and rotary positions.

Blocks built alike (the same modules and tensor shapes), with the same attention type where the
config gives one per block, and applying their rotary angles or not where a per-block switch turns
them off (NoPE blocks), are one kind, labelled by what tells the kinds apart ("MoE block", "sliding-
window block", "state-space block" ...). Also the block numbers as ranges ("1–3, 7").
"""

from __future__ import annotations

from dataclasses import dataclass

from atlas.model.introspect import own_tensors
from atlas.numbers import index_spans
from atlas.model.roles import block_roles
from atlas.model.structure import is_recurrent_block, is_ssm, is_time_mixing


def _structure(block) -> tuple:
    return tuple(
        (path, type(m).__name__, tuple((n, tuple(t.shape), role) for n, t, role in own_tensors(m)))
        for path, m in block.named_modules()
    )


def _has_experts(block) -> bool:
    return any("Experts" in type(m).__name__ or "MoE" in type(m).__name__ for m in block.modules())


ATTENTION_KIND_WORDS = {"sliding_attention": "sliding-window", "full_attention": "global"}


@dataclass
class BlockKind:
    id: str
    label: str  # "MoE block", "dense block", "sliding-window block" ...
    indices: list[int]
    mixture: bool
    attention_type: str | None

    @property
    def representative(self) -> int:
        return self.indices[0]


def layer_types(config) -> list[str] | None:
    """The attention type of every block: config.layer_types where the config lists them; otherwise a
    sliding_window alone (Mistral, Phi-3) bounds every layer, and with neither the attention is global."""
    listed = getattr(config, "layer_types", None)
    if listed:
        # a window as long as the context the model is configured for leaves every earlier position in
        # view: such a block attends globally (Phi-3.5-MoE's 131,072 of 131,072)
        return ["full_attention" if t == "sliding_attention" and not window_narrows(config) else t for t in listed]
    if getattr(config, "sliding_window", None) and window_narrows(config):
        return ["sliding_attention"] * config.num_hidden_layers
    return None


def window_narrows(config) -> bool:
    """The configured sliding window is shorter than the longest context (or the config names none)."""
    window, context = getattr(config, "sliding_window", None), getattr(config, "max_position_embeddings", None)
    if not isinstance(window, int) or not isinstance(context, int):
        return True
    return window < context


def shared_sources(blocks) -> list[int | None]:
    """For each block, the first block that holds the very same tensors as some module of it (Zamba2's
    shared attention blocks, one set of weights run at several depths), or None where it shares none."""
    holders: dict[int, list[int]] = {}
    for i, block in enumerate(blocks):
        for p in {id(p) for _, p in block.named_parameters(remove_duplicate=False)}:
            holders.setdefault(p, []).append(i)
    sources: list[int | None] = []
    for i, block in enumerate(blocks):
        sharers = {j for p in {id(p) for _, p in block.named_parameters(remove_duplicate=False)} for j in holders[p] if j != i}
        sources.append(min(sharers | {i}) if sharers else None)
    return sources


def block_kinds(blocks, layer_types: list[str] | None, without_rotary: list[int] | None = None) -> list[BlockKind]:
    """Blocks grouped by structure (and by attention type where the config gives one per block, by
    whether the block applies its rotary angles where a per-block switch turns them off: NoPE blocks,
    and by the shared weights a block runs, where blocks share tensors: Zamba2's shared blocks)."""
    groups: dict[tuple, list[int]] = {}
    unrotated = set(without_rotary or ())
    sources = shared_sources(blocks)
    shared_ones = sorted({s for s in sources if s is not None})
    for i, block in enumerate(blocks):
        attention_type = layer_types[i] if layer_types else None
        shared = shared_ones.index(sources[i]) if sources[i] is not None else None
        groups.setdefault((_structure(block), attention_type, i in unrotated, shared), []).append(i)
    kinds_of_mlp = {_has_experts(blocks[idx[0]]) for idx in groups.values()}
    kinds_of_attention = {key[1] for key in groups}
    kinds_of_positions = {key[2] for key in groups}
    kinds = []
    for (_, attention_type, no_positions, shared), indices in groups.items():
        mixture = _has_experts(blocks[indices[0]])
        roles = block_roles(blocks[indices[0]])
        if shared is not None:
            # a block that runs one of the shared blocks before its own mixer: named by the shared block it runs
            label = f"hybrid (shared block {shared + 1}) block"
            kinds.append(BlockKind(f"hybrid_block_{shared + 1}", label, indices, mixture, attention_type))
            continue
        if any(block_roles(blocks[idx[0]]).sublayers == 1 or block_roles(blocks[idx[0]]).ssm for idx in groups.values()):
            # a hybrid with state-space mixers or one-mixer blocks: each kind is named by what its block runs
            if roles.attention and roles.ssm and not roles.linear_attention:  # both mixers side by side (Falcon-H1)
                label = f"attention and {_mixer_word(blocks[indices[0]], roles)} {'MoE ' if mixture and len(kinds_of_mlp) > 1 else ''}block"
            elif roles.sublayers == 1:
                label = f"{_mixer_word(blocks[indices[0]], roles) if roles.ssm else 'attention' if roles.attention else 'MoE' if mixture else 'MLP'} block"
            else:
                label = f"{_mixer_word(blocks[indices[0]], roles) if roles.ssm else 'attention'} {'MoE ' if mixture and len(kinds_of_mlp) > 1 else ''}block"
            if roles.embedding_norm:  # the block that normalises the embeddings first (RWKV's block 0)
                label = f"first {label} (embedding norm)"
            kinds.append(BlockKind(label.replace(" ", "_").replace("-", "_").replace("(", "").replace(")", ""), label, indices, mixture,
                                   attention_type))
            continue
        words = []
        if len(kinds_of_positions) > 1:
            words.append("no-position" if no_positions else "rotary")
        if len(kinds_of_attention) > 1:
            words.append(ATTENTION_KIND_WORDS.get(attention_type, attention_type.replace("_", " ")))
        if len(kinds_of_mlp) > 1:
            words.append("MoE" if mixture else "dense")
        if mixture and _routes_by_id(blocks[indices[0]]) and any(
                key[1] == attention_type and not _routes_by_id(blocks[idx[0]]) for key, idx in groups.items()):
            words.append("hash-routed")  # the same attention, a mixture choosing by token id (DeepSeek-V4's first blocks)
        label = " ".join(words + ["block"]) if words else "transformer block"
        kinds.append(BlockKind(label.replace(" ", "_").replace("-", "_"), label, indices, mixture, attention_type))
    return sorted(kinds, key=lambda k: k.indices[0])


def _routes_by_id(block) -> bool:
    """A mixture whose router holds an integer table of one row per token id (hash routing)."""
    return any(not b.is_floating_point() and b.dim() == 2 for name, b in block.named_buffers() if ".gate." in f".{name}" or "router" in name)


def _mixer_word(block, roles) -> str:
    """A fixed-state mixer by what it holds: a selective scan (a decay of its own) or a short convolution alone."""
    if is_recurrent_block(getattr(block, roles.ssm)):  # a convolution and an RG-LRU (RecurrentGemma)
        return "recurrent"
    if is_time_mixing(getattr(block, roles.ssm)):  # a token shift and the WKV recurrence (RWKV)
        return "time-mixing"
    return "state-space" if is_ssm(getattr(block, roles.ssm)) else "short-convolution"


def blocks_without_rotary(config) -> list[int] | None:
    """Blocks a per-layer switch takes the rotary embedding away from, where the config has one.

    transformers' families with NoPE layers (SmolLM3, Llama 4) keep ``no_rope_layers``, one flag a
    block, where 1 means the block applies the rotary embedding and 0 that it does not. None where the
    config has no such switch."""
    flags = getattr(config, "no_rope_layers", None)
    if not flags:
        return None
    return [i for i, flag in enumerate(list(flags)[: config.num_hidden_layers]) if not flag]


def kinds_of_blocks(blocks, config) -> list[BlockKind]:
    """The block kinds of a model built from ``config``: by structure, attention type and positions."""
    return block_kinds(blocks, layer_types(config), blocks_without_rotary(config))


def index_ranges(indices: list[int]) -> str:
    """[1, 2, 3, 7] -> '1–3, 7' (block numbers as they are in the module list, from 0)."""
    return index_spans(indices)
