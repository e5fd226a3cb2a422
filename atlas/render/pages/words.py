"""The words a page says about a component: its title and its one-line description, with the checkpoint's numbers."""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped
from atlas.render.pages.roles import anatomy, fact, gated_inner, in_out, kids_of, role
from atlas.render.pages.sizes import Sizes, routing
from atlas.render.pages.titles import LINEAR_ROLES, linear_use, lowercase_title, title_of, value_mask_words, weighted_block_words
from atlas.render.pages.streams import describe as stream_words


def describe(node: dict[str, Any], s: Sizes) -> str:
    """One sentence on what the module computes, from what its proof found (the facts that chose its steps), at the checkpoint's numbers."""
    r = role(node)
    if (streams := stream_words(node, r)) is not None:  # DeepSeek-V4's kinds (atlas/render/pages/streams.py)
        return streams
    d = s.get("hidden_size")
    kids = kids_of(node)
    if r in ("rmsnorm", "layernorm"):
        width = node["tensors"][0]["shape"][0] if node["tensors"] else d
        eps = f" (ε = {fact(node, 'eps'):g})" if fact(node, "eps") is not None else ""
        if r == "layernorm":
            learned = "gain and bias" if any(t["name"] == "bias" for t in node["tensors"]) else "gain (no bias)"
            if fact(node, "norm") == "layer_offset":  # the stored weight is an offset from a gain of one
                learned = learned.replace("gain", "gain of one plus a stored offset", 1)
            return f"Centres each {grouped(width)}-wide vector on its mean and divides it by its standard deviation{eps}, then applies a learned {learned} per feature."
        if fact(node, "gain") == "none":  # a norm that holds no tensor (Gemma 4's value norm)
            return f"Divides each vector by its root mean square{eps}; it has no learned gain and no parameters."
        gain = "one plus a learned offset per feature (the stored gain is 1 + g)" if fact(node, "norm") == "rms_offset" else "a learned gain per feature"
        return f"Divides each {grouped(width)}-wide vector by its root mean square{eps}, then multiplies it by {gain}."
    if r == "weightless_norm":
        eps = f" (ε = {fact(node, 'eps'):g})" if fact(node, "eps") is not None else ""
        how = {"rms": "Divides each vector it is given by its root mean square", "l2": "Divides each vector it is given by its length",
               "layer": "Centres each vector it is given on its mean and divides it by its standard deviation"}[fact(node, "norm")]
        return f"{how}{eps}, over its last axis; it holds no gain and no bias, so it has no parameters."
    if r == "embedding":
        if not node["tensors"] or len(node["tensors"][0]["shape"]) != 2:
            return "A learned lookup table."
        vocab, width = node["tensors"][0]["shape"]
        scaled = f", multiplied by √{grouped(width)}" if fact(node, "embedding") == "scaled_by_sqrt_width" else ""
        if (node["used_as"] or {}).get("as") == "p":
            return f"Looks up a learned {grouped(width)}-wide vector for each position, up to {grouped(vocab)} positions; added to the token embeddings."
        return f"Looks up a learned {grouped(width)}-wide vector for each token id{scaled}, one row per entry of a {grouped(vocab)}-token vocabulary."
    if r == "linear":
        dims = in_out(node)
        base = linear_use(node)[1] if linear_use(node) else LINEAR_ROLES.get(node["name"], "A learned linear map")
        if node.get("tied_to"):
            own = " Its bias is its own." if "tied_tensors" in node and fact(node, "bias") else ""
            return f"{base}, with the weight of {node['tied_to']} (tied): counted there, not here.{own}"
        if dims is None:
            return base + "."
        bias = "with a bias" if fact(node, "bias") else "no bias"
        stored = " (the weight is stored in × out)" if fact(node, "stored") == "in × out" else ""
        return f"{base}: {grouped(dims[0])} → {grouped(dims[1])} features, {bias}{stored}."
    if r == "dropout":
        return "Dropout: zeroes random features while training; at inference it passes its input through unchanged."
    if r == "activation" and node["class"] == "Identity" and not node["tensors"]:  # torch's placeholder for a layer left out
        return "Passes its input through unchanged: torch's Identity, built where a layer is switched off."
    if r == "activation":
        act = ACTIVATION_WORDS.get(fact(node, "activation"), "An activation function")
        learned = [t["name"] for t in node["tensors"] if t["role"] == "parameter"]
        if learned:
            fixed = [t["name"] for t in node["tensors"] if t["role"] != "parameter"]
            kept = f", and keeps {', '.join(fixed)} as fixed stored numbers" if fixed else ""
            return f"{act}, applied to each feature on its own with {len(learned)} learned numbers ({', '.join(learned)}) shared by every feature{kept}."
        return f"{act}, applied to each feature on its own; it has no parameters."
    if r in ("latent_attention", "attention"):
        return _attention_words(node, s)
    if r == "linear_attention":
        return _linear_attention_words(node)
    if r == "lightning_attention":
        heads = fact(node, "heads") or {}
        d = heads.get("head_dim")
        return (f"Lightning attention: {heads.get('query')} heads of {d} dims, each a linear attention without a softmax whose "
                f"past is one {d} × {d} state that decays by a fixed factor of its own at every position; the heads' read-outs "
                "are normalized across the width, gated by a sigmoid of the block's input and projected back.")
    if r == "indexer":
        ix = fact(node, "indexer") or {}
        return (f"Scores every earlier position for each query with {ix.get('heads')} heads of {ix.get('head_dim')} dims (the first "
                f"{ix.get('rope_dims')} rotated): a ReLU of each head's query–key product, weighted per head and summed; it keeps "
                f"the {grouped(ix['keeps']) if ix.get('keeps') else 'best'} best-scored positions, which its attention is masked to.")
    if r == "gated_norm" and fact(node, "gated_norm_order") == "gate_then_grouped_norm":
        groups = fact(node, "groups")
        eps = f" (ε = {fact(node, 'eps'):g})" if fact(node, "eps") is not None else ""
        over = f"each of its {groups} groups of channels" if isinstance(groups, int) and groups > 1 else "each vector"
        return (f"Multiplies its input by SiLU of the gate z first, then divides {over} by its root mean square{eps} "
                "and multiplies by a learned gain per channel.")
    if r == "gated_norm":
        width = node["tensors"][0]["shape"][0] if node["tensors"] else None
        variant = fact(node, "gated_norm") or ""
        gain = "one plus a learned offset" if variant.endswith("_offset") else "a learned gain"
        gate = "the sigmoid of" if variant.startswith("sigmoid") else "SiLU of"
        eps = f" (ε = {fact(node, 'eps'):g})" if fact(node, "eps") is not None else ""
        return (f"Divides each {grouped(width)}-wide head vector by its root mean square{eps}, multiplies it by {gain} per feature "
                f"and then by {gate} a gate computed from the stream.")
    if r == "decay_gate":
        heads = fact(node, "heads") or {}
        return (f"Turns the stream into one decay per head and key channel ({heads.get('heads')} × {heads.get('channels')}): a low-rank "
                "projection, plus a learned offset per channel, through softplus, scaled by minus a learned rate per head; "
                "the state is multiplied by its exponential before each write.")
    if r == "depthwise_conv" and node["tensors"]:
        kernel = node["tensors"][0]["shape"][-1] if node["tensors"] else None
        uncalled = "; its parent applies its weight as a function, so the module itself is never called" if not node["proof"] else ""
        return f"One short filter per channel over the current and the {kernel - 1} previous positions, never later ones{uncalled}."
    if r == "router":
        if fact(node, "hash_routing"):
            return _hash_router_words(routing(s, node))
        return _router_words(routing(s, node))
    if r == "experts":
        rt = routing(s, None)
        inner = node["tensors"][-1]["shape"][-1] if node["tensors"] else None
        how = (f"gated MLPs of inner width {grouped(inner)} with biases, whose gate and up columns are interleaved, clamped and combined as (u + 1) · g σ(αg)"
               if fact(node, "experts") == "clamped_interleaved" else f"gated MLPs of inner width {grouped(inner)}")
        if fact(node, "experts") == "gated_halves_every_expert":  # dense dispatch (Llama 4)
            return (f"{grouped(rt['n'])} {how}, stored as fused 3-D tensors; every expert runs on every token's row, which the "
                    "mixture has already multiplied by the token's score for that expert (zero for the experts not chosen).")
        return f"{grouped(rt['n'])} {how}, stored as fused 3-D tensors; each token runs only the {rt['k']} its router picked."
    if r == "moe":
        rt = routing(s, kids.get("gate") or kids.get("router"))
        shared = " and adds a shared expert that every token runs" if fact(node, "shared_expert") else ", with no shared expert"
        if fact(node, "shared_expert_gate"):
            shared += ", its output scaled per token by a sigmoid gate"
        if fact(node, "dispatch") == "dense":  # every expert gets every token, its input scaled by the score (Llama 4)
            return (f"Picks {rt['k']} of {grouped(rt['n'])} routed experts for each token and scales the token's input to each "
                    f"expert by its score (zero for the others), not the expert's output; every expert runs and their outputs "
                    f"are summed{shared}.")
        return f"Sends each token to {rt['k']} of {grouped(rt['n'])} routed experts and weights their outputs by the router{shared}."
    if r == "gated_mlp":
        inner = gated_inner(node)
        return f"A gated MLP: two projections {grouped(d)} → {grouped(inner)}, one through the activation, multiplied, then projected back to {grouped(d)}."
    if r == "mlp":
        act_node = next((c for c in node["children"] if role(c) == "activation"), None)
        act = ACTIVATION_WORDS.get(fact(act_node, "activation") if act_node else None, "its activation")
        if "gate_up_proj" in kids and in_out(kids["gate_up_proj"]):
            inner = in_out(kids["gate_up_proj"])[1] // 2
            return f"A gated MLP whose gate and up projections are one fused matrix: {grouped(d)} → 2 × {grouped(inner)}, {act} of the gate times the rest, back to {grouped(d)}."
        up = next((c for c in node["children"] if role(c) == "linear" and in_out(c) and in_out(c)[0] == d), None)
        if up is not None:
            if not fact(up, "bias"):  # no biases and no gate (Apertus)
                return f"An ungated two-layer MLP: {grouped(d)} → {grouped(in_out(up)[1])}, through {act}, then back to {grouped(d)}, no biases."
            return f"A two-layer MLP: {grouped(d)} → {grouped(in_out(up)[1])} with a bias, through {act}, then back to {grouped(d)} with a bias."
    if r == "mamba2":
        st = fact(node, "state", {})
        return (f"A selective state-space mixer: {st.get('heads')} heads of {st.get('head_dim')} channels, each carrying a "
                f"{st.get('head_dim')} × {st.get('state_size')} state from position to position; the state decays by exp(ΔA) and "
                f"takes in Δ·x·Bᵀ, C reads it out, " + (f"with B and C shared by {st.get('groups')} groups of heads." if st.get("groups") != 1
                                                        else "with one B and one C shared by every head.")
                + (" Its input is scaled first, and its input projection part by part." if fact(node, "part_multipliers") else ""))
    if r == "mamba1":
        st = fact(node, "state", {})
        return (f"A selective state-space mixer (Mamba): {grouped(st.get('channels') or 0)} channels, each carrying a "
                f"{st.get('state_size')}-wide state from position to position; a causal convolution feeds the scan, whose decay "
                f"exp(ΔA) and input B and read-out C depend on the position's own input (Δ through a rank-{st.get('time_step_rank')} "
                "projection), and SiLU of a gate multiplies its output.")
    if r == "short_conv":
        kernel = next((t["shape"][-1] for c in node["children"] for t in c["tensors"] if len(t["shape"]) == 3), None)
        return (f"A gated short convolution: one projection gives B, C and x; B·x is convolved along the positions, each channel "
                f"over its last {kernel} inputs, C gates the result and an output projection mixes the channels.")
    if r == "recurrent_block":
        kernel = next((t["shape"][-1] for c in node["children"] for t in c["tensors"] if len(t["shape"]) == 3 and t["shape"][1] == 1), None)
        return (f"Griffin's recurrent block: one branch is a projection through an activation; the other is a projection, a causal "
                f"convolution over each channel's last {kernel} inputs and an RG-LRU; their product is projected back to the stream.")
    if r == "rg_lru":
        st = fact(node, "state", {})
        return (f"A real-gated linear recurrent unit: {grouped(st.get('channels') or 0)} channels, each carrying one number from position to "
                f"position; an input gate and a recurrence gate, each block-diagonal over {st.get('heads')} heads, set how much input "
                f"enters and how fast the state decays (a = σ(−Λ) to the power {fact(node, 'decay_constant'):g} r).")
    if r == "token_shift":
        return "Moves the sequence one position later: each position receives the previous position's input, the first position zeros."
    if r == "time_mixing":
        st = fact(node, "state", {})
        return (f"RWKV's time mixing: each of {grouped(st.get('channels') or 0)} channels mixes the position with the previous one, "
                "projects key, value and receptance, and averages the values seen so far weighted by the exponential of their keys, "
                "older ones decayed a step at a time and the current one given a bonus; the receptance's sigmoid gates the average, "
                f"and the state it carries is {st.get('numbers_per_channel')} numbers a channel, the same at any length.")
    if r == "channel_mixing":
        wide = next((t["shape"][0] for c in node["children"] if c["name"] == "key" for t in c["tensors"]), None)
        return (f"RWKV's channel mixing: the position mixed with the previous one, a key {grouped(d)} → {grouped(wide or 0)} through "
                f"a squared ReLU, projected back to {grouped(d)} and gated by the sigmoid of a receptance projection.")
    if r == "shared_block":
        return ("A block whose weights several depths share: it sets its input beside the token embeddings (twice the width), "
                "normalises that, runs the attention over it and maps back to the width, normalises again and runs the MLP "
                "with the adapter of the use that calls it; it adds nothing to the stream itself.")
    if r == "carried_block":
        return ("A state-space block handed a second input, the shared block's output after the hybrid block's linear map: it adds "
                "that to its input before its norm, runs the mixer, and adds the mixer's output to its input alone.")
    if r == "low_rank_adapter":
        rank = (fact(node, "adapter") or {}).get("rank")
        return (f"Two linear maps without biases, down to {grouped(rank or 0)} values and back up: a low-rank term one use of a "
                "shared block adds to a shared projection.")
    if r == "block" and fact(node, "sublayers", {}).get("shared block"):
        return ("Runs a shared block on the stream beside the token embeddings, maps its output with a linear map of its own, "
                "and hands that to its state-space block, which adds it to the stream before its norm; only the mixer's output "
                "is added to the residual stream.")
    if r == "depthwise_conv":
        return "A depthwise convolution along the positions: each channel mixes its own last few inputs with its own kernel."
    if r == "identity":
        return "Returns its input unchanged; it has no parameters."
    if r == "list":
        return f"Holds {len(node['children'])} modules of one kind; the block runs them one at a time, each in its own place in the stream."
    if r == "block" and fact(node, "sublayers", {}).get("pairs"):
        pairs = fact(node, "sublayers")["pairs"]
        return (f"Runs {pairs} rounds of attention then a dense MLP, each after its own RMSNorm and added back to the residual stream; "
                "the mixture of experts reads the first round's MLP input and its output is added only at the block's end.")
    if r == "block" and anatomy(node).get("single"):
        a = anatomy(node)
        mixer = lowercase_title(title_of(kids[a["mixer"]]))
        norm = {"layer": "a LayerNorm", "rms": "an RMSNorm", "rms_offset": "an RMSNorm with a (1 + g) gain",
                "layer_offset": "a LayerNorm with a (1 + g) gain"}.get(
            fact(kids[a["pre_mixer"]], "norm") if a["pre_mixer"] else None, "no norm")
        scale = fact(node, "residual_scale")
        added = "scales its output by the config's residual_multiplier and adds it back" if scale == "config_residual_multiplier" else "adds its output back"
        return f"Runs one mixer, the {mixer}, after {norm}, and {added} to the residual stream."
    if r == "block" and anatomy(node).get("two"):  # attention and a state-space mixer side by side (Falcon-H1)
        a = anatomy(node)
        scales = fact(node, "mixer_multipliers", {})
        mlp = kids.get(a["ffn"] or "")
        return (f"Runs the {lowercase_title(title_of(kids[a['attn']]))} and the {lowercase_title(title_of(kids[a['ssm']]))} side by side on "
                f"one RMSNorm of the stream, multiplies their outputs by {scales.get('attention_out', 1):.4g} and {scales.get('ssm_out', 1):.4g}, "
                f"adds both to the residual stream in one sum, then applies the {lowercase_title(title_of(mlp)) if mlp else 'MLP'} "
                "after its own RMSNorm and adds it back.")
    if r == "block":
        a = anatomy(node)
        attn, mlp = kids.get(a["attn"] or ""), kids.get(a["ffn"] or "")
        parts = [lowercase_title(title_of(x)) for x in (attn, mlp) if x is not None]
        kinds = {fact(kids[n], "norm") for n in (a["pre_attn"], a["post_attn"], a["pre_ffn"], a["post_ffn"]) if n}
        kind = kinds.pop() if len(kinds) == 1 else None
        one = {"layer": "a LayerNorm", "rms": "an RMSNorm", "rms_offset": "an RMSNorm with a (1 + g) gain",
               "layer_offset": "a LayerNorm with a (1 + g) gain"}.get(kind, "a norm")
        two = {"layer": "LayerNorms", "rms": "RMSNorms", "rms_offset": "RMSNorms with a (1 + g) gain",
               "layer_offset": "LayerNorms with a (1 + g) gain"}.get(kind, "norms")
        if a["post_attn"] and (a["pre_attn"] or a["pre_ffn"]):
            where = f"each between two {two}"
        elif a["post_attn"] or a["post_ffn"]:
            where = f"each followed by {one}"
        else:
            where = f"each after {one}"
        if fact(node, "residual") == "parallel":
            bare = one.split(" ", 1)[1]
            through = f"both through one shared {bare}" if fact(node, "shared_norm") else f"each through its own {bare}"
            return (f"Applies {' and '.join(parts)} side by side to the block's input, {through}, and adds both outputs "
                    "to the residual stream in one sum.")
        scale = fact(node, "residual_scale")
        added = {"config_residual_multiplier": "each scaled by the config's residual_multiplier and added back",
                 "config_scale_depth": "each scaled by the config's scale_depth over the square root of the number of blocks and added back",
                 }.get(scale, "each added back")
        if fact(node, "residual_vectors"):  # the stream weighed per channel by the block's own vectors at each add (Doge)
            return weighted_block_words(parts, where, fact(node, "residual_vectors"))
        return f"Applies {' then '.join(parts)}, {where} and {added} to the residual stream."
    if r == "stacked_experts":
        st = fact(next(iter(node["children"]), {"facts": {}}), "stacked") or {}
        return (f"Runs each token through the experts its routing slots chose: expert i's weights are the i-th run of "
                f"{grouped(st.get('rows_each', 0))} rows of each of its {len(st.get('matrices', []))} stacked matrices "
                f"({grouped(st.get('experts', 0))} experts in all); each slot's output is scaled by its weight and the slots are summed.")
    if r == "expert_glu":
        st = fact(node, "stacked") or {}
        names = st.get("matrices", [])
        gate, up = (names[0], names[1]) if fact(node, "gated_map") == "first_gated" else (names[1], names[0])
        return (f"One expert's gated MLP on the slices it is handed: {fact(kids_of(node)[next(iter(kids_of(node)))], 'activation') or 'the activation'} "
                f"of the token's {gate} projection, times its {up} projection; then the {names[2]} slice maps the "
                f"{grouped(st.get('rows_each', 0))} features back to {grouped(d)}.") if len(names) == 3 else f"A {node['class']} module."
    if r == "norm_attention_norm":
        return ("The first half of the block as one module: a norm, the attention, the residual add, then the norm before "
                "the MLP; it returns both the stream after the add and its normed copy.")
    return f"A {node['class']} module."


