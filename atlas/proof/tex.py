"""TeX pieces the step library shares: numbers at the checkpoint's sizes, streams (atlas.notation), shapes."""

from __future__ import annotations

from typing import Any

from atlas.notation import STREAMS, stream  # noqa: F401  (the steps write T.stream)
from atlas.numbers import grouped

def num(n: Any) -> str:
    """A number as TeX: integers grouped with thin commas, small floats in powers of ten."""
    if isinstance(n, bool):
        return str(n)
    if isinstance(n, int):
        return grouped(n).replace(",", "{,}")
    if isinstance(n, float):
        if n != 0 and abs(n) < 1e-3:
            mantissa, exponent = f"{n:.0e}".split("e")
            return (f"{mantissa} \\cdot " if mantissa != "1" else "") + f"10^{{{int(exponent)}}}"
        return f"{n:.4g}"
    return str(n)


def q(t: str) -> str:
    return stream("q", t)


def k(t: str) -> str:
    return stream("k", t)


def v(t: str) -> str:
    return stream("v", t)


def c(t: str) -> str:
    return stream("c", t)


def maps(n_in: int, n_out: Any) -> str:
    return rf"\quad {num(n_in)}\to{n_out if isinstance(n_out, str) else num(n_out)}"


def text(words: str) -> str:
    return r"\text{" + words + "}"


def times(*factors: Any) -> str:
    return r"\times".join(num(f) if not isinstance(f, str) else f for f in factors)
