"""What the model is, in the few words a sentence about it may use: its architectural profile.

The profile is read from what the proofs found (``facts["equations"]``: each component's kind and the
facts its chain was chosen by), the module tree and config.json, never from a family's own words. It
is what the claim checker (``atlas.check.prose``) tests every sentence against, and what the words of
the pages are written from, so that the two cannot drift apart. Plain data in, plain data out: it
runs on cached facts too, and rendering may call it.

A profile (``profile(facts)`` for the whole model, ``node_profile(node)`` for one component and what
it holds) maps each feature to the evidence for it in words, or to None where the model has none of it.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

ATTENTION_KINDS = ("attention", "latent_attention", "shared_kv_attention")

# Each feature's name, as the claims and the pages use it.
FEATURES = ("rotary", "alibi", "learned_positions", "no_positions", "layernorm", "rmsnorm", "bias", "gated_mlp",
            "top_k_routing", "hash_routing", "window", "chunk", "softcap", "sinks", "shared_expert", "parallel_block",
            "mixture")


def _value(component: dict[str, Any], name: str, default: Any = None) -> Any:
    return component.get("facts", {}).get(name, {}).get("value", default)


def _context(facts: dict[str, Any]) -> int | None:
    """The longest context the checkpoint is configured for (max_position_embeddings), if it says."""
    raw = facts["config"]["raw"]
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}
    n = raw.get("max_position_embeddings", text.get("max_position_embeddings"))
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def attention_positions(component: dict[str, Any], model_rotates: bool) -> str:
    """How one attention component is given positions: "rotary", "alibi", or "none".

    ``model_rotates`` says the model holds a rotary embedding: a latent attention's proof notes no
    positions fact where it is handed the angles, and one where it is not (Kimi Linear's MLA)."""
    positions = _value(component, "positions")
    if _value(component, "alibi_slopes"):
        return "alibi"
    if _value(component, "rotary_layout") == "not_applied":
        return "none"
    if isinstance(positions, str):
        return "rotary" if positions.startswith("rotary") else "alibi" if positions.startswith("ALiBi") else "none"
    if _value(component, "rotary_inside"):
        return "rotary"
    return "rotary" if model_rotates else "none"


def _sliding(component: dict[str, Any], context: int | None) -> int | None:
    """The component's window where it is narrower than the context (a window as long as the context
    the model is configured for, Phi-3.5-MoE's 131,072, leaves every position in view)."""
    window = _value(component, "window")
    if not isinstance(window, int) or isinstance(window, bool):
        return None
    return window if context is None or window < context else None


def profile_of(components: Iterable[tuple[str, dict[str, Any]]], facts: dict[str, Any]) -> dict[str, str | None]:
    """The profile of some components (id -> the proof's component), with the model's context."""
    components = list(components)
    context = _context(facts)
    rotates = _model_rotates(facts)
    found: dict[str, list[str]] = {name: [] for name in FEATURES}

    def note(feature: str, where: str) -> None:
        if where not in found[feature]:
            found[feature].append(where)

    for cid, c in components:
        kind = _value(c, "kind")
        if kind in ATTENTION_KINDS:
            how = attention_positions(c, rotates)
            note({"rotary": "rotary", "alibi": "alibi", "none": "no_positions"}[how], cid)
            window = _sliding(c, context)
            if window:
                note("window", f"{cid} ({window:,} positions)")
            if isinstance(_value(c, "chunk"), int):
                note("chunk", cid)
            if _value(c, "softcap"):
                note("softcap", cid)
            if _value(c, "sinks"):
                note("sinks", cid)
        if kind in ("rotary", "rotary_table"):
            note("rotary", cid)
        if kind == "norm":
            note("layernorm" if _value(c, "norm") in ("layer", "layer_offset") else "rmsnorm", cid)
        if kind == "gated_norm":
            note("rmsnorm", cid)
        if kind == "weightless_norm":
            note("layernorm" if _value(c, "norm") in ("layer", "layer_offset") else "rmsnorm", cid)
        if kind == "linear" and _value(c, "bias") and not cid.endswith("lm_head"):
            note("bias", cid)
        if kind == "dense_mlp" and _value(c, "mlp") == "gated":
            note("gated_mlp", cid)
        if kind in ("experts", "stacked_experts", "expert_glu"):
            note("gated_mlp", cid)
        if kind == "mixture":
            note("mixture", cid)
            if _value(c, "shared_expert"):
                note("shared_expert", cid)
        if kind == "router":
            note("mixture", cid)
            note("hash_routing" if _value(c, "hash_routing") else "top_k_routing", cid)
        if _value(c, "logit_softcap"):
            note("softcap", cid)
        if _value(c, "residual") == "parallel" or _value(c, "mixer_multipliers"):
            note("parallel_block", cid)
        if kind == "embedding" and (c.get("used_as") or {}).get("by_kind") == "model" and (c.get("used_as") or {}).get("as") == "p":
            note("learned_positions", cid)
        if _value(c, "side_mixture"):  # experts beside the dense MLP (Gemma 4's)
            note("mixture", cid)
    return {name: (", ".join(where[:3]) + (f" and {len(where) - 3} more" if len(where) > 3 else "")) if where else None
            for name, where in found.items()}


def _model_rotates(facts: dict[str, Any]) -> bool:
    """The model holds a rotary embedding (a module of its own, or one its attention holds)."""
    return any(f["abbreviation"] == "RoPE" for f in facts.get("features", [])) or any(
        _value(c, "kind") in ("rotary", "rotary_table") for c in facts["equations"]["components"].values())


def profile(facts: dict[str, Any]) -> dict[str, str | None]:
    """The whole model's profile: feature -> where it is (component ids), or None where it is absent.

    Besides the proofs' facts: the standard values the model has (a learned position table's rows, a
    shared expert's output, wherever the model keeps it), the block kinds the model builds with a sliding
    window, and the attention sinks its tensors hold (where a proof does not note them: DeepSeek-V4's)."""
    found = profile_of(facts["equations"]["components"].items(), facts)
    present = {v["name"]: v for h in facts["support"]["hosts"] for v in h["values"] if v.get("read")}
    for value, feature in (("position_embeddings", "learned_positions"), ("shared_expert_output", "shared_expert")):
        if value in present and not found[feature]:
            found[feature] = f"the standard value {value} ({present[value]['module']})"
    model = facts["equations"]["components"].get("model", {})
    if _value(model, "positions") == "sinusoidal" and not found["learned_positions"]:
        # a table of positions the model computes and reads itself (CTRL's pos_encoding): no module's output carries it
        found["learned_positions"] = f"the model's own table ({model['facts']['positions']['how']})"
    window = facts["config"]["raw"].get("sliding_window")
    context = _context(facts)
    sliding = [k["label"] for k in facts["block_kinds"] if k["attention_type"] == "sliding_attention"]
    if sliding and isinstance(window, int) and (context is None or window < context) and not found["window"]:
        found["window"] = f"{', '.join(sliding)} ({window:,} positions)"
    sinks = sorted({path for path in _tensor_paths(facts) if path.rpartition(".")[2] == "sinks"})
    if sinks and not found["sinks"]:
        found["sinks"] = f"the tensor {sinks[0]}"
    return found


def _tensor_paths(facts: dict[str, Any]) -> Iterable[str]:
    def walk(node):
        for t in node["tensors"]:
            yield f"{node['path']}.{t['name']}"
        for child in node["children"]:
            yield from walk(child)

    for kind in facts["accounting"]["block_kinds"]:
        yield from walk(kind["tree"])


# The features a component's own words are held to against that component (its attention or mixture,
# where it is a part of one): how it is given positions and how it routes. The others are the model's.
NODE_FEATURES = ("rotary", "alibi", "top_k_routing", "hash_routing", "chunk")


def node_profile(facts: dict[str, Any], component_id: str) -> dict[str, str | None]:
    """The profile of one component and every component inside it; for a part of an attention or of a
    mixture (a projection, a router), of that attention or mixture, whose positions and routing it serves."""
    components = facts["equations"]["components"]
    parts = component_id.split(".")
    scope = next((".".join(parts[:n]) for n in range(len(parts), 0, -1)
                  if _value(components.get(".".join(parts[:n]), {}), "kind") in ATTENTION_KINDS + ("mixture",)), component_id)
    prefix = scope + "."
    return profile_of(((cid, c) for cid, c in components.items() if cid == scope or cid.startswith(prefix)), facts)


def rotary_pairs(facts: dict[str, Any], latent: bool = False) -> int | None:
    """How many pairs of dims the rotary embedding turns per head at the checkpoint's sizes: the rotary
    part of a latent attention's heads (qk_rope_head_dim), else the head's dims times the partial
    factor the config gives (partial_rotary_factor, rotary_pct) or the rotary dims it names (rotary_dim)."""
    raw = facts["config"]["raw"]
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else {}

    def get(key):
        return raw.get(key, text.get(key))

    if latent and isinstance(get("qk_rope_head_dim"), int):
        return get("qk_rope_head_dim") // 2
    std = facts["config"]["standardized"]
    head = std.get("head_dim") or get("head_dim")
    if not isinstance(head, int):
        return None
    if isinstance(get("rotary_dim"), int):
        return get("rotary_dim") // 2
    rope = get("rope_parameters") if isinstance(get("rope_parameters"), dict) else {}
    factor = next((f for f in (get("partial_rotary_factor"), rope.get("partial_rotary_factor"), get("rotary_pct")) if f is not None), None)
    if isinstance(factor, (int, float)) and not isinstance(factor, bool):
        return int(head * factor) // 2
    return head // 2


# --- the words that claim a feature ---------------------------------------------------------------

# name shown in the error, the words that make the claim, the feature they assert
CLAIMS: tuple[tuple[str, re.Pattern, str], ...] = tuple((name, re.compile(pattern), feature) for name, pattern, feature in (
    ("rotary", r"\b[Rr]otary\b|\bRoPE\b", "rotary"),
    ("ALiBi", r"\bALiBi\b", "alibi"),
    ("NoPE", r"\bNoPE\b", "no_positions"),
    ("learned positions", r"\b[Ll]earned (absolute )?position(al)? (embedding|table|vector)s?\b|\b[Ll]earned positions\b|\bposition table\b", "learned_positions"),
    ("LayerNorm", r"\bLayerNorms?\b", "layernorm"),
    ("RMSNorm", r"\bRMSNorms?\b", "rmsnorm"),
    ("bias", r"\bbiased (\w+ )?(projections?|attention|linear|layers?)\b|\b(carry|carries|with) (a )?bias(es)?\b", "bias"),
    ("gated MLP", r"\b(SwiGLU|GeGLU|GEGLU|ReGLU)\b|\b[Gg]ated MLPs?\b", "gated_mlp"),
    ("top-k", r"\bkeeps the top \d+|\btop[- ](k|\d+) (routing|experts?)\b|\b[Tt]op-k routing\b", "top_k_routing"),
    ("hash routing", r"\b[Hh]ash(ed)?[- ]rout(ing|ed|er)\b", "hash_routing"),
    ("window", r"\b[Ss]liding[- ]window\b|\bSWA\b", "window"),
    ("chunk", r"\b[Cc]hunked attention\b|\battention chunks\b|\bown chunk of \d", "chunk"),
    ("softcap", r"\b[Ss]oft-?cap(s|ped|ping)?\b", "softcap"),
    ("sink", r"\b(attention )?sinks?\b", "sinks"),
    ("shared expert", r"\b[Ss]hared experts?\b", "shared_expert"),
    ("parallel block", r"\b[Pp]arallel (blocks?|attention|residual|sublayers)\b|\bside by side to the block's input\b", "parallel_block"),
    ("mixture of experts", r"\b[Mm]ixtures? of (\w+ )?experts\b|\bMoE\b", "mixture"),
))

# A clause ends at these. A denial before the claim in its clause takes the claim back ("no rotary
# embedding", "neither ... nor"); after it, only the few that deny what came before ("soft-capping is
# gone", "applies none"); a hedge anywhere in the clause makes it a possibility, not a claim.
CLAUSE_END = re.compile(r"[.;:()!?—]|\s-\s")
DENIAL = re.compile(r"\b([Nn]o|[Nn]ot|[Nn]one|[Nn]either|[Nn]or|[Ww]ithout|[Ii]nstead of|[Ii]n place of|[Uu]nlike|[Rr]ather than|"
                    r"[Nn]ever|[Nn]othing|[Ll]acks?|[Dd]rops?|[Rr]emoves?|[Rr]eplaces?|[Dd]eparts?|[Ee]mpty|[Uu]nset|[Dd]isabled|[Oo]ff)\b|n't\b")
DENIED_AFTER = re.compile(r"\b(is|are) (gone|off|not|never|unused)\b|\bapplies none\b|\bnot applied\b")
HEDGE = re.compile(r"\b([Ww]ould|[Cc]an|[Cc]ould|[Mm]ay|[Mm]ight|[Ii]f|[Ww]hen|[Ww]here|[Ww]hether|[Aa]ny)\b")

# What the profile says instead, for the error: the positions the model does have, in words.
POSITION_WORDS = {"rotary": "rotary embedding", "alibi": "ALiBi", "learned_positions": "learned position table",
                  "no_positions": "attention without positions"}
# Each feature in the words of an error: "the facts find no ..."
FEATURE_WORDS = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "bias": "linear layer with a bias", "gated_mlp": "gated MLP",
                 "top_k_routing": "router that chooses by score", "hash_routing": "router that chooses by a table of token ids",
                 "chunk": "attention in chunks", "softcap": "softcap", "sinks": "attention sink", "shared_expert": "shared expert",
                 "parallel_block": "block whose sublayers run side by side", "mixture": "mixture of experts"}


