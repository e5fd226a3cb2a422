"""What collect hands to check: a family's facts, plus the tensor lists they keep only in summary.

A module of its own so that ``atlas.facts.collect`` (which runs some checks while it collects) and
``atlas.check.claims`` (which takes what was collected) each import it and never each other both ways.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Collected:
    """A family's facts, plus what the checks need that the facts keep only in summary."""

    facts: dict[str, Any]
    layout: list = field(default_factory=list)  # every predicted stored tensor
    local_tensors: list | None = None  # every tensor read from --weights, if given
    pinned_layout: list | None = None  # the pinned checkpoint's predicted tensors, where layout is a local one's
    facts_text: str | None = None  # the facts as the cache wrote them, where it did (the pages' cache key reuses it)
