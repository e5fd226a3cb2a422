"""The step library: a chain of executable steps for each kind of component.

Which chain a module gets is decided from what the module is (its tensors, its children, the
settings it holds) and, where two formulas fit the same structure (RMSNorm's gain g or 1 + g, the
activation, the router's rule), from which one reproduces the module on the preview run; a family
may declare a variant instead (``Family.equations``), and a wrong declaration fails its proof.
"""

from __future__ import annotations

import math
from typing import Callable

from atlas.proof import arrange as A
from atlas.proof import expr as E
from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.steps import Chain, Env, Input, Step, run_chain
from atlas.model.structure import has_epsilon, is_weightless_norm, norm_epsilon as _eps, sequential_mlp  # noqa: F401 - the predicates are the model's; kinds asks them here

X = Input("x", "x", "hidden_states", "the module's input")


# What gives a part its chain: atlas.proof.kinds.build, which tells every kind of module apart and so
# sits above every chain module. A chain builds its children's chains through ``chain_of`` (``sub``),
# below that dispatch, so kinds hands it in here when it is imported (``use_dispatch``).
_dispatch: Callable[[Part], Chain] | None = None


def use_dispatch(build: Callable[[Part], Chain]) -> None:
    """Make ``build`` what gives each part its chain (atlas.proof.kinds does, on its import)."""
    global _dispatch
    _dispatch = build


def chain_of(part: Part) -> Chain:
    """The part's chain, built once per page id."""
    if part.id not in part.ctx.chains:
        if _dispatch is None:
            raise LookupError("no dispatch to build chains with: import atlas.proof.kinds, which hands it in")
        part.ctx.chains[part.id] = _dispatch(part)
        part.ctx.parts.setdefault(part.id, part)
    return part.ctx.chains[part.id]


def sub(part: Part, name: str, **inputs: str):
    """A step function that runs child ``name``'s own chain on its weights; ``inputs`` maps the child's
    input names to names in this chain's environment."""
    child = part.child(name)
    chain = chain_of(child)

    def fn(e: Env):
        values = {i.name: e[inputs.get(i.name, i.name)] for i in chain.inputs}
        return run_chain(chain, e.child(name, values))

    fn.child_id = child.id
    fn.child_name = name  # the child's path relative to this module: the attribute the forward calls
    fn.child_inputs = {i.name: inputs.get(i.name, i.name) for i in chain.inputs}  # what feeds each input
    return fn


def _child_facts(part: Part, name: str) -> dict:
    """The facts child ``name``'s own chain measured (its norm, its bias, its activation)."""
    child = part.child(name)
    chain_of(child)
    return part.ctx.parts.get(child.id, child).facts


def linear_call(part: Part, name: str, x: "E.Sym", symbol: str) -> "E.Child":
    """Child ``name``, a linear map, applied to ``x``: printed x W^⊤ (+ b where the child's own chain has
    a bias), computed by the child's chain."""
    stored_in_out = linear_dims(part.full.get_submodule(name))[2]
    bias = bool(_child_facts(part, name).get("bias", {}).get("value"))
    top = "" if stored_in_out else r"^{\top}"
    b = ("+b_" + symbol[2:] if symbol.startswith("W_") else "+b") if bias else ""
    return apply_child(part, name, lambda a: rf"{a}\,{symbol}{top}{b}", bracket=E.POWER, binds=E.SUM if bias else E.PRODUCT, x=x)


NORM_NAMES = {"rms": "RMSNorm", "rms_offset": "RMSNorm", "layer": "LayerNorm", "layer_offset": "LayerNorm", "l2": "L2Norm"}


def norm_call(part: Part, name: str, x: "E.Sym") -> "E.Child":
    """Child ``name``, a norm, applied to ``x``: printed by the norm its own chain measured, so a page
    cannot name a norm that does not run (nor run one it does not name)."""
    measured = _child_facts(part, name)["norm"]["value"]
    return apply_child(part, name, lambda a: rf"\operatorname{{{NORM_NAMES[measured]}}}({a})", x=x)


def child_output(part: Part, name: str, **inputs: str):
    """``sub`` for a child whose output is a tuple: its first element (the tensor the parent uses)."""
    fn = sub(part, name, **inputs)

    def first(e: Env):
        out = fn(e)
        return out[0] if isinstance(out, tuple) else out

    first.child_id, first.child_name, first.child_inputs = fn.child_id, fn.child_name, fn.child_inputs
    return first


