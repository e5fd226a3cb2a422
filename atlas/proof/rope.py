"""Rotary angles from the config: the inverse frequencies of each rope type, the angles of the call's
positions, and their cosine and sine times the rope's amplitude, as steps of the whole model's chain.

transformers computes the cos and sin once per forward pass in the model's rotary module and hands
them to every block. Here they are computed from the config alone (rope_theta, the rope type and its
parameters, the rotated dims) and compared with what that module returned on the preview run, so the
angles every attention turns its queries and keys by are proven, not given. The frequency rules are
written here from the rope types' definitions: default, linear, dynamic (and Hunyuan's fixed-alpha
NTK), YaRN (with its attention factor), LongRoPE, llama3 and proportional; a block kind may read its
own rope settings (Gemma 3's local and global bases). The module computes in float32 as written; the
preview run widens that to float64 (``atlas.model.precision``), so each step is held to float64's error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from atlas.proof import arrange as A
from atlas.proof import clauses as C
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.steps import Step


@dataclass
class Rope:
    """One rope's settings at one size: what the frequencies are computed from."""

    kind: str  # default, linear, dynamic, ntk_alpha, yarn, longrope, llama3, proportional
    base: float  # rope_theta
    pairs: int  # frequencies (the rotary buffer's length: half the rotated dims, or half the head for proportional)
    head_dim: int
    params: dict[str, Any] = field(default_factory=dict)
    max_positions: int | None = None

    @property
    def rotated(self) -> int:
        """The dims the rotation turns (twice the nonzero frequencies)."""
        if self.kind == "proportional":
            return 2 * int(self.params.get("partial_rotary_factor", 1.0) * self.head_dim // 2)
        return 2 * self.pairs


def settings(config, layer_type: str | None = None) -> dict[str, Any]:
    """The config's rope parameters (one layer type's, where they are kept by type)."""
    rope = dict(getattr(config, "rope_parameters", None) or {})
    if layer_type is not None and isinstance(rope.get(layer_type), dict):
        rope = dict(rope[layer_type])
    if "rope_theta" not in rope and getattr(config, "rope_theta", None) is not None:
        rope["rope_theta"] = config.rope_theta
    return rope


def rope_of(config, pairs: int, layer_type: str | None = None, kind_override: str | None = None) -> Rope:
    rope = settings(config, layer_type)
    if layer_type is not None:
        try:  # a config whose sizes differ by kind of block (Gemma 4's wider global heads): that kind's
            config = config.per_layer_config[layer_type]
        except (AttributeError, KeyError, TypeError, ValueError):
            pass
    kind = kind_override or rope.get("rope_type") or rope.get("type") or "default"
    if kind == "dynamic" and rope.get("alpha"):
        kind = "ntk_alpha"  # a fixed alpha stretches the base once (Hunyuan), whatever the length
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return Rope(kind, float(rope.get("rope_theta", 10000.0)), pairs, head_dim, rope, getattr(config, "max_position_embeddings", None))


def frequencies(rope: Rope, seq_len: int):
    """(f, a): the inverse frequency of each pair (float64) and the amplitude the cos and sin carry, for
    a prompt of ``seq_len`` positions: the rules the steps print, run at this rope's own sizes."""
    import torch

    f, _ = frequency_rule(rope, rope, "positions")
    return f.run({"positions": torch.arange(max(int(seq_len), 1))[None]}), amplitude_of(rope)


def exponent_width(rope: Rope) -> int:
    """The width the frequencies' exponent divides by: the rotated dims, or the rotated width transformers
    computes as int(head_dim × partial_rotary_factor) even where it is odd (a tiny head's 16 × 0.334 = 5:
    three pairs over a width of 5)."""
    partial = rope.params.get("partial_rotary_factor")
    d = rope.rotated
    width = int(rope.head_dim * float(partial)) if isinstance(partial, (int, float)) and 0 < partial < 1 else d
    return width if 2 * rope.pairs - 1 <= width <= 2 * rope.pairs else d


def _whole(x):
    """A config number as printed: a whole float as an integer (rope_theta 150,000), others as they are."""
    return int(x) if isinstance(x, float) and x.is_integer() and abs(x) < 1e15 else x


def _num(full, tiny, symbol: str | None = None, stated: bool = False) -> E.Size:
    """A config number: printed at the checkpoint's value, run at the preview's."""
    return E.Size(_whole(full), tiny, symbol, stated)


def _powers(base: E.Expr, full: Rope, tiny: Rope, width: tuple[int, int] | None = None) -> E.Expr:
    """base^(-2j/d), j = 0 .. pairs - 1, over the exponent's width (``width``: another, at both sizes)."""
    j = A.Index("j", full.pairs, tiny.pairs)
    return base ** -(2 * j / E.Size(*(width or (exponent_width(full), exponent_width(tiny)))))


def default_frequencies(full: Rope, tiny: Rope) -> E.Expr:
    """The default rope's frequencies as an expression: b^(-2j/d), j = 0 .. pairs - 1, printed at the
    checkpoint's base, width and pairs and run at the preview's."""
    return _powers(_num(full.base, tiny.base), full, tiny)


def _factor(rope: Rope) -> float:
    """The context factor s of YaRN and LongRoPE: given, else the positions over the original length."""
    p = rope.params
    return float(p.get("factor") or rope.max_positions / p["original_max_position_embeddings"])


def _yarn_ramp(p: dict[str, Any], d: int, base: float) -> tuple[float, float]:
    """The pair range over which YaRN blends interpolated into original frequencies."""
    original = p["original_max_position_embeddings"]

    def dim_of(turns):
        return d * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_of(p.get("beta_fast") or 32), dim_of(p.get("beta_slow") or 1)
    if p.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    return low, (high + 0.001 if high == low else high)


def frequency_rule(full: Rope, tiny: Rope, positions: str) -> tuple[E.Expr, str]:
    """The rope's frequencies f_j as one expression, and the words after it: printed at the checkpoint's
    values, run at the preview's. ``positions`` names the chain's positions (a rule that reads the
    prompt's length T: dynamic NTK, LongRoPE)."""
    kind, p, q = full.kind, full.params, tiny.params
    if tiny.kind != kind:
        raise ValueError(f"the preview's rope is {tiny.kind}, the checkpoint's {kind}")
    b, d, td = _num(full.base, tiny.base), full.rotated, tiny.rotated

    def param(key, symbol=None, stated=False):
        return _num(float(p[key]), float(q[key]), symbol, stated)

    if kind == "linear":
        return _powers(b, full, tiny) / param("factor"), "(linear scaling)"
    if kind in ("ntk_alpha", "dynamic"):  # the base raised once: by a fixed alpha, or by the prompt's length past L_0
        stretch = E.Size(d, td) / E.Size(d - 2, td - 2)
        if kind == "ntk_alpha":
            grown, words = b * param("alpha") ** stretch, "(NTK scaling by a fixed alpha)"
        else:
            s, L0 = param("factor", "s", True), _num(full.max_positions, tiny.max_positions, "L_0", True)
            L = C.Named("L", C.larger(C.Length(E.Sym(positions, "p_t")), L0))
            grown, words = b * (s * L / L0 - (s - 1)) ** stretch, "(dynamic NTK: the base stays b while the prompt fits the original length)"
        return _powers(C.Named("b'", grown), full, tiny), words
    if kind == "proportional":  # the first rotated/2 pairs over the whole head's width, the others still
        j, turning = A.Index("j", full.pairs, tiny.pairs), E.Size(d // 2, td // 2)
        turned = _powers(b, full, tiny, (full.head_dim, tiny.head_dim))
        factors = float(p.get("factor", 1.0)), float(q.get("factor", 1.0))
        if factors != (1.0, 1.0):
            turned = turned / _num(*factors)
        rule = C.Cases(((turned, C.Compare("<", j, turning)), (E.Size(0, 0.0), C.Compare(r"\ge", j, turning))))
        return rule, f"(proportional: partial_rotary_factor {float(p.get('partial_rotary_factor', 1.0)):g})"
    if kind == "llama3":  # by wavelength: short ones kept, long ones divided by s, a blend between
        s, low, high, L = (param(k) for k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"))
        g = C.Named("g_j", _powers(b, full, tiny))
        wavelength = C.Named(r"\lambda_j", E.Size(2 * math.pi, 2 * math.pi, r"2\pi") / g)
        mu = C.Named(r"\mu_j", (L / wavelength - low) / (high - low))
        rule = C.Cases(((g, C.Compare("<", wavelength, L / high)), (g / s, C.Compare(">", wavelength, L / low))),
                       otherwise=(1 - mu) * g / s + mu * g)
        return rule, "(llama3 scaling)"
    if kind == "yarn":  # by pair: fast turns kept, slow ones divided by s, a linear ramp between
        (low, high), (tiny_low, tiny_high) = _yarn_ramp(p, d, full.base), _yarn_ramp(q, td, tiny.base)
        j, g = A.Index("j", full.pairs, tiny.pairs), C.Named("g_j", _powers(b, full, tiny))
        lo, hi = _num(low, tiny_low), _num(high, tiny_high)
        rho = C.Named(r"\rho_j", C.clamp_between((j - lo) / (hi - lo), 0, 1))
        return (1 - rho) * g + rho * g / _num(_factor(full), _factor(tiny)), \
            f"(YaRN, original length {_n(p['original_max_position_embeddings'])})"
    if kind == "longrope":  # each pair divided by its own factor: the short list while the prompt fits L_0, else the long
        T, L = C.Length(E.Sym(positions, "p_t")), param("original_max_position_embeddings")
        short = C.Listed(r"e^{\mathrm{short}}", p["short_factor"], q["short_factor"])
        long = C.Listed(r"e^{\mathrm{long}}", p["long_factor"], q["long_factor"])
        e = C.Named("e_j", C.Cases(((short, C.Compare(r"\le", T, L)), (long, C.Compare(">", T, L)))))
        return _powers(b, full, tiny) / e, "(LongRoPE)"
    return default_frequencies(full, tiny), ""


def _amplitude(full: Rope, tiny: Rope) -> tuple[E.Expr | None, str]:
    """The amplitude the cos and sin carry as an expression and its words; None where the rope's type has none."""
    p, q = full.params, tiny.params
    if full.kind not in ("yarn", "longrope"):
        return None, ""
    if p.get("attention_factor") is not None:  # given: printed as given
        given = float(p["attention_factor"])
        return _num(given, float(q["attention_factor"]), _four(given)), "(the rope's attention factor)"
    if (_factor(full) <= 1) != (_factor(tiny) <= 1):
        raise ValueError("the preview's rope scales its context where the checkpoint's does not")
    if _factor(full) <= 1:
        return E.Size(1, 1.0), ""
    s = _num(_factor(full), _factor(tiny))
    if full.kind == "longrope":
        L = _num(p["original_max_position_embeddings"], q["original_max_position_embeddings"])
        return E.sqrt(1 + E.log(s) / E.log(L)), "(LongRoPE's attention factor)"

    def m(key=None):  # 0.1 k ln s + 1
        tenth = E.Size(0.1, 0.1) if key is None else E.Size(0.1, 0.1) * _num(float(p[key]), float(q[key]))
        return tenth * E.log(s) + 1

    rule = m("mscale") / m("mscale_all_dim") if p.get("mscale") and p.get("mscale_all_dim") else m()
    return rule, "(YaRN's attention factor)"


def amplitude_rule(full: Rope, tiny: Rope) -> tuple[E.Expr | None, str]:
    """The amplitude as a step's expression and words; a computed one printed with its value at the
    checkpoint's sizes (0.1 log(32)+1 = 1.3466), which is the same rule built there and run."""
    rule, words = _amplitude(full, tiny)
    if rule is None or isinstance(rule, E.Size):
        return rule, words
    return C.Valued(rule, _amplitude(full, full)[0]), words


def amplitude_of(rope: Rope) -> float:
    """The amplitude at this rope's own sizes (1 where its type has none)."""
    rule, _ = _amplitude(rope, rope)
    return 1.0 if rule is None else float(rule.run({}))


# --- the page's words -----------------------------------------------------------------------------


def _n(x) -> str:
    """A config number as TeX: whole numbers in full (rope_theta 150,000), others to four digits."""
    return T.num(_whole(x))


def _four(x: float) -> str:
    """An amplitude to four decimals (gpt-oss's 0.1 ln 32 + 1 = 1.3466)."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


# the parameters each rope type reads (a config may carry others the type ignores: Hunyuan's beta_fast)
USED = {
    "linear": ("factor",), "dynamic": ("factor",), "ntk_alpha": ("alpha",), "proportional": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate"),
    "longrope": ("factor", "original_max_position_embeddings", "attention_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}


def facts_of(rope: Rope, amplitude: float) -> dict[str, Any]:
    """What the page says about this rope, as plain facts."""
    keep = ("partial_rotary_factor",) + USED.get(rope.kind, ())
    return {"rope_type": rope.kind, "rope_theta": rope.base, "rotated_dims": rope.rotated, "pairs": rope.pairs,
            "amplitude": round(float(amplitude), 6), **{k: rope.params[k] for k in keep if rope.params.get(k) is not None}}


# --- the steps ------------------------------------------------------------------------------------

LAYOUTS = {
    # how the module lays the angles out over the dims it hands the attention
    "halves": (r"[\theta_t;\,\theta_t]", "each angle twice, the two halves side by side"),
    "once": (r"\theta_t", "each angle once, one per rotated pair"),
    "interleaved": (r"(\theta_{t,0},\theta_{t,0},\theta_{t,1},\theta_{t,1},\dots)", "each angle twice, side by side per pair"),
    "complex": (r"a\,e^{i\theta_t}", "one complex factor per pair"),
}


def lay_out(angles, layout: str):
    import torch

    if layout == "halves":
        return torch.cat((angles, angles), dim=-1)
    if layout == "interleaved":
        return angles.repeat_interleave(2, dim=-1)
    return angles


def cos_sin(angles, amplitude: float, layout: str):
    """The module's result from the angles: (a cos, a sin) laid out, or one complex tensor a e^{i theta}."""
    import torch

    if layout == "complex":
        return torch.polar(torch.full_like(angles, amplitude), angles)
    laid = lay_out(angles, layout)
    return laid.cos() * amplitude, laid.sin() * amplitude


def measure_layout(angles, amplitude: float, output, close) -> str | None:
    """The layout under which the angles give the module's output (``close(mine, reference)``), or None."""
    import torch

    complex_out = isinstance(output, torch.Tensor) and torch.is_complex(output)
    for layout in ("complex",) if complex_out else ("halves", "once", "interleaved"):
        if complex_out:
            return layout
        if not isinstance(output, (tuple, list)) or len(output) != 2:
            return None
        mine = cos_sin(angles, amplitude, layout)
        if mine[0].shape[-1] == output[0].shape[-1] and close(mine[0], output[0]) and close(mine[1], output[1]):
            return layout
    return None


def rope_steps(full: Rope, tiny: Rope, layout: str, suffix: str, label: str, positions: str, reference=None) -> list[Step]:
    """The rotary steps of one rope: frequencies, amplitude, angles, and the cos and sin (named R{suffix}).

    ``positions``: the environment name of the call's positions; ``reference``: what the model's rotary
    module returned on the run, compared with the last step (a function attribute the proof reads)."""
    up = rf"^{{\mathrm{{{label}}}}}" if label else ""
    f_name, a_name, th_name, r_name = f"f{suffix}", f"a{suffix}", f"theta{suffix}", f"R{suffix}"
    scaled = amplitude_of(full) != 1.0 or amplitude_of(tiny) != 1.0  # an amplitude other than 1: a step of its own
    shown, words = LAYOUTS[layout]
    # the base, the rotated dims and the factors at the checkpoint's values, run at the preview's
    other = None
    if full.kind != tiny.kind:
        # the run loaded weights whose config keeps another rope (a local checkpoint's): the rule that ran is
        # the one printed, at its own values, and the page says so
        other, full = full.kind, tiny
    rule, note = frequency_rule(full, tiny, positions)
    if other:
        note = f"{note} (the rope of the weights the run loaded, {tiny.kind}; the pinned checkpoint's is {other})".strip()
    out = [Step(expr=E.Let(E.Sym(f_name, f"f{up}_j"), rule, note), summary=True)]
    if scaled:
        amplitude, note = amplitude_rule(full, tiny)
        out.append(Step(expr=E.Let(E.Sym(a_name, "a"), amplitude, note), summary=True))
    theta, f = E.Sym(th_name, rf"\theta{up}_t"), E.Sym(f_name, f"f{up}")
    out.append(Step(expr=E.Let(theta, A.angles(E.Sym(positions, "p_t"), f), "(each position times each frequency)"), summary=True))
    angle = shown.replace(r"\theta_t", theta.symbol)
    amplitude_sym = E.Sym(a_name, "a") if scaled else E.Size(1.0, 1.0)
    if layout == "complex":
        notation = lambda th, a: angle  # noqa: E731 - the layout's own form, the amplitude inside it
    else:
        notation = lambda th, a: rf"(\,{'a' if scaled else ''}\cos {angle},\ {'a' if scaled else ''}\sin {angle}\,)"  # noqa: E731
    laid = E.Function(f"rotary {layout}", lambda th, a: cos_sin(th, float(a), layout), notation)
    result = Step(expr=E.Let(E.Sym(r_name, f"R{up}_t"), laid(theta, amplitude_sym), f"({words})"), summary=True)
    result.fn.compare_with = reference  # the model's rotary module's own result on the run, compared with this step
    out.append(result)
    return out


# --- the whole model's rotary steps ---------------------------------------------------------------


def _model_rotary_calls(part, block_path: str) -> list[tuple[str, Any, str | None]]:
    """(path, call, layer type) of every call of the model's own rotary module(s): modules outside the
    blocks that turn positions into angles, as the run called them (once per kind of block where the
    module takes the kind: Gemma 3)."""
    from atlas.proof.positions import is_rotary_module

    found = []
    for path, module in part.tiny.named_modules():
        if not path or not is_rotary_module(module) and not _takes_layer_type(module):
            continue
        if path.startswith(block_path + ".") or path not in part.ctx.every_call:
            continue  # a rotary module inside a block (RecurrentGemma's, DeepSeek-V4's compressor's): its block proves it
        for call in part.ctx.every_call[path]:
            kind = call.kwargs.get("layer_type", call.args[2] if len(call.args) > 2 else None)
            found.append((path, call, kind if isinstance(kind, str) else None))
    return found


def _takes_layer_type(module) -> bool:
    import inspect

    import torch

    if list(module.children()) or list(module.parameters(recurse=False)):
        return False
    buffers = [b for _, b in module.named_buffers(recurse=False)]
    return bool(buffers) and all(b.dim() == 1 and torch.is_floating_point(b) for b in buffers) and \
        list(inspect.signature(module.forward).parameters)[:3] == ["x", "position_ids", "layer_type"]


def _same(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return False


def _pairs(module, layer_type: str | None) -> int:
    named = dict(module.named_buffers(recurse=False))
    return named[f"{layer_type}_inv_freq" if layer_type else "inv_freq"].shape[0]


def model_rotary(part, stack) -> tuple[list[Step], dict[str, Any]]:
    """The whole model's rotary steps (positions, then per rope: frequencies, amplitude, angles, cos and
    sin), and the facts to note; each block of ``stack`` is told which of the results it reads
    (``stack.rotary_names``), found by matching what each block was handed with what each call returned.
    Nothing where the model has no rotary module of its own or a block reads angles none of them gave."""
    import torch

    from atlas.proof.core import tolerance, difference

    calls = _model_rotary_calls(part, stack.path)
    if not calls or not any(r is not None for r in stack.rotary):
        return [], {}
    names: list[str | None] = []
    for given in stack.rotary:
        k = None if given is None else next((k for k, (_, call, _) in enumerate(calls) if _same(call.output, given)), -1)
        if k == -1:
            return [], {"rotary": {"value": "given", "how": "a block reads angles that no call of the model's rotary module returned"}}
        names.append(None if k is None else k)
    # by the kind of block, not by the order of the calls: a model may call its rotary module once per kind
    # of block in the order of a set of names (Gemma 3's), which changes from one run to the next
    used = sorted({k for k in names if k is not None}, key=lambda k: (calls[k][2] or "", k))
    several = len(used) > 1
    steps = [Step(expr=E.Let(E.Sym("rpos", "p_t"), A.position_index(E.Sym("ids", "I")), "(the positions of the prompt)"), summary=True)]
    facts: dict[str, Any] = {}
    env_names: dict[int, str] = {}
    for k in used:
        path, call, kind = calls[k]
        suffix = f"_{kind}" if several and kind else (f"_{k}" if several else "")
        label = kind.split("_")[0] if several and kind else ""
        tiny_rope = rope_of(part.ctx.tiny_config, _pairs(part.tiny.get_submodule(path), kind), kind)
        full_rope = rope_of(part.ctx.full_config, _pairs(part.full.get_submodule(path), kind), kind)
        positions = call.kwargs.get("position_ids", call.args[1] if len(call.args) > 1 else None)
        f, a = frequencies(tiny_rope, int(positions.max()) + 1)
        angles = positions[..., None].to(torch.float64) * f

        def close(mine, ref):
            return difference(mine, ref) <= tolerance(ref)

        # where no layout gives the module's values, the one that gives its shapes: the proof then fails at this step, by name
        layout = measure_layout(angles, a, call.output, close) or measure_layout(angles, a, call.output, lambda m, r: True) or "halves"
        steps += rope_steps(full_rope, tiny_rope, layout, suffix, label, "rpos", call.output)
        env_names[k] = f"R{suffix}"
        facts[kind or "all"] = {**facts_of(full_rope, amplitude_of(full_rope)), "layout": layout}
    stack.rotary_names = [env_names.get(k) if k is not None else None for k in names]
    how = "computed from the config by the steps; compared with the model's rotary module on the preview run"
    if several:  # one fact per rope, by the kind of block that reads it
        return steps, {f"rotary_{kind}": {"value": fact, "how": how} for kind, fact in facts.items()}
    return steps, {"rotary": {"value": next(iter(facts.values())), "how": how}}
