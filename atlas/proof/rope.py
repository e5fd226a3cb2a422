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
    """(f, a): the inverse frequency of each pair (float64) and the amplitude the cos and sin carry."""
    import torch

    p = rope.params
    d = rope.rotated
    j = torch.arange(rope.pairs, dtype=torch.float64)
    base = rope.base
    if rope.kind == "ntk_alpha":
        base = base * float(p["alpha"]) ** (d / (d - 2))
    if rope.kind == "dynamic":
        longest = max(seq_len, rope.max_positions)
        factor = float(p["factor"])
        base = base * (factor * longest / rope.max_positions - (factor - 1)) ** (d / (d - 2))
    if rope.kind == "proportional":
        turning = d // 2
        f = torch.where(j < turning, base ** (-2 * j / rope.head_dim), torch.zeros_like(j)) / float(p.get("factor", 1.0))
        return f, 1.0
    f = base ** (-2 * j / exponent_width(rope))
    if rope.kind == "linear":
        return f / float(p["factor"]), 1.0
    if rope.kind == "llama3":
        return _llama3(f, p), 1.0
    if rope.kind == "yarn":
        return _yarn(f, p, d, base, rope.max_positions)
    if rope.kind == "longrope":
        return _longrope(f, p, seq_len, rope.max_positions)
    return f, 1.0


def exponent_width(rope: Rope) -> int:
    """The width the frequencies' exponent divides by: the rotated dims, or the rotated width transformers
    computes as int(head_dim × partial_rotary_factor) even where it is odd (a tiny head's 16 × 0.334 = 5:
    three pairs over a width of 5)."""
    partial = rope.params.get("partial_rotary_factor")
    d = rope.rotated
    width = int(rope.head_dim * float(partial)) if isinstance(partial, (int, float)) and 0 < partial < 1 else d
    return width if 2 * rope.pairs - 1 <= width <= 2 * rope.pairs else d


def default_frequencies(full: Rope, tiny: Rope) -> E.Expr:
    """The default rope's frequencies as an expression: b^(-2j/d), j = 0 .. pairs - 1, printed at the
    checkpoint's base, width and pairs and run at the preview's."""
    j = A.Index("j", full.pairs, tiny.pairs)
    return E.Size(full.base, tiny.base, _n(full.base)) ** -(2 * j / E.Size(exponent_width(full), exponent_width(tiny)))


def yarn_amplitude(p: dict[str, Any], max_positions: int | None) -> float:
    """YaRN's attention factor: given, else 0.1 ln s + 1 (or the ratio of two such, with mscale and mscale_all_dim)."""
    if p.get("attention_factor") is not None:
        return float(p["attention_factor"])
    factor = p.get("factor") or max_positions / p["original_max_position_embeddings"]

    def m(scale, k=1.0):
        return 1.0 if scale <= 1 else 0.1 * k * math.log(scale) + 1.0

    if p.get("mscale") and p.get("mscale_all_dim"):
        return m(factor, p["mscale"]) / m(factor, p["mscale_all_dim"])
    return m(factor)


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