def apply_child(part: Part, name: str, notation: Callable[..., str], whole: bool = True, *, bracket: int = 0,
                binds: int | None = None, **feeds: "E.Sym") -> "E.Child":
    """Child ``name``'s own chain fed the names ``feeds`` gives each of its inputs (those not given read
    their own name), printed by ``notation`` from those arguments' TeX in the order given; its first
    output unless ``whole``. ``bracket`` and ``binds``: as ``E.Child``'s, for a notation that sets its
    argument beside other symbols (x W^⊤)."""
    fn = (sub if whole else child_output)(part, name, **{k: v.name for k, v in feeds.items()})
    return E.Child(fn, tuple(feeds.values()), notation, bracket, E.ATOM if binds is None else binds)


def handed_residual(part: Part) -> bool:
    """Whether the module was handed the residual stream to add its output to (BLOOM's attention and
    MLP take it as an argument of their own), read from the call it received on the run."""
    import torch

    return part.path in part.ctx.calls and isinstance(part.argument("residual"), torch.Tensor)


RESIDUAL = Input("r", "r", "residual", "the residual stream the block hands the module, to add its contribution to")


def add_handed_residual(part: Part, chain: Chain, delta: str = r"\Delta") -> Chain:
    """The chain of a sublayer that adds the stream itself: its contribution, then the stream added."""
    if not handed_residual(part):
        return chain
    last = chain.output
    chain.steps.append(Step(rf"y=r+{delta}\quad\text{{(the module adds the stream }}r\text{{ it is handed)}}", "with_residual",
                            lambda e: e["r"] + e[last], summary=True))
    chain.inputs.append(RESIDUAL)
    chain.output = "with_residual"
    part.note("adds_residual", True, "the module is handed the residual stream and returns its output added to it")
    return chain


# --- norms -----------------------------------------------------------------------------------------


def norm(part: Part, x: str = "x", y: str = "y") -> Chain:
    if getattr(part.tiny, "weight", None) is None and not dict(part.tiny.named_parameters()):
        return weightless_norm(part, x, y)  # no gain at all: nothing but its epsilon
    width = part.full.weight.shape[-1]
    eps = E.Size(_eps(part.full), _eps(part.tiny))
    xs, rho, xhat, mu, var, out = (E.Sym("x", x), E.Sym("rho", r"\rho", False), E.Sym("xhat", rf"\hat {x}"),
                                   E.Sym("mu", r"\mu", False), E.Sym("var", r"\sigma^2", False), E.Sym("y", y))
    g, b = E.Weight("weight", "g", (width,)), E.Weight("bias", "b", (width,))

    def rms(offset: bool) -> Chain:
        return Chain([
            Step(expr=E.Let(rho, E.Mean(xs ** 2, width)), out="rho"),
            Step(expr=E.Let(xhat, xs / E.sqrt(rho + eps)), out="xhat", summary=True),
            Step(expr=E.Let(out, ((1 + g) if offset else g) * xhat), out="y", summary=True),
        ], [X], "y")

    def layer(offset: bool = False) -> Chain:
        # offset: the gain is one plus the stored weight (Nemotron's LayerNorm1P), as in rms_offset
        centred = (xs - mu) / E.sqrt(var + eps) * ((1 + g) if offset else g)
        with_bias = "bias" in dict(part.tiny.named_parameters())
        return Chain([  # mean-centred, a gain, and a bias where the module holds one (Cohere's has none)
            Step(expr=E.Let(mu, E.Mean(xs)), out="mu"),
            Step(expr=E.Let(var, E.Mean((xs - mu) ** 2)), out="var"),
            Step(expr=E.Let(out, centred + b if with_bias else centred, "" if with_bias else "(no bias)"), out="y", summary=True),
        ], [X], "y")

    part.note("eps", eps.full, "the module's epsilon")
    variants = {"rms": lambda: rms(False), "rms_offset": lambda: rms(True)}
    if "bias" in dict(part.tiny.named_parameters()):
        variants = {"layer": layer, "layer_offset": lambda: layer(True), **variants}
    else:
        variants.update(layer=layer, layer_offset=lambda: layer(True))
    return part.choose("norm", variants)


