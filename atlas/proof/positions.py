"""Where a token stands, as attention reads it: rotary angles, the rotations that turn queries and keys by them, and ALiBi's bias.

A module turns its dims in one of several layouts (halves, interleaved pairs, pairs kept in place,
complex factors): each is a plain tensor function here, applied by the attention's chain to the cos
and sin it is given (which layout a module uses is measured there). Where an attention computes its
angles itself (RecurrentGemma), the rotary module's own chain is here too. ALiBi instead adds each
head's slope times the key's position to the scores (BLOOM): its slopes and bias are here, the step
that adds them among the scores' (``atlas.proof.scores``).
"""

from __future__ import annotations

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.steps import Chain, Input, Step


ROTARY = Input("R", T.c("R"), "position_embeddings", "cos and sin of each position's rotary angles", given=True)
ROTARY_COMPLEX = Input("R", T.c("R"), "position_embeddings", "one complex factor per position and rotated pair: cos + i sin of the angle, times the rotary attention factor", given=True)


def rotary_input(angles) -> Input:
    """How the page names the rotary angles a module is given: a (cos, sin) pair or one complex tensor."""
    return ROTARY_COMPLEX if _complex_angles(angles) else ROTARY


def rotate_half(x, cos, sin):
    import torch

    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    half = rot // 2
    turned = torch.cat((-x_rot[..., half:], x_rot[..., :half]), dim=-1)
    return torch.cat((x_rot * cos + turned * sin, x_pass), dim=-1)


def rotate_half_reversed(x, cos, sin):
    """The halves turned the other way, by minus each angle: rot([a; b]) = [b; -a] (nanochat's rotate_half)."""
    return rotate_half(x, cos, -sin)


def rotate_half_angles(x, cos, sin):
    """cos and sin given once per angle (half the rotated width): the two halves turned by them."""
    import torch

    return rotate_half(x, torch.cat((cos, cos), -1), torch.cat((sin, sin), -1))


def rotate_pairs(x, cos, sin):
    """Interleaved pairs (x0, x1), (x2, x3) ... each turned by one angle; evens first, then odds."""
    import torch

    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half], sin[..., :half]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _complex_angles(angles) -> bool:
    """Whether the rotary angles come as one complex tensor (DeepSeek-V2) rather than a (cos, sin) pair."""
    import torch

    return isinstance(angles, torch.Tensor) and torch.is_complex(angles)


def rotate_pairs_complex(x, freqs, _unused=None):
    """Adjacent pairs (x0, x1), (x2, x3) ... read as complex numbers a + ib and multiplied by the given
    complex factor per pair (its real and imaginary parts: r cos, r sin); the result stays interleaved."""
    import torch

    a, b = x[..., 0::2], x[..., 1::2]
    c, s = freqs.real.to(x.dtype), freqs.imag.to(x.dtype)
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


def _partial_rotary_words(part: Part, d: int, tiny_rotated: int, td: int) -> str:
    """The TeX that says how many of a head's dims the rotation turns at the checkpoint's sizes, where
    it turns only a leading part (partial_rotary_factor; the tiny run's share where the config says none)."""
    cfg = part.ctx.full_config
    rope = getattr(cfg, "rope_parameters", None) or {}
    factor = rope.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", getattr(cfg, "rotary_pct", None)))
    dims = getattr(cfg, "rotary_dim", None)  # GPT-J names the rotated width itself
    rotated = dims if isinstance(dims, int) and 0 < dims < d else int(d * factor) if factor else d * tiny_rotated // td
    return rf"\quad\text{{on the first }}{T.num(rotated)}\text{{ of }}{T.num(d)}\text{{ dims; the other }}{T.num(d - rotated)}\text{{ pass unrotated}}"


