"""A block's cost coefficients (BlockTerms) and the pieces every rule builds them from: the values cached
per position or held as a state, the FLOPs per key attended, the matrix values a token is multiplied by
(a routed expert's in the top-k share); and the coefficients evaluated at a context, as the build and
the page's script both evaluate them:

    cache values at context C  = Σ_kinds blocks × values per position × min(C, positions held at most)
    FLOPs of a token at C      = head + Σ_kinds blocks × (fixed + per attended key × min(C, keys at most))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

FIXED_STATES = ("state", "linear", "recurrent")  # block kinds whose cache is a state of fixed size, not values per position
# A block kind whose cache is both: keys and values per position, and beside them a state of fixed size
# (Falcon-H1's attention and Mamba-2 side by side); its kind's "state" holds the fixed part.
GROWING_AND_FIXED = ("full_and_state",)


@dataclass
class BlockTerms:
    """One block's cost coefficients, with the words and numbers that made them."""

    attention: str  # "full", "sliding", "chunked", "latent", ... (what the cache holds for the block)
    window: int | None  # the sliding window, or a chunked block's chunk (the window transformers' cache holds it as)
    cache_values: int  # values transformers' cache holds per position, keys and values together
    cache_cap: int | None  # positions the cache holds at most (None: every position)
    cache_formula: str
    expanded_values: int | None  # latent attention: per-head keys and values, which transformers' cache does not hold
    expanded_formula: str | None
    flops_fixed: int  # FLOPs of the block's matrices for one token
    flops_per_key: int  # FLOPs per key the token attends to
    keys_cap: int | None  # keys a token attends to at most (None: every earlier position and itself)
    flops_formula: str
    matrices: int  # matrix values one token is multiplied by (routed experts: the top-k share)
    routed: tuple[int, int] | None  # (top_k, experts) of a mixture block
    state_values: int = 0  # values of a fixed-size state held beside the per-position cache (GROWING_AND_FIXED)
    # keys pooled from windows of positions (DeepSeek-V4's compressed blocks): per series {"every": m, "entry": values
    # of one pooled key, "open": values held per position of the window not yet closed, "overlap": values kept
    # from the last closed window once one has closed}; and the FLOPs per pooled key a token attends to or scores
    compressed: list | None = None
    compressed_keys: dict | None = None



def latent_cache_values(kv_lora_rank: int, qk_rope_head_dim: int) -> int:
    """Values a latent-attention layer caches per position."""
    return kv_lora_rank + qk_rope_head_dim



def standard_cache_values(kv_heads: int, key_dim: int, value_dim: int) -> int:
    """Values a key-value-head attention layer caches per position: its keys and its values."""
    return kv_heads * (key_dim + value_dim)



def attention_flops_per_key(heads: int, key_dim: int, value_dim: int) -> int:
    """A token's scores against one key (a dot product per head) and that key's value added to its output."""
    return 2 * heads * (key_dim + value_dim)



def indexer_flops_per_key(heads: int, dim: int) -> int:
    """FLOPs per key of a lightning indexer: each head's dot product with the key, then the heads' weighted sum."""
    return 2 * heads * dim + 2 * heads



def linear_state_values(value_heads: int, key_dim: int, value_dim: int) -> int:
    """Values of a linear-attention layer's recurrent state: one key × value matrix per value head."""
    return value_heads * key_dim * value_dim



def ssm_state_values(conv_channels: int, kernel: int, heads: int, head_dim: int, state_size: int) -> int:
    """Values a Mamba-2 layer's cache holds for one sequence, whatever its length: the convolution's
    last ``kernel`` inputs of every channel and each head's head_dim × state_size recurrent state."""
    return conv_channels * kernel + heads * head_dim * state_size



def recurrent_state_values(channels: int, kernel: int) -> int:
    """Values a recurrent block with an RG-LRU (RecurrentGemma's) holds for one sequence, whatever its length:
    the convolution's last kernel - 1 inputs of every channel, and the RG-LRU's state, one number a channel."""
    return channels * (kernel - 1) + channels



