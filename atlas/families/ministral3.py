"""Ministral 3 (model_type ministral3): Mistral's edge decoder, the text model of a vision-language checkpoint, with YaRN and a query temperature for long contexts.

Every block is Mistral's: pre-norm with RMSNorms, grouped-query attention with rotary positions and no
biases, the residual add, and a SwiGLU MLP. The rotary frequencies carry a YaRN stretch of the trained
context, and past the original context the queries are multiplied by a temperature that grows with the
logarithm of the position (llama_4_scaling_beta), as Llama 4 does for its global blocks; no block keeps
a sliding window. The output head is a separate matrix. The checkpoint is a vision-language model: the
text model sits inside Mistral3ForConditionalGeneration beside a Pixtral vision tower and a projector,
which the page counts apart.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Ministral 3",
    vendor="Mistral AI",
    released="2025-12",
    summary=(
        "Mistral's grouped-query decoder with YaRN-stretched rotary positions and a position-dependent "
        "query temperature for long contexts, the text model of a vision-language checkpoint."
    ),
    tags=("YaRN", "SwiGLU", "Dense", "Multimodal wrapper"),
    checkpoint="mistralai/Ministral-3-8B-Base-2512",
    model_class="Ministral3ForCausalLM",
    config_class="Ministral3Config",
    config_section="text_config",
    wrapper_class="Mistral3ForConditionalGeneration",
)
