"""Ministral (model_type ministral): Mistral's 8B edge model, a Mistral-shaped decoder whose blocks
alternate one full-attention block with three sliding-window blocks.

Each block is pre-norm: an RMSNorm, grouped-query attention with rotary positions, the residual add, a
second RMSNorm and a SwiGLU MLP, with no biases. config.layer_types says, block by block, whether the
attention sees every earlier position or only a window of them; the interleaving is what lets the model
keep a long context while most blocks cache a window. The head is a separate matrix.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Ministral",
    vendor="Mistral AI",
    released="2024-10",
    summary=(
        "A Mistral-shaped grouped-query decoder whose blocks interleave full attention with sliding-window "
        "attention, with a SwiGLU MLP and a separate head."
    ),
    tags=("Sliding/global pattern", "SwiGLU", "Dense"),
    checkpoint="mistralai/Ministral-8B-Instruct-2410",
    model_class="MinistralForCausalLM",
    config_class="MinistralConfig",
)