def _zero_angle_words(part: Part, rotate, d: int, td: int) -> str:
    """Where the angles span the whole head but the last ones are zero (Gemma 4's proportional RoPE on
    its global blocks: partial_rotary_factor of the pairs turn, the others keep angle zero), the TeX that
    says so at the checkpoint's sizes; the zero angles are counted on the tiny run's sin and must be the
    share the block's rotary settings give there."""
    if rotate is not rotate_half:
        return ""
    sin = part.argument("position_embeddings")[1]
    pairs = sin.shape[-1] // 2
    moving = (sin.reshape(-1, sin.shape[-1]).abs().amax(0) > 0)[:pairs]
    still = int((~moving).sum())
    if not still or bool(moving[pairs - still:].any()):
        return ""
    rope = getattr(part.ctx.full_config, "rope_parameters", None) or {}
    rope = rope.get(part.attention_type, rope) if isinstance(rope.get(part.attention_type), dict) else rope
    factor = rope.get("partial_rotary_factor")
    if not factor or int(factor * td // 2) != pairs - still:
        return ""
    turning = int(factor * d // 2)
    part.note("rotated_pairs", {"turning": turning, "of": d // 2, "rope_type": rope.get("rope_type")},
              "measured: the tiny run's angles are zero past this share of the pairs, as partial_rotary_factor says")
    return (rf"\quad\text{{the angles of pairs }}{T.num(turning + 1)}..{T.num(d // 2)}\text{{ are zero: only }}{T.num(turning)}"
            rf"\text{{ of }}{T.num(d // 2)}\text{{ pairs turn (partial\_rotary\_factor }}{factor:g}\text{{)}}")


def rotate_interleaved(x, cos, sin):
    """Adjacent pairs (x0, x1), (x2, x3) ... each turned by one angle, kept in place; cos and sin given
    once per dim (each angle twice, side by side). Only the first cos.shape[-1] dims turn."""
    import torch

    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    turned = torch.stack((-x_rot[..., 1::2], x_rot[..., 0::2]), dim=-1).flatten(-2)
    return torch.cat((x_rot * cos + turned * sin, x_pass), dim=-1)


def rotate_interleaved_sin_first(x, sin, cos):
    """Adjacent pairs turned in place, the angles handed as (sin, cos) and once per pair (GPT-J)."""
    return rotate_interleaved(x, cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1))


# Rotations whose cos and sin come once per angle (half the dims they turn): the note counts dims, not angles.
rotate_half_angles.per_pair = True
rotate_interleaved_sin_first.per_pair = True


def rotate_pairs_in_place(x, cos, sin):
    """Interleaved pairs (x0, x1), (x2, x3) ... each turned by one angle (the first half of cos and sin,
    one angle per pair), the result left interleaved (GLM's layout, as ERNIE 4.5 applies it)."""
    import torch

    rot = cos.shape[-1]
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    c = cos[..., : rot // 2].repeat_interleave(2, dim=-1)
    s = sin[..., : rot // 2].repeat_interleave(2, dim=-1)
    turned = torch.stack((-x_rot[..., 1::2], x_rot[..., 0::2]), dim=-1).flatten(-2)
    return torch.cat((x_rot * c + turned * s, x_pass), dim=-1)


PAIRS_TEX = r"\operatorname{rot}(x)_{2j}=-x_{2j+1},\ \operatorname{rot}(x)_{2j+1}=x_{2j}\ \text{(one angle per adjacent pair)}"
HALVES_TEX = r"\operatorname{rot}([a;b])=[-b;a]"

# each rotation's rot as the page defines it, held by the function that turns: a variant cannot print
# another's definition
for _turn, _tex in ((rotate_half, HALVES_TEX), (rotate_half_angles, HALVES_TEX),
                    (rotate_half_reversed, r"\operatorname{rot}([a;b])=[b;-a]\ \text{(turned by }-\theta\text{)}"),
                    (rotate_interleaved, PAIRS_TEX), (rotate_interleaved_sin_first, PAIRS_TEX),
                    (rotate_pairs_in_place, PAIRS_TEX), (rotate_pairs_complex, PAIRS_TEX)):
    _turn.rot_tex = _tex


def _rotary_given(part: Part) -> bool:
    return part.argument("position_embeddings") is not None


def _alibi_given(part: Part) -> bool:
    """Whether the module is handed an ALiBi bias (BLOOM's model builds one and passes it to every
    block): a tensor under the call's argument alibi."""
    import torch

    return isinstance(part.argument("alibi"), torch.Tensor)


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's slope of each head: for the largest power of two n <= heads, 2^(-8h/n), h = 1..n; any
    heads beyond n take the odd steps of the sequence for 2n, 2^(-4(2j-1)/n), j = 1, 2, ..."""
    n = 2 ** (heads.bit_length() - 1)
    slopes = [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]
    slopes += [2.0 ** (-4.0 * (2 * j - 1) / n) for j in range(1, heads - n + 1)]
    return slopes


def alibi_slopes_tex(heads: int) -> str:
    """The slopes' rule at the checkpoint's head count, as TeX."""
    n = 2 ** (heads.bit_length() - 1)
    step = 8 / n
    exponent = "h" if step == 1 else (rf"{T.num(int(step))}h" if step == int(step) else rf"h/{T.num(int(n / 8))}" if n % 8 == 0 else rf"{step:g}h")
    rule = rf"m_h=2^{{-{exponent}}},\ h=1..{T.num(n)}"
    if heads > n:
        rule += rf";\ m_{{{T.num(n)}+j}}=2^{{-{T.num(4)}(2j-1)/{T.num(n)}}},\ j=1..{T.num(heads - n)}"
    return rule


def _alibi_bias(slopes: list[float], T_: int, form: str = "key_position"):
    """One bias per head, query and key: the head's slope times the key's position (0-based), or minus
    the slope times the distance back from the query (the paper's form; the same after the softmax)."""
    import torch

    t = torch.arange(T_, dtype=torch.float64)
    m = torch.tensor(slopes, dtype=torch.float64)[:, None, None]
    if form == "minus_distance":
        return -m * (t[:, None] - t[None, :])
    return (m * t[None, None, :]).expand(-1, T_, -1)


def alibi_tex(form: str, slopes: str) -> str:
    """The bias step's TeX: the slope times the key's position s, or minus the slope times the distance t - s."""
    if form == "minus_distance":
        return rf"(S_h)_{{ts}}\leftarrow(S_h)_{{ts}}-m_h\,(t-s),\quad {slopes}"
    return rf"(S_h)_{{ts}}\leftarrow(S_h)_{{ts}}+m_h\,s,\quad {slopes}\quad\text{{(the same softmax as }}-m_h(t-s)\text{{: a constant per row)}}"


def is_rotary_module(module) -> bool:
    """A module that turns positions into rotary angles itself, by structure: no children, no parameters,
    one 1-D float buffer (the frequencies), and a forward that takes a tensor and the positions."""
    import inspect

    import torch

    if list(module.children()) or list(module.parameters(recurse=False)):
        return False
    buffers = [b for _, b in module.named_buffers(recurse=False)]
    if not buffers or any(b.dim() != 1 or not torch.is_floating_point(b) for b in buffers):
        return False
    params = [p for p in inspect.signature(module.forward).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(params) == 2


def _own_rotary(part: Part) -> str | None:
    """The child that computes the rotary angles inside the attention, from the positions the attention is
    called with (RecurrentGemma's); None where the angles are handed in or there are none."""
    if _rotary_given(part) or part.argument("position_ids") is None:
        return None
    return next((n for n, m in part.tiny.named_children() if is_rotary_module(m)), None)


def rotary(part: Part) -> Chain:
    """Rotary angles from positions: frequencies base^(-2j/r) for the r rotated dims, each position's angles
    p·f, written twice side by side, and their cosine and sine (as transformers' default rotary computes them),
    each step printed from the expression it runs."""
    cfg, tiny_cfg = part.ctx.full_config, part.ctx.tiny_config
    rope = getattr(cfg, "rope_parameters", None) or {}
    base = rope.get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    tiny_base = (getattr(tiny_cfg, "rope_parameters", None) or {}).get("rope_theta", getattr(tiny_cfg, "rope_theta", 10000.0))
    buffer = next(b for _, b in part.tiny.named_buffers(recurse=False))
    tiny_pairs = buffer.shape[0]
    full_pairs = next(b for _, b in part.full.named_buffers(recurse=False)).shape[0]
    rot = 2 * full_pairs
    positions = Input("pos", "p", "position_ids", "the positions of the call")
    x = Input("x", "x", "x", "a tensor whose dtype the angles take")
    j = A.Index("j", full_pairs, tiny_pairs)
    whole = int(base) if float(base).is_integer() else float(base)  # rope_theta 10,000 written out
    f, theta = E.Sym("f", "f"), E.Sym("theta", r"\theta_{t}")
    part.note("rotary", {"base": base, "rotated_dims": rot}, "the config's rope_theta and the module's frequency buffer")
    return Chain([
        # a line of the summary: folded into the angles, its base would stand beside p_t unbracketed
        Step(expr=E.Let(E.Sym("f", "f_j"), E.Size(whole, float(tiny_base)) ** -(2 * j / E.Size(rot, 2 * tiny_pairs))), summary=True),
        Step(expr=E.Let(theta, A.side_by_side(A.angles(E.Sym("pos", "p_t"), f), width=T.num(rot)), "(each angle twice, side by side)"),
             summary=True),
        Step(expr=E.Lets((E.Let(E.Sym("cos", "c_t"), E.cos(theta)), E.Let(E.Sym("sin", "s_t"), E.sin(theta))), each=False), summary=True),
    ], [x, positions], ("cos", "sin"))


def is_sinusoidal_table(module) -> bool:
    """A module that looks positions up in a fixed table it computes itself (XGLM's sinusoidal
    embedding), by structure: no children, no parameters, one 2-D float buffer (the table), and a
    forward whose first argument is the positions."""
    import inspect

    import torch

    if list(module.children()) or list(module.parameters(recurse=False)):
        return False
    buffers = [b for _, b in module.named_buffers(recurse=False)]
    if len(buffers) != 1 or buffers[0].dim() != 2 or not torch.is_floating_point(buffers[0]):
        return False
    params = [p for p in inspect.signature(module.forward).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return bool(params) and "position" in params[0].name


def _sinusoid_frequencies(count, denominator):  # 10000^(-j/denominator), j = 0 .. count - 1
    import torch

    return torch.exp(-torch.arange(int(count), dtype=torch.float64) * (torch.log(torch.tensor(10000.0, dtype=torch.float64)) / denominator))


def _sinusoid_rows(at, w):  # (…, positions) × (frequencies,) -> (…, positions, 2 × frequencies): sines, then cosines
    import torch

    a = at[..., None].to(torch.float64) * w
    return torch.cat((a.sin(), a.cos()), dim=-1)


def sinusoid_steps(width: int, tiny_width: int, denominator: str, shift: int, ids: str = "ids", out: str = "y",
                   note: str = "") -> list[Step]:
    """The rows of a fixed sinusoidal table at positions ``ids`` (plus ``shift``): sines of the first half of
    the frequencies, then cosines, each frequency 10000^(-j/(h-1)) ("half_minus_one", fairseq's, h = half the
    width) or 10000^(-j/h) ("half", the paper's); printed at ``width``, run at ``tiny_width``, each step from
    the expression it runs."""
    half, tiny_half = width // 2, tiny_width // 2
    den = E.Size(half - 1, tiny_half - 1) if denominator == "half_minus_one" else E.Size(half, tiny_half)
    frequencies = E.Function("sinusoid frequencies", lambda count, d, last: _sinusoid_frequencies(count, d),
                             lambda count, d, last: rf"10000^{{-j/{d}}},\quad j=0..{last}")
    rows = E.Function("sinusoid rows", _sinusoid_rows,
                      lambda at, w: rf"\big[\sin({at}\,{w});\ \cos({at}\,{w})\big]\in\mathbb{{R}}^{{{T.num(width)}}}",
                      bracket=E.PRODUCT)  # a shifted position, (t+2), bracketed where it multiplies
    w, t = E.Sym("w", r"\omega_j"), E.Sym(ids, "t")
    at = t + E.Size(shift, shift) if shift else t
    return [
        # in the summary as its own line: folded into the rows, its range would land inside the sine
        Step(expr=E.Let(w, frequencies(E.Size(half, tiny_half), den, E.Size(half - 1, tiny_half - 1))), summary=True),
        Step(expr=E.Let(E.Sym(out, "p_t"), rows(at, w), note or ("(rows shifted by the module's offset)" if shift else "")), summary=True),
    ]


def sinusoidal_positions(part: Part) -> Chain:
    """Positions to rows of a fixed sinusoidal table (``sinusoid_steps``), read at the position plus the
    module's offset; which frequency rule and offset is measured on the run."""
    width = next(b for _, b in part.full.named_buffers(recurse=False)).shape[1]
    tiny_width = next(b for _, b in part.tiny.named_buffers(recurse=False)).shape[1]
    offset = getattr(part.tiny, "offset", None)
    offsets = {"no_offset": 0}
    if isinstance(offset, int) and not isinstance(offset, bool) and offset:
        offsets["offset_by_module"] = offset
    positions = Input("ids", "t", "position_ids", "the positions of the prompt")

    def build(denominator: str, shift: int) -> Chain:
        return Chain(sinusoid_steps(width, tiny_width, denominator, shift), [positions], "y")

    part.note("positions", "sinusoidal", "the module holds one computed table and no weights")
    return part.choose("sinusoid", {f"{den}_{name}": (lambda den=den, shift=shift: build(den, shift))
                                    for den in ("half_minus_one", "half") for name, shift in offsets.items()})
