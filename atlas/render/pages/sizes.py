"""The config values the pages need, read the same way for every family."""

from __future__ import annotations

from typing import Any


class Sizes:
    """The config values the words and shapes need, read from the released config (or its text_config)."""

    def __init__(self, facts: dict[str, Any]):
        self.raw = facts["config"]["raw"]
        self.std = facts["config"]["standardized"]
        self.sizes = facts["support"]["sizes"]  # the layouts' sizes: num_experts, top_k ...
        # a learned position table the model reads (GPT-2's): positions enter the stream before block 0
        self.learned_positions = any(v["name"] == "position_embeddings" and v["read"] for h in facts["support"]["hosts"] for v in h["values"])

    def get(self, key: str, default: Any = None) -> Any:
        if key in self.std and self.std[key] is not None:
            return self.std[key]
        if key in self.raw:
            return self.raw[key]
        text = self.raw.get("text_config")
        if isinstance(text, dict) and key in text:
            return text[key]
        return default

    def first(self, *keys: str, default: Any = None) -> Any:
        for key in keys:
            value = self.get(key)
            if value is not None:
                return value
        return default


def routing(s: Sizes, router: dict[str, Any] | None) -> dict[str, Any]:
    """How tokens are sent to experts, as the router's proof found it: n routed experts, k per token,
    its rule, the scale, whether a stored bias steers the choice, its groups. Without a router node
    (an experts module's page), the counts come from the checkpoint's sizes."""
    from atlas.render.pages.roles import fact

    if router is None:
        return {"n": s.sizes.get("num_experts"), "k": s.sizes.get("top_k"), "rule": None, "scale": None, "bias": False, "groups": None}
    return {
        "n": fact(router, "count"),
        "k": fact(router, "top_k"),
        "rule": fact(router, "routing"),
        "scale": fact(router, "scaling"),
        "bias": bool(fact(router, "selection_bias")),
        "groups": fact(router, "groups"),
    }
