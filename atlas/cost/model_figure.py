"""The model's own FLOPs of a token, beside transformers' eager execution of it (atlas.cost.blocks).

The two differ where transformers' code does work the architecture does not ask for:
- dense dispatch (Llama 4): its experts run on every token, the experts not chosen on a zero row; the
  model multiplies a token by the top-k experts it is sent to, and only those;
- latent attention (MLA): transformers expands every cached latent with kv_b_proj at every step; the
  model expands the new token's latent once (a cache of expanded heads), or, with weight absorption,
  folds kv_b_proj into the query and the output and attends over the latents themselves;
- keys a token does not see: a chunked block's earlier chunks, the keys a lightning indexer leaves out
  (transformers multiplies them all and masks the result).

A kind's model figure is a fixed part and a list of attention terms, each "FLOPs per key × the keys it
sees at context C" (keys_seen); the build, the check and static/cost.js evaluate the same expression.
"""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.cost.coefficients import attention_flops_per_key, experts_module, indexer_flops_per_key
from atlas.model.structure import value_scored_mask

NO_ATTENTION = ("linear", "state", "recurrent", "none", "full_and_state")


def term(per_key: int, cap: int | None = None, every: int = 1, chunk: int | None = None) -> dict[str, Any]:
    """FLOPs per key × the keys a token sees: one key every ``every`` positions, within its own chunk
    of ``chunk`` keys, at most ``cap`` of them."""
    return {"per_key": per_key, "cap": cap, "every": every, "chunk": chunk}



def keys_seen(t: dict[str, Any], context: int) -> int:
    """Keys a token at position ``context`` (counting itself) sees under term ``t``."""
    keys = context // t["every"]
    if t["chunk"] and keys:
        keys = (keys - 1) % t["chunk"] + 1  # the earlier positions of its own chunk, and itself
    return min(keys, t["cap"]) if t["cap"] else keys



def terms_flops(terms: list[dict[str, Any]], context: int) -> int:
    return sum(t["per_key"] * keys_seen(t, context) for t in terms)



def model_flops_at(model: dict[str, Any], context: int, absorbed: bool = False) -> int:
    """The model's FLOPs of one token at ``context``: facts["cost"]["flops"]["model"]; with weight
    absorption where a kind has it (latent attention), else the expansion."""
    total = model["head"]["flops"]
    for k in model["kinds"]:
        terms = k["absorbed"]["terms"] if absorbed and k.get("absorbed") else k["terms"]
        total += k["count"] * (k["fixed"] + terms_flops(terms, context))
    return total



def attention_modules(block, roles) -> list:
    """The block's attention modules: one, or each of a list (LongCat-Flash's two)."""
    if roles.sublayer_lists and "." in roles.attention:
        return list(block.get_submodule(roles.attention.rpartition(".")[0]))
    return [block.get_submodule(roles.attention)]



def _term_words(t: dict[str, Any]) -> str:
    what = f"{grouped(t['per_key'])} per key"
    if t["every"] > 1:
        what = f"{grouped(t['per_key'])} per pooled key (one every {grouped(t['every'])} positions)"
    if t["chunk"]:
        what += f", the keys of its own chunk of {grouped(t['chunk'])}"
    if t["cap"]:
        what += f", at most {grouped(t['cap'])}"
    return what



