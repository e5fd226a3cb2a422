"""Helium (model_type helium): Kyutai's small multilingual decoder, a Llama block with full multi-head attention.

Each block is the pre-norm arrangement: an RMSNorm, attention with rotary positions, the residual add,
a second RMSNorm and a SwiGLU MLP, with no biases anywhere. This checkpoint gives every query head its
own key and value head (no grouping), so the KV cache is as wide as the queries. The RMSNorm epsilon
is unusually small, and the output head is a separate matrix. transformers builds the causal-LM
wrapper from Gemma's, but the model inside is Llama's: the embeddings are not scaled.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Helium",
    vendor="Kyutai",
    released="2025-01",
    summary=(
        "A small pre-norm decoder with full multi-head attention, rotary positions, a SwiGLU MLP and a "
        "separate output head."
    ),
    tags=("SwiGLU", "Dense"),
    checkpoint="kyutai/helium-1-preview-2b",
    model_class="HeliumForCausalLM",
    config_class="HeliumConfig",
)
