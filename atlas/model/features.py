"""The architecture's abbreviations (MLA, GQA, MoE, SWA, FP8, RoPE, ...) derived from the facts.

No family declares these: each is found in what the build computed (the module tree, the block
kinds, the head counts, config.json's quantization_config), and each comes with its evidence in
words at the checkpoint's own values, so a reader (and the search box) can see why it applies.
``facts["features"]`` is the list of {abbreviation, name, evidence}, in the order of RULES.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from atlas.model.block_kinds import index_ranges
from atlas.model.roles import POSITION_EMBEDDING_NAMES

ROTARY_LINE = re.compile(r"^\((?P<name>[\w.-]+)\): (?P<cls>\w*RotaryEmbedding)\(")


def blocks_not_rotating(facts: dict[str, Any]) -> list[int]:
    """Blocks whose attention is handed the rotary angles and applies none, as their proofs measured
    (the chain without rotation is the one that reproduces them: Cohere 2's global layers)."""
    components = facts.get("equations", {}).get("components", {})
    found = []
    for kind in facts["block_kinds"]:
        prefix = kind["id"] + "."
        if any(cid.startswith(prefix) and c.get("facts", {}).get("rotary_layout", {}).get("value") == "not_applied"
               for cid, c in components.items()):
            found += kind["indices"]
    return sorted(found)


def _module_lines(facts: dict[str, Any]):
    for line in facts["printout"]:
        yield line["path"], line["text"]


def _latent_attention(facts):
    raw = facts["config"]["raw"]
    modules = sorted({path for path, _ in _module_lines(facts) if path.endswith(".kv_a_proj_with_mqa")})
    rank = raw.get("kv_lora_rank")
    if not modules and not rank:
        return None
    parts = []
    if rank:
        parts.append(f"keys and values are expanded from a {rank:,}-wide latent per token (kv_lora_rank)")
    if modules:
        parts.append(f"projected into it by {_generic(modules[0], facts)}")
    return ", ".join(parts)


def _sparse_attention(facts):
    """A lightning indexer that keeps index_topk positions per query (DeepSeek Sparse Attention)."""
    keep = facts["config"]["raw"].get("index_topk")
    modules = sorted({path for path, _ in _module_lines(facts) if path.rpartition(".")[2] == "indexer"})
    if not (modules and isinstance(keep, int)):
        return None
    return (f"a lightning indexer ({_generic(modules[0], facts)}) scores the earlier positions of each query and the "
            f"attention reads only the {keep:,} best (index_topk)")


def _grouped_query(facts):
    heads, kv = _heads(facts)
    if 1 < kv < heads:
        words = f"{kv} key/value heads serve {heads} query heads, {heads // kv} each"
        others = _other_kv_heads(facts)
        if others:  # blocks built with other counts (Gemma 4's global blocks)
            words += "; " + "; ".join(f"{n} key/value heads serve them on blocks {index_ranges(blocks)}, {heads // n} each" if n > 1
                                      else f"one key/value head serves them on blocks {index_ranges(blocks)}"
                                      for n, blocks in others.items())
        return words
    return None


def _other_kv_heads(facts) -> dict[int, list[int]]:
    """Key/value head counts of blocks built with their own (facts.config.block_sizes), by count."""
    found: dict[int, list[int]] = {}
    for block, own in sorted((facts["config"].get("block_sizes") or {}).items(), key=lambda kv: int(kv[0])):
        if "num_kv_heads" in own:
            found.setdefault(own["num_kv_heads"], []).append(int(block))
    return found


def _multi_query(facts):
    heads, kv = _heads(facts)
    if kv == 1 and heads > 1:
        return f"one key/value head serves all {heads} query heads"
    return None


def _mixture(facts):
    mixed = [k for k in facts["block_kinds"] if k["mixture"]]
    if not mixed:
        return None
    count = sum(k["count"] for k in mixed)
    words = f"{count} of {facts['model']['num_blocks']} blocks are mixtures of experts"
    sizes = (facts.get("support") or {}).get("sizes") or {}
    if sizes.get("num_experts") and sizes.get("top_k"):
        words += f", each token sent to {sizes['top_k']} of {sizes['num_experts']} routed experts"
    return words


def _sliding_window(facts):
    sliding = [k for k in facts["block_kinds"] if k["attention_type"] == "sliding_attention"]
    if not sliding:
        return None
    count = sum(k["count"] for k in sliding)
    indices = sorted(i for k in sliding for i in k["indices"])
    window = facts["config"]["raw"].get("sliding_window")
    words = f"{count} of {facts['model']['num_blocks']} blocks attend within a sliding window"
    if isinstance(window, int) and not isinstance(window, bool):
        words += f" of {window:,} positions"
    spans = index_ranges(indices)
    # The block numbers are named where they read at a glance; an alternation of many spans is not.
    return words + (f" (blocks {spans})" if spans.count(",") < 4 else "")


def _quantized(method: str) -> Callable[[dict], str | None]:
    def rule(facts):
        quantization = facts["config"]["raw"].get("quantization_config")
        if not isinstance(quantization, dict) or quantization.get("quant_method") != method:
            return None
        return f'config.json\'s quantization_config has quant_method "{method}": the released files store the weights that way'

    return rule


def _rotary(facts):
    found = [(path, m.group("cls")) for path, text in _module_lines(facts) if (m := ROTARY_LINE.match(text))]
    if not found:
        return None
    return "; ".join(f"{path} ({cls}) turns queries and keys by position" for path, cls in found)


def _no_positions(facts):
    switched_off = facts.get("blocks_without_rotary")
    if switched_off:
        return f"blocks {index_ranges(switched_off)} apply no rotary embedding (no_rope_layers)"
    unused = blocks_not_rotating(facts)
    if unused:
        return (f"blocks {index_ranges(unused)} apply no rotary embedding: their attention is handed the angles and, "
                "as its proof measured on the preview run, turns neither queries nor keys")
    if _heads(facts)[0] == 0:  # no attention at all (Mamba's stack): nothing to give positions to, so no NoPE either
        return None
    has_table = any(path.rpartition(".")[2] in POSITION_EMBEDDING_NAMES for path, _ in _module_lines(facts))
    # or a table the model computes and reads itself (CTRL's pos_encoding), as the model's proof ran it
    has_table = has_table or facts.get("equations", {}).get("components", {}).get("model", {}).get("facts", {}).get(
        "positions", {}).get("value") == "sinusoidal"
    if _rotary(facts) is None and not has_table and not _alibi(facts):
        return "the model has neither a rotary embedding, nor ALiBi, nor a learned position table: no block is given positions"
    return None


def _alibi(facts):
    """Attention with linear biases: the slopes its proof checked, per attention (BLOOM's)."""
    components = facts.get("equations", {}).get("components", {})
    found = sorted(cid for cid, c in components.items() if c.get("facts", {}).get("alibi_slopes", {}).get("value"))
    if not found:
        return None
    slopes = components[found[0]]["facts"]["alibi_slopes"]["value"]
    return (f"{found[0]} adds to each head's scores its own slope times the key's position, {len(slopes)} slopes "
            "checked on the preview run; no position enters the stream")


def _heads(facts) -> tuple[int, int]:
    """Query and key/value heads; 0 and 0 on an attention-free stack (Mamba's), whose sizes name none."""
    sizes = facts["config"]["standardized"]
    return sizes.get("num_heads") or 0, sizes.get("num_kv_heads") or 0


def _generic(path: str, facts) -> str:
    """model.layers.0.self_attn.kv_a_proj_with_mqa -> model.layers.{i}.self_attn.kv_a_proj_with_mqa."""
    prefix = facts["model"]["block_path"] + "."
    if path.startswith(prefix):
        rest = path[len(prefix):].split(".", 1)
        return prefix + "{i}" + ("." + rest[1] if len(rest) > 1 else "")
    return path


# abbreviation, name, rule: the rule returns the evidence in words, or None where the feature is absent.
RULES: tuple[tuple[str, str, Callable[[dict], str | None]], ...] = (
    ("MLA", "multi-head latent attention", _latent_attention),
    ("DSA", "DeepSeek Sparse Attention", _sparse_attention),
    ("GQA", "grouped-query attention", _grouped_query),
    ("MQA", "multi-query attention", _multi_query),
    ("MoE", "mixture of experts", _mixture),
    ("SWA", "sliding-window attention", _sliding_window),
    ("FP8", "8-bit floating-point weights", _quantized("fp8")),
    ("MXFP4", "microscaling 4-bit floating-point weights", _quantized("mxfp4")),
    ("RoPE", "rotary position embedding", _rotary),
    ("ALiBi", "attention with linear biases", _alibi),
    ("NoPE", "no position embedding", _no_positions),
)


def derive(facts: dict[str, Any], no_rotary: list[int] | None = None) -> list[dict[str, str]]:
    """facts["features"]: every abbreviation whose rule finds evidence in the facts.

    ``no_rotary`` are the blocks a per-layer switch takes the rotary embedding away from
    (``atlas.model.block_kinds.blocks_without_rotary``), which the facts do not otherwise record."""
    facts = {**facts, "blocks_without_rotary": no_rotary}
    found = []
    for abbreviation, name, rule in RULES:
        evidence = rule(facts)
        if evidence:
            found.append({"abbreviation": abbreviation, "name": name, "evidence": evidence})
    return found
