"""SmolLM3 (model_type smollm3): a small Llama-style decoder in which every fourth block drops positions.

The blocks are pre-norm (RMSNorm), with grouped-query attention and a SwiGLU MLP, no biases, and a head
tied to the embedding. What is unusual is where positions enter: most blocks rotate their queries and
keys (RoPE), but a fixed pattern of blocks, listed per layer in config.json's no_rope_layers, receives the
same rotary angles and does not use them. In those blocks ("NoPE") a query scores a key by content alone,
so two identical tokens at different distances get the same score; the model has to infer order from
what the earlier blocks wrote into the residual stream. The mix is meant to help the model carry
attention over long contexts.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="SmolLM3",
    vendor="Hugging Face",
    released="2025-07",
    summary=(
        "A small pre-norm decoder with grouped-query attention and a SwiGLU MLP, in which a regular "
        "pattern of blocks skips rotary positions altogether (NoPE)."
    ),
    tags=("NoPE blocks", "Tied embeddings", "Dense"),
    checkpoint="HuggingFaceTB/SmolLM3-3B",
    model_class="SmolLM3ForCausalLM",
    config_class="SmolLM3Config",
)
