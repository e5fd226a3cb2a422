"""Mistral 7B (model_type mistral): Llama's block with sliding-window attention.

The block is Llama's: RMSNorm before grouped-query attention and before a SwiGLU MLP, rotary positions,
no biases, an untied output head. What differs is the attention mask: every layer lets a token see only
the last sliding_window positions rather than the whole prefix. Stacked layers still pass information
further back, one window per layer, while the attention cost and the cache a layer needs stop growing
with the context.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Mistral 7B",
    vendor="Mistral AI",
    released="2023-09",
    summary=(
        "Llama's pre-norm block with grouped-query attention restricted to a sliding window of recent "
        "positions in every layer."
    ),
    tags=("SwiGLU", "Dense"),
    checkpoint="mistralai/Mistral-7B-v0.1",
    model_class="MistralForCausalLM",
    config_class="MistralConfig",
)
