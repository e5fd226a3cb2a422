"""Attention: heads projected, normed and turned, then the scores' steps; latent attention (MLA) likewise.

One chain covers multi-head, grouped-query and multi-query attention with separate or fused
projections, biases, q/k norms (per head or across the width), rotary or no positions, sliding
windows, softcaps and sinks; latent attention (MLA) has its own chain. Every setting is read from
the module (its children, tensors and attributes) at both sizes, and the proof checks it. The
rotations and ALiBi's bias are ``atlas.proof.positions``'; the steps from the scores to the output
projection, which every attention shares, ``atlas.proof.scores``'.
"""

from __future__ import annotations

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof import value_mask
from atlas.proof.core import Part
from atlas.proof.library import X, _attr, add_handed_residual, apply_child, linear_call, linear_dims, norm_call, sub
from atlas.proof.positions import (ROTARY, ROTARY_COMPLEX, _alibi_given, _complex_angles, _own_rotary, _partial_rotary_words,
                                   _rotary_given, _zero_angle_words, rotary_input, rotate_half, rotate_half_angles, rotate_half_reversed, rotate_interleaved,
                                   rotate_interleaved_sin_first, rotate_pairs, rotate_pairs_complex, rotate_pairs_in_place)
from atlas.proof.scores import _heads, _mask, _scores_to_output, held_causal_mask
from atlas.proof.steps import Chain, Step
from atlas.model.structure import is_indexer, separate_qkv, value_scored_mask


# The attention's query and key norms, by the names modules give them.
QK_NORM_NAMES = (("q_norm", "k_norm"), ("query_layernorm", "key_layernorm"), ("q_layernorm", "k_layernorm"))  # by name: OLMo, Hunyuan, LFM2


def _shared_qk_norm(part: Part) -> str | None:
    """A child norm without tensors that queries and keys share (Llama 4's qk_norm), by name."""
    from atlas.proof.library import is_weightless_norm

    return next((n for n, m in part.tiny.named_children() if n == "qk_norm" and is_weightless_norm(m)), None)


def _temperature(part: Part):
    """The query temperature a block without rotary angles applies (Llama 4): (attn_scale, floor_scale) at
    the checkpoint's and the tiny sizes, where the module holds the switch on and both numbers."""
    def settings(m):
        if not getattr(m, "attn_temperature_tuning", False):
            return None
        scale, floor = getattr(m, "attn_scale", None), getattr(m, "floor_scale", None)
        return (scale, floor) if isinstance(scale, (int, float)) and isinstance(floor, (int, float)) else None

    full, tiny = settings(part.full), settings(part.tiny)
    return (full, tiny) if full and tiny else None


def _temperature_step(part: Part) -> Step:
    """Each position's queries multiplied by 1 + attn_scale · ln(1 + ⌊(t + 1) / floor_scale⌋), t counted
    from 0 at the sequence's first token: the further into the context, the sharper the softmax."""
    import torch

    (scale, floor), (tiny_scale, tiny_floor) = _temperature(part)
    part.note("query_temperature", {"attn_scale": scale, "floor_scale": floor},
              "the module's settings; applied where it turns no rotary angles")

    def fn(e):
        positions = torch.arange(e["Q"].shape[-2], dtype=torch.float64)
        tau = 1 + tiny_scale * torch.log1p(torch.floor((positions + 1) / tiny_floor))
        return e["Q"] * tau[:, None]

    return Step(rf"{T.q('Q_{t,h}')}\leftarrow\big(1+{T.num(scale)}\,\ln(1+\lfloor (t+1)/{T.num(floor)}\rfloor)\big)\,{T.q('Q_{t,h}')}"
                r"\quad\text{the query temperature: position }t\text{ counted from }0", "Q", fn, summary=True)


def _qkv_clip(module) -> float | None:
    """The bound an attention module clamps its fused query-key-value projection to (its clip_qkv
    setting); None where it holds none or leaves it unset."""
    return _attr(module, "clip_qkv")


def _per_head_split(qkv, heads: int, head_dim: int):
    """A fused projection laid out head by head, each head's query, key and value side by side: the
    queries, keys and values each as one (batch, seq, heads * head_dim) tensor."""
    grouped = qkv.unflatten(-1, (heads, 3, head_dim))
    return tuple(grouped[..., j, :].flatten(-2) for j in range(3))


def _split_by_layout(qkv, layout: str, sizes: tuple[int, int, int], heads: int, head_dim: int):
    """The queries, keys and values of a fused projection's output, as ``layout`` orders its columns."""
    if layout == "per_head":
        return _per_head_split(qkv, heads, head_dim)
    if layout.startswith("sharded:"):
        _, groups, order = layout.split(":")
        return _sharded_split(qkv, int(groups), order)
    return qkv.split(sizes, dim=-1)


