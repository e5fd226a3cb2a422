"""The measured run that checks the cost rules. The same rules, applied to the tiny preview model, must
give what a real run of that model measures: the values transformers' cache holds after the prompt,
block by block, and the FLOPs ``torch.utils.flop_counter`` counts for one more token, block by block
and at the head. A rule that disagrees fails the build (``atlas.check.claims.check_cost``).
"""

from __future__ import annotations

from typing import Any

from atlas.errors import AtlasError
from atlas.numbers import grouped
from atlas.model.introspect import num_blocks
from atlas.cost.blocks import block_terms
from atlas.cost.coefficients import experts_module, pooled_key_flops, pooled_values
from atlas.cost.compressed import stream_collapse_flops
from atlas.cost.charges import ModelCharges
from atlas.cost.model_figure import keys_seen, model_terms, terms_flops


def measured_checks(family: str, run, block_path: str) -> list[dict[str, Any]]:
    """The rules applied to the tiny preview model, beside what a real run of it measures: the values
    its cache holds after the prompt, and the FLOPs of one more token, block by block and at the head."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from atlas.model.introspect import find_block_list
    from atlas.model.block_kinds import layer_types

    model, config = run.model, run.config
    _, blocks = find_block_list(model, num_blocks(config))
    types = layer_types(config) or [None] * len(blocks)
    from atlas.inputs.layers import layer_config

    terms = [block_terms(b, layer_config(config, i), types[i], family) for i, b in enumerate(blocks)]
    prompt = run.ids.shape[1]
    # Parameters that need no gradient while counting: a module handed slices of its parent's parameters
    # (DBRX's experts.mlp gets views of w1, v1, w2 made under no_grad) would otherwise stop torch's
    # module tracker, which looks for a gradient function on every input that asks for one.
    needing = [p for p in model.parameters() if p.requires_grad]
    for p in needing:
        p.requires_grad_(False)
    zero_slots = _zero_expert_slots(blocks)  # block -> [routing choices of the extra token], where zero experts exist
    charges = ModelCharges(blocks, new=1)  # what the model asks for, where transformers' eager code does more
    try:
        with torch.no_grad():
            out = model(run.ids, use_cache=True)
            cache = getattr(out, "cache", None)
            returned = getattr(out, "state", None)
            # a state the model returns as a list of tensors, one column per block (RWKV's five: batch × width × blocks)
            returned = returned if isinstance(returned, list) and returned and all(isinstance(x, torch.Tensor) for x in returned) else None
            if cache is None and returned is not None:
                from transformers import DynamicCache

                cache = DynamicCache(config=config)  # empty: the state list holds everything
            elif cache is None:  # a model that keeps its cache to itself (RecurrentGemma) is handed one to fill
                from transformers import DynamicCache

                cache = DynamicCache(config=config)
                model(run.ids, use_cache=True, cache=cache)
            held = [cache_layer_values(layer) // run.ids.shape[0] for layer in cache.layers]
            if returned is not None:
                held = [sum(int(x[..., i].numel()) for x in returned) // run.ids.shape[0] for i in range(len(blocks))]
            keeps_cache = any(held) or bool(getattr(cache, "linear_cache", None))
            if not keeps_cache:
                # the class keeps no cache (GPT-1's): every step runs the whole sequence again, so what a cache would
                # hold is measured as the keys and values each attention multiplies by, and one more token's
                # FLOPs as the difference between the prompt plus that token and the prompt alone
                held = _keys_and_values_multiplied(model, run.ids, blocks)
            # a linear-attention state the cache keeps beside its layers, one per block (MiniMax's linear_cache)
            for i, state in enumerate(getattr(cache, "linear_cache", None) or []):
                if isinstance(state, torch.Tensor):
                    held += [0] * (i + 1 - len(held))
                    held[i] += int(state.numel()) // run.ids.shape[0]
            zero_slots.start()
            charges.start()
            try:
                with FlopCounterMode(display=False) as counter:
                    if returned is not None:  # one more token from the state the prompt left
                        model(run.ids[:, -1:], state=returned, use_cache=True)
                    elif keeps_cache:
                        model(run.ids[:, -1:], cache=cache, use_cache=True)
                    else:
                        model(torch.cat([run.ids, run.ids[:, -1:]], dim=1))
                if not keeps_cache:
                    with FlopCounterMode(display=False) as before:
                        model(run.ids)
            finally:
                zero_slots.stop()
                charges.stop()
    finally:
        for p in needing:
            p.requires_grad_(True)
    counts = {name: sum(by_op.values()) for name, by_op in counter.get_flop_counts().items()}
    recomputed = 0  # query–key pairs of the earlier positions the new key adds, where nothing is cached
    if not keeps_cache:
        counts = {name: n - sum(before.get_flop_counts().get(name, {}).values()) for name, n in counts.items()}
        recomputed = prompt
    root = type(model).__name__
    head_path = next(name for name, m in model.named_modules() if m is model.get_output_embeddings())
    checks = []
    if len(held) != len(blocks) and len(held) % len(blocks) == 0:
        # a cache layer per attention, several attentions a block (LongCat-Flash: layer 2i and 2i+1 are block i's)
        per = len(held) // len(blocks)
        held = [sum(held[i * per:(i + 1) * per]) for i in range(len(blocks))]
    if len(held) != len(blocks):
        raise AtlasError(family, "cost figure KV cache", f"the preview run's cache has {len(held)} layers for {len(blocks)} blocks")
    # a recurrent block's state is held by its own modules, not by the cache (RecurrentGemma)
    held = [held_on_modules(blocks[i]) // run.ids.shape[0] if t.attention == "recurrent" else n for i, (t, n) in enumerate(zip(terms, held))]
    for i, t in enumerate(terms):
        positions = min(prompt, t.cache_cap) if t.cache_cap else prompt
        how = (f"{grouped(t.cache_values)} values × {positions} positions after the {prompt}-token prompt; "
               "measured: the keys and values transformers' cache holds for the block")
        if t.state_values:
            how = (f"{grouped(t.cache_values)} values × {positions} positions after the {prompt}-token prompt + {grouped(t.state_values)} "
                   "values of fixed state; measured: the keys, values and states transformers' cache holds for the block")
        if t.attention == "recurrent":
            how = (f"{grouped(t.cache_values)} values, the convolution's last inputs and the RG-LRU's state, after the "
                   f"{prompt}-token prompt as after any other; measured: the tensors the block's modules hold between tokens")
        if returned is not None:  # RWKV: the state list the model hands back, one column a block
            how = (f"{grouped(t.cache_values)} values after the {prompt}-token prompt as after any other; measured: the block's "
                   "column of the state list the model returns (every tensor of it)")
        if t.attention == "linear":
            how = (f"{grouped(t.cache_values)} values, the recurrent state and the convolution's last inputs, after the "
                   f"{prompt}-token prompt as after any other; measured: the states transformers' cache holds for the block")
        if t.compressed:
            how = (f"{grouped(t.cache_values)} values × {positions} positions of the window + the pooled keys, the open window and the "
                   f"overlap of {len(t.compressed)} compressor{'s' if len(t.compressed) > 1 else ''} after the {prompt}-token prompt; "
                   "measured: every tensor transformers' cache holds for the block, the window's shared key-value tensor once")
        checks.append({"figure": f"KV cache of block {i}", "formula": t.cache_values * positions + t.state_values + pooled_values(t.compressed, prompt),
                       "measured": held[i], "how": how})
    for i, t in enumerate(terms):
        keys = prompt + 1
        keys = min(keys, t.keys_cap) if t.keys_cap else keys
        idle, idle_words = zero_slots.idle_flops(i)
        if recomputed:
            idle_words += (f" + {grouped(t.flops_per_key)} × {recomputed} pairs of the earlier queries with the new key (the class "
                           f"keeps no cache, so the {prompt}-token prompt and the prompt plus one token run whole and their difference is counted)")
        pooled = pooled_key_flops(t.compressed_keys, prompt + 1)
        if pooled:
            idle_words += f" + {grouped(pooled)} for {(prompt + 1) // t.compressed_keys['every']} pooled keys"
        checks.append({
            "figure": f"FLOPs of block {i}",
            "formula": t.flops_fixed + t.flops_per_key * (keys + recomputed) - idle + pooled,
            "measured": int(counts.get(f"{root}.{block_path}.{i}", 0)),
            "how": f"{grouped(t.flops_fixed)} + {grouped(t.flops_per_key)} × {keys} keys for token {prompt + 1}{idle_words}; "
                   "measured: torch.utils.flop_counter on the block",
        })
    checks += _model_checks(run, blocks, terms, counts, charges, zero_slots, f"{root}.{block_path}", recomputed)
    head_flops = 2 * model.get_output_embeddings().weight.numel()
    collapse, collapse_path = stream_collapse_flops(model)  # the streams collapsed before the final norm (DeepSeek-V4)
    head_measured = int(counts.get(f"{root}.{head_path}", 0)) + (int(counts.get(f"{root}.{collapse_path}", 0)) if collapse_path else 0)
    checks.append({"figure": "FLOPs of the head", "formula": head_flops + collapse, "measured": head_measured,
                   "how": "2 × the head's values" + (f" + 2 × the values of the map collapsing the streams ({collapse_path})" if collapse_path else "")
                          + "; measured: torch.utils.flop_counter on the head" + (" and on that map" if collapse_path else "")})
    explained = sum(c["measured"] for c in checks if c["figure"].startswith("FLOPs"))
    checks.append({"figure": "FLOPs of the whole token", "formula": explained, "measured": int(counts.get("Global", 0)),
                   "how": "the blocks and the head account for every FLOP counted in the forward pass"})
    return checks



def _keys_and_values_multiplied(model, ids, blocks) -> list[int]:
    """Per block, the values of the right-hand operands of the matrix products its attention computes on the
    prompt (the keys its scores read and the values its pattern mixes), per sequence: what a cache would hold
    for a class that keeps none."""
    import torch

    from atlas.model.roles import block_roles

    held = [0] * len(blocks)
    original = torch.matmul
    current: list[int] = []

    def counting(a, b, *args, **kwargs):
        if current:
            held[current[-1]] += b.numel() // ids.shape[0]
        return original(a, b, *args, **kwargs)

    handles = []
    for i, block in enumerate(blocks):
        roles = block_roles(block)
        if roles.attention:
            attention = block.get_submodule(roles.attention)
            handles.append(attention.register_forward_pre_hook(lambda m, a, i=i: (current.append(i), None)[1]))
            handles.append(attention.register_forward_hook(lambda m, a, o: (current.pop(), None)[1]))
    torch.matmul = counting
    try:
        with torch.no_grad():
            model(ids)
    finally:
        torch.matmul = original
        for h in handles:
            h.remove()
    return held


def _model_checks(run, blocks, terms, counts, charges, zero_slots, block_prefix: str, recomputed: int = 0) -> list[dict[str, Any]]:
    """The model figure of each block (atlas.cost.model_figure) at the tiny sizes, against the block's count
    with the hooks' charges in place of what transformers' eager code does beyond the model."""
    from atlas.inputs.layers import layer_config
    from atlas.model.roles import block_roles

    root = type(run.model).__name__
    names = {id(m): f"{root}.{name}" for name, m in run.model.named_modules() if name}
    context = run.ids.shape[1] + 1
    checks = []
    for i, (block, t) in enumerate(zip(blocks, terms)):
        m = model_terms(block, block_roles(block), layer_config(run.config, i), t)
        idle, idle_words = zero_slots.idle_flops(i)
        less, words = charges.block(i, counts, names)
        if recomputed:  # the class keeps no cache: the earlier queries' pairs with the new key are the eager code's, not the model's
            less += t.flops_per_key * recomputed
            words = ", ".join(w for w in (words, f"the {recomputed} earlier queries scored again against the new key, as the class "
                                                  "keeps no cache") if w)
        checks.append({
            "figure": f"model FLOPs of block {i}",
            "formula": m["fixed"] + terms_flops(m["terms"], context) - idle,
            "measured": int(counts.get(f"{block_prefix}.{i}", 0)) - less,
            "how": f"{m['formula']}, at token {context}{idle_words}; measured: torch.utils.flop_counter on the block, with hooks "
                   "charging each expert only for the tokens routed to it, kv_b_proj for the new latent, and attention for the "
                   "keys whose weight is not zero" + (f" ({words})" if words else " (nothing to charge apart: the model's figure is what runs)"),
        })
        if m.get("absorbed") and i == 0:
            checks += absorbed_checks(block, block_roles(block), run.config, m, context)
    return checks



def absorbed_checks(block, roles, config, m: dict[str, Any], context: int) -> list[dict[str, Any]]:
    """Weight absorption on one latent attention of the tiny model, with its own kv_b_proj and seeded queries
    and latents at ``context`` positions: the absorbed arithmetic's FLOPs (torch.utils.flop_counter) against
    the absorbed terms, and its output against the expanded heads' output."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from atlas.cost.model_figure import attention_modules

    attention = attention_modules(block, roles)[0]
    rank, rope, nope = config.kv_lora_rank, config.qk_rope_head_dim, config.qk_nope_head_dim
    w = attention.kv_b_proj.weight.detach().float()  # [heads × (nope + v), rank]
    heads = w.shape[0] // (nope + config.v_head_dim)
    w = w.view(heads, nope + config.v_head_dim, rank)
    w_uk, w_uv = w[:, :nope], w[:, nope:]
    first = m["absorbed"]["terms"][0]
    context = keys_seen(first, context)  # the latents the token attends to (an indexer's choice, a window)
    g = torch.Generator().manual_seed(0)
    q_nope, q_rope = torch.randn(heads, nope, generator=g), torch.randn(heads, rope, generator=g)
    latents, k_rope = torch.randn(context, rank, generator=g), torch.randn(context, rope, generator=g)
    with torch.no_grad():
        keys, values = torch.einsum("hdr,nr->hnd", w_uk, latents), torch.einsum("hvr,nr->hnv", w_uv, latents)
        expanded = torch.softmax(torch.einsum("hd,hnd->hn", q_nope, keys) + q_rope @ k_rope.T, -1)
        expanded = torch.einsum("hn,hnv->hv", expanded, values)
        with FlopCounterMode(display=False) as counter:
            q_latent = torch.einsum("hd,hdr->hr", q_nope, w_uk)  # W_UK folded into the query
            weights = torch.softmax(q_latent @ latents.T + q_rope @ k_rope.T, -1)  # scores over latents and the rotary key
            absorbed = torch.einsum("hr,hvr->hv", weights @ latents, w_uv)  # the weighted latents, then W_UV
    per_attention = len(attention_modules(block, roles))
    formula = 2 * w.numel() + first["per_key"] // per_attention * context
    differ = int((~torch.isclose(absorbed, expanded, rtol=1e-4, atol=1e-5)).sum())
    return [
        {"figure": "model FLOPs with weight absorption, one latent attention of block 0", "formula": formula,
         "measured": int(counter.get_total_flops()),
         "how": f"2 × kv_b_proj's {grouped(w.numel())} values (W_UK into the query, W_UV onto the output) + the absorbed FLOPs per "
                f"latent × {context} latents; measured: torch.utils.flop_counter on the absorbed arithmetic with this block's kv_b_proj"},
        {"figure": "outputs that differ between weight absorption and expanded heads, block 0", "formula": 0, "measured": differ,
         "how": f"the same seeded query and {context} latents through both; values compared to a relative 1e-4"},
    ]