# the sizes a norm's axis may be: a width of the stream, of a mixer or of its parts (a vocabulary's size, a
# layer count or a token id that the tiny config happens to make equal is no axis)
NORM_AXIS_SIZES = ("hidden_size", "intermediate_size", "time_step_rank", "state_size", "ssm_state_size",
                   "kv_lora_rank", "q_lora_rank")


def _checkpoint_width(tiny_cfg, cfg, width: int) -> int | None:
    """The checkpoint's width of an axis the tiny run shows ``width`` wide: the checkpoint's value of the
    axis sizes the tiny config gives that width (Falcon Mamba's time-step norm: time_step_rank), where they
    agree; None where none has it (DeepSeek-V4's norm over its four streams at once) or sizes the tiny
    config makes equal differ at the checkpoint's."""
    from atlas.inputs.layers import global_value

    keys = [k for k in NORM_AXIS_SIZES if global_value(tiny_cfg, k) == width]
    full = {global_value(cfg, k) for k in keys}
    return full.pop() if len(full) == 1 and None not in full else None


def weightless_norm(part: Part, x: str = "x", y: str = "y") -> Chain:
    """x divided by its root mean square, by its length, or centred and divided by its deviation, over
    the last axis, which one measured; no gain, no bias."""
    eps = E.Size(_eps(part.full), _eps(part.tiny))
    from atlas.inputs.layers import global_value, heterogeneous

    given = part.argument("x", 0)
    width = given.shape[-1] if given is not None else None
    cfg, tiny_cfg = part.ctx.full_config, part.ctx.tiny_config
    # the checkpoint's width: the tiny width scaled back where it is a head's (the attention's q and k
    # norm); not said where head widths differ from block to block (Gemma 4), as one number would be wrong
    if heterogeneous(cfg):
        width = None
    elif width is not None and global_value(tiny_cfg, "head_dim") == width and global_value(cfg, "head_dim"):
        width = global_value(cfg, "head_dim")
    elif width is not None:
        width = _checkpoint_width(tiny_cfg, cfg, width)
    fixed = not any(isinstance(getattr(part.full, a, None), float) for a in ("variance_epsilon", "eps", "epsilon"))
    part.note("eps", eps.full, "a literal of the class's forward, measured on a probe input" if fixed else "the module's epsilon")
    part.note("gain", "none", "the module holds no tensor")
    xs, rho, mu, var, out = E.Sym("x", x), E.Sym("rho", r"\rho", False), E.Sym("mu", r"\mu", False), E.Sym("var", r"\sigma^2", False), E.Sym("y", y)

    def rms() -> Chain:
        return Chain([
            Step(expr=E.Let(rho, E.Mean(xs ** 2, width)), out="rho"),
            Step(expr=E.Let(out, xs / E.sqrt(rho + eps), "(no gain)"), out="y", summary=True),
        ], [X], "y")

    def l2() -> Chain:
        return Chain([
            Step(expr=E.Let(rho, E.Mean(xs ** 2, total=True)), out="rho"),
            Step(expr=E.Let(out, xs / E.sqrt(rho + eps), "(no gain)"), out="y", summary=True),
        ], [X], "y")

    def layer() -> Chain:
        return Chain([
            Step(expr=E.Let(mu, E.Mean(xs, width)), out="mu"),
            Step(expr=E.Let(var, E.Mean((xs - mu) ** 2, width)), out="var"),
            Step(expr=E.Let(out, (xs - mu) / E.sqrt(var + eps), "(no gain, no bias)"), out="y", summary=True),
        ], [X], "y")

    return part.choose("norm", {"rms": rms, "l2": l2, "layer": layer})


# --- linear maps, lookups, dropout, activations -----------------------------------------------------


def linear_dims(module) -> tuple[int, int, bool]:
    """(in, out, stored transposed): torch's Linear stores [out, in]; GPT-2's Conv1D stores [in, out]."""
    import torch

    w = module.weight
    if isinstance(module, torch.nn.Linear):
        return w.shape[1], w.shape[0], False
    return w.shape[0], w.shape[1], True


def _attr(module, *names):
    """The first of ``names`` the module holds as a number (never a bool): a setting read off the module."""
    return next((getattr(module, n) for n in names if isinstance(getattr(module, n, None), (int, float)) and not isinstance(getattr(module, n), bool)), None)


