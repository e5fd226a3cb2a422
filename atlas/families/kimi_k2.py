"""Kimi K2 (model_type kimi_k2): DeepSeek-V3's architecture under Moonshot AI's own model type.

Kimi K2's released config says kimi_k2, a type transformers' AutoConfig does not know; the weights
load into transformers' native DeepseekV3ForCausalLM through DeepseekV3Config. What differs from
DeepSeek-V3 is the sizing, not the code: more routed experts in one expert group, half as many
attention heads, a single dense first block, a larger vocabulary, and different rotary (YaRN)
settings. This module reuses deepseek_v3's declaration and changes only the checkpoint and the
words about it.
"""

from atlas.families.deepseek_v3 import FAMILY as DEEPSEEK_V3

FAMILY = DEEPSEEK_V3.but(
    title="Kimi K2",
    vendor="Moonshot AI",
    released="2025-07",
    summary=(
        "DeepSeek-V3's architecture at trillion-parameter scale: latent attention, then a wide mixture of routed "
        "experts plus a shared expert on every block after the first."
    ),
    tags=("Latent attention", "Shared expert", "Dense first blocks"),
    checkpoint="moonshotai/Kimi-K2-Instruct",
    # what loading a K2 checkpoint needs first, then DeepSeek-V3's notes (their numbers are this checkpoint's)
    notes=("kimi_k2", "deepseek_v3"),
)
