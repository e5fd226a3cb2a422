"""The preview's record (facts["preview"]), and the tiny run set against the pinned checkpoint.

The record gathers the run's measurements and data; the comparison looks at the same aspects of both
configs (blocks, widths, heads, experts, routing, windows, rotary settings ...), each in words at each
one's own values: those whose words differ are the run's differences, the others what it keeps, and
the run's description is written from them.
"""

from __future__ import annotations

from typing import Any

from atlas.model.block_kinds import block_kinds, kinds_of_blocks, layer_types
from atlas.model.identities import identities, selection_changes
from atlas.model.introspect import find_block_list, num_blocks
from atlas.model.preview import PROMPT, SEED, PreviewRun, conditions
from atlas.model.preview_data import (
    captured_shapes,
    missing_on_the_run,
    preview_tensors,
    tiny_block_sizes,
    tiny_sizes,
    uncaptured,
    weight_histograms,
)
from atlas.model.sizes import block_sizes, checkpoint_sizes, mamba_stack
from atlas.numbers import ordinal


def parallel_at_checkpoint(preview: PreviewRun, checkpoint_kinds: list[dict[str, Any]]) -> list[int]:
    """The checkpoint's blocks of the kinds whose blocks the run measured parallel (facts["block_kinds"]:
    the tiny model keeps the checkpoint's kinds, by label)."""
    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    labels = {k.label for k in block_kinds(blocks, layer_types(preview.config)) if set(k.indices) <= set(preview.eager.parallel)}
    return sorted(i for k in checkpoint_kinds if k["label"] in labels for i in k["indices"])


def preview_facts(preview: PreviewRun, family, checkpoint_config=None, checkpoint_kinds: list[dict] | None = None) -> dict[str, Any]:
    """facts["preview"]. The tiny run is compared with the pinned checkpoint: ``checkpoint_config``
    (its transformers config) and ``checkpoint_kinds`` (facts["block_kinds"]); where they are not
    given they are computed here from the pinned checkpoint."""
    if checkpoint_config is None or checkpoint_kinds is None:
        checkpoint_config, checkpoint_kinds = _pinned_shape(family)
    measured, skipped = identities(preview, dict(family.not_applicable))
    from atlas.inputs.layers import global_config

    sizes = checkpoint_sizes(global_config(preview.config))  # the whole configuration's own; block_sizes has the others
    differences, kept = compare(preview.config, tiny_kinds(preview), checkpoint_config, checkpoint_kinds)
    return {
        "description": _description(preview, differences, kept),
        "differences": differences,
        "kept": kept,
        "weights": preview.weights,
        "seed": SEED,
        "prompt": PROMPT,
        "tokens": preview.tokens,
        "token_labels": preview.labels,
        "config": {"num_hidden_layers": num_blocks(preview.config), **sizes, **_tiny_raw(preview.config)},
        "implementations": {"default": preview.default_implementations, "eager": preview.eager.implementations},
        "conditions": conditions(preview),
        "identities": measured,
        "not_applicable": skipped,
        "selection_changed_by_bias": selection_changes(preview),
        "sizes": tiny_sizes(preview),
        **({"block_sizes": per_block} if (per_block := tiny_block_sizes(preview)) else {}),
        "shapes": captured_shapes(preview),
        "missing": missing_on_the_run(preview),
        "uncaptured": uncaptured(preview),
        "tensors": preview_tensors(preview),
        "weight_histograms": weight_histograms(preview),
    }


