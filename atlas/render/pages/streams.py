"""Words a block drawing gives a block of several residual streams (DeepSeek-V4's hyper-connections):
the branch's hyper-connection beside its norm, and what each add does with the streams."""

from __future__ import annotations

from typing import Any

from atlas.render.pages.roles import fact


def branch_label(tree: dict[str, Any], slot: str, name: str, words: str) -> tuple[str, str]:
    """(label, words) of the box before a sublayer: the norm's, or its hyper-connection and the norm's kind (the
    box still links to the norm's page)."""
    hc = (fact(tree, "hyper_connections") or {}).get({"pre_attn": "attention", "pre_ffn": "mlp"}.get(slot, ""))
    return (f"{hc} + {words}", f"{fact(tree, 'streams')} streams collapsed, normed") if hc else (name, words)


def terminal(tree: dict[str, Any], text: str, end: bool = False) -> str:
    if not fact(tree, "hyper_connections"):
        return text
    if end:  # each add spreads the sublayer's output over the streams and adds the streams mixed
        return "each ⊕: the output spread over the streams plus the streams mixed → next block"
    return f"{text}: {fact(tree, 'streams')} residual streams"


def describe(node: dict[str, Any], r: str) -> str | None:
    """One sentence for DeepSeek-V4's kinds of component (None for every other), from the facts its proof noted."""
    from atlas.numbers import grouped

    n = fact(node, "streams")
    if r == "block" and fact(node, "hyper_connections"):
        return (f"Collapses its {n} residual streams into the attention's input (then an RMSNorm), adds the attention's output to "
                "every stream with a weight of its own while mixing the streams, then does the same around the mixture of experts.")
    if r == "hyper_connection":
        return (f"From the {n} streams, flattened and normed without a gain, one linear map gives a sigmoid weight per stream that "
                f"collapses them into the sublayer's input, a weight per stream (twice a sigmoid) for the sublayer's output, and a "
                f"{n} × {n} mixing matrix: a softmax per row, then {fact(node, 'sinkhorn_rounds')} rounds of Sinkhorn normalization.")
    if r == "stream_collapse":
        return f"Collapses the {n} residual streams into one vector with a sigmoid weight per stream, computed from the streams flattened and normed."
    if r == "grouped_linear":
        return f"Projects each of {fact(node, 'groups')} groups of heads through its own block of rows: a block-diagonal linear map."
    if r == "shared_kv_attention":
        h = fact(node, "heads") or {}
        pooled = " and keys its compressor pools from windows of positions" if fact(node, "compressor") else ""
        return (f"{h.get('query_heads')} query heads from a low-rank latent, each normed without a gain, read one {grouped(h.get('head_dim') or 0)}-wide "
                f"head that serves as key and value, over a sliding window{pooled}; a learned sink logit joins each head's softmax, "
                "the values' rotation is undone on the output, and the heads are projected by groups, then to the width.")
    if r == "window_compressor":
        c = fact(node, "compression") or {}
        how = "overlapping windows (each position feeds its own window and the next)" if c.get("overlapping") else "closed windows"
        extra = "; a lightning indexer then keeps the best pooled keys for each query" if c.get("indexer") else ""
        return (f"Pools every {grouped(c.get('rate') or 0)} positions into one key, over {how}: a softmax of the gates plus a bias per slot "
                f"weights the values, then an RMSNorm and a rotation at the window's first position{extra}.")
    if r == "compressed_indexer":
        i = fact(node, "indexer") or {}
        return (f"Pools keys of its own ({grouped(i.get('head_dim') or 0)} wide, every {i.get('rate')} positions), scores each for every query with "
                f"{i.get('heads')} heads, and keeps the best {grouped(i.get('keeps') or 0)} of those the query may see.")
    if r == "index_scorer":
        return "Scores every pooled key for each query: each head's ReLU dot product, weighted by a weight per head from the query's token, summed."
    if r == "rotary_table":
        return "Turns the positions it is handed into rotary angles, from the config's rotary settings for its kind of block (YaRN where they say so)."
    return None


def focus_order(terminals: list[dict], boxes: list[dict], adds: list[dict]) -> list[dict[str, Any]]:
    """Every piece of a drawing a reader can focus, in the order the stream meets them (top to bottom,
    then left to right): the input, each part and its add, the output last."""
    pieces = ([("terminal", i, (t["y"], t["x"])) for i, t in enumerate(terminals)]
              + [("box", i, (b["y"], b["x"])) for i, b in enumerate(boxes)]
              + [("add", i, (a["y"], a["x"])) for i, a in enumerate(adds)])
    return [{"kind": kind, "index": i} for kind, i, _ in sorted(pieces, key=lambda piece: piece[2])]
