"""How numbers are written on pages: one place, so every figure reads the same everywhere."""

from __future__ import annotations

import math


def grouped(n: int) -> str:
    """1174405120 -> '1,174,405,120'."""
    return f"{n:,}"


def product_calculation(factors: list[int] | tuple[int, ...]) -> str:
    """The calculation behind a tensor's element count: [163840, 7168] -> '163,840 × 7,168 = 1,174,405,120'."""
    total = math.prod(factors)
    if len(factors) == 1:
        return grouped(total)
    return " × ".join(grouped(f) for f in factors) + f" = {grouped(total)}"