ACTIVATION_WORDS = {
    "xielu": "xIELU (a quadratic for positive inputs, a saturating exponential for negative ones, plus a linear term)",
    "silu": "SiLU (x · σ(x))",
    "gelu_tanh": "GELU in its tanh approximation",
    "gelu": "GELU (x · Φ(x), the exact form)",
    "relu": "ReLU",
}


def _attention_words(node: dict[str, Any], s: Sizes) -> str:
    heads = fact(node, "heads") or {}
    parts = []
    if role(node) == "latent_attention":
        latent = fact(node, "latent", {})
        q = f"queries from a {grouped(latent['q_lora_rank'])}-wide latent, " if latent.get("q_lora_rank") else "queries straight from the stream, "
        given = not (isinstance(fact(node, "positions"), str) and fact(node, "positions").startswith("none"))
        second = (f"each query and key carrying a {latent['rope_dims']}-wide rotary part (one rotary key shared by all heads)" if given else
                  f"each query and key carrying a second {latent['rope_dims']}-wide part (one key part shared by all heads), "
                  "which nothing turns: the attention is given no positions")
        parts.append(f"{s.get('num_heads')} heads: {q}keys and values rebuilt from a {grouped(latent['kv_lora_rank'])}-wide latent, {second}")
        scales = fact(node, "latent_scales")
        if scales:
            parts.append(f"queries scaled by {scales['queries']:.4g} and the normed key–value latent by {scales['keys_values']:.4g}")
    else:
        h, kv = heads.get("query"), heads.get("key_value")
        share = (f"{h} query heads sharing one key–value head" if kv == 1 else
                 f"{h} query heads sharing {kv} key–value heads" if kv != h else f"{h} heads, each with its own keys and values")
        parts.append(f"{share}, {heads.get('head_dim')} wide")
        layout = fact(node, "rotary_layout")
        slopes = fact(node, "alibi_slopes")
        parts.append(_alibi_words(slopes, fact(node, "alibi_bias")) if slopes else
                     "no positions: it is handed the rotary angles and applies none" if layout == "not_applied" else
                     "rotary positions on queries and keys" if layout else
                     "no positions inside: they enter the stream before the first block" if s.learned_positions else
                     "no positions at all: the model has no position embedding")
    if fact(node, "output_gate"):
        parts.append("each head's output scaled by the sigmoid of a gate the query projection also produces")
    if fact(node, "qk_norm"):
        parts.append("queries and keys divided by their root mean square per head after the rotation, with no gain")
    temperature = fact(node, "query_temperature")
    if temperature:
        parts.append(f"queries multiplied by 1 + {temperature['attn_scale']:g} · ln(1 + ⌊(t + 1) / {grouped(temperature['floor_scale'])}⌋) "
                     "at position t, a temperature that rises along the context")
    window, chunk = fact(node, "window"), fact(node, "chunk")
    indexer = next((c for c in node["children"] if role(c) == "indexer"), None)
    if isinstance(chunk, int):
        parts.append(f"each query sees only the earlier positions of its own chunk of {grouped(chunk)}")
    elif fact(node, "selection") and indexer is not None:
        keeps = (fact(indexer, "indexer") or {}).get("keeps")
        parts.append(f"each query sees only the {grouped(keeps)} earlier positions its lightning indexer scores best")
    elif fact(node, "value_mask"):  # a mask scored from the values (Doge's dynamic mask)
        parts.append(value_mask_words(fact(node, "keep_window")))
    else:
        parts.append(f"each query sees the last {grouped(window)} positions" if isinstance(window, int) else "each query sees every earlier position")
    if fact(node, "softcap"):
        parts.append(f"scores soft-capped at {fact(node, 'softcap'):g}")
    if fact(node, "sinks") and fact(node, "sink_placement") == "output_scale":  # Granite SWA's form
        parts.append("a learned sink logit per head scales each head's output by the share it leaves the keys")
    elif fact(node, "sinks"):
        parts.append("a learned sink logit per head joins each softmax")
    scaling = fact(node, "scaling")
    if scaling is not None:
        parts.append(f"scores scaled by {scaling:.4g}")
    return "Causal self-attention: " + "; ".join(parts) + "."


