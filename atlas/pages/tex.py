"""TeX pieces every equation builder shares: numbers as TeX, activation functions."""

from __future__ import annotations

from typing import Any

from atlas.numbers import grouped


def tex_num(n: Any) -> str:
    """A number as TeX: integers grouped with thin commas, small floats kept as written."""
    if isinstance(n, bool):
        return str(n)
    if isinstance(n, int):
        return grouped(n).replace(",", "{,}")
    if isinstance(n, float):
        if n != 0 and abs(n) < 1e-3:
            mantissa, exponent = f"{n:.0e}".split("e")
            return (f"{mantissa} \\cdot " if mantissa != "1" else "") + f"10^{{{int(exponent)}}}"
        return f"{n:g}"
    return str(n)


def act_tex(act: str) -> tuple[str, str]:
    """(name, definition) of an activation function."""
    act = (act or "silu").lower()
    if act in ("silu", "swish"):
        return r"\operatorname{SiLU}", r"\operatorname{SiLU}(g)=g\,\sigma(g)=\frac{g}{1+e^{-g}}"
    if act in ("gelu_pytorch_tanh", "gelu_new", "gelu_fast", "gelu_tanh"):
        return r"\operatorname{GELU}", r"\operatorname{GELU}(g)\approx\tfrac12 g\big(1+\tanh\big(\sqrt{2/\pi}\,(g+0.044715\,g^3)\big)\big)"
    if act.startswith("gelu"):
        return r"\operatorname{GELU}", r"\operatorname{GELU}(g)=g\,\Phi(g)"
    return r"\operatorname{" + act + "}", r"\operatorname{" + act + r"}(g)"