def _sharded_split(qkv, groups: int, order: str):
    """A fused projection cut into ``groups`` column groups (the model-parallel shards it was trained in,
    CodeGen's four), each holding its share of the three in ``order`` ("qvk": query, value, key): the
    queries, keys and values each as one (batch, seq, width) tensor, the groups' shares joined in turn."""
    parts = qkv.unflatten(-1, (groups, 3, -1))
    named = dict(zip(order, (parts[..., j, :].flatten(-2) for j in range(3))))
    return named["q"], named["k"], named["v"]


SHARD_ORDERS = ("qkv", "qvk")


def _fused_layout(part: Part, fused: str, sizes: tuple[int, int, int], heads: int, head_dim: int) -> str:
    """How a fused query-key-value projection orders its columns, measured on the run: the values the
    attention function received (never rotated) are one layout's third part. "blocks": all queries,
    then all keys, then all values; "per_head": each head's query, key and value side by side;
    "sharded:G:ORDER": G column groups, each its share of the three in ORDER (CodeGen's "sharded:4:qvk")."""
    import torch

    from atlas.proof.core import as64, captured_value

    values = captured_value(part, "attention_values")
    x = part.argument("hidden_states", 0)
    layouts = ["blocks"]
    if sizes[0] == sizes[1] == sizes[2]:
        layouts.append("per_head")
        # column groups of whole heads, each [query; key; value] or [query; value; key] (CodeGen)
        layouts += [f"sharded:{g}:{order}" for g in range(2, heads + 1) if heads % g == 0 for order in SHARD_ORDERS]
    if values is None or x is None:
        part.note("qkv_layout", "blocks", "the run recorded no values to measure it on")
        return "blocks"
    module = getattr(part.tiny, fused)
    weight = as64(module.weight)
    qkv = as64(x) @ (weight if weight.shape[0] == x.shape[-1] and not isinstance(module, torch.nn.Linear) else weight.T)
    if getattr(module, "bias", None) is not None:
        qkv = qkv + as64(module.bias)
    if _qkv_clip(part.tiny) is not None:
        qkv = qkv.clamp(-_qkv_clip(part.tiny), _qkv_clip(part.tiny))
    values = as64(values)
    for layout in layouts:
        v = _split_by_layout(qkv, layout, sizes, heads, head_dim)[2]
        v = v.unflatten(-1, (-1, head_dim)).transpose(1, 2)
        if v.shape == values.shape and float((v - values).abs().max()) <= 1e-4 * max(1.0, float(values.abs().max())):
            part.note("qkv_layout", layout, "measured: the fused projection's columns that give the values the attention function received")
            return layout
    part.note("qkv_layout", "blocks", "no layout gives the values the attention function received")
    return "blocks"


def _group_shares(joint, index: str, groups: tuple[int, int], order: str, names: dict, share: tuple[int, int], tail: str) -> "E.Lets":
    """A fused projection's output cut into ``groups`` (at the checkpoint's and the tiny sizes) column groups, each the
    shares of ``share`` columns of the names in ``order`` (a letter each, ``names`` giving its name and symbol), side by
    side: each name its share of every group, joined group by group; the names defined in ``names``' order."""
    (n, tiny_n), (w, tiny_w) = groups, share
    by_group, count, width = A.group_columns(index), E.Size(n, tiny_n), E.Size(len(order) * w, len(order) * tiny_w)
    lets = {c: E.Let(E.Sym(*names[c]), by_group(joint, width, count, E.Size(j * w + 1, j * tiny_w + 1), E.Size((j + 1) * w, (j + 1) * tiny_w)))
            for j, c in enumerate(order)}
    return E.Lets(tuple(lets[c] for c in names), tail, each=False)


def _last(steps: list[Step], name: str) -> Step:
    return next(s for s in reversed(steps) if s.out == name or (isinstance(s.out, tuple) and name in s.out))


def _rope_pair(rotate, parts: tuple, words: str) -> "E.Lets":
    """The rotary parts of latent attention's queries and keys, each turned by ``rotate`` (the variant that
    reproduced): one function, each part printed RoPE(part, R_t)."""
    def turn(x, angles):
        return rotate(x, angles[:, None]) if _complex_angles(angles) else rotate(x, angles[0][:, None], angles[1][:, None])

    rope = E.Function("RoPE", turn, lambda x, angles: rf"\operatorname{{RoPE}}({x},{angles})")
    angles = E.Sym("R", T.c("R_t"))
    return E.Lets(tuple(E.Let(p, rope(p, angles)) for p in parts), rf"\quad\text{{{words}}}", each=False)


def _claim(steps: list[Step], values: dict[str, str]) -> None:
    """Each name's last step claims its standard value (aligned with the step's outputs)."""
    for name, value in values.items():
        step = _last(steps, name)
        outs = step.out if isinstance(step.out, tuple) else (step.out,)
        claimed = list(step.value) if isinstance(step.value, tuple) else [None] * len(outs)
        claimed[outs.index(name)] = value
        step.value = tuple(claimed)


