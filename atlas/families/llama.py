"""Llama 3.1 (model_type llama): the plain pre-norm decoder that most later families start from.

Each block normalises the residual stream with an RMSNorm, runs grouped-query attention (several query
heads share one key/value head, which shrinks the KV cache), adds the result back, then normalises
again and runs a gated SiLU MLP (SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x))). Positions enter
only through rotary embeddings on queries and keys; Llama 3.1 stretches the rotary frequencies with its
"llama3" scaling, which leaves high frequencies alone, divides low ones by the scaling factor and
blends the band in between, so the model reaches a longer context than it was first trained for.
No biases anywhere, and the output head is a separate matrix from the token embedding.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Llama 3.1",
    vendor="Meta",
    released="2024-07",
    summary=(
        "The reference pre-norm decoder: RMSNorm, grouped-query attention with llama3-scaled rotary "
        "positions, and a SwiGLU MLP in every block."
    ),
    tags=("SwiGLU", "RoPE scaling", "Dense"),
    checkpoint="meta-llama/Llama-3.1-8B",
    sizes=("meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-405B"),
    model_class="LlamaForCausalLM",
    config_class="LlamaConfig",
)
