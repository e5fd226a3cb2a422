"""The vendor's own parameter counts beside the atlas's: checkpoint.json's ``published`` field.

A vendor states a count at its own precision ("7.27B", "1T", "0.36B"). The atlas writes its exact
count at that same precision, and the figure agrees when the exact count rounds to it. Where it does
not (a name cut down to the billion, a count that takes in a vision tower the text model leaves out),
checkpoint.json says why in ``published.differs``, and atlas.check.claims fails the build on a figure
that disagrees without a reason, or a reason given where every figure agrees.

    "published": {"total": "8.3B", "active": "1.5B", "says": "8.3B total, 1.5B active",
                  "source": "https://huggingface.co/LiquidAI/LFM2-8B-A1B"}
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from atlas.inputs.preflight import PUBLISHED_FIGURE as FIGURE, PUBLISHED_FIGURES as FIGURES
from atlas.numbers import grouped

UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def at_digits(exact: int, figure: str) -> str:
    """``exact`` written as ``figure`` is: in its unit, with as many decimals ("8,830,000,000" at "8B": "9B")."""
    whole, decimals, unit = _parts(figure)
    if not unit:
        return grouped(exact)
    places = len(decimals or "")
    value = (Decimal(exact) / UNITS[unit]).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return f"{value}{unit}"


def comparison(published: dict[str, Any], counts: dict[str, int]) -> dict[str, Any] | None:
    """The vendor's figures (checkpoint.json's ``published``, already checked in form by preflight) beside
    the atlas's exact ``counts`` ({"total": n, "active": n}): per figure, ours at its digits and whether
    they agree; None where checkpoint.json publishes none."""
    if not published:
        return None
    rows = []
    for what in FIGURES:
        if what in published:
            ours = at_digits(counts[what], published[what])
            rows.append({"what": what, "figure": published[what], "exact": counts[what], "ours": ours,
                         "agrees": ours == _canonical(published[what])})
    return {"figures": rows, "says": published["says"], "source": published["source"],
            "differs": published.get("differs")}


def _parts(figure: str) -> tuple[str, str | None, str]:
    match = FIGURE.fullmatch(figure)
    whole, decimals, unit = match.groups()[:3] if match[3] else (match[4].replace(",", ""), None, "")
    return whole, decimals, unit


def _canonical(figure: str) -> str:
    whole, decimals, unit = _parts(figure)
    if not unit:
        return grouped(int(whole))
    return f"{int(whole)}{'.' + decimals if decimals else ''}{unit}"