def _alibi_words(slopes: list[float], form: str | None) -> str:
    """ALiBi's positions in words, from the slopes the proof checked and the form of the bias it measured."""
    how = ("its own slope times the key's position (the softmax sees the same as a penalty of slope × distance back)"
           if form == "key_position" else "minus its own slope times the key's distance back from the query")
    ratio = slopes[1] / slopes[0] if len(slopes) > 1 else None
    geometric = ratio is not None and all(abs(b / a - ratio) < 1e-9 for a, b in zip(slopes, slopes[1:]))
    falls = f", each head's {ratio:.4g} times the one before" if geometric else ""
    return (f"ALiBi positions, no embedding: each head adds to its scores {how}; the {len(slopes)} slopes run from "
            f"{max(slopes):.4g} to {min(slopes):.4g}{falls}")


def _linear_attention_words(node: dict[str, Any]) -> str:
    heads = fact(node, "heads") or {}
    kernel = fact(node, "conv_kernel")
    share = heads.get("value", 0) // max(1, heads.get("key", 1))
    shared = f", each key head serving {share} value heads" if share > 1 else ""
    return (f"Linear attention with a recurrent state: {heads.get('key')} query–key heads of {heads.get('key_dim')} dims and "
            f"{heads.get('value')} value heads of {heads.get('value_dim')} dims{shared}; queries, keys and values pass a causal "
            f"convolution over {kernel} positions; each value head keeps one {heads.get('key_dim')} × {heads.get('value_dim')} "
            f"matrix that decays{' key channel by key channel' if fact(node, 'decay') == 'per key channel' else ''}, is corrected towards each new value along its key by a learned write strength (the delta rule), "
            "and is read with the query. No attention scores: the cost per token does not grow with the context.")