def _yarn(f, p: dict[str, Any], d: int, base: float, max_positions: int | None):
    import torch

    factor = float(p.get("factor") or max_positions / p["original_max_position_embeddings"])
    low, high = _yarn_ramp(p, d, base)
    ramp = ((torch.arange(len(f), dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    # ramp 0: the pair keeps its frequency (fast turns); ramp 1: divided by the factor (slow turns)
    return f * (1 - ramp) + f / factor * ramp, yarn_amplitude(p, max_positions)


def _llama3(f, p: dict[str, Any]):
    import torch

    factor, low, high = float(p["factor"]), float(p["low_freq_factor"]), float(p["high_freq_factor"])
    original = float(p["original_max_position_embeddings"])
    wavelength = 2 * math.pi / f
    smooth = (original / wavelength - low) / (high - low)
    blended = (1 - smooth) * f / factor + smooth * f
    return torch.where(wavelength < original / high, f, torch.where(wavelength > original / low, f / factor, blended))


def _longrope(f, p: dict[str, Any], seq_len: int, max_positions: int | None):
    import torch

    original = p["original_max_position_embeddings"]
    factor = p.get("factor") or max_positions / original
    amplitude = p.get("attention_factor")
    if amplitude is None:
        amplitude = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))
    ext = torch.tensor(p["long_factor"] if seq_len > original else p["short_factor"], dtype=torch.float64)
    return f / ext, float(amplitude)


# --- the page's words -----------------------------------------------------------------------------


def frequency_tex(rope: Rope, sym: str = "f") -> str:
    """The frequency rule at the checkpoint's values, as TeX."""
    p, d, b = rope.params, rope.rotated, _n(rope.base)
    last = _n(rope.pairs - 1)
    plain = rf"{b}^{{-2j/{_n(d)}}}"
    if rope.kind == "proportional":
        factor = float(p.get("factor", 1.0))
        over = "" if factor == 1 else rf"/{_n(factor)}"
        return (rf"{sym}_j={b}^{{-2j/{_n(rope.head_dim)}}}{over}\ (j<{_n(d // 2)}),\ {sym}_j=0\ (j\ge{_n(d // 2)}),\quad j=0..{last}"
                rf"\quad\text{{(proportional: partial\_rotary\_factor {float(p.get('partial_rotary_factor', 1.0)):g})}}")
    if rope.kind == "linear":
        return rf"{sym}_j={plain}/{_n(float(p['factor']))},\quad j=0..{last}\quad\text{{(linear scaling)}}"
    if rope.kind == "ntk_alpha":
        return (rf"{sym}_j=b'^{{-2j/{_n(d)}}},\ b'={b}\cdot{_n(float(p['alpha']))}^{{{_n(d)}/{_n(d - 2)}}},\quad j=0..{last}"
                r"\quad\text{(NTK scaling by a fixed alpha)}")
    if rope.kind == "dynamic":
        return (rf"{sym}_j=b'^{{-2j/{_n(d)}}},\ b'={b}\,(s L/L_0-(s-1))^{{{_n(d)}/{_n(d - 2)}}},\ s={_n(float(p['factor']))},"
                rf"\ L=\max(T,L_0),\ L_0={_n(rope.max_positions)}\quad\text{{(dynamic NTK: }}b'=b\text{{ while }}T\le L_0)")
    if rope.kind == "llama3":
        s, lo, hi = (_n(float(p[k])) for k in ("factor", "low_freq_factor", "high_freq_factor"))
        L = _n(p["original_max_position_embeddings"])
        return (rf"g_j={plain},\ \lambda_j=2\pi/g_j;\ {sym}_j=g_j\ (\lambda_j<{L}/{hi}),\ {sym}_j=g_j/{s}\ (\lambda_j>{L}/{lo}),"
                rf"\ \text{{else}}\ {sym}_j=(1-\mu_j)g_j/{s}+\mu_j g_j,\ \mu_j=\tfrac{{{L}/\lambda_j-{lo}}}{{{hi}-{lo}}},\quad j=0..{last}\quad\text{{(llama3 scaling)}}")
    if rope.kind == "yarn":
        s = _n(float(p.get("factor") or rope.max_positions / p["original_max_position_embeddings"]))
        low, high = _yarn_ramp(p, d, rope.base)
        return (rf"g_j={plain},\ \rho_j=\operatorname{{clamp}}\!\big(\tfrac{{j-{_n(low)}}}{{{_n(high)}-{_n(low)}}},0,1\big),"
                rf"\ {sym}_j=(1-\rho_j)\,g_j+\rho_j\,g_j/{s},\quad j=0..{last}\quad\text{{(YaRN, original length {_n(p['original_max_position_embeddings'])})}}")
    if rope.kind == "longrope":
        return rf"{sym}_j={plain}/e_j,\ j=0..{last},\quad e=\text{{short\_factor }}({_factors_tex(p['short_factor'])})\ \text{{while }}T\le{_n(p['original_max_position_embeddings'])}\quad\text{{(LongRoPE)}}"
    return rf"{sym}_j={plain},\quad j=0..{last}"


def _n(x) -> str:
    """A config number as TeX: whole numbers in full (rope_theta 150,000), others to four digits."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 1e15:
        return T.num(int(x))
    return T.num(x)


def _four(x: float) -> str:
    """An amplitude to four decimals (gpt-oss's 0.1 ln 32 + 1 = 1.3466)."""
    return f"{x:.4f}".rstrip("0").rstrip(".")


def _factors_tex(values) -> str:
    shown = [_n(float(v)) for v in values[:3]]
    return ",".join(shown) + (r",\dots" if len(values) > 3 else "")


def amplitude_tex(rope: Rope, amplitude: float) -> str:
    """Where the amplitude comes from, at the checkpoint's values."""
    p = rope.params
    if rope.kind == "yarn" and p.get("attention_factor") is None:
        s = float(p.get("factor") or rope.max_positions / p["original_max_position_embeddings"])
        if p.get("mscale") and p.get("mscale_all_dim"):
            return (rf"a=\tfrac{{0.1\cdot{_n(float(p['mscale']))}\ln {_n(s)}+1}}{{0.1\cdot{_n(float(p['mscale_all_dim']))}\ln {_n(s)}+1}}"
                    rf"={_four(amplitude)}\quad\text{{(YaRN's attention factor)}}")
        return rf"a=0.1\ln {_n(s)}+1={_four(amplitude)}\quad\text{{(YaRN's attention factor)}}"
    if rope.kind == "longrope" and p.get("attention_factor") is None:
        s = p.get("factor") or rope.max_positions / p["original_max_position_embeddings"]
        return (rf"a=\sqrt{{1+\ln {_n(float(s))}/\ln {_n(p['original_max_position_embeddings'])}}}={_four(amplitude)}"
                r"\quad\text{(LongRoPE's attention factor)}")
    return rf"a={_four(amplitude)}\quad\text{{(the rope's attention factor)}}"


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
    import torch

    seq_holder: dict[str, int] = {}
    up = rf"^{{\mathrm{{{label}}}}}" if label else ""
    f_name, a_name, th_name, r_name = f"f{suffix}", f"a{suffix}", f"theta{suffix}", f"R{suffix}"

    def freqs(e):
        seq_holder["T"] = int(e[positions].max()) + 1
        return frequencies(tiny, seq_holder["T"])[0]

    def amplitude(e):
        return torch.tensor(frequencies(tiny, seq_holder["T"])[1], dtype=torch.float64)

    full_a = frequencies(full, full.max_positions or 0)[1]
    scaled = full_a != 1.0 or frequencies(tiny, 1)[1] != 1.0  # an amplitude other than 1: a step of its own
    shown, words = LAYOUTS[layout]
    if full.kind == tiny.kind == "default":  # printed from the arithmetic it runs
        # a line of the summary as it was typed: folded into the angles, its base would stand beside p_t unbracketed
        out = [Step(expr=E.Let(E.Sym(f_name, f"f{up}_j"), default_frequencies(full, tiny)), summary=True)]
    else:  # the base, the rotated dims and the factors at the checkpoint's values
        out = [Step(frequency_tex(full, "f" + up), f_name, freqs)]
    if scaled:
        out.append(Step(amplitude_tex(full, full_a), a_name, amplitude, summary=True))
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
        facts[kind or "all"] = {**facts_of(full_rope, frequencies(full_rope, full_rope.max_positions or 0)[1]), "layout": layout}
    stack.rotary_names = [env_names.get(k) if k is not None else None for k in names]
    how = "computed from the config by the steps; compared with the model's rotary module on the preview run"
    if several:  # one fact per rope, by the kind of block that reads it
        return steps, {f"rotary_{kind}": {"value": fact, "how": how} for kind, fact in facts.items()}
    return steps, {"rotary": {"value": next(iter(facts.values())), "how": how}}
