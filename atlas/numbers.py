"""How numbers are written on pages: one place, so every figure reads the same everywhere."""

from __future__ import annotations

import math
import re

# What a missing value turns into on its way to a page (Python's None, JSON's null, JavaScript's undefined
# and NaN): no page may say them as words (atlas.check.visible_text), nor the notes' prose (atlas.inputs.notes)
UNSAID_WORDS = ("None", "undefined", "NaN", "null")
UNSAID = re.compile(r"\b(" + "|".join(UNSAID_WORDS) + r")\b")


def grouped(n: int) -> str:
    """1174405120 -> '1,174,405,120'."""
    return f"{n:,}"


def product_calculation(factors: list[int] | tuple[int, ...]) -> str:
    """The calculation behind a tensor's element count: [163840, 7168] -> '163,840 × 7,168 = 1,174,405,120'."""
    total = math.prod(factors)
    if len(factors) == 1:
        return grouped(total)
    return " × ".join(grouped(f) for f in factors) + f" = {grouped(total)}"


BINARY_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB")


def binary_size(n: int) -> str:
    """A byte count in the largest binary unit it reaches, two decimals: 2498560 -> '2.38 MiB';
    '' under 1 KiB, where the count in bytes says it all. static/cost.js writes the same."""
    if n < 1024:
        return ""
    value, unit = n / 1024, 0
    while value >= 1024 and unit < len(BINARY_UNITS) - 1:
        value, unit = value / 1024, unit + 1
    hundredths = math.floor(value * 100 + 0.5)  # halves up, in integers: the same digits JavaScript writes
    return f"{hundredths // 100}.{hundredths % 100:02d} {BINARY_UNITS[unit]}"


DECIMAL_UNITS = ("", "k", "M", "G", "T", "P", "E")


def flops_scaled(n: int) -> str:
    """A FLOP count in the largest decimal unit it reaches, two decimals: 73617920000 -> '73.62 GFLOPs',
    4264470904832 -> '4.26 TFLOPs'. static/cost.js writes the same."""
    unit = 0
    while n >= 1000 ** (unit + 1) and unit < len(DECIMAL_UNITS) - 1:
        unit += 1
    if unit == 0:
        return f"{n} FLOPs"
    hundredths = (n * 100 * 2 + 1000 ** unit) // (2 * 1000 ** unit)  # halves up, in integers
    if hundredths >= 100_000 and unit < len(DECIMAL_UNITS) - 1:  # 999,995 rounds to 1.00 M, not 1000.00 k
        unit += 1
        hundredths = (n * 100 * 2 + 1000 ** unit) // (2 * 1000 ** unit)
    return f"{hundredths // 100}.{hundredths % 100:02d} {DECIMAL_UNITS[unit]}FLOPs"


COUNT_UNITS = ((10 ** 12, "T"), (10 ** 9, "B"), (10 ** 6, "M"), (10 ** 3, "K"))


def short_count(n: int) -> str:
    """A count to three significant digits in the largest decimal unit it reaches, as parameter counts are
    quoted: 1026408232448 -> '1.03 T', 32861500928 -> '32.9 B'; under 1,000 the count itself."""
    for size, unit in COUNT_UNITS:
        if n >= size:
            value = n / size
            digits = 2 if value < 10 else 1 if value < 100 else 0
            text = f"{value:.{digits}f}"
            if float(text) >= 1000 and unit != "T":  # 999.96 B rounds up to the next unit
                return short_count(size * 1000)
            return f"{text} {unit}"
    return grouped(n)


def index_spans(indices: list[int], dash: str = "–") -> str:
    """Sorted indices as runs: [1, 2, 3, 7] -> '1–3, 7'. print(model) writes its runs with a hyphen ('0-2')."""
    spans, start = [], indices[0]
    for prev, cur in zip(indices, indices[1:] + [None]):
        if cur != prev + 1:
            spans.append(f"{start}" if start == prev else f"{start}{dash}{prev}")
            start = cur
    return ", ".join(spans)


def ordinal(n: int) -> str:
    """2 -> '2nd', 6 -> '6th', 11 -> '11th', 21 -> '21st'."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix}"