def model_terms(block, roles, config, eager) -> dict[str, Any]:
    """The model figure of one block: {"fixed", "terms", "formula"} and, for latent attention,
    "absorbed": {"terms", "formula"}; ``eager`` is the block's BlockTerms (transformers' execution)."""
    from atlas.model.sizes import checkpoint_sizes

    fixed, words = eager.flops_fixed, []
    if roles.dense_dispatch and eager.routed:
        top_k, n = eager.routed
        every = sum(p.numel() for p in experts_module(block, roles).parameters() if p.dim() >= 3)
        share = every * top_k // n
        fixed -= 2 * (every - share)
        words.append(f"the routed experts at the top-{top_k} share, 2 × {grouped(share)}, not every expert's 2 × {grouped(every)} "
                     "as transformers' dense dispatch multiplies them")
    if eager.attention in NO_ATTENTION or roles.attention is None:
        terms = [term(eager.flops_per_key, eager.keys_cap)] if eager.flops_per_key else []
        return {"fixed": fixed, "terms": terms, "formula": _formula(fixed, terms, words)}
    attentions = attention_modules(block, roles)
    sizes = checkpoint_sizes(config)
    n_att = len(attentions)
    first = attentions[0]
    absorbed = None
    if eager.attention == "compressed":  # DeepSeek-V4: one head of keys and values, a window, pooled keys
        heads, width = first.num_heads, first.head_dim
        attend = attention_flops_per_key(heads, width, width)
        terms = [term(attend, eager.window)]
        compressor = first.compressor
        indexer = getattr(compressor, "indexer", None)
        rate = compressor.compress_rate
        terms.append(term(attend, indexer.index_topk if indexer is not None else None, every=rate))
        if indexer is not None:
            terms.append(term(2 * indexer.num_heads * indexer.head_dim, every=rate))
        return {"fixed": fixed, "terms": terms, "formula": _formula(fixed, terms, words)}
    heads, qk, v = sizes["num_heads"], sizes["qk_head_dim"], sizes["head_dim"]
    attend = n_att * attention_flops_per_key(heads, qk, v)
    cap = eager.keys_cap if eager.attention == "sliding" else None
    chunk = eager.window if eager.attention == "chunked" else None
    indexer = getattr(first, roles.indexer) if roles.indexer else None
    if indexer is not None:
        cap = indexer.index_topk
    scored = value_scored_mask(first) if n_att == 1 else None
    if scored:  # a mask scored from the values (Doge): each key scored once, as it enters; at most keep_window_size keys seen
        keep, scorer = getattr(first, "keep_window_size", None), first.get_submodule(scored[0]).weight.numel()
        cap = keep if isinstance(keep, int) and keep > 0 and (cap is None or keep < cap) else cap
        fixed += 2 * scorer
        words.append(f"{scored[0]} once, on the new token's values: 2 × {grouped(scorer)}; each query keeps at most "
                     f"{grouped(keep)} keys (keep_window_size), the rest masked")
    terms = [term(attend, cap, chunk=chunk)]
    if indexer is not None:
        # its sizes read from its matrices, as the eager rule reads them: the key projection's and the head weights' rows
        terms.append(term(n_att * indexer_flops_per_key(indexer.weights_proj.weight.shape[0], indexer.wk.weight.shape[0])))
    if eager.attention == "latent":
        expand = sum(a.kv_b_proj.weight.numel() for a in attentions)
        fixed += 2 * expand
        words.append(f"kv_b_proj once, on the new token's latent: 2 × {grouped(expand)}")
        rank, rope = config.kv_lora_rank, config.qk_rope_head_dim
        # absorbed: the query's nope part through W_UK (rank wide), scores against the latent and the shared
        # rotary key, the weights times the latent, then W_UV: kv_b_proj's values once, as above
        per_latent = n_att * (2 * heads * (rank + rope) + 2 * heads * rank)
        a_terms = [term(per_latent, cap, chunk=chunk)] + terms[1:]
        absorbed = {"terms": a_terms,
                    "formula": _formula(fixed, a_terms, words[:-1] + [
                        f"kv_b_proj folded into the query (W_UK) and the output (W_UV): 2 × {grouped(expand)}, "
                        f"attention over the latents: 2 × {heads} heads × ({grouped(rank)} + {grouped(rope)}) scores + 2 × {heads} heads × "
                        f"{grouped(rank)} values = {grouped(per_latent // n_att)} per key" + (f", × {n_att} attentions" if n_att > 1 else "")])}
    out = {"fixed": fixed, "terms": terms, "formula": _formula(fixed, terms, words)}
    if absorbed:
        out["absorbed"] = absorbed
    return out



def _formula(fixed: int, terms: list[dict[str, Any]], words: list[str]) -> str:
    text = f"{grouped(fixed)} fixed" + (f" ({'; '.join(words)})" if words else "")
    if terms:
        text += "; attention: " + " + ".join(_term_words(t) for t in terms)
    return text
