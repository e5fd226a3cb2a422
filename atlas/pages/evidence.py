"""Evidence: pinned excerpts, each with the claim it supports."""

from __future__ import annotations

from typing import Any

from atlas.pages.roles import role
from atlas.pages.words import lowercase_title, title_of


def excerpt(facts: dict[str, Any], cls: str, part: str) -> dict[str, Any] | None:
    ex = facts["excerpts"].get(cls, {}).get(part)
    if ex is None:
        return None
    return {k: ex[k] for k in ("path", "start", "end", "version", "sha256", "text", "qualname") if k in ex}


def evidence(facts: dict[str, Any], node: dict[str, Any], parent: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Direct evidence: the component's own code. Contextual: its parent's code that builds and calls it."""
    out = _cited(facts, node["class"], True, (
        ("forward", f"The forward pass of {node['class']}: the computation the equations above state."),
        ("__init__", f"The constructor of {node['class']}: the parameters it creates, counted below."),
    ))
    if parent is not None:
        attr = f"self.{parent['name']}[i]" if role(node) == "block" else f"self.{node['name']}"
        what = "each block" if role(node) == "block" else f"the {lowercase_title(title_of(node))}"
        out += _cited(facts, parent["class"], False, (
            ("__init__", f"{parent['class']} builds {what} as {attr} with these arguments."),
            ("forward", f"{parent['class']}'s forward calls {attr}: what goes in and where its output goes."),
        ))
    return out


def _cited(facts: dict[str, Any], cls: str, direct: bool, claims) -> list[dict[str, Any]]:
    """The excerpts of ``cls`` that exist, each with the claim it supports."""
    return [
        {"direct": direct, "claim": claim, "part": part, "class": cls, **ex}
        for part, claim in claims
        if (ex := excerpt(facts, cls, part))
    ]