def linear(part: Part, symbol: str = "W") -> Chain:
    n_in, n_out, stored_in_out = linear_dims(part.full)
    has_bias = getattr(part.tiny, "bias", None) is not None
    declared = part.declared("bias")
    bias = has_bias if declared is None else bool(declared)
    part.note("bias", bias, "declared by the family" if declared is not None else "the module holds a bias tensor" if has_bias else "the module holds no bias")
    part.note("stored", "in × out" if stored_in_out else "out × in", "the weight's shape")
    weight = E.Weight("weight", symbol, (n_in, n_out) if stored_in_out else (n_out, n_in))
    product = E.MatMul(E.Sym("x", "x"), weight, stored_in_out)
    expr = product + E.Weight("bias", "b") if bias else product
    return Chain([Step(expr=E.Let(E.Sym("y", "y"), expr, "(stored in × out)" if stored_in_out else ""), summary=True)], [X], "y")


def embedding(part: Part) -> Chain:
    vocab, width = part.full.weight.shape
    ids = Input("ids", "I", "input_ids", "the token ids (or positions) looked up")

    table, looked_up, row = E.Weight("weight", "E", (vocab, width)), E.Sym("y", "x_t"), E.Sym("ids", "I_t")

    def plain() -> Chain:
        return Chain([Step(expr=E.Let(looked_up, E.rows(table, row)), summary=True)], [ids], "y")

    def scaled() -> Chain:
        root = E.Size(math.sqrt(width), math.sqrt(part.tiny.weight.shape[1]), rf"\sqrt{{{T.num(width)}}}")
        return Chain([Step(expr=E.Let(looked_up, root * E.rows(table, row)), summary=True)], [ids], "y")

    variants = {"lookup": plain, "scaled_by_sqrt_width": scaled}
    if _scalar_buffer(part.tiny, "embed_scale") is not None:
        variants["scaled_by_config_value"] = lambda: _embedding_scaled_by_buffer(part, ids, vocab, width)
    offset = getattr(part.tiny, "offset", None)
    if isinstance(offset, int) and not isinstance(offset, bool):

        def from_mask() -> Chain:
            """A learned position table read at positions counted from the attention mask, shifted by the
            module's offset (OPT): the first real token reads row offset."""
            mask = Input("ids", "m", "attention_mask", "the attention mask: 1 for each real token")
            return Chain([
                Step(r"t_i=\textstyle\sum_{j\le i} m_j-1", "t", lambda e: (e["ids"].cumsum(-1) - 1) * e["ids"]),
                Step(rf"x_i=P_{{t_i+{offset},:}},\quad P\in\mathbb{{R}}^{{{T.num(vocab)}\times{T.num(width)}}}\ \text{{(rows shifted by the module's offset)}}", "y",
                     lambda e: e.w("weight")[e["t"] + offset], summary=True),
            ], [mask], "y")

        variants["positions_from_mask_offset"] = from_mask
    return part.choose("embedding", variants)


def _scalar_buffer(module, name: str) -> float | None:
    value = dict(module.named_buffers(recurse=False)).get(name)
    return float(value) if value is not None and value.numel() == 1 else None


def _embedding_scaled_by_buffer(part: Part, ids: Input, vocab: int, width: int) -> Chain:
    """Rows times a scale the module holds as a one-number buffer (MiniCPM's scale_emb). A meta-device
    buffer has no value, so the page names the config key the tiny run's buffer equals, read at the
    checkpoint's config; where no key equals it, the scale is shown by its buffer's name."""
    tiny = _scalar_buffer(part.tiny, "embed_scale")
    key = next((k for k, v in sorted(vars(part.ctx.tiny_config).items())
                if isinstance(v, (int, float)) and not isinstance(v, bool) and float(v) == tiny
                and isinstance(getattr(part.ctx.full_config, k, None), (int, float))), None)
    shown = (rf"{T.num(float(getattr(part.ctx.full_config, key)))}\,E_{{I_t,:}}\quad\text{{(the config's {key.replace('_', chr(92) + '_')})}}"
             if key else r"s\,E_{I_t,:}\quad s\ \text{the module's embed\_scale}")
    if key:
        part.note("embedding_scale", {"config_key": key, "value": getattr(part.ctx.full_config, key)}, "the tiny run's embed_scale buffer equals this config value")
    return Chain([Step(rf"x_t={shown},\quad E\in\mathbb{{R}}^{{{T.num(vocab)}\times{T.num(width)}}}", "y",
                       lambda e: e.w("weight")[e["ids"]] * e.w("embed_scale"), summary=True)], [ids], "y")


