"""The config values the pages need, read the same way for every family."""

from __future__ import annotations

from typing import Any


class Sizes:
    """The config values equations need, read from the released config (or its text_config)."""

    def __init__(self, facts: dict[str, Any]):
        self.raw = facts["config"]["raw"]
        self.std = facts["config"]["standardized"]
        self.attention = facts["attention"]
        self.attention_type: str | None = None  # of the block kind whose pages are being built
        self.act = self.first("hidden_act", "hidden_activation", "activation_function", default="silu")

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
    """How tokens are sent to experts: n routed experts, k per token, the scale, the scoring function,
    whether a stored bias steers the choice (seen on ``router``'s tensors) and whether the kept weights
    are renormalized."""
    n = s.first("n_routed_experts", "num_local_experts", "num_experts")
    k = s.first("num_experts_per_tok", "top_k")
    scale = s.get("routed_scaling_factor")
    scoring = s.get("scoring_func", "softmax")
    bias = bool(router and any(t["name"] == "e_score_correction_bias" for t in router["tensors"]))
    normalize = s.get("norm_topk_prob", True)
    return {"n": n, "k": k, "scale": scale, "scoring": scoring, "bias": bias, "normalize": normalize}
