"""The fact sheet: the figures a reader looks for first (size, shape, attention, positions, context,
memory, release) and what the build checked, gathered from the facts collect already holds.

Nothing here is measured anew: each figure is one collect computed and a check stood behind (the
parameter count, the standard sizes, the cost section's cache and weights, the equations' proof), and
each carries ``href``, the page or anchor where it is derived and checked, so that the sheet at the top
of a family page and on its index card is a set of links into the proof, never a second source.
"""

from __future__ import annotations

from typing import Any

from atlas.cost import figures as cost_figures
from atlas.cost.coefficients import FIXED_STATES
from atlas.model.block_kinds import index_ranges
from atlas.model.roles import POSITION_EMBEDDING_NAMES as POSITION_TABLES
from atlas.numbers import grouped

# The modules a learned position table lives in, by the name transformers gives them.


def sheet(facts: dict[str, Any], rope: Any, no_rotary: list[int]) -> dict[str, Any]:
    """The fact sheet of one family. ``rope`` is the configuration's rotary parameters as transformers
    reads them (``config.rope_parameters``: one dict, or one per layer type; None without rotary
    positions); ``no_rotary`` the blocks that apply none."""
    sizes = facts["config"]["standardized"]
    acc = facts["accounting"]["model"]
    mixers = _attention_pages(facts)
    attention_pages = {kind: page for kind, (page, _) in mixers.items()}
    first_attention = next(iter(attention_pages.values()), None)
    # the heads are the softmax attention's: a linear-attention block's page shows other sizes
    softmax = next((page for page, mixer in mixers.values() if mixer != "linear_attention"), first_attention)
    return {
        # zero-computation experts (LongCat-Flash) make the active count a range: its low end where the cost has one
        "parameters": {"total": acc["total"], "active": acc["active"], "href": "#totals", "active_href": "#cost-active",
                       **({"active_fewest": facts["cost"]["active"]["fewest"]} if "fewest" in facts["cost"]["active"] else {})},
        "layers": {"count": facts["model"]["num_blocks"], "pattern": block_pattern(facts["blocks"], _labels(facts)), "href": "#blocks"},
        "width": {"value": sizes.get("hidden_size"), "href": "#config-sizes"},
        "heads": {**_heads(sizes), "elsewhere": _other_heads(facts), "href": softmax or "#config-sizes"},
        "attention": _attention_kinds(facts, attention_pages),
        "positions": _positions(facts, rope, no_rotary, softmax),
        "context": {"value": facts["cost"]["context"]["max"] if facts["cost"]["context"]["stated"] else None, "href": "#cost"},
        "vocabulary": {"value": sizes.get("vocab_size"), "href": "#config-sizes"},
        "kv_cache": _kv_cache(facts["cost"]),
        "weights": _weights(facts),
        "released": facts["family"]["released"],
        "checked": checked(facts),
    }


def checked(facts: dict[str, Any]) -> dict[str, Any]:
    """What the build checked for this family, for its badge and its pages' footers: the header figures
    pinned in checkpoint.json and checked against the prediction (by name), how close config.json is to
    the released file (with the keys that are guesses), and the equation steps reproduced on the run."""
    figures = facts["checkpoint_check"]["figures"]
    source = facts["checkpoint"]["config_source"]
    proof = facts["equations"]["total"]
    return {
        "headers": [row["figure"] for row in figures if row["checked"]],
        "header_figures": len(figures),
        "config": source["status"] if source else None,
        "guessed": [g["key"] for g in source["guessed"]] if source else [],
        "steps": proof["steps"],
        "reproduced": proof["reproduced"],
    }


