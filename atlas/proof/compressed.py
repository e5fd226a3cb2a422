"""Attention over a sliding window plus a compressed history (DeepSeek-V4): one head serves as key and value,
queries from a low-rank latent, a learned sink per head, the rotation undone on the output, and heads
projected to the width by groups; and the compressors that pool windows of positions into keys.

A compressor projects each position to values and gates, adds a learned bias per slot of the window to
the gates, and pools each closed window of m positions (the gates' softmax over the window's slots weighting
the values) into one key, which an RMSNorm and a rotation at the window's first position follow. Where it
compresses by 4 the windows overlap: each position gives two series, one for its own window and one for the
next, so a key pools 2m slots; a lightning indexer of its own then scores every compressed key for each
query and keeps the best index_topk. A query sees a compressed key only once the key's window has closed.

Which module is which is read from its children and tensors: the attention's query latent, its shared
key-value projection, its two output maps and its sink vector; a compressor's value and gate projections,
its slot bias and its norm.
"""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof.library import X, linear_call, linear_dims, norm_call, sub
from atlas.proof.rope import Rope, frequency_rule
from atlas.proof.steps import Chain, Input, Step
from atlas.model.structure import is_compressed_indexer, is_window_compressor, own_parameters as _own  # noqa: F401 - the predicates are the model's; kinds asks them here

ATTENTION_CHILDREN = {"q_a_proj", "q_a_norm", "q_b_proj", "q_b_norm", "kv_proj", "kv_norm", "o_a_proj", "o_b_proj"}

ANGLES = Input("R", T.c("R"), "position_embeddings", "cos and sin of each position's rotary angles, for the main and the compressed blocks", given=True)
MASK = Input("M", T.c("M"), "attention_mask", "the sliding-window causal mask: 0 where the key is visible, -∞ where not")
POSITIONS = Input("pos", "p", "position_ids", "the positions of the call")
LATENT = Input("cq", T.q(r"\hat c^{Q}"), "q_residual", "the attention's normalized query latent")


def is_shared_kv_attention(module) -> bool:
    children = set(dict(module.named_children()))
    own = _own(module)
    return ATTENTION_CHILDREN <= children and set(own) == {"sinks"} and own["sinks"].dim() == 1


def is_index_scorer(module) -> bool:
    children = dict(module.named_children())
    return set(children) == {"weights_proj"} and not _own(module) and hasattr(module, "softmax_scale")


def is_rotary_table(module) -> bool:
    """Rotary angles from positions, one frequency table per kind of block (the module's 1-D float buffers,
    named after the kinds), chosen by the call's layer_type."""
    import inspect

    import torch

    if list(module.children()) or list(module.parameters(recurse=False)):
        return False
    buffers = dict(module.named_buffers(recurse=False))
    if not buffers or any(b.dim() != 1 or not torch.is_floating_point(b) for b in buffers.values()):
        return False
    return "layer_type" in inspect.signature(module.forward).parameters


def turn_last(x, cos, sin):
    """The last 2·len(cos) dims of x turned in adjacent pairs (x0, x1), (x2, x3), …, one angle a pair; the
    leading dims pass unrotated."""
    import torch

    r = 2 * cos.shape[-1]
    keep, rot = x[..., :-r], x[..., -r:]
    a, b = rot[..., 0::2], rot[..., 1::2]
    turned = torch.stack((a * cos - b * sin, b * cos + a * sin), dim=-1).flatten(-2)
    return torch.cat((keep, turned), dim=-1)


