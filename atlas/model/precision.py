"""The preview run in float64 throughout, so that a proof can be held to float64's own error.

transformers computes its norms, softmaxes and rotary angles in float32 even inside a float64 model
(``hidden_states.to(torch.float32)``, ``softmax(..., dtype=torch.float32)``, ``inv_freq.float()``),
so a float64 model alone still rounds to float32 at those points, about 1e-7 of each value. Under
``float64_run`` every request for float32 is answered in float64 instead: a ``dtype=torch.float32``
argument, ``.float()``, ``.to(torch.float32)`` and ``.type(torch.float32)``; tensors made without a
dtype are float64 too. Narrower dtypes are left alone: a cast to bfloat16 or float16 is a rounding a
model means (RecurrentGemma holds its embedding scale as a bfloat16 number), and the run keeps it.

``as_float64`` turns a model built at float32 into the same model in float64: its parameters and
persistent buffers are copied (exactly: every float32 is a float64), and its non-persistent float
buffers (rotary frequencies, position tables) are those of a fresh build under ``float64_run``,
computed in float64 rather than widened from their float32 roundings.
"""

from __future__ import annotations

import contextlib
from typing import Any


_AS_WRITTEN: list[bool] = []  # not empty: within casts_as_written or at_float32 (and no float64_run since)


def _widen(value: Any) -> Any:
    import torch

    return torch.float64 if value is torch.float32 else value


def _mode_class():
    import torch
    from torch.overrides import TorchFunctionMode

    float_methods = {torch.Tensor.float}
    cast_methods = {torch.Tensor.to, torch.Tensor.type, torch.Tensor.new_empty, torch.Tensor.new_zeros,
                    torch.Tensor.new_ones, torch.Tensor.new_full, torch.Tensor.new_tensor}

    class Float64Mode(TorchFunctionMode):
        """Every float32 a torch call asks for, in float64."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if _AS_WRITTEN:
                return func(*args, **kwargs)
            if getattr(func, "__name__", None) in ("grouped_mm", "_grouped_mm") and args[0].dtype is torch.float64:
                return _grouped_mm(*args, **kwargs)
            if kwargs.get("dtype") is torch.float32:
                kwargs["dtype"] = torch.float64
            if func in float_methods:
                return args[0].double(**kwargs)
            if func in cast_methods and args:
                args = tuple(_widen(a) for a in args)
            return func(*args, **kwargs)

    return Float64Mode


def _grouped_mm(rows, weights, offs=None, bias=None, out_dtype=None):
    """torch's grouped matrix product, which has no float64 kernel, for the one form transformers' experts
    use: rows sorted by expert (S, in), one matrix per expert (E, in, out), ``offs`` where each expert's
    rows end. Each expert's rows times its own matrix, in float64."""
    import torch

    if rows.dim() != 2 or weights.dim() != 3 or offs is None or bias is not None:
        raise NotImplementedError("a grouped matrix product of another form than (S, in) x (E, in, out) by offsets")
    out = rows.new_zeros((rows.shape[0], weights.shape[2]))  # (S, out)
    start = 0
    for expert, end in enumerate(offs.tolist()):
        out[start:end] = rows[start:end] @ weights[expert]
        start = end
    return out if out_dtype is None else out.to(out_dtype)


@contextlib.contextmanager
def float64_run():
    """Within: float32 is float64 (see the module's docstring)."""
    import torch

    before, written = torch.get_default_dtype(), list(_AS_WRITTEN)
    torch.set_default_dtype(torch.float64)
    _AS_WRITTEN.clear()  # widened within, even inside casts_as_written or at_float32
    try:
        with _mode_class()():
            yield
    finally:
        _AS_WRITTEN[:] = written
        torch.set_default_dtype(before)


@contextlib.contextmanager
def casts_as_written():
    """Within ``float64_run``: the model's own casts as it writes them (a state it holds in float32 is
    float32), tensors made without a dtype still float64. A note that states a dtype the real model
    keeps measures it so (``with atlas.casts_as_written(): ...``)."""
    _AS_WRITTEN.append(True)
    try:
        yield
    finally:
        _AS_WRITTEN.pop()


@contextlib.contextmanager
def at_float32():
    """float32 as written, wherever this is entered (inside ``float64_run`` too): the preview's seeded weights
    are drawn so, the same numbers whoever asks for them."""
    import torch

    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        with casts_as_written():
            yield
    finally:
        torch.set_default_dtype(before)


def as_float64(model, build):
    """``model`` (float32) as a float64 model; ``build()`` makes a fresh one of the same class and config.

    Each tensor the class computes the same at every build (rotary frequencies, a sinusoid table, fixed
    decay rates, Mamba's A_log) is taken from a fresh build in float64, computed in float64 rather than
    widened from its float32 rounding: it is known by being equal in ``model`` and in a fresh float32
    build. Every other tensor (the seeded weights, and what the preview moved after the build) is the
    model's, widened exactly. Integer and narrow tensors (a token-id table, a bfloat16 scale) stay as
    they are. The fresh builds draw no random numbers from the caller's stream (torch's generator is
    forked), so what runs after sees the same numbers as before."""
    import torch

    def tensors(m):
        return {**dict(m.named_parameters()), **dict(m.named_buffers())}

    with torch.random.fork_rng(devices=[]), at_float32():
        plain = tensors(build())
    with torch.random.fork_rng(devices=[]), float64_run():
        wide = build()
    own = tensors(model)
    with torch.no_grad():
        for name, tensor in tensors(wide).items():
            kept = own[name]
            if not kept.is_floating_point() or kept.dtype not in (torch.float32, torch.float64):
                tensor.data = kept.detach().clone()
            elif not torch.equal(kept, plain[name]):
                tensor.copy_(kept)
    return wide.eval()
