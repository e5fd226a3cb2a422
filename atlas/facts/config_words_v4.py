"""config.json in words for DeepSeek-V4's keys: hyper-connections, compressed attention, grouped output
projection, hash routing, √softplus scores; and what DeepseekV4ForCausalLM does differently with keys
other models share (the indexer reads compressed entries, YaRN only on compressed blocks).

Words that hold only for the class are keyed on ``architectures`` (``_built_as``), never on a family name.
"""

from __future__ import annotations

from atlas.facts.config_words import EXPLAIN, _num, _plural, explains
from atlas.model.config_words.state_space import _built_as
from atlas.numbers import grouped

V4 = "DeepseekV4ForCausalLM"
RATE_NAMES = {0: "the sliding window alone"}  # any other entry m: "compressed by m"


def _indexed_ratio() -> int:
    """The compress_ratios entry DeepseekV4Config builds as compressed sparse attention, the blocks that
    run a lightning indexer, read from transformers' own table of entries (the others: the sliding
    window alone, and heavy compression without an indexer)."""
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import _COMPRESS_RATIO_TO_LAYER_TYPE

    (ratio,) = (r for r, kind in _COMPRESS_RATIO_TO_LAYER_TYPE.items() if kind == "compressed_sparse_attention")
    return ratio


@explains("hc_mult")
def _hc_mult(key, v, c):
    n = c.count("hc_mult")
    width = c.get_count("hidden_size")
    wide = f" of {grouped(width)}" if width else ""
    return (f"The residual is {_plural(n, 'parallel stream')}{wide}, not one: before each sublayer a hyper-connection "
            f"collapses them into the sublayer's input with a weight per stream, spreads the sublayer's output back over them, "
            f"and mixes the old streams with a {n} × {n} matrix")


@explains("hc_sinkhorn_iters")
def _hc_sinkhorn(key, v, c):
    n = c.count("hc_sinkhorn_iters")
    return (f"The hyper-connections' mixing matrix is a softmax per row, then its columns are divided by their sums and "
            f"{_plural(n - 1, 'more round')} divide rows then columns (Sinkhorn), which drives it towards doubly stochastic")


@explains("hc_eps")
def _hc_eps(key, v, c):
    return (f"Added to the hyper-connections' collapse weights and mixing matrix and to every sum they are divided by: "
            f"{_num(c.number('hc_eps'))}")


@explains("o_groups")
def _o_groups(key, v, c):
    g = c.count("o_groups")
    heads = c.get_count("num_attention_heads")
    per = f" of {_plural(heads // g, 'head')}" if heads and heads % g == 0 else ""
    return (f"The attention's output projection works in {_plural(g, 'group')}{per}: each group's heads are projected on "
            "their own to o_lora_rank values, and one map then mixes every group's values to the residual width")


@explains("o_lora_rank")
def _o_lora_rank(key, v, c):
    r = c.count("o_lora_rank")
    g = c.get_count("o_groups")
    total = f" ({grouped(g * r)} in all, the input of the last output map)" if g else ""
    return f"Each output group's heads are projected to {grouped(r)} values{total}"


@explains("num_hash_layers")
def _hash_layers(key, v, c):
    n = c.count("num_hash_layers")
    if n == 0:
        return "No block routes by token id: every mixture chooses its experts by score"
    blocks = "Block 0 chooses" if n == 1 else f"Blocks 0–{n - 1} choose"
    return (f"{blocks} each token's experts from a fixed table indexed by the token's id, not by score; the router's "
            "scores only weigh the experts the table gives")


@explains("compress_ratios")
def _compress_ratios(key, v, c):
    ratios = list(v) if isinstance(v, list) else []
    layers = c.get_count("num_hidden_layers")
    counts = ", ".join(f"{ratios[:layers].count(r)} {RATE_NAMES.get(r, f'compressed by {r}')}" for r in sorted(set(ratios)))
    words = (f"One entry per block: 0 keeps only the sliding window's keys, m adds one key per m positions, each a learned, "
             f"gated average of a window; of the {layers} blocks, {counts}")
    if layers is not None and len(ratios) > layers:
        words += f"; the {_plural(len(ratios) - layers, 'entry', 'entries')} past the last block {'is' if len(ratios) - layers == 1 else 'are'} the multi-token-prediction block's"
    indexed = _indexed_ratio()
    if indexed in ratios and c.raw.get("index_topk"):
        words += (f"; the blocks compressing by {indexed} also run a lightning indexer that keeps the index_topk "
                  "best compressed keys per query")
    return words