def attention(part: Part) -> Chain:
    if _alibi_given(part) and not _rotary_given(part):
        # ALiBi in place of rotary angles (BLOOM). Such a module computes its attention inline, so the run
        # records no values to read a fused projection's layout from: the layout that reproduces it is taken.
        # Where the bias is the slope times the key's position or minus the slope times the distance (one
        # softmax, other scores) is measured on the scores the run records.
        def layouts(form):
            return lambda: part.choose("qkv_layout", {"per_head": lambda: _attention(part, None, alibi=form, layout="per_head"),
                                                      "blocks": lambda: _attention(part, None, alibi=form, layout="blocks")})

        return part.choose("alibi_bias", {"key_position": layouts("key_position"), "minus_distance": layouts("minus_distance")})
    if not _rotary_given(part) and not _own_rotary(part):
        held = held_causal_mask(part.tiny)
        if held is not None and _attr(part.tiny, "scaling") is None:
            # the module keeps its causal mask (GPT-1): whether it adds −∞ where a key lies ahead, or puts
            # −10⁴ in the score's place there, is measured on the scores the run records
            # (it computes its attention inline, so the fused projection's layout is the one that reproduces it, as for BLOOM)
            part.note("held_mask", held, "the module's own buffer: ones where a query may read a key, zeros elsewhere")

            def layouts(form):
                return lambda: part.choose("qkv_layout", {"per_head": lambda: _attention(part, None, layout="per_head", mask_form=form),
                                                          "blocks": lambda: _attention(part, None, layout="blocks", mask_form=form)})

            return part.choose("mask_form", {"filled": layouts("filled"), "added": layouts("added")})
        if _attr(part.tiny, "scaling") is None:
            return _attention(part, None)
        # where the scale is applied: to the scores, or to the queries before them (OPT), as measured
        return part.choose("score_scale", {"on_scores": lambda: _attention(part, None),
                                           "on_queries": lambda: _attention(part, None, prescaled=True)})
    if _complex_angles(part.argument("position_embeddings")):
        # one complex factor per rotated pair (Llama 4): pairs turned in place, or the angles left unused
        # (its NoPE blocks), measured; a shared weightless q/k norm follows the rotation
        return part.choose("rotary_layout", {
            "interleaved_pairs_complex": lambda: _attention(part, rotate_pairs_complex, norm_after_rotary=True),
            "not_applied": lambda: _attention(part, None),
        })
    # "none": given the angles and leaving them unused (a NoPE block: SmolLM3, Llama 4), measured like the rest
    return part.choose("rotary_layout", {"halves": lambda: _attention(part, rotate_half),
                                         "halves_angle_per_pair": lambda: _attention(part, rotate_half_angles),
                                         "interleaved": lambda: _attention(part, rotate_interleaved),
                                         "interleaved_sin_first_angle_per_pair": lambda: _attention(part, rotate_interleaved_sin_first),
                                         "pairs_in_place": lambda: _attention(part, rotate_pairs_in_place),
                                         "not_applied": lambda: _attention(part, None),
                                         # per-head q/k norms applied to the rotated queries and keys (Hunyuan)
                                         "halves_then_head_norms": lambda: _attention(part, rotate_half, norm_after_rotary=True),
                                         # the halves turned by minus the angles, then the norms (nanochat)
                                         "halves_reversed_then_head_norms": lambda: _attention(part, rotate_half_reversed, norm_after_rotary=True)})


