"""A recurrent block with a real-gated linear recurrent unit (Griffin's, RecurrentGemma's), as steps.

The block has two branches of the same width. One is a linear map and an activation. The other is a
linear map, a short causal depthwise convolution over the positions, and the RG-LRU. The RG-LRU keeps
one number per channel: at each position it computes two gates from its input with block-diagonal
weights (one block per head), an input gate i and a recurrence gate r, forms the decay
a = exp(-c · r · softplus(Λ)) in log space from a learned vector Λ (c = 8), and updates its state
h_t = a_t h_{t-1} + sqrt(1 - a_t²) (i_t x_t). At the first position of a sequence the state restarts:
the decay counts as 0 and the square-root factor as 1. The chain writes that recurrence position by
position; transformers runs the same loop, and the proof checks that both give the module's output on
the preview run. The branches' product goes through the output projection.

Which module is an RG-LRU, and which a recurrent block, comes from structure (atlas.model.structure.is_rg_lru,
is_recurrent_block): a childless module holding one vector of the width, two heads × block × block
weights and two heads × block biases; and a module holding a depthwise convolution beside one.
"""

from __future__ import annotations

from atlas.proof import tex as T
from atlas.proof.core import Part
from atlas.proof.library import ACT_NAMES, X, activation_name, sub
from atlas.proof.steps import Chain, Step

DECAY_CONSTANT = 8.0  # c in a = exp(-c · r · softplus(Λ)): fixed in the unit, not a parameter


def _gate_tensors(module) -> tuple[str, str, str, str, str]:
    """(decay parameter, input-gate weight, its bias, recurrence-gate weight, its bias) by structure: the
    one vector; the 3-D weights and 2-D biases in the order the module holds them, the input gate's
    first. Which of the two gates is which is checked by the proof against the run's captured gates."""
    own = list(module.named_parameters(recurse=False))
    vector = next(n for n, p in own if p.dim() == 1)
    weights = [n for n, p in own if p.dim() == 3]
    biases = [n for n, p in own if p.dim() == 2]
    return vector, weights[0], biases[0], weights[1], biases[1]


def _softplus(x):
    import torch

    return torch.where(x > 20.0, x, torch.log1p(x.clamp(max=20.0).exp()))


def rg_lru(part: Part) -> Chain:
    import torch

    heads, block, _ = next(p for p in part.full.parameters() if p.dim() == 3).shape
    width = heads * block
    lam, w_i, b_i, w_r, b_r = _gate_tensors(part.tiny)
    t_heads, t_block, _ = part.tiny.get_parameter(w_i).shape
    c = DECAY_CONSTANT

    def gate(weight: str, bias: str):
        def fn(e):
            x = e["x"]  # (batch, T, width): split into heads' blocks, each multiplied by its own block
            blocks = x.reshape(*x.shape[:-1], t_heads, t_block)
            out = torch.einsum("...hj,hjk->...hk", blocks, e.w(weight)) + e.w(bias)
            return torch.sigmoid(out.reshape(x.shape))

        return fn

    def decay(e):
        log_a = -c * e["r"] * _softplus(e.w(lam))
        return log_a, torch.exp(log_a)

    def scale(e):
        beta = torch.sqrt(1 - torch.exp(2 * e["log_a"]))
        beta[:, 0] = 1.0  # the sequence's first position: the input enters unscaled
        return beta

    def scan(e):
        a, u = e["a"], e["beta"] * e["i"] * e["x"]
        h = torch.zeros_like(u[:, 0])
        states = []
        for t in range(u.shape[1]):
            h = (a[:, t] * h if t > 0 else 0 * h) + u[:, t]  # at t = 0 the state restarts from nothing
            states.append(h)
        return torch.stack(states, dim=1)

    blockdiag = rf"W^{{[h]}}\in\mathbb{{R}}^{{{T.num(block)}\times{T.num(block)}}},\ h=1..{T.num(heads)}"
    steps = [
        Step(rf"i_t=\sigma\big(x^{{[h]}}_t W_i^{{[h]}}+b_i^{{[h]}}\big)\quad\text{{per head's block of channels, }}{blockdiag}",
             "i", gate(w_i, b_i), value="rglru_input_gate", summary=True),
        Step(rf"r_t=\sigma\big(x^{{[h]}}_t W_r^{{[h]}}+b_r^{{[h]}}\big)\quad\text{{(the recurrence gate, block-diagonal as }}i_t\text{{)}}",
             "r", gate(w_r, b_r), value="rglru_recurrence_gate", summary=True),
        Step(rf"\log a_t=-{T.num(c)}\,r_t\odot\operatorname{{softplus}}(\Lambda),\quad a_t=e^{{\log a_t}}=\sigma(-\Lambda)^{{{T.num(c)}\,r_t}},"
             rf"\quad \Lambda\in\mathbb{{R}}^{{{T.num(width)}}}", ("log_a", "a"), decay, summary=True),
        Step(r"\beta_t=\sqrt{1-a_t^2}=\sqrt{1-e^{2\log a_t}}\ \text{for } t>0,\quad \beta_0=1", "beta", scale),
        Step(rf"h_t=a_t\odot h_{{t-1}}+\beta_t\odot(i_t\odot x_t),\quad h_{{-1}}=0,\ a_0\text{{ taken as }}0"
             rf"\quad\text{{(one number per channel, {T.num(width)} in all; the output is the state)}}", "h", scan,
             value="rglru_state", summary=True),
    ]
    part.note("state", {"channels": width, "heads": heads, "block": block}, "the unit's tensors")
    part.note("decay_constant", c, "the unit's fixed constant, checked on the preview run")
    return Chain(steps, [X], "h")


