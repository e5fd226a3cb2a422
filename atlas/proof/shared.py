"""Shared blocks run at several depths (Zamba2), as steps written in expressions.

A hybrid block of Zamba2 runs one of a few shared blocks before its own Mamba-2 mixer. The shared block reads
the stream set beside the token embeddings, [x; e], twice the width: an RMSNorm over the doubled width, an
attention whose projections read it and whose output map returns to the width, a second RMSNorm and a gated
MLP, with no residual add of its own. Its weights are the same tensors at every depth that runs it; what each
use holds alone is a low-rank adapter added to the MLP's fused gate-up projection (and, where the config asks,
to the attention's query, key and value projections), and the hybrid block's own square linear map, which
carries the shared block's output into the stream. The block then adds that to its input before the mixer's
norm, and adds the mixer's output to its input:

    s = SharedBlock(x, e),   v = s W_ℓ^⊤,   y = x + SSM(RMSNorm(x + v)).

Which module is which comes from structure (atlas.model.structure.shared_hybrid_roles, is_concatenating_block,
is_ssm_block, is_low_rank_adapter); which adapter a use runs is read from the run: the one entry of the
adapter list its call reached.
"""

from __future__ import annotations

from atlas.proof import expr as E
from atlas.proof.core import Part
from atlas.proof.library import X, apply_child, linear_call, norm_call
from atlas.proof.positions import rotary_input
from atlas.proof.steps import Chain, Input, Step

EMBEDDINGS = Input("e", "e", "original_hidden_states", "the token embeddings, as the model handed them to block 0")
CARRIED = Input("v", "v", "transformer_hidden_states", "the shared block's output, carried into the stream by the hybrid block's linear map")

# the stream and a second tensor as wide set side by side: twice the width
side_by_side = E.Function("concatenate", lambda a, b: E._torch().cat((a, b), dim=-1), lambda a, b: rf"[{a};\,{b}]")

_X, _E, _V = E.Sym("x", "x"), E.Sym("e", "e"), E.Sym("v", "v")


def _rotary(part: Part, attention: str):
    handed = part.child(attention).argument("position_embeddings")
    return rotary_input(handed) if handed is not None else None


def shared_block(part: Part) -> Chain:
    """The shared block: the stream beside the embeddings, normed, the attention, a norm, the MLP; no add."""
    from atlas.model.structure import separate_qkv

    children = dict(part.tiny.named_children())
    norms = [n for n, c in children.items() if not list(c.children()) and getattr(c, "weight", None) is not None and c.weight.dim() == 1]
    attention = next(n for n, c in children.items() if separate_qkv(c))
    mlp = next(n for n in children if n not in norms and n != attention)
    wide, narrow = sorted(norms, key=lambda n: -children[n].weight.shape[0])
    rotary = _rotary(part, attention)
    c, h, a, m, y = E.Sym("c", "c"), E.Sym("h", "h"), E.Sym("a", "a"), E.Sym("m", "m"), E.Sym("y", "y")
    d = part.ctx.full_config.hidden_size
    feeds = {"x": h, **({"R": E.Sym("R", rotary.symbol)} if rotary else {})}
    steps = [
        Step(expr=E.Let(c, side_by_side(_X, _E), f"(the stream beside the token embeddings: {2 * d:,} wide)"), summary=True),
        Step(expr=E.Let(h, norm_call(part, wide, c)), summary=True),
        Step(expr=E.Let(a, apply_child(part, attention, lambda *t: rf"\operatorname{{Attn}}({', '.join(t)})", False, **feeds)),
             summary=True),
        Step(expr=E.Let(m, norm_call(part, narrow, a)), summary=True),
        Step(expr=E.Let(y, apply_child(part, mlp, lambda t: rf"\operatorname{{FFN}}_k({t})", x=m)), summary=True),
    ]
    part.note("shared_block", {"norm over the doubled width": wide, "attention": attention, "norm before the MLP": narrow, "mlp": mlp},
              "the module's children by structure: the wider norm reads the stream beside the embeddings")
    return Chain(steps, [X, EMBEDDINGS] + ([rotary] if rotary else []), "y")


def hybrid_block(part: Part, roles: dict[str, str]) -> Chain:
    """The hybrid block: the shared block on the stream and the embeddings, the block's own linear map, then the
    state-space block with that contribution added before its norm."""
    s, v, y = E.Sym("s", "s"), E.Sym("v", "v"), E.Sym("y", "y")
    shared = part.child(roles["shared"])
    attention = next(n for n, c in shared.tiny.named_children() if _is_attention(c))
    rotary = _rotary(shared, attention)
    feeds = {"x": _X, "e": _E, **({"R": E.Sym("R", rotary.symbol)} if rotary else {})}
    steps = [
        Step(expr=E.Let(s, apply_child(part, roles["shared"], lambda *t: rf"\operatorname{{Shared}}_k({', '.join(t)})", **feeds),
                        "(the shared block this block runs, with this use's adapters)"), summary=True),
        Step(expr=E.Let(v, linear_call(part, roles["linear"], s, r"W_\ell")), summary=True),
        Step(expr=E.Let(y, apply_child(part, roles["mixer_block"], lambda a, b: rf"\operatorname{{Block}}_{{\mathrm{{SSM}}}}({a};\,{b})",
                                       x=_X, v=_V)), value="layer_output", summary=True),
    ]
    part.note("sublayers", {"shared block": roles["shared"], "linear map": roles["linear"], "state-space block": roles["mixer_block"]},
              "the block's children by structure")
    return Chain(steps, [X, EMBEDDINGS] + ([rotary] if rotary else []), "y", output_element=0)


def _is_attention(module) -> bool:
    from atlas.model.structure import separate_qkv

    return separate_qkv(module) is not None


def carried_block(part: Part) -> Chain:
    """A state-space block handed a contribution to add before its norm: y = x + SSM(Norm(x + v))."""
    from atlas.model.structure import is_ssm

    children = dict(part.tiny.named_children())
    mixer = next(n for n, c in children.items() if is_ssm(c))
    norm = next(n for n in children if n != mixer)
    s, h, d, y = E.Sym("s", "s"), E.Sym("h", "h"), E.Sym("d", r"\Delta"), E.Sym("y", "y")
    steps = [
        Step(expr=E.Let(s, _X + _V, "(the shared block's contribution joins the stream before the norm)"), summary=True),
        Step(expr=E.Let(h, norm_call(part, norm, s)), summary=True),
        Step(expr=E.Let(d, apply_child(part, mixer, lambda t: rf"\operatorname{{SSM}}({t})", False, x=h)), summary=True),
        Step(expr=E.Let(y, _X + d, "(the mixer's output added to the block's input, not to x + v)"), summary=True),
    ]
    part.note("sublayers", {"norm": norm, "ssm": mixer}, "the module's children by structure")
    return Chain(steps, [X, CARRIED], "y")


def low_rank_adapter(part: Part) -> Chain:
    """Two linear maps in turn, down to the rank and back up: y = x A^⊤ B^⊤."""
    r, y = E.Sym("r", "r"), E.Sym("y", "y")
    first, second = [n for n, _ in part.tiny.named_children()]
    steps = [Step(expr=E.Let(r, linear_call(part, first, _X, "A")), summary=True),
             Step(expr=E.Let(y, linear_call(part, second, r, "B")), summary=True)]
    part.note("adapter", {"rank": part.full.get_submodule(first).out_features}, "the module's two linear maps")
    return Chain(steps, [X], "y")