def _attention(part: Part, rotate, prescaled: bool = False,
               norm_after_rotary: bool = False, alibi: str | None = None, layout: str | None = None,
               mask_form: str = "added") -> Chain:
    h, kv, d = _heads(part, tiny=False)
    th, tkv, td = _heads(part, tiny=True)
    # values narrower than queries and keys where the module says so (MiMo-V2-Flash's v_head_dim)
    dv = _attr(part.full, "v_head_dim") if isinstance(_attr(part.full, "v_head_dim"), int) else d
    width = part.ctx.full_config.hidden_size
    names = set(dict(part.tiny.named_children()))
    steps: list[Step] = []
    Q, K, V = T.q("Q"), T.k("K"), T.v("V")
    # an output gate rides on the query projection: twice the query width, each head's [query; gate]
    separate = separate_qkv(part.tiny)  # (query, key, value) child names, the value None where keys serve as values
    gated = separate is not None and linear_dims(getattr(part.tiny, separate[0]))[1] == 2 * th * td
    keys_as_values = separate is not None and separate[2] is None and not names & {"qkv_proj", "c_attn", "query_key_value"}
    if (separate and separate[2]) or keys_as_values:
        q_name, k_name, v_name = separate
        projections = ((Q, q_name, h, "Q"), (K, k_name, kv, "K")) + (() if keys_as_values else ((V, v_name, kv, "V"),))
        for sym, name, heads, stream in projections:
            # each projection printed from its child (its bias as the child's chain found it)
            projected = linear_call(part, name, E.Sym("x", "x"), f"W_{stream}")
            if gated and name == q_name:
                steps.append(Step(expr=E.Let(E.Sym(stream, f"[{Q};G]"), projected, maps=(width, T.times(heads, 2 * d))), summary=True))
                continue
            # in the summary as its own line: folded into the heads' split it would print (x W^⊤)_{columns}
            steps.append(Step(expr=E.Let(E.Sym(stream, sym), projected, maps=(width, T.times(heads, dv if stream == "V" else d))), summary=True))
        if keys_as_values:  # no value projection: the values are the keys' projection, before its norm and rotation
            part.note("values", "the key projection's output", "the module has no value projection")
            steps.append(Step(rf"{V}={K}\quad\text{{(no value projection: the key projection's output serves as values)}}", "V", lambda e: e["K"], summary=True))
        out_proj = next(n for n in ("o_proj", "dense", "out_proj", "c_proj") if n in names)
    else:
        fused = next(n for n in ("qkv_proj", "c_attn", "query_key_value", "Wqkv") if n in names)
        _, n_out, stored = linear_dims(getattr(part.full, fused))
        joined = E.Sym("QKV", f"[{Q};{K};{V}]")
        steps.append(Step(expr=E.Let(joined, linear_call(part, fused, E.Sym("x", "x"), "W_{QKV}"), maps=(width, n_out)), summary=True))
        clip, tiny_clip = _qkv_clip(part.full), _qkv_clip(part.tiny)
        if clip is not None:
            # every entry of the fused projection clamped to [-clip, clip] before the split (DBRX's clip_qkv)
            part.note("qkv_clip", clip, "the module's clip_qkv: the fused projection's entries are clamped to ±clip")
            steps.append(Step(expr=E.Let(joined, E.clamp(joined, E.Size(clip, tiny_clip)), "(each entry)"), summary=True))
        sizes = (th * td, tkv * td, tkv * td)
        order = layout or _fused_layout(part, fused, sizes, th, td)
        names3 = {"q": ("Q", Q), "k": ("K", K), "v": ("V", V)}
        if order == "per_head":
            # each head's 3d columns its query, key and value side by side; each taken from every head, head by head
            steps.append(Step(expr=_group_shares(joined, "h", (h, th), "qkv", names3, (d, td),
                                                 rf"\quad\text{{each head's }}{T.num(3 * d)}\text{{ columns: its query, key and value side by side}}")))
        elif order.startswith("sharded:"):
            # G column groups, each its share of the three in the order ``within`` (CodeGen's [Q;V;K]), joined group by group
            _, groups, within = order.split(":")
            g = int(groups)
            steps.append(Step(expr=_group_shares(joined, "i", (g, g), within, names3, (h * d // g, th * td // g),
                                                 rf"\quad{g}\text{{ column groups of }}{T.num(3 * h * d // g)}\text{{, each }}"
                                                 rf"[{';'.join(names3[c][1] for c in within)}]\text{{ shares of }}{T.num(h * d // g)}")))
        else:
            # three blocks of columns side by side: the queries', the keys' and the values'
            widths = (h * d, kv * d, kv * d)
            blocks = tuple(E.Let(E.Sym(n, sym), A.column_block(joined, E.Size(sum(widths[:i]) + 1, sum(sizes[:i]) + 1),
                                                               E.Size(sum(widths[:i + 1]), sum(sizes[:i + 1]))))
                           for i, (n, sym) in enumerate((("Q", Q), ("K", K), ("V", V))))
            steps.append(Step(expr=E.Lets(blocks, each=False)))
        out_proj = next(n for n in ("o_proj", "c_proj", "dense", "out_proj") if n in names)
    part.note("heads", {"query": h, "key_value": kv, "head_dim": d}, "the module's and config's sizes")
    # an output gate of its own: a projection of the input as wide as the heads (AFMoE's gate_proj)
    own_gate = not gated and "gate_proj" in names and linear_dims(part.tiny.gate_proj)[1] == th * td
    if own_gate:
        part.note("output_gate", True, "a projection of the input as wide as the heads (gate_proj) gates their output")
        steps.append(Step(expr=E.Let(E.Sym("G", "G"), linear_call(part, "gate_proj", E.Sym("x", "x"), "W_G"), maps=(width, T.times(h, d)))))
    key_scale, tiny_key_scale = _attr(part.full, "key_multiplier"), _attr(part.tiny, "key_multiplier")
    if key_scale is not None and (key_scale != 1 or tiny_key_scale != 1):  # keys times a constant the module holds (Falcon-H1)
        part.note("key_multiplier", key_scale, "the module's key_multiplier, applied to the keys before the rotation")
        steps.append(Step(rf"{K}\leftarrow{T.num(float(key_scale))}\,{K}\quad\text{{(the module's key\_multiplier)}}", "K",
                          lambda e: tiny_key_scale * e["K"], summary=True))
    value_scale, tiny_value_scale = _attr(part.full, "v_scale"), _attr(part.tiny, "v_scale")
    if isinstance(value_scale, float) and (value_scale != 1 or tiny_value_scale != 1):  # values times a constant (MiMo-V2-Flash)
        part.note("value_scale", value_scale, "the module's v_scale (the config's attention_value_scale), applied to the values")
        values = E.Sym("V", V)
        steps.append(Step(expr=E.Let(values, E.Size(value_scale, tiny_value_scale) * values, "(the module's v_scale)"), summary=True))
    if prescaled:
        scale, tiny_scale = _attr(part.full, "scaling"), _attr(part.tiny, "scaling")
        queries = E.Sym("Q", Q)
        steps.append(Step(expr=E.Let(queries, E.Size(scale, tiny_scale) * queries, "(scaled before the scores)"), summary=True))
    if gated:
        part.note("output_gate", True, "the query projection is twice the heads' width: each head's second half gates its output")

        steps.append(Step(expr=_group_shares(E.Sym("Q", f"[{Q};G]"), "h", (h, th), "qg", {"q": ("Q", Q), "g": ("G", "G")}, (d, td),
                                             rf"\quad\text{{the two halves of each head's }}{T.num(2 * d)}\text{{ columns}}")))
    qn, kn = next(((q, k) for q, k in QK_NORM_NAMES if {q, k} <= names), QK_NORM_NAMES[0])
    norms = {n: getattr(part.tiny, n) for n in (qn, kn) if n in names}
    # a gain one head wide, or none (nanochat's weightless q/k norms, called on each head's vector)
    per_head = bool(norms) and (getattr(norms[qn], "weight", None) is None or norms[qn].weight.shape[-1] == td)
    if norms and not per_head:  # normalized across all heads' width, before the split (OLMo 2)
        steps += [Step(rf"{Q}\leftarrow\operatorname{{Norm}}_q({Q}),\ {K}\leftarrow\operatorname{{Norm}}_k({K})\quad\text{{across the whole width}}", ("Q", "K"),
                       lambda e, fq=sub(part, qn, x="Q"), fk=sub(part, kn, x="K"): (fq(e), fk(e)))]
        steps[-1].sub = f"{part.id}.{qn}"

    # each head its own block of its projection's columns: the queries' by h, the keys' and values' by g
    by_h, by_g = A.head_columns("h"), A.head_columns("g")
    heads = E.Lets((E.Let(E.Sym("Q", T.q("Q_h")), by_h(E.Sym("Q", T.q("Q")), E.Size(d, None), E.Size(h, th))),
                    E.Let(E.Sym("K", T.k("K_g")), by_g(E.Sym("K", T.k("K")), E.Size(d, None), E.Size(kv, tkv))),
                    E.Let(E.Sym("V", T.v("V_g")), by_g(E.Sym("V", T.v("V")), E.Size(dv, None), E.Size(kv, tkv)))),
                   rf":\ h=1..{T.num(h)},\ g=1..{T.num(kv)}", each=False)
    steps.append(Step(expr=heads))
    query_heads, key_heads = E.Sym("Q", T.q("Q_h")), E.Sym("K", T.k("K_g"))

    def each_norm(q_child: str, k_child: str, q_name: str, k_name: str, words: str) -> Step:
        """The query heads and the key heads each through a norm child, one step (the page links the first)."""
        pair = E.Lets((E.Let(query_heads, apply_child(part, q_child, lambda a: f"{q_name}({a})", x=query_heads)),
                       E.Let(key_heads, apply_child(part, k_child, lambda a: f"{k_name}({a})", x=key_heads))),
                      tail=words, each=False)
        return Step(expr=pair)

    head_norms = [each_norm(qn, kn, r"\operatorname{Norm}_q", r"\operatorname{Norm}_k", rf"\quad\text{{per head, over }}{T.num(d)}"
                            + (r"\ \text{(after the rotation)}" if norm_after_rotary else ""))] if norms and per_head else []
    shared_norm = _shared_qk_norm(part)
    if shared_norm:  # one norm without a gain for queries and keys alike, per head (Llama 4's qk_norm)
        part.note("qk_norm", "one weightless norm for queries and keys, per head", "the module's child holds no tensor")
        head_norms = [each_norm(shared_norm, shared_norm, r"\operatorname{Norm}", r"\operatorname{Norm}",
                                rf"\quad\text{{per head, over }}{T.num(d)}\text{{, no gain; after the rotation, which keeps each pair's length}}")]
    if not norm_after_rotary:
        steps += head_norms
    if "v_norm" in names:  # the values normalized per head too (Gemma 4)
        steps.append(Step(rf"{T.v('V_g')}\leftarrow\operatorname{{Norm}}_v({T.v('V_g')})\quad\text{{per head, over }}{T.num(d)}", "V",
                          sub(part, "v_norm", x="V")))
    inputs = [X]
    own = _own_rotary(part)
    if (_rotary_given(part) or own) and rotate is None:  # handed the angles, applies none (Cohere 2's global layers)
        part.note("positions", "none: the rotary angles it is handed are not applied", "measured: only the chain without rotation reproduces it")
    elif _rotary_given(part) and _complex_angles(part.argument("position_embeddings")):
        inputs.append(ROTARY_COMPLEX)
        part.note("positions", "rotary, one complex factor per adjacent pair of dims", "the module is given complex factors")
        R = T.c("R_{t,j}")
        steps.append(Step(rf"({T.q('Q')}_{{t,h,2j}}+i\,{T.q('Q')}_{{t,h,2j+1}})\leftarrow {R}\,({T.q('Q')}_{{t,h,2j}}+i\,{T.q('Q')}_{{t,h,2j+1}}),"
                          rf"\ \text{{likewise }}{T.k('K_{t,g}')};\ {R}=\cos\theta_{{t,j}}+i\sin\theta_{{t,j}},\ j=1..{T.num(d // 2)}",
                          ("Q", "K"), lambda e: tuple(rotate_pairs_complex(e[n], e["R"][:, None]) for n in ("Q", "K")), summary=True))
    elif _rotary_given(part) or own:
        if own:  # the attention computes its angles from the positions it is called with (RecurrentGemma)
            import torch

            steps.append(Step(r"p_t=t,\ t=0..T-1\quad\text{(the call's positions: a prompt with nothing cached)}", "pos",
                              lambda e: torch.arange(e["x"].shape[1])[None]))
            steps.append(Step(rf"{T.c('R')}=\operatorname{{RoPE}}(p)", "R", sub(part, own, x="x", pos="pos")))
            angles = part.child(own).call.output
            part.note("rotary_inside", own, "the child that turns the positions the attention is called with into cos and sin")
        else:
            inputs.append(ROTARY)
            angles = part.argument("position_embeddings")
        turned = angles[0].shape[-1] * (2 if getattr(rotate, "per_pair", False) else 1)
        partial = turned < td
        part.note("positions", "rotary" + (f" on the first {turned} of {td} dims (tiny)" if partial else ""),
                  "the module computes cos and sin from the positions" if own else "the module is given cos and sin")
        R = T.c("R_t")
        only = _partial_rotary_words(part, d, turned, td) if partial else _zero_angle_words(part, rotate, d, td)
        # the rotation that runs and its notation, one function: rot's definition is the variant's own
        turn = E.Function(f"rotation {rotate.__name__}", lambda x, angles: rotate(x, angles[0][:, None], angles[1][:, None]),
                          lambda x, angles: rf"{x}\odot\cos {R}+\operatorname{{rot}}({x})\odot\sin {R}")
        queries, keys = E.Sym("Q", T.q("Q_{t,h}")), E.Sym("K", T.k("K_{t,g}"))
        steps.append(Step(expr=E.likewise(turn, [queries, keys], E.Sym("R", R), tail=r";\ " + rotate.rot_tex + only), summary=True))
    elif alibi:
        part.note("positions", "ALiBi: a bias on the scores, linear in the key's position, one slope a head", "the module is handed an alibi tensor and no rotary angles")
    else:
        part.note("positions", "none inside the attention", "the module is given no rotary angles")
    if norm_after_rotary:
        steps += head_norms
    if rotate is None and _temperature(part) is not None:
        steps.append(_temperature_step(part))
    _claim(steps, {"Q": "attention_queries", "K": "attention_keys", "V": "attention_values"})
    group = h // kv
    scored = value_scored_mask(part.tiny)
    if scored:  # a mask scored from the values (Doge's dynamic mask): the keys' scores, from the heads just split
        steps += value_mask.score_steps(part, scored, (kv, tkv))
    heads = (("K", lambda i: T.k("K" + i)), ("V", lambda i: T.v("V" + i)))
    if group > 1:
        shared = [E.Let(E.Sym(n, sym("_h")), A.shared_head(E.Sym(n, sym("_g")), E.Size(group, th // tkv))) for n, sym in heads]
        steps.append(Step(expr=E.Lets(tuple(shared), rf"\quad\text{{{group} query heads share each key–value head}}", each=False)))
    else:  # each query head reads the key-value head of its own number: the names carried over as they are
        own = tuple(E.Let(E.Sym(n, sym("_h")), E.Sym(n, sym("_g"))) for n, sym in heads)
        steps.append(Step(expr=E.Lets(own, r"\quad\text{one key–value head per query head}", each=False)))
    _scores_to_output(part, steps, h, dv, out_proj, T.times(h, dv), prescaled, gated=gated or own_gate, alibi=alibi, mask_form=mask_form,
                      scored=(lambda S: value_mask.scored_mask(part, S, (group, th // tkv))) if scored else None)
    if "resid_dropout" in names:
        delta = E.Sym("y", r"\Delta")
        steps.append(Step(expr=E.Let(delta, apply_child(part, "resid_dropout", lambda a: rf"\operatorname{{Dropout}}({a})", x=delta),
                                     "(the identity at inference)")))
    return add_handed_residual(part, Chain(steps, inputs, "y", output_element=0))


def latent_attention(part: Part) -> Chain:
    """Multi-head latent attention: queries and keys/values rebuilt from small per-token latents, a
    rotary part of each query and one rotary key shared by every head."""
    cfg, tcfg = part.ctx.full_config, part.ctx.tiny_config
    h, th = cfg.num_attention_heads, tcfg.num_attention_heads
    nope, rope, dv = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    tn, tr, tdv = tcfg.qk_nope_head_dim, tcfg.qk_rope_head_dim, tcfg.v_head_dim
    width, rkv, tkv = cfg.hidden_size, cfg.kv_lora_rank, tcfg.kv_lora_rank
    names = set(dict(part.tiny.named_children()))
    qC, qR, kC, kR = T.q("q^{C}_h"), T.q("q^{R}_h"), T.k("k^{C}_h"), T.k("k^{R}")
    cq, cq_hat, ckv, ckv_hat = T.q("c^{Q}"), T.q(r"\hat c^{Q}"), T.k("c^{KV}"), T.k(r"\hat c^{KV}")

    # Latents scaled by the square root of the width over their rank (LongCat-Flash's mla_scale_q_lora,
    # mla_scale_kv_lora): settings the module holds, multiplied in after the split and after the norm
    sq, skv = getattr(part.full, "mla_scale_q_lora", None), getattr(part.full, "mla_scale_kv_lora", None)
    tsq, tskv = getattr(part.tiny, "mla_scale_q_lora", None), getattr(part.tiny, "mla_scale_kv_lora", None)
    lora_scales = all(isinstance(v, float) for v in (sq, skv, tsq, tskv))
    if lora_scales:
        part.note("latent_scales", {"queries": sq, "keys_values": skv}, "the module's settings")

    # the latent projections' results, each a pair of parts side by side
    queries, latent = E.Sym("q", rf"[{qC};\,{qR}]"), E.Sym("ckv", rf"[{ckv};\,{kR}]")
    query_heads = T.times(h, f"({T.num(nope)}+{T.num(rope)})")

    def per_head_parts(joint, parts) -> "E.Lets":
        """Each head's columns of ``joint`` cut into ``parts`` (name, symbol, width, tiny width), in order: head h's
        part j its columns after the parts before it, printed by their range (h-1)·w+a .. (h-1)·w+b."""
        full, tiny = sum(p[2] for p in parts), sum(p[3] for p in parts)
        width, heads, by_h = E.Size(full, tiny), E.Size(h, th), A.head_part("h")
        lets, at, tiny_at = [], 0, 0
        for name, symbol, n, tn_ in parts:
            lets.append(E.Let(E.Sym(name, symbol), by_h(joint, width, heads, E.Size(at + 1, tiny_at + 1), E.Size(at + n, tiny_at + tn_))))
            at, tiny_at = at + n, tiny_at + tn_
        return E.Lets(tuple(lets), rf":\ h=1..{T.num(h)}", each=False)

    def build(rotate, words: str) -> Chain:
        steps: list[Step] = []
        if "q_a_proj" in names:
            rq = cfg.q_lora_rank
            steps += [
                Step(expr=E.Let(E.Sym("cq", cq), linear_call(part, "q_a_proj", E.Sym("x", "x"), "W_{DQ}"), maps=(width, rq))),
                Step(expr=E.Let(E.Sym("cq", cq_hat), norm_call(part, "q_a_layernorm", E.Sym("cq", cq)))),
                Step(expr=E.Let(queries, linear_call(part, "q_b_proj", E.Sym("cq", cq_hat), "W_{UQ}"), maps=(rq, query_heads)), summary=True),
            ]
        else:
            steps.append(Step(expr=E.Let(queries, linear_call(part, "q_proj", E.Sym("x", "x"), "W_Q"), maps=(width, query_heads)), summary=True))

        shared = "one rotary key for every head" if rotate else "one key part for every head, turned by nothing"
        # each head's columns of the query projection: its first nope columns q^C_h, its last rope columns q^R_h
        steps.append(Step(expr=per_head_parts(queries, (("qC", qC, nope, tn), ("qR", qR, rope, tr)))))
        if lora_scales:
            scale = E.Size(sq, tsq)
            scaled = tuple(E.Let(E.Sym(n, sym), scale * E.Sym(n, sym)) for n, sym in (("qC", qC), ("qR", qR)))
            steps.append(Step(expr=E.Lets(scaled, rf"\quad\text{{(}}\sqrt{{{T.num(width)}/{T.num(cfg.q_lora_rank)}}}\text{{, the width over the query latent's)}}", each=False)))
        steps += [
            Step(expr=E.Let(latent, linear_call(part, "kv_a_proj_with_mqa", E.Sym("x", "x"), "W_{DKV}"), maps=(width, f"{T.num(rkv)}+{T.num(rope)}")),
                 summary=True),
            # the joint latent's first columns the key-value latent, its last the rotary key, one head every head reads
            Step(expr=E.Lets((E.Let(E.Sym("ckv", ckv), A.column_block(latent, E.Size(1, 1), E.Size(rkv, tkv))),
                              E.Let(E.Sym("kR", kR), A.one_head(A.column_block(latent, E.Size(rkv + 1, tkv + 1), E.Size(rkv + rope, tkv + tr))))),
                             each=False)),
            Step(expr=E.Let(E.Sym("ckv", ckv_hat), norm_call(part, "kv_a_layernorm", E.Sym("ckv", ckv)))),
        ]
        if lora_scales:
            normed = E.Sym("ckv", ckv_hat)
            steps.append(Step(expr=E.Let(normed, E.Size(skv, tskv) * normed,
                                         f"(the square root of {width:,}/{rkv:,}, the width over the key-value latent's)")))
        steps += [
            Step(expr=E.Let(E.Sym("kv", rf"[{kC};\,{T.v('v_h')}]"), linear_call(part, "kv_b_proj", E.Sym("ckv", ckv_hat), "W_{UKV}"),
                            maps=(rkv, T.times(h, f"({T.num(nope)}+{T.num(dv)})"))), summary=True),
            # each head's columns of the key-value up-projection: its first nope columns k^C_h, its last v_head_dim the values
            Step(expr=per_head_parts(E.Sym("kv", rf"[{kC};\,{T.v('v_h')}]"), (("kC", kC, nope, tn), ("V", T.v("V_h"), dv, tdv))),
                 value=(None, "attention_values")),
            *([Step(expr=_rope_pair(rotate, (E.Sym("qR", qR), E.Sym("kR", kR)), words), summary=True)] if rotate else []),
            # each head's query and key: its two parts side by side, the one rotary key repeated for every head
            Step(expr=E.Lets((E.Let(E.Sym("Q", T.q("Q_h")), A.parts_joined(E.Sym("qC", qC), E.Sym("qR", qR))),
                              E.Let(E.Sym("K", T.k("K_h")), A.parts_joined(E.Sym("kC", kC), A.every_head(E.Sym("kR", kR), E.Size(h, th))))),
                             rf"\in\mathbb{{R}}^{{{T.num(nope + rope)}}}\quad\text{{{shared}}}", each=False),
                 value=("attention_queries", "attention_keys"), summary=True),
        ]
        selected = None
        indexer = next((n for n, m in part.tiny.named_children() if is_indexer(m)), None)
        if indexer is not None:
            from atlas.proof.sparse import selection_mask

            keep, tiny_keep = _attr(getattr(part.full, indexer), "index_topk"), _attr(getattr(part.tiny, indexer), "index_topk")
            steps += [
                Step(rf"{T.c('M_{ts}')}=0\ \text{{if}}\ s\le t,\ -\infty\ \text{{otherwise}}\quad\text{{the causal mask the indexer is given}}", "Mc",
                     lambda e: _mask(e["x"].shape[1], None)[None]),
                Step(rf"{T.c('I_{ts}')}=\operatorname{{Indexer}}(x,\,{cq_hat},\,{T.c('R')},\,{T.c('M')})\quad\text{{a score for every key position }}s\text{{ of query }}t",
                     "I", sub(part, indexer, x="x", cq="cq", R="R", M="Mc"), summary=True),
                Step(rf"P_t=\operatorname{{top}}_{{{T.num(keep)}}}\ s\text{{ by }}{T.c('I_{ts}')}\quad\text{{the positions query }}t\text{{ may attend}}", "Msel",
                     lambda e: selection_mask(e["I"], tiny_keep)),
            ]
            selected = "Msel"
        _scores_to_output(part, steps, h, dv, "o_proj", T.times(h, dv), selected=selected)
        return Chain(steps, [X, rotary_input(part.argument("position_embeddings"))] if rotate else [X], "y", output_element=0)

    part.note("latent", {"kv_lora_rank": rkv, "q_lora_rank": getattr(cfg, "q_lora_rank", None), "rope_dims": rope}, "the config's sizes")
    if not _rotary_given(part):  # no rotary angles (Kimi Linear's MLA): the "rotary" parts are plain projections
        part.note("positions", "none inside the attention", "the module is given no rotary angles")
        return build(None, "")
    if _complex_angles(part.argument("position_embeddings")):
        # The model hands one complex number per rotated pair (cos + i sin, times any rotary attention
        # factor) instead of a (cos, sin) pair: the other layouts cannot even read it.
        return part.choose("rotary_layout", {
            "interleaved_pairs_complex": lambda: build(rotate_pairs_complex, "dims taken in adjacent pairs, each pair turned (and scaled) by the given complex factor; the pairs stay in place"),
        })
    return part.choose("rotary_layout", {
        "interleaved_pairs": lambda: build(rotate_pairs, "dims taken in adjacent pairs"),
        "halves": lambda: build(rotate_half, "the first half of the dims paired with the second half"),
    })
