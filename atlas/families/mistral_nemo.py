"""Mistral NeMo (model_type mistral): a wide Mistral-architecture decoder with a large vocabulary and narrow heads.

The blocks are Mistral's pre-norm design: RMSNorm, grouped-query attention with rotary positions, the
residual add, RMSNorm and a SwiGLU MLP, with no biases and a separate output head. Two choices stand out in
the sizes. The heads are narrower than the hidden size divided by the heads (head_dim is given
explicitly), so the attention's inner width is smaller than the residual stream. And the vocabulary is
large, so the embedding and the head hold a large share of the parameters. Unlike Mistral 7B no sliding
window is set: every block attends over the whole prefix, with a very large rotary base for long context.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Mistral NeMo",
    vendor="Mistral AI and NVIDIA",
    released="2024-07",
    summary=(
        "Mistral's pre-norm block at a larger width, with heads narrower than the width over the heads, "
        "global attention with a large rotary base and a large vocabulary."
    ),
    tags=("SwiGLU", "Large vocabulary", "Dense"),
    checkpoint="mistralai/Mistral-Nemo-Base-2407",
    model_class="MistralForCausalLM",
    config_class="MistralConfig",
)