def dropout(part: Part) -> Chain:
    part.note("dropout", "identity at inference", "the preview runs in eval mode")
    return Chain([Step(expr=E.Let(E.Sym("y", "y"), E.Sym("x", "x"), "(dropout is off at inference)"), summary=True)], [X], "y")


# each activation once, its notation and its arithmetic together (atlas.proof.expr)
ACTIVATION_FUNCTIONS = {"silu": E.silu, "gelu_tanh": E.gelu_tanh, "gelu": E.gelu, "relu": E.relu, "relu2": E.relu2,
                        # a router's score (DeepSeek-V4's scoring_func sqrtsoftplus): the square root of softplus
                        "sqrtsoftplus": E.sqrtsoftplus}


def _activation_pair(name: str):
    function = ACTIVATION_FUNCTIONS[name]
    g = E.Sym("g", "g")
    return E.Let(E.Sym("a", "a"), function(g), define=True).tex(), lambda t: function(g).run({"g": t})


# (TeX of "a = f(g) = its definition", the function on a tensor), both from the one expression
ACTIVATIONS = {name: _activation_pair(name) for name in ACTIVATION_FUNCTIONS}


def activation_tex(part: Part) -> str:
    return ACTIVATIONS[part.facts["activation"]["value"]][0]


def activation(part: Part) -> Chain:
    if set(dict(part.tiny.named_parameters(recurse=False))) == {"alpha_p", "alpha_n"}:
        return xielu(part)
    g = Input("x", "g", "input", "the pre-activation")

    def variant(name):
        return lambda: Chain([Step(expr=E.Let(E.Sym("a", "a"), ACTIVATION_FUNCTIONS[name](E.Sym("x", "g")), define=True), summary=True)], [g], "a")

    return part.choose("activation", {name: variant(name) for name in ACTIVATIONS})


def activation_call(part: Part, name: str, x: "E.Sym") -> "E.Child":
    """Child ``name``, an activation, applied to ``x``: printed by the activation its own chain measured."""
    measured = activation_name(part.child(name))
    if measured in ACTIVATION_FUNCTIONS:
        return apply_child(part, name, lambda a: ACTIVATION_FUNCTIONS[measured](E.Sym("_", a)).tex(), x=x)
    return apply_child(part, name, lambda a: rf"{ACT_NAMES[measured]}({a})", x=x)


def function_activation(module, name: str) -> str | None:
    """The activation a plain function held as attribute ``name`` computes (LFM2-MoE's experts hold
    F.silu itself, no module): the one of ACTIVATION_FUNCTIONS that gives its values on a probe; None
    where the attribute is a module, missing, or none of them matches."""
    import torch

    function = getattr(module, name, None)
    if function is None or isinstance(function, torch.nn.Module) or not callable(function):
        return None
    probe = torch.linspace(-4.0, 4.0, 33)
    with torch.no_grad():
        got = function(probe)
    return next((n for n, f in ACTIVATION_FUNCTIONS.items()
                 if torch.allclose(f(E.Sym("g", "g")).run({"g": probe}), got, atol=1e-6)), None)


def gate_activation(part: Part, name: str, g: "E.Sym") -> "E.Expr | None":
    """``a`` from ``g`` through the module's activation ``name``: a child module measured by its own
    chain, or a plain function measured on a probe (its step is then proven with the rest of the chain)."""
    if name in dict(part.tiny.named_children()):
        return activation_call(part, name, g)
    measured = function_activation(part.tiny, name)
    if measured is None:
        return None
    part.note("activation", measured, f"the module's {name} is a plain function; its values on a probe are {measured}'s")
    return ACTIVATION_FUNCTIONS[measured](g)


def activation_name(part: Part) -> str:
    """The activation a child act_fn computes (measured by its own chain)."""
    chain_of(part)
    return part.ctx.parts.get(part.id, part).facts["activation"]["value"]  # the part its chain was built for holds the facts