def experts_module(block, roles):
    mlp = block.get_submodule(roles.mlp) if roles.mlp else None
    if mlp is not None and roles.experts:
        return getattr(mlp, roles.experts)
    from atlas.proof.stack import side_mixture

    side = side_mixture(block)  # routed experts the block holds beside its MLP (Gemma 4's 26B-A4B)
    return getattr(block, side["experts"]) if side else None



def matrix_values(block, roles, top_k: int | None, exclude=None) -> tuple[int, tuple[int, int] | None]:
    """Matrix values one token is multiplied by in ``block`` (a routed expert's matrices in the top-k
    share), leaving out ``exclude``; and (top_k, experts) where the block routes."""
    experts = experts_module(block, roles)
    expert_ids = {id(p) for p in experts.parameters()} if experts is not None else set()
    n_experts = expert_count(experts) if experts is not None else None
    total = 0
    from atlas.proof.kinds import is_offset

    for module in block.modules():
        if exclude is not None and any(module is m for m in (exclude if isinstance(exclude, list) else [exclude])):
            continue
        if is_offset(module):  # a vector added, not a matrix multiplied (ERNIE 4.5's [1, E] selection bias)
            continue
        for _, p in module.named_parameters(recurse=False):
            if id(p) in expert_ids and "Experts" in type(module).__name__ and p.dim() >= 3 and p.shape[0] > n_experts:
                # rows for zero-computation experts too (LongCat-Flash as transformers allocates it): one expert's slice, top_k times
                total += p.numel() // p.shape[0] * top_k
            elif id(p) in expert_ids:
                per_expert_dims = p.dim() - 1 if p.shape[0] == n_experts and "Experts" in type(module).__name__ else p.dim()
                if per_expert_dims >= 2:
                    # dense dispatch (Llama 4): every expert multiplies every token's (scaled) row
                    total += p.numel() if roles.dense_dispatch else p.numel() * top_k // n_experts
            elif p.dim() >= 2:
                total += p.numel()
    return total, ((top_k, n_experts) if experts is not None else None)



def expert_count(experts) -> int:
    # num_routed_experts: the experts with weights where zero-computation experts are routed to as well (LongCat-Flash)
    return getattr(experts, "num_experts", None) or getattr(experts, "num_routed_experts", None) or len(list(experts.children()))



# --- evaluating the coefficients ---------------------------------------------------------------------


def cache_values_at(kinds: list[dict[str, Any]], context: int) -> int:
    """Values all blocks' caches hold after ``context`` positions (one sequence): facts["cost"]["cache"]["kinds"]."""
    return sum(k["count"] * (k["values"] * (min(context, k["cap"]) if k["cap"] else context) + k.get("state", 0)
                             + pooled_values(k.get("compressed"), context)) for k in kinds)



def pooled_values(series: list | None, context: int) -> int:
    """Values a block's compressors hold after ``context`` positions: a pooled key per closed window, the
    not yet closed window's positions, and what the last closed window leaves for the next (overlap)."""
    return sum(s["entry"] * (context // s["every"]) + s["open"] * (context % s["every"]) + (s["overlap"] if context >= s["every"] else 0)
               for s in series or [])



def pooled_key_flops(keys: dict | None, context: int) -> int:
    """FLOPs a token at ``context`` spends on the pooled keys of its block: each pooled key so far."""
    return keys["per_key"] * (context // keys["every"]) if keys else 0



def flops_at(flops: dict[str, Any], context: int) -> int:
    """FLOPs of one token whose position is ``context`` (it attends to ``context`` keys, itself included)."""
    total = flops["head"]["flops"]
    for k in flops["kinds"]:
        keys = min(context, k["keys_cap"]) if k["keys_cap"] else context
        total += k["count"] * (k["fixed"] + k["per_key"] * keys + pooled_key_flops(k.get("compressed_keys"), context))
    return total