def recurrent_block(part: Part) -> Chain:
    """Griffin's recurrent block: activation(x W_y) times RG-LRU(conv(x W_x)), then the output projection."""
    import torch

    from atlas.model.roles import ACTIVATION_NAMES
    from atlas.model.structure import is_rg_lru

    children = dict(part.tiny.named_children())
    conv_name = next(n for n, m in children.items() if isinstance(m, torch.nn.Conv1d))
    lru_name = next(n for n, m in children.items() if is_rg_lru(m))
    act_name = next(n for n in ACTIVATION_NAMES if n in children)
    # the three linear maps by the names Griffin's code gives them: x feeds the convolution, y the gate branch
    x_name, y_name, out_name = "linear_x", "linear_y", "linear_out"
    conv = part.full.get_submodule(conv_name)
    channels, kernel = conv.weight.shape[0], conv.kernel_size[0]
    t_kernel = part.tiny.get_submodule(conv_name).kernel_size[0]
    conv_bias = part.tiny.get_submodule(conv_name).bias is not None
    d = part.ctx.full_config.hidden_size
    act = ACT_NAMES[activation_name(part.child(act_name))]

    def convolve(e):
        u = e["u"]  # (batch, T, channels)
        w = e.w(f"{conv_name}.weight")[:, 0, :]
        padded = torch.cat([u.new_zeros(u.shape[0], t_kernel - 1, u.shape[2]), u], dim=1)
        out = sum(w[:, k] * padded[:, k:k + u.shape[1], :] for k in range(t_kernel))
        return out + e.w(f"{conv_name}.bias") if conv_bias else out

    steps = [
        Step(rf"g=x W_y^{{\top}}+b_y{T.maps(d, channels)}", "gy", sub(part, y_name)),
        Step(rf"y={act}(g)\quad\text{{(the gate branch)}}", "y", sub(part, act_name, x="gy"), value="rglru_gate_branch", summary=True),
        Step(rf"u=x W_x^{{\top}}+b_x{T.maps(d, channels)}", "u", sub(part, x_name), summary=True),
        Step(rf"c_t=\textstyle\sum_{{k=0}}^{{{kernel - 1}}} w_{{k}}\odot u_{{t-{kernel - 1}+k}}{'+b' if conv_bias else ''}"
             rf"\quad\text{{(depthwise causal convolution over {T.num(kernel)} positions, }}u_{{<0}}=0\text{{)}}", "c", convolve,
             value="rglru_input", summary=True),
        Step(r"h=\operatorname{RG\text{-}LRU}(c)", "h", sub(part, lru_name, x="c"), value="rglru_state", summary=True),
        Step(r"z=h\odot y", "z", lambda e: e["h"] * e["y"], value="ssm_premix", summary=True),
        Step(rf"\Delta=z\,W_{{\mathrm{{out}}}}^{{\top}}+b_{{\mathrm{{out}}}}{T.maps(channels, d)}", "out", sub(part, out_name, x="z"),
             value="ssm_output", summary=True),
    ]
    part.note("branches", {"gate": y_name, "recurrence": x_name, "convolution": conv_name, "unit": lru_name, "output": out_name},
              "the block's children")
    return Chain(steps, [X], "out", output_element=0)