ROUTING_WORDS = {
    "softmax_renormalized": "takes the softmax of its logits, keeps the top {k} and renormalizes the kept scores to sum to one (the same weights as a softmax over the {k} kept logits alone)",
    "softmax": "takes the softmax of its logits and keeps the top {k} as they are (not renormalized)",
    "sigmoid_renormalized": "takes the sigmoid of each logit, keeps the top {k} and renormalizes the kept scores to sum to one",
    "sigmoid": "takes the sigmoid of each logit and keeps the top {k} as they are (not renormalized)",
    "topk_softmax": "keeps the top {k} logits and takes the softmax over those {k} alone",
    "softmax_renormalized_epsilon": ("takes the softmax of its logits, keeps the top {k} and divides the kept scores by their sum "
                                     "plus a small constant its forward adds (so they sum to a little under one)"),
    "sigmoid_renormalized_epsilon": ("takes the sigmoid of each logit, keeps the top {k} and divides the kept scores by their sum "
                                     "plus a small constant its forward adds (so they sum to a little under one)"),
    "sigmoid_top_k_dense": ("keeps the top {k} logits and gives each kept expert the sigmoid of its logit as a score, every other "
                            "expert a score of 0: a score for every expert, which the mixture multiplies each expert's input by"),
    # a router that returns its logits alone (DBRX's): the mixture applies the rule
    "logits only": "one logit each; the mixture it belongs to turns them into the routing (a softmax, the top {k} and their weights)",
    "sparsemixer": ("picks the largest logit, weighted by a softmax over only the logits close to it, then the largest "
                    "of the rest the same way (SparseMixer: two experts, whose weights need not sum to one)"),
}


def _hash_router_words(rt: dict[str, Any]) -> str:
    """A router whose choice is a table indexed by token id (DeepSeek-V4's first blocks): the scores only weigh."""
    text = (f"Looks up each token's {rt['k']} experts of {grouped(rt['n'])} in a stored table, one row per token id: the choice "
            f"does not depend on the scores; its logits, through the scoring function, only weigh the {rt['k']} experts the table names"
            + (", their weights renormalized to sum to one" if str(rt["rule"] or "").endswith("_renormalized") else ""))
    if rt["scale"] not in (None, 1, 1.0):
        text += f", and the weights are multiplied by {rt['scale']:g}"
    return text + "."


def _router_words(rt: dict[str, Any]) -> str:
    words = ROUTING_WORDS.get(rt["rule"], "keeps the top {k}").format(k=rt["k"])
    text = f"Scores the {grouped(rt['n'])} experts for each token, {words}"
    if rt["groups"]:
        text += f"; it first keeps the best {rt['groups']} groups of experts"
    if rt["scale"] not in (None, 1, 1.0):
        text += f"; the weights are then multiplied by {rt['scale']:g}"
    text += "."
    if rt["bias"]:
        text += " A stored bias per expert is added to the scores only to choose the experts, not to weigh them."
    return text