class _ZeroSlots:
    """The routing choices of one token at each block whose experts include zero-computation ones
    (LongCat-Flash): a slot routed to such an expert multiplies no matrix, so the top-k rule, which
    counts every slot as a real expert, is that many experts' FLOPs above the token's own."""

    def __init__(self, experts_by_block):
        self.experts = experts_by_block  # block index -> (experts module, real experts, FLOPs of one expert)
        self.chosen: dict[int, Any] = {}
        self.handles: list = []

    def start(self):
        for i, (module, _, _) in self.experts.items():
            self.handles.append(module.register_forward_hook(lambda m, args, out, i=i: self.chosen.__setitem__(i, args[1])))

    def stop(self):
        for h in self.handles:
            h.remove()

    def idle_flops(self, block: int) -> tuple[int, str]:
        if block not in self.experts or block not in self.chosen:
            return 0, ""
        _, real, per_expert = self.experts[block]
        zero = int((self.chosen[block] >= real).sum())
        if not zero:
            return 0, "; every routing slot chose a real expert"
        return zero * per_expert, (f" − {zero} routing slot{'s' if zero != 1 else ''} sent to a zero-computation expert × "
                                   f"{grouped(per_expert)} (one expert's matrices, which such a slot never multiplies)")



def _zero_expert_slots(blocks) -> _ZeroSlots:
    """The blocks whose experts module allocates more gate rows than it has down projections: the rest
    are zero-computation experts, chosen by the router like the others."""
    from atlas.model.roles import block_roles

    found = {}
    for i, block in enumerate(blocks):
        roles = block_roles(block)
        experts = experts_module(block, roles)
        down = getattr(experts, "down_proj", None) if experts is not None else None
        gate_up = getattr(experts, "gate_up_proj", None) if experts is not None else None
        if down is None or gate_up is None or gate_up.shape[0] <= down.shape[0]:
            continue
        per_expert = 2 * sum(p.numel() // p.shape[0] for p in (gate_up, down))
        found[i] = (experts, down.shape[0], per_expert)
    return _ZeroSlots(found)



def cache_layer_values(layer) -> int:
    """Values one layer of transformers' cache holds: keys and values, or a state-space layer's
    convolution and recurrent states, or nothing (a layer without attention or state)."""
    def listed(held):
        return list(held.values()) if isinstance(held, dict) else list(held or [])

    states = listed(getattr(layer, "conv_states", None)) + listed(getattr(layer, "recurrent_states", None))
    held = int(sum(s.numel() for s in states if s is not None))  # a layer holding both (Falcon-H1's) counts both
    for attr in ("compressed_kv", "buffer_kv", "buffer_gate", "overlap_kv", "overlap_gate"):  # pooled keys and their windows (DeepSeek-V4)
        held += int(sum(t.numel() for t in (getattr(layer, attr, None) or {}).values() if t is not None))
    if getattr(layer, "keys", None) is not None and getattr(layer, "values", None) is layer.keys:
        return int(layer.keys.numel()) + held  # one tensor serves as keys and values (DeepSeek-V4's compressed blocks)
    if getattr(layer, "keys", None) is not None:
        indexer_keys = getattr(layer, "indexer_keys", None)  # a sparse attention's indexer keys, one per position
        return int(layer.keys.numel() + layer.values.numel() + (indexer_keys.numel() if indexer_keys is not None else 0)) + held
    return held



def held_on_modules(block) -> int:
    """Values a block's modules keep as plain tensor attributes between calls (not parameters or buffers):
    the states RecurrentGemma's recurrent block holds itself instead of in transformers' cache."""
    import torch

    total = 0
    for m in block.modules():
        own = {id(t) for t in list(m.parameters(recurse=False)) + list(m.buffers(recurse=False))}
        total += sum(v.numel() for v in vars(m).values() if isinstance(v, torch.Tensor) and id(v) not in own)
    return total