@explains("compress_rope_theta")
def _compress_rope_theta(key, v, c):
    return (f"The base of the rotary frequencies on the blocks that compress their keys (and of their compressors and "
            f"indexers): {_num(c.number('compress_rope_theta'))}; the sliding-window-only blocks use rope_theta")


@explains("expert_dtype")
def _expert_dtype(key, v, c):
    kind = c.text("expert_dtype")
    words = f'The routed experts\' weights are stored as "{kind}"'
    if kind == "fp4":
        words += ", 4-bit floats, not in the 8-bit format quantization_config names for the other matrices"
    return words


def _v4_notes() -> None:
    """Keys other models share, where DeepseekV4ForCausalLM uses them in its own way."""
    plain = {key: EXPLAIN[key] for key in ("index_n_heads", "index_head_dim", "index_topk", "scoring_func", "rope_scaling",
                                           "rope_theta", "topk_method", "sliding_window")}

    def index_n_heads(key, v, c):
        if not _built_as(c, V4):
            return plain[key](key, v, c)
        return (f"The indexer of each block compressing by {_indexed_ratio()} scores the compressed keys with {_plural(c.count(key), 'query head')}; "
                "each head's score passes a ReLU, and the heads are summed with weights computed from the query's token")

    def index_head_dim(key, v, c):
        if not _built_as(c, V4):
            return plain[key](key, v, c)
        d, rot = c.count(key), c.get_count("qk_rope_head_dim")
        words = f"Each of the indexer's query heads, and each compressed key it scores, is {grouped(d)} wide"
        if rot is not None and rot <= d:
            words += f"; the last {grouped(rot)} dims are rotated by position, the first {grouped(d - rot)} are not"
        return words

    def index_topk(key, v, c):
        if not _built_as(c, V4):
            return plain[key](key, v, c)
        k = c.count(key)
        return (f"On the blocks compressing by {_indexed_ratio()}, each query reads the {grouped(k)} compressed keys the indexer scores highest "
                f"(all of them while it has no more than {grouped(k)}), besides its sliding window")

    def scoring_func(key, v, c):
        if c.text(key) == "sqrtsoftplus":
            return ("The router scores each expert with the square root of softplus of its logit, each score on its own "
                    "(positive, and they need not sum to one)")
        return plain[key](key, v, c)

    def rope_scaling(key, v, c):
        words = plain[key](key, v, c)
        if _built_as(c, V4) and isinstance(v, dict):
            words += ("; DeepseekV4ForCausalLM applies it only on the blocks that compress their keys, with base "
                      "compress_rope_theta, and without that temperature correction (its attention factor is fixed at 1)")
        return words

    def rope_theta(key, v, c):
        words = plain[key](key, v, c)
        if _built_as(c, V4):
            words += "; in DeepseekV4ForCausalLM only the sliding-window-only blocks use it (the others use compress_rope_theta)"
        return words

    def topk_method(key, v, c):
        words = plain[key](key, v, c)
        if _built_as(c, V4):
            words += "; DeepseekV4ForCausalLM does not read it: its routers take the top scores plus a selection bias, in one group"
        return words

    def sliding_window(key, v, c):
        if not _built_as(c, V4) or v is None:
            return plain[key](key, v, c)
        return (f"Every block's attention reads the {grouped(c.count(key))} positions ending at the query, with or without "
                "compressed keys besides (compress_ratios)")

    for key, fn in (("index_n_heads", index_n_heads), ("index_head_dim", index_head_dim), ("index_topk", index_topk),
                    ("scoring_func", scoring_func), ("rope_scaling", rope_scaling), ("rope_theta", rope_theta),
                    ("topk_method", topk_method), ("sliding_window", sliding_window)):
        EXPLAIN[key] = fn


_v4_notes()