def rotary_table(part: Part) -> Chain:
    kind = part.argument("layer_type", 2)
    full_params = part.ctx.full_config.rope_parameters[kind]
    tiny_params = part.ctx.tiny_config.rope_parameters[kind]
    full_rot = int(part.ctx.full_config.head_dim * full_params.get("partial_rotary_factor", 1.0))
    tiny_rot = int(part.ctx.tiny_config.head_dim * tiny_params.get("partial_rotary_factor", 1.0))
    yarn = full_params.get("rope_type", full_params.get("type")) == "yarn"
    scale = float(full_params.get("attention_factor", 1.0)) if yarn else 1.0
    tiny_scale = float(tiny_params.get("attention_factor", 1.0)) if yarn else 1.0
    part.note("angles", {"kind": kind, "rope_theta": full_params["rope_theta"], "rotated_dims": full_rot, "yarn": yarn, "scale": scale},
              "the config's rope_parameters for the call's layer_type")
    positions = Input("pos", "p", "position_ids", "the positions the angles are computed for")
    x = Input("x", "x", "x", "a tensor whose dtype the angles take")
    # the frequencies by the rope's own rule (atlas.proof.rope): YaRN's ramp, or the plain powers
    ropes = [Rope("yarn" if yarn else "default", float(params["rope_theta"]), rot // 2, config.head_dim, params, config.max_position_embeddings)
             for params, rot, config in ((full_params, full_rot, part.ctx.full_config), (tiny_params, tiny_rot, part.ctx.tiny_config))]
    rule, note = frequency_rule(*ropes, "pos")
    turned = A.angles(E.Sym("pos", "p"), E.Sym("f", "f"))
    a = E.Size(scale, tiny_scale) if (scale, tiny_scale) != (1.0, 1.0) else None
    steps = [
        # a line of the summary: folded into the angles, a sum would stand beside p unbracketed
        Step(expr=E.Let(E.Sym("f", "f_j"), rule, note), summary=True),
        Step(expr=E.Lets(tuple(E.Let(E.Sym(name, name[0]), f(turned) if a is None else a * f(turned)) for name, f in (("cos", E.cos), ("sin", E.sin))),
                         r"\quad\text{(one angle per rotated pair)}", each=False), summary=True),
    ]
    return Chain(steps, [x, positions], ("cos", "sin"))


def index_scorer(part: Part) -> Chain:
    h = part.full.weights_proj.weight.shape[0]
    th = part.tiny.weights_proj.weight.shape[0]
    scale, tiny_scale = float(part.full.softmax_scale), float(part.tiny.softmax_scale)
    q = Input("q", T.q("q^{I}"), "q", "the indexer's rotated queries, per head")
    k = Input("k", T.k("K^{I}"), "compressed_kv", "the indexer's compressed keys")

    def scores(e):
        s = (e["q"] @ e["k"].transpose(-1, -2)[:, None]).clamp(min=0) * tiny_scale  # (B, S, H, T)
        w = e["wts"] * th ** -0.5
        return (s * w[..., None]).sum(2)

    steps = [
        Step(rf"w_{{t,j}}=(x_t W_w^{{\top}})_j/\sqrt{{{T.num(h)}}}", "wts", sub(part, "weights_proj")),
        Step(rf"I_{{ts}}=\textstyle\sum_j w_{{t,j}}\operatorname{{ReLU}}(q_{{t,j}}\cdot k_s)\cdot{T.num(scale)}", "I", scores, summary=True),
    ]
    return Chain(steps, [q, k, X], "I")


def _pool(e, kv, gate, bias, rate, overlap: bool, width: int):
    """Closed windows of ``rate`` positions pooled by the gates' softmax over the window's slots."""
    import torch

    B, S, _ = kv.shape
    n = S // rate
    kv, gate = kv[:, : n * rate].reshape(B, n, rate, -1), gate[:, : n * rate].reshape(B, n, rate, -1) + bias
    if overlap:  # slots: the previous window's first series, then this window's second series
        vals = torch.zeros(B, n, 2 * rate, width, dtype=kv.dtype)
        gates = torch.full((B, n, 2 * rate, width), float("-inf"), dtype=kv.dtype)
        vals[:, :, rate:], gates[:, :, rate:] = kv[..., width:], gate[..., width:]
        vals[:, 1:, :rate], gates[:, 1:, :rate] = kv[:, :-1, :, :width], gate[:, :-1, :, :width]
        kv, gate = vals, gates
    return (kv * gate.softmax(dim=2)).sum(2), n


def compressor(part: Part) -> Chain:
    import torch

    rate, tiny_rate = part.full.compress_rate, part.tiny.compress_rate
    full_width, tiny_width = part.full.head_dim, part.tiny.head_dim
    d_in, d_out, _ = linear_dims(part.full.kv_proj)
    overlap = d_out == 2 * full_width
    has_indexer = "indexer" in dict(part.tiny.named_children())
    inputs = [X, LATENT, POSITIONS]
    part.note("compression", {"rate": rate, "overlapping": overlap, "indexer": has_indexer}, "the module's rate and the width of its projections")
    slots = 2 * rate if overlap else rate

    def pooled(e):
        c, n = _pool(e, e["v"], e["g"], e.w("position_bias"), tiny_rate, overlap, tiny_width)
        return c, torch.arange(n)[None] * tiny_rate

    def rotated(e):
        cos, sin = e["cs"]
        return turn_last(e["c"][:, None], cos[:, None], sin[:, None])  # (B, 1, T, D)

    def visible(e):
        T_ = e["C"].shape[2]
        limit = (e["pos"] + 1) // tiny_rate  # (B, S): query t sees entry w once w < (t + 1) / m
        hidden = torch.arange(T_)[None, None] >= limit[..., None]
        return torch.zeros(hidden.shape, dtype=torch.float64).masked_fill(hidden, float("-inf"))[:, None]

    pool_tex = (rf"c_w=\textstyle\sum_{{i=1}}^{{{T.num(slots)}}}\operatorname{{softmax}}_i(g_i+B_i)\odot v_i\quad"
                + (rf"\text{{slots: window }}w-1\text{{'s first series, window }}w\text{{'s second}}" if overlap
                   else rf"\text{{the {T.num(rate)} positions of window }}w"))
    steps = [
        # each projection and the norm its own expression, printed from the child that runs
        Step(expr=E.Let(E.Sym("v", "v"), linear_call(part, "kv_proj", E.Sym("x", "x"), "W_v"), f"two series of {full_width} each" if overlap else "",
                        maps=(d_in, d_out))),
        Step(expr=E.Let(E.Sym("g", "g"), linear_call(part, "gate_proj", E.Sym("x", "x"), "W_g"), maps=(d_in, d_out))),
        Step(pool_tex, ("c", "p_c"), pooled, summary=True),
        Step(expr=E.Let(E.Sym("c", "c_w"), norm_call(part, "kv_norm", E.Sym("c", "c_w")))),
        Step(rf"(\cos,\sin)=\operatorname{{Angles}}(w\cdot{T.num(rate)})\quad\text{{each key at its window's first position}}", "cs",
             sub(part, "rotary_emb", x="c", pos="p_c")),
        Step(r"C_w=\operatorname{rot}(c_w)\quad\text{the last dims turned in pairs}", "C", rotated, summary=True),
        Step(rf"B_{{tw}}=0\ \text{{if }}w<\lfloor(t+1)/{T.num(rate)}\rfloor\text{{, else }}-\infty\quad\text{{a key once its window has closed}}", "Bc", visible),
    ]
    if has_indexer:
        steps += [
            Step(r"P_t=\operatorname{Indexer}(x,\hat c^Q,p)\quad\text{the compressed keys query }t\text{ may read (-1: none)}", "P",
                 sub(part, "indexer", x="x", cq="cq", pos="pos")),
            Step(r"B_{tw}=0\ \text{if }w\in P_t\text{, else }-\infty", "Bc",
                 lambda e: _kept(e["P"], e["C"].shape[2])),
        ]
    return Chain(steps, inputs, ("C", "Bc"))


def _kept(P, T_):
    import torch

    P = P.long()
    valid = P >= 0
    safe = torch.where(valid, P, torch.full_like(P, T_))
    bias = torch.full((*P.shape[:2], T_ + 1), float("-inf"), dtype=torch.float64).scatter(-1, safe, 0.0)
    return bias[..., :T_][:, None]


def indexer(part: Part) -> Chain:
    """DeepSeek-V4's indexer: its own overlapping compressor at index_head_dim, queries from the query
    latent rotated at the query positions, the scorer, the future masked, the best index_topk kept."""
    import torch

    rate, keep, tiny_rate = part.full.compress_rate, part.full.index_topk, part.tiny.compress_rate
    tiny_keep = part.tiny.index_topk
    h, d = part.full.num_heads, part.full.head_dim
    th, td = part.tiny.num_heads, part.tiny.head_dim
    part.note("indexer", {"heads": h, "head_dim": d, "rate": rate, "keeps": keep}, "the module's sizes")

    def pooled(e):
        c, n = _pool(e, e["v"], e["g"], e.w("position_bias"), tiny_rate, True, td)
        return c, torch.arange(n)[None] * tiny_rate

    def keys(e):
        cos, sin = e["cs"]
        return turn_last(e["c"], cos, sin)

    def queries(e):
        cos, sin = e["cq_angles"]
        q = e["qb"].unflatten(-1, (th, td))  # (B, S, H, D)
        return turn_last(q, cos[:, :, None], sin[:, :, None])

    def masked(e):
        T_ = e["K"].shape[1]
        limit = (e["pos"] + 1) // tiny_rate
        return e["I"].masked_fill(torch.arange(T_)[None, None] >= limit[..., None], float("-inf"))

    def top(e):
        T_ = e["K"].shape[1]
        k = min(tiny_keep, T_)
        limit = (e["pos"] + 1) // tiny_rate
        P = e["Im"].topk(k, dim=-1).indices
        return torch.where(P >= limit[..., None], torch.full_like(P, -1), P)

    steps = [
        Step(expr=E.Let(E.Sym("v", "v"), linear_call(part, "kv_proj", E.Sym("x", "x"), "W_v"), f"two series of {d}")),
        Step(expr=E.Let(E.Sym("g", "g"), linear_call(part, "gate_proj", E.Sym("x", "x"), "W_g"))),
        Step(rf"c_w=\textstyle\sum_{{i=1}}^{{{T.num(2 * rate)}}}\operatorname{{softmax}}_i(g_i+B_i)\odot v_i\quad\text{{overlapping windows, as the attention's compressor}}",
             ("c", "p_c"), pooled),
        Step(expr=E.Let(E.Sym("c", "c_w"), norm_call(part, "kv_norm", E.Sym("c", "c_w")))),
        Step(r"(\cos,\sin)=\operatorname{Angles}(w\cdot m)", "cs", sub(part, "rotary_emb", x="c", pos="p_c")),
        Step(r"K^{I}_w=\operatorname{rot}(c_w)", "K", keys),
        Step(r"(\cos,\sin)=\operatorname{Angles}(t)\quad\text{at the query positions}", "cq_angles", sub(part, "rotary_emb", x="x", pos="pos")),
        Step(expr=E.Let(E.Sym("qb", "q^{I}"), linear_call(part, "q_b_proj", E.Sym("cq", r"\hat c^Q"), "W_{QI}"), f"{h} heads of {d}")),
        Step(r"q^{I}\leftarrow\operatorname{rot}(q^{I})", "q", queries),
        Step(r"I=\operatorname{Score}(q^{I},K^{I},x)", "I", sub(part, "scorer", q="q", k="K", x="x"), summary=True),
        Step(rf"I_{{tw}}\leftarrow-\infty\ \text{{where }}w\ge\lfloor(t+1)/{T.num(rate)}\rfloor", "Im", masked),
        Step(rf"P_t=\operatorname{{top}}_{{{T.num(keep)}}}(I_t)\quad\text{{a pick past the visible keys becomes }}-1", "P", top, summary=True),
    ]
    return Chain(steps, [X, LATENT, POSITIONS], "P")


def shared_kv_attention(part: Part) -> Chain:
    """The whole attention of a DeepSeek-V4 block: window keys, compressed keys where the block has a compressor."""
    import torch

    full, tiny = part.full, part.tiny
    H, D, tH, tD = full.num_heads, full.head_dim, tiny.num_heads, tiny.head_dim
    kind = tiny.rope_layer_type
    G, tG = full.config.o_groups, tiny.config.o_groups
    scale, tiny_scale = float(full.scaling), float(tiny.scaling)
    has_compressor = tiny.compressor is not None
    d = part.ctx.full_config.hidden_size
    ql = linear_dims(full.q_a_proj)[1]
    part.note("heads", {"query_heads": H, "key_value_heads": 1, "head_dim": D}, "the module's sizes")
    part.note("angles", kind, "the module's rope_layer_type")
    part.note("compressor", has_compressor, "the module's children")
    inputs = [X, ANGLES, MASK, POSITIONS]

    def pick(e):
        cos, sin = e["R"][kind]
        return cos, sin

    def heads(e):
        return e["qb"].unflatten(-1, (tH, tD)).transpose(1, 2)  # (B, H, S, D)

    def turn_q(e):
        cos, sin = e["cs"]
        return turn_last(e["q"], cos[:, None], sin[:, None])

    def turn_k(e):
        cos, sin = e["cs"]
        return turn_last(e["kv"][:, None], cos[:, None], sin[:, None])  # (B, 1, S, D)

    def scores(e):
        return (e["q"] @ e["K"].transpose(-1, -2)) * tiny_scale + e["Mk"]

    def probabilities(e):
        sink = e.w("sinks").reshape(1, -1, 1, 1).expand(*e["S"].shape[:3], 1)
        both = torch.cat((e["S"], sink), dim=-1)
        return both.softmax(-1)[..., :-1]

    def unturn(e):
        cos, sin = e["cs"]
        return turn_last(e["o"], cos[:, :, None], -sin[:, :, None])  # (B, S, H, D)

    xs, ca, cq = E.Sym("x", "x"), E.Sym("ca", "c^Q"), E.Sym("cq", r"\hat c^Q")
    kv0, kv = E.Sym("kv0", "c^{KV}"), E.Sym("kv", "k")
    steps = [
        # the projection and its norm, each its own expression: the page names each norm once, where it runs
        Step(expr=E.Let(ca, linear_call(part, "q_a_proj", xs, "W_{QA}"), maps=(d, ql))),
        Step(expr=E.Let(cq, norm_call(part, "q_a_norm", ca))),
        Step(rf"q=\hat c^Q W_{{QB}}^{{\top}}{T.maps(ql, T.times(H, D))}", "qb", sub(part, "q_b_proj", x="cq")),
        Step(rf"q_j=\text{{head }}j\text{{ of }}q,\ j=1..{T.num(H)}", "q", heads),
        Step(expr=E.Let(E.Sym("q", "q_j"), norm_call(part, "q_b_norm", E.Sym("q", "q_j")), "each head, no gain")),
        Step(rf"(\cos,\sin)=R_{{\text{{{kind}}}}}\quad\text{{this block's angles}}", "cs", pick),
        Step(r"q\leftarrow\operatorname{rot}(q)\quad\text{the last dims of each head turned in pairs}", "q", turn_q, value="attention_queries"),
        Step(expr=E.Let(kv0, linear_call(part, "kv_proj", xs, "W_{KV}"), "one head, key and value alike", maps=(d, D))),
        Step(expr=E.Let(kv, norm_call(part, "kv_norm", kv0))),
        Step(r"k\leftarrow\operatorname{rot}(k)", "K", turn_k, value=None if has_compressor else "attention_keys"),
    ]
    if has_compressor:
        steps += [
            Step(r"(C,B)=\operatorname{Compressor}(x,\hat c^Q,p)\quad\text{compressed keys and which query sees which}", ("C", "B"),
                 sub(part, "compressor", x="x", cq="cq", pos="pos")),
            Step(r"K\leftarrow[k;\,C],\quad M\leftarrow[M,\,B]\quad\text{the window's keys, then the compressed ones}", ("K", "Mk"),
                 lambda e: (torch.cat((e["K"], e["C"]), dim=2), torch.cat((e["M"], e["B"]), dim=-1)), value=("attention_keys", None)),
        ]
    else:
        steps.append(Step(r"M\ \text{as given}", "Mk", lambda e: e["M"]))
    steps += [
        Step(r"V=K\quad\text{the keys serve as values}", "V", lambda e: e["K"], value="attention_values"),
        Step(rf"S=q K^{{\top}}\cdot{T.num(scale)}+M", "S", scores, value="attention_scores", summary=True),
        Step(r"P=\operatorname{softmax}([S,\,s_j])_{:,\,:-1}\quad\text{each head's sink logit }s_j\text{ joins the softmax, its column dropped}", "P",
             probabilities, value="attention_probabilities", summary=True),
        Step(r"o=P V", "o", lambda e: (e["P"] @ e["V"]).transpose(1, 2), value="attention_head_outputs"),
        Step(r"o\leftarrow\operatorname{rot}^{-1}(o)\quad\text{the values' rotation undone at the query's position}", "o", unturn, summary=True),
        Step(rf"y_g=\operatorname{{GroupedLinear}}(o_g),\ g=1..{T.num(G)}\quad\text{{each group of {T.num(H // G)} heads on its own}}", "yg",
             _regrouped(part, tG)),
    ]
    steps.append(Step(rf"\Delta=[y_1;\dots;y_{{{T.num(G)}}}]\,W_{{O}}^{{\top}}{T.maps(linear_dims(full.o_b_proj)[0], d)}", "y",
                      _flattened(part), value="attention_output", summary=True))
    return Chain(steps, inputs, "y", output_element=0)


def _regrouped(part: Part, groups: int):
    child = sub(part, "o_a_proj", x="og")

    def fn(e):
        e.values["og"] = e["o"].reshape(*e["o"].shape[:2], groups, -1)
        return child(e)

    fn.child_id, fn.child_name, fn.child_inputs = child.child_id, child.child_name, {"x": "o"}
    return fn


def _flattened(part: Part):
    child = sub(part, "o_b_proj", x="yf")

    def fn(e):
        e.values["yf"] = e["yg"].flatten(2)
        return child(e)

    fn.child_id, fn.child_name, fn.child_inputs = child.child_id, child.child_name, {"x": "yg"}
    return fn