def block_pattern(blocks: list[str], labels: dict[str, str]) -> str:
    """The stack in words, as short as it can be said exactly: a unit repeated after a prefix and
    before a shorter tail ("2 sliding-window blocks, then 20 × (1 heavily compressed attention block,
    1 compressed sparse attention block)"); where nothing repeats, the runs in order, or, past
    MAX_RUNS of them, how many blocks of each kind."""
    n = len(blocks)
    if len(set(blocks)) == 1:
        return f"{n} × {labels[blocks[0]]}"
    best = None  # (words spent: prefix + unit + tail runs, start, period)
    for start in range(n):
        for period in range(1, (n - start) // 2 + 1):
            rest = blocks[start:]
            if all(rest[i] == rest[i % period] for i in range(len(rest))):
                times = len(rest) // period
                cost = len(_runs(blocks[:start])) + len(_runs(rest[:period])) + len(_runs(rest[times * period:]))
                if best is None or cost < best[0]:
                    best = (cost, start, period)
                break
    runs = _runs(blocks)
    if best is None or min(best[0], len(runs)) > MAX_RUNS:
        counts = {kind: blocks.count(kind) for kind in dict.fromkeys(blocks)}
        return ", ".join(_run_words(run, labels) for run in counts.items()) + ", interleaved"
    if best[0] >= len(runs):
        return ", ".join(_run_words(run, labels) for run in runs)
    _, start, period = best
    times = (n - start) // period
    unit = _runs(blocks[start:start + period])
    said = [_run_words(run, labels) for run in _runs(blocks[:start])]
    said.append(f"{times} × ({', '.join(_run_words(run, labels) for run in unit)})" if len(unit) > 1 else _run_words((unit[0][0], times * period), labels))
    said += [_run_words(run, labels) for run in _runs(blocks[start + times * period:])]
    return ", then ".join([", ".join(said[:-1]), said[-1]]) if len(said) > 1 else said[0]


MAX_RUNS = 8  # past this many runs to name, a stack is said by its counts of each kind


def _runs(blocks: list[str]) -> list[tuple[str, int]]:
    runs: list[list] = []
    for kind in blocks:
        if runs and runs[-1][0] == kind:
            runs[-1][1] += 1
        else:
            runs.append([kind, 1])
    return [(k, n) for k, n in runs]


def _run_words(run: tuple[str, int], labels: dict[str, str]) -> str:
    kind, count = run
    return f"{count} {labels[kind]}{'s' if count > 1 else ''}"


def _labels(facts: dict[str, Any]) -> dict[str, str]:
    return {k["id"]: k["label"] for k in facts["block_kinds"]}


def _heads(sizes: dict[str, Any]) -> dict[str, Any]:
    return {"query": sizes.get("num_heads"), "kv": sizes.get("num_kv_heads"), "head_dim": sizes.get("head_dim"),
            "qk_head_dim": sizes.get("qk_head_dim") if sizes.get("qk_head_dim") != sizes.get("head_dim") else None}


def _other_heads(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """Blocks built with other attention sizes (Gemma 4's global blocks), grouped by their sizes."""
    groups: dict[tuple, list[int]] = {}
    for index, own in sorted((facts["config"].get("block_sizes") or {}).items(), key=lambda item: int(item[0])):
        key = tuple(sorted((k, v) for k, v in own.items() if k in ("num_heads", "num_kv_heads", "head_dim")))
        groups.setdefault(key, []).append(int(index))
    return [{"blocks": index_ranges(indices), "count": len(indices), **_heads(dict(key))} for key, indices in groups.items()]


def _attention_pages(facts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Each block kind's attention component page, where its equations are proven, and its kind as the
    proof found it ("attention", "latent_attention", "linear_attention", ...)."""
    pages = {}
    for kind in facts["block_kinds"]:
        for cid, component in facts["equations"]["components"].items():
            value = ((component.get("facts") or {}).get("kind") or {}).get("value")
            if cid.startswith(kind["id"] + ".") and cid.count(".") == 1 and isinstance(value, str) and "attention" in value:
                pages[kind["id"]] = (f"c/{cid}.html", value)
                break
    return pages


def _attention_kinds(facts: dict[str, Any], pages: dict[str, str]) -> list[dict[str, Any]]:
    """The kinds of attention as the cost section keeps them (full, sliding with its window, latent,
    linear, a state...), block kinds that attend alike counted together, each with the page of its
    first kind's proven equations (the block's own page where it has none)."""
    alike: dict[tuple, dict[str, Any]] = {}
    for k in facts["cost"]["cache"]["kinds"]:
        key = (k["attention"], k.get("window"))
        if key in alike:
            alike[key]["count"] += k["count"]
        else:
            alike[key] = {"label": k["label"], "count": k["count"], "attention": k["attention"], "window": k.get("window"),
                          "href": pages.get(k["kind"], f"c/{k['kind']}.html")}
    return list(alike.values())


def _positions(facts: dict[str, Any], rope: Any, no_rotary: list[int], attention_page: str | None) -> dict[str, Any]:
    """How tokens learn where they are, in words, with the page that shows it."""
    outside = facts["accounting"]["outside"]
    rotary = next((path for path in outside if path.endswith("rotary_emb")), None)
    table = next((path for path in outside if path.split(".")[-1] in POSITION_TABLES), None)
    said = {c.get("facts", {}).get("positions", {}).get("value") for c in facts["equations"]["components"].values()}
    if rope and rotary:
        words = "RoPE, " + _rope_words(rope, facts["config"]["standardized"].get("qk_head_dim") or facts["config"]["standardized"].get("head_dim"))
        if no_rotary:
            words += f"; none in {len(no_rotary)} of {facts['model']['num_blocks']} blocks ({index_ranges(no_rotary)})"
        # the rotary module has no page of its own: the attention's proven steps turn queries and keys
        return {"words": words, "href": attention_page or "#blocks"}
    held = facts["equations"]["components"].get("model", {}).get("facts", {}).get("positions", {}).get("value")
    if (table and not outside[table].get("tensors")) or (not table and held == "sinusoidal"):
        # a table the module computes (XGLM's sinusoids, proven by its steps), or the model itself (CTRL's
        # pos_encoding): no weights, so no page of its own; the model's steps read it
        return {"words": "sinusoidal: a fixed table computed from the width, no weights", "href": "c/model.html"}
    if table:
        rows = outside[table]["tensors"][0]["shape"][0] if outside[table].get("tensors") else None
        return {"words": "learned absolute" + (f", a table of {grouped(rows)} positions" if rows else ""), "href": f"c/{table.split('.')[-1]}.html"}
    if any(isinstance(s, str) and s.startswith("ALiBi") for s in said):
        return {"words": "ALiBi: a bias on the scores, linear in the distance, one slope a head", "href": attention_page or "#blocks"}
    if "token_shift" in facts["equations"].get("kinds", {}).values():  # RWKV: order from the token shift and the recurrence's decay
        return {"words": "none added: each block's token shift reads the previous position, and its recurrence decays older ones",
                "href": attention_page or "#blocks"}
    return {"words": "none: no block is given positions", "href": attention_page or "#blocks"}


def _rope_words(rope: dict[str, Any], head_dim: int | None = None) -> str:
    """One rotary setting ("θ 50,000, yarn × 32 from 4,096"), or one per layer type."""
    if rope and all(isinstance(v, dict) for v in rope.values()):
        return "; ".join(f"{kind.replace('_', ' ')}: {_rope_words(one, head_dim)}" for kind, one in rope.items())
    parts = [f"θ {_number(rope['rope_theta'])}"] if rope.get("rope_theta") is not None else []
    kind = rope.get("rope_type") or rope.get("type")
    if kind and kind != "default":
        scaled = f"{kind}" + (f" × {_number(rope['factor'])}" if rope.get("factor") else "")
        if rope.get("original_max_position_embeddings"):
            scaled += f" from {grouped(rope['original_max_position_embeddings'])}"
        parts.append(scaled)
    partial = rope.get("partial_rotary_factor")
    if partial is not None and partial < 1:
        turned = int(head_dim * partial) if head_dim else None
        # the dims transformers turns (int(head_dim × factor)), where the factor's percentage would round them
        parts.append(f"on {_number(partial * 100)}% of each head's dims" if not turned or turned == head_dim * partial
                     else f"on {turned} of each head's {head_dim} dims (partial_rotary_factor {_number(partial)})")
    return ", ".join(parts)


def _number(value: float) -> str:
    return grouped(int(value)) if float(value).is_integer() else f"{value:g}"


def _kv_cache(cost: dict[str, Any]) -> dict[str, Any]:
    """Bytes a token adds to the cache at 16 bits, as the cost section computes them, and how many blocks
    hold a fixed state (not growing with the context), instead of it or beside it."""
    at = cost_figures.figures(cost, cost["context"]["default"])
    # a state of fixed size alone, or beside the keys and values (Falcon-H1's and Zamba2's hybrid blocks: the kind's "state")
    fixed = sum(k["count"] for k in cost["cache"]["kinds"] if k["attention"] in FIXED_STATES or k.get("state"))
    return {"bytes": at["per_token"], "dtype": "BF16", "latent": cost["cache"]["latent"], "fixed_state_blocks": fixed, "href": "#cost"}


def _weights(facts: dict[str, Any]) -> dict[str, Any]:
    """The bytes of the weights as the checkpoint stores them (its dtypes), from the cost section."""
    stored = facts["cost"]["weights"][0]
    return {"bytes": stored["bytes"], "dtypes": sorted(facts["checkpoint_check"]["predicted"]["bytes_by_dtype"]), "href": "#cost-weights"}
