"""OLMo (model_type olmo): AI2's first fully open decoder, a Llama block whose LayerNorms have no weights.

Each block is pre-norm: a LayerNorm without a gain or a bias (its epsilon fixed by the class, not the
config), multi-head attention with rotary positions and no biases, the residual add, a second such norm
and a SwiGLU MLP. The final norm is the same weightless LayerNorm, and the head is tied to the embedding
at this size.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="OLMo",
    vendor="Allen Institute for AI",
    released="2024-02",
    summary=(
        "A Llama-shaped decoder whose LayerNorms keep neither gain nor bias, with a SwiGLU MLP, rotary "
        "positions and a head tied to the embedding."
    ),
    tags=("LayerNorm", "SwiGLU", "Tied embeddings", "Dense"),
    checkpoint="allenai/OLMo-1B-hf",
    sizes=("allenai/OLMo-7B-hf",),
    model_class="OlmoForCausalLM",
    config_class="OlmoConfig",
)