def _description(preview: PreviewRun, differences: list[dict[str, str]], kept: list[dict[str, str]]) -> str:
    """The run in words, its departures from the checkpoint written from ``differences`` and what it
    keeps from ``kept``: every size named here is the run's own or the checkpoint's, never typed."""
    model = type(preview.model).__name__
    if preview.weights is not None:
        text = (f"A real forward pass of transformers' {model} on CPU with the weights of the local checkpoint "
                f"{preview.weights}; the prompt is read as UTF-8 bytes.")
        theirs = "the pinned checkpoint"
    else:
        text = (f"A real forward pass of transformers' {model} on CPU at a tiny config derived from the pinned one, "
                "on seeded random weights, not the checkpoint's; the prompt is read as UTF-8 bytes.")
        theirs = "the checkpoint"
    dtype = str(next(preview.model.parameters()).dtype).removeprefix("torch.")
    text += (f" It runs in {dtype} throughout, the casts to float32 that transformers' code makes included (widened as it runs),"
             f" so every equation and identity below is held near {dtype}'s own rounding error.")
    if differences:
        text += f" Where it differs from {theirs}: " + "; ".join(
            f"{d['tiny']} ({theirs}: {d['checkpoint']})" for d in differences) + "."
    else:
        text += f" It matches {theirs} in every respect compared here."
    if kept:
        text += f" The same as {theirs}: " + "; ".join(k["value"] for k in kept) + "."
    return text


# --- the tiny run against the checkpoint -----------------------------------------------------------


def tiny_kinds(preview: PreviewRun) -> list[dict[str, Any]]:
    """The tiny model's block kinds, grouped by the same rule as the checkpoint's: [{label, count}]."""
    _, blocks = find_block_list(preview.model, num_blocks(preview.config))
    return [{"label": k.label, "count": len(k.indices), "mixture": k.mixture} for k in kinds_of_blocks(blocks, preview.config)]


def _pinned_shape(family) -> tuple[Any, list[dict[str, Any]]]:
    """The pinned checkpoint's transformers config and block kinds, from its meta-device model."""
    from atlas.inputs.checkpoint import build_on_meta, load_pinned, transformers_config

    pinned = load_pinned(family.checkpoint, section=family.config_section)
    config = transformers_config(family, pinned)
    _, blocks = find_block_list(build_on_meta(family, config, pinned.config_path), num_blocks(config))
    return config, [{"label": k.label, "count": len(k.indices), "mixture": k.mixture} for k in kinds_of_blocks(blocks, config)]


def _count(n: int, label: str) -> str:
    return f"{n:,} {label}{'' if n == 1 else 's'}"


def _blocks_words(config, kinds: list[dict[str, Any]]) -> str:
    words = _count(num_blocks(config), "block")
    if len(kinds) > 1:
        parts = [_count(k["count"], k["label"]) for k in kinds]
        words += ": " + ", ".join(parts[:-1]) + " and " + parts[-1]
    return words


def _groups_words(groups: int, kept: int | None) -> str:
    if groups == 1:
        return "a single expert group"
    return f"the best {kept} of {groups} expert groups"


def _per_block_words(config, size: str, label: str) -> str:
    """A size that differs between blocks, in words: the most common value, then the others with the
    blocks that have them ("16 key/value heads (4 on 10 of 60 blocks)")."""
    from collections import Counter

    n = config.num_hidden_layers
    counts = Counter(block_sizes(config, i)[size] for i in range(n))
    (common, _), *others = counts.most_common()
    first = _count(common, label) if label == "key/value head" else f"{common:,} {label}"
    rest = ", ".join(f"{v:,} on {c} of {n} blocks" for v, c in others)
    return f"{first} ({rest})" if rest else first


