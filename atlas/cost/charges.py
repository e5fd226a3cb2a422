"""The model figure measured on the preview run: hooks on the tiny model's one-token step that charge
what the model asks for where transformers' eager code does more (atlas.cost.model_figure says where).

Per block, starting from what torch.utils.flop_counter counted for the block:
- each experts module is charged only for the tokens routed to it: (token, real expert) pairs read from
  the routing its forward is handed (the top-k indices), or, under dense dispatch (Llama 4), the rows
  of an expert's input that are not zero; times one expert's matrix values, twice;
- kv_b_proj is charged for the new token's latent only, not for every cached latent it expands, and a projection
  that scores the values for the mask (Doge's dt_proj) for the new key's values only;
- the attention's own products (its count less its submodules') are charged only for the keys the
  token sees: those whose attention weight is not exactly zero (a chunk's mask, an indexer's choice).
"""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.cost.active import has_zero_experts
from atlas.cost.coefficients import expert_count, experts_module
from atlas.model.structure import value_scored_mask


class ModelCharges:
    """Hooks on every block's experts, kv_b_proj and attention modules for one step of ``new`` tokens."""

    def __init__(self, blocks, new: int):
        from atlas.model.roles import block_roles
        from atlas.cost.model_figure import attention_modules

        self.new = new
        self.handles: list = []
        self.experts: dict[int, Any] = {}  # block -> experts module
        self.expands: dict[int, list] = {}  # block -> kv_b_proj modules
        self.attentions: dict[int, list] = {}
        self.routed: dict[int, int] = {}  # id(experts) -> (token, real expert) pairs it was handed
        self.positions: dict[int, int] = {}  # id(kv_b_proj) -> latents it expanded
        self.seen: dict[int, tuple[int, int]] = {}  # id(attention) -> (keys seen summed over heads, heads × keys scored)
        for i, block in enumerate(blocks):
            roles = block_roles(block)
            experts = experts_module(block, roles)
            if experts is not None:
                self.experts[i] = (experts, roles.dense_dispatch)
            if roles.attention is not None and not roles.linear_attention and not roles.lightning_attention:
                self.attentions[i] = attention_modules(block, roles)
                self.expands[i] = [a.kv_b_proj for a in self.attentions[i] if getattr(a, "kv_b_proj", None) is not None]
                # a projection that scores every cached key's values at every step (Doge's dt_proj): charged for the new key's
                self.expands[i] += [a.get_submodule(s[0]) for a in self.attentions[i] for s in [value_scored_mask(a)] if s]

    def start(self):
        for experts, dense in self.experts.values():
            self.handles.append(experts.register_forward_pre_hook(self._route(experts, dense), with_kwargs=True))
        for modules in self.expands.values():
            for m in modules:
                self.handles.append(m.register_forward_pre_hook(lambda m, args: self.positions.__setitem__(id(m), args[0].shape[-2])))
        for modules in self.attentions.values():
            for m in modules:
                self.handles.append(m.register_forward_hook(self._weights))

    def stop(self):
        for h in self.handles:
            h.remove()

    def _route(self, experts, dense: bool):
        real = _real_experts(experts)

        def hook(module, args, kwargs):
            import torch

            if dense:  # one row per expert per token, zero where the token is not sent (Llama 4)
                rows = args[0].reshape(expert_count(experts), -1, args[0].shape[-1])
                self.routed[id(module)] = int((rows != 0).any(-1).sum())
                return
            found = [a for a in list(args[1:]) + [kwargs.get(k) for k in ("top_k_index", "router_indices", "selected_experts")]
                     if isinstance(a, torch.Tensor) and not a.is_floating_point()]
            if found:
                self.routed[id(module)] = int((found[0] < real).sum())
        return hook

    def _weights(self, module, args, out):
        import torch

        weights = out[1] if isinstance(out, tuple) and len(out) > 1 else None
        if isinstance(weights, torch.Tensor) and weights.dim() == 4:
            last = weights[0, :, -1, :]  # the new token's weights over the keys, head by head
            self.seen[id(module)] = (int((last != 0).sum()), last.numel())

    def block(self, i: int, counts: dict[str, int], names: dict[int, str]) -> tuple[int, str]:
        """FLOPs to take from block ``i``'s eager count to reach the model's, and the words of each."""
        less, words = 0, []
        if i in self.experts:
            experts, _ = self.experts[i]
            eager = counts.get(names[id(experts)], 0)
            if id(experts) in self.routed:
                pairs = self.routed[id(experts)]
                charged = pairs * 2 * expert_matrix_values(experts)
                if charged != eager:
                    words.append(f"experts {grouped(eager)} → {grouped(pairs)} routed (token, expert) pairs × 2 × "
                                 f"{grouped(expert_matrix_values(experts))} = {grouped(charged)}")
                less += eager - charged
            else:
                words.append("experts as counted (their routing is not read by a hook here)")
        for m in self.expands.get(i, []):
            eager = counts.get(names[id(m)], 0)
            latents = self.positions.get(id(m))
            if latents:
                charged = eager * self.new // latents
                less += eager - charged
                words.append(f"kv_b_proj {grouped(eager)} over {latents} latents → the new token's {grouped(charged)}" if m.in_features < m.out_features
                             else f"the values' scoring {grouped(eager)} over {latents} keys → the new key's {grouped(charged)}")
        for m in self.attentions.get(i, []):
            if id(m) not in self.seen:
                continue
            seen, scored = self.seen[id(m)]
            own = counts.get(names[id(m)], 0) - sum(counts.get(names[id(c)], 0) for c in m.children())
            if seen != scored:
                charged = own * seen // scored
                less += own - charged
                words.append(f"attention products {grouped(own)} × {seen}/{scored} weights not zero = {grouped(charged)}")
        return less, "; ".join(words)



def _real_experts(experts) -> int:
    """Routing choices that are real experts (the rest, where there are more, compute nothing)."""
    if has_zero_experts(experts):
        return experts.down_proj.shape[0]
    return expert_count(experts)



def expert_matrix_values(experts) -> int:
    """Matrix values one expert multiplies a token by: a slice of each stacked tensor, or the experts'
    matrices over their number where each is a module of its own."""
    stacked = [p for p in experts.parameters() if p.dim() >= 3]
    if stacked:
        return sum(p.numel() // p.shape[0] for p in stacked)
    return sum(p.numel() for p in experts.parameters() if p.dim() == 2) // expert_count(experts)
