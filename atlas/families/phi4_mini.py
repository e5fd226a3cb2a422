"""Phi-4-mini (model_type phi3): the Phi-3 block with grouped-query attention, rotary positions on part of each head, and a tied head.

The block is Phi-3's: a pre-norm RMSNorm, attention whose queries, keys and values come out of one fused
matrix (qkv_proj, split by width), the residual add, a second RMSNorm and a SwiGLU MLP whose gate and up
projections are fused too (gate_up_proj, chunked in two). Three things differ from Phi-3-mini. Several
query heads share each key/value head, so the fused matrix is narrower than three times the width. Only
the leading share of each head's dimensions is rotated (partial_rotary_factor); the remaining ones carry
no position at all and pass through unchanged. And the vocabulary is several times larger, with the
output head tied to the token embedding so the large matrix is stored once. The rotary frequencies use
LongRoPE: a factor per frequency divides it, one list for short inputs and another, much larger, once
the input passes the original training length.
"""

from atlas.families.phi3 import FAMILY as PHI3


def preview(config):
    """LongRoPE gives one factor per rotated frequency pair, so the tiny head needs shorter lists: every
    list keeps its first and last factor and evenly spaced ones between (the rule, not the values, is
    what the preview shows)."""
    from atlas.model.tiny import TINY

    rope = dict(config.rope_parameters)
    head = TINY["hidden_size"] // TINY["num_attention_heads"]
    pairs = int(head * rope["partial_rotary_factor"]) // 2
    for key in ("short_factor", "long_factor"):
        factors = list(rope[key])
        rope[key] = [float(factors[round(i * (len(factors) - 1) / (pairs - 1))]) for i in range(pairs)]
    return {"rope_parameters": rope}


FAMILY = PHI3.but(
    title="Phi-4-mini",
    released="2025-02",
    summary=(
        "The fused-projection Phi decoder with grouped-query attention, rotary positions on part of each "
        "head, LongRoPE factors and a large vocabulary tied to the head."
    ),
    tags=("Fused QKV", "Fused gate/up", "Partial rotary", "LongRoPE", "SwiGLU", "Dense"),
    checkpoint="microsoft/Phi-4-mini-instruct",
    preview=preview,
)