def _aspects(config, kinds: list[dict[str, Any]]) -> dict[str, str | None]:
    """What the comparison looks at, each in words at this config's values (None where it has none)."""
    from atlas.inputs.layers import heterogeneous
    from atlas.model.config_words import settings_words

    s = checkpoint_sizes(config)
    get = lambda key: getattr(config, key, None)  # noqa: E731 - a config may lack any of these keys
    moe_width, experts = get("moe_intermediate_size"), s["num_experts"]
    if kinds and not any(k["mixture"] for k in kinds):
        # expert settings a config class keeps by default where the model builds no mixture (Nemotron-H's) describe nothing
        moe_width = experts = None
    # sizes a config keeps in sub-configs (DBRX's ffn_config and attn_config)
    ffn_sub, attn_sub = get("ffn_config"), get("attn_config")
    if moe_width is None and experts and ffn_sub is not None:
        moe_width = getattr(ffn_sub, "ffn_hidden_size", None)
    clip = get("clip_qkv") or (getattr(attn_sub, "clip_qkv", None) if attn_sub is not None else None)
    p_norm = getattr(ffn_sub, "moe_normalize_expert_weights", None) if ffn_sub is not None and experts else None
    if isinstance(moe_width, list):  # one width per layer (Hunyuan): words for it only where every layer agrees
        moe_width = moe_width[0] if moe_width and len(set(moe_width)) == 1 else None
    mlp_label = "dense MLP" if moe_width else ("expert" if experts else "MLP")
    if not s["num_heads"] and not heterogeneous(config):  # no attention at all (Mamba's, RWKV's class): no heads to describe
        heads = head_width = None
    elif None in (s["num_kv_heads"], s["head_dim"], s["qk_head_dim"]):  # sizes of their own on some blocks (Gemma 4)
        heads = f"{_count(s['num_heads'], 'query head')}, {_per_block_words(config, 'num_kv_heads', 'key/value head')}"
        head_width = _per_block_words(config, "head_dim", "dims per head")
    else:
        heads = f"{_count(s['num_heads'], 'query head')}, {_count(s['num_kv_heads'], 'key/value head')}"
        head_width = (f"{s['qk_head_dim']} query/key and {s['head_dim']} value dims per head" if s["qk_head_dim"] != s["head_dim"]
                      else f"{s['head_dim']} dims per head")
    latent = None
    if get("kv_lora_rank"):
        query = f"a {get('q_lora_rank'):,}-wide query latent" if get("q_lora_rank") else "no query latent"
        latent = f"{query}, a {get('kv_lora_rank'):,}-wide key/value latent"
    rope = get("rope_parameters")
    softcaps = [f"{name} {get(key):g}" for key, name in (("attn_logit_softcapping", "attention softcap"),
                                                          ("final_logit_softcapping", "logit softcap")) if get(key)]
    return {
        "blocks": _blocks_words(config, kinds),
        "width": f"a residual width of {s['hidden_size']:,}",
        "heads": heads,
        "head width": head_width,
        "latents": latent,
        # (where intermediate_size only names the experts' width, as DeepseekV4Config maps it, there is no dense MLP to describe)
        "MLP width": (f"{'channel-mixing' if isinstance(get('rescale_every'), int) else mlp_label} hidden width {s['intermediate_size']:,}" if s["intermediate_size"] and not mamba_stack(config)
                      and getattr(type(config), "attribute_map", {}).get("intermediate_size") != "moe_intermediate_size" else None),
        # a Mamba stack's intermediate_size is its mixer's inner width: there is no MLP
        "mixer width": f"a mixer inner width of {s['intermediate_size']:,}" if s["intermediate_size"] and mamba_stack(config) else None,
        "time-mixing width": (f"a time-mixing width of {get('attention_hidden_size'):,}"
                              if isinstance(get("rescale_every"), int) and get("attention_hidden_size") else None),
        "rescaling": (f"the stream halved after every {ordinal(get('rescale_every'))} block in eval mode"
                      if isinstance(get("rescale_every"), int) and get("rescale_every") > 0 else None),
        "expert width": f"expert hidden width {moe_width:,}" if moe_width else None,
        "routed experts": f"top-{s['top_k']} of {experts:,} routed experts" if experts else None,
        "shared experts": _count(get("n_shared_experts"), "shared expert") if experts and get("n_shared_experts") else None,
        "expert groups": _groups_words(get("n_group"), get("topk_group")) if experts and get("n_group") else None,
        "renormalizing": (("the chosen weights renormalized" if get("norm_topk_prob") else "the chosen weights not renormalized")
                          if experts and get("norm_topk_prob") is not None else None),
        "weight norm": f"the chosen weights divided by their {p_norm:g}-norm" if p_norm else None,
        "QKV clip": f"the fused query-key-value projection clamped to ±{clip:g}" if clip else None,
        "experts clamp": f"the experts' gate and up projections clamped at {get('swiglu_limit'):g}" if get("swiglu_limit") else None,
        "scaling factor": f"a routed scaling factor of {get('routed_scaling_factor'):g}" if experts and get("routed_scaling_factor") else None,
        # a window no shorter than the context is no window (Phi-3.5-MoE's): every position stays in view
        "window": (f"a sliding window of {get('sliding_window'):,} positions" if get("sliding_window")
                   and not (isinstance(get("max_position_embeddings"), int) and get("sliding_window") >= get("max_position_embeddings")) else None),
        "chunks": f"attention chunks of {get('attention_chunk_size'):,} positions" if get("attention_chunk_size") else None,
        "query temperature": (f"a query temperature that steps up every {get('floor_scale'):,} positions (attn_scale {get('attn_scale'):g})"
                              if get("attn_temperature_tuning") and get("floor_scale") and get("attn_scale") is not None else None),
        # settings a model that applies no rotation (position_embedding_type "nope", Granite 4.0-H's; Zamba2's shared
        # attention without use_mem_rope) never uses
        "rotary": (f"rotary settings {settings_words(rope)}" if isinstance(rope, dict) and rope
                   and get("position_embedding_type") in (None, "rope") and get("use_mem_rope") is not False else None),
        "softcaps": ", ".join(softcaps) if softcaps else None,
        "vocabulary": f"a vocabulary of {s['vocab_size']:,}",
        **_stream_aspects(config),
    }