ACT_NAMES = {"silu": r"\operatorname{SiLU}", "gelu_tanh": r"\operatorname{GELU}_{\tanh}", "gelu": r"\operatorname{GELU}", "relu": r"\operatorname{ReLU}",
             "xielu": r"\operatorname{xIELU}", "relu2": r"\operatorname{ReLU}^2", "sqrtsoftplus": r"\sqrt{\operatorname{softplus}}"}


def xielu(part: Part) -> Chain:
    """An activation with two learned numbers (alpha_p, alpha_n) and two fixed ones (beta, eps): a
    quadratic for positive inputs, a saturating exponential for negative ones, plus a linear term."""
    import torch
    from torch.nn.functional import softplus

    g = Input("x", "g", "input", "the pre-activation")
    part.note("activation", "xielu", "the module holds two learned scalars, alpha_p and alpha_n, and no other parameter")
    beta, eps = (float(dict(part.tiny.named_buffers())[n]) for n in ("beta", "eps"))
    steps = [
        Step(r"\alpha_p=\operatorname{softplus}(\hat\alpha_p),\quad \alpha_n=\beta+\operatorname{softplus}(\hat\alpha_n)\quad\text{(two learned numbers)}",
             ("ap", "an"), lambda e: (softplus(e.w("alpha_p")), e.w("beta") + softplus(e.w("alpha_n")))),
        Step(rf"a=\begin{{cases}}\alpha_p g^2+\beta g & g>0\\ \alpha_n\,(e^{{\min(g,\epsilon)}}-1-g)+\beta g & g\le 0\end{{cases}}\quad \beta={T.num(beta)},\ \epsilon={eps:g}",
             "a", lambda e: torch.where(e["x"] > 0, e["ap"] * e["x"] * e["x"] + e.w("beta") * e["x"],
                                        (torch.expm1(torch.min(e["x"], e.w("eps"))) - e["x"]) * e["an"] + e.w("beta") * e["x"]), summary=True),
    ]
    return Chain(steps, [g], "a")


# --- dense MLPs --------------------------------------------------------------------------------------


def called_adapter(part: Part) -> str | None:
    """The entry of a list of low-rank adapters that the module's call reached (Zamba2's shared MLP holds one per
    use of the shared block and runs the one of the depth that calls it), as a path from the module; else None."""
    import torch

    from atlas.model.structure import is_low_rank_adapter

    for name, child in part.tiny.named_children():
        if isinstance(child, torch.nn.ModuleList) and any(is_low_rank_adapter(c) for c in child):
            called = [f"{name}.{i}" for i, c in enumerate(child) if is_low_rank_adapter(c) and f"{part.path}.{name}.{i}" in part.ctx.calls]
            if len(called) == 1:
                return called[0]
    return None


def at_called_entry(child: "E.Child", entry: str) -> "E.Child":
    """``child`` (built on the entry ``entry`` of a list the representative's call ran) run on the entry that each
    caller's own call ran: a block of the same kind at another depth runs its own adapter ("@use", atlas.proof.core)."""
    fn = child.fn
    listed, index = entry.rsplit(".", 1)

    def run(e):
        return fn(_RenamedEnv(e, f"{listed}.{index}.", f"{listed}.@use."))

    run.child_id, run.child_name, run.child_inputs = fn.child_id, fn.child_name, fn.child_inputs
    child.fn = run
    return child


class _RenamedEnv:
    """An environment whose weight names under ``old`` are read under ``new``."""

    def __init__(self, env, old: str, new: str):
        self._env, self._old, self._new = env, old, new

    def __getattr__(self, name):
        return getattr(self._env, name)

    def __getitem__(self, name):
        return self._env[name]

    def __contains__(self, name):
        return name in self._env

    def child(self, prefix: str, values):
        from atlas.proof.steps import Env

        if prefix.startswith(self._old) or f"{prefix}.".startswith(self._old):
            prefix = self._new + prefix[len(self._old):] if prefix.startswith(self._old) else self._new.rstrip(".")
        return Env(lambda name: self._env.w(f"{prefix}.{name}"), values)


