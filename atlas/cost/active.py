"""The active parameters: the values one token runs through, by part (embeddings, attention, mixers,
dense MLPs, routers, shared experts, the routed experts' top-k share, norms, the head)."""

from __future__ import annotations

from typing import Any

from atlas.model.sizes import experts_per_token
from atlas.model.structure import shared_hybrid_roles
from atlas.cost.coefficients import expert_count, experts_module


def active_breakdown(model, blocks, facts: dict[str, Any], config) -> dict[str, Any]:
    """The values one token runs through, by part: embeddings, attention, dense MLPs, routers, shared
    experts, the routed experts' top-k share, norms, the head."""
    from atlas.model.introspect import own_tensors
    from atlas.model.roles import block_roles

    top_k = experts_per_token(config)
    parts = {name: 0 for name in ACTIVE_PARTS}
    routed_all = 0
    zero_experts = False  # experts that multiply nothing among the routing choices (LongCat-Flash)
    counted: set[int] = set()
    for block in blocks:
        roles = block_roles(block)
        mlp = block.get_submodule(roles.mlp) if roles.mlp else None
        owner = {}
        for role, module in (("attention", block.get_submodule(roles.attention) if roles.attention else None),
                             # a state-space, short-convolution or recurrent mixer in the attention's place
                             ("state-space and recurrent mixers", block.get_submodule(roles.ssm) if roles.ssm else None),
                             ("dense MLPs", mlp),
                             ("routers", getattr(mlp, roles.router) if mlp is not None and roles.router else None),
                             ("shared experts", getattr(mlp, roles.shared_expert) if mlp is not None and roles.shared_expert else None),
                             ("routed experts (top-k share)", experts_module(block, roles))):
            if module is not None:
                for m in module.modules():
                    owner[id(m)] = role  # later roles are inside the MLP: they override it
        hybrid = shared_hybrid_roles(block)
        if hybrid:  # a shared block's attention and MLP, the block's own linear map, its Mamba-2 mixer (Zamba2)
            from atlas.model.structure import is_ssm, separate_qkv

            for m in block.get_submodule(hybrid["shared"]).modules():
                if separate_qkv(m):
                    owner.update({id(x): "attention" for x in m.modules()})
                elif m is not block.get_submodule(hybrid["shared"]) and "gate_up_proj" in dict(m.named_children()):
                    owner.update({id(x): "dense MLPs" for x in m.modules()})
            owner[id(block.get_submodule(hybrid["linear"]))] = "linear maps into the stream"
            owner.update({id(x): "state-space and recurrent mixers" for m in block.get_submodule(hybrid["mixer_block"]).children()
                          if is_ssm(m) for x in m.modules()})
        for name in roles.sublayer_lists:  # sublayers run from lists (LongCat-Flash): every attention, every dense MLP
            listed = block.get_submodule(name)
            role = ("attention" if roles.attention and roles.attention.startswith(name + ".") else
                    None if (roles.attention_norm or "").startswith(name + ".") or (roles.mlp_norm or "").startswith(name + ".") else "dense MLPs")
            if role:
                owner.update({id(m): role for m in listed.modules()})
        n_experts = None
        experts = experts_module(block, roles)
        if experts is not None:
            n_experts = expert_count(experts)
            router = getattr(mlp, roles.router) if mlp is not None and roles.router else None
            zero_experts |= has_zero_experts(experts) or router_choices(router) > n_experts
        for m in block.modules():
            for _, t, _role in own_tensors(m):
                if id(t) in counted:  # a tensor several blocks hold (Zamba2's shared blocks) is read as one
                    continue
                counted.add(id(t))
                part = owner.get(id(m), "norms")
                if part == "routed experts (top-k share)":
                    routed_all += t.numel()
                    parts[part] += t.numel() * top_k // n_experts
                else:
                    parts[part] += t.numel()
    seen = set()
    embeddings = [m for m in model.modules() if type(m).__name__.endswith("Embedding") and hasattr(m, "weight") and m.weight.dim() == 2]
    head = model.get_output_embeddings()
    block_ids = {id(p) for b in blocks for p in b.parameters()}
    for m in embeddings:
        if id(m.weight) not in seen:
            parts["embeddings"] += m.weight.numel()
            seen.add(id(m.weight))
    if head is not None and id(head.weight) not in seen:
        parts["head"] += sum(p.numel() for p in head.parameters() if id(p) not in seen)
        seen.update(id(p) for p in head.parameters())
    block_tensors = {id(t) for b in blocks for m in b.modules() for _, t, _ in own_tensors(m)}
    for m in model.modules():
        for _, t, _ in own_tensors(m):
            if id(t) not in block_tensors and id(t) not in block_ids and id(t) not in seen:
                parts["norms"] += t.numel()
                seen.add(id(t))
    total = sum(parts.values())
    fewest = {}
    if zero_experts:
        # every routing slot on a zero-computation expert: no routed expert's matrices at all
        routed = parts["routed experts (top-k share)"]
        fewest = {"fewest": total - routed, "fewest_without_embeddings": total - parts["embeddings"] - routed}
    return {
        **fewest,
        "rows": [{"part": name, "values": n} for name, n in parts.items() if n or name in ("embeddings", "attention")],
        "total": total,
        "without_embeddings": total - parts["embeddings"],
        "routed_all": routed_all,
        "top_k": top_k,
        "words": ("Active here means every value a token's forward pass reads: the embedding row it looks up is counted as the "
                  "whole table, as the model total counts it, and the routed experts count only the top-k share of each "
                  "mixture block. Figures vendors publish differ on the embeddings; both totals are given."),
    }



ACTIVE_PARTS = ("embeddings", "attention", "state-space and recurrent mixers", "linear maps into the stream", "dense MLPs", "routers", "shared experts", "routed experts (top-k share)", "norms", "head")



def has_zero_experts(experts) -> bool:
    """An experts module with more gate rows than down projections: the routing choices past the real
    experts are zero-computation experts (LongCat-Flash as transformers allocates it)."""
    down, gate_up = getattr(experts, "down_proj", None), getattr(experts, "gate_up_proj", None)
    return down is not None and gate_up is not None and gate_up.dim() >= 3 and gate_up.shape[0] > down.shape[0]



def router_choices(router) -> int:
    """The choices a router scores: the rows of its matrix (0 where there is none)."""
    matrices = [p for p in router.parameters() if p.dim() == 2] if router is not None else []
    return matrices[0].shape[0] if matrices else 0
