"""Qwen2.5 (model_type qwen2): a Llama-shaped decoder that keeps biases on the query, key and value projections.

Each block is pre-norm: an RMSNorm, grouped-query attention with rotary positions, the residual add,
then another RMSNorm and a SwiGLU MLP. What sets the family apart from Llama is small but visible in
the weights: the q, k and v projections carry a bias each (the output projection does not), which shifts
every query and key by a learned vector before the rotation. Only a few key/value heads serve all the
query heads, so the KV cache is a fraction of the multi-head size. The rotary base is large, for long
context, and the head is a matrix of its own.
"""

from atlas.inputs.family import Family

FAMILY = Family(
    title="Qwen2.5",
    vendor="Alibaba Qwen",
    released="2024-09",
    summary=(
        "A pre-norm decoder with grouped-query attention whose query, key and value projections keep "
        "their biases, rotary positions with a large base and a SwiGLU MLP."
    ),
    tags=("QKV bias", "SwiGLU", "Dense"),
    checkpoint="Qwen/Qwen2.5-7B",
    model_class="Qwen2ForCausalLM",
    config_class="Qwen2Config",
)