def dense_mlp(part: Part, out: str = r"\Delta") -> Chain:
    """gate/up/down (gated), a fused gate-up projection (gated), or up/down with biases (two-layer)."""
    d = part.ctx.full_config.hidden_size
    names = set(dict(part.tiny.named_children()))
    act_child = next((n for n in ("act_fn", "act", "activation_fn", "activation", "gelu_impl") if n in names), None)
    if {"w1", "w2", "w3"} <= names and act_child is None:
        return _gated_w123(part, d, out)
    xs, g, u, a, hs, y = E.Sym("x", "x"), E.Sym("g", "g"), E.Sym("u", "u"), E.Sym("a", "a"), E.Sym("h", "h"), E.Sym("y", out)
    steps: list[Step] = []
    if {"gate_proj", "up_proj", "down_proj"} <= names:
        inner = linear_dims(part.full.gate_proj)[1]
        steps += [
            Step(expr=E.Let(g, linear_call(part, "gate_proj", xs, "W_g"), maps=(d, inner))),
            Step(expr=E.Let(u, linear_call(part, "up_proj", xs, "W_u"), maps=(d, inner))),
        ]
        down = "down_proj"
    elif {"gate_up_proj", "down_proj"} <= names or {"input_linear", "output_linear"} <= names:
        fused = "gate_up_proj" if "gate_up_proj" in names else "input_linear"  # Granite names the fused pair input_linear
        inner, tiny = linear_dims(getattr(part.full, fused))[1] // 2, linear_dims(getattr(part.tiny, fused))[1] // 2
        gu = E.Sym("gu", r"[g;\,u]")
        # its own summary line: folded into the split it would print twice
        steps.append(Step(expr=E.Let(gu, linear_call(part, fused, xs, "W_{gu}"), maps=(d, T.times(2, inner))), summary=True))
        adapter = called_adapter(part)
        if adapter:  # this use's own low-rank adapter added to the shared projection (Zamba2's shared MLP)
            r = E.Sym("ra", "r")
            steps += [Step(expr=E.Let(r, at_called_entry(linear_call(part, f"{adapter}.0", xs, "A_k"), adapter),
                                      "(k: this use of the shared block)")),
                      Step(expr=E.Let(gu, gu + at_called_entry(linear_call(part, f"{adapter}.1", r, "B_k"), adapter)))]
            part.note("adapter", adapter, "the one entry of the module's adapter list its call reached on the run")
        steps += [
            # the gate the first half of the fused projection's columns, the up projection the second
            Step(expr=E.Lets((E.Let(g, A.column_block(gu, E.Size(1, 1), E.Size(inner, tiny))),
                              E.Let(u, A.column_block(gu, E.Size(inner + 1, tiny + 1), E.Size(2 * inner, 2 * tiny)))), each=False)),
        ]
        down = "down_proj" if fused == "gate_up_proj" else "output_linear"
    else:
        layers = sequential_mlp(part.tiny)  # a Sequential of the two maps and the activation between them (CTRL)
        if layers:
            up, act_child, down = layers
        else:
            up = next(n for n in ("c_fc", "fc1", "fc_in", "up_proj", "dense_h_to_4h") if n in names)
            down = next(n for n in ("c_proj", "fc2", "fc_out", "down_proj", "dense_4h_to_h") if n in names)
        inner = linear_dims(getattr(part.full, up))[1]
        f = E.Sym("f", "f")
        steps += [Step(expr=E.Let(f, linear_call(part, up, xs, "W_1"), maps=(d, inner)))]
        steps += [Step(expr=E.Let(a, activation_call(part, act_child, f)), value="mlp_activation", summary=True),
                  Step(expr=E.Let(y, linear_call(part, down, a, "W_2"), maps=(inner, d)), value="mlp_output", summary=True)]
        if "dropout" in names:
            steps.append(Step(expr=E.Let(y, E.Child(sub(part, "dropout", x="y"), (y,), lambda v: rf"\operatorname{{Dropout}}({v})"),
                                         "(the identity at inference)")))
        part.note("mlp", "two-layer", "the module's children: an up and a down projection, no gate")
        return add_handed_residual(part, Chain(steps, [X], "y"), out)
    limit = swiglu_limit(part.full)
    if limit is not None:  # the gate clamped from above, the up projection on both sides (DeepSeek-V4's swiglu_limit)
        bound = E.Size(limit, swiglu_limit(part.tiny))
        steps += [Step(expr=E.Let(g, E.clamp_max(g, bound)), summary=True), Step(expr=E.Let(u, E.clamp(u, bound)), summary=True)]
        part.note("clamp", limit, "the module's limit")
    gate_scale, down_scale = _mlp_multipliers(part)
    if gate_scale:  # the gate's pre-activation times a constant the module holds (Falcon-H1's mlp_multipliers[0])
        steps.append(Step(expr=E.Let(g, E.Size(*gate_scale) * g, "(the module's gate_multiplier)"), summary=True))
    if act_child:
        steps.append(Step(expr=E.Let(a, activation_call(part, act_child, g)), value="mlp_activation", summary=True))
    sub_norm = "ffn_sub_norm" if "ffn_sub_norm" in names else None
    steps.append(Step(expr=E.Let(hs, a * u), value=None if sub_norm else "mlp_neurons", summary=True))
    if sub_norm:  # the gated product normalised across the inner width before the down projection (BitNet's ffn_sub_norm)
        part.note("sub_norm", sub_norm, "the module's own norm child, called on the gated product before the down projection")
        steps.append(Step(rf"h\leftarrow\operatorname{{Norm}}_{{\text{{sub}}}}(h)\quad\text{{across the inner width, before the down projection}}", "h",
                          sub(part, sub_norm, x="h"), value="mlp_neurons", sub=f"{part.id}.{sub_norm}"))
    steps.append(Step(expr=E.Let(y, linear_call(part, down, hs, "W_d"), maps=(inner, d)), value=None if down_scale else "mlp_output", summary=True))
    if down_scale:  # the down projection's output times a constant the module holds (Falcon-H1's mlp_multipliers[1])
        steps.append(Step(expr=E.Let(y, E.Size(*down_scale) * y, "(the module's down_multiplier)"), value="mlp_output", summary=True))
        part.note("multipliers", {"gate": gate_scale[0] if gate_scale else 1.0, "down": down_scale[0]}, "the module's gate_multiplier and down_multiplier")
    part.note("mlp", "gated", "the module's children: gate and up projections (or one fused), a down projection")
    return Chain(steps, [X], "y")