CLAUSE_REACH = 400  # characters: a clause longer than this is read from this far back
# The words without which a claim's pattern cannot match, lower-cased: a page is searched only for the
# claims whose words it holds (a plain substring test, many times faster than the patterns).
CLAIM_WORDS = {"rotary": ("rotary", "rope"), "ALiBi": ("alibi",), "NoPE": ("nope",), "learned positions": ("learned", "position table"),
               "LayerNorm": ("layernorm",), "RMSNorm": ("rmsnorm",), "bias": ("bias",), "gated MLP": ("glu", "gated mlp"),
               "top-k": ("top",), "hash routing": ("rout",), "window": ("window", "swa"), "chunk": ("chunk",),
               "softcap": ("cap",), "sink": ("sink",), "shared expert": ("shared expert",), "parallel block": ("parallel", "side by side"),
               "mixture of experts": ("experts", "moe")}


def claims_in(text: str) -> Iterable[tuple[str, str, str]]:
    """(claim, feature, the words around it) for every claim the text makes and does not deny, claim by claim."""
    lower = text.lower()
    candidates = [(name, pattern, feature) for name, pattern, feature in CLAIMS if any(w in lower for w in CLAIM_WORDS[name])]
    if not candidates:
        return
    text = " ".join(text.split())  # a line break inside a sentence is a space
    for name, pattern, feature in candidates:
        for match in pattern.finditer(text):
            # the clause's start: the last clause end before the claim, looked for in the words just before it
            start = max((m.end() for m in CLAUSE_END.finditer(text, max(0, match.start() - CLAUSE_REACH), match.start())),
                        default=max(0, match.start() - CLAUSE_REACH))
            end = CLAUSE_END.search(text, match.end())
            stop = end.start() if end else len(text)
            clause = text[start:stop]
            if DENIAL.search(text, start, match.start()) or DENIED_AFTER.search(text, match.end(), stop) or HEDGE.search(clause):
                continue
            yield name, feature, " ".join(clause.split())[:120]