def _stream_aspects(config) -> dict[str, str | None]:
    """DeepSeek-V4's own aspects: residual streams, pooled keys, output groups, the SwiGLU clamp, the
    indexer's keep (nothing for a config without them)."""
    get = lambda key: getattr(config, key, None)  # noqa: E731
    rates = get("compress_rates")
    if not isinstance(get("hc_mult"), int) or not isinstance(rates, dict):
        return {}
    return {
        "residual streams": f"{get('hc_mult')} residual streams mixed over {get('hc_sinkhorn_iters')} Sinkhorn rounds",
        "pooled keys": "a key pooled every " + " or every ".join(f"{r:,}" for r in sorted(set(rates.values()))) + " positions",
        "indexer keep": f"the indexer keeping {get('index_topk'):,} pooled keys" if get("index_topk") else None,
        "output groups": f"heads projected in {get('o_groups')} groups to {get('o_lora_rank'):,} values each",
        "SwiGLU clamp": f"gate and up projections clamped at {get('swiglu_limit'):g}" if get("swiglu_limit") else None,
    }


def compare(tiny_config, tiny_kinds: list[dict[str, Any]], checkpoint_config, checkpoint_kinds: list[dict[str, Any]]
            ) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(differences, kept): each aspect the two configs both have, in words at each one's values;
    those whose words differ are differences ({what, tiny, checkpoint}), the others kept ({what, value})."""
    tiny, checkpoint = _aspects(tiny_config, tiny_kinds), _aspects(checkpoint_config, checkpoint_kinds)
    differences, kept = [], []
    for what in tiny:
        mine, theirs = tiny[what], checkpoint[what]
        if mine is None and theirs is None:
            continue
        if mine == theirs:
            kept.append({"what": what, "value": mine})
        else:
            differences.append({"what": what, "tiny": mine or f"no {what}", "checkpoint": theirs or f"no {what}"})
    return differences, kept


TINY_RAW_KEYS = (
    "first_k_dense_replace", "n_routed_experts", "num_local_experts", "num_experts", "num_experts_per_tok", "n_group",
    "topk_group", "routed_scaling_factor", "norm_topk_prob", "n_shared_experts", "moe_intermediate_size", "q_lora_rank",
    "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "rope_interleave", "rope_parameters",
    "initializer_range", "index_topk", "index_n_heads", "index_head_dim",
    "hc_mult", "o_groups", "o_lora_rank", "swiglu_limit",  # DeepSeek-V4's streams, output groups and SwiGLU clamp
    "rescale_every",  # RWKV's halving of the stream in eval mode
)


def _tiny_raw(config) -> dict[str, Any]:
    return {k: getattr(config, k) for k in TINY_RAW_KEYS if getattr(config, k, None) is not None}