def swiglu_limit(module) -> float | None:
    """The bound a gated MLP clamps its gate and up projections to, where the module holds one (a number
    ``limit`` and no ``alpha``: gpt-oss's clamped experts, which hold both, have steps of their own)."""
    limit = getattr(module, "limit", None)
    return float(limit) if isinstance(limit, (int, float)) and not isinstance(limit, bool) and not hasattr(module, "alpha") else None


def _mlp_multipliers(part: Part):
    """The constants a gated MLP module holds for its gate's pre-activation and its down projection's
    output (Falcon-H1): ((checkpoint value, tiny value) or None, the same for the down side); None
    where the module holds none or it is 1."""
    def pair(name):
        full, tiny = getattr(part.full, name, None), getattr(part.tiny, name, None)
        ok = isinstance(full, (int, float)) and not isinstance(full, bool) and isinstance(tiny, (int, float))
        return (float(full), float(tiny)) if ok and not (full == 1 and tiny == 1) else None

    return pair("gate_multiplier"), pair("down_multiplier")


def _gated_w123(part: Part, d: int, out: str) -> Chain:
    """A gated MLP named w1 (gate), w3 (up), w2 (down) whose forward applies the activation as a function
    (LFM2's): which activation is measured, as for an activation module."""
    inner = linear_dims(part.full.w1)[1]
    xs, g, u, a, hs, y = E.Sym("x", "x"), E.Sym("g", "g"), E.Sym("u", "u"), E.Sym("a", "a"), E.Sym("h", "h"), E.Sym("y", out)

    def build(name: str):
        return lambda: Chain([
            Step(expr=E.Let(g, linear_call(part, "w1", xs, "W_1"), maps=(d, inner))),
            Step(expr=E.Let(u, linear_call(part, "w3", xs, "W_3"), maps=(d, inner))),
            Step(expr=E.Let(a, ACTIVATION_FUNCTIONS[name](g)), value="mlp_activation", summary=True),
            Step(expr=E.Let(hs, a * u), value="mlp_neurons", summary=True),
            Step(expr=E.Let(y, linear_call(part, "w2", hs, "W_2"), maps=(inner, d)), value="mlp_output", summary=True),
        ], [X], "y")

    part.note("mlp", "gated", "the module's children: w1 (gate), w3 (up), w2 (down)")
    return part.choose("activation", {name: build(name) for name in ACTIVATIONS})
